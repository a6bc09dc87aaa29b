"""Discriminatory power P_d (seed 003 eq. 4-7), the P_d cutoff table and cluster difficulty."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import kendalltau

from mrcstats.errors import InputError
from mrcstats.stats.discrimination import cluster_difficulty, discrimination, pd_value


def synthetic_log(n_models: int = 3, n_clusters: int = 40, items_per: int = 3, trials: int = 1,
                  seed: int = 0, p_invalid: float = 0.05, drop_share: float = 0.0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    ability = np.linspace(-1.5, 2.0, n_models)
    rows = []
    for c in range(n_clusters):
        diff = rng.normal(0, 1.5)
        for m in range(n_models):
            if drop_share and rng.random() < drop_share:
                continue  # this model never saw the cluster
            for i in range(items_per):
                for t in range(trials):
                    p = 1 / (1 + math.exp(-(ability[m] - diff)))
                    v = bool(rng.random() < p)
                    rows.append({"model": f"model{m:02d}", "cluster": f"high{c:05d}.txt",
                                 "item": f"high{c:05d}.txt#{i}", "trial": t,
                                 "correct": pd.NA if rng.random() < p_invalid else v})
    log = pd.DataFrame(rows)
    log["correct"] = log["correct"].astype("boolean")
    return log


def definition_pd(log: pd.DataFrame, eps: float = 1e-10) -> dict[str, float]:
    """Eq. 4-7 written out literally, one cluster at a time, with plain Python loops."""
    out = {}
    for c, sub in log.groupby("cluster"):
        p = []
        for _, s in sub.groupby("model"):
            y = [bool(v) if v is not pd.NA else False for v in s["correct"]]
            p.append(sum(y) / len(y))
        n = len(p)
        if n < 2:
            continue
        q = [max(min(v, 1 - eps), eps) for v in p]

        def kl(a, b):
            return a * math.log(a / b) + (1 - a) * math.log((1 - a) / (1 - b))

        total = 0.0
        for i in range(n):
            for j in range(i + 1, n):
                total += (kl(q[i], q[j]) + kl(q[j], q[i])) / 2
        out[str(c)] = 2 / (n * (n - 1)) * total
    return out


@pytest.mark.parametrize("n_models,drop", [(3, 0.0), (29, 0.0), (29, 0.15)])
def test_pd_equals_definition(n_models, drop) -> None:
    log = synthetic_log(n_models=n_models, n_clusters=60, trials=2, seed=n_models, drop_share=drop)
    res = discrimination(log)
    ref = definition_pd(log)
    assert set(res.pd.index) == set(ref)
    for c, v in ref.items():
        assert abs(res.pd[c] - v) <= 1e-9 * max(1.0, abs(v)), c


def test_pd_extremes_match_seed_range() -> None:
    # seed 003 Fig. 4: P_d ranges from 0 to 15.351 for three models (one always right, two always wrong)
    assert math.isclose(pd_value([0.0, 0.0, 1.0]), 15.351, abs_tol=5e-4)
    assert pd_value([0.4, 0.4, 0.4]) == 0.0
    assert math.isnan(pd_value([0.5]))


def test_clusters_with_one_model_are_counted(capsys) -> None:
    log = synthetic_log(n_models=3, n_clusters=10)
    extra = pd.DataFrame({"model": ["model00"], "cluster": ["lonely"], "item": ["x"], "trial": [0],
                          "correct": pd.array([True], dtype="boolean")})
    res = discrimination(pd.concat([log, extra], ignore_index=True))
    assert "lonely" not in res.pd.index
    assert res.skipped == {"fewer than two models": 1}
    assert "fewer than two models" in capsys.readouterr().err


def test_invalid_counts_as_wrong() -> None:
    log = pd.DataFrame({"model": ["a", "a", "b", "b"], "cluster": ["c"] * 4, "item": ["1", "2", "1", "2"],
                        "correct": pd.array([True, pd.NA, True, False], dtype="boolean")})
    res = discrimination(log)
    assert res.accuracy.loc["c", "a"] == 0.5 and res.pd["c"] == 0.0


def test_cutoff_table() -> None:
    log = synthetic_log(n_models=4, n_clusters=80, seed=5)
    res = discrimination(log)
    tab = res.cutoffs([0, 5, 10, 1e9], bootstrap=300, seed=1)
    rows = tab.to_dict()["cutoffs"]
    assert [r["cutoff"] for r in rows] == [0, 5, 10, 1e9]
    overall = log.assign(y=log["correct"].fillna(False).astype(float)).groupby("model")["y"].mean()
    for r in rows[:-1]:
        keep = res.pd.index[res.pd > r["cutoff"]]
        assert r["clusters"] == len(keep)
        sub = log[log["cluster"].isin(keep)]
        assert r["items"] == sub["item"].nunique()
        acc = sub.assign(y=sub["correct"].fillna(False).astype(float)).groupby("model")["y"].mean()
        for m, a in acc.items():
            assert math.isclose(r["accuracy"][m], a, rel_tol=1e-12)
        assert math.isclose(r["grand_mean"], float(np.mean(list(r["accuracy"].values()))))
        ms = list(r["accuracy"])
        tau = kendalltau([r["accuracy"][m] for m in ms], [overall[m] for m in ms]).statistic
        assert (r["kendall_tau"] is None and not np.isfinite(tau)) or math.isclose(r["kendall_tau"], tau)
        for m, (lo, hi) in r["accuracy_ci"].items():
            assert lo <= hi
    empty = rows[-1]
    assert empty["clusters"] == 0 and empty["items"] == 0
    assert empty["accuracy"] == {} and empty["kendall_tau"] is None and empty["grand_mean"] is None
    again = res.cutoffs([0, 5, 10, 1e9], bootstrap=300, seed=1).to_dict()
    assert again == tab.to_dict()
    assert "P_d > 5" in tab.to_frame().columns
    assert "Table 5" in tab.summary()


def test_bootstrap_interval_covers_estimate() -> None:
    log = synthetic_log(n_models=3, n_clusters=120, seed=9)
    row = discrimination(log).cutoffs([0], bootstrap=1000, seed=2).rows[0]
    for m, a in row["accuracy"].items():
        lo, hi = row["accuracy_ci"][m]
        assert lo <= a <= hi


def test_discrimination_bad_input() -> None:
    with pytest.raises(InputError, match="missing required column 'passage'"):
        discrimination(synthetic_log(), cluster="passage")
    with pytest.raises(InputError, match="epsilon"):
        discrimination(synthetic_log(), epsilon=0.7)
    with pytest.raises(InputError, match="bootstrap"):
        discrimination(synthetic_log()).cutoffs([0], bootstrap=-1)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=2, max_size=8), st.floats(1e-12, 1e-3))
def test_pd_properties(p, eps) -> None:
    v = pd_value(p, eps)
    assert v >= -1e-12
    assert math.isclose(v, pd_value(list(reversed(p)), eps), rel_tol=1e-9, abs_tol=1e-12)


class _FakeGlmer:
    def __init__(self):
        self.fixef = pd.Series({"(Intercept)": 1.2, "LLM1": 0.3})
        self.ranef = {"passage": pd.DataFrame({"mode": [1.1, -2.0, 0.2, -0.4], "condvar": [0.1] * 4},
                                              index=["high17038.txt", "high22834.txt", "a", "b"])}


def test_cluster_difficulty() -> None:
    res = cluster_difficulty(_FakeGlmer(), n=2)
    assert list(res.easiest["level"]) == ["high17038.txt", "a"]
    assert list(res.hardest["level"]) == ["high22834.txt", "b"]
    assert math.isclose(res.easiest["probability"].iloc[0], 1 / (1 + math.exp(-(1.2 + 1.1))))
    assert res.groups() == {"Easiest": ["high17038.txt", "a"], "Hardest": ["high22834.txt", "b"]}
    same = cluster_difficulty({"high17038.txt": 1.1, "high22834.txt": -2.0, "a": 0.2, "b": -0.4},
                              intercept=1.2, n=2)
    pd.testing.assert_frame_equal(same.table, res.table)
    with pytest.raises(InputError, match="intercept"):
        cluster_difficulty({"a": 0.1})
    assert set(res.to_dict()) == {"intercept", "group", "easiest", "hardest"}


def test_cluster_difficulty_from_native_glmer() -> None:
    """Conditional modes straight from mrcstats.glmer's GlmerResult.ranef."""
    glmer = pytest.importorskip("mrcstats.models").glmer
    log = synthetic_log(n_models=3, n_clusters=40, seed=1, p_invalid=0)
    log["y"] = log["correct"].astype(int)
    fit = glmer("y ~ model + (1 | cluster)", log)
    res = cluster_difficulty(fit, n=5)
    modes = fit.ranef["cluster"]["mode"]
    assert res.easiest["mode"].iloc[0] == modes.max() and res.hardest["mode"].iloc[0] == modes.min()
    eta = fit.fixef["(Intercept)"] + modes.max()
    assert math.isclose(res.easiest["probability"].iloc[0], 1 / (1 + math.exp(-eta)))
