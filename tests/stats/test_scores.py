"""Graded scores in the canonical log: the score column, thresholds, summary / compare / power on the mean
score (against R's sandwich::vcovCL), and the one refusal of the analyses that need a 0/1 outcome."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcstats.errors import InputError
from mrcstats.io.schema import apply_threshold, coerce_score, require_binary, resolve_outcome, validate_log
from mrcstats.stats.accuracy import summarize
from mrcstats.stats.compare import compare, per_item_scores
from mrcstats.stats.power import power

from ._r_accuracy import r_score_se


def _graded(seed: int = 0, n_items: int = 40, models=("a", "b", "c")) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for m, mu in zip(models, (0.3, 0.5, 0.7), strict=True):
        for i in range(n_items):
            s = float(np.clip(rng.normal(mu, 0.25), 0, 1).round(3))
            rows.append({"model": m, "item": f"q{i}", "cluster": f"p{i // 4}",
                         "score": None if rng.random() < 0.05 else s})
    return pd.DataFrame(rows)


def _binary(seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = [{"model": m, "item": f"q{i}", "cluster": f"p{i // 3}",
             "correct": None if rng.random() < 0.05 else bool(rng.random() < p)}
            for m, p in (("a", 0.4), ("b", 0.6)) for i in range(30)]
    return pd.DataFrame(rows)


def test_binary_log_gets_score_from_correct():
    log = validate_log(_binary())
    assert str(log["score"].dtype) == "Float64"
    c = log["correct"]
    assert (log["score"][c.notna()].to_numpy(dtype=float) == c[c.notna()].astype(float).to_numpy()).all()
    assert log["score"][c.isna()].isna().all()
    assert list(log.columns[:8]) == ["model", "item", "cluster", "trial", "condition", "masking_rate", "correct",
                                     "score"]
    assert resolve_outcome(log) == "correct"


def test_graded_log_leaves_correct_empty_and_threshold_fills_it():
    log = validate_log(_graded())
    assert log["correct"].isna().all()
    assert resolve_outcome(log) == "score"
    t = validate_log(_graded(), threshold=0.5)
    ok = t["score"].notna()
    assert (t["correct"][ok].to_numpy(dtype=bool) == (t["score"][ok].to_numpy(dtype=float) >= 0.5)).all()
    assert t["correct"][~ok].isna().all()
    assert apply_threshold(log, 0.5).attrs["threshold"] == 0.5
    with pytest.raises(InputError, match="threshold must be a finite number"):
        apply_threshold(log, float("nan"))


def test_score_only_01_is_binary():
    df = pd.DataFrame({"model": ["a", "a"], "item": ["1", "2"], "score": [1, 0]})
    log = validate_log(df)
    assert log["correct"].tolist() == [True, False]


def test_coerce_score_words_and_refusals():
    s = coerce_score(pd.Series(["0.5", "yes", "", "invalid", " 2 "]))
    assert s.tolist()[:2] == [0.5, 1.0] and s.isna().tolist()[2:4] == [True, True] and s.iloc[4] == 2.0
    with pytest.raises(InputError, match="row 2, column 'score'.*must be a number"):
        coerce_score(pd.Series(["0.5", "half"]))
    with pytest.raises(InputError, match="finite"):
        coerce_score(pd.Series([0.5, np.inf]))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.one_of(st.none(), st.floats(-1e6, 1e6, allow_nan=False)), min_size=1, max_size=30))
def test_coerce_score_keeps_numbers(vals):
    out = coerce_score(pd.Series(vals, dtype=object))
    assert str(out.dtype) == "Float64"
    for v, o in zip(vals, out.tolist(), strict=True):
        assert (v is None and o is pd.NA) or o == v
    text = coerce_score(pd.Series(["" if v is None else repr(v) for v in vals]))
    assert text.tolist() == out.tolist()


def test_summary_binary_unchanged_and_says_correct():
    log = validate_log(_binary())
    a = summarize(log)
    b = summarize(log, outcome="correct")
    pd.testing.assert_frame_equal(a.to_frame(), b.to_frame())
    assert a.outcome == "correct" and a.to_dict()["outcome"] == "correct"
    # the mean score of a binary log is its accuracy, with the same clustered SE
    s = summarize(log, outcome="score").to_frame()
    assert np.allclose(s["accuracy"], a.to_frame()["accuracy"], rtol=0, atol=1e-15)
    assert np.allclose(s["se_cluster"], a.to_frame()["se_cluster"], rtol=1e-12)


def test_summary_graded_mean_and_cluster_se():
    log = validate_log(_graded())
    res = summarize(log)
    assert res.outcome == "score" and "mean_score" in res.summary() and "outcome: score" in res.summary()
    t = res.to_frame().set_index("model")
    for m, sub in log.groupby("model"):
        x = sub["score"].to_numpy(dtype=float, na_value=0.0)
        assert t.loc[m, "accuracy"] == pytest.approx(x.mean(), rel=1e-14)
        xbar = x.mean()
        resid = pd.Series(x - xbar).groupby(sub["cluster"].to_numpy()).sum().to_numpy()
        g = len(resid)   # CR1: the small-sample factor G/(G-1)
        assert t.loc[m, "se_cluster"] == pytest.approx(np.sqrt(g / (g - 1) * (resid ** 2).sum()) / len(x), rel=1e-12)
        assert t.loc[m, "invalid"] == int(sub["score"].isna().sum())
    ex = summarize(log, invalid="exclude").to_frame().set_index("model")
    for m, sub in log.groupby("model"):
        assert ex.loc[m, "accuracy"] == pytest.approx(sub["score"].dropna().astype(float).mean(), rel=1e-14)
    tm = summarize(log, trials="mean").to_frame()
    assert np.allclose(tm["accuracy"], t["accuracy"].to_numpy())


@pytest.mark.r
def test_summary_graded_se_against_r(rscript, tmp_path):
    log = validate_log(_graded(3))
    d = pd.DataFrame({"model": log["model"].astype(str), "cluster": log["cluster"].astype(str),
                      "y": log["score"].to_numpy(dtype=float, na_value=0.0)})
    want = r_score_se(rscript, d, tmp_path)
    got = summarize(log).to_frame().set_index("model")
    for m, (mean, se) in want.items():
        assert got.loc[m, "accuracy"] == pytest.approx(mean, rel=1e-12)
        assert got.loc[m, "se_cluster"] == pytest.approx(se, rel=1e-10)


@pytest.mark.r
def test_compare_graded_se_against_r(rscript, tmp_path):
    log = validate_log(_graded(4))
    items = per_item_scores(log)
    assert items.attrs["outcome"] == "score"
    d = pd.DataFrame({"model": items["model"].astype(str), "cluster": items["cluster"].astype(str),
                      "y": items["score"].to_numpy(dtype=float)})
    want = r_score_se(rscript, d, tmp_path, cadjust=True)
    res = compare(log, cluster="cluster")
    got = res.models.set_index("model")
    for m, (mean, se) in want.items():
        assert got.loc[m, "accuracy"] == pytest.approx(mean, rel=1e-12)
        assert got.loc[m, "se_cluster"] == pytest.approx(se, rel=1e-10)


def test_compare_and_power_graded_say_outcome():
    log = validate_log(_graded())
    res = compare(log, cluster="cluster")
    assert res.outcome == "score" and res.to_dict()["outcome"] == "score"
    assert res.pairs["p_mcnemar"].isna().all()
    assert "mean score" in res.summary()
    pw = power(res, n_items=100)
    assert pw.outcome == "score" and pw.to_dict()["outcome"] == "score" and "outcome: score" in pw.summary()
    b = compare(validate_log(_binary()))
    assert b.outcome == "correct" and power(b, n_items=50).outcome == "correct"
    with pytest.raises(InputError, match="needs a binary outcome"):
        compare(log, outcome="correct")


def test_binary_analyses_refuse_graded_log_in_one_line():
    from mrcstats.models.fit import glmer
    from mrcstats.models.irt import response_matrix
    from mrcstats.stats.contingency import mcnemar
    from mrcstats.stats.discrimination import discrimination

    log = validate_log(_graded())
    calls = [lambda: mcnemar(log, models=("a", "b")), lambda: discrimination(log),
             lambda: response_matrix(log), lambda: glmer("correct ~ model + (1 | item)", log),
             lambda: require_binary(log, "masking")]
    for call in calls:
        with pytest.raises(InputError) as e:
            call()
        msg = str(e.value)
        assert "needs a binary outcome" in msg and "--threshold" in msg and "\n" not in msg
    # with a threshold they run
    t = validate_log(_graded(), threshold=0.5)
    assert mcnemar(t, models=("a", "b")) is not None


def test_dataset_folder_of_graded_log(tmp_path):
    """A dataset folder (mrcstats ingest --dataset) keeps the score; summary and compare use it."""
    from mrcstats.io.dataset import open_dataset
    from mrcstats.io.ingest import write_dataset

    src = tmp_path / "graded.csv"
    _graded().to_csv(src, index=False)
    write_dataset([src], tmp_path / "ds")
    ds = open_dataset(tmp_path / "ds")
    assert "score" in ds.columns
    mem = summarize(validate_log(_graded())).to_frame()
    got = summarize(ds)
    assert got.outcome == "score"
    assert np.allclose(got.to_frame()["accuracy"], mem["accuracy"], rtol=1e-14)
    assert np.allclose(got.to_frame()["se_cluster"], mem["se_cluster"], rtol=1e-12)
    assert compare(ds).outcome == "score"
    # a binary dataset keeps the SQL path and its numbers
    b = tmp_path / "binary.csv"
    _binary().to_csv(b, index=False)
    write_dataset([b], tmp_path / "ds2")
    pd.testing.assert_frame_equal(summarize(open_dataset(tmp_path / "ds2")).to_frame(),
                                  summarize(validate_log(_binary())).to_frame(), check_dtype=False)


def test_ingest_graded_reports_mean_score(tmp_path):
    from mrcstats.io import read_log
    from mrcstats.io.schema import log_stats

    src = tmp_path / "graded.csv"
    _graded().to_csv(src, index=False)
    st_ = log_stats(read_log(src))
    assert st_["outcome"] == "score" and set(st_["mean_score"]) == {"a", "b", "c"}
    t = log_stats(read_log(src, threshold=0.5))
    assert t["threshold"] == 0.5 and t["accuracy_threshold"]["c"] > t["accuracy_threshold"]["a"]
    assert t["accuracy"] == t["mean_score"] == st_["accuracy"]     # summary's number: the mean score
    assert "outcome" not in log_stats(read_log(_write(tmp_path, _binary())))


def _write(tmp_path, df):
    p = tmp_path / "b.csv"
    df.to_csv(p, index=False)
    return p
