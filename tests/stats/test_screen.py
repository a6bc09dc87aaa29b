"""Item screen: known mis-keyed items on generated data, the Bayesian FDR, the ranking metrics, key injection, the
review table, the JSON contract, the batched logistic regression against statsmodels, and bad input."""
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
    REVIEW_COLUMNS,
    SIGNALS,
    inject_key_errors,
    precision_at_k,
    review_table,
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
    return screen(sim.log)


def test_known_miskeyed_items_rank_first(sim, res):
    lab = res.signals["item"].isin(sim.truth["miskeyed"])
    assert roc_auc(res.signals["score"], lab) > 0.95
    top = set(res.items["item"].head(10))
    assert len(top & set(sim.truth["miskeyed"])) >= 4
    # the suggested key of a mis-keyed item near the top is the true key
    head = res.items[res.items["item"].isin(sim.truth["miskeyed"])].head(3)
    true = sim.truth["true_key"]
    assert sum(r.suggested_key == true[r.item] for r in head.itertuples()) >= 2


def test_every_item_in_the_json_contract(sim, res):
    d = res.to_dict()
    assert {"items", "notes", "flag_rule", "model"} <= set(d)
    assert sorted(r["item"] for r in d["items"]) == sorted(sim.log["item"].unique())
    r0 = d["items"][0]
    assert set(r0) == {"item", "score", "flag", "error_type", "suggested_key", "evidence"}
    assert isinstance(r0["flag"], bool)
    assert {"accuracy", "r_pb", "a", "infit", "outfit", "q_value", "p_broken", "p_multiple_correct",
            "p_no_correct", "choices", "agreement"} <= set(r0["evidence"])
    scores = [r["score"] for r in d["items"]]
    assert scores == sorted(scores, reverse=True)
    assert set(res.signals.columns) == {"item", *SIGNALS, "score"}
    assert "Item screen" in res.summary()
    assert len(res.to_frame()) == len(d["items"])
    assert sum(res.model["prior"].values()) == pytest.approx(1.0)


def test_q_values_are_the_bayesian_fdr(res):
    it = res.items
    p_right = 1 - it["score"].to_numpy()
    q = it["q_value"].to_numpy()
    # q at rank r: the mean P(key right) over the r most suspect items (no ties in this log's top)
    o = np.argsort(p_right, kind="mergesort")
    assert q[o] == pytest.approx(np.maximum.accumulate(np.cumsum(p_right[o]) / np.arange(1, len(o) + 1)), abs=1e-12)
    assert (it["flag"] == (it["q_value"] <= res.fdr)).all()
    assert it["score"].between(0, 1).all() and (it["p_broken"] >= it["score"] - 1e-12).all()


def test_deterministic(sim, res):
    again = screen(sim.log)
    pd.testing.assert_frame_equal(res.items, again.items)


def test_items_answered_by_one_model_are_listed(sim):
    extra = pd.DataFrame({"model": ["m00"], "item": ["lonely"], "correct": pd.array([True], dtype="boolean"),
                          "gold": ["A"], "pred": ["A"], "family": ["f0"]})
    from mrcstats.io.schema import validate_log

    log = validate_log(pd.concat([sim.log, extra], ignore_index=True))
    r = screen(log)
    row = r.items[r.items["item"] == "lonely"]
    assert len(row) == 1 and np.isnan(row["score"].iloc[0]) and not row["flag"].iloc[0]
    assert any("one model only" in n for n in r.notes)


def test_without_pred_and_gold_pools_the_wrong_answers(sim):
    log = sim.log.drop(columns=["pred", "gold"])
    r = screen(log)
    assert "agreement" not in r.signals.columns
    assert r.items["suggested_key"].isna().all() and r.items["error_type"].isna().all()
    assert any("pooled" in n for n in r.notes)
    lab = r.signals["item"].isin(sim.truth["miskeyed"])
    assert roc_auc(r.signals["score"], lab) > 0.75


def test_inject_key_errors(sim):
    bad, inj = inject_key_errors(sim.log, 7, seed=3)
    assert len(inj) == 7 and (inj["old_key"] != inj["new_key"]).all()
    hit = bad["item"].isin(inj["item"])
    pd.testing.assert_frame_equal(bad[~hit], sim.log[~hit].assign(correct=sim.log["correct"].astype("boolean")[~hit]))
    nk = bad.loc[hit, "item"].map(dict(zip(inj["item"], inj["new_key"], strict=True)))
    assert (bad.loc[hit, "gold"] == nk).all()
    pred = bad.loc[hit, "pred"]
    got = bad.loc[hit, "correct"].astype("boolean")
    assert (got[pred.notna()].astype(bool) == (pred == nk)[pred.notna()]).all()
    assert not got[pred.isna()].fillna(False).any()
    # the new key is one of the item's options: a label used as a key in the log or one some model chose
    labels = set(sim.log["gold"].dropna())
    for r in inj.itertuples():
        assert r.new_key in labels | set(sim.log.loc[sim.log["item"] == r.item, "pred"].dropna())
    _bad2, inj2 = inject_key_errors(sim.log, 7, seed=3)
    pd.testing.assert_frame_equal(inj, inj2)


def test_validate_reports_every_signal(sim):
    v = screen_validate(sim.log, 8, seed=2)
    m = v.metrics.set_index("signal")
    assert list(m.index) == ["score", *SIGNALS]
    assert (m["auc"].between(0, 1)).all() and m.loc["score", "auc"] > 0.8
    d = v.to_dict()
    assert d["k"] == 8 and len(d["injected"]) == 8
    assert set(v.curves["signal"]) == set(m.index)
    assert "AUC" in v.summary().upper()


def test_validate_with_empty_answers(sim):
    log = sim.log.copy()
    log.loc[log.index[::37], "pred"] = None
    log.loc[log.index[::37], "correct"] = False
    v = screen_validate(log, 5, seed=1)
    assert v.metrics.set_index("signal").loc["score", "auc"] > 0.7


def test_review_table(sim, res):
    log = sim.log.assign(question=sim.log["item"] + "?")
    rev = review_table(res, log, top=12)
    assert len(rev) == max(12, int(res.items["flag"].sum()))
    assert list(rev["item"]) == list(res.items["item"].head(len(rev)))
    assert {"question", *REVIEW_COLUMNS} <= set(rev.columns) and (rev["verdict"] == "").all()
    assert (rev["question"] == rev["item"] + "?").all()


def test_bad_input(sim):
    with pytest.raises(InputError, match="DataFrame"):
        screen([1, 2, 3])
    with pytest.raises(InputError, match="fdr"):
        screen(sim.log, fdr=1.5)
    with pytest.raises(InputError, match="shrinkage"):
        screen(sim.log, shrinkage=-1)
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
