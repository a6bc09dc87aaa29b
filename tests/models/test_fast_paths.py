"""Issue 28: the fast paths of the native engine give the numbers of the previous path.

* a complete crossed grid (every pair of levels once) is kept in cell order by MultiFactor
  (``(1 | item) + (1 | model)``) and GeneralModel (``(1 | item) + (1 + x | model)``); a grid with missing
  cells (issue 41) as well, the missing cells weighted 0;
* crossed random intercepts, and random slopes, on many rows start from a fit on a subsample of the first
  term's levels.

``deviance.GRID_ORDER = False`` and ``optimize.FAST_PATH = False`` give the previous path (row order, lme4's
start). Estimates, θ, logLik, modes and residuals agree to 1e-8; no timing is asserted.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import mrcstats.models.deviance as dv
import mrcstats.models.optimize as ft
from mrcstats.models import glmer
from mrcstats.models.design import build_design

from ._fits import model_spec
from ._r import lme4_fit


def grid_log(n_items=240, n_models=6, seed=28, slope=False, shuffle=True) -> pd.DataFrame:
    """Every model answers every item once (rows shuffled, as a concatenated log would be)."""
    rng = np.random.default_rng(seed)
    item = np.tile(np.arange(n_items), n_models)
    model = np.repeat(np.arange(n_models), n_items)
    x = rng.normal(size=item.size)
    bm = rng.normal(0, 0.7, n_models)
    sm = rng.normal(0, 0.4, n_models) if slope else np.zeros(n_models)
    eta = 0.2 + 0.4 * x + rng.normal(0, 1.3, n_items)[item] + bm[model] + sm[model] * x
    y = (rng.random(item.size) < 1 / (1 + np.exp(-eta))).astype(np.int8)
    df = pd.DataFrame({"item": [f"q{i:04d}" for i in item], "model": [f"m{i}" for i in model], "x": x, "correct": y})
    return df.sample(frac=1.0, random_state=seed).reset_index(drop=True) if shuffle else df


def _fit_both(monkeypatch, formula, df, start_rows=None):
    if start_rows is not None:
        monkeypatch.setattr(ft, "START_ROWS", start_rows)
    monkeypatch.setattr(dv, "GRID_ORDER", False)
    monkeypatch.setattr(ft, "FAST_PATH", False)
    old = glmer(formula, df)
    monkeypatch.setattr(dv, "GRID_ORDER", True)
    monkeypatch.setattr(ft, "FAST_PATH", True)
    new = glmer(formula, df)
    return old, new


def _same(old, new, tol=1e-8):
    assert np.max(np.abs(new.fixef.values - old.fixef.values)) < tol
    assert np.max(np.abs(new.theta.values - old.theta.values)) < tol
    assert abs(new.loglik - old.loglik) < tol * max(1.0, abs(old.loglik))
    assert abs(new.deviance - old.deviance) < tol * max(1.0, abs(old.deviance))
    np.testing.assert_allclose(new.resid_quantiles.values, old.resid_quantiles.values, rtol=0, atol=1e-7)
    for g in old.ranef:
        np.testing.assert_allclose(new.ranef[g].values, old.ranef[g].values, rtol=0, atol=1e-7)
    np.testing.assert_allclose(new.se.values, old.se.values, rtol=1e-4)


@pytest.mark.parametrize("formula", ["correct ~ 1 + (1 | item) + (1 | model)",
                                     "correct ~ x + (1 | item) + (1 | model)"])
def test_crossed_grid_in_cell_order_gives_the_row_order_numbers(monkeypatch, formula):
    df = grid_log()
    d = build_design(model_spec(formula), df)
    model = ft.make_model(dv.ResponseData.from_design(d), d.re)
    assert isinstance(model, dv.MultiFactor) and model.grid       # the fast path is the one taken
    old, new = _fit_both(monkeypatch, formula, df)
    _same(old, new)


def test_subsample_start_gives_the_same_optimum(monkeypatch):
    df = grid_log(n_items=600, n_models=5, seed=3)
    old, new = _fit_both(monkeypatch, "correct ~ x + (1 | item) + (1 | model)", df, start_rows=400)
    assert new.optinfo["start"]["from"] == "subsample fit"
    assert "start" not in old.optinfo
    _same(old, new)


@pytest.mark.parametrize("complete", [True, False])
def test_subsample_start_with_random_slopes_gives_the_same_optimum(monkeypatch, complete):
    """Random slopes on many rows start from a fit on a fifth of the first term's levels (GeneralModel; on a
    complete grid and, with a pair left out, on the row path)."""
    df = grid_log(n_items=900, n_models=8, seed=11, slope=True)
    if not complete:
        df = df.iloc[1:].reset_index(drop=True)            # one pair missing: not a complete grid
    monkeypatch.setattr(ft, "SLOPE_MIN_ROWS", 2000)
    monkeypatch.setattr(ft, "SLOPE_START_ROWS", 1500)
    old, new = _fit_both(monkeypatch, "correct ~ x + (1 | item) + (1 + x | model)", df)
    assert new.optinfo["start"]["from"] == "subsample fit" and new.optinfo["start"]["levels"] < 900
    assert "start" not in old.optinfo
    _same(old, new)


def test_correlated_slope_on_a_grid_in_cell_order(monkeypatch):
    df = grid_log(n_items=150, n_models=8, seed=5, slope=True)
    formula = "correct ~ x + (1 | item) + (1 + x | model)"
    d = build_design(model_spec(formula), df)
    model = ft.make_model(dv.ResponseData.from_design(d), d.re)
    assert isinstance(model, dv.GeneralModel) and model.grid is not None
    old, new = _fit_both(monkeypatch, formula, df)
    _same(old, new)


def test_repeated_or_sparse_pairs_stay_on_the_row_path():
    """A pair of levels twice, or fewer than GRID_MIN_FILL of the pairs observed: the row-order kernels."""
    df = grid_log(n_items=50, n_models=4)
    formula = "correct ~ x + (1 | item) + (1 | model)"
    sparse = df.sample(frac=0.4, random_state=1)
    for data in (sparse, pd.concat([df, df.iloc[:1]], ignore_index=True)):
        d = build_design(model_spec(formula), data)
        assert not ft.make_model(dv.ResponseData.from_design(d), d.re).grid
    d = build_design(model_spec("correct ~ x + (1 | item) + (1 + x | model)"), sparse)
    assert ft.make_model(dv.ResponseData.from_design(d), d.re).grid is None


def incomplete_log(n_items=240, n_models=6, seed=41, slope=True, skip=((1, 0), (4, 2)), frac=0.9) -> pd.DataFrame:
    """:func:`grid_log` with missing cells: model m skips every item of category c for (m, c) in ``skip``
    (items in 3 categories), and a random ``1 - frac`` of the rest is missing."""
    df = grid_log(n_items=n_items, n_models=n_models, seed=seed, slope=slope)
    cat = df["item"].str[1:].astype(int) % 3
    model = df["model"].str[1:].astype(int)
    out = np.zeros(len(df), bool)
    for m, c in skip:
        out |= (model == m) & (cat == c)
    keep = ~out & (np.random.default_rng(seed).random(len(df)) < frac)
    return df[keep].reset_index(drop=True)


@pytest.mark.parametrize("formula", ["correct ~ x + (1 | item) + (1 | model)",
                                     "correct ~ x + (1 | item) + (1 + x | model)"])
def test_incomplete_grid_with_zero_weight_cells_gives_the_row_order_numbers(monkeypatch, formula):
    """Issue 41: a grid with missing cells (whole categories skipped) is fitted as the complete grid with
    the missing cells weighted 0; estimates, θ, logLik, modes and residuals are those of the row path."""
    df = incomplete_log()
    assert 0.5 < len(df) / (240 * 6) < 0.9
    d = build_design(model_spec(formula), df)
    model = ft.make_model(dv.ResponseData.from_design(d), d.re)
    assert model.grid is not None and model.grid is not False and model._dd.n == 240 * 6
    old, new = _fit_both(monkeypatch, formula, df)
    _same(old, new)


@pytest.mark.r
@pytest.mark.parametrize("formula, singular", [("correct ~ x + (1 | item) + (1 | model)", False),
                                               ("correct ~ x + (1 | item) + (1 + x | model)", False),
                                               ("correct ~ x + (1 | item) + (1 + x | model)", True)])
def test_incomplete_grid_matches_lme4(rscript, tmp_path, formula, singular):
    """The padded grid (missing cells weighted 0) against lme4 on the rows (tolPwrss 1e-13, same run): fixef,
    θ and logLik within 1e-4; with no slope variance the fit is singular on both sides."""
    df = incomplete_log(n_items=300, n_models=8, seed=42, slope=not singular)
    d = build_design(model_spec(formula), df)
    assert ft.make_model(dv.ResponseData.from_design(d), d.re).grid is not None
    m = glmer(formula, df)
    r = lme4_fit(rscript, df, formula, tmp_path, ranef=False, converged=True)
    assert m.loglik == pytest.approx(r["loglik"], abs=1e-4)
    np.testing.assert_allclose(m.fixef.values, list(r["fixef"].values()), atol=1e-4)
    np.testing.assert_allclose(m.theta.values, list(r["theta"].values()), atol=1e-3)
    if singular:
        assert m.singular


@pytest.mark.parametrize("formula, k", [("correct ~ x + (1 | item) + (1 | model)", 2),
                                        ("correct ~ x + (1 | item) + (1 + x | model)", 4)])
def test_zero_weight_cells_add_nothing(monkeypatch, formula, k):
    """At any (θ, β): the deviance and its gradient of the padded grid equal the row path's (to the order
    of the sums), and per-row μ, η and the modes come back in the data's order; also with prior weights and
    an offset."""
    df = incomplete_log(n_items=90, n_models=5, seed=3)
    df["w"] = np.random.default_rng(2).integers(1, 4, len(df)).astype(float)
    df["off"] = np.random.default_rng(3).normal(0, 0.3, len(df))
    x = np.concatenate([[0.9, 0.6, 0.1, 0.3][:k], [0.1, 0.3]])
    for kw, off in (({}, None), ({"weights": "w"}, None), ({}, df["off"].to_numpy())):
        d = build_design(model_spec(formula), df, **kw)
        rd = dv.ResponseData(d.X, d.y, d.weights, off, d.loglik_const, d.family)
        fast = ft.make_model(rd, d.re)
        monkeypatch.setattr(dv, "GRID_ORDER", False)
        slow = ft.make_model(rd, d.re)
        monkeypatch.setattr(dv, "GRID_ORDER", True)
        assert fast.grid is not None and fast.grid is not False and not getattr(slow, "grid", None)
        (Df, gf), (Ds, gs) = fast.evaluate(x[:k], x[k:]), slow.evaluate(x[:k], x[k:])
        assert Df == pytest.approx(Ds, rel=1e-13)
        np.testing.assert_allclose(gf, gs, rtol=1e-9, atol=1e-9)
        a, b = fast.extras(x[:k], x[k:]), slow.extras(x[:k], x[k:])
        for key in ("mu", "eta"):
            np.testing.assert_allclose(a[key], b[key], rtol=0, atol=1e-10)
        for ba, bb in zip(a["b"], b["b"], strict=True):
            np.testing.assert_allclose(ba, bb, rtol=0, atol=1e-10)
        np.testing.assert_allclose(fast.rx_vcov(x[:k], x[k:]), slow.rx_vcov(x[:k], x[k:]), rtol=1e-9)


@pytest.mark.parametrize("formula, k", [("correct ~ x + (1 | item) + (1 | model)", 2),
                                        ("correct ~ x + (1 | item) + (1 + x | model)", 4)])
def test_grid_rows_come_back_in_the_data_order(monkeypatch, formula, k):
    """Per-row μ and η (residuals, predictions) and the modes of the cell-order kernels are those of
    the row-order kernels at the same (θ, β), row by row."""
    df = grid_log(n_items=70, n_models=5, seed=11, slope=True)
    d = build_design(model_spec(formula), df)
    rd = dv.ResponseData.from_design(d)
    x = np.concatenate([[0.9, 0.6, 0.1, 0.3][:k], [0.1, 0.3]])
    fast = ft.make_model(rd, d.re)
    monkeypatch.setattr(dv, "GRID_ORDER", False)
    slow = ft.make_model(rd, d.re)
    assert fast.d is rd and (getattr(fast, "grid", None) is not None) and not getattr(slow, "grid", None)
    a, b = fast.extras(x[:k], x[k:]), slow.extras(x[:k], x[k:])
    for key in ("mu", "eta"):
        np.testing.assert_allclose(a[key], b[key], rtol=0, atol=1e-10)
    for ba, bb in zip(a["b"], b["b"], strict=True):
        np.testing.assert_allclose(ba, bb, rtol=0, atol=1e-10)
    assert fast.evaluate(x[:k], x[k:])[0] == pytest.approx(slow.evaluate(x[:k], x[k:])[0], rel=1e-13)


def test_grid_gradient_matches_finite_differences():
    df = grid_log(n_items=80, n_models=5, seed=9, slope=True)
    for formula, k in (("correct ~ x + (1 | item) + (1 | model)", 2),
                       ("correct ~ x + (1 | item) + (1 + x | model)", 4)):
        d = build_design(model_spec(formula), df)
        model = ft.make_model(dv.ResponseData.from_design(d), d.re)
        x = np.concatenate([[0.9, 0.6, 0.1, 0.3][:k], [0.1, 0.3]])
        _D, g = model.evaluate(x[:k], x[k:])
        num = np.empty_like(x)
        for i in range(len(x)):
            e = np.zeros_like(x)
            e[i] = 1e-5
            num[i] = (model.evaluate((x + e)[:k], (x + e)[k:], grad=False)[0]
                      - model.evaluate((x - e)[:k], (x - e)[k:], grad=False)[0]) / 2e-5
        np.testing.assert_allclose(g, num, rtol=1e-5, atol=1e-5)


def _singular_log(seed=4) -> pd.DataFrame:
    """No item variation at all: the item SD's optimum is on the boundary (a singular fit)."""
    rng = np.random.default_rng(seed)
    n_items, n_models = 60, 6
    item = np.tile(np.arange(n_items), n_models)
    model = np.repeat(np.arange(n_models), n_items)
    x = rng.normal(size=item.size)
    eta = -0.2 + 0.5 * x + rng.normal(0, 0.8, n_models)[model]
    y = (rng.random(item.size) < 1 / (1 + np.exp(-eta))).astype(np.int8)
    return pd.DataFrame({"item": [f"q{i:03d}" for i in item], "model": [f"m{i}" for i in model], "x": x,
                         "correct": y})


@pytest.mark.parametrize("case", ["single", "crossed", "slope", "singular"])
def test_newton_phase_reaches_the_lbfgs_optimum(monkeypatch, case):
    """The Newton phase (issue 28) ends where L-BFGS-B from lme4's start ends: estimates, θ and logLik to
    1e-8 on one random intercept, crossed intercepts, a correlated slope and a singular fit; with
    Broyden's update of the θ columns and with fresh differences at every iteration."""
    formula = {"single": "correct ~ x + (1 | item)", "crossed": "correct ~ x + (1 | item) + (1 | model)",
               "slope": "correct ~ x + (1 | item) + (1 + x | model)",
               "singular": "correct ~ x + (1 | item) + (1 | model)"}[case]
    df = _singular_log() if case == "singular" else grid_log(n_items=120, n_models=6, seed=8, slope=True)
    monkeypatch.setattr(ft, "NEWTON", False)
    old = glmer(formula, df)
    assert old.optinfo["optimizer"] == "L-BFGS-B+Newton"
    monkeypatch.setattr(ft, "NEWTON", True)
    for broyden in (True, False):
        monkeypatch.setattr(ft, "BROYDEN", broyden)
        new = glmer(formula, df)
        assert new.optinfo["optimizer"] == "Newton+polish"
        _same(old, new)
        assert new.singular == old.singular == (case == "singular")


@pytest.mark.r
def test_newton_phase_leaves_a_false_boundary_optimum_lme4_leaves_too(monkeypatch, rscript, tmp_path):
    """On this log L-BFGS-B from lme4's start could stop on the boundary (slope SD 0, a singular fit, logLik
    −443.587, before the Newton phase; the path depends on the last bits of the Cholesky solves); the
    Newton phase reaches lme4's optimum (logLik −443.122, tolPwrss 1e-13, run here)."""
    df = grid_log(n_items=120, n_models=6, seed=7, slope=True)
    formula = "correct ~ x + (1 | item) + (1 + x | model)"
    monkeypatch.setattr(ft, "NEWTON", False)
    old = glmer(formula, df)
    monkeypatch.setattr(ft, "NEWTON", True)
    new = glmer(formula, df)
    r = lme4_fit(rscript, df, formula, tmp_path, ranef=False)
    assert not new.singular and new.optinfo["optimizer"] == "Newton+polish"
    assert new.loglik >= old.loglik - 1e-8
    assert new.loglik == pytest.approx(r["loglik"], abs=1e-6)
    np.testing.assert_allclose(new.theta.values, list(r["theta"].values()), atol=2e-5)
    np.testing.assert_allclose(new.fixef.values, list(r["fixef"].values()), atol=2e-5)


def test_rx_vcov_at_the_last_evaluation_is_the_recomputed_one():
    """rx_vcov reuses the factorisation the last evaluation left (no second PIRLS); it equals the one a
    fresh model computes at the same point."""
    df = grid_log(n_items=90, n_models=5, seed=13, slope=True)
    for formula, k in (("correct ~ x + (1 | item)", 1), ("correct ~ x + (1 | item) + (1 | model)", 2),
                       ("correct ~ x + (1 | item) + (1 + x | model)", 4)):
        d = build_design(model_spec(formula), df)
        rd = dv.ResponseData.from_design(d)
        x = np.concatenate([[0.9, 0.6, 0.1, 0.3][:k], [0.1, 0.3]])
        th = float(x[0]) if k == 1 else x[:k]
        a = ft.make_model(rd, d.re)
        a.evaluate(th, x[k:])
        b = ft.make_model(rd, d.re)
        np.testing.assert_allclose(a.rx_vcov(th, x[k:]), b.rx_vcov(th, x[k:]), rtol=1e-9)
