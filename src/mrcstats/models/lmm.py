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
effects: the first term (most levels) is block-diagonal in M, one q₁ x q₁ block per level (closed form
for a random intercept), the other terms are eliminated through a dense Schur complement, as the GLMM
kernels (:class:`~mrcstats.models.deviance.GeneralModel`) do. θ minimises d by L-BFGS-B on central
differences (lme4: BOBYQA), polished by Newton steps.

Satterthwaite degrees of freedom as lmerTest 3.1 (``as_lmerModLmerTest``, ``contest1D``; Kuznetsova,
Brockhoff & Christensen 2017, J. Stat. Softw. 82(13)): with the variance parameters φ = (θ, σ) and the
unprofiled deviance D(φ) (lmerTest's ``devfun_vp``: log|L|² + r²/σ² + n log(2πσ²), REML adding
log|RX|² − p log(2πσ²)), A = 2 H⁻¹ (H the Hessian of D at φ̂; eigenvalues ≤ 1e-8 left out, as lmerTest),
C(φ) = σ² (RXᵀRX(θ))⁻¹ and for each coefficient (contrast l) ν = 2 (lᵀCl)² / (gᵀ A g), g_k = lᵀ ∂C/∂φ_k l;
the Hessian and Jacobian by central differences with Richardson extrapolation (numDeriv's ``hessian``
and ``jacobian``, which lmerTest calls). p = 2 P(T_ν > |t|).
"""
from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import linalg as sla
from scipy import optimize

from mrcstats._dist import t_ppf, t_sf
from mrcstats._repr import Result
from mrcstats.errors import InputError, ModelError
from mrcstats.models.design import reterms_matrix
from mrcstats.models.deviance import _binv, _blogdet
from mrcstats.models.family import GAUSSIAN
from mrcstats.models.formula import ModelSpec
from mrcstats.models.results import _varcorr_lines, check_level, ranef_dict

SINGULAR_TOL = 1e-4
DENSE_MAX = 6000             # random effects outside the first term (dense Schur complement)
PAIRS_MAX = 30_000_000       # first-term x other-term coupling entries kept dense


# ----------------------------------------------------------------------------- the PLS system


def _left(T: np.ndarray, B: np.ndarray) -> np.ndarray:
    """T @ B[j] for every j (T: q x q, B: n x q x m), as q² vector operations (faster than batched matmul
    for the small q of random-effects terms)."""
    q = T.shape[0]
    out = np.zeros(B.shape)
    for a in range(q):
        for b in range(q):
            if T[a, b] != 0.0:
                out[:, a] += T[a, b] * B[:, b]
    return out


def _right(B: np.ndarray, T: np.ndarray) -> np.ndarray:
    """B[..., :] @ T over the last axis (B: ... x q)."""
    q = T.shape[0]
    out = np.zeros(B.shape)
    for a in range(q):
        for b in range(q):
            if T[b, a] != 0.0:
                out[..., a] += B[..., b] * T[b, a]
    return out


def _bmm(M: np.ndarray, B: np.ndarray) -> np.ndarray:
    """M[j] @ B[j] (M: n x q x q, B: n x q x m)."""
    q = M.shape[1]
    out = np.zeros(B.shape)
    for a in range(q):
        for b in range(q):
            out[:, a] += M[:, a, b, None] * B[:, b]
    return out



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
        q1, n1 = self.qs[0], self.nls[0]
        # first-term diagonal blocks of ZᵀZ (levels x q1 x q1)
        blk = ZtZ[:self.m1, :self.m1].tocoo()
        A11 = np.zeros((n1, q1, q1))
        A11[blk.row // q1, blk.row % q1, blk.col % q1] = blk.data
        self.A11 = A11
        self.A12 = ZtZ[:self.m1, self.m1:].toarray() if self.Q2 else None
        self.A22 = ZtZ[self.m1:, self.m1:].toarray() if self.Q2 else None
        self.nfev = 0

    # ------------------------------------------------------------------ Λ
    def factors(self, theta: np.ndarray) -> list[np.ndarray]:
        return [t.factor(theta[self.th_off[k]:self.th_off[k + 1]]) for k, t in enumerate(self.terms)]

    def _lam_t(self, Ts: list[np.ndarray], v: np.ndarray) -> np.ndarray:
        """Λᵀ v for v (q) or (q x m), u's order."""
        out = np.empty_like(v, dtype=float)
        for k, T in enumerate(Ts):
            sl = slice(self.offs[k], self.offs[k + 1])
            blk = v[sl].reshape(self.nls[k], self.qs[k], -1)
            out[sl] = _left(T.T, blk).reshape(v[sl].shape)
        return out

    def _lam(self, Ts: list[np.ndarray], v: np.ndarray) -> np.ndarray:
        """Λ v."""
        out = np.empty_like(v, dtype=float)
        for k, T in enumerate(Ts):
            sl = slice(self.offs[k], self.offs[k + 1])
            blk = v[sl].reshape(self.nls[k], self.qs[k], -1)
            out[sl] = _left(T, blk).reshape(v[sl].shape)
        return out

    def _factor(self, Ts):
        """D (first-term blocks of M), their inverses, C, the Cholesky factor of S, log|M|."""
        T1 = Ts[0]
        D = _left(T1.T, _right(self.A11, T1))
        D[:, np.arange(self.qs[0]), np.arange(self.qs[0])] += 1.0
        Dinv = _binv(D)
        ld = _blogdet(D)
        if not self.Q2:
            return Dinv, None, None, None, ld
        n1, q1 = self.nls[0], self.qs[0]
        C = _left(T1.T, self.A12.reshape(n1, q1, self.Q2)).reshape(self.m1, self.Q2)
        C = self._right_lam2(Ts, C)                                  # Λ₁ᵀ A₁₂ Λ₂
        B = self._right_lam2(Ts, self._right_lam2(Ts, self.A22).T) + np.eye(self.Q2)   # Λ₂ᵀ A₂₂ Λ₂ + I
        G = (_bmm(Dinv, C.reshape(n1, q1, self.Q2)) if q1 > 1
             else Dinv[:, :, :1] * C.reshape(n1, q1, self.Q2)).reshape(self.m1, self.Q2)
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
            blk = A[:, a:b].reshape(A.shape[0], self.nls[k], self.qs[k])
            out[:, a:b] = _right(blk, Ts[k]).reshape(A.shape[0], b - a)
        return out

    def _solve(self, fac, r: np.ndarray) -> np.ndarray:
        """M⁻¹ r (r: q or q x m)."""
        Dinv, C, G, cho, _ld = fac
        n1, q1 = self.nls[0], self.qs[0]
        vec = r.ndim == 1
        R = r.reshape(self.nq, -1)
        r1, r2 = R[:self.m1], R[self.m1:]
        if C is None:
            x1 = _bmm(Dinv, r1.reshape(n1, q1, -1)).reshape(self.m1, -1)
            return x1.ravel() if vec else x1
        y2 = sla.cho_solve(cho, r2 - G.T @ r1, check_finite=False)
        t = r1 - C @ y2
        x1 = _bmm(Dinv, t.reshape(n1, q1, -1)).reshape(self.m1, -1)
        out = np.concatenate([x1, y2])
        return out.ravel() if vec else out

    # ------------------------------------------------------------------ the deviance
    def evaluate(self, theta: np.ndarray) -> dict[str, Any]:
        self.nfev += 1
        theta = np.asarray(theta, float)
        Ts = self.factors(theta)
        fac = self._factor(Ts)
        bu = self._lam_t(Ts, self.Zty)
        Bx = self._lam_t(Ts, self.ZtX)
        W = self._solve(fac, np.column_stack([bu, Bx]))
        wu, Wx = W[:, 0], W[:, 1:]
        RtR = self.XtX - Bx.T @ Wx
        rhs = self.Xty - Bx.T @ wu
        if self.p:
            try:
                cR = sla.cho_factor(RtR, lower=False, check_finite=False)
            except np.linalg.LinAlgError:
                raise ModelError("lmer: the fixed-effects cross-product is not positive definite") from None
            beta = sla.cho_solve(cR, rhs, check_finite=False)
            ldRX2 = 2.0 * float(np.log(np.abs(np.diag(cR[0]))).sum())
        else:
            beta, ldRX2 = np.zeros(0), 0.0
        u = wu - Wx @ beta
        r2 = self.yty - float(bu @ u) - float(self.Xty @ beta)
        ldL2 = fac[4]
        n, p = self.n, self.p
        if self.reml:
            nmp = n - p
            dev = ldL2 + ldRX2 + nmp * (1.0 + math.log(2 * math.pi * r2 / nmp))
        else:
            dev = ldL2 + n * (1.0 + math.log(2 * math.pi * r2 / n))
        return {"dev": dev, "r2": r2, "ldL2": ldL2, "ldRX2": ldRX2, "beta": beta, "u": u, "RXtRX": RtR,
                "fac": fac, "Ts": Ts}

    def deviance(self, theta) -> float:
        return self.evaluate(theta)["dev"]

    # ------------------------------------------------------------------ lmerTest's functions of (θ, σ)
    def devfun_vp(self, varpar: np.ndarray) -> float:
        """lmerTest's ``devfun_vp``: the deviance at (θ, σ), β and u profiled."""
        sigma2 = float(varpar[-1]) ** 2
        e = self.evaluate(varpar[:-1])
        n, p = self.n, self.p
        dev = e["ldL2"] + e["r2"] / sigma2 + n * math.log(2 * math.pi * sigma2)
        if self.reml:
            dev += e["ldRX2"] - p * math.log(2 * math.pi * sigma2)
        return dev

    def covbeta(self, varpar: np.ndarray) -> np.ndarray:
        """lmerTest's ``get_covbeta``: σ² (RXᵀRX(θ))⁻¹, flattened."""
        e = self.evaluate(varpar[:-1])
        return (float(varpar[-1]) ** 2 * np.linalg.inv(e["RXtRX"])).ravel()

    def condvar(self, e: dict[str, Any]) -> list[np.ndarray]:
        """Per term the blocks of Λ M⁻¹ Λᵀ (levels x q x q), to be scaled by σ² (lme4's ``condVar``)."""
        Dinv, C, G, cho, _ld = e["fac"]
        Ts = e["Ts"]
        out = []
        n1, q1 = self.nls[0], self.qs[0]
        if C is None:
            blocks1 = Dinv
        else:
            Sinv = sla.cho_solve(cho, np.eye(self.Q2), check_finite=False)
            GS = (G @ Sinv).reshape(n1, q1, self.Q2)
            blocks1 = Dinv + np.matmul(GS, G.reshape(n1, q1, self.Q2).transpose(0, 2, 1))
        out.append(np.matmul(np.matmul(Ts[0], blocks1), Ts[0].T))
        for k in range(1, len(self.terms)):
            qk, o = self.qs[k], self.offs[k] - self.m1
            idx = o + np.arange(self.nls[k])[:, None] * qk + np.arange(qk)[None, :]
            blocks = Sinv[idx[:, :, None], idx[:, None, :]]
            out.append(np.matmul(np.matmul(Ts[k], blocks), Ts[k].T))
        return out


# ----------------------------------------------------------------------------- numerical derivatives


_ZERO_TOL = math.sqrt(np.finfo(float).eps / 7e-7)


def _steps(x: np.ndarray, d: float, eps: float = 1e-4) -> np.ndarray:
    """numDeriv's first steps: |d·x| + eps·(|x| < zero.tol)."""
    return np.abs(d * x) + eps * (np.abs(x) < _ZERO_TOL)


def _richardson(a: list, r: int):
    """numDeriv's extrapolation: a_k <- (4^m a_{k+1} - a_k) / (4^m - 1) for m = 1..r-1."""
    for m in range(1, r):
        a = [(a[k + 1] * 4 ** m - a[k]) / (4 ** m - 1) for k in range(len(a) - 1)]
    return a[0]


def richardson_jacobian(f, x: np.ndarray, r: int = 4, v: float = 2.0, d: float = 1e-4) -> np.ndarray:
    """∂f/∂x (f vector-valued) as numDeriv's ``jacobian(method = "Richardson")``: central differences with
    steps h = |d·x| + 1e-4·(|x| < zero.tol), halved r - 1 times, and Richardson extrapolation."""
    x = np.asarray(x, float)
    n = len(x)
    cols = []
    for i in range(n):
        h = _steps(x, d)
        ests = []
        for _k in range(r):
            e = np.zeros(n)
            e[i] = h[i]
            ests.append((np.asarray(f(x + e), float) - np.asarray(f(x - e), float)) / (2 * h[i]))
            h = h / v
        cols.append(_richardson(ests, r))
    return np.column_stack(cols)


def richardson_hessian(f, x: np.ndarray, r: int = 4, v: float = 2.0, d: float = 0.1) -> np.ndarray:
    """The Hessian of a scalar f as numDeriv's ``hessian`` (``genD``): steps h = |d·x| + 1e-4·(|x| < zero.tol)
    (d = 0.1), halved r - 1 times; diagonal (f(x+h) - 2f(x) + f(x-h))/h², off-diagonal
    (f(x+hᵢ+hⱼ) - 2f(x) + f(x-hᵢ-hⱼ) - Hᵢᵢhᵢ² - Hⱼⱼhⱼ²)/(2hᵢhⱼ), each Richardson-extrapolated."""
    x = np.asarray(x, float)
    n = len(x)
    f0 = f(x)
    H = np.empty((n, n))
    h0 = _steps(x, d)
    for i in range(n):
        h = h0.copy()
        ests = []
        for _k in range(r):
            e = np.zeros(n)
            e[i] = h[i]
            ests.append((f(x + e) - 2 * f0 + f(x - e)) / h[i] ** 2)
            h = h / v
        H[i, i] = _richardson(ests, r)
    for i in range(n):
        for j in range(i):
            h = h0.copy()
            ests = []
            for _k in range(r):
                e = np.zeros(n)
                e[i], e[j] = h[i], h[j]
                ests.append((f(x + e) - 2 * f0 + f(x - e) - H[i, i] * h[i] ** 2 - H[j, j] * h[j] ** 2)
                            / (2 * h[i] * h[j]))
                h = h / v
            H[i, j] = H[j, i] = _richardson(ests, r)
    return H


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

    @property
    def link(self) -> str:
        return "identity"

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
        out += ["", "Fixed effects:", self.coef_table().to_string(float_format=lambda v: f"{v:.6g}")]
        if self.messages:
            out += ["", *self.messages]
        return "\n".join(out)

    def __str__(self) -> str:
        return self.summary()

    def confint(self, level: float = 0.95) -> pd.DataFrame:
        """Wald intervals of the fixed effects with Satterthwaite's df (lmerTest's ``contest(..., confint=TRUE)``):
        β ± t_{df, 1-α/2} SE."""
        level = check_level(level, "lmer confint")
        q = t_ppf(0.5 + level / 2, self.df.to_numpy())
        lo = self.fixef - q * self.se
        hi = self.fixef + q * self.se
        return pd.DataFrame({"lower": lo, "upper": hi})


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


def fit_lmm(design, reml: bool = True, t0: float | None = None) -> LmerResult:
    """Fit a built Gaussian :class:`~mrcstats.models.design.Design` (see the module docstring)."""
    from mrcstats.models.optimize import _ranef_frames, varcorr_frame

    t0 = time.perf_counter() if t0 is None else t0
    sys_ = LmmSystem(design, reml=reml)
    re = design.re
    lower = np.concatenate([r.lower for r in re])
    th0 = np.concatenate([r.start for r in re])
    f = sys_.deviance
    bounds = [(0.0 if lo == 0 else None, None) for lo in lower]
    r = optimize.minimize(lambda th: (f(th), _central_grad(f, th, lower)), th0, jac=True, method="L-BFGS-B",
                          bounds=bounds, options={"maxiter": 1000, "ftol": 1e-12, "gtol": 1e-7, "maxcor": 20})
    th = np.maximum(r.x, lower)
    fval = f(th)
    g_end = _central_grad(f, th, lower)
    converged = bool(np.all(np.abs(np.where((lower == 0) & (th <= 1e-8), np.minimum(g_end, 0), g_end)) < 2e-3))
    # Newton polish on the free parameters (those off the boundary)
    for _ in range(8):
        free = ~((lower == 0) & (th <= 1e-8))
        if not free.any():
            break
        idx = np.flatnonzero(free)

        def fsub(z, idx=idx, base=th):
            t = base.copy()
            t[idx] = z
            return f(t)
        g = _central_grad(fsub, th[idx], lower[idx], h=1e-5)
        H = richardson_hessian(fsub, th[idx], r=2, d=1e-3)
        try:
            step = np.linalg.solve(H, g)
        except np.linalg.LinAlgError:
            break
        tn = th.copy()
        tn[idx] = th[idx] - step
        tn = np.maximum(tn, lower)
        fn = f(tn)
        if fn <= fval and np.max(np.abs(tn - th)) > 0:
            moved = np.max(np.abs(tn - th))
            th, fval = tn, fn
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
    varpar = np.concatenate([th, [sigma]])
    H = richardson_hessian(sys_.devfun_vp, varpar)
    evals, evecs = np.linalg.eigh(H)
    pos = evals > 1e-8
    if np.any(evals < -1e-8):
        messages.append(f"Model failed to converge with {int(np.sum(evals < -1e-8))} negative eigenvalue(s) of the "
                        "Hessian of the variance parameters")
    if np.any(np.abs(evals) <= 1e-8):
        messages.append("Model may not have converged with eigenvalue(s) of the variance parameters' Hessian "
                        "close to zero")
    A = 2.0 * (evecs[:, pos] / evals[pos]) @ evecs[:, pos].T
    J = richardson_jacobian(sys_.covbeta, varpar)        # p² x len(varpar)
    df = np.empty(p)
    for j in range(p):
        g = J[j * p + j]
        df[j] = 2.0 * V[j, j] ** 2 / float(g @ A @ g)
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
        vcov_varpar=A)


__all__ = ["LmerResult", "LmmSystem", "fit_lmm", "lmer"]
