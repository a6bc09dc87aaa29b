"""Out-of-core GLMMs: the collapse pass (memory / DuckDB / Dask) gives the row-level native fit."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import mrcstats
from mrcstats.errors import InputError
from mrcstats.io.dataset import open_dataset
from mrcstats.io.ingest import write_dataset
from mrcstats.models.outofcore import glmer_outofcore
from mrcstats.tasks.leaderboard import leaderboard_log
from mrcstats.tasks.simulate import simulate_log

from ._fits import same_fit

CROSSED = "correct ~ 1 + (1 | item) + (1 | model)"


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    """50 models x 400 items x 10 trials = 200,000 rows (invalid answers included)."""
    r = leaderboard_log(tmp_path_factory.mktemp("lb") / "ds", models=50, items=400, trials=10, seed=5,
                        items_per_cluster=8, chunk_rows=60_000)
    return open_dataset(r.path)


def test_single_factor_collapse_equals_rows(tmp_path):
    log = simulate_log(0, n_passages=10, questions_per_passage=2, masking_rates=(0, 50)).log
    f = "correct ~ scaled_tok * model + (1 | cluster)"
    rows = mrcstats.glmer(f, log, invalid="exclude")     # the pass leaves invalid answers out
    mem = glmer_outofcore(f, log, backend="memory")
    same_fit(rows, mem, 1e-6)
    assert mem.optinfo["collapse"]["cells"] == 30 and "30 cells (one per distinct scaled_tok, model, cluster)" in mem.messages[0]
    assert mem.optinfo["collapse"]["dropped"]["response"] == int(log["correct"].isna().sum())
    log.to_parquet(tmp_path / "s.parquet")
    ds = write_dataset(tmp_path / "s.parquet", tmp_path / "ds")
    duck = mrcstats.glmer(f, ds, invalid="exclude")    # the hook: a dataset goes out of core
    same_fit(rows, duck, 1e-6)
    assert duck.engine == "native (duckdb collapse)"


def test_crossed_duckdb_equals_in_memory_glmer(board):
    rows = mrcstats.glmer(CROSSED, board.to_log(), invalid="exclude")
    duck = glmer_outofcore(CROSSED, board)
    same_fit(rows, duck, 1e-6)
    assert duck.optinfo["collapse"]["cells"] == 50 * 400


@pytest.fixture(scope="module")
def board1m(tmp_path_factory):
    """50 models x 20,000 items, one trial = 1,000,000 rows (1% invalid): the leaderboard shape."""
    r = leaderboard_log(tmp_path_factory.mktemp("lb1m") / "ds", models=50, items=20_000, seed=11,
                        chunk_rows=250_000)
    return open_dataset(r.path)


def test_dask_two_worker_cluster_equals_memory_on_1m_rows(board1m):
    """The issue's check: the Dask engine on a 2-worker LocalCluster gives the in-memory fit on 1M rows."""
    pytest.importorskip("distributed")
    from distributed import Client, LocalCluster

    log = board1m.to_log()
    assert len(log) == 1_000_000
    rows = mrcstats.glmer(CROSSED, log, invalid="exclude")  # the in-memory engine on the rows
    # in-process workers (processes=False): spawning worker processes costs seconds on a loaded machine
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cl, \
            Client(cl) as client:
        dk = glmer_outofcore(CROSSED, board1m, backend="dask", scheduler=client)
    same_fit(rows, dk, 1e-8)        # SEs: finite-difference Hessians (see same_fit)
    assert dk.engine == "native (dask grid)" and dk.optinfo["collapse"]["grid"] == [20_000, 50]
    assert dk.optinfo["collapse"]["dropped"]["response"] == int(log["correct"].isna().sum())
    duck = glmer_outofcore(CROSSED, board1m)              # and the DuckDB pass
    same_fit(rows, duck, 1e-8)


def test_bad_input(board):
    with pytest.raises(InputError, match="'nope'.*not in the data"):
        glmer_outofcore("correct ~ nope + (1 | item)", board)
    with pytest.raises(InputError, match="random slopes"):
        glmer_outofcore("correct ~ trial + (trial | item)", board)
    with pytest.raises(InputError, match="0/1 or true/false"):
        glmer_outofcore("y ~ 1 + (1 | g)", pd.DataFrame({"y": [0, 2, 1], "g": ["a", "b", "a"]}), backend="memory")
    with pytest.raises(InputError, match="backend"):
        glmer_outofcore(CROSSED, board, backend="spark")


def test_cli_glmer_on_dataset(board, capsys):
    import json

    from mrcstats.cli import main

    f = "correct ~ 1 + (1 | model)"
    assert main(["glmer", "--formula", f, str(board.path), "--json"]) == 2     # --invalid wrong: refused
    assert "--invalid exclude" in capsys.readouterr().err
    assert main(["glmer", "--formula", f, str(board.path), "--invalid", "exclude", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["engine"] == "native (duckdb collapse)" and got["nobs"] == board.sql(
        "SELECT count(correct) AS n FROM log")["n"].iloc[0]
    assert main(["glmer", "--formula", f, str(board.path), "--scheduler", "tcp://x:1"]) == 2
    assert "--scheduler goes with --engine dask" in capsys.readouterr().err


def test_unreadable_partition_mid_pass_names_the_dataset(tmp_path):
    """A file whose footer reads but whose data pages are damaged: one InputError, no traceback."""
    r = leaderboard_log(tmp_path / "ds", models=4, items=300, seed=2)
    ds = open_dataset(r.path)
    f = sorted(ds.files)[1]
    data = bytearray(Path(f).read_bytes())
    mid = len(data) // 3
    data[mid:mid + 64] = b"\xff" * 64
    Path(f).write_bytes(bytes(data))
    with pytest.raises(InputError, match="cannot read the dataset"):
        glmer_outofcore(CROSSED, ds)


def test_sparse_crossed_grid_takes_the_cell_table():
    """Issue 41: with fewer than GRID_MIN_FILL of the crossed grid's cells filled (the ELP's shape: every
    subject sees a few percent of the items) method="auto" fits the cell table and says why; method="grid"
    still fits the grid; both give the row-level fit."""
    import numpy as np

    from mrcstats.models import outofcore

    rng = np.random.default_rng(41)
    n_items, n_subj, per = 1_500, 30, 90             # 6% of the 45,000 cells
    subj = np.repeat(np.arange(n_subj), per)
    item = np.concatenate([rng.choice(n_items, per, replace=False) for _ in range(n_subj)])
    eta = 0.5 + rng.normal(0, 1.0, n_items)[item] + rng.normal(0, 0.6, n_subj)[subj]
    df = pd.DataFrame({"item": [f"i{i:04d}" for i in item], "model": [f"s{s:02d}" for s in subj],
                       "correct": (rng.random(len(item)) < 1 / (1 + np.exp(-eta))).astype(int)})
    n_items = df["item"].nunique()                    # the items some subject saw
    assert len(df) < outofcore.GRID_MIN_FILL * n_items * n_subj
    rows = mrcstats.glmer(CROSSED, df)
    auto = glmer_outofcore(CROSSED, df, backend="memory")
    assert auto.engine == "native (memory collapse)"
    want = f"{n_items:,} x 30 grid of item x model has {len(df) / (n_items * 30):.1%} of its cells filled"
    assert any(want in m for m in auto.messages)
    grid = glmer_outofcore(CROSSED, df, backend="memory", method="grid")
    assert grid.engine == "native (memory grid)"
    same_fit(rows, auto, 1e-6)
    same_fit(rows, grid, 1e-6)
