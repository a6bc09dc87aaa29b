"""Linear mixed models as lme4's ``lmer`` (REML or ML), with lmerTest's Satterthwaite t-tests.

Model (Bates, Mächler, Bolker & Walker 2015, J. Stat. Softw. 67(1), sec. 3): y = Xβ + ZΛθ u + ε,
u ~ N(0, σ²I), ε ~ N(0, σ²I), Λθ block-diagonal (per random-effects term and level, the term's
lower-triangular factor T, as :class:`~mrcstats.models.design.ReTerm`). lme4's penalised least squares
(PLS) for fixed θ solves

    [M      ΛᵀZᵀX] [u]   [ΛᵀZᵀy]        M = ΛᵀZᵀZΛ + I = L Lᵀ,
    [XᵀZΛ   XᵀX  ] [β] = [Xᵀy  ],       RXᵀRX = XᵀX − XᵀZΛ M⁻¹ ΛᵀZᵀX,

with the penalised residual sum of squares r²(θ) = ‖y − Xβ̂ − ZΛû‖² + ‖û‖² = yᵀy − ûᵀΛᵀZᵀy − β̂ᵀXᵀy, and
the profiled deviance (lme4 ``mkLmerDevfun``; eq. 34 and 41 of the paper)

    ML:    d(θ) = log|L|² + n (1 + log(2π r²/n))
    REML:  d(θ) = log|L|² + log|RX|² + (n − p)(1 + log(2π r²/(n − p))),

σ̂² = r²/n (ML) or r²/(n − p) (REML); Var(β̂) = σ̂² (RXᵀRX)⁻¹ (lme4's ``vcov``). Everything after one pass
over the rows (the cross-products ZᵀZ, ZᵀX, Zᵀy, XᵀX, Xᵀy, yᵀy) is in the dimension of the random
effects: the first term (most levels) is block-diagonal in M, one q₁ x q₁ block per level (closed forms
for q₁ ≤ 2; stored component-major, levels last, so every per-level operation runs over contiguous vectors),
the other terms are eliminated through a dense Schur complement S, as the GLMM kernels
(:class:`~mrcstats.models.deviance.GeneralModel`) do — MixedModels.jl's blocked Cholesky factor with a
diagonal (crossed intercepts) or block-diagonal (slopes) first block. θ minimises d by L-BFGS-B on the exact
gradient (:meth:`LmmSystem.grad_parts`: ∂log|L|² from the diagonal blocks of M⁻¹ΛᵀZᵀZ, ∂r² by the envelope
theorem, ∂log|RX|² from ∂RXᵀRX; lme4: derivative-free BOBYQA), polished by Newton steps whose Hessian is
forward differences of that gradient.

Satterthwaite degrees of freedom as lmerTest 3.1 (``as_lmerModLmerTest``, ``contest1D``; Kuznetsova,
Brockhoff & Christensen 2017, J. Stat. Softw. 82(13)): with the variance parameters φ = (θ, σ) and the
unprofiled deviance D(φ) (lmerTest's ``devfun_vp``: log|L|² + r²/σ² + n log(2πσ²), REML adding
log|RX|² − p log(2πσ²)), A = 2 H⁻¹ (H the Hessian of D at φ̂; eigenvalues ≤ 1e-8 left out, as lmerTest),
C(φ) = σ² (RXᵀRX(θ))⁻¹ and for each coefficient (contrast l) ν = 2 (lᵀCl)² / (gᵀ A g), g_k = lᵀ ∂C/∂φ_k l;
lmerTest differentiates numerically (numDeriv's Richardson ``hessian`` and ``jacobian``); here the Jacobian of
C is exact (−σ² R⁻¹ ∂RXᵀRX R⁻¹, 2σ R⁻¹) and the Hessian's θθ block central differences of the exact gradient
(its σ row exact), the same numbers to about 1e-7 relative from a tenth of the deviance evaluations.
p = 2 P(T_ν > |t|).
"""
from __future__ import annotations

import functools
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import linalg as sla
from scipy import optimize, special

from mrcstats._dist import norm_ppf, t_ppf, t_sf
from mrcstats._pformat import format_pval_columns
from mrcstats._repr import Result
from mrcstats.errors import InputError, ModelError
from mrcstats.models._checks import check_level
from mrcstats.models.design import reterms_matrix
from mrcstats.models.family import GAUSSIAN
from mrcstats.models.family_table import CAPABILITIES, Capabilities, require
from mrcstats.models.formula import ModelSpec
from mrcstats.models.numdiff import richardson_hessian, richardson_jacobian  # noqa: F401 (tests import them here)
from mrcstats.models.results import _varcorr_lines, ranef_dict

SINGULAR_TOL = 1e-4
DENSE_MAX = 6000             # random effects outside the first term (dense Schur complement)
PAIRS_MAX = 30_000_000       # first-term x other-term coupling entries kept dense


# ----------------------------------------------------------------------------- the PLS system


def _along(T: np.ndarray, X: np.ndarray, axis: int = 0) -> np.ndarray:
    """T applied along one axis of X: out[..., a, ...] = Σ_b T[a, b] X[..., b, ...] (T: q x q, small), as scaled
    sums of X's slices (contiguous for axis 0, the component-major layout; no transposed copies)."""
    q = T.shape[0]
    if q == 1:
        return X * T[0, 0]
    Xv = np.moveaxis(X, axis, 0)
    out = np.empty(X.shape)
    ov = np.moveaxis(out, axis, 0)
    for a in range(q):
        acc = Xv[0] * T[a, 0]
        for b in range(1, q):
            if T[a, b] != 0.0:
                acc += Xv[b] * T[a, b]
        ov[a] = acc
    return out


def _sblk(M: np.ndarray, X: np.ndarray, lead: bool = False) -> np.ndarray:
    """Per level j: M[:, :, j] @ X[:, :, j] for M (q x q x levels) and X (q x m x levels), or with ``lead``
    X (q x levels x m): the first-term blocks component-major, every operation on contiguous runs."""
    q = M.shape[0]
    out = np.empty(X.shape)
    for a in range(q):
        acc = (M[a, 0][:, None] if lead else M[a, 0]) * X[0]
        for b in range(1, q):
            acc += (M[a, b][:, None] if lead else M[a, b]) * X[b]
        out[a] = acc
    return out


def _lsum(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """out[i, j] = Σ X[i, ...] Y[j, ...] (the sum over the levels and any middle axis), as dot products of
    contiguous slices."""
    Xf = X.reshape(X.shape[0], -1)
    Yf = Y.reshape(Y.shape[0], -1)
    return Xf @ Yf.T


def _combine(W: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """W[:, 0] − Σ_k β_k W[:, 1 + k] for W (q x (1 + p) x levels)."""
    out = W[:, 0, :].copy()
    for k, b in enumerate(beta):
        out -= b * W[:, 1 + k, :]
    return out


def _sinv(D: np.ndarray) -> tuple[np.ndarray, float]:
    """Inverses and the summed log-determinant of SPD blocks D[:, :, j] (q x q x levels); closed forms for
    q <= 2."""
    q = D.shape[0]
    if q == 1:
        return 1.0 / D, float(np.log(D[0, 0]).sum())
    if q == 2:
        a, b, c = D[0, 0], D[0, 1], D[1, 1]
        det = a * c - b * b
        out = np.empty_like(D)
        out[0, 0] = c / det
        out[1, 1] = a / det
        out[0, 1] = out[1, 0] = -b / det
        return out, float(np.log(det).sum())
    Dm = np.ascontiguousarray(D.transpose(2, 0, 1))
    sign, ld = np.linalg.slogdet(Dm)
    if np.any(sign <= 0):  # pragma: no cover
        raise ModelError("lmer: a random-effects block is not positive definite")
    return np.ascontiguousarray(np.linalg.inv(Dm).transpose(1, 2, 0)), float(ld.sum())


class LmmSystem:
    """The cross-products of one LMM design and lme4's profiled deviance as a function of θ.

    ``evaluate(θ)`` returns a dict: ``dev`` (REML or ML criterion), ``r2``, ``ldL2``, ``ldRX2``, ``beta``,
    ``u`` (spherical modes), ``RXtRX``.
    """

    def __init__(self, design, reml: bool = True):
        self.design = design
        self.reml = bool(reml)
        X, y = np.asarray(design.X, float), np.asarray(design.y, float)
        self.n, self.p = X.shape
        self.terms = list(design.re)
        self.nth = [t.ntheta for t in self.terms]
        self.th_off = np.concatenate([[0], np.cumsum(self.nth)]).astype(int)
        self.qs = [t.q for t in self.terms]
        self.nls = [t.nlevels for t in self.terms]
        Z, self.offs = reterms_matrix(self.terms, self.n)
        self.nq = int(self.offs[-1])
        self.m1 = int(self.offs[1])        # first term's random effects
        self.Q2 = self.nq - self.m1
        if self.Q2 > DENSE_MAX:
            raise ModelError(f"lmer: the random-effects terms after the first have {self.Q2} random effects "
                             f"(limit {DENSE_MAX} for the dense Schur complement); simplify the model")
        if self.Q2 and self.m1 * self.Q2 > PAIRS_MAX:
            raise ModelError(f"lmer: the coupling of the random-effects terms would have {self.m1 * self.Q2} "
                             f"entries (limit {PAIRS_MAX}); simplify the model")
        ZtZ = (Z.T @ Z).tocsr()
        self.ZtX = np.asarray(Z.T @ X)
        self.Zty = np.asarray(Z.T @ y).ravel()
        self.XtX = X.T @ X
        self.Xty = X.T @ y
        self.yty = float(y @ y)
        self.response = _response_name(design)
        if self.n and np.all(y == y[0]):
            raise ModelError(f"lmer: the response {self.response} is constant (every one of the {self.n} rows is "
                             f"{y[0]:g}): there is no variance to split between the groups and the residual (lme4 "
                             f"returns a singular fit without a covariance matrix); check the response column")
        q1, n1 = self.qs[0], self.nls[0]
        # first-term diagonal blocks of ZᵀZ, component-major (q1 x q1 x levels: every per-level operation is on
        # contiguous vectors over the levels)
        blk = ZtZ[:self.m1, :self.m1].tocoo()
        A11 = np.zeros((q1, q1, n1))
        A11[blk.row % q1, blk.col % q1, blk.row // q1] = blk.data
        self.A11 = A11
        # the first term's rows in component-major order (row c·n1 + j holds level j's column c)
        self._perm1 = (np.arange(n1)[None, :] * q1 + np.arange(q1)[:, None]).ravel()
        self.A12 = (ZtZ[:self.m1, self.m1:].toarray()[self._perm1] if self.Q2 else None)
        self.A22 = ZtZ[self.m1:, self.m1:].toarray() if self.Q2 else None
        self.ZtR = np.column_stack([self.Zty, self.ZtX])         # Zᵀ[y X], one Λᵀ product per evaluation
        self._ztr = (None, None)
        self.nfev = 0
        self._cache: dict[bytes, tuple] = {}

    # ------------------------------------------------------------------ layout
    def _split(self, R: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A (q x m) array in u's order as (first term: q1 x m x levels, the other terms: Q2 x m)."""
        n1, q1 = self.nls[0], self.qs[0]
        R1 = np.ascontiguousarray(R[:self.m1].reshape(n1, q1, -1).transpose(1, 2, 0))
        return R1, np.ascontiguousarray(R[self.m1:])

    def _join(self, R1: np.ndarray, R2: np.ndarray) -> np.ndarray:
        """The inverse of :meth:`_split` (u's order)."""
        return np.concatenate([R1.transpose(2, 0, 1).reshape(self.m1, -1), R2])

    def _ztr_split(self) -> tuple[np.ndarray, np.ndarray]:
        if self._ztr[0] is not self.ZtR:          # (a profile's reduced system replaces ZtR)
            self._ztr = (self.ZtR, self._split(self.ZtR))
        return self._ztr[1]

    def _as2d(self, X1: np.ndarray) -> np.ndarray:
        """q1 x m x levels -> (q1·levels) x m (component-major rows, as A12's)."""
        return X1.transpose(0, 2, 1).reshape(self.m1, -1)

    def _as3d(self, X: np.ndarray) -> np.ndarray:
        """(q1·levels) x m -> q1 x m x levels."""
        return np.ascontiguousarray(X.reshape(self.qs[0], self.nls[0], -1).transpose(0, 2, 1))

    # ------------------------------------------------------------------ Λ
    def factors(self, theta: np.ndarray) -> list[np.ndarray]:
        return [t.factor(theta[self.th_off[k]:self.th_off[k + 1]]) for k, t in enumerate(self.terms)]

    def _lam(self, Ts: list[np.ndarray], v: np.ndarray) -> np.ndarray:
        """Λ v."""
        out = np.empty_like(v, dtype=float)
        for k, T in enumerate(Ts):
            sl = slice(self.offs[k], self.offs[k + 1])
            blk = v[sl].reshape(self.nls[k], self.qs[k], -1)
            out[sl] = _along(T, blk, 1).reshape(v[sl].shape)
        return out

    def _lam2(self, Ts, R2: np.ndarray, transpose: bool = False) -> np.ndarray:
        """Λ₂ R2 (or Λ₂ᵀ R2) for the other terms' rows R2 (Q2 x m)."""
        out = np.empty_like(R2)
        for k in range(1, len(self.terms)):
            a, b = self.offs[k] - self.m1, self.offs[k + 1] - self.m1
            T = Ts[k].T if transpose else Ts[k]
            out[a:b] = _along(T, R2[a:b].reshape(self.nls[k], self.qs[k], -1), 1).reshape(b - a, -1)
        return out

    def _factor(self, Ts):
        """D⁻¹ (first-term blocks of M, q1 x q1 x levels), C = Λ₁ᵀA₁₂Λ₂, G = D⁻¹C, the Cholesky factor of
        S = Λ₂ᵀA₂₂Λ₂ + I − CᵀG, log|M|."""
        T1 = Ts[0]
        q1 = self.qs[0]
        TA = _along(T1.T, self.A11)                         # T₁ᵀA_j
        D = _along(T1.T, np.ascontiguousarray(TA.transpose(1, 0, 2)))              # T₁ᵀA_jT₁ (A_j symmetric)
        for a in range(q1):
            D[a, a] += 1.0
        Dinv, ld = _sinv(D)
        if not self.Q2:
            return Dinv, None, None, None, ld
        n1 = self.nls[0]
        C3 = _along(T1.T, self.A12.reshape(q1, n1, self.Q2))   # Λ₁ᵀA₁₂ (q1 x levels x Q2)
        C = self._right_lam2(Ts, C3.reshape(self.m1, self.Q2))
        B = self._right_lam2(Ts, self._right_lam2(Ts, self.A22).T) + np.eye(self.Q2)   # Λ₂ᵀ A₂₂ Λ₂ + I
        G = _sblk(Dinv, C.reshape(q1, n1, self.Q2), lead=True).reshape(self.m1, self.Q2)
        S = B - C.T @ G
        try:
            cho = sla.cho_factor(S, lower=True, check_finite=False)
        except np.linalg.LinAlgError:  # pragma: no cover
            raise ModelError("lmer: the random-effects system is not positive definite") from None
        ld += 2.0 * float(np.log(np.diag(cho[0])).sum())
        return Dinv, C, G, cho, ld

    def _right_lam2(self, Ts, A: np.ndarray) -> np.ndarray:
        """A Λ₂ for A (m x Q2): the other terms' factors applied to A's columns."""
        out = np.empty_like(A)
        for k in range(1, len(self.terms)):
            a, b = self.offs[k] - self.m1, self.offs[k + 1] - self.m1
            if self.qs[k] == 1:
                np.multiply(A[:, a:b], Ts[k][0, 0], out=out[:, a:b])
                continue
            blk = A[:, a:b].reshape(A.shape[0], self.nls[k], self.qs[k])
            out[:, a:b] = _along(Ts[k].T, blk, 2).reshape(A.shape[0], b - a)
        return out

    def _solve(self, fac, R1: np.ndarray, R2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """M⁻¹ [R1; R2] in the split layout."""
        Dinv, C, G, cho, _ld = fac
        if C is None:
            return _sblk(Dinv, R1), R2
        y2 = sla.cho_solve(cho, R2 - G.T @ self._as2d(R1), check_finite=False)
        return _sblk(Dinv, R1 - self._as3d(C @ y2)), y2

    # ------------------------------------------------------------------ the deviance
    def evaluate(self, theta: np.ndarray) -> dict[str, Any]:
        self.nfev += 1
        theta = np.asarray(theta, float)
        Ts = self.factors(theta)
        fac = self._factor(Ts)
        Z1, Z2 = self._ztr_split()
        B1 = _along(Ts[0].T, Z1)                               # Λᵀ Zᵀ[y X]
        B2 = self._lam2(Ts, Z2, transpose=True)
        W1, W2 = self._solve(fac, B1, B2)
        p = self.p
        # (Λᵀ Zᵀ[y X])ᵀ M⁻¹ (Λᵀ Zᵀ[y X]), (1 + p) x (1 + p)
        K = B2.T @ W2
        for a in range(self.qs[0]):
            K = K + B1[a] @ W1[a].T
        RtR = self.XtX - K[1:, 1:]
        rhs = self.Xty - K[1:, 0]
        if p:
            try:
                cR = sla.cho_factor(RtR, lower=False, check_finite=False)
            except np.linalg.LinAlgError:
                raise ModelError("lmer: the fixed-effects cross-product is not positive definite") from None
            beta = sla.cho_solve(cR, rhs, check_finite=False)
            ldRX2 = 2.0 * float(np.log(np.abs(np.diag(cR[0]))).sum())
        else:
            beta, ldRX2 = np.zeros(0), 0.0
        r2 = self.yty - float(K[0, 0]) - float(rhs @ beta)
        u1 = _combine(W1, beta)
        u2 = W2[:, 0] - W2[:, 1:] @ beta
        u = np.concatenate([u1.T.ravel(), u2])
        if not r2 > 1e-12 * self.yty:   # below the precision of the difference above: no residual variance
            raise ModelError(f"lmer: the response {self.response} has no residual variance (the residual sum of "
                             f"squares is below 1e-12 of the response's): the fixed and random effects fit it "
                             f"exactly (e.g. it is constant within every level of "
                             f"{', '.join(repr(t.name) for t in self.terms)}), so the residual SD is 0 and the "
                             f"likelihood unbounded (lme4 warns the model is nearly unidentifiable); check the "
                             f"response, or leave out the term that explains it")
        ldL2 = fac[4]
        n = self.n
        if self.reml:
            nmp = n - p
            dev = ldL2 + ldRX2 + nmp * (1.0 + math.log(2 * math.pi * r2 / nmp))
        else:
            dev = ldL2 + n * (1.0 + math.log(2 * math.pi * r2 / n))
        return {"dev": dev, "r2": r2, "ldL2": ldL2, "ldRX2": ldRX2, "beta": beta, "u": u, "RXtRX": RtR,
                "fac": fac, "Ts": Ts, "W": (W1, W2), "u_split": (u1, u2)}

    def deviance(self, theta) -> float:
        return self.evaluate(theta)["dev"]

    def deviance_grad(self, theta) -> tuple[float, np.ndarray]:
        """d(θ) and its exact gradient (:meth:`grad_parts`)."""
        e = self.evaluate(theta)
        dL, dr2, dRX, _ = self.grad_parts(e)
        g = dL + (self.n - self.p if self.reml else self.n) / e["r2"] * dr2
        if self.reml:
            g = g + dRX
        return e["dev"], g

    def grad_parts(self, e: dict[str, Any], drtr: bool = False):
        """The exact derivatives in θ of log|L|², r² and log|RX|² at an :meth:`evaluate` result, and (``drtr``)
        of RXᵀRX, one array per θ entry.

        With A = ZᵀZ, B = ZᵀX, c = Zᵀy, W_X = M⁻¹ΛᵀB, û, β̂ the PLS solution and dΛ = ∂Λ/∂θ_k (the term's
        block-diagonal E_ij): ∂log|L|² = 2 tr(M⁻¹ΛᵀA dΛ), the diagonal blocks of M⁻¹ΛᵀA from the block
        inverse [[D⁻¹ + GS⁻¹Gᵀ, −GS⁻¹], [−S⁻¹Gᵀ, S⁻¹]] (G = D⁻¹C); ∂r² = −2 resᵀ dΛ û with res = c − Bβ̂ − AΛû
        (the envelope theorem: β̂, û minimise r²); ∂RXᵀRX = −(Vᵀ dΛ W_X + W_Xᵀ dΛᵀ V) with V = B − AΛW_X, so
        ∂log|RX|² = −2 tr((RXᵀRX)⁻¹ Vᵀ dΛ W_X) (Bates et al. 2015, sec. 3, differentiated)."""
        Ts, beta = e["Ts"], e["beta"]
        W1, W2 = e["W"]
        u1, u2 = e["u_split"]
        Dinv, _C, G, cho, _ld = e["fac"]
        n1, q1, p, m1, Q2 = self.nls[0], self.qs[0], self.p, self.m1, self.Q2
        T1 = Ts[0]
        Z1, Z2 = self._ztr_split()
        # A Λ W in the split layout
        Y1 = _along(T1, W1)
        Y2 = self._lam2(Ts, W2)
        AY1 = _sblk(self.A11, Y1)
        if Q2:
            AY1 += self._as3d(self.A12 @ Y2)
            AY2 = self.A12.T @ self._as2d(Y1) + self.A22 @ Y2
        else:
            AY2 = Y2
        Ri = np.linalg.inv(e["RXtRX"]) if p else np.zeros((0, 0))
        # first term
        ZA1 = Z1 - AY1
        res1 = _combine(ZA1, beta)
        V1 = ZA1[:, 1:, :]
        Wx1 = W1[:, 1:, :]
        F1 = np.stack([Ri @ Wx1[c] for c in range(q1)])                  # (W_X Ri) per component
        TA = _along(T1.T, self.A11)
        Q = [sum(Dinv[:, s] @ TA[s].T for s in range(q1))]                  # Σ D_j⁻¹ T₁ᵀ A_j
        RU = [res1 @ u1.T]
        VF = [_lsum(V1, F1)]
        if Q2:
            Sinv = sla.cho_solve(cho, np.eye(Q2), check_finite=False)
            GSi = G @ Sinv
            LG = _along(T1, G.reshape(q1, n1, Q2))
            H1t = _sblk(self.A11, LG, lead=True).reshape(m1, Q2) - self._right_lam2(Ts, self.A12)  # A₁₁Λ₁G − A₁₂Λ₂
            Q[0] = Q[0] + _lsum(GSi.reshape(q1, -1), H1t.reshape(q1, -1))
            C0 = _along(T1.T, self.A12.reshape(q1, n1, Q2)).reshape(m1, Q2)   # Λ₁ᵀA₁₂
            H2 = self._right_lam2(Ts, self.A22).T - G.T @ C0                               # Λ₂ᵀA₂₂ − GᵀΛ₁ᵀA₁₂
            res2 = (Z2[:, 0] - AY2[:, 0]) - (Z2[:, 1:] - AY2[:, 1:]) @ beta
            V2 = Z2[:, 1:] - AY2[:, 1:]
            F2 = W2[:, 1:] @ Ri
            for k in range(1, len(self.terms)):
                a, b = self.offs[k] - m1, self.offs[k + 1] - m1
                nk, qk = self.nls[k], self.qs[k]
                Q.append(np.tensordot(Sinv[a:b].reshape(nk, qk, Q2), H2[:, a:b].T.reshape(nk, qk, Q2),
                                      axes=([0, 2], [0, 2])))
                RU.append(res2[a:b].reshape(nk, qk).T @ u2[a:b].reshape(nk, qk))
                VF.append(np.tensordot(V2[a:b].reshape(nk, qk, p), F2[a:b].reshape(nk, qk, p),
                                       axes=([0, 2], [0, 2])))
        nth = int(self.th_off[-1])
        dL, dr2, dRX = np.empty(nth), np.empty(nth), np.empty(nth)
        dR = [] if drtr else None
        for k, t in enumerate(self.terms):
            for m, (i, j) in enumerate(t._tri()):
                o = self.th_off[k] + m
                dL[o] = 2.0 * Q[k][j, i]
                dr2[o] = -2.0 * RU[k][i, j]
                dRX[o] = -2.0 * VF[k][i, j]
                if drtr:
                    if k == 0:
                        P = V1[i] @ Wx1[j].T
                    else:
                        a, b = self.offs[k] - m1, self.offs[k + 1] - m1
                        nk, qk = self.nls[k], self.qs[k]
                        P = (V2[a:b].reshape(nk, qk, p)[:, i, :].T
                             @ W2[a:b, 1:].reshape(nk, qk, p)[:, j, :])
                    dR.append(-(P + P.T))
        return dL, dr2, dRX, dR

    def _pieces(self, theta: np.ndarray) -> tuple[float, float, float, np.ndarray]:
        """(log|L|², r², log|RX|², RXᵀRX) at θ, remembered (the numerical derivatives in (θ, σ) revisit each θ)."""
        theta = np.asarray(theta, float)
        key = theta.tobytes()
        hit = self._cache.get(key)
        if hit is None:
            e = self.evaluate(theta)
            hit = (e["ldL2"], e["r2"], e["ldRX2"], e["RXtRX"])
            if len(self._cache) > 1024:
                self._cache.clear()
            self._cache[key] = hit
        return hit

    # ------------------------------------------------------------------ lmerTest's functions of (θ, σ)
    def devfun_vp(self, varpar: np.ndarray) -> float:
        """lmerTest's ``devfun_vp``: the deviance at (θ, σ), β and u profiled."""
        sigma2 = float(varpar[-1]) ** 2
        ldL2, r2, ldRX2, _ = self._pieces(varpar[:-1])
        e = {"ldL2": ldL2, "r2": r2, "ldRX2": ldRX2}
        n, p = self.n, self.p
        dev = e["ldL2"] + e["r2"] / sigma2 + n * math.log(2 * math.pi * sigma2)
        if self.reml:
            dev += e["ldRX2"] - p * math.log(2 * math.pi * sigma2)
        return dev

    def varpar_hessian(self, theta: np.ndarray, sigma: float) -> np.ndarray:
        """The Hessian of :meth:`devfun_vp` at (θ, σ): the θθ block by central differences (steps 1e-4·|θ|) of the
        exact θ-gradient (:meth:`grad_parts`: ∂log|L|² + ∂r²/σ² [+ ∂log|RX|²]), the σ row exactly
        (∂²/∂σ² = 6r²/σ⁴ − 2ν/σ², ∂²/∂θ∂σ = −2 ∂r²/σ³, ν = n [− p]). lmerTest's numDeriv Hessian of the same
        function, from far fewer deviance evaluations."""
        theta = np.asarray(theta, float)
        s2 = sigma * sigma

        def gth(th):
            dL, dr2, dRX, _ = self.grad_parts(self.evaluate(th))
            return dL + dr2 / s2 + (dRX if self.reml else 0.0)

        k = len(theta)
        H = np.empty((k + 1, k + 1))
        Htt = richardson_jacobian(gth, theta, r=1, d=1e-4)
        H[:k, :k] = 0.5 * (Htt + Htt.T)
        e = self.evaluate(theta)
        dr2 = self.grad_parts(e)[1]
        nu = self.n - self.p if self.reml else self.n
        H[:k, k] = H[k, :k] = -2.0 * dr2 / sigma ** 3
        H[k, k] = 6.0 * e["r2"] / s2 ** 2 - 2.0 * nu / s2
        return H

    def covbeta_jacobian(self, e: dict[str, Any], sigma: float) -> np.ndarray:
        """∂ vec(σ² (RXᵀRX)⁻¹) / ∂(θ, σ) exactly (p² x (len θ + 1)): −σ² R⁻¹ ∂RXᵀRX R⁻¹ per θ entry
        (:meth:`grad_parts`), 2σ R⁻¹ for σ (R = RXᵀRX; lmerTest's numDeriv Jacobian of ``get_covbeta``)."""
        Ri = np.linalg.inv(e["RXtRX"]) if self.p else np.zeros((0, 0))
        dR = self.grad_parts(e, drtr=True)[3]
        cols = [(-(sigma * sigma) * Ri @ d @ Ri).ravel() for d in dR]
        cols.append((2.0 * sigma * Ri).ravel())
        return np.column_stack(cols)

    def covbeta(self, varpar: np.ndarray) -> np.ndarray:
        """lmerTest's ``get_covbeta``: σ² (RXᵀRX(θ))⁻¹, flattened."""
        RtR = self._pieces(varpar[:-1])[3]
        return (float(varpar[-1]) ** 2 * np.linalg.inv(RtR)).ravel()

    def condvar(self, e: dict[str, Any]) -> list[np.ndarray]:
        """Per term the blocks of Λ M⁻¹ Λᵀ (levels x q x q), to be scaled by σ² (lme4's ``condVar``)."""
        Dinv, C, G, cho, _ld = e["fac"]
        Ts = e["Ts"]
        out = []
        n1, q1 = self.nls[0], self.qs[0]
        blocks1 = np.ascontiguousarray(Dinv.transpose(2, 0, 1))
        if C is not None:
            Sinv = sla.cho_solve(cho, np.eye(self.Q2), check_finite=False)
            GS = (G @ Sinv).reshape(q1, n1, self.Q2)
            blocks1 = blocks1 + np.einsum("ajs,bjs->jab", GS, G.reshape(q1, n1, self.Q2))
        out.append(np.matmul(np.matmul(Ts[0], blocks1), Ts[0].T))
        for k in range(1, len(self.terms)):
            qk, o = self.qs[k], self.offs[k] - self.m1
            idx = o + np.arange(self.nls[k])[:, None] * qk + np.arange(qk)[None, :]
            blocks = Sinv[idx[:, :, None], idx[:, None, :]]
            out.append(np.matmul(np.matmul(Ts[k], blocks), Ts[k].T))
        return out


def _response_name(design: Any) -> str:
    """The response's column as quoted in messages (``'score'``), or ``the response`` when unknown."""
    try:
        return repr(design.info.spec.response.column)
    except AttributeError:
        return "(y)"


# ----------------------------------------------------------------------------- the result


@dataclass(frozen=True, eq=False, repr=False)
class LmerResult(Result):
    """A fitted linear mixed model in lme4's terms, with lmerTest's Satterthwaite t-tests.

    Attributes
    ----------
    fixef, se, df, t, p : pandas.Series by R's column names; ``df`` Satterthwaite's, ``p`` = 2 P(T_df > |t|)
        (lmerTest's ``summary(m)$coefficients``).
    vcov : σ̂² (RXᵀRX)⁻¹ (lme4's ``vcov``); sigma : σ̂ (lme4's ``sigma``).
    theta : lme4's ``getME(m, "theta")`` (relative to σ); varcorr : ``as.data.frame(VarCorr(m))`` rows
        (``variance``/``sd`` in the response's units).
    ranef : per grouping factor the conditional modes (``mode`` or one column per random-effect column) and
        conditional variances (``condvar``).
    loglik : the (RE)ML log-likelihood (lme4's ``logLik``); reml_criterion : lme4's ``REMLcrit`` (REML fits);
        aic, bic from loglik with np = p + len(θ) + 1.
    """

    formula: str
    reml: bool
    fixef: pd.Series
    se: pd.Series
    df: pd.Series
    t: pd.Series
    p: pd.Series
    vcov: pd.DataFrame
    theta: pd.Series
    sigma: float
    varcorr: pd.DataFrame
    ranef: Mapping[str, pd.DataFrame]
    loglik: float
    aic: float
    bic: float
    reml_criterion: float | None
    nobs: int
    ngroups: Mapping[str, int]
    df_resid: int
    converged: bool
    singular: bool
    messages: tuple[str, ...]
    fit_seconds: float
    engine: str = "native"
    info: Any = field(default=None, repr=False)
    optinfo: Mapping[str, Any] = field(default_factory=dict, repr=False)
    vcov_varpar: np.ndarray | None = field(default=None, repr=False)
    family: Any = field(default=GAUSSIAN, repr=False)
    jac_varpar: tuple[np.ndarray, ...] = field(default=(), repr=False)
    frame: pd.DataFrame | None = field(default=None, repr=False)
    fit_options: Mapping[str, Any] = field(default_factory=dict, repr=False)
    design: Any = field(default=None, repr=False)

    @property
    def link(self) -> str:
        return "identity"

    @property
    def capabilities(self) -> Capabilities:
        """What an lmer fit supports (:data:`~mrcstats.models.family_table.CAPABILITIES`)."""
        return CAPABILITIES["lmer"]

    def ranef_dict(self) -> dict[str, dict[str, dict[str, float]]]:
        """``{group: {level: {column: value}}}`` (the CLI's ``--ranef``)."""
        return ranef_dict(self.ranef)

    def coef_table(self) -> pd.DataFrame:
        """lmerTest's coefficient table: Estimate, Std. Error, df, t value, Pr(>|t|)."""
        return pd.DataFrame({"Estimate": self.fixef, "Std. Error": self.se, "df": self.df, "t value": self.t,
                             "Pr(>|t|)": self.p})

    def to_frame(self) -> pd.DataFrame:
        """Fixed effects, then the random-effect SDs/correlations and the residual SD (tidy, as broom.mixed)."""
        fx = self.coef_table().reset_index(names="term")
        fx.columns = ["term", "estimate", "std_error", "df", "statistic", "p_value"]
        fx.insert(0, "effect", "fixed")
        fx.insert(1, "group", None)
        vc = self.varcorr
        terms = [f"cor__{r.name}.{r.var2}" if isinstance(r.var2, str) else f"sd__{r.name}" for r in vc.itertuples()]
        rx = pd.DataFrame({"effect": "ran_pars", "group": list(vc["group"]) + ["Residual"],
                           "term": terms + ["sd__Observation"], "estimate": list(vc["sd"]) + [self.sigma],
                           "std_error": np.nan, "df": np.nan, "statistic": np.nan, "p_value": np.nan})
        return pd.concat([fx, rx], ignore_index=True)

    def to_dict(self) -> dict[str, Any]:
        """The CLI ``--json`` object: glmer's keys plus ``sigma``, ``df``, ``t`` (and ``p`` Satterthwaite)."""
        return {
            "formula": self.formula, "family": "gaussian", "link": "identity", "engine": self.engine,
            "reml": self.reml, "nobs": self.nobs, "ngroups": dict(self.ngroups),
            "fixef": self.fixef.to_dict(), "se": self.se.to_dict(), "df": self.df.to_dict(), "t": self.t.to_dict(),
            "p": self.p.to_dict(), "theta": self.theta.to_dict(), "sigma": self.sigma,
            "varcorr": [{"group": r.group, "name": r.name, "var2": r.var2 if isinstance(r.var2, str) else None,
                         "variance": float(r.variance), "sd": float(r.sd)} for r in self.varcorr.itertuples()],
            "loglik": self.loglik, "aic": self.aic, "bic": self.bic, "minus2loglik": -2 * self.loglik,
            "reml_criterion": self.reml_criterion, "df_resid": self.df_resid, "converged": self.converged,
            "singular": self.singular, "messages": list(self.messages), "fit_seconds": self.fit_seconds,
        }

    def summary(self) -> str:
        """lmerTest's ``summary(m)`` layout (REML criterion or AIC table, random effects, coefficients)."""
        from mrcstats.models.results import _fmt_sig

        fit = "REML" if self.reml else "maximum likelihood"
        out = [f"Linear mixed model fit by {fit}. t-tests use Satterthwaite's method ['lmerModLmerTest']",
               f"Formula: {self.formula}", ""]
        if self.reml:
            out.append(f"REML criterion at convergence: {_fmt_sig(self.reml_criterion, 6)}")
        else:
            heads = ["AIC", "BIC", "logLik", "deviance", "df.resid"]
            cells = [_fmt_sig(v, 6) for v in (self.aic, self.bic, self.loglik, -2 * self.loglik)] + [str(self.df_resid)]
            w = [max(len(h), len(c)) + 1 for h, c in zip(heads, cells)]
            out += [" ".join(h.rjust(k) for h, k in zip(heads, w)), " ".join(c.rjust(k) for c, k in zip(cells, w))]
        out += ["", "Random effects:"]
        vc = pd.concat([self.varcorr, pd.DataFrame([{"group": "Residual", "name": "", "var2": None,
                                                      "variance": self.sigma ** 2, "sd": self.sigma}])],
                       ignore_index=True)
        out += _varcorr_lines(vc)
        out.append("Number of obs: " + f"{self.nobs}, groups:  " +
                   ", ".join(f"{g}, {n}" for g, n in self.ngroups.items()))
        out += ["", "Fixed effects:", format_pval_columns(self.coef_table(), ["Pr(>|t|)"]).to_string(float_format=lambda v: f"{v:.6g}")]
        if self.messages:
            out += ["", *self.messages]
        return "\n".join(out)

    def __str__(self) -> str:
        return self.summary()

    # ------------------------------------------------------------------ contrasts (lmerTest's contest)
    @functools.cached_property
    def kenward_roger(self) -> KenwardRoger:
        """pbkrtest's Kenward-Roger pieces of this (REML) fit, computed once."""
        return KenwardRoger(self)

    def vcov_kr(self) -> pd.DataFrame:
        """pbkrtest's ``vcovAdj(m)``: the Kenward-Roger adjusted covariance of β̂."""
        return pd.DataFrame(self.kenward_roger.PhiA, index=self.fixef.index, columns=self.fixef.index)

    def contrast_df(self, L: np.ndarray, ddf: str = "Satterthwaite") -> np.ndarray:
        """Denominator df of each row l of ``L`` (one-df contrasts lᵀβ), lmerTest's ``contest1D``:
        Satterthwaite ν = 2 (lᵀVl)² / (gᵀAg), g_k = lᵀ (∂V/∂φ_k) l; or Kenward-Roger's (pbkrtest's ``Lb_ddf``,
        :class:`KenwardRoger`)."""
        L = np.atleast_2d(np.asarray(L, float))
        if _ddf_name(ddf) == "Kenward-Roger":
            kr = self.kenward_roger
            return np.array([kr.ddf(row[None, :]) for row in L])
        V = self.vcov.to_numpy()
        A = self.vcov_varpar
        out = np.empty(len(L))
        for i, l in enumerate(L):
            g = np.array([l @ J @ l for J in self.jac_varpar])
            out[i] = 2.0 * float(l @ V @ l) ** 2 / float(g @ A @ g)
        return out

    def contest(self, L: np.ndarray, ddf: str = "Satterthwaite") -> dict[str, float]:
        """The F test of H0: Lβ = 0, lmerTest's ``contestMD`` (Kuznetsova et al. 2017, sec. 3.2): with VL = L V Lᵀ =
        P D Pᵀ (eigenvalues above √eps·d₁ kept, q of them), F = Σ (p_mᵀLβ)²/d_m / q; the denominator df from
        the q one-df Satterthwaite dfs ν_m: E = Σ ν_m/(ν_m − 2), ddf = 2E/(E − q) (2 if any ν_m ≤ 2; their mean
        if they agree to 1e-8; ν₁ when q = 1). ``ddf="Kenward-Roger"``: pbkrtest's ``KRmodcomp`` (F from the
        adjusted covariance, scaled; its df) as lmerTest. Returns ``Sum Sq``, ``Mean Sq``, ``NumDF``,
        ``DenDF``, ``F value``, ``Pr(>F)``."""
        L = np.atleast_2d(np.asarray(L, float))
        sigma2 = self.sigma ** 2
        if _ddf_name(ddf) == "Kenward-Roger":         # lmerTest's mk_Ftable(FtestU, ..., Fscale = F.scaling)
            F, df2, q, FU = self.kenward_roger.ftest(L)
            out = _ftable(F, int(q), df2, sigma2)
            out["Sum Sq"], out["Mean Sq"] = FU * sigma2 * q, FU * sigma2
            return out
        beta = self.fixef.to_numpy()
        V = self.vcov.to_numpy()
        d, P = np.linalg.eigh(L @ V @ L.T)
        d, P = d[::-1], P[:, ::-1]
        tol = max(math.sqrt(np.finfo(float).eps) * d[0], 0.0)
        q = int(np.sum(d > tol))
        if q == 0:
            return _ftable(math.nan, 0, math.nan, sigma2)
        PtL = (P.T @ L)[:q]
        nu = self.contrast_df(PtL)
        F = float(np.sum((PtL @ beta) ** 2 / d[:q]) / q)
        return _ftable(F, q, _fstat_ddf(nu), sigma2)

    def anova(self, type: int | str = 3, ddf: str = "Satterthwaite") -> LmerAnova:
        """lmerTest's ``anova(m, type = type, ddf = ddf)``: one F test per fixed-effect term (see :meth:`contest`),
        the term's hypothesis matrix from lmerTest's ``get_contrasts_type3`` (type 3: contrasts in treatment
        coding, each term orthogonalised against the terms containing it, mapped to the fit's own coding; SAS's
        type III) or ``get_contrasts_type1`` (type 1: rows of the normalised Doolittle factor of XᵀX, sequential).
        ``ddf``: ``"Satterthwaite"`` (default) or ``"Kenward-Roger"`` (pbkrtest, :class:`KenwardRoger`)."""
        require(self, "anova.F")
        t = {"3": 3, "III": 3, "1": 1, "I": 1}.get(str(type).upper())
        if t is None:
            raise InputError(f"lmer anova: type must be 1 or 3 (lmerTest's type = 1 or 3), got {type!r}")
        name = _ddf_name(ddf)
        Ls = anova_contrasts(self, t)
        rows = {lab: self.contest(L, ddf=name) for lab, L in Ls.items()}
        cols = ["Sum Sq", "Mean Sq", "NumDF", "DenDF", "F value", "Pr(>F)"]
        table = pd.DataFrame.from_dict(rows, orient="index", columns=cols) if rows else pd.DataFrame(columns=cols)
        return LmerAnova(table=table, type=t, ddf=name, formula=self.formula)

    def confint(self, method: str = "profile", level: float = 0.95, parm: Any = None):
        """Confidence intervals as lme4's ``confint(m, parm, level, method)`` on an lmer fit (rows ``.sig01``, …,
        ``.sigma``, then the fixed effects; columns ``"2.5 %"``/``"97.5 %"``):

        * ``"profile"`` (lme4's default): the likelihood profile of each parameter on lme4's scale (SDs and
          correlations in the response's units, σ, β) from the ML fit (lme4 refits a REML fit by ML first), stepped
          as lme4's ``profile.merMod`` and inverted by its interpolating back-spline (:func:`profile_confint`);
        * ``"Wald"``: β ± z_{1-α/2} SE, NA for the variance parameters (lme4);
        * ``"satterthwaite"``: β ± t_{df, 1-α/2} SE with Satterthwaite's df (lmerTest's ``contest(...,
          confint = TRUE)``), fixed effects only.
        """
        from mrcstats.models.confint import ConfintResult, _which, format_perc, sig_names

        level = check_level(level, "lmer confint")
        meth = {"profile": "profile", "wald": "Wald", "satterthwaite": "satterthwaite"}.get(str(method).lower())
        if meth is None:
            if str(method).lower() == "boot":
                require(self, "confint.boot")
            raise InputError(f"lmer confint method {method!r}: use profile, Wald or satterthwaite")
        require(self, f"confint.{meth}")
        if meth == "profile":
            return profile_confint(self, level=level, parm=parm)
        a = (1 - level) / 2
        cols = format_perc(np.array([a, 1 - a]))
        fe, se = self.fixef.to_numpy(), self.se.to_numpy()
        if meth == "satterthwaite":
            q = t_ppf(1 - a, self.df.to_numpy())
            tab = pd.DataFrame(np.column_stack([fe - q * se, fe + q * se]), index=self.fixef.index, columns=cols)
            rows = _which(parm, list(self.fixef.index), 0)
            return ConfintResult("satterthwaite", level, tab.iloc[rows])
        names = sig_names(len(self.theta)) + [".sigma"] + list(self.fixef.index)
        k = len(self.theta) + 1
        ci = np.full((len(names), 2), np.nan)
        ci[k:] = fe[:, None] + se[:, None] * norm_ppf([a, 1 - a])[None, :]
        rows = _which(parm, names, k)
        return ConfintResult("Wald", level, pd.DataFrame(ci, index=names, columns=cols).iloc[rows])


def _reduced_system(sys_: LmmSystem, j: int, b: float) -> LmmSystem:
    """The ML system of the model with β_j fixed at b (lme4's profile: an offset b·x_j, x_j dropped from X), from
    the cross-products alone."""
    import copy

    r = copy.copy(sys_)
    keep = np.delete(np.arange(sys_.p), j)
    xj = sys_.ZtX[:, j]
    r.Zty = sys_.Zty - b * xj
    r.ZtX = np.ascontiguousarray(sys_.ZtX[:, keep])
    r.yty = sys_.yty - 2 * b * sys_.Xty[j] + b * b * sys_.XtX[j, j]
    r.Xty = sys_.Xty[keep] - b * sys_.XtX[keep, j]
    r.XtX = sys_.XtX[np.ix_(keep, keep)]
    r.p = sys_.p - 1
    r.ZtR = np.column_stack([r.Zty, r.ZtX])
    r._cache = {}
    return r


def _min_theta(sys_: LmmSystem, th0: np.ndarray, lower: np.ndarray) -> np.ndarray:
    """θ minimising sys_'s profiled deviance from th0 (L-BFGS-B; the exact gradient for one term)."""
    return _lbfgs_theta(sys_.deviance_grad, th0, lower,
                        {"maxiter": 2000, "ftol": 1e-15, "gtol": 1e-9, "maxcor": 20})[0]


def _lbfgs_theta(fg, th0: np.ndarray, lower: np.ndarray, options: Mapping[str, Any]):
    """L-BFGS-B on θ (diagonal entries ≥ 0), restarted off the boundary while that lowers the deviance.

    The deviance is even in each diagonal entry of T whose column below it is zero, so the exact gradient there
    is 0 at the bound and a bound-constrained descent that reaches it stops: each diagonal entry at 0 is probed
    at 0.01 and 0.1 and the descent restarted from the first probe that is lower (lme4's derivative-free
    BOBYQA moves off such points by itself)."""
    bounds = [(0.0 if lo == 0 else None, None) for lo in lower]
    r = optimize.minimize(fg, np.maximum(th0, lower), jac=True, method="L-BFGS-B", bounds=bounds, options=options)
    th = np.maximum(r.x, lower)
    fval = fg(th)[0]
    for _ in range(5):
        moved = False
        for i in np.flatnonzero((lower == 0) & (th <= 1e-8)):
            for probe in (1e-2, 1e-1):
                t = th.copy()
                t[i] = probe
                if fg(t)[0] < fval - 1e-10:
                    r = optimize.minimize(fg, t, jac=True, method="L-BFGS-B", bounds=bounds, options=options)
                    tn = np.maximum(r.x, lower)
                    fn = fg(tn)[0]
                    if fn < fval:
                        th, fval, moved = tn, fn, True
                    break
            if moved:
                break
        if not moved:
            break
    return th, r


def profile_confint(m: LmerResult, level: float = 0.95, parm: Any = None, maxpts: int = 100,
                    alphamax: float = 0.01, delta_cutoff: float = 1 / 8, maxmult: float = 10.0):
    """lme4's ``confint(m, method = "profile")`` for an lmer fit (``profile.merMod`` + ``confint.thpr``).

    The profile is of the ML deviance (a REML fit is refitted by ML, as lme4's ``devfun2`` does), base D̂ = −2 logLik.
    Variance parameters on lme4's scale v = (SDs σ·sd(Λ), correlations, σ): D(v) = log|L|² + r²(θ)/σ² + n log(2πσ²)
    with θ from v (``Sv_to_Cv``) and β profiled; each v_w fixed in turn, D minimised over the other v (bounds
    SD, σ ≥ 0, |cor| ≤ 1), first step 1.01·v̂_w (1e-3 from 0). Fixed effects: β_j fixed by an offset, the ML
    profiled deviance minimised over θ, first step β̂_j + δ·SE_j. Steps of δ = cutoff/8 in ζ = sign·√(D − D̂)
    (``nextpar``/``fillmat``), cutoff √χ²_{nptot}(0.99); the bounds ζ = ∓z_{1-α/2} from R's back-spline of the
    interpolating spline ζ(x); NA (the range limit) where the profile does not reach the cutoff."""
    from mrcstats.models.confint import (
        ConfintResult,
        _back_spline_predict,
        _fillmat,
        _Params,
        _profile_xz,
        _which,
        format_perc,
        profile_cutoff,
        sig_names,
    )

    require(m, "confint.profile")
    t0 = time.perf_counter()
    design = m.design
    if design is None:
        raise InputError("lmer confint: this fit kept no design; refit with mrcstats.lmer")
    ml = fit_lmm(design, reml=False, satterthwaite=False) if m.reml else m
    sys_ = LmmSystem(design, reml=False)
    n, p = sys_.n, sys_.p
    P = _Params(design.re, p)
    nth = P.nth
    lower_th = np.concatenate([r.lower for r in design.re])
    th_hat = ml.theta.to_numpy()
    sig = ml.sigma
    sv = P.to_sdcor(th_hat)
    sv[P.is_sd] *= sig
    opt = np.concatenate([sv, [sig], ml.fixef.to_numpy()])
    nv = nth + 1
    lo = np.concatenate([np.where(P.is_sd, 0.0, -1.0), [0.0], np.full(p, -np.inf)])
    hi = np.concatenate([np.where(P.is_sd, np.inf, 1.0), [np.inf], np.full(p, np.inf)])

    def v_to_theta(v):
        s = np.array(v[:nth], float)
        s[P.is_sd] /= v[nth]
        return P.to_theta(s)

    def dev_v(v):
        if v[nth] <= 0:
            return math.inf
        try:
            ldL2, r2, _, _ = sys_._pieces(v_to_theta(v))
        except (ModelError, np.linalg.LinAlgError):
            return math.inf
        s2 = v[nth] ** 2
        return ldL2 + r2 / s2 + n * math.log(2 * math.pi * s2)

    base = min(-2.0 * ml.loglik, dev_v(opt[:nv]))
    nptot = len(opt)
    cutoff = profile_cutoff(alphamax, nptot)
    delta = cutoff * delta_cutoff
    se_ml = ml.se.to_numpy()

    def zeta(w, xx, prev):
        row = np.full(nptot + 1, np.nan)
        if w < nv:
            mask = np.ones(nv, bool)
            mask[w] = False
            start = prev[:nv][mask] if np.all(np.isfinite(prev[:nv])) else opt[:nv][mask]

            def fun(z):
                v = np.empty(nv)
                v[w] = xx
                v[mask] = z
                return dev_v(v)

            lo_m, hi_m = lo[:nv][mask], hi[:nv][mask]
            bnds = list(zip(lo_m, np.where(np.isfinite(hi_m), hi_m, None)))
            z0 = np.clip(start, lo_m, hi_m)
            r = optimize.minimize(lambda z: (fun(z), _central_grad(fun, z, lo_m)), z0, jac=True,
                                  method="L-BFGS-B", bounds=bnds,
                                  options={"maxiter": 3000, "ftol": 1e-15, "gtol": 1e-9, "maxcor": 20})
            dev = float(r.fun) - base
            v = np.empty(nv)
            v[w] = xx
            v[mask] = r.x
            row[1:nv + 1] = v
            row[nv + 1:] = opt[nv:]
        else:
            j = w - nv
            red = _reduced_system(sys_, j, xx)
            th0 = v_to_theta(prev[:nv]) if np.all(np.isfinite(prev[:nv])) else th_hat
            th = _min_theta(red, th0, lower_th)
            e = red.evaluate(th)
            dev = e["dev"] - base
            s = math.sqrt(e["r2"] / n)
            v = P.to_sdcor(th)
            v[P.is_sd] *= s
            row[1:nth + 1] = v
            row[nth + 1] = s
            row[nv + 1:] = np.insert(e["beta"], j, xx)
        if not np.isfinite(dev):
            return row
        row[0] = math.copysign(1.0, xx - opt[w]) * math.sqrt(max(dev, 1e-9))
        return row

    names = sig_names(nth) + [".sigma"] + list(m.fixef.index)
    rows = _which(parm, names, nv)
    a = (1 - level) / 2
    zq = norm_ppf([a, 1 - a])
    out = np.full((len(rows), 2), np.nan)
    msgs: list[str] = []
    opt_row = np.concatenate([[0.0], opt])
    ctl = None
    from mrcstats.models.optimize import _blas_controller

    ctl = _blas_controller()
    import contextlib

    with (ctl.limit(limits=1, user_api="blas") if ctl is not None else contextlib.nullcontext()):
        for k, w in enumerate(rows):
            pw = opt[w]
            if w < nv:
                shift = 1e-3 if pw == 0 else pw * 1.01
            else:
                shift = pw + delta * se_ml[w - nv]
            srow = zeta(w, shift, opt_row[1:])
            pres = np.tile(opt_row, (maxpts, 1))
            nres = pres.copy()
            pres[1] = srow
            nres[0] = srow
            up = _fillmat(pres, w, lo[w], hi[w], zeta, delta, cutoff, maxpts, maxmult)
            dn = _fillmat(nres, w, lo[w], hi[w], zeta, delta, cutoff, maxpts, maxmult) if pw > lo[w] else nres[:2]
            x, z = _profile_xz(up, dn, w)
            try:
                ci = _back_spline_predict(x, z, zq)
            except ValueError:
                msgs.append(f"non-monotonic profile for {names[w]}: linear interpolation")
                zu, inv = np.unique(z, return_inverse=True)
                xm = np.bincount(inv, weights=x) / np.bincount(inv)
                ci = (np.interp(zq, zu, xm, left=np.nan, right=np.nan) if len(zu) > 1
                      else np.array([np.nan, np.nan]))
            if np.isnan(ci[0]):
                ci[0] = lo[w]
            if np.isnan(ci[1]):
                ci[1] = hi[w]
            out[k] = ci
    refused = [f"{names[w]}: the profile does not reach the cutoff, the interval is unbounded"
               for k, w in enumerate(rows) if not np.all(np.isfinite(out[k]))]
    cols = format_perc(np.array([a, 1 - a]))
    return ConfintResult("profile", level, pd.DataFrame(out, index=[names[w] for w in rows], columns=cols),
                         tuple(msgs), seconds=time.perf_counter() - t0, refused=tuple(refused))


# ----------------------------------------------------------------------------- anova (lmerTest)


def _ddf_name(ddf: str) -> str:
    key = str(ddf).lower().replace("_", "-").replace(" ", "-")
    if key in ("satterthwaite", "sat", "satt"):
        return "Satterthwaite"
    if key in ("kenward-roger", "kr", "kenwardroger"):
        return "Kenward-Roger"
    raise InputError(f"lmer: ddf must be 'Satterthwaite' or 'Kenward-Roger', got {ddf!r}")


def _ftable(F: float, ndf: int, ddf: float, sigma2: float) -> dict[str, float]:
    """lmerTest's ``mk_Ftable``."""
    p = float(special.fdtrc(ndf, ddf, F)) if ndf > 0 and math.isfinite(F) else math.nan
    return {"Sum Sq": F * sigma2 * ndf, "Mean Sq": F * sigma2, "NumDF": float(ndf), "DenDF": float(ddf),
            "F value": F, "Pr(>F)": p}


def _fstat_ddf(nu: np.ndarray, tol: float = 1e-8) -> float:
    """lmerTest's ``get_Fstat_ddf``."""
    nu = np.asarray(nu, float)
    if len(nu) == 1:
        return float(nu[0])
    if np.all(np.abs(np.diff(nu)) < tol):
        return float(np.mean(nu))
    if np.any(nu <= 2):
        return 2.0
    E = float(np.sum(nu / (nu - 2)))
    return 2 * E / (E - len(nu))


def _zapsmall(x: np.ndarray, digits: int = 7) -> np.ndarray:
    """R's ``zapsmall``: round to ``digits`` significant digits of the largest entry."""
    x = np.asarray(x, float)
    mx = float(np.max(np.abs(x))) if x.size else 0.0
    if not mx > 0:
        return x
    return np.round(x, max(0, digits - math.ceil(math.log10(mx))))


def _doolittle(x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """lmerTest's ``doolittle(x)$L`` (unit lower-triangular factor, entries below eps zeroed)."""
    n = x.shape[0]
    L = np.eye(n)
    U = np.zeros((n, n))
    for i in range(n):
        U[i] = x[i] - L[i, :i] @ U[:i]
        for j in range(i + 1, n):
            v = x[j, i] - L[j, :i] @ U[:i, i]
            L[j, i] = 0.0 if abs(U[i, i]) < eps else v / U[i, i]
    L[np.abs(L) < eps] = 0.0
    return L


def _term_matrix(spec: ModelSpec, terms, intercept: bool, frame: pd.DataFrame, info, contrasts):
    from dataclasses import replace

    from mrcstats.models.design import _model_matrix

    sub = replace(spec, terms=tuple(terms), intercept=intercept)
    X, assign, names, _ = _model_matrix(sub, frame, contrasts, info.xlevels, info.scaling, where="anova")
    return np.asarray(X), list(assign), list(names)


def anova_contrasts(m: LmerResult, type: int = 3) -> dict[str, np.ndarray]:
    """Per fixed-effect term its hypothesis matrix (rows: contrasts of the fit's coefficients), as lmerTest's
    ``get_contrasts_type1`` / ``get_contrasts_type3``."""
    require(m, "anova.F")
    info, frame = m.info, m.frame
    if info is None or frame is None:
        raise InputError("lmer anova needs the fit's design and data; refit with mrcstats.lmer")
    if info.dropped_columns:
        raise InputError(f"lmer anova: the fixed-effect model matrix is rank deficient (dropped "
                         f"{', '.join(info.dropped_columns)}); anova of such a fit is not supported — drop the "
                         "aliased terms from the formula")
    spec = info.spec
    labels = list(spec.term_labels)
    if not labels:
        return {}
    Xo = info.model_matrix(frame)
    assign = np.asarray(info.assign)
    p = Xo.shape[1]
    if type == 1 or p <= 1 or len(labels) <= 1:
        XtX = Xo.T @ Xo
        Lt = _doolittle(XtX).T if p > 1 else np.ones((1, 1))
        return {lab: Lt[assign == i + 1] for i, lab in enumerate(labels)}
    codings = list(info.contrasts.values())
    if codings and all(c == "contr.treatment" for c in codings):
        X, xassign, xnames = Xo, list(info.assign), list(info.column_names)
    else:
        X, xassign, xnames = _term_matrix(spec, spec.terms, spec.intercept, frame, info, {})
    # the rank-deficient design of every term coded by indicators (lmerTest's get_rdX)
    blocks, rnames = [], []
    if spec.intercept:
        blocks.append(np.ones((len(frame), 1)))
        rnames.append("(Intercept)")
    for t in spec.terms:
        Xt, _a, nt = _term_matrix(spec, [t], False, frame, info, {})
        blocks.append(Xt)
        rnames.extend(nt)
    rdX = np.hstack(blocks)
    XtX = X.T @ X
    cho = sla.cho_factor(XtX)
    L = _zapsmall(sla.cho_solve(cho, X.T @ rdX).T)          # t(ginv(X) %*% rdX): rdX params x X coefficients
    cols = {lab: np.flatnonzero(np.asarray(xassign) == i + 1) for i, lab in enumerate(labels)}
    numeric = {v.label for t in spec.terms for v in t.variables if v.label not in info.xlevels}
    tvars = {t.label: {v.label for v in t.variables} for t in spec.terms}
    order = {t.label: t.order for t in spec.terms}
    for lab in sorted(labels, key=lambda s: -order[s]):             # stable: R's order(decreasing = TRUE)
        contains = [o for o in labels if tvars[lab] < tvars[o] and tvars[lab] & numeric == tvars[o] & numeric]
        if contains:
            Xc = L[:, np.concatenate([cols[o] for o in contains])]
            Y = L[:, cols[lab]]
            coef, *_ = np.linalg.lstsq(Xc, Y, rcond=None)
            L[:, cols[lab]] = _zapsmall(Y - Xc @ coef)
    try:
        L = L[[rnames.index(c) for c in xnames]]
    except ValueError:  # pragma: no cover - the two codings name their columns alike
        raise ModelError("lmer anova: the treatment-coded columns are not among the indicator columns") from None
    out = {lab: L[:, cols[lab]].T for lab in labels}
    if X is not Xo:
        mp = _zapsmall(sla.cho_solve(cho, X.T @ Xo))              # ginv(X) %*% Xorig
        out = {lab: Lk @ mp for lab, Lk in out.items()}
    return {lab: Lk[np.abs(Lk).sum(axis=1) > 1e-8] for lab, Lk in out.items()}


KR_MAX_ROWS = 5000   # pbkrtest's Kenward-Roger works with n x n matrices; so does this one


class KenwardRoger:
    """Kenward & Roger (1997, Biometrics 53(3)) as pbkrtest 0.5 computes it (``vcovAdj_internal``, ``Lb_ddf``,
    ``.KR_adjust``), on the REML fit: Σ = Σ_r γ_r G_r (γ: the random-effect (co)variances σ²(TTᵀ)_ij of each term
    and σ²; G_r = Z_s (I ⊗ E_ij) Z_sᵀ, and I for σ²), Φ = vcov(m), P_r = −XᵀΣ⁻¹G_rΣ⁻¹X,
    Q_rs = XᵀΣ⁻¹G_rΣ⁻¹G_sΣ⁻¹X, the information I_rs = tr(Σ⁻¹G_rΣ⁻¹G_s) − 2 tr(ΦQ_rs) + tr(ΦP_rΦP_s), W = 2 I⁻¹,
    the adjusted covariance Φ_A = Φ + 2Φ [Σ_rs W_rs (Q_rs − P_rΦP_s)] Φ; for a hypothesis L (q rows)
    Θ = Lᵀ(LΦLᵀ)⁻¹L, A₁ = Σ W_rs tr(ΘΦP_rΦ) tr(ΘΦP_sΦ), A₂ = Σ W_rs tr(ΘΦP_rΦΘΦP_sΦ), and the F statistic's
    scale and denominator df from them (pbkrtest's formulas). Dense in the rows, as pbkrtest."""

    def __init__(self, m: LmerResult):
        design = m.design
        if design is None:
            raise InputError("lmer: Kenward-Roger needs the fit's design; refit with mrcstats.lmer")
        if not m.reml:
            raise InputError("lmer: Kenward-Roger's method is only available for REML fits (as lmerTest); refit "
                             "without --ml")
        n = design.nobs
        if n > KR_MAX_ROWS:
            raise InputError(f"lmer: Kenward-Roger works with {n} x {n} matrices (as pbkrtest); this fit has "
                             f"{n} rows, the limit is {KR_MAX_ROWS}; use Satterthwaite's df")
        X = np.asarray(design.X, float)
        Z, offs = reterms_matrix(design.re, n)
        s2 = m.sigma ** 2
        th = m.theta.to_numpy()
        o = 0
        gam, G = [], []
        for k, t in enumerate(design.re):
            T = t.factor(th[o:o + t.ntheta])
            o += t.ntheta
            C = s2 * T @ T.T
            Zs = Z[:, offs[k]:offs[k + 1]].toarray()
            for i, j in t._tri():
                gam.append(C[i, j])
                Gm = Zs[:, i::t.q] @ Zs[:, j::t.q].T
                G.append(Gm + Gm.T if i != j else Gm)
        gam.append(s2)
        G.append(np.eye(n))
        Sigma = sum(g * Gm for g, Gm in zip(gam, G))
        Si = sla.cho_solve(sla.cho_factor(Sigma), np.eye(n))
        Phi = m.vcov.to_numpy()
        TT = Si @ X
        HH = [Gm @ Si for Gm in G]
        OO = [H @ X for H in HH]
        r = len(G)
        PP = [-(O.T @ TT) for O in OO]
        PP = [0.5 * (P + P.T) for P in PP]                         # forceSymmetric
        QQ = {(a, b): OO[a].T @ Si @ OO[b] for a in range(r) for b in range(a, r)}
        IE2 = np.empty((r, r))
        for a in range(r):
            for b in range(a, r):
                kt = float(np.sum(HH[a].T * HH[b]))
                IE2[a, b] = IE2[b, a] = (kt - 2 * float(np.sum(Phi * QQ[a, b]))
                                         + float(np.sum((Phi @ PP[a]) * (PP[b] @ Phi))))
        condi = float(np.min(np.abs(np.linalg.eigvalsh(IE2))))
        W = 2 * (np.linalg.inv(IE2) if condi > 1e-10 else np.linalg.pinv(IE2))
        W = 0.5 * (W + W.T)
        UU = np.zeros_like(Phi)
        for a in range(r - 1):
            for b in range(a + 1, r):
                UU += W[a, b] * (QQ[a, b] - PP[a] @ Phi @ PP[b])
        UU = UU + UU.T
        for a in range(r):
            UU += W[a, a] * (QQ[a, a] - PP[a] @ Phi @ PP[a])
        self.Phi, self.P, self.W = Phi, PP, W
        self.PhiA = Phi + 2 * Phi @ UU @ Phi
        self.beta = m.fixef.to_numpy()

    def _adjust(self, L: np.ndarray) -> tuple[float, float, float]:
        """(df2, F scaling, q) of pbkrtest's ``.KR_adjust`` / ``Lb_ddf``."""
        Phi = self.Phi
        Theta = L.T @ np.linalg.solve(L @ Phi @ L.T, L)
        TP = Theta @ Phi
        U = [TP @ P @ Phi for P in self.P]
        A1 = A2 = 0.0
        r = len(U)
        for a in range(r):
            for b in range(a, r):
                e = 1.0 if a == b else 2.0
                A1 += e * self.W[a, b] * float(np.trace(U[a])) * float(np.trace(U[b]))
                A2 += e * self.W[a, b] * float(np.sum(U[a] * U[b].T))
        q = float(np.linalg.matrix_rank(L))
        B = (A1 + 6 * A2) / (2 * q)
        g = ((q + 1) * A1 - (q + 4) * A2) / ((q + 2) * A2)
        den = 3 * q + 2 * (1 - g)
        c1, c2, c3 = g / den, (q - g) / den, (q + 2 - g) / den
        V0 = 1 + c1 * B
        V1 = 1 - c2 * B
        V2 = 1 - c3 * B
        V0 = 0.0 if abs(V0) < 1e-10 else V0
        x = 1 - A2 / q
        ratio = 1.0 if abs(x) < 1e-14 and abs(V1) < 1e-14 else x / V1
        rho = ratio ** 2 * V0 / V2 / q
        df2 = 4 + (q + 2) / (q * rho - 1)
        scale = 1.0 if abs(df2 - 2) < 0.01 else df2 * (1 - A2 / q) / (df2 - 2)
        return df2, scale, q

    def ddf(self, L: np.ndarray) -> float:
        return self._adjust(np.atleast_2d(L))[0]

    def ftest(self, L: np.ndarray) -> tuple[float, float, float, float]:
        """(F value, ddf, NumDF, F unscaled): lmerTest's ``contestMD(ddf = "Kenward-Roger")`` via KRmodcomp."""
        L = np.atleast_2d(L)
        df2, scale, q = self._adjust(L)
        Lb = L @ self.beta
        FU = float(Lb @ np.linalg.solve(L @ self.PhiA @ L.T, Lb)) / q
        return FU * scale, df2, q, FU


@dataclass(frozen=True, eq=False, repr=False)
class LmerAnova(Result):
    """lmerTest's ``anova(m, type, ddf)`` table: per term ``Sum Sq``, ``Mean Sq``, ``NumDF``, ``DenDF``,
    ``F value``, ``Pr(>F)``."""

    table: pd.DataFrame
    type: int
    ddf: str
    formula: str

    def to_frame(self) -> pd.DataFrame:
        return self.table.reset_index(names="term")

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "ddf": self.ddf,
                "terms": [{"term": str(r["term"]), **{k: float(r[k]) for k in self.table.columns}}
                          for r in self.to_frame().to_dict(orient="records")]}

    def summary(self) -> str:
        roman = {1: "I", 3: "III"}[self.type]
        head = f"Type {roman} Analysis of Variance Table with {self.ddf}'s method"
        body = format_pval_columns(self.table, ["Pr(>F)"]).to_string(float_format=lambda v: f"{v:.6g}") if len(self.table) else "(no terms)"
        return f"{head}\n{body}"

    def __str__(self) -> str:
        return self.summary()


# ----------------------------------------------------------------------------- fitting


def lmer(formula: str | ModelSpec, data: pd.DataFrame, reml: bool = True,
         contrasts: Mapping[str, str] | None = None, levels: Mapping[str, Any] | None = None,
         weights: Any = None) -> LmerResult:
    """Fit a linear mixed model as lme4's ``lmer(formula, data, REML = reml)`` and test the fixed effects as
    lmerTest's ``summary`` (Satterthwaite's df).

    Parameters
    ----------
    formula : R/lme4 formula text (``"score ~ x * LLM + (1 | item)"``); random intercepts, slopes (``(1 + x | g)``),
        uncorrelated terms (``||``), crossed and nested terms as :func:`mrcstats.glmer` takes them.
    data : pandas DataFrame; the response is a numeric column.
    reml : REML (lme4's default) or maximum likelihood (``reml=False``, for likelihood-ratio tests).
    contrasts, levels : as :func:`mrcstats.glmer`.

    Returns
    -------
    LmerResult

    References
    ----------
    Bates et al. (2015), J. Stat. Softw. 67(1), sec. 3 (PLS, profiled deviance); Kuznetsova et al. (2017),
    J. Stat. Softw. 82(13) (lmerTest's Satterthwaite df).
    """
    from mrcstats.models.design import build_design

    t0 = time.perf_counter()
    if weights is not None:
        raise InputError("lmer: prior weights are not supported yet; fit without --weights")
    if not isinstance(formula, (str, ModelSpec)):
        raise InputError(f"lmer: formula must be R formula text such as 'score ~ x + (1 | item)', got "
                         f"{type(formula).__name__}")
    if not isinstance(data, pd.DataFrame):
        raise InputError(f"lmer: data must be a pandas DataFrame, got {type(data).__name__}")
    design = build_design(formula, data, contrasts=contrasts, levels=levels, family=GAUSSIAN)
    from mrcstats.models.optimize import _blas_controller

    ctl = _blas_controller()
    if ctl is None:  # pragma: no cover
        return fit_lmm(design, reml=reml, t0=t0)
    with ctl.limit(limits=1, user_api="blas"):
        return fit_lmm(design, reml=reml, t0=t0)


def _central_grad(f, x: np.ndarray, lower: np.ndarray, h: float = 1e-6) -> np.ndarray:
    g = np.empty(len(x))
    for i in range(len(x)):
        hi = h * max(1.0, abs(x[i]))
        xp, xm = x.copy(), x.copy()
        xp[i] += hi
        xm[i] -= hi
        if xm[i] < lower[i]:          # one-sided at the boundary
            xm[i] = x[i]
            g[i] = (f(xp) - f(xm)) / hi
        else:
            g[i] = (f(xp) - f(xm)) / (2 * hi)
    return g


def fit_lmm(design, reml: bool = True, t0: float | None = None, satterthwaite: bool = True) -> LmerResult:
    """Fit a built Gaussian :class:`~mrcstats.models.design.Design` (see the module docstring)."""
    from mrcstats.models.optimize import _ranef_frames, varcorr_frame

    t0 = time.perf_counter() if t0 is None else t0
    sys_ = LmmSystem(design, reml=reml)
    re = design.re
    lower = np.concatenate([r.lower for r in re])
    th0 = np.concatenate([r.start for r in re])
    fg = sys_.deviance_grad

    def grad(th):
        return fg(th)[1]

    th, r = _lbfgs_theta(fg, th0, lower, {"maxiter": 1000, "ftol": 1e-12, "gtol": 1e-7, "maxcor": 20})
    fval, g_end = fg(th)
    converged = bool(np.all(np.abs(np.where((lower == 0) & (th <= 1e-8), np.minimum(g_end, 0), g_end)) < 2e-3))
    # Newton polish on the free parameters (those off the boundary), the Hessian by forward differences of the
    # exact gradient
    for _ in range(8):
        free = ~((lower == 0) & (th <= 1e-8))
        if not free.any():
            break
        idx = np.flatnonzero(free)
        g = g_end[idx]
        H = np.empty((len(idx), len(idx)))
        for a, i in enumerate(idx):           # forward differences (Newton's step needs no more)
            h = 1e-6 * max(1.0, abs(th[i]))
            tp = th.copy()
            tp[i] += h
            H[:, a] = (grad(tp)[idx] - g_end[idx]) / h
        H = 0.5 * (H + H.T)
        try:
            step = np.linalg.solve(H, g)
        except np.linalg.LinAlgError:
            break
        tn = th.copy()
        tn[idx] = th[idx] - step
        tn = np.maximum(tn, lower)
        fn, gn = fg(tn)
        if fn <= fval and np.max(np.abs(tn - th)) > 0:
            moved = np.max(np.abs(tn - th))
            th, fval, g_end = tn, fn, gn
            if moved < 1e-10:
                break
        else:
            break
    e = sys_.evaluate(th)
    n, p = sys_.n, sys_.p
    sigma2 = e["r2"] / (n - p if reml else n)
    sigma = math.sqrt(sigma2)
    beta = e["beta"]
    names = list(design.info.column_names)
    V = sigma2 * np.linalg.inv(e["RXtRX"]) if p else np.zeros((0, 0))
    se = np.sqrt(np.diag(V))
    messages = list(design.messages)
    singular = bool(np.any(th[lower == 0] < SINGULAR_TOL))
    if singular:
        messages.append("boundary (singular) fit: see help('isSingular')")
    # Satterthwaite (lmerTest)
    if satterthwaite:
        H = sys_.varpar_hessian(th, sigma)
        evals, evecs = np.linalg.eigh(H)
        pos = evals > 1e-8
        if np.any(evals < -1e-8):
            messages.append(f"Model failed to converge with {int(np.sum(evals < -1e-8))} negative eigenvalue(s) of "
                            "the Hessian of the variance parameters")
        if np.any(np.abs(evals) <= 1e-8):
            messages.append("Model may not have converged with eigenvalue(s) of the variance parameters' Hessian "
                            "close to zero")
        A = 2.0 * (evecs[:, pos] / evals[pos]) @ evecs[:, pos].T
        J = sys_.covbeta_jacobian(e, sigma)                   # p² x len(varpar)
        df = np.empty(p)
        for j in range(p):
            g = J[j * p + j]
            df[j] = 2.0 * V[j, j] ** 2 / float(g @ A @ g)
    else:                                                    # (a refit inside profile: no tests needed)
        A, J, df = None, np.zeros((p * p, 0)), np.full(p, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        tval = beta / se
    pval = 2.0 * t_sf(np.abs(tval), df)
    # lme4's ranef: b = Λû (û in σ's units), condVar σ² Λ M⁻¹ Λᵀ
    b_all = sys_._lam(e["Ts"], e["u"])
    bs, cvs = [], []
    cv_blocks = sys_.condvar(e)
    for k, t in enumerate(re):
        bs.append(b_all[sys_.offs[k]:sys_.offs[k + 1]].reshape(t.nlevels, t.q) if not t.is_scalar
                  else b_all[sys_.offs[k]:sys_.offs[k + 1]])
        cvs.append(sigma2 * cv_blocks[k] if not t.is_scalar else sigma2 * cv_blocks[k][:, 0, 0])
    ranef = _ranef_frames(re, bs, cvs)
    vc = varcorr_frame(re, th)
    vc = vc.assign(variance=vc["variance"] * sigma2,                     # relative covariances times σ²
                   sd=np.where(vc["var2"].isna(), vc["sd"] * sigma, vc["sd"]))   # correlations unchanged
    dev = e["dev"]
    loglik = -0.5 * dev
    npar = p + len(th) + 1
    theta_names = [nm for t in re for nm in t.theta_names]
    return LmerResult(
        formula=design.info.spec.formula, reml=bool(reml),
        fixef=pd.Series(beta, index=names, name="Estimate"), se=pd.Series(se, index=names, name="Std. Error"),
        df=pd.Series(df, index=names, name="df"), t=pd.Series(tval, index=names, name="t value"),
        p=pd.Series(pval, index=names, name="Pr(>|t|)"), vcov=pd.DataFrame(V, index=names, columns=names),
        theta=pd.Series(th, index=theta_names, name="theta"), sigma=sigma, varcorr=vc, ranef=ranef,
        loglik=loglik, aic=-2 * loglik + 2 * npar, bic=-2 * loglik + math.log(n) * npar,
        reml_criterion=dev if reml else None, nobs=n, ngroups=design.ngroups, df_resid=n - npar,
        converged=converged, singular=singular, messages=tuple(dict.fromkeys(messages)),
        fit_seconds=time.perf_counter() - t0, info=design.info,
        optinfo={"optimizer": "L-BFGS-B+Newton", "nit": int(r.nit), "nfev": sys_.nfev, "message": str(r.message)},
        vcov_varpar=A, jac_varpar=tuple(J[:, k].reshape(p, p) for k in range(J.shape[1])), frame=design.frame,
        fit_options={"contrasts": dict(design.info.contrasts)}, design=design)


__all__ = ["LmerAnova", "LmerResult", "LmmSystem", "anova_contrasts", "fit_lmm", "lmer", "profile_confint"]
