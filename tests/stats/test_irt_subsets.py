"""Item statistics beside the IRT fit, subset selection and leave-models-out validation."""
from __future__ import annotations

import numpy as np
import pytest

import mrcstats
from mrcstats.errors import InputError


@pytest.fixture(scope="module")
def irt_log(two_pl_log):
    """24 models x 300 items from a 2PL with known parameters (a few extreme items included)."""
    log = two_pl_log(11, 24, 300, b_mean=-0.3, b_sd=1.2)
    log.insert(2, "family", [f"f{int(m[1:]) // 2}" for m in log["model"]])
    return log


def test_irt_item_table(irt_log):
    res = mrcstats.irt(irt_log)
    d = res.to_dict()
    assert set(d) >= {"model", "loglik", "aic", "bic", "items", "abilities", "lrt_1pl_vs_2pl"}
    assert set(d["items"][0]) >= {"item", "a", "b", "se_a", "se_b", "p", "pd"}
    assert set(d["abilities"][0]) == {"model", "theta", "sd"}
    lrt = d["lrt_1pl_vs_2pl"]
    assert lrt["df"] == int(res.fit.items.shape[0]) - 1 and 0 <= lrt["p"] <= 1
    items = res.items
    assert len(items) == 300
    # the per-item P_d is seed 003's, via discrimination() with the item as cluster
    from mrcstats.stats.discrimination import discrimination

    ref = discrimination(irt_log, cluster="item").pd
    np.testing.assert_allclose(items.set_index("item")["pd"], ref.reindex(items["item"]).to_numpy())
    # classical difficulty and point-biserial
    y = irt_log.pivot(index="model", columns="item", values="correct").astype(float)
    np.testing.assert_allclose(items.set_index("item")["p"], y.mean().reindex(items["item"]))
    col = items["item"].iloc[0]
    rest = y.drop(columns=col).mean(axis=1)
    assert items["r_pb"].iloc[0] == pytest.approx(np.corrcoef(y[col], rest)[0, 1])
    # items without variation: infinite difficulty, not fitted
    nf = items[~items["fitted"]]
    assert np.all(np.isinf(nf["b"]))
    assert set(res.rank_correlations.columns) == {"pd", "a", "b", "p", "r_pb"}
    assert res.rank_correlations.at["b", "p"] < -0.8


@pytest.mark.parametrize("method", ["random", "pd", "irt-info", "anchor"])
def test_subset_methods(irt_log, method):
    s1 = mrcstats.subset(irt_log, 30, method, seed=4)
    s2 = mrcstats.subset(irt_log, 30, method, seed=4)
    assert s1.items == s2.items
    assert len(set(s1.items)) == 30
    d = s1.to_dict()
    assert d["method"] == method and d["k"] == 30
    if method == "anchor":
        assert d["weights"] is not None and sum(d["weights"]) == pytest.approx(1.0)
    else:
        assert d["weights"] is None


def test_subset_pd_is_top_pd(irt_log):
    from mrcstats.stats.discrimination import discrimination

    s = mrcstats.subset(irt_log, 20, "pd", seed=0)
    pdv = discrimination(irt_log, cluster="item").pd
    assert pdv[list(s.items)].min() >= pdv.drop(list(s.items)).max() - 1e-12


def test_subset_bad_input(irt_log):
    with pytest.raises(InputError, match="larger than"):
        mrcstats.subset(irt_log, 301, "random")
    with pytest.raises(InputError, match="method"):
        mrcstats.subset(irt_log, 10, "best")
    two = irt_log[irt_log["model"].isin(["m00", "m01"])]
    with pytest.raises(InputError, match="at least 3 models"):
        mrcstats.subset(two, 10, "random")


def test_subset_eval(irt_log):
    res = mrcstats.subset_eval(irt_log, ks=[20, 80], methods=["random", "anchor", "irt-info"], folds=3, seeds=1,
                               groups="family")
    d = res.to_dict()
    assert d["folds"] == 3 and d["seeds"] == [0]
    keys = {"method", "estimator", "k", "mae", "mae_ci_low", "mae_ci_high", "tau", "tau_ci_low", "tau_ci_high"}
    assert keys <= set(d["results"][0])
    est = {(r["method"], r["estimator"]) for r in d["results"]}
    assert ("anchor", "weighted") in est and ("random", "weighted") not in est and ("random", "irt") in est
    r = res.results.set_index(["method", "estimator", "k"])
    # more items, smaller error (random subset mean, on average over folds)
    assert r.loc[("random", "mean", 80), "mae"] < r.loc[("random", "mean", 20), "mae"]
    # folds keep families together: every fold's held-out models share no family with its training models
    pred = res.predictions
    fam = dict(zip(irt_log["model"], irt_log["family"], strict=True))
    for (_, f), g in pred.groupby(["seed", "fold"]):
        test_f = {fam[m] for m in g["model"]}
        other = {fam[m] for m in pred.loc[pred["fold"] != f, "model"]}
        assert not test_f & other
    # the truth is each model's full accuracy
    acc = irt_log.groupby("model")["correct"].mean()
    np.testing.assert_allclose(pred["truth"], acc.reindex(pred["model"]).to_numpy())


def test_subset_eval_bad_input(irt_log):
    with pytest.raises(InputError, match="larger than"):
        mrcstats.subset_eval(irt_log, ks=[500], folds=3, seeds=1)
    with pytest.raises(InputError, match="folds"):
        mrcstats.subset_eval(irt_log, ks=[10], folds=1, seeds=1)
