"""The leaderboard generator: deterministic given the seed whatever the chunk size; truth recovered."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from mrcstats.io.dataset import open_dataset
from mrcstats.tasks.leaderboard import leaderboard_log


def test_deterministic_and_chunk_independent(tmp_path):
    a = leaderboard_log(tmp_path / "a", models=7, items=60, trials=2, seed=3, chunk_rows=100)
    b = leaderboard_log(tmp_path / "b", models=7, items=60, trials=2, seed=3, chunk_rows=10_000)
    assert a.rows == 7 * 60 * 2 and a.clusters == 15 and a.files >= 7
    la = open_dataset(a.path).to_log().sort_values(["model", "item", "trial"]).reset_index(drop=True)
    lb = open_dataset(b.path).to_log().sort_values(["model", "item", "trial"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(la, lb)
    assert la["cluster"].iloc[0] == "c0000" and la["correct"].isna().any()
    c = leaderboard_log(tmp_path / "c", models=7, items=60, trials=2, seed=4)
    lc = open_dataset(c.path).to_log().sort_values(["model", "item", "trial"]).reset_index(drop=True)
    assert not la["correct"].equals(lc["correct"])


def test_truth_stored_and_visible(tmp_path):
    r = leaderboard_log(tmp_path / "d", models=40, items=400, seed=0, invalid_rate=0.0)
    meta = json.loads((r.path / "_mrcstats.json").read_text())
    ab = pd.Series(meta["truth"]["ability"])
    acc = open_dataset(r.path).sql("SELECT model, avg(correct::INT) AS a FROM log GROUP BY model")
    acc = acc.set_index("model")["a"].reindex(ab.index)
    assert np.corrcoef(ab.to_numpy(), acc.to_numpy())[0, 1] > 0.9   # abler models score higher


def test_cli_demo_leaderboard_and_report_demo_args(tmp_path, capsys):
    from mrcstats.cli import main

    assert main(["demo", "--models", "3", "--items", "20", "--out", str(tmp_path / "lb"), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["rows"] == 60 and "ability" not in got["truth"]
    assert main(["demo", "--models", "3"]) == 2
    assert "--items N --out DIR" in capsys.readouterr().err
