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
    assert set(a) == {"model", "n", "accuracy", "accuracy_valid", "invalid", "ci_low", "ci_high", "ci_method",
                      "ci_df", "se_cluster", "clusters", "n_shared", "accuracy_shared"}   # b lacks items y, z
    assert a["n"] == 4 and a["accuracy"] == 0.5 and a["accuracy_valid"] == pytest.approx(2 / 3) and a["invalid"] == 1
    assert b["accuracy"] == 0.5 and b["accuracy_valid"] == 1.0
    # one row per cluster: the CR1 SE is the binomial SE with n - 1, and the interval is Wilson's
    assert a["se_cluster"] == pytest.approx(np.sqrt(0.25 / 3))
    assert a["ci_method"] == "wilson" and summarize(df).ci_method == "wilson"


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
            cov_type="cluster", cov_kwds={"groups": pd.factorize(sub["cluster"])[0]})  # CR1: G/(G-1)
        assert res.loc[m, "se_cluster"] == pytest.approx(float(fit.bse[0]), rel=1e-10)


@pytest.mark.r
def test_against_r(rscript, tmp_path):
    df = _log(2)
    df["y"] = df["correct"].fillna(False).astype(int)
    want = r_per_model(rscript, df, tmp_path)
    res = summarize(df)
    got = res.to_frame().set_index("model")
    assert res.ci_method == "clustered wilson" and set(got["ci_method"]) == {"clustered wilson"}  # passages
    one = summarize(df.drop_duplicates(["model", "cluster"]).assign(cluster=lambda d: d["item"])).to_frame().set_index("model")
    want1 = r_per_model(rscript, df.drop_duplicates(["model", "cluster"]), tmp_path)
    for m, (lo, hi, se, base, clo, chi) in want.items():
        assert got.loc[m, "se_cluster"] == pytest.approx(se, rel=1e-10)      # sandwich::vcovCL HC1, cadjust
        assert got.loc[m, "se_cluster"] == pytest.approx(base, rel=1e-10)    # base R's formula
        assert got.loc[m, "ci_low"] == pytest.approx(clo, rel=1e-10)
        assert got.loc[m, "ci_high"] == pytest.approx(chi, rel=1e-10)
        assert one.loc[m, "ci_method"] == "wilson"
        assert one.loc[m, "ci_low"] == pytest.approx(want1[m][0], rel=1e-12)  # prop.test
        assert one.loc[m, "ci_high"] == pytest.approx(want1[m][1], rel=1e-12)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 2)), min_size=2, max_size=40))
def test_interval_stays_inside_0_1(pairs):
    """The one interval rule never leaves [0, 1] (a Wald interval p ± z se does near 0 and 1)."""
    df = pd.DataFrame({"model": "m", "item": [f"i{i}" for i in range(len(pairs))],
                       "cluster": [f"c{c}" for c, _ in pairs],
                       "correct": pd.array([v == 2 if v else None for _, v in pairs], dtype="boolean")})
    t = summarize(df).to_frame()
    assert ((t["ci_low"] >= 0) & (t["ci_high"] <= 1) & (t["ci_low"] <= t["accuracy"] + 1e-12)
            & (t["accuracy"] <= t["ci_high"] + 1e-12)).all()


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
    g = len(np.unique(cl))
    want = np.sqrt(g / (g - 1) * sum((x[cl == c] - xbar).sum() ** 2 for c in np.unique(cl))) / len(x) \
        if g > 1 else np.nan
    assert cluster_se(x, cl) == pytest.approx(want, abs=1e-12, nan_ok=True)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 500), st.data())
def test_wilson_contains_p(n, data):
    k = data.draw(st.integers(0, n))
    lo, hi = wilson_interval(k, n)
    assert 0 <= lo <= k / n + 1e-12 and k / n - 1e-12 <= hi <= 1
