"""The crossed grid (models.grid): lme4's Laplace fit of y ~ 1 + (1|a) + (1|b) on count tables equals the
native engine on the rows (which tests/models/test_r_parity.py holds to lme4)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mrcstats
from mrcstats.errors import InputError
from mrcstats.models import grid as gridmod
from mrcstats.models.formula import parse_formula
from mrcstats.models.grid import CrossedGrid, fit_grid
from mrcstats.models.outofcore import glmer_outofcore

from ._fits import same_fit

F = "correct ~ 1 + (1 | item) + (1 | model)"


def _rows(q1: int, q2: int, seed: int, max_trials: int = 3) -> pd.DataFrame:
    """Bernoulli rows on a q1 x q2 design with 0..max_trials-1 trials per cell (empty cells included)."""
    rng = np.random.default_rng(seed)
    a, d = rng.normal(0, 1, q2), rng.normal(0, 1.5, q1)
    n = rng.integers(0, max_trials, size=(q1, q2))
    j, k = np.nonzero(n)
    reps = n[j, k]
    j, k = np.repeat(j, reps), np.repeat(k, reps)
    p = 1 / (1 + np.exp(-(0.3 + a[k] - d[j])))
    return pd.DataFrame({"item": [f"i{x:03d}" for x in j], "model": [f"m{x:02d}" for x in k],
                         "correct": (rng.random(len(j)) < p).astype(int)})


def _tables(df: pd.DataFrame, rows: str = "item", cols: str = "model"):
    r, c = sorted(df[rows].unique()), sorted(df[cols].unique())
    ri = pd.Categorical(df[rows], categories=r).codes
    ci = pd.Categorical(df[cols], categories=c).codes
    K = np.zeros((len(r), len(c)), np.int32)
    N = np.zeros_like(K)
    np.add.at(N, (ri, ci), 1)
    np.add.at(K, (ri, ci), df["correct"].to_numpy(np.int32))
    return K, N, [r, c]


def _same_fit(a, b, tol=1e-6, se_rel=1e-4):
    same_fit(a, b, tol, se_rel)
    assert a.deviance == pytest.approx(b.deviance, rel=1e-9)
    for g in a.ranef:
        np.testing.assert_allclose(a.ranef[g].to_numpy(), b.ranef[g].to_numpy(), rtol=0, atol=tol)


def test_grid_equals_rows_fit():
    df = _rows(70, 16, seed=3)
    rows = mrcstats.glmer(F, df)
    K, N, lv = _tables(df)
    # tiny chunks: many chunks in both worker shares
    g = fit_grid(K, N, levels=lv, names=["item", "model"], spec=parse_formula(F), chunk_cells=50)
    _same_fit(rows, g, tol=1e-8, se_rel=1e-6)
    np.testing.assert_allclose(g.resid_quantiles.to_numpy(), rows.resid_quantiles.to_numpy(), rtol=1e-9)
    assert g.ngroups == rows.ngroups and list(g.theta.index) == list(rows.theta.index)
    assert g.varcorr["sd"].to_numpy() == pytest.approx(rows.varcorr["sd"].to_numpy(), abs=1e-8)


def test_gradient_is_the_deviance_derivative():
    df = _rows(30, 8, seed=4)
    K, N, _ = _tables(df)
    m = CrossedGrid(K, N, chunk_cells=40)
    x = np.array([0.9, 0.6, 0.2])
    _D, g = m.evaluate(x[:2], x[2:])
    h = 1e-6
    for i in range(3):
        e = np.zeros(3)
        e[i] = h
        fd = (m.evaluate((x + e)[:2], (x + e)[2:], grad=False)[0]
              - m.evaluate((x - e)[:2], (x - e)[2:], grad=False)[0]) / (2 * h)
        assert g[i] == pytest.approx(fd, rel=1e-5, abs=1e-5)


def test_subgrid_start_reaches_the_same_optimum(monkeypatch):
    df = _rows(120, 30, seed=5, max_trials=2)
    K, N, lv = _tables(df)
    spec = parse_formula(F)
    plain = fit_grid(K, N, levels=lv, names=["item", "model"], spec=spec)
    monkeypatch.setattr(gridmod, "START_CELLS", 100)
    monkeypatch.setattr(gridmod, "START_SHAPE", (40, 10))
    started = fit_grid(K, N, levels=lv, names=["item", "model"], spec=spec)
    assert "start" in started.optinfo and "start" not in plain.optinfo
    _same_fit(plain, started, tol=1e-6)


def test_rx_vcov_close_to_hessian_vcov():
    df = _rows(60, 12, seed=6)
    K, N, lv = _tables(df)
    g = fit_grid(K, N, levels=lv, names=["item", "model"], spec=parse_formula(F))
    m = CrossedGrid(K, N)
    rx = m.rx_vcov(g.theta.to_numpy(), g.fixef.to_numpy())
    assert rx.shape == (1, 1) and rx[0, 0] == pytest.approx(g.vcov.iloc[0, 0], rel=0.05)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(st.integers(1, 6), st.integers(1, 5), st.integers(0, 10_000))
def test_pearson_quantiles_are_the_rows_quantiles(q1, q2, seed):
    rng = np.random.default_rng(seed)
    N = rng.integers(0, 4, size=(q1, q2)).astype(np.int32)
    N[0, 0] = max(N[0, 0], 1)
    K = rng.binomial(N, 0.5).astype(np.int32)
    m = CrossedGrid(K, N, chunk_cells=3)
    theta, beta = np.array([0.7, 1.3]), np.array([0.4])
    u = rng.normal(size=q1 + q2)
    eta = beta[0] + theta[0] * u[:q1, None] + theta[1] * u[None, q1:]
    mu = 1 / (1 + np.exp(-eta))
    res = []
    for j in range(q1):
        for k in range(q2):
            s = np.sqrt(mu[j, k] * (1 - mu[j, k]))
            res += [(1 - mu[j, k]) / s] * int(K[j, k]) + [-mu[j, k] / s] * int(N[j, k] - K[j, k])
    probs = [0, .25, .5, .75, 1, .1, .9]
    want = np.quantile(res, probs)
    np.testing.assert_allclose(m.pearson_quantiles(theta, beta, u, probs), want, rtol=1e-12, atol=1e-12)
    with pytest.MonkeyPatch.context() as mp:     # coarse histograms: bins split again, exact sort inside
        mp.setattr(gridmod, "QUANTILE_BINS", 3)
        mp.setattr(gridmod, "QUANTILE_EXACT", 1)
        np.testing.assert_allclose(m.pearson_quantiles(theta, beta, u, probs), want, rtol=1e-12, atol=1e-12)


def test_outofcore_grid_orientation_numeric_levels_and_cells_method():
    """More models than items (the grid's rows are the models, as lme4 orders the terms), numeric model
    ids (numeric level order), a missing response; the grid, the cell table and the rows agree."""
    df = _rows(9, 14, seed=7)
    df["model"] = df["model"].str[1:].astype(int) * 3
    df["correct"] = df["correct"].astype("boolean")
    df.loc[::17, "correct"] = pd.NA
    f = "correct ~ 1 + (1 | item) + (1 | model)"
    rows = mrcstats.glmer(f, df.dropna())
    g = glmer_outofcore(f, df, backend="memory")
    c = glmer_outofcore(f, df, backend="memory", method="cells")
    assert g.engine == "native (memory grid)" and c.engine == "native (memory collapse)"
    assert g.optinfo["collapse"]["grid"] == [14, 9]
    assert g.optinfo["collapse"]["dropped"]["response"] == int(df["correct"].isna().sum())
    assert list(g.ranef["model"].index) == [str(3 * x) for x in range(14)]
    _same_fit(rows, g, tol=1e-8, se_rel=1e-6)
    _same_fit(rows, c, tol=1e-6)
    with pytest.raises(InputError, match="method"):
        glmer_outofcore(f, df, backend="memory", method="fast")
