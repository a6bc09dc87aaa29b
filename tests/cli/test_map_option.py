"""Issue 25: compare, irt, subset and subset-eval take the shared ``--map FIELD=COLUMN``; the old
``--model-col``/``--item-col`` are deprecated aliases of it (one warning on stderr)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from mrcstats.cli import main


@pytest.fixture(scope="module")
def alt_csv(tmp_path_factory, two_pl_log):
    """A log whose respondent and item columns have other names (``respondent``, ``question``)."""
    df = two_pl_log(3, 8, 40, slope_sd=None, item_fmt="q{:02d}", model_fmt="m{}")
    df = df.rename(columns={"model": "respondent", "item": "question"}).astype({"correct": int})
    df["subject"] = np.tile(["law", "physics"] * 20, 8)
    p = tmp_path_factory.mktemp("map") / "alt.csv"
    df.to_csv(p, index=False)
    return str(p)


MAP = ["--map", "model=respondent", "--map", "item=question"]


def _run(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("cmd", [["irt", "--no-lrt"], ["subset", "--k", "5", "--seed", "1"],
                                 ["subset-eval", "--ks", "5", "--methods", "random", "--folds", "2", "--seeds", "1"]])
def test_map_and_deprecated_aliases_agree(capsys, alt_csv, cmd):
    code, out_map, err = _run(capsys, [cmd[0], alt_csv, *cmd[1:], *MAP, "--json"])
    assert code == 0, err
    assert "deprecated" not in err
    code, out_old, err = _run(capsys, [cmd[0], alt_csv, *cmd[1:], "--model-col", "respondent",
                                       "--item-col", "question", "--json"])
    assert code == 0, err
    assert "--model-col is deprecated; use --map model=respondent" in err
    assert "--item-col is deprecated; use --map item=question" in err
    a, b = json.loads(out_map), json.loads(out_old)
    if cmd[0] == "subset":
        assert a["items"] == b["items"] and all(i.startswith("q") for i in a["items"])
    elif cmd[0] == "irt":
        assert [r["item"] for r in a["items"]] == [r["item"] for r in b["items"]]
        assert {r["model"] for r in a["abilities"]} == {f"m{j}" for j in range(8)}
    else:
        assert a["results"] == b["results"]


def test_alias_clashing_with_map_is_one_line(capsys, alt_csv):
    code, _, err = _run(capsys, ["subset", alt_csv, "--k", "3", "--map", "model=respondent", "--map",
                                   "item=question", "--item-col", "subject"])
    assert code == 2 and "name different columns" in err and "Traceback" not in err


def test_compare_takes_map(capsys, alt_csv):
    code, out, err = _run(capsys, ["compare", alt_csv, *MAP, "--models", "m0,m1", "--json"])
    assert code == 0, err
    d = json.loads(out)
    assert d["models"] and {r["model"] for r in d["models"]} == {"m0", "m1"}


def test_subset_stratify_from_the_cli(capsys, alt_csv):
    code, out, err = _run(capsys, ["subset", alt_csv, *MAP, "--k", "6", "--method", "irt-info", "--seed", "2",
                                   "--stratify", "subject", "--json"])
    assert code == 0, err
    d = json.loads(out)
    assert d["stratify"] == "subject"
    subj = {f"q{i:02d}": ("law", "physics")[i % 2] for i in range(40)}
    assert sorted(subj[i] for i in d["items"]) == ["law"] * 3 + ["physics"] * 3
