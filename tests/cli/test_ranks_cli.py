"""``mrcstats ranks`` end to end through the console entry point: one JSON object, one-line errors (exit 2)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from mrcstats.cli import main


def _run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture()
def log_path(tmp_path):
    from mrcstats.io import write_log

    rng = np.random.default_rng(7)
    rows = []
    for m, skill in (("alpha", 0.85), ("beta", 0.6), ("gamma", 0.55), ("delta", 0.3)):
        for c in range(40):
            for i in range(3):
                rows.append({"model": m, "item": f"p{c}#{i}", "cluster": f"p{c}", "condition": "base",
                             "correct": bool(rng.random() < skill)})
    p = tmp_path / "log.parquet"
    write_log(pd.DataFrame(rows), p)
    return p


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
    (["--seed", "-1"], "seed must be"),
    (["--cluster", "nope"], "nope"),
    (["--models", "alpha"], "at least two"),
    (["--top", "9"], "top-k"),
    (["--condition", "other"], "matches no row"),
])
def test_ranks_bad_input_exit_2(capsys, log_path, argv, msg) -> None:
    code, out, err = _run(capsys, "ranks", str(log_path), *argv, "--json")
    assert code == 2 and out == ""
    assert msg in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_ranks_missing_file(capsys, tmp_path) -> None:
    code, out, err = _run(capsys, "ranks", str(tmp_path / "none.csv"))
    assert code == 2 and out == "" and "Traceback" not in err
