"""summarize(): accuracy, Wilson CI and cluster-robust SE, checked against R and statsmodels."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcstats.stats.accuracy import cluster_se, summarize, wilson_interval

from ._r_accuracy import r_per_model


def _log(seed=0, n_models=2, n_clusters=15):
    rng = np.random.default_rng(seed)
    rows = []
    for m in range(n_models):
        for c in range(n_clusters):
            eff = rng.normal(0, 1)
            for q in range(int(rng.integers(1, 6))):
                p = 1 / (1 + np.exp(-(0.3 + eff)))
                v = rng.random() < p
                corr = pd.NA if rng.random() < 0.08 else bool(v)
                rows.append({"model": f"m{m}", "item": f"c{c}q{q}", "cluster": f"c{c}", "correct": corr})
    df = pd.DataFrame(rows)
    df["correct"] = df["correct"].astype("boolean")
    return df


def test_basic_counts():
    df = pd.DataFrame({"model": ["a"] * 4 + ["b"] * 2, "item": list("wxyzwx"),
                       "correct": pd.array([True, False, None, True, True, None], dtype="boolean")})
    res = summarize(df).to_dict()["groups"]
    a, b = res
    assert set(a) == {"model", "n", "accuracy", "accuracy_valid", "invalid", "ci_low", "ci_high", "se_cluster"}
    assert a["n"] == 4 and a["accuracy"] == 0.5 and a["accuracy_valid"] == pytest.approx(2 / 3) and a["invalid"] == 1
    assert b["accuracy"] == 0.5 and b["accuracy_valid"] == 1.0
    # one row per cluster: plain binomial SE
    assert a["se_cluster"] == pytest.approx(np.sqrt(0.25 / 4))


def test_all_invalid_group_has_null_valid_accuracy():
    df = pd.DataFrame({"model": ["a", "a"], "item": ["x", "y"], "correct": pd.array([None, None], dtype="boolean")})
    g = summarize(df).to_dict()["groups"][0]
    assert g["accuracy"] == 0.0 and g["accuracy_valid"] is None and g["invalid"] == 2


def test_against_statsmodels():
    import statsmodels.api as sm

    df = _log(1)
    res = summarize(df, by=["model"]).to_frame().set_index("model")
    for m, sub in df.groupby("model"):
        y = sub["correct"].fillna(False).astype(float).to_numpy()
        fit = sm.OLS(y, np.ones((len(y), 1))).fit(
            cov_type="cluster", cov_kwds={"groups": pd.factorize(sub["cluster"])[0], "use_correction": False})
        assert res.loc[m, "se_cluster"] == pytest.approx(float(fit.bse[0]), rel=1e-10)


@pytest.mark.r
def test_against_r(rscript, tmp_path):
    df = _log(2)
    df["y"] = df["correct"].fillna(False).astype(int)
    want = r_per_model(rscript, df, tmp_path)
    got = summarize(df).to_frame().set_index("model")
    for m, (lo, hi, se) in want.items():
        assert got.loc[m, "ci_low"] == pytest.approx(lo, rel=1e-12)
        assert got.loc[m, "ci_high"] == pytest.approx(hi, rel=1e-12)
        assert got.loc[m, "se_cluster"] == pytest.approx(se, rel=1e-10)


def test_by_two_columns_and_overall():
    df = _log(3)
    df["condition"] = np.where(np.arange(len(df)) % 2 == 0, "x", "y")
    res = summarize(df, by=["model", "condition"])
    assert len(res.to_frame()) == 4
    tot = summarize(df, by=[])
    g = tot.to_dict()["groups"][0]
    assert g["n"] == len(df)
    assert "accuracy" in res.summary()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.booleans()), min_size=1, max_size=60))
def test_cluster_se_matches_definition(pairs):
    cl = np.array([p[0] for p in pairs])
    x = np.array([float(p[1]) for p in pairs])
    xbar = x.mean()
    want = np.sqrt(sum((x[cl == c] - xbar).sum() ** 2 for c in np.unique(cl))) / len(x)
    assert cluster_se(x, cl) == pytest.approx(want, abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 500), st.data())
def test_wilson_contains_p(n, data):
    k = data.draw(st.integers(0, n))
    lo, hi = wilson_interval(k, n)
    assert 0 <= lo <= k / n + 1e-12 and k / n - 1e-12 <= hi <= 1
