"""The answer model tells the kinds of broken item apart on small constructed logs: a wrong key (the strong
models converge on one other option), two correct options (they split between the key and one other) and no
correct option (nothing attracts them: found broken, its type not told apart); and the Bayesian FDR helper."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcstats.models.answer_mixture import fit_answer_mixture
from mrcstats.stats.screen import _bayes_fdr, screen

OPTIONS = np.array(list("ABCD"))


def _log(seed: int = 0, models: int = 40, clean: int = 160, broken: int = 4) -> tuple[pd.DataFrame, dict[str, str]]:
    """Clean 2PL items with the key A and a trap distractor, plus ``broken`` items of each kind."""
    rng = np.random.default_rng(seed)
    theta = np.sort(rng.normal(0, 1.2, models))
    rows, kind = [], {}

    def add(item: str, probs: np.ndarray) -> None:          # probs: models x 4 choice probabilities
        for j in range(models):
            rows.append((f"m{j:02d}", item, OPTIONS[rng.choice(4, p=probs[j])]))

    for i in range(clean):
        a, b = rng.lognormal(0, 0.3), rng.normal(-0.5, 1.2)
        p = 1 / (1 + np.exp(-a * (theta - b)))
        trap = rng.dirichlet(np.ones(3) * 0.8)
        add(f"c{i:03d}", np.column_stack([p, (1 - p)[:, None] * trap[None, :]]))
        kind[f"c{i:03d}"] = "clean"
    strong = 1 / (1 + np.exp(-1.8 * (theta + 0.3)))
    for i in range(broken):
        # wrong key: the correct option is B
        add(f"w{i}", np.column_stack([(1 - strong) * 0.3, strong, (1 - strong) * 0.4, (1 - strong) * 0.3]))
        kind[f"w{i}"] = "wrong_key"
        # two correct options: A and B split the models that know
        add(f"m{i}", np.column_stack([strong * 0.5, strong * 0.5, (1 - strong) * 0.5, (1 - strong) * 0.5]))
        kind[f"m{i}"] = "multiple_correct"
        # no correct option: every model spreads over all four
        add(f"n{i}", np.tile(rng.dirichlet(np.ones(4) * 40), (models, 1)))
        kind[f"n{i}"] = "no_correct"
    log = pd.DataFrame(rows, columns=["model", "item", "pred"])
    log["gold"] = "A"
    log["correct"] = log["pred"] == log["gold"]
    log["cluster"] = log["item"].str[0].map({"c": "s1", "w": "s2", "m": "s2", "n": "s2"})
    return log, kind


@pytest.fixture(scope="module")
def typed():
    log, kind = _log()
    return screen(log), kind


def test_error_types_of_constructed_items(typed):
    res, kind = typed
    it = res.items.set_index("item")
    for k in ("wrong_key", "multiple_correct"):
        items = [i for i, v in kind.items() if v == k]
        got = it.loc[items, "error_type"]
        assert (got == k).mean() >= 0.75, (k, got.to_dict())
        assert (it.loc[items, "p_broken"] > 0.5).mean() >= 0.75, k
    # answers that do not depend on ability at all are broken, but their type is not told apart from two correct
    # options the models split over (the limit docs/screening.md states)
    n = [i for i, v in kind.items() if v == "no_correct"]
    assert (it.loc[n, "p_broken"] > 0.5).mean() >= 0.75
    w = [i for i, v in kind.items() if v == "wrong_key"]
    assert (it.loc[w, "suggested_key"] == "B").all()
    m = [i for i, v in kind.items() if v == "multiple_correct" and it.loc[i, "error_type"] == "multiple_correct"]
    assert (it.loc[m, "also_correct"] == "B").all()
    # the wrong keys are the top of the ranking and flagged; few clean items are
    top = set(res.items["item"].head(4))
    assert top <= set(w) | {i for i, v in kind.items() if v != "clean"}
    assert it.loc[w, "flag"].all()
    clean = [i for i, v in kind.items() if v == "clean"]
    assert it.loc[clean, "flag"].mean() < 0.03
    assert it.loc[clean, "p_broken"].median() < 0.1


def test_mixture_posteriors_are_probabilities():
    log, _ = _log(1, models=12, clean=60, broken=2)
    res = screen(log)
    assert res.model["converged"]
    cols = ["score", "p_multiple_correct", "p_no_correct"]
    tot = res.items[cols].sum(axis=1)
    assert (tot <= 1 + 1e-9).all() and np.allclose(res.items["p_broken"], tot, atol=1e-9)


def test_answer_mixture_inputs():
    rng = np.random.default_rng(2)
    X = rng.integers(0, 2, size=(30, 8, 4)).astype(float)
    key = np.zeros(30, int)
    fit = fit_answer_mixture(X, key, rng.normal(size=8))
    assert fit.posterior.shape == (30, 4) and np.allclose(fit.posterior.sum(1), 1)
    assert np.all(fit.key_posterior[np.arange(30), key] == 0)
    assert fit.grid[:, 2].sum() == pytest.approx(1.0)
    # an option the item does not offer is never the suggested key
    off = np.ones((30, 4), bool)
    off[:, 3] = False
    fit2 = fit_answer_mixture(X, key, rng.normal(size=8), offered=off)
    assert np.all(fit2.key_posterior[:, 3] == 0) and np.all(fit2.pair_posterior[:, 3] == 0)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=40))
def test_bayes_fdr_is_the_running_mean(p):
    p = np.asarray(p)
    q = _bayes_fdr(p)
    o = np.argsort(p, kind="mergesort")
    run = np.cumsum(p[o]) / np.arange(1, len(p) + 1)
    # tied values share the q of their whole block; otherwise q is the running mean
    for r, i in enumerate(o):
        last = np.flatnonzero(p[o] == p[i]).max()
        assert q[i] == pytest.approx(run[last], abs=1e-12)
    assert (q >= 0).all() and (q <= 1 + 1e-12).all()
