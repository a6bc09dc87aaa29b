"""``mrcstats irt / subset / subset-eval`` end to end through the console entry point."""
from __future__ import annotations

import json

import pytest

from mrcstats.cli import main


def _run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture()
def log_path(tmp_path, two_pl_log):
    from mrcstats.io import write_log

    log = two_pl_log(2, 12, 60, slope_sd=None, item_fmt="q{}", model_fmt="m{}")
    p = tmp_path / "log.parquet"
    write_log(log, p)
    return p


def test_irt_json(capsys, log_path):
    code, out, _ = _run(capsys, "irt", str(log_path), "--json")
    assert code == 0
    d = json.loads(out)
    assert d["model"] == "2pl" and set(d["lrt_1pl_vs_2pl"]) == {"chisq", "df", "p"}
    assert {"item", "a", "b", "se_a", "se_b", "p", "pd"} <= set(d["items"][0])
    code, out, _ = _run(capsys, "irt", str(log_path), "--model", "1pl", "--json")
    assert code == 0 and json.loads(out)["lrt_1pl_vs_2pl"] is None


def test_subset_json(capsys, log_path):
    code, out, _ = _run(capsys, "subset", str(log_path), "--k", "10", "--method", "anchor", "--seed", "1", "--json")
    assert code == 0
    d = json.loads(out)
    assert d["method"] == "anchor" and d["k"] == 10 and len(d["items"]) == 10 and len(d["weights"]) == 10


def test_subset_eval_json(capsys, log_path):
    code, out, _ = _run(capsys, "subset-eval", str(log_path), "--ks", "5,20", "--folds", "3", "--seeds", "1",
                        "--methods", "random,pd", "--json")
    assert code == 0
    d = json.loads(out)
    assert d["folds"] == 3 and {r["method"] for r in d["results"]} == {"random", "pd"}


def test_errors_exit_2(capsys, log_path, tmp_path):
    code, out, err = _run(capsys, "subset", str(log_path), "--k", "1000", "--json")
    assert code == 2 and out == "" and "larger than" in err and "Traceback" not in err
    from mrcstats.io import read_log, write_log

    log = read_log(log_path)
    small = tmp_path / "two.parquet"
    write_log(log[log["model"].isin(["m0", "m1"])], small)
    code, out, err = _run(capsys, "irt", str(small))
    assert code == 2 and "at least 3" in err
