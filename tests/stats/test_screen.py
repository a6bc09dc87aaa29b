"""Item screen: known mis-keyed items on generated data, the ranking metrics, key injection, the JSON contract,
the batched logistic regression against statsmodels, and bad input."""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcstats.errors import InputError
from mrcstats.models.logistic import fit_logistic
from mrcstats.stats.screen import (
    SIGNALS,
    inject_key_errors,
    precision_at_k,
    roc_auc,
    roc_curve,
    screen,
    screen_validate,
)
from mrcstats.tasks.choices import choice_log


@pytest.fixture(scope="module")
def sim():
    return choice_log(5, models=20, items=120, miskeyed=6)


@pytest.fixture(scope="module")
def res(sim):
    return screen(sim.log, seed=1, n_null=1000)


def test_known_miskeyed_items_rank_first(sim, res):
    lab = res.signals["item"].isin(sim.truth["miskeyed"])
    assert roc_auc(res.signals["combined"], lab) > 0.95
    top = set(res.items["item"].head(10))
    assert len(top & set(sim.truth["miskeyed"])) >= 4
    # the suggested key of a flagged-looking mis-keyed item is the true key when the strong models agree on it
    head = res.items[res.items["item"].isin(sim.truth["miskeyed"])].head(3)
    true = sim.truth["true_key"]
    assert sum(r.suggested_key == true[r.item] for r in head.itertuples()) >= 2


def test_every_item_in_the_json_contract(sim, res):
    d = res.to_dict()
    assert {"items", "notes"} <= set(d)
    assert sorted(r["item"] for r in d["items"]) == sorted(sim.log["item"].unique())
    r0 = d["items"][0]
    assert set(r0) == {"item", "score", "flag", "suggested_key", "evidence"}
    assert isinstance(r0["flag"], bool)
    assert {"accuracy", "r_pb", "a", "infit", "outfit", "alt_loglik", "q_value", "p_value"} <= set(r0["evidence"])
    scores = [r["score"] for r in d["items"]]
    assert scores == sorted(scores, reverse=True)
    assert set(res.signals.columns) == {"item", *SIGNALS, "combined"}
    assert "screen" in res.summary().lower() or "Item screen" in res.summary()
    assert len(res.to_frame()) == len(d["items"])


def test_q_values_and_flags(res):
    it = res.items
    assert ((it["p_value"] > 0) & (it["p_value"] <= 1)).all()
    assert (it["q_value"] >= it["p_value"] - 1e-12).all()
    assert (it["flag"] == (it["q_value"] <= res.fdr)).all()
    # the score is monotone in p: a higher score never has a larger p-value
    o = it.sort_values("score", ascending=False)
    assert (np.diff(o["p_value"].to_numpy()) >= -1e-12).all()


def test_deterministic_given_seed(sim, res):
    again = screen(sim.log, seed=1, n_null=1000)
    pd.testing.assert_frame_equal(res.items, again.items)


def test_items_answered_by_one_model_are_listed(sim):
    extra = pd.DataFrame({"model": ["m00"], "item": ["lonely"], "correct": pd.array([True], dtype="boolean"),
                          "gold": ["A"], "pred": ["A"], "family": ["f0"]})
    from mrcstats.io.schema import validate_log

    log = validate_log(pd.concat([sim.log, extra], ignore_index=True))
    r = screen(log, seed=1, n_null=500, n_train=200)
    row = r.items[r.items["item"] == "lonely"]
    assert len(row) == 1 and np.isnan(row["score"].iloc[0]) and not row["flag"].iloc[0]
    assert any("one model only" in n for n in r.notes)


def test_without_pred_and_gold_uses_correctness_signals(sim):
    log = sim.log.drop(columns=["pred", "gold"])
    r = screen(log, seed=0, n_null=500)
    assert "alt_key" not in r.signals.columns and r.n_train == 0
    assert r.items["suggested_key"].isna().all()
    lab = r.signals["item"].isin(sim.truth["miskeyed"])
    assert roc_auc(r.signals["combined"], lab) > 0.75


def test_inject_key_errors(sim):
    bad, inj = inject_key_errors(sim.log, 7, seed=3)
    assert len(inj) == 7 and (inj["old_key"] != inj["new_key"]).all()
    hit = bad["item"].isin(inj["item"])
    pd.testing.assert_frame_equal(bad[~hit], sim.log[~hit])
    nk = bad.loc[hit, "item"].map(dict(zip(inj["item"], inj["new_key"], strict=True)))
    assert (bad.loc[hit, "gold"] == nk).all()
    pred = bad.loc[hit, "pred"]
    exp = (pred == nk).where(pred.notna())
    got = bad.loc[hit, "correct"].astype("boolean")
    assert (got.isna() == pred.isna()).all()
    assert (got[pred.notna()].astype(bool) == exp[pred.notna()].astype(bool)).all()
    # the new key is an option some model chose
    for r in inj.itertuples():
        assert (sim.log.loc[sim.log["item"] == r.item, "pred"] == r.new_key).any()
    _bad2, inj2 = inject_key_errors(sim.log, 7, seed=3)
    pd.testing.assert_frame_equal(inj, inj2)


def test_validate_reports_every_signal(sim):
    v = screen_validate(sim.log, 8, seed=2, n_null=500, n_train=300)
    m = v.metrics.set_index("signal")
    assert list(m.index) == ["combined", *SIGNALS]
    assert (m["auc"].between(0, 1)).all() and m.loc["combined", "auc"] > 0.8
    d = v.to_dict()
    assert d["k"] == 8 and len(d["injected"]) == 8
    assert set(v.curves["signal"]) == set(m.index)
    assert "AUC" in v.summary().upper()


def test_bad_input(sim):
    with pytest.raises(InputError, match="DataFrame"):
        screen([1, 2, 3])
    with pytest.raises(InputError, match="fdr"):
        screen(sim.log, fdr=1.5)
    with pytest.raises(InputError, match="pred"):
        inject_key_errors(sim.log.drop(columns=["pred"]), 3)
    with pytest.raises(InputError, match="K"):
        inject_key_errors(sim.log, 0)
    with pytest.raises(InputError, match="smaller K"):
        inject_key_errors(sim.log, 10_000)


# ----------------------------------------------------------------------------- ranking metrics

@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(-3, 3), st.booleans()), min_size=2, max_size=30))
def test_auc_is_the_pairwise_probability(pairs):
    s = np.array([p[0] for p in pairs], float)
    y = np.array([p[1] for p in pairs])
    pos, neg = s[y], s[~y]
    if len(pos) == 0 or len(neg) == 0:
        assert np.isnan(roc_auc(s, y))
        return
    brute = np.mean([1.0 if a > b else 0.5 if a == b else 0.0 for a, b in itertools.product(pos, neg)])
    assert roc_auc(s, y) == pytest.approx(brute, abs=1e-12)
    c = roc_curve(s, y)
    assert (np.diff(c["fpr"]) >= 0).all() and (np.diff(c["tpr"]) >= 0).all()
    assert c["fpr"].iloc[-1] == pytest.approx(1.0) and c["tpr"].iloc[-1] == pytest.approx(1.0)
    # trapezoid area under the curve = AUC
    assert np.trapezoid(c["tpr"], c["fpr"]) == pytest.approx(brute, abs=1e-12)


def test_precision_at_k():
    s = np.array([5, 4, 3, 2, 1.0])
    y = np.array([True, False, True, False, False])
    assert precision_at_k(s, y) == 0.5
    assert precision_at_k(s, y, 1) == 1.0
    assert precision_at_k(np.array([np.nan, 1.0]), np.array([True, False]), 1) == 0.0


# ----------------------------------------------------------------------------- batched logistic regression

def test_fit_logistic_matches_statsmodels():
    sm = pytest.importorskip("statsmodels.api")
    rng = np.random.default_rng(0)
    J, B = 30, 4
    x = rng.normal(size=J)
    X = np.column_stack([np.ones(J), x])
    n = rng.integers(3, 9, size=(B, J)).astype(float)
    s = rng.binomial(n.astype(int), 1 / (1 + np.exp(-(0.3 + 0.8 * x)))).astype(float)
    fit = fit_logistic(X, s, n)
    for b in range(B):
        ref = sm.GLM(np.column_stack([s[b], n[b] - s[b]]), X, family=sm.families.Binomial()).fit(tol=1e-12)
        assert fit.beta[b] == pytest.approx(ref.params, abs=1e-8)
        assert fit.deviance[b] == pytest.approx(ref.deviance, abs=1e-8)
    assert fit.converged.all()
    # per-element designs give the same answer as the shared one
    fit3 = fit_logistic(np.broadcast_to(X, (B, J, 2)), s, n)
    assert fit3.beta == pytest.approx(fit.beta, abs=1e-10)
