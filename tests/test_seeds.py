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
