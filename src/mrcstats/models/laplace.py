"""The Laplace approximation for families without a canonical link or with a dispersion parameter (glmmTMB's way).

For a family that gives the row log-likelihood ℓᵢ(ηᵢ; φ) and its first two derivatives in η
(``Family.loglik_rows``), with η = Xβ + offset + ZΛθ u and u ~ N(0, I) as lme4 parameterises the random effects,

    −2 log L(θ, β, φ) ≈ −2 Σᵢ ℓᵢ(η̂ᵢ) + ‖û‖² + log|H|,   H = ΛᵀZᵀ W Z Λ + I,  W = diag(−∂²ℓᵢ/∂ηᵢ²),

at the conditional mode û (Newton with step halving on −Σℓ + ‖u‖²/2 to a squared decrement of 1e-20). This is
TMB's Laplace approximation as glmmTMB uses it (Kristensen et al. 2016, J. Stat. Softw. 70(5); Brooks et al.
2017, R Journal 9(2)): TMB puts the random effects on b = Λu with density N(0, ΛΛᵀ); the Jacobian of that
linear map cancels between the density and log|H|, so the two give the same number. With one grouping factor
H is block diagonal (a q x q block per level, built by bincounts; issue 41); with several terms it is dense (at
most ``DENSE_MAX`` random effects in total). (θ, β, log φ) minimise it by L-BFGS-B, on the analytic gradient
(:meth:`LaplaceModel.gradient`) for one random intercept, else on central differences; Var(β̂) is the β block
of 2 H̃⁻¹ with H̃ the Hessian of −2 log L in (θ, β, log φ) (central differences of the analytic gradient, else
numDeriv-style Richardson differences of the objective), as TMB's ``sdreport`` inverts the Hessian of the
objective. The family's rows come from ``Family.loglik_kernel`` built once per data where it has one. The fit is
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

    def __init__(self, design, dense: bool = False):
        """``dense``: H as a dense matrix even for one grouping factor (the general path; tests compare them)."""
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
        if self.nq > DENSE_MAX and len(self.terms) > 1:     # one grouping factor: H is block diagonal
            raise ModelError(f"family {self.fam.name!r}: the native Laplace fit takes at most {DENSE_MAX} random "
                             f"effects (here {self.nq}); simplify the random-effects terms")
        self.u = np.zeros(self.nq)
        self.nfev = 0
        kern = self.fam.loglik_kernel
        self._kernel = None if kern is None else kern(self.y, self.trials)
        # one grouping factor: H is block diagonal (a q x q block per level; diagonal for a random intercept)
        self.blocks = len(self.terms) == 1 and not dense
        if self.blocks:
            t = self.terms[0]
            self.codes = np.asarray(t.codes, np.int64)
            self.L, self.q = t.nlevels, t.q
            self.Zre = np.ones((self.n, 1)) if t.Z is None else np.asarray(t.Z, float).reshape(self.n, self.q)
            self.pairs = [(r, c) for r in range(self.q) for c in range(r, self.q)]
            self.zz = [self.Zre[:, r] * self.Zre[:, c] for r, c in self.pairs]

    def lam(self, theta: np.ndarray) -> sparse.csr_matrix:
        from scipy import sparse

        blocks = []
        for k, t in enumerate(self.terms):
            T = t.factor(theta[self.th_off[k]:self.th_off[k + 1]])
            blocks.append(sparse.kron(sparse.identity(t.nlevels), sparse.csr_matrix(T)))
        return sparse.block_diag(blocks, format="csr")

    def _rows(self, eta, phi, derivs: bool = True):
        if self._kernel is not None:
            return self._kernel(eta, phi, derivs)
        return self.fam.loglik_rows(self.y, self.trials, eta, phi)

    def objective(self, theta, beta, phi, keep: bool = True) -> float:
        """−2 log L at (θ, β, φ); the modes are warm-started and kept."""
        self.nfev += 1
        eta0 = self.X @ beta + self.offset
        ops = self._block_ops(theta) if self.blocks else self._dense_ops(theta)
        zl, zlt, hess, solve_logdet = ops
        last = ()

        def pen(uu):
            nonlocal last
            last = self._rows(eta0 + zl(uu), phi)
            return -float(last[0].sum()) + 0.5 * float(uu @ uu)

        u = self.u.copy()
        f0 = pen(u)
        ll, d1, d2 = last
        tol = 1e-20 * max(1, self.nq)
        for _ in range(200):
            g = u - zlt(d1)
            fac = hess(-d2)
            if fac is None:                     # far from the mode: a Fisher-like step with W clipped at 0
                fac = hess(np.maximum(-d2, 0.0))
            step, _ = solve_logdet(fac, g)
            dec = float(g @ step)
            if dec < tol:
                break
            # the penalised-IRLS update with step halving, keeping the rows of the accepted (last evaluated) point
            u, f0 = halving_step(u, step, f0, pen)
            ll, d1, d2 = last
        else:
            raise ModelError("Laplace: the conditional modes did not converge")
        fac = hess(-d2)
        if fac is None:                         # no Laplace approximation here: the optimiser steps back
            return math.inf
        _, ldH = solve_logdet(fac, None)
        if not np.isfinite(ldH):
            return math.inf
        if keep:
            self.u = u
            self._at_mode = (eta0 + zl(u), ll, d1, d2)
        return -2.0 * float(ll.sum()) + float(u @ u) + float(ldH)

    @property
    def has_gradient(self) -> bool:
        """Whether :meth:`gradient` applies: one random intercept term ``(1 | g)``."""
        return self.blocks and self.terms[0].is_scalar

    def gradient(self, theta, beta, phi, h: float = 1e-4) -> tuple[float, np.ndarray]:
        """(−2 log L, its gradient in (θ, β, log φ)) for one random intercept term (``has_gradient``).

        With λ = θ, ℓᵢ' = ∂ℓᵢ/∂ηᵢ, wᵢ = −ℓᵢ'', Sⱼ = Σ_{i∈j} wᵢ and Hⱼ = 1 + λ²Sⱼ, the objective is
        F = −2Σℓᵢ + Σ ûⱼ² + Σ log Hⱼ at the modes ûⱼ = λ Σ_{i∈j} ℓᵢ'. The first two terms are stationary in u, so
        only their explicit derivatives count; the log-determinant changes through ηᵢ = xᵢβ + λûⱼ and φ:
        d log Hⱼ = (2λSⱼ dλ + λ² dSⱼ)/Hⱼ, dSⱼ = Σᵢ (−ℓᵢ''' dηᵢ − ∂ℓᵢ''/∂ρ dρ) (ρ = log φ), dηᵢ = xᵢ dβ + ûⱼ dλ
        + λ dûⱼ, and the implicit function theorem on the mode equation gives Hⱼ dûⱼ = −λ Σᵢ wᵢxᵢ dβ +
        (Σᵢ ℓᵢ' − λûⱼSⱼ) dλ + λ Σᵢ ∂ℓᵢ'/∂ρ dρ. The row derivatives the family does not give (ℓ''' in η, ∂/∂ρ of
        ℓ, ℓ', ℓ'') are central differences of ``loglik_rows`` per row (step ``h``), so one evaluation of F and
        four of the rows replace the 2(k + p + 1) evaluations of F of differencing the objective."""
        F = self.objective(theta, beta, phi)
        k1 = len(theta) + len(beta) + 1
        if not math.isfinite(F):
            return F, np.full(k1, np.nan)
        eta, _ll, d1, d2 = self._at_mode
        codes, L, u, lam = self.codes, self.L, self.u, float(theta[0])
        X = self.X
        w = -d2
        S = np.bincount(codes, w, minlength=L)
        H = 1.0 + lam * lam * S
        d3 = (self._rows(eta + h, phi)[2] - self._rows(eta - h, phi)[2]) / (2 * h)
        lp, d1p, d2p = self._rows(eta, phi * math.exp(h))
        lm, d1m, d2m = self._rows(eta, phi * math.exp(-h))
        lr, d1r, d2r = (lp - lm) / (2 * h), (d1p - d1m) / (2 * h), (d2p - d2m) / (2 * h)
        c = lam * lam / H                        # ∂ log Hⱼ / ∂Sⱼ
        a = -d3 * c[codes]                       # ∂ Σ log H / ∂ηᵢ
        A = np.bincount(codes, a, minlength=L)
        # β
        WX = np.stack([np.bincount(codes, w * X[:, m], minlength=L) for m in range(self.p)], axis=1)
        dudb = -lam * WX / H[:, None]
        g_beta = -2.0 * (X.T @ d1) + X.T @ a + lam * (A @ dudb)
        # θ
        D1 = np.bincount(codes, d1, minlength=L)
        dudl = (D1 - lam * u * S) / H
        g_lam = -2.0 * float(D1 @ u) + float(np.sum(2 * lam * S / H)) + float(A @ (u + lam * dudl))
        # log φ
        dudr = lam * np.bincount(codes, d1r, minlength=L) / H
        g_rho = -2.0 * float(lr.sum()) - float(c @ np.bincount(codes, d2r, minlength=L)) + lam * float(A @ dudr)
        return F, np.concatenate([[g_lam], g_beta, [g_rho]])

    def conditional(self, theta, beta, phi):
        """(η, b = Λû, Var(b | y) per term as (nlevels, q, q) blocks) at the modes of (θ, β, φ): Var(b | y) ≈
        Λ H⁻¹ Λᵀ, the Laplace approximation's conditional covariance (glmmTMB's ``condVar``)."""
        from scipy import sparse

        self.objective(theta, beta, phi)
        eta, _ll, _d1, d2 = self._at_mode
        Lam = self.lam(theta)
        b = Lam @ self.u
        if self.blocks:
            t, L, q = self.terms[0], self.L, self.q
            T = t.factor(theta)
            C = self._block_ops(theta)[2](-d2)
            Ci = np.linalg.inv(C.reshape(L, 1, 1) if q == 1 else C)        # H = C Cᵀ (q = 1: C is H itself)
            Hinv = Ci if q == 1 else np.transpose(Ci, (0, 2, 1)) @ Ci
            return eta, b, [T @ Hinv @ T.T]
        ZL = (self.Z @ Lam).tocsc()
        Hu = (ZL.T @ sparse.diags(-d2) @ ZL).toarray() + np.eye(self.nq)
        cov_b = np.asarray(Lam @ np.linalg.inv(Hu) @ Lam.T.toarray()) if self.nq else np.zeros((0, 0))
        out = []
        for kk, t in enumerate(self.terms):
            cvb = cov_b[self.offs[kk]:self.offs[kk + 1], self.offs[kk]:self.offs[kk + 1]]
            out.append(np.stack([cvb[j * t.q:(j + 1) * t.q, j * t.q:(j + 1) * t.q] for j in range(t.nlevels)]))
        return eta, b, out

    def _dense_ops(self, theta):
        """(ZΛu, ΛᵀZᵀv, W -> factor of H or None, (factor, g) -> (H⁻¹g, log|H|)) with H dense."""
        from scipy import linalg as sla
        from scipy import sparse

        ZL = (self.Z @ self.lam(theta)).tocsc()
        ZLt = ZL.T.tocsr()
        eye = np.eye(self.nq)

        def hess(w):
            H = (ZLt @ sparse.diags(w) @ ZL).toarray() + eye
            try:
                return sla.cho_factor(H, lower=True, check_finite=False)
            except np.linalg.LinAlgError:
                return None

        def solve_logdet(cho, g):
            ld = 2.0 * float(np.sum(np.log(np.diag(cho[0]))))
            return (None if g is None else sla.cho_solve(cho, g, check_finite=False)), ld

        return (lambda u: ZL @ u), (lambda v: ZLt @ v), hess, solve_logdet

    def _block_ops(self, theta):
        """The same four operations for one grouping factor: H = I + Tᵀ(Σᵢ wᵢ zᵢzᵢᵀ)T per level (q x q), with T
        the term's relative covariance factor and zᵢ the row's random-effects covariates."""
        t, codes, L, q = self.terms[0], self.codes, self.L, self.q
        T = t.factor(theta)
        if q == 1:
            lam, z = float(T[0, 0]), self.Zre[:, 0]
            scalar = t.Z is None

            def zl(u):
                return lam * u[codes] if scalar else lam * z * u[codes]

            def zlt(v):
                return lam * np.bincount(codes, v if scalar else z * v, minlength=L)

            def hess(w):
                H = 1.0 + lam * lam * np.bincount(codes, w if scalar else self.zz[0] * w, minlength=L)
                return H if bool(np.all(H > 0)) else None

            def solve_logdet(H, g):
                return (None if g is None else g / H), float(np.sum(np.log(H)))

            return zl, zlt, hess, solve_logdet
        Zre, eye = self.Zre, np.eye(q)

        def zl(u):
            B = u.reshape(L, q) @ T.T
            return np.einsum("ij,ij->i", Zre, B[codes])

        def zlt(v):
            G = np.stack([np.bincount(codes, Zre[:, r] * v, minlength=L) for r in range(q)], axis=1)
            return (G @ T).ravel()

        def hess(w):
            M = np.empty((L, q, q))
            for (r, c), zz in zip(self.pairs, self.zz):
                M[:, r, c] = M[:, c, r] = np.bincount(codes, zz * w, minlength=L)
            H = T.T @ M @ T + eye
            try:
                return np.linalg.cholesky(H)
            except np.linalg.LinAlgError:
                return None

        def solve_logdet(C, g):
            ld = 2.0 * float(np.sum(np.log(np.diagonal(C, axis1=1, axis2=2))))
            if g is None:
                return None, ld
            x = np.linalg.solve(C, g.reshape(L, q, 1))
            return np.linalg.solve(np.transpose(C, (0, 2, 1)), x).reshape(-1), ld

        return zl, zlt, hess, solve_logdet


def laplace_optimum(model: LaplaceModel, x0: np.ndarray, lower: np.ndarray, ftol: float = 1e-13):
    """Minimise −2 log L of ``model`` over x = (θ, β, log φ) from ``x0`` by L-BFGS-B on central differences
    (forward ones at a θ bound of 0); returns scipy's OptimizeResult. The fit and the bootstrap's refits
    (:mod:`mrcstats.models.confint`) both call it."""
    from scipy import optimize

    k, p = len(lower), model.p

    def obj(x):
        return model.objective(x[:k], x[k:k + p], math.exp(x[-1]))

    def fg_analytic(x):
        f0, g = model.gradient(x[:k], x[k:k + p], math.exp(x[-1]))
        for i in np.flatnonzero((lower == 0) & (x[:k] == 0)):   # F is even in λ: 0 at the bound, where the
            h = 1e-6                                              # forward difference shows the way in
            e = np.zeros(len(x))
            e[i] = h
            g[i] = (obj(x + e) - f0) / h
        return f0, g

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
    return optimize.minimize(fg_analytic if model.has_gradient else fg, x0, jac=True, method="L-BFGS-B", bounds=bounds,
                             options={"maxiter": 2000, "ftol": ftol, "gtol": 1e-7, "maxcor": 20})


__all__ = ["LaplaceModel", "laplace_optimum"]
