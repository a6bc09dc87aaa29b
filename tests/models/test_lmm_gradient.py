"""The LMM's exact derivatives (issue 41): ``LmmSystem.grad_parts`` against central differences of the profiled
deviance and of RXᵀRX, for one term, crossed terms, slopes in the first and in a later term, REML and ML; the
Satterthwaite pieces built from them against numDeriv-style Richardson differences of lmerTest's functions."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcstats.models.design import build_design
from mrcstats.models.family import GAUSSIAN
from mrcstats.models.lmm import LmmSystem
from mrcstats.models.numdiff import richardson_hessian, richardson_jacobian

from ._fits import model_spec


def _data(rows: int = 1200, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    g, h = rng.integers(0, 40, rows), rng.integers(0, 12, rows)
    x = rng.normal(size=rows)
    f = rng.choice(["a", "b", "c"], rows)
    y = (0.3 + 0.2 * x + 0.1 * (f == "b") + rng.normal(0, 0.6, 40)[g] + rng.normal(0, 0.3, 40)[g] * x
         + rng.normal(0, 0.4, 12)[h] + rng.normal(0, 0.8, rows))
    return pd.DataFrame({"y": y, "x": x, "f": f, "g": [f"g{i}" for i in g], "h": [f"h{i}" for i in h],
                         "k": rng.choice(["p", "q", "r", "s"], rows)})


FORMULAS = ["y ~ x * f + (1 + x | g) + (1 | h)", "y ~ x + (1 | g) + (1 | h)", "y ~ x + (1 + x | g)",
            "y ~ x + (1 | g) + (1 + x | h) + (1 | k)", "y ~ 1 + (1 | h) + (x | g)", "y ~ 0 + (1 | g)"]


def _theta(s: LmmSystem, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.concatenate([t.start for t in s.terms]) * 0.7 + 0.2 * rng.random(int(s.th_off[-1]))


@pytest.mark.parametrize("formula", FORMULAS)
@pytest.mark.parametrize("reml", [True, False])
def test_gradient_and_rxtrx_derivatives_match_central_differences(formula, reml):
    s = LmmSystem(build_design(model_spec(formula, GAUSSIAN), _data()), reml=reml)
    th = _theta(s)
    dev, g = s.deviance_grad(th)
    assert dev == pytest.approx(s.deviance(th), rel=1e-14)
    e = s.evaluate(th)
    dR = s.grad_parts(e, drtr=True)[3]
    for i in range(len(th)):
        d = np.zeros_like(th)
        d[i] = 1e-5
        num = (s.deviance(th + d) - s.deviance(th - d)) / 2e-5
        assert g[i] == pytest.approx(num, abs=1e-5 * max(1.0, abs(num))), (formula, i)
        if s.p:
            numR = (s.evaluate(th + d)["RXtRX"] - s.evaluate(th - d)["RXtRX"]) / 2e-5
            assert np.allclose(dR[i], numR, atol=1e-5 * (1 + np.abs(numR).max())), (formula, i)


@pytest.mark.parametrize("formula", FORMULAS[:4])
def test_satterthwaite_pieces_match_richardson(formula):
    s = LmmSystem(build_design(model_spec(formula, GAUSSIAN), _data()), reml=True)
    th = _theta(s, 2)
    e = s.evaluate(th)
    sigma = float(np.sqrt(e["r2"] / (s.n - s.p)))
    varpar = np.concatenate([th, [sigma]])
    H = s.varpar_hessian(th, sigma)
    want = richardson_hessian(s.devfun_vp, varpar)
    assert np.allclose(H, want, rtol=1e-5, atol=1e-6 * np.abs(want).max())
    J = s.covbeta_jacobian(e, sigma)
    wantJ = richardson_jacobian(s.covbeta, varpar)
    assert np.allclose(J, wantJ, rtol=1e-6, atol=1e-7 * np.abs(wantJ).max())   # numDeriv noise ~1e-9


def test_condvar_and_modes_follow_the_design_order():
    """The first term is stored component-major inside LmmSystem; what it returns is in u's (level-major) order."""
    df = _data()
    s = LmmSystem(build_design(model_spec("y ~ x + (1 + x | g) + (1 | h)", GAUSSIAN), df))
    th = _theta(s)
    e = s.evaluate(th)
    # M⁻¹ from the dense system, u = M⁻¹ Λᵀ Zᵀ (y − Xβ)
    from mrcstats.models.design import reterms_matrix

    Z, _ = reterms_matrix(s.terms, s.n)
    Z = Z.toarray()
    Lam = np.zeros((s.nq, s.nq))
    for k, T in enumerate(e["Ts"]):
        for j in range(s.nls[k]):
            o = s.offs[k] + j * s.qs[k]
            Lam[o:o + s.qs[k], o:o + s.qs[k]] = T
    M = Lam.T @ Z.T @ Z @ Lam + np.eye(s.nq)
    X, y = np.asarray(s.design.X, float), np.asarray(s.design.y, float)
    u = np.linalg.solve(M, Lam.T @ Z.T @ (y - X @ e["beta"]))
    assert np.allclose(e["u"], u, atol=1e-10)
    cv = Lam @ np.linalg.inv(M) @ Lam.T
    blocks = s.condvar(e)
    for k in range(len(s.terms)):
        for j in (0, s.nls[k] - 1):
            o = s.offs[k] + j * s.qs[k]
            assert np.allclose(blocks[k][j], cv[o:o + s.qs[k], o:o + s.qs[k]], atol=1e-12)
    assert e["ldL2"] == pytest.approx(np.linalg.slogdet(M)[1], rel=1e-12)


@pytest.mark.parametrize("formula", [FORMULAS[0], FORMULAS[4]])
def test_gradient_at_a_singular_first_term_factor(formula):
    """The coupling sum of ∂log|L|² through (A₁₂Λ₂)_j = T₁⁻ᵀD_jG_j needs T₁ invertible; with a zero on T₁'s
    diagonal the gradient takes the general path, and both agree with central differences."""
    s = LmmSystem(build_design(model_spec(formula, GAUSSIAN), _data()), reml=True)
    th = _theta(s, 3)
    for zero in (False, True):
        t = th.copy()
        if zero:
            t[s.th_off[0] + s.qs[0] - 1] = 0.0      # T₁'s last diagonal entry (θ is T's lower triangle by column)
        g = s.deviance_grad(t)[1]
        for i in range(len(t)):
            d = np.zeros_like(t)
            d[i] = 1e-5
            num = (s.deviance(t + d) - s.deviance(t - d)) / 2e-5
            assert g[i] == pytest.approx(num, abs=1e-5 * max(1.0, abs(num))), (formula, zero, i)


def _crossed(seed: int, G: int, H: int, rows: int, sg: float, sh: float, se: float) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    g, h = rng.integers(0, G, rows), rng.integers(0, H, rows)
    x = rng.normal(size=rows)
    y = (0.3 + 0.2 * x + rng.normal(0, sg, G)[g] + rng.normal(0, 0.3, G)[g] * x + rng.normal(0, sh, H)[h]
         + rng.normal(0, se, rows))
    return pd.DataFrame({"y": y, "x": x, "g": [f"g{i}" for i in g], "h": [f"h{i}" for i in h]})


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), G=st.integers(8, 60), H=st.integers(3, 20), rows=st.integers(150, 900),
       sg=st.sampled_from([0.0, 0.1, 1.0]), sh=st.sampled_from([0.0, 0.5]), se=st.sampled_from([0.3, 2.0]),
       formula=st.sampled_from(["y ~ x + (1 + x | g) + (1 | h)", "y ~ x + (1 | g) + (1 | h)"]))
def test_moment_start_never_ends_above_the_identity_start(seed, G, H, rows, sg, sh, se, formula):
    """Crossed fits start from moments of the OLS residuals (LmmSystem.moment_start, inside the bounds); fit_theta
    ends at least as low as the optimiser from lme4's start (the identity), to the deviance's rounding (on the
    boundary, where the deviance can have several local optima, it runs both)."""
    from mrcstats.models.lmm_fit import fit_theta, optimise_theta

    d = build_design(model_spec(formula, GAUSSIAN), _crossed(seed, G, H, rows, sg, sh, se))
    s = LmmSystem(d, reml=True)
    lower = np.concatenate([t.lower for t in s.terms])
    th0 = np.concatenate([t.start for t in s.terms])
    m = s.moment_start(lower)
    assert m is not None and m.shape == th0.shape and np.all(m >= lower) and np.all(np.isfinite(m))
    ident = s.deviance(optimise_theta(s, lower, th0)[0])
    s2 = LmmSystem(d, reml=True)
    fitted = s2.deviance(fit_theta(s2, lower, th0)[0])
    assert fitted <= ident + 1e-9 * max(1.0, abs(ident))
