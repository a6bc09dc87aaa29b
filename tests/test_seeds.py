"""The one seed validator (mrcstats._seeds): every command-line ``--seed`` (enumerated from the parsers) and
every Python entry point that makes a generator refuses a negative or non-integer seed with one message."""
from __future__ import annotations

import argparse

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrcstats._seeds import check_seed, parse_seed, rng, stream
from mrcstats.cli import build_parser, main
from mrcstats.errors import InputError


def _seed_options(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """``(command words, action)`` of every option named like a seed, in every (sub)command."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _seed_options(sub, (*path, name))
        elif any(o.lstrip("-") == "seed" for o in action.option_strings):
            yield path, action


SEED_OPTIONS = list(_seed_options(build_parser()))


def test_the_commands_with_a_seed_are_found():
    cmds = {p[0] for p, _ in SEED_OPTIONS}
    assert {"compare", "discrim", "screen", "subset", "dif", "fisher"} <= cmds, cmds


@pytest.mark.parametrize("path,action", SEED_OPTIONS, ids=[" ".join(p) for p, _ in SEED_OPTIONS])
@pytest.mark.parametrize("bad", ["-1", "1.5", "x", "-0.5"])
def test_every_seed_option_refuses_bad_seeds(path, action, bad, capsys):
    assert action.type is parse_seed, f"{' '.join(path)} {action.option_strings}: type must be _seeds.parse_seed"
    with pytest.raises(SystemExit) as exc:
        main([*path, action.option_strings[0], bad])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    errors = [ln for ln in err.splitlines() if "error:" in ln]
    assert len(errors) == 1 and "--seed" in errors[0] and ">= 0" in errors[0], err


@given(st.integers(0, 2**130))
def test_parse_seed_accepts_whole_numbers(n):
    assert parse_seed(str(n)) == n == check_seed(n)


@pytest.mark.parametrize("bad", [-1, 1.5, 2.0, "3", True, [1]])
def test_check_seed_refuses(bad):
    with pytest.raises(InputError, match=r"seed must be"):
        check_seed(bad)
    with pytest.raises(InputError):
        rng(bad)
    with pytest.raises(InputError):
        stream(bad, "label")


def test_rng_keeps_numpy_streams():
    assert rng(5).random() == np.random.default_rng(5).random()
    g = np.random.default_rng(1)
    assert rng(g) is g and check_seed(None) is None and check_seed(np.int64(3)) == 3


def test_api_entry_points_refuse_a_negative_seed():
    from mrcstats.stats.contingency import fisher
    from mrcstats.tasks.simulate import simulate_log

    with pytest.raises(InputError, match="seed must be >= 0"):
        fisher([[3, 1, 2], [1, 3, 2]], simulate=True, B=10, seed=-1)
    with pytest.raises(InputError, match="seed must be >= 0"):
        simulate_log(seed=-1)


def test_every_seed_option_defaults_to_a_fixed_seed():
    """A command run without ``--seed`` is reproducible: every ``--seed`` that seeds a generator of the package
    defaults to ``DEFAULT_SEED`` (``discrim``, ``compare``, ``ranks``, ``subset``, ``fisher`` and ``glmer``
    drew fresh entropy). ``query --seed`` is the sampling seed sent to the endpoint: none unless given."""
    from mrcstats._seeds import DEFAULT_SEED

    for path, action in SEED_OPTIONS:
        if path == ("query",):
            assert action.default is None
            continue
        assert action.default == DEFAULT_SEED and type(action.default) is int, (path, action.default)


@pytest.fixture(scope="module")
def seeded_inputs(tmp_path_factory):
    import pandas as pd

    d = tmp_path_factory.mktemp("seeded")
    g = np.random.default_rng(7)
    n_items, models = 40, ["a", "b", "c"]
    p = {"a": 0.8, "b": 0.6, "c": 0.4}
    rows = [{"model": m, "item": f"q{i}", "cluster": f"c{i % 8}", "correct": int(g.random() < p[m])}
            for m in models for i in range(n_items)]
    pd.DataFrame(rows).to_csv(d / "log.csv", index=False)
    (d / "tab.csv").write_text("g,x,y,z\nr1,3,1,2\nr2,1,3,2\nr3,2,2,4\n")
    return d


# the seeded commands whose default changed from fresh entropy to DEFAULT_SEED, each run twice without --seed
RUNS = {"discrim": ["discrim", "{d}/log.csv", "--bootstrap", "200"],
        "compare": ["compare", "{d}/log.csv", "--bootstrap", "200"],
        "ranks": ["ranks", "{d}/log.csv", "--draws", "200"],
        "subset": ["subset", "{d}/log.csv", "--k", "5"],
        "fisher": ["fisher", "{d}/tab.csv", "--simulate", "--B", "300"]}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_two_runs_without_a_seed_give_the_same_json(name, seeded_inputs, capsys):
    import json

    assert (name,) in {p for p, _ in SEED_OPTIONS}
    argv = [a.format(d=seeded_inputs) for a in RUNS[name]] + ["--json"]
    outs = []
    for _ in range(2):
        assert main(argv) == 0
        outs.append(json.loads(capsys.readouterr().out))
    assert outs[0] == outs[1]
    text = json.dumps(outs[0])
    assert '"seed": 0' in text, text[:300]
