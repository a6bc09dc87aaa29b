"""``mrcstats compare`` / ``ranks`` / ``power`` end to end through the console entry point."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from mrcstats.cli import main


def _run(capsys, *argv):
    try:
        code = main(list(argv))
    except SystemExit as e:  # argparse's own errors (a --seed the one seed parser refuses)
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture()
def log_path(tmp_path):
    from mrcstats.io import write_log

    rng = np.random.default_rng(7)
    rows = []
    for m, skill in (("alpha", 0.8), ("beta", 0.55), ("gamma", 0.3)):
        for c in range(30):
            for i in range(3):
                for t in range(2 if m == "gamma" else 1):
                    rows.append({"model": m, "item": f"p{c}#{i}", "cluster": f"p{c}", "trial": t,
                                 "correct": bool(rng.random() < skill)})
    p = tmp_path / "log.parquet"
    write_log(pd.DataFrame(rows), p)
    return p


def test_compare_json(capsys, log_path) -> None:
    code, out, err = _run(capsys, "compare", str(log_path), "--cluster", "cluster", "--bootstrap", "50", "--seed",
                          "1", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert [m["model"] for m in d["models"]] == ["alpha", "beta", "gamma"]
    assert d["models"][0]["rank"] == 1 and d["cluster"] == "cluster" and d["adjust"] == "holm"
    assert len(d["pairs"]) == 3
    ab = d["pairs"][0]
    assert (ab["model_a"], ab["model_b"]) == ("alpha", "beta")
    assert ab["se_cluster"] is not None and ab["boot_ci_low"] is not None and ab["p_mcnemar"] is not None
    assert d["pairs"][1]["p_mcnemar"] is None  # gamma has two trials per item
    assert d["repeated"] is not None
    from mrcstats.io import read_log
    from mrcstats.stats.compare import compare

    ref = compare(read_log(str(log_path)), cluster="cluster", bootstrap=50, seed=1).to_dict()
    assert d["pairs"][0]["p_adjusted"] == ref["pairs"][0]["p_adjusted"]  # not rounded


def test_compare_text_and_models(capsys, log_path) -> None:
    code, out, err = _run(capsys, "compare", str(log_path), "--models", "gamma,alpha", "--adjust", "BH")
    assert code == 0, err
    assert "Models ranked by accuracy" in out and "Benjamini-Hochberg" in out
    assert "gamma    alpha" in out


@pytest.mark.parametrize("argv, msg", [
    (["--models", "alpha"], "at least two models"),
    (["--models", "alpha,zeta"], "unknown model 'zeta'"),
    (["--cluster", "passage"], "cannot cluster by 'passage': no such column"),
    (["--condition", "masked"], "matches no row"),
])
def test_compare_bad_input_exit_2(capsys, log_path, argv, msg) -> None:
    code, out, err = _run(capsys, "compare", str(log_path), *argv)
    assert code == 2 and out == ""
    assert msg in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_compare_no_common_items_exit_2(capsys, tmp_path) -> None:
    p = tmp_path / "x.csv"
    p.write_text("model,item,correct\na,1,1\na,2,0\nb,3,1\nb,4,1\n")
    code, _out, err = _run(capsys, "compare", str(p))
    assert code == 2 and "no items in common" in err


def test_compare_one_model_exit_2(capsys, tmp_path) -> None:
    p = tmp_path / "x.csv"
    p.write_text("model,item,correct\na,1,1\na,2,0\n")
    code, out, err = _run(capsys, "compare", str(p), "--json")
    assert code == 2 and out == "" and "at least two models" in err


def test_power_cli(capsys, log_path) -> None:
    code, out, err = _run(capsys, "power", "--sd-diff", "0.3333333333333333", "--effect", "0.03", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["results"][0]["n_required"] == 969
    code, out, err = _run(capsys, "power", str(log_path), "--cluster", "cluster", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert len(d["results"]) == 3 and all(r["mde"] > 0 for r in d["results"])
    code, out, err = _run(capsys, "power", "--sd-diff", "0.4")
    assert code == 2 and "--n-items" in err


# --------------------------------------------------------------------------- ranks

def test_ranks_json(capsys, log_path) -> None:
    code, out, err = _run(capsys, "ranks", str(log_path), "--cluster", "cluster", "--seed", "1", "--top", "2",
                          "--json")
    assert code == 0, err
    d = json.loads(out)          # exactly one JSON object on stdout
    assert d["models"][0]["model"] == "alpha"
    for m in d["models"]:
        assert {"model", "estimate", "rank", "marginal", "simultaneous", "tier"} <= set(m)
        assert m["simultaneous"][0] <= m["marginal"][0] <= m["rank"] <= m["marginal"][1] <= m["simultaneous"][1]
    assert d["method"] == "paired" and d["level"] == 0.95 and d["cluster"] == "cluster"
    assert d["top_k"]["k"] == 2 and set(d["top_set"]) <= set(d["top_k"]["models"])
    code, out2, _ = _run(capsys, "ranks", str(log_path), "--cluster", "cluster", "--seed", "1", "--top", "2",
                         "--json")
    assert out2 == out            # same seed, same sets


def test_ranks_text(capsys, log_path) -> None:
    code, out, err = _run(capsys, "ranks", str(log_path), "--method", "independent", "--level", "0.9",
                          "--draws", "500", "--seed", "2")
    assert code == 0, err
    assert "Rank confidence sets (90%" in out and "independent" in out and "tier 1:" in out


@pytest.mark.parametrize("argv,msg", [
    (["--level", "1.2"], "level must be between 0 and 1"),
    (["--draws", "5"], "draws"),
    (["--seed", "-1"], "--seed: must be >= 0"),
    (["--cluster", "nope"], "nope"),
    (["--models", "alpha"], "at least two"),
    (["--top", "9"], "top-k"),
    (["--condition", "other"], "matches no row"),
])
def test_ranks_bad_input_exit_2(capsys, log_path, argv, msg) -> None:
    code, out, err = _run(capsys, "ranks", str(log_path), *argv, "--json")
    assert code == 2 and out == ""
    # one error line (argparse's own errors print the usage line above it)
    assert msg in err and "Traceback" not in err and sum("error" in ln for ln in err.strip().splitlines()) == 1


def test_ranks_missing_file(capsys, tmp_path) -> None:
    code, out, err = _run(capsys, "ranks", str(tmp_path / "none.csv"))
    assert code == 2 and out == "" and "Traceback" not in err


def test_ranks_dataset_equals_memory(capsys, log_path, tmp_path) -> None:
    """A log dataset folder (DuckDB per-item scores) gives the same sets as the log in memory."""
    assert _run(capsys, "ingest", str(log_path), "--dataset", str(tmp_path / "ds"))[0] == 0
    outs = [_run(capsys, "ranks", src, "--cluster", "cluster", "--seed", "3", "--json")
            for src in (str(log_path), str(tmp_path / "ds"))]
    assert outs[0][0] == outs[1][0] == 0
    a, b = (json.loads(o[1]) for o in outs)
    assert [(m["model"], m["marginal"], m["simultaneous"]) for m in a["models"]] == \
        [(m["model"], m["marginal"], m["simultaneous"]) for m in b["models"]]
    assert [m["estimate"] for m in a["models"]] == pytest.approx([m["estimate"] for m in b["models"]], rel=1e-12)


def test_condition_on_a_dataset_as_on_the_file(capsys, tmp_path) -> None:
    """``--condition`` keeps one condition through the backends' ``keep_value`` on both kinds of log: the same
    numbers, the same note on the rows left out, the same error naming the conditions (the dataset path asked
    the dataset's SQL itself and left out the other conditions without saying so)."""
    from mrcstats.io import write_log
    from mrcstats.io.ingest import write_dataset

    rng = np.random.default_rng(3)
    rows = [{"model": m, "item": f"q{i}", "condition": cond, "correct": bool(rng.random() < p)}
            for m, p in (("a", 0.8), ("b", 0.5)) for cond in ("plain", "masked") for i in range(25)]
    write_log(pd.DataFrame(rows), tmp_path / "log.parquet")
    write_dataset(tmp_path / "log.parquet", tmp_path / "ds")
    got = []
    for path in (tmp_path / "log.parquet", tmp_path / "ds"):
        code, out, err = _run(capsys, "compare", str(path), "--condition", "masked", "--json")
        assert code == 0, err
        assert "keeps 50 of 100 rows; left out 50 rows of other conditions ('plain': 50)" in err, err
        d = json.loads(out)
        got.append(([m["accuracy"] for m in d["models"]], [p["p"] for p in d["pairs"]]))
        code, out, err = _run(capsys, "compare", str(path), "--condition", "other")
        assert code == 2 and "--condition 'other' matches no row; conditions: 'masked', 'plain'" in err, err
    assert got[0] == got[1]


def test_no_command_queries_a_dataset_s_sql():
    """A handler asks the backends (row passes, keep_value), never a LogDataset's SQL (a log-kind leak)."""
    from pathlib import Path

    for p in (Path(__file__).resolve().parents[2] / "src" / "mrcstats" / "cli").glob("*.py"):
        assert ".sql(" not in p.read_text(), p.name
