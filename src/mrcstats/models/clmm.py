"""Cumulative-link mixed models for ordered ratings (LLM-judge scores), as R's ``ordinal::clmm``.

Model (Christensen 2019, *Cumulative link models for ordinal regression with the R package ordinal*, sec. 2;
``ordinal::clmm``): for a rating Yᵢ in ordered categories 1 < 2 < … < J with flexible thresholds
α₁ < … < α_{J-1} (α₀ = −∞, α_J = +∞),

    P(Yᵢ ≤ j | b) = F(α_j − xᵢᵀβ − zᵢᵀb),    b = Λu,  u ~ N(0, I),

F the logistic (``link = "logit"``) or standard normal (``"probit"``) distribution function, xᵢ the fixed-effects
row without an intercept (the thresholds take its place), Λ = diag(σ_k) over the random intercepts of each
grouping factor k (one or several crossed factors: ``(1 | item) + (1 | model)``). Row i contributes
ℓᵢ(ηᵢ) = log{F(α_{yᵢ} − ηᵢ) − F(α_{yᵢ−1} − ηᵢ)} with ηᵢ = xᵢᵀβ + zᵢᵀΛu, and

    ℓᵢ' = −(f(a) − f(b))/pᵢ,   ℓᵢ'' = (f'(a) − f'(b))/pᵢ − ℓᵢ'²,   a = α_{yᵢ} − ηᵢ, b = α_{yᵢ−1} − ηᵢ.

The Laplace approximation (clmm's ``getNLA``) of the negative log-likelihood is

    NLA(α, β, σ) = −Σ ℓᵢ(η̂ᵢ) + ½‖û‖² + ½ log|H|,    H = I + ΛZᵀ W Z Λ,  W = diag(−ℓᵢ''),

at the conditional mode û (Newton with step halving on −Σℓ + ½‖u‖², as ``update.u``; here to a squared Newton
decrement of 1e-18 rather than clmm's max|gradient| < 1e-4). H is eliminated through the first (largest) factor,
which is diagonal for random intercepts: with H₁₁ diagonal, log|H| = Σ log H₁₁ + log|H₂₂ − H₂₁H₁₁⁻¹H₁₂| (dense
Schur complement over the other factors' levels), the same elimination as the crossed GLMM kernels
(:class:`~mrcstats.models.deviance.MultiFactor`). (α, β, σ) minimise NLA by L-BFGS-B with its analytic gradient
(:meth:`ClmmLaplace.gradient`) and σ ≥ 0 (clmm: ``nlminb`` on finite differences with the same bound). logLik = −NLA; AIC = −2 logLik + 2(J − 1 + p + K).

Standard errors as clmm's: vcov = H̃⁻¹ with H̃ the Hessian of NLA in (α, β, σ) by ordinal's ``deriv12``
(central differences, step 1e-4; here of the analytic gradient), σ on the boundary left out
(``paratBoundary2``). ``max.grad`` and ``cond.H`` (largest over smallest eigenvalue of H̃) as ``summary.clmm``
prints them.

Predicted category probabilities are population-level (b = 0): P(Y = j) = F(α_j − xᵀβ) − F(α_{j−1} − xᵀβ).
Marginal means on the latent scale follow emmeans' ``mode = "latent"`` for clm/clmm (emmeans 1.8,
``emm_basis.clm``): the linear predictor xᵀβ minus the mean threshold, with its standard error from vcov, through
:func:`mrcstats.models.emmeans.emmeans`.
"""
from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import linalg as sla
from scipy import optimize, special

from mrcstats._dist import norm_sf
from mrcstats._repr import Result
from mrcstats.errors import InputError, ModelError
from mrcstats.models.deviance import DENSE_PAIRS_MAX, halving_step
from mrcstats.models.family import GAUSSIAN
from mrcstats.models.family_table import CAPABILITIES, Capabilities, require
from mrcstats.models.formula import ModelSpec, parse_formula

LINKS = ("logit", "probit")
MODE_TOL = 1e-18          # squared Newton decrement at which the conditional modes are converged
MODE_MAXIT = 100
DENSE_MAX = 6000          # random effects outside the first factor (dense Schur complement)
BOUNDARY_TOL = 1e-5       # an SD below this is on the boundary (left out of the Hessian)
_SQRT2PI = math.sqrt(2.0 * math.pi)


# ----------------------------------------------------------------------------- the links


def _cdfs(link: str, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """F(x) and 1 − F(x), each without cancellation (the logistic from one exp(−|x|))."""
    if link == "logit":
        with np.errstate(over="ignore"):
            e = np.exp(-np.abs(x))
        d = 1.0 / (1.0 + e)
        ed = e * d
        pos = x >= 0
        return np.where(pos, d, ed), np.where(pos, ed, d)
    return special.ndtr(x), special.ndtr(-x)


def _density(link: str, x: np.ndarray, order: int):
    """F(x), 1 − F(x) and the density's derivatives f, f', f'' (up to ``order``; 0 at ±∞)."""
    F, Fc = _cdfs(link, x)
    if link == "logit":
        f = F * Fc
        if order < 2:
            return F, Fc, (f,)
        t = Fc - F
        return F, Fc, (f, f * t, f * t * t - 2 * f * f)
    with np.errstate(invalid="ignore", over="ignore"):
        f = np.exp(-0.5 * x * x) / _SQRT2PI
        if order < 2:
            return F, Fc, (f,)
        xf = np.where(np.isfinite(x), x, 0.0)
        return F, Fc, (f, -xf * f, (xf * xf - 1.0) * f)


def category_probs(link: str, hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """F(hi) − F(lo) for hi > lo, computed on the side where it does not cancel."""
    Fh, Fch = _cdfs(link, hi)
    Fl, Fcl = _cdfs(link, lo)
    with np.errstate(invalid="ignore"):
        return np.where(lo > 0, Fcl - Fch, Fh - Fl)


def _ab(alpha: np.ndarray, y: np.ndarray, eta: np.ndarray):
    cut = np.concatenate([[-np.inf], alpha, [np.inf]])
    return cut[y + 1] - eta, cut[y] - eta


def rows_ll(link: str, alpha: np.ndarray, y: np.ndarray, eta: np.ndarray) -> np.ndarray:
    """Per row ℓ = log P(Y = y | η), ``y`` codes 0..J−1."""
    a, b = _ab(alpha, y, eta)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(category_probs(link, a, b))


def rows_derivs(link: str, alpha: np.ndarray, y: np.ndarray, eta: np.ndarray, order: int = 2) -> dict[str, np.ndarray]:
    """ℓ and its partial derivatives in a = α_y − η and b = α_{y−1} − η (``la``, ``lab``, ``laab``, …; order 2 or
    3), with the η-derivatives ``d1``, ``d2`` (and ``d3``): d/dη = −(∂_a + ∂_b). p = F(a) − F(b) separates in
    (a, b), so ℓ_ab = −ℓ_a ℓ_b and the mixed third derivatives follow from it."""
    a, b = _ab(alpha, y, eta)
    Fa, Fca, da = _density(link, a, order)
    Fb, Fcb, db = _density(link, b, order)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        p = np.where(b > 0, Fcb - Fca, Fa - Fb)
        ip = 1.0 / p
        la, lb = da[0] * ip, -db[0] * ip
        laa, lbb = da[1] * ip - la * la, -db[1] * ip - lb * lb
        lab = -la * lb
        out = {"ll": np.log(p), "la": la, "lb": lb, "laa": laa, "lab": lab, "lbb": lbb,
               "d1": -(la + lb), "d2": laa + 2 * lab + lbb}
        if order >= 3:
            laaa = da[2] * ip - da[1] * ip * la - 2 * la * laa
            lbbb = -db[2] * ip + db[1] * ip * lb - 2 * lb * lbb
            laab = -laa * lb - la * lab
            labb = -lab * lb - la * lbb
            out.update(laaa=laaa, laab=laab, labb=labb, lbbb=lbbb,
                       d3=-(laaa + 3 * laab + 3 * labb + lbbb))
    return out


# ----------------------------------------------------------------------------- the response


def ordinal_response(s: pd.Series, column: str, given: Sequence[str] | None, where: str) -> tuple[np.ndarray, tuple[str, ...]]:
    """Codes 0..J−1 (NaN where missing) and level labels of an ordered rating column.

    Integer ratings are ordered numerically and must be consecutive (1..5 with none of 2..4 absent); an ordered
    pandas Categorical keeps its order; text needs its order given (``levels={col: [...]}``, ``--levels``).
    At least three categories must occur (two: a binomial ``glmer``).
    """
    miss = np.asarray(s.isna(), dtype=bool)
    obs = s[~miss]
    if len(obs) == 0:
        raise InputError(f"{where}: the rating column {column!r} has no values")
    if given is not None:
        given = [str(g) for g in given]
        if len(set(given)) != len(given):
            raise InputError(f"{where}: levels given for {column!r} repeat a level: {given}")
        txt = obs.map(lambda v: format(int(v)) if isinstance(v, (float, np.floating)) and float(v).is_integer()
                      else str(v))
        pos = {g: i for i, g in enumerate(given)}
        bad = np.flatnonzero(~txt.isin(list(pos)).to_numpy())
        if bad.size:
            raise InputError(f"{where}: rating column {column!r} row {obs.index[bad[0]]!r} has {txt.iloc[bad[0]]!r}, "
                             f"not one of the given levels {given}; list every level in order")
        codes_obs = txt.map(pos).to_numpy(dtype=float)
        levels = tuple(given)
    elif isinstance(s.dtype, pd.CategoricalDtype):
        if not s.dtype.ordered:
            raise InputError(f"{where}: rating column {column!r} is an unordered categorical; give the order of its "
                             f"levels (levels={{'{column}': [...]}}, --levels {column}=a,b,c) or make it ordered")
        codes_obs = np.asarray(obs.cat.codes, dtype=float)
        levels = tuple(str(c) for c in s.cat.categories)
    elif pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s.dtype):
        v = np.asarray(obs, dtype=float)
        bad = np.flatnonzero(~np.isfinite(v) | (v != np.round(v)))
        if bad.size:
            raise InputError(f"{where}: rating column {column!r} must hold whole numbers (ordered categories); row "
                             f"{obs.index[bad[0]]!r} has {v[bad[0]]:g}. Round the ratings or use lmer for a "
                             "continuous score")
        lo, hi = int(v.min()), int(v.max())
        present = np.unique(v).astype(int)
        if len(present) < hi - lo + 1:
            gap = sorted(set(range(lo, hi + 1)) - set(present.tolist()))
            raise InputError(f"{where}: rating column {column!r} has no rating {gap[0]} between {lo} and {hi} (a gap "
                             f"in the scale: its threshold cannot be estimated); recode the ratings to consecutive "
                             "integers or give the levels that occur with --levels")
        codes_obs = v - lo
        levels = tuple(str(k) for k in range(lo, hi + 1))
    else:
        raise InputError(f"{where}: rating column {column!r} holds text ({s.dtype}); give the order of its levels "
                         f"(levels={{'{column}': [...]}}, --levels {column}=low,mid,high)")
    used = np.bincount(codes_obs.astype(np.int64), minlength=len(levels))
    if len(levels) < 3 or np.count_nonzero(used) < 3:
        raise InputError(f"{where}: rating column {column!r} has {np.count_nonzero(used)} categor"
                         f"{'y' if np.count_nonzero(used) == 1 else 'ies'} ({[lv for lv, u in zip(levels, used) if u]}); "
                         "a cumulative-link model needs at least 3 ordered categories (two: use glmer)")
    if not used.all():
        gap = [lv for lv, u in zip(levels, used) if not u]
        raise InputError(f"{where}: rating column {column!r} has no row with level(s) {gap} of {list(levels)} (a "
                         "gap in the scale: its threshold cannot be estimated); leave unused levels out")
    codes = np.full(len(s), np.nan)
    codes[~miss] = codes_obs
    return codes, levels


# ----------------------------------------------------------------------------- the Laplace objective


class ClmmLaplace:
    """NLA(α, β, σ) of one design (module docstring); the conditional modes are warm-started."""

    def __init__(self, X: np.ndarray, y: np.ndarray, codes: Sequence[np.ndarray], nlev: Sequence[int], link: str):
        self.X = np.ascontiguousarray(X, float)
        self.y = np.asarray(y, np.int64)
        self.link = link
        self.n, self.p = self.X.shape
        self.J = int(self.y.max()) + 1
        self.codes = [np.asarray(c, np.int64) for c in codes]
        self.nlev = [int(k) for k in nlev]
        self.K = len(self.nlev)
        self.offs = np.concatenate([[0], np.cumsum(self.nlev)]).astype(int)
        self.q = int(self.offs[-1])
        self.m1 = self.nlev[0]
        self.Q2 = self.q - self.m1
        if self.Q2 > DENSE_MAX:
            raise ModelError(f"clmm: the grouping factors after the first have {self.Q2} levels in all (limit "
                             f"{DENSE_MAX} for the dense Schur complement); put the factor with most levels first or "
                             "simplify the model")
        if self.m1 * self.Q2 > DENSE_PAIRS_MAX:
            raise ModelError(f"clmm: {self.m1} x {self.Q2} crossed levels exceed the dense limit "
                             f"({DENSE_PAIRS_MAX:,} pairs)")
        # the other factors' columns (0..Q2-1) per row, and the pair keys of ZᵀWZ's blocks
        self.c2 = [self.codes[k] + (self.offs[k] - self.m1) for k in range(1, self.K)]
        self.key12 = [self.codes[0] * self.Q2 + c for c in self.c2]
        self.key22 = [a * self.Q2 + b for a in self.c2 for b in self.c2]
        from mrcstats.models.design import ReTerm, reterms_matrix

        Z, _ = reterms_matrix([ReTerm(str(k), c, tuple(range(m))) for k, (c, m) in
                               enumerate(zip(self.codes, self.nlev))], self.n)
        self.Z = Z.tocsr()
        self.Zt = Z.T.tocsr()
        self.u = np.zeros(self.q)
        self.nfev = 0
        self.inner = 0

    # -- Z products
    def _zu(self, lam_u: np.ndarray) -> np.ndarray:
        out = np.zeros(self.n)
        for k in range(self.K):
            out += lam_u[self.offs[k]:self.offs[k + 1]][self.codes[k]]
        return out

    def _ztv(self, v: np.ndarray) -> np.ndarray:
        return np.concatenate([np.bincount(self.codes[k], weights=v, minlength=self.nlev[k]) for k in range(self.K)])

    def _factor(self, lam: np.ndarray, w: np.ndarray):
        """H = I + ΛZᵀWZΛ as (H₁₁ diagonal, H₁₂, Cholesky of the Schur complement) and log|H|."""
        l1, l2 = lam[:self.m1], lam[self.m1:]
        h11 = 1.0 + l1 * l1 * np.bincount(self.codes[0], weights=w, minlength=self.m1)
        if not self.Q2:
            return (h11, None, None), float(np.sum(np.log(h11)))
        size12 = self.m1 * self.Q2
        c12 = np.zeros(size12)
        for key in self.key12:
            c12 += np.bincount(key, weights=w, minlength=size12)
        h12 = c12.reshape(self.m1, self.Q2) * l1[:, None] * l2[None, :]
        m22 = np.zeros(self.Q2 * self.Q2)
        for key in self.key22:
            m22 += np.bincount(key, weights=w, minlength=self.Q2 * self.Q2)
        h22 = m22.reshape(self.Q2, self.Q2) * l2[:, None] * l2[None, :] + np.eye(self.Q2)
        s = h22 - h12.T @ (h12 / h11[:, None])
        cho = sla.cholesky(s, lower=True, check_finite=False)
        return (h11, h12, cho), float(np.sum(np.log(h11)) + 2.0 * np.sum(np.log(np.diag(cho))))

    def _solve(self, fac, g: np.ndarray) -> np.ndarray:
        """H⁻¹ g (g a vector or a q x m matrix)."""
        h11, h12, cho = fac
        d = h11 if g.ndim == 1 else h11[:, None]
        if h12 is None:
            return g / d
        g1, g2 = g[:self.m1], g[self.m1:]
        x2 = sla.cho_solve((cho, True), g2 - h12.T @ (g1 / d), check_finite=False)
        return np.concatenate([(g1 - h12 @ x2) / d, x2])

    def _hinv_parts(self, fac):
        """diag(H⁻¹) and the pieces of its other entries: A S⁻¹ (A = H₁₁⁻¹H₁₂) and S⁻¹."""
        h11, h12, cho = fac
        if h12 is None:
            return 1.0 / h11, None, None
        sinv = sla.cho_solve((cho, True), np.eye(self.Q2), check_finite=False)
        a = h12 / h11[:, None]
        a_s = a @ sinv
        return np.concatenate([1.0 / h11 + np.einsum("ij,ij->i", a_s, a), np.diag(sinv)]), a_s, sinv

    def hinv_diag(self, fac) -> np.ndarray:
        """diag(H⁻¹) (conditional variances of u)."""
        return self._hinv_parts(fac)[0]

    # -- the objective
    def split(self, par: np.ndarray):
        J1 = self.J - 1
        return par[:J1], par[J1:J1 + self.p], par[J1 + self.p:]

    def modes(self, alpha, beta, sd, u=None, order: int = 2):
        """The conditional modes û, the factor of H there, log|H|, the rows' derivatives at û (to ``order``) and
        η̂; None where the probabilities vanish."""
        lam = np.repeat(sd, self.nlev)
        eta0 = self.X @ beta if self.p else np.zeros(self.n)
        u = (self.u if u is None else u).copy()

        def pen(uu):
            return -float(rows_ll(self.link, alpha, self.y, eta0 + self._zu(lam * uu)).sum()) + 0.5 * float(uu @ uu)

        def at(uu):
            eta = eta0 + self._zu(lam * uu)
            r = rows_derivs(self.link, alpha, self.y, eta, order)
            return r, eta, -float(r["ll"].sum()) + 0.5 * float(uu @ uu)

        r, eta, f0 = at(u)
        if not np.isfinite(f0):
            u = np.zeros(self.q)
            r, eta, f0 = at(u)
            if not np.isfinite(f0):
                return None
        for _ in range(MODE_MAXIT):
            self.inner += 1
            g = u - lam * self._ztv(r["d1"])
            fac, logdet = self._factor(lam, np.maximum(-r["d2"], 0.0))
            step = self._solve(fac, g)
            dec = float(g @ step)
            if dec < MODE_TOL * max(1, self.q):
                break
            if dec < 1e-8:          # quadratic convergence: the full Newton step (checked by the next decrement)
                u = u - step
            else:
                u, f0 = halving_step(u, step, f0, pen)
            r, eta, f0 = at(u)
            if not np.isfinite(f0):
                return None
        else:
            raise ModelError("clmm: the conditional modes of the random effects did not converge")
        if np.any(r["d2"] > 0):     # W must be ≥ 0 at the mode (log-concave links): refactor with W itself
            fac, logdet = self._factor(lam, -r["d2"])
        return u, fac, logdet, r, eta

    def nla(self, par: np.ndarray, keep: bool = False, grad: bool = False):
        """clmm's ``getNLA`` at par = (α, β, σ): −Σℓ(η̂) + ½‖û‖² + ½ log|H| (inf where it does not exist);
        with ``grad`` also its gradient (:meth:`gradient`)."""
        self.nfev += 1
        par = np.asarray(par, float)
        alpha, beta, sd = self.split(par)
        bad = (math.inf, np.zeros(len(par))) if grad else math.inf
        if np.any(np.diff(alpha) <= 0) or np.any(sd < 0) or not np.all(np.isfinite(par)):
            return bad
        try:
            res = self.modes(alpha, beta, sd, order=3 if grad else 2)
        except (np.linalg.LinAlgError, ValueError):
            return bad
        if res is None:
            return bad
        u, fac, logdet, r, _eta = res
        if keep:
            self.u = u
        f = -float(r["ll"].sum()) + 0.5 * float(u @ u) + 0.5 * logdet
        if not np.isfinite(f):
            return bad
        if not grad:
            return f
        return f, self.gradient(alpha, sd, u, fac, r)

    def gradient(self, alpha, sd, u, fac, r) -> np.ndarray:
        """d NLA / d(α, β, σ) at the modes.

        With g(u, ψ) = u − ΛZᵀℓ' the modes' equation, the first two terms of NLA are stationary in u (their
        ψ-partials only); ½ log|H| changes with ψ directly and through û: d log|H|/dψ = Σᵢ sᵢ dWᵢ/dψ (plus
        2(n_k − tr_k H⁻¹)/σ_k for σ_k), sᵢ = (ZΛH⁻¹ΛZᵀ)ᵢᵢ, dWᵢ/dψ = −(∂Wᵢ/∂ψ-direct + ℓᵢ⁽³⁾ dηᵢ/dψ),
        dη/dψ = ∂η/∂ψ + ZΛ dû/dψ and dû/dψ = H⁻¹ (ΛZᵀ ∂ℓ'/∂ψ + (∂Λ/∂ψ) Zᵀℓ').
        """
        J1, p, K, n = self.J - 1, self.p, self.K, self.n
        npar = J1 + p + K
        d1, d2, d3 = r["d1"], r["d2"], r["d3"]
        lam = np.repeat(sd, self.nlev)
        y = self.y
        up, lo = y < J1, y > 0
        yu, yl = y[up], y[lo] - 1
        g = np.zeros(npar)
        g[:J1] = -(np.bincount(yu, r["la"][up], J1) + np.bincount(yl, r["lb"][lo], J1))
        g[J1:J1 + p] = -(self.X.T @ d1)
        zd1 = self._ztv(d1)
        uk = [u[self.offs[k]:self.offs[k + 1]][self.codes[k]] for k in range(K)]   # u per row, per factor
        for k in range(K):
            g[J1 + p + k] = -float(u[self.offs[k]:self.offs[k + 1]] @ zd1[self.offs[k]:self.offs[k + 1]])
        # ∂ℓ'/∂ψ and ∂ℓ''/∂ψ at fixed η (thresholds) or fixed u (β, σ)
        R = np.zeros((n, npar))
        D = np.zeros((n, npar))
        iu, il = np.flatnonzero(up), np.flatnonzero(lo)
        R[iu, yu] += -(r["laa"][up] + r["lab"][up])
        R[il, yl] += -(r["lab"][lo] + r["lbb"][lo])
        D[iu, yu] += r["laaa"][up] + 2 * r["laab"][up] + r["labb"][up]
        D[il, yl] += r["laab"][lo] + 2 * r["labb"][lo] + r["lbbb"][lo]
        E = np.zeros((n, npar))                                 # ∂η/∂ψ at fixed u
        E[:, J1:J1 + p] = self.X
        for k in range(K):
            E[:, J1 + p + k] = uk[k]
        R[:, J1:] += d2[:, None] * E[:, J1:]
        G = (self.Zt @ R) * lam[:, None]
        for k in range(K):
            G[self.offs[k]:self.offs[k + 1], J1 + p + k] += zd1[self.offs[k]:self.offs[k + 1]]
        dU = self._solve(fac, G) * lam[:, None]
        E += self.Z @ dU
        dW = D + d3[:, None] * E                                # d(ℓ'')/dψ = −dW/dψ
        hd, a_s, sinv = self._hinv_parts(fac)
        c0 = self.codes[0]
        l1 = lam[:self.m1][c0]
        s = l1 * l1 * hd[:self.m1][c0]
        if a_s is not None:
            l2 = lam[self.m1:]
            for ck in self.c2:
                s -= 2 * l1 * l2[ck] * a_s[c0, ck]
            for ck in self.c2:
                for cl in self.c2:
                    s += l2[ck] * l2[cl] * sinv[ck, cl]
        glog = -(s @ dW)
        for k in range(K):
            if sd[k] > 1e-10:
                glog[J1 + p + k] += 2.0 * (self.nlev[k] - hd[self.offs[k]:self.offs[k + 1]].sum()) / sd[k]
        return g + 0.5 * glog


def hessian_from_gradient(grad, x: np.ndarray, delta: float = 1e-4) -> np.ndarray:
    """The Hessian as central differences of an analytic gradient with ordinal's ``deriv12`` step (1e-4),
    symmetrised."""
    n = len(x)
    H = np.empty((n, n))
    for j in range(n):
        e = np.zeros(n)
        e[j] = delta
        H[:, j] = (grad(x + e) - grad(x - e)) / (2 * delta)
    return 0.5 * (H + H.T)


# ----------------------------------------------------------------------------- the result


@dataclass(frozen=True, eq=False, repr=False)
class ClmmResult(Result):
    """A fitted cumulative-link mixed model in ``ordinal::clmm``'s terms.

    Attributes
    ----------
    levels : the ordered response categories; thresholds : α named ``"1|2"``, ``"2|3"``, … (clmm's
        ``m$alpha``); threshold_se, fixef (β, clmm's ``m$beta``), se, z, p : pandas.Series as ``summary(m)``.
    vcov : clmm's ``vcov(m)`` over thresholds, coefficients and the random-effect SDs (named ``ST1``, … when
        not on the boundary); sd : random-intercept standard deviations by grouping factor (``VarCorr``).
    ranef : per factor the conditional modes (``mode``, clmm's ``ranef``) and conditional variances
        (``condvar``, clmm's ``condVar``); loglik, aic, bic : the Laplace log-likelihood and criteria.
    niter, max_grad, cond_h : as ``summary(m)`` prints them; messages : what the fit noticed (rows dropped
        for missing values, boundary fits).
    """

    formula: str
    link: str
    response: str
    levels: tuple[str, ...]
    thresholds: pd.Series
    threshold_se: pd.Series
    fixef: pd.Series
    se: pd.Series
    z: pd.Series
    p: pd.Series
    vcov: pd.DataFrame
    sd: pd.Series
    ranef: Mapping[str, pd.DataFrame]
    loglik: float
    aic: float
    bic: float
    nobs: int
    ngroups: Mapping[str, int]
    niter: int
    max_grad: float
    cond_h: float
    converged: bool
    singular: bool
    messages: tuple[str, ...]
    fit_seconds: float
    threshold: str = "flexible"
    engine: str = "native (Laplace)"
    n_dropped: int = 0
    info: Any = field(default=None, repr=False)
    frame: pd.DataFrame | None = field(default=None, repr=False)
    optinfo: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def npar(self) -> int:
        return len(self.thresholds) + len(self.fixef) + len(self.sd)

    @property
    def capabilities(self) -> Capabilities:
        """What a clmm fit supports (:data:`~mrcstats.models.family_table.CAPABILITIES`)."""
        return CAPABILITIES["clmm"]

    def coef_table(self) -> pd.DataFrame:
        """``summary(m)$coefficients`` rows of β: Estimate, Std. Error, z value, Pr(>|z|)."""
        return pd.DataFrame({"Estimate": self.fixef, "Std. Error": self.se, "z value": self.z, "Pr(>|z|)": self.p})

    def threshold_table(self) -> pd.DataFrame:
        """The threshold coefficients: Estimate, Std. Error, z value."""
        return pd.DataFrame({"Estimate": self.thresholds, "Std. Error": self.threshold_se,
                             "z value": self.thresholds / self.threshold_se})

    def predict(self, newdata: pd.DataFrame | None = None) -> pd.DataFrame:
        """Population-level category probabilities (random effects at 0), one column per level:
        P(Y = j | x) = F(α_j − xᵀβ) − F(α_{j−1} − xᵀβ). ``newdata`` needs the fixed-effect columns."""
        require(self, "predict")
        if newdata is None:
            if self.frame is None:
                raise InputError("clmm predict(): this fit kept no data; pass newdata")
            newdata = self.frame
        if not isinstance(newdata, pd.DataFrame):
            raise InputError(f"clmm predict(): newdata must be a pandas DataFrame, got {type(newdata).__name__}")
        eta = self._latent(newdata)
        cut = np.concatenate([[-np.inf], self.thresholds.to_numpy(float), [np.inf]])
        P = category_probs(self.link, cut[None, 1:] - eta[:, None], cut[None, :-1] - eta[:, None])
        return pd.DataFrame(P, index=newdata.index, columns=list(self.levels))

    def _latent(self, data: pd.DataFrame) -> np.ndarray:
        if not len(self.fixef):
            return np.zeros(len(data))
        missing = [c for c in self.info.spec.fixed_columns if c not in data.columns]
        if missing:
            raise InputError(f"clmm predict(): newdata lacks column(s) {missing} of the fixed part")
        X = self.info.model_matrix(data)
        names = list(self.info.column_names)
        idx = [names.index(c) for c in self.fixef.index]
        return X[:, idx] @ self.fixef.to_numpy(float)

    def emmeans(self, specs: str | Sequence[str], by: str | Sequence[str] | None = None,
                at: Mapping[str, Any] | None = None, level: float = 0.95):
        """Marginal means on the latent scale, as emmeans's ``emmeans(m, specs, mode = "latent")`` for a clmm:
        xᵀβ − mean(α) averaged over the reference grid (:func:`mrcstats.models.emmeans.emmeans`)."""
        from mrcstats.models.emmeans import emmeans

        return emmeans(self, specs, by=by, type="link", at=at, level=level)

    def emmeans_view(self, type: str = "link") -> _LatentView:
        """The linear model :func:`mrcstats.models.emmeans.emmeans` takes the means of: the latent scale."""
        if type != "link":
            raise InputError("emmeans of a clmm are on the latent scale only (type='link'); the category "
                             "probabilities are m.predict(newdata)")
        return _LatentView.of(self)

    # ------------------------------------------------------------------ output
    def to_frame(self) -> pd.DataFrame:
        """Thresholds, coefficients, then random-effect SDs, one row per parameter (tidy, as broom's clmm)."""
        th = pd.DataFrame({"effect": "threshold", "group": None, "term": list(self.thresholds.index),
                           "estimate": self.thresholds.to_numpy(), "std_error": self.threshold_se.to_numpy(),
                           "statistic": (self.thresholds / self.threshold_se).to_numpy(), "p_value": np.nan})
        fx = pd.DataFrame({"effect": "fixed", "group": None, "term": list(self.fixef.index),
                           "estimate": self.fixef.to_numpy(), "std_error": self.se.to_numpy(),
                           "statistic": self.z.to_numpy(), "p_value": self.p.to_numpy()})
        rx = pd.DataFrame({"effect": "ran_pars", "group": list(self.sd.index), "term": "sd__(Intercept)",
                           "estimate": self.sd.to_numpy(), "std_error": np.nan, "statistic": np.nan,
                           "p_value": np.nan})
        return pd.concat([d for d in (th, fx, rx) if len(d)], ignore_index=True)

    def to_dict(self) -> dict[str, Any]:
        """The CLI ``--json`` object: glmer's keys plus ``thresholds`` (``"1|2"``, …), ``threshold_se``,
        ``sd`` (random-intercept SDs by factor), ``levels`` and clmm's ``max_grad``/``cond_h``."""
        return {
            "formula": self.formula, "family": "cumulative", "link": self.link, "threshold": self.threshold,
            "engine": self.engine, "nagq": 1, "nobs": self.nobs, "ngroups": dict(self.ngroups),
            "levels": list(self.levels), "thresholds": self.thresholds.to_dict(),
            "threshold_se": self.threshold_se.to_dict(),
            "fixef": self.fixef.to_dict(), "se": self.se.to_dict(), "z": self.z.to_dict(), "p": self.p.to_dict(),
            "theta": {f"{g}.(Intercept)": float(v) for g, v in self.sd.items()},
            "sd": self.sd.to_dict(),
            "varcorr": [{"group": g, "name": "(Intercept)", "var2": None, "variance": float(v) ** 2, "sd": float(v)}
                        for g, v in self.sd.items()],
            "loglik": self.loglik, "aic": self.aic, "bic": self.bic, "minus2loglik": -2 * self.loglik,
            "df_resid": self.nobs - self.npar, "niter": self.niter, "max_grad": self.max_grad,
            "cond_h": self.cond_h, "converged": self.converged, "singular": self.singular,
            "messages": list(self.messages), "fit_seconds": self.fit_seconds,
        }

    def ranef_dict(self) -> dict[str, dict[str, dict[str, float]]]:
        from mrcstats.models.results import ranef_dict

        return ranef_dict(self.ranef)

    def summary(self) -> str:
        """The layout of ``summary(clmm(...))``."""
        from mrcstats.models.results import coef_lines, varcorr_lines

        heads = ["link", "threshold", "nobs", "logLik", "AIC", "niter", "max.grad", "cond.H"]
        cells = [self.link, self.threshold, str(self.nobs), f"{self.loglik:.2f}", f"{self.aic:.2f}",
                 f"{self.niter}({self.optinfo.get('inner', 0)})", f"{self.max_grad:.2e}", f"{self.cond_h:.1e}"]
        w = [max(len(h), len(c)) for h, c in zip(heads, cells)]
        out = ["Cumulative Link Mixed Model fitted with the Laplace approximation", "",
               f"formula: {self.formula}", "",
               " " + " ".join(h.ljust(k) for h, k in zip(heads, w)),
               " " + " ".join(c.ljust(k) for c, k in zip(cells, w)), "", "Random effects:"]
        vc = pd.DataFrame({"group": list(self.sd.index), "name": "(Intercept)", "var2": None,
                           "variance": self.sd.to_numpy() ** 2, "sd": self.sd.to_numpy()})
        out += varcorr_lines(vc)
        out.append("Number of groups:  " + ",  ".join(f"{g} {n}" for g, n in self.ngroups.items()))
        if len(self.fixef):
            out += ["", "Coefficients:", *coef_lines(self.coef_table()), "---",
                    "Signif. codes:  0 '***' 0.001 '**' 0.01 '*' 0.05 '.' 0.1 ' ' 1"]
        else:
            out += ["", "No Coefficients"]
        tt = self.threshold_table()
        out += ["", "Threshold coefficients:",
                tt.to_string(formatters={"Estimate": "{:.4f}".format, "Std. Error": "{:.4f}".format,
                                         "z value": "{:.3f}".format})]
        if self.messages:
            out += ["", *self.messages]
        return "\n".join(out)

    def __str__(self) -> str:
        return self.summary()


@dataclass(frozen=True, eq=False)
class _LatentView:
    """A clmm seen as the linear model emmeans needs: the intercept is −mean(α) (emmeans's latent mode)."""

    fixef: pd.Series
    vcov: pd.DataFrame
    info: Any
    frame: pd.DataFrame
    formula: str
    family: Any
    fit_options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def capabilities(self) -> Capabilities:
        return CAPABILITIES["clmm"]

    @classmethod
    def of(cls, m: ClmmResult) -> _LatentView:
        if m.info is None or m.frame is None:
            raise InputError("clmm emmeans(): the fit kept no design or data")
        names = list(m.info.column_names)
        th, fx = list(m.thresholds.index), list(m.fixef.index)
        # each latent column as a linear function of (α, β)
        G = np.zeros((len(names), len(th) + len(fx)))
        for i, nm in enumerate(names):
            if nm == "(Intercept)":
                G[i, :len(th)] = -1.0 / len(th)
            else:
                G[i, len(th) + fx.index(nm)] = 1.0
        V = m.vcov.loc[th + fx, th + fx].to_numpy(float)
        est = G @ np.concatenate([m.thresholds.to_numpy(float), m.fixef.to_numpy(float)])
        fam = dataclasses.replace(GAUSSIAN, name="cumulative", link="latent")   # family_table.LABELS["cumulative"]
        return cls(fixef=pd.Series(est, index=names), vcov=pd.DataFrame(G @ V @ G.T, index=names, columns=names),
                   info=m.info, frame=m.frame, formula=m.formula, family=fam)


# ----------------------------------------------------------------------------- fitting


def clmm(formula: str | ModelSpec, data: pd.DataFrame, link: str = "logit",
         contrasts: Mapping[str, str] | None = None, levels: Mapping[str, Any] | None = None) -> ClmmResult:
    """Fit a cumulative-link mixed model as ``ordinal::clmm(formula, data, link = link)`` (Laplace, flexible
    thresholds).

    Parameters
    ----------
    formula : ``"rating ~ x + LLM + (1 | item) + (1 | model)"``: an ordered response, fixed effects, and one or
        more random intercepts (crossed allowed; random slopes are not supported).
    data : pandas DataFrame. The rating column holds consecutive whole numbers (1..5), an ordered Categorical,
        or labels whose order ``levels`` gives (``levels={"rating": ["bad", "ok", "good"]}``).
    link : ``"logit"`` (proportional odds) or ``"probit"``.
    contrasts, levels : as :func:`mrcstats.glmer` (``levels`` also orders a text rating).

    Returns
    -------
    ClmmResult

    References
    ----------
    Christensen (2019), ordinal: Regression Models for Ordinal Data (R package, ``clmm``, ``getNLA``,
    ``update.u``, ``deriv12``); Agresti (2010), *Analysis of Ordinal Categorical Data*, ch. 10.
    """
    from mrcstats.models.design import build_design

    t0 = time.perf_counter()
    if link not in LINKS:
        raise InputError(f"clmm: link must be one of {list(LINKS)}, got {link!r}")
    if not isinstance(formula, (str, ModelSpec)):
        raise InputError(f"clmm: formula must be R formula text such as 'rating ~ x + (1 | item)', got "
                         f"{type(formula).__name__}")
    if not isinstance(data, pd.DataFrame):
        raise InputError(f"clmm: data must be a pandas DataFrame, got {type(data).__name__}")
    spec = parse_formula(formula) if isinstance(formula, str) else formula
    if spec.response.is_cbind:
        raise InputError(f"clmm: {spec.response.text}: the response is one column of ordered ratings, not cbind()")
    if not spec.random:
        raise InputError(f"clmm: formula {spec.formula!r} has no random intercept such as (1 | item); clmm needs one")
    if not spec.intercept:
        raise InputError(f"clmm: formula {spec.formula!r} removes the intercept ('0 +' or '- 1'); the thresholds take "
                         "its place in a cumulative-link model, so write the formula with it (e.g. 'rating ~ LLM + "
                         "(1 | item)')")
    slopes = [r.text for r in spec.random if not r.is_scalar]
    if slopes:
        raise InputError(f"clmm: random slopes ({', '.join(slopes)}) are not supported; use random intercepts "
                         "(1 | g), crossed as (1 | item) + (1 | model)")
    col = spec.response.column
    if col not in data.columns:
        raise InputError(f"data: response column {col!r} is not in the data (columns: {list(data.columns)[:20]})")
    lv_arg = dict(levels or {})
    codes, lv = ordinal_response(data[col], col, lv_arg.pop(col, None), "data")
    data2 = data.copy(deep=False)
    data2[col] = codes
    design = build_design(spec.with_family(GAUSSIAN), data2, contrasts=contrasts, levels=lv_arg or None)
    y = design.y.astype(np.int64)
    used = np.bincount(y, minlength=len(lv))
    if np.count_nonzero(used) < 3 or not used.all():   # rows dropped for missing covariates can empty a level
        gap = [x for x, u in zip(lv, used) if not u]
        raise InputError(f"data: after dropping rows with missing values, rating column {col!r} has no row with "
                         f"level(s) {gap} of {list(lv)}; a cumulative-link model needs every level and at least 3")
    names = list(design.info.column_names)
    keep = [j for j, nm in enumerate(names) if nm != "(Intercept)"]
    X = np.asarray(design.X, float)[:, keep]
    bnames = [names[j] for j in keep]
    from mrcstats.models.optimize import blas_controller

    ctl = blas_controller()
    if ctl is None:  # pragma: no cover
        return _fit(design, X, bnames, y, lv, link, col, t0)
    with ctl.limit(limits=1, user_api="blas"):
        return _fit(design, X, bnames, y, lv, link, col, t0)


def _start(y: np.ndarray, J: int, link: str) -> np.ndarray:
    """Thresholds at the link of the cumulative proportions (clm's start with β = 0)."""
    cum = np.cumsum(np.bincount(y, minlength=J))[:-1] / len(y)
    return special.logit(cum) if link == "logit" else special.ndtri(cum)


def _fit(design, X, bnames, y, lv, link, col, t0) -> ClmmResult:
    re = list(design.re)
    model = ClmmLaplace(X, y, [t.codes for t in re], [t.nlevels for t in re], link)
    J1, p, K = len(lv) - 1, X.shape[1], len(re)
    x0 = np.concatenate([_start(y, len(lv), link), np.zeros(p), np.ones(K)])
    lower = np.concatenate([np.full(J1 + p, -np.inf), np.zeros(K)])

    def fg(x):
        f, g = model.nla(x, keep=True, grad=True)
        return (f, g) if np.isfinite(f) else (1e300, np.zeros(len(x)))

    bounds = [(0.0, None) if lo == 0 else (None, None) for lo in lower]
    r = optimize.minimize(fg, x0, jac=True, method="L-BFGS-B", bounds=bounds,
                          options={"maxiter": 3000, "ftol": 1e-15, "gtol": 1e-8, "maxcor": 20})
    x = np.maximum(r.x, lower)
    fval, grad_all = model.nla(x, keep=True, grad=True)
    alpha, beta, sd = model.split(x)
    # clmm's Hessian over the parameters off the boundary (paratBoundary2)
    free = ~((lower == 0) & (x < BOUNDARY_TOL))
    idx = np.flatnonzero(free)

    def gsub(z):
        xx = x.copy()
        xx[idx] = z
        return model.nla(xx, grad=True)[1][idx]

    H = hessian_from_gradient(gsub, x[idx])
    grad = grad_all[idx]
    model.nla(x, keep=True)
    messages = list(design.messages)
    try:
        Vf = np.linalg.inv(H)
        evals = np.linalg.eigvalsh(H)
        cond_h = float(evals.max() / evals.min()) if evals.min() > 0 else math.inf
        if evals.min() <= 0:
            messages.append("the Hessian of the Laplace likelihood is not positive definite: the model may be "
                            "unidentifiable (standard errors are NaN)")
            Vf = np.full(H.shape, np.nan)
    except np.linalg.LinAlgError:
        Vf = np.full(H.shape, np.nan)
        cond_h = math.inf
        messages.append("the Hessian of the Laplace likelihood is singular; no standard errors")
    th_names = [f"{lv[j]}|{lv[j + 1]}" for j in range(J1)]
    sd_names = [t.name for t in re]
    pnames = th_names + list(bnames) + [f"ST{k + 1}" for k in range(K)]
    V = pd.DataFrame(Vf, index=[pnames[i] for i in idx], columns=[pnames[i] for i in idx])
    se_all = np.full(len(x), np.nan)
    se_all[idx] = np.sqrt(np.where(np.diag(Vf) >= 0, np.diag(Vf), np.nan))
    singular = bool(np.any(~free))
    if singular:
        messages.append("random-effect SD(s) at the boundary (0): " +
                        ", ".join(sd_names[k] for k in range(K) if not free[J1 + p + k]))
    max_grad = float(np.max(np.abs(grad))) if grad.size else 0.0
    converged = bool(r.success) or max_grad < 1e-3
    if not converged:
        messages.append(f"the optimiser did not converge ({r.message}; max|gradient| {max_grad:.2g})")
    # conditional modes b = σu and variances σ² diag(H⁻¹), as clmm's ranef/condVar
    res = model.modes(alpha, beta, sd)
    u, fac = res[0], res[1]
    lam = np.repeat(sd, model.nlev)
    cv = lam * lam * model.hinv_diag(fac)
    b = lam * u
    ranef = {t.name: pd.DataFrame({"mode": b[model.offs[k]:model.offs[k + 1]],
                                   "condvar": cv[model.offs[k]:model.offs[k + 1]]},
                                  index=pd.Index(list(t.levels), name=t.name)) for k, t in enumerate(re)}
    loglik = -fval
    npar = len(x)
    n = len(y)
    bse = se_all[J1:J1 + p]
    with np.errstate(divide="ignore", invalid="ignore"):
        z = beta / bse
    return ClmmResult(
        formula=design.info.spec.formula, link=link, response=col, levels=tuple(lv),
        thresholds=pd.Series(alpha, index=th_names, name="Estimate"),
        threshold_se=pd.Series(se_all[:J1], index=th_names, name="Std. Error"),
        fixef=pd.Series(beta, index=list(bnames), name="Estimate"),
        se=pd.Series(bse, index=list(bnames), name="Std. Error"),
        z=pd.Series(z, index=list(bnames), name="z value"),
        p=pd.Series(2 * norm_sf(np.abs(z)), index=list(bnames), name="Pr(>|z|)"),
        vcov=V, sd=pd.Series(sd, index=sd_names, name="Std.Dev."), ranef=ranef, loglik=loglik,
        aic=-2 * loglik + 2 * npar, bic=-2 * loglik + math.log(n) * npar, nobs=n, ngroups=design.ngroups,
        niter=int(r.nit), max_grad=max_grad, cond_h=cond_h, converged=converged, singular=singular,
        messages=tuple(dict.fromkeys(messages)), fit_seconds=time.perf_counter() - t0,
        n_dropped=int(design.n_dropped), info=design.info, frame=design.frame,
        optinfo={"optimizer": "L-BFGS-B", "nit": int(r.nit), "nfev": model.nfev, "inner": model.inner,
                 "message": str(r.message), "par": x.tolist()})


__all__ = ["LINKS", "ClmmLaplace", "ClmmResult", "category_probs", "clmm", "ordinal_response"]
