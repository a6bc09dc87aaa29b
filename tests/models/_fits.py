"""One comparison of two GLMM fits for the model tests (out-of-core passes, crossed grid)."""
from __future__ import annotations

import numpy as np
import pytest


def same_fit(a, b, tol: float, se_rel: float = 1e-4) -> None:
    """Estimates, θ and conditional modes within ``tol``; SEs within ``se_rel`` relative (both engines take
    the SEs from a finite-difference Hessian of the analytic gradient, step 1e-6, whose rounding differs
    between rows, cells and grids at ~1e-6 to 1e-5 relative); logLik, nobs and AIC equal."""
    assert list(a.fixef.index) == list(b.fixef.index)
    assert np.max(np.abs(a.fixef.to_numpy() - b.fixef.to_numpy())) < tol
    assert np.max(np.abs(a.theta.to_numpy() - b.theta.to_numpy())) < tol
    assert np.max(np.abs(a.se.to_numpy() / b.se.to_numpy() - 1)) < se_rel
    assert a.loglik == pytest.approx(b.loglik, rel=1e-10)
    assert a.nobs == b.nobs and a.aic == pytest.approx(b.aic, rel=1e-10)
    for g in a.ranef:
        assert list(a.ranef[g].index) == list(b.ranef[g].index)
        assert np.max(np.abs(a.ranef[g]["mode"].to_numpy() - b.ranef[g]["mode"].to_numpy())) < tol


def model_spec(formula: str, family: object = "binomial"):
    """A parsed model with its family (the one track a family travels on): what ``build_design`` takes."""
    from mrcstats.models.formula import parse_formula

    return parse_formula(formula).with_family(family)
