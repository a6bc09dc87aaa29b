"""The Laplace approximation for families without a canonical link or with a dispersion parameter (glmmTMB's way).

For a family that gives the row log-likelihood ℓᵢ(ηᵢ; φ) and its first two derivatives in η
(``Family.loglik_rows``), with η = Xβ + offset + ZΛθ u and u ~ N(0, I) as lme4 parameterises the random effects,

    −2 log L(θ, β, φ) ≈ −2 Σᵢ ℓᵢ(η̂ᵢ) + ‖û‖² + log|H|,   H = ΛᵀZᵀ W Z Λ + I,  W = diag(−∂²ℓᵢ/∂ηᵢ²),

at the conditional mode û (Newton with step halving on −Σℓ + ‖u‖²/2 to a squared decrement of 1e-20). This is
TMB's Laplace approximation as glmmTMB uses it (Kristensen et al. 2016, J. Stat. Softw. 70(5); Brooks et al.
2017, R Journal 9(2)): TMB puts the random effects on b = Λu with density N(0, ΛΛᵀ); the Jacobian of that
linear map cancels between the density and log|H|, so the two give the same number. H is dense here (the
random-effects terms have at most ``DENSE_MAX`` effects in total). (θ, β, log φ) minimise it by L-BFGS-B on
central differences; Var(β̂) is the β block of 2 H̃⁻¹ with H̃ the Hessian of −2 log L in (θ, β, log φ)
(numDeriv-style Richardson differences), as TMB's ``sdreport`` inverts the Hessian of the objective. The fit is
:func:`mrcstats.models.native.fit_laplace`; the bootstrap's refits (:mod:`.confint`) call :func:`laplace_optimum`
too (this module builds no result, so confint can import it without a circle).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from mrcstats.errors import ModelError
from mrcstats.models.design import reterms_matrix
from mrcstats.models.deviance import halving_step

if TYPE_CHECKING:        # scipy is imported in the functions: models/native.py imports this module on every
    from scipy import sparse  # fit, the binomial ones that never call it too (tests/cli/test_startup.py)

DENSE_MAX = 4000


class LaplaceModel:
    """−2 log L of a design whose family has ``loglik_rows`` (see the module docstring)."""

    def __init__(self, design):
        self.design = design
        self.fam = design.family
        self.X = np.asarray(design.X, float)
        self.n, self.p = self.X.shape
        self.trials = np.asarray(design.weights, float)
        self.y = np.asarray(design.y, float)
        self.offset = np.zeros(self.n) if design.offset is None else np.asarray(design.offset, float)
        self.terms = list(design.re)
        self.nth = [t.ntheta for t in self.terms]
        self.th_off = np.concatenate([[0], np.cumsum(self.nth)]).astype(int)
        Z, self.offs = reterms_matrix(self.terms, self.n)
        self.Z = Z.tocsr()
        self.nq = int(self.offs[-1])
        if self.nq > DENSE_MAX:
            raise ModelError(f"family {self.fam.name!r}: the native Laplace fit takes at most {DENSE_MAX} random "
                             f"effects (here {self.nq}); simplify the random-effects terms")
        self.u = np.zeros(self.nq)
        self.nfev = 0

    def lam(self, theta: np.ndarray) -> sparse.csr_matrix:
        from scipy import sparse

        blocks = []
        for k, t in enumerate(self.terms):
            T = t.factor(theta[self.th_off[k]:self.th_off[k + 1]])
            blocks.append(sparse.kron(sparse.identity(t.nlevels), sparse.csr_matrix(T)))
        return sparse.block_diag(blocks, format="csr")

    def _rows(self, eta, phi):
        return self.fam.loglik_rows(self.y, self.trials, eta, phi)

    def objective(self, theta, beta, phi, keep: bool = True) -> float:
        """−2 log L at (θ, β, φ); the modes are warm-started and kept."""
        from scipy import linalg as sla
        from scipy import sparse

        self.nfev += 1
        ZL = (self.Z @ self.lam(theta)).tocsc()
        eta0 = self.X @ beta + self.offset
        u = self.u.copy()

        def pen(uu):
            ll, _, _ = self._rows(eta0 + ZL @ uu, phi)
            return -float(ll.sum()) + 0.5 * float(uu @ uu)

        f0 = pen(u)
        for _ in range(200):
            ll, d1, d2 = self._rows(eta0 + ZL @ u, phi)
            g = u - ZL.T @ d1
            H = (ZL.T @ sparse.diags(-d2) @ ZL).toarray() + np.eye(self.nq)
            try:
                cho = sla.cho_factor(H, lower=True, check_finite=False)
            except np.linalg.LinAlgError:       # far from the mode: a Fisher-like step with W clipped at 0
                H = (ZL.T @ sparse.diags(np.maximum(-d2, 0.0)) @ ZL).toarray() + np.eye(self.nq)
                cho = sla.cho_factor(H, lower=True, check_finite=False)
            step = sla.cho_solve(cho, g, check_finite=False)
            dec = float(g @ step)
            if dec < 1e-20 * max(1, self.nq):
                break
            u, f0 = halving_step(u, step, f0, pen)
        else:
            raise ModelError("Laplace: the conditional modes did not converge")
        ll, d1, d2 = self._rows(eta0 + ZL @ u, phi)
        H = (ZL.T @ sparse.diags(-d2) @ ZL).toarray() + np.eye(self.nq)
        sign, ldH = np.linalg.slogdet(H)
        if sign <= 0:                           # no Laplace approximation here: the optimiser steps back
            return math.inf
        if keep:
            self.u = u
        return -2.0 * float(ll.sum()) + float(u @ u) + float(ldH)


def laplace_optimum(model: LaplaceModel, x0: np.ndarray, lower: np.ndarray, ftol: float = 1e-13):
    """Minimise −2 log L of ``model`` over x = (θ, β, log φ) from ``x0`` by L-BFGS-B on central differences
    (forward ones at a θ bound of 0); returns scipy's OptimizeResult. The fit and the bootstrap's refits
    (:mod:`mrcstats.models.confint`) both call it."""
    from scipy import optimize

    k, p = len(lower), model.p

    def obj(x):
        return model.objective(x[:k], x[k:k + p], math.exp(x[-1]))

    def fg(x):
        f0 = obj(x)
        g = np.empty(len(x))
        for i in range(len(x)):
            h = 1e-6 * max(1.0, abs(x[i]))
            e = np.zeros(len(x))
            e[i] = h
            if i < k and lower[i] == 0 and x[i] - h < 0:
                g[i] = (obj(x + e) - f0) / h
            else:
                g[i] = (obj(x + e) - obj(x - e)) / (2 * h)
        return f0, g

    bounds = [(0.0 if lo == 0 else None, None) for lo in lower] + [(None, None)] * (p + 1)
    return optimize.minimize(fg, x0, jac=True, method="L-BFGS-B", bounds=bounds,
                             options={"maxiter": 2000, "ftol": ftol, "gtol": 1e-7, "maxcor": 20})


__all__ = ["LaplaceModel", "laplace_optimum"]
