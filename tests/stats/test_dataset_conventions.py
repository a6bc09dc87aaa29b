"""summarize (every convention) and the masking curves on a log dataset equal the in-memory path.

The dataset path counts in DuckDB (per group x cluster, per group x trial) and finishes with the
same code as in memory (:func:`mrcstats.stats.accuracy.finish_summary`); these tests compare the two
on small generated logs, on Dask, through the CLI and over random logs (hypothesis).
"""
from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mrcstats.errors import InputError
from mrcstats.io.dataset import open_dataset
from mrcstats.io.ingest import DatasetWriter, write_dataset
from mrcstats.stats.accuracy import summarize
from mrcstats.stats.masking import masking_accuracy, masking_indicators
from mrcstats.tasks.simulate import simulate_log

from ._r_accuracy import r_per_model

CONVENTIONS = [(i, t) for i in ("wrong", "exclude") for t in ("pool", "mean")]
BYS = [["model"], ["condition", "masking_rate"], [], ["model", "trial"]]


@pytest.fixture(scope="module")
def sim():
    log = simulate_log(5, n_passages=4, questions_per_passage=2, masking_rates=(0, 40, 100), trials=3,
                       invalid_rate=0.25).log
    # rows without a masking rate (counted and reported by the masking curves)
    rng = np.random.default_rng(5)
    log["masking_rate"] = log["masking_rate"].mask(pd.Series((rng.random(len(log)) < 0.3)
                                                             & (log["masking_rate"] == 40)))
    return log


@pytest.fixture(scope="module")
def ds(sim, tmp_path_factory):
    d = tmp_path_factory.mktemp("conv")
    sim.to_parquet(d / "s.parquet")
    return write_dataset([d / "s.parquet"], d / "ds", chunk_rows=700)


def test_summarize_every_convention_equals_in_memory(sim, ds):
    loaded = ds.to_log()
    for invalid, trials in CONVENTIONS:
        for by in BYS:
            for cluster in ("cluster", "item"):
                a = summarize(sim, by=by, cluster=cluster, invalid=invalid, trials=trials)
                b = summarize(ds, by=by, cluster=cluster, invalid=invalid, trials=trials)
                c = summarize(loaded, by=by, cluster=cluster, invalid=invalid, trials=trials)
                assert (b.invalid, b.trials) == (invalid, trials)
                pd.testing.assert_frame_equal(a.to_frame(), b.to_frame(), rtol=1e-12, atol=0)
                pd.testing.assert_frame_equal(c.to_frame(), b.to_frame(), rtol=1e-12, atol=0)
                assert _close(a.to_dict(), b.to_dict())
    t = summarize(ds, by="model", invalid="exclude", trials="mean").to_frame()
    assert {"trials", "sd", "se_trials", "ci_method"} <= set(t.columns)
    assert t["se_cluster"].notna().all() and (t["trials"] == 3).all()


def test_trials_mean_by_hand(ds, sim):
    """accuracy = mean over trials of k_t / n_t (exclude: over valid rows), sd as R's sd."""
    got = summarize(ds, by="model", invalid="exclude", trials="mean").to_frame().set_index("model")
    for m, g in sim.groupby("model"):
        acc_t = [t["correct"].dropna().astype(float).mean() for _, t in g.groupby("trial")]
        assert got.loc[m, "accuracy"] == pytest.approx(np.mean(acc_t), rel=1e-12)
        assert got.loc[m, "sd"] == pytest.approx(np.std(acc_t, ddof=1), rel=1e-12)


def test_summarize_conventions_on_dask(sim, ds):
    pytest.importorskip("dask")
    for invalid, trials in (("exclude", "mean"), ("wrong", "mean"), ("exclude", "pool")):
        for by in (["model"], ["condition", "masking_rate"]):
            a = summarize(sim, by=by, invalid=invalid, trials=trials).to_frame()
            b = summarize(ds, by=by, invalid=invalid, trials=trials, backend="dask").to_frame()
            pd.testing.assert_frame_equal(a, b, rtol=1e-12, atol=0)
    a = summarize(sim, by=[], invalid="exclude", trials="mean").to_frame()
    b = summarize(sim, by=[], invalid="exclude", trials="mean", backend="dask").to_frame()   # a frame on Dask
    pd.testing.assert_frame_equal(a, b, rtol=1e-12, atol=0)


def test_masking_on_dataset_equals_in_memory(sim, ds):
    a, b = masking_accuracy(sim), masking_accuracy(ds)
    pd.testing.assert_frame_equal(a.table, b.table, rtol=1e-12, atol=0)
    pd.testing.assert_frame_equal(masking_accuracy(ds.to_log()).table, b.table, rtol=1e-12, atol=0)
    n_missing = int(sim["masking_rate"].isna().sum())
    assert n_missing > 0 and b.notes == a.notes and a.notes[0] == (
        f"{n_missing} row{'' if n_missing == 1 else 's'} without a masking_rate left out")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ia, ib = masking_indicators(sim, baseline=sim), masking_indicators(ds, baseline=ds)
    pd.testing.assert_frame_equal(ia.table, ib.table, rtol=1e-12, atol=0)
    pd.testing.assert_frame_equal(ia.averages, ib.averages, rtol=1e-12, atol=0)
    assert _close(ia.to_dict(), ib.to_dict())
    one = masking_accuracy(ds.filter(model="alpha-7b", condition="strict"))
    assert set(one.table["model"]) == {"alpha-7b"} and set(one.table["condition"]) == {"strict"}


def test_bad_input_names_the_column(sim, tmp_path):
    with DatasetWriter(tmp_path / "nomr") as w:
        w.write(sim[sim["masking_rate"] == 0].drop(columns=["masking_rate"]))
    ds = open_dataset(tmp_path / "nomr")
    assert "masking_rate" in ds.columns   # the canonical schema adds it, all null: no row has a masking rate
    for log in (ds, ds.to_log()):
        with pytest.raises(InputError, match="no rows with a masking_rate"):
            masking_accuracy(log)
    with pytest.raises(InputError, match="cannot group by 'nope': no such column"):
        summarize(ds, by="nope", trials="mean")
    with pytest.raises(InputError, match="cannot cluster by 'grp': no such column"):
        summarize(ds, by="model", cluster="grp", invalid="exclude")
    with pytest.raises(InputError, match="trials must be"):
        summarize(ds, trials="median")
    with pytest.raises(InputError, match="invalid must be"):
        summarize(ds, invalid="drop")


def test_cli_masking_and_summary_on_dataset(sim, ds, tmp_path, capsys):
    from mrcstats.cli import main

    src = tmp_path / "s.parquet"
    sim.to_parquet(src)
    assert main(["masking", str(ds.path), "--json"]) == 0
    out = capsys.readouterr()
    got = json.loads(out.out)
    assert "without a masking_rate" in out.err
    assert main(["masking", str(src), "--json"]) == 0
    want = json.loads(capsys.readouterr().out)
    assert got.keys() == want.keys()
    assert _close(got, want)
    assert main(["summary", str(ds.path), "--by", "model", "--trials", "mean", "--invalid", "exclude",
                 "--json"]) == 0
    groups = json.loads(capsys.readouterr().out)["groups"]
    want = summarize(sim, by="model", trials="mean", invalid="exclude").to_dict()["groups"]
    assert _close(groups, want) and "sd" in groups[0]
    assert main(["masking", str(tmp_path / "nope")]) == 2


def _close(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return (np.isnan(a) and np.isnan(b)) or a == pytest.approx(b, rel=1e-12)
    return a == b


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, 2**31 - 1), st.integers(1, 3), st.integers(1, 4), st.integers(1, 3), st.floats(0, 0.9))
def test_dataset_equals_memory_property(tmp_path_factory, seed, n_models, n_trials, n_rates, p_invalid):
    rng = np.random.default_rng(seed)
    rates = sorted(rng.choice([0.0, 5.0, 12.5, 50.0, 100.0], size=n_rates, replace=False))
    rows = []
    for m in range(n_models):
        for c in range(int(rng.integers(1, 4))):
            for q in range(int(rng.integers(1, 3))):
                for t in range(n_trials):
                    for r in rates:
                        for cond in ("regular", "strict")[:int(rng.integers(1, 3))]:
                            rows.append({"model": f"m{m}", "item": f"c{c}q{q}", "cluster": f"c{c}", "trial": t,
                                         "condition": cond, "masking_rate": r,
                                         "correct": pd.NA if rng.random() < p_invalid else bool(rng.random() < 0.6)})
    df = pd.DataFrame(rows).astype({"correct": "boolean"})
    d = tmp_path_factory.mktemp("p")
    with DatasetWriter(d / "ds") as w:
        w.write(df)
    ds = open_dataset(d / "ds")
    for invalid, trials in CONVENTIONS:
        for by in (["model"], ["model", "condition", "masking_rate"]):
            a = summarize(df, by=by, invalid=invalid, trials=trials).to_frame()
            b = summarize(ds, by=by, invalid=invalid, trials=trials).to_frame()
            pd.testing.assert_frame_equal(a, b, rtol=1e-12, atol=0)
    pd.testing.assert_frame_equal(masking_accuracy(df).table, masking_accuracy(ds).table, rtol=1e-12, atol=0)


@pytest.mark.r
def test_dataset_conventions_against_r(rscript, ds, tmp_path):
    """invalid="exclude", trials="mean" on the dataset against R: prop.test and sandwich::vcovCL over the valid
    rows, t.test over the per-trial accuracies."""
    log = ds.to_log()
    d = log[log["correct"].notna()].assign(y=lambda f: f["correct"].astype(int))
    want = r_per_model(rscript, d, tmp_path, trials=True)
    got = summarize(ds, by="model", invalid="exclude", trials="mean").to_frame().set_index("model")
    for m, (_lo, _hi, se, base, clo, chi, acc, sd, _tlo, _thi) in want.items():
        row = got.loc[m]
        assert row["ci_method"] == "clustered wilson"   # repeated trials of each item
        assert [row["ci_low"], row["ci_high"], row["accuracy"], row["sd"]] == \
            pytest.approx([clo, chi, acc, sd], rel=1e-10)
        assert row["se_cluster"] == pytest.approx(se, rel=1e-10) and row["se_cluster"] == pytest.approx(base, rel=1e-10)


def test_trial_summary_does_not_depend_on_the_order_of_the_counts():
    """DuckDB returns (group, trial) counts in any order: the per-trial means and SDs must be the same bits."""
    from mrcstats.stats.accuracy import trial_summary

    rng = np.random.default_rng(3)
    per = pd.DataFrame({"model": np.repeat(["a", "b", "c"], 7), "trial": np.tile(np.arange(7), 3),
                        "n": rng.integers(5, 50, 21)})
    per["k"] = rng.integers(0, 5, 21)
    per["inv"] = 0
    want = trial_summary(per, ["model"])
    for seed in range(5):
        got = trial_summary(per.sample(frac=1, random_state=seed), ["model"])
        pd.testing.assert_frame_equal(got, want, rtol=0, atol=0)
