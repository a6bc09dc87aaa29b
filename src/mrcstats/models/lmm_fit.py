"""The linear mixed model's profiled deviance and its optimiser, as lme4's ``lmer`` (REML or ML).

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
over the rows (the cross-products ZᵀZ, ZᵀX, Zᵀy, XᵀX, Xᵀy, yᵀy; Z's blocks as bincounts over the level codes,
Z itself never formed) is in the dimension of the random effects; per θ only Λ's scaling and the factorisation
are redone: the first term (most levels) is block-diagonal in M, one q₁ x q₁ block per level (closed forms
for q₁ ≤ 2; stored component-major, levels last, so every per-level operation runs over contiguous vectors),
the other terms are eliminated through a dense Schur complement S, as the GLMM kernels
(:class:`~mrcstats.models.deviance.GeneralModel`) do — MixedModels.jl's blocked Cholesky factor with a
diagonal (crossed intercepts) or block-diagonal (slopes) first block. θ minimises d by L-BFGS-B on the exact
gradient (:meth:`LmmSystem.grad_parts`: ∂log|L|² from the diagonal blocks of M⁻¹ΛᵀZᵀZ, ∂r² by the envelope
theorem, ∂log|RX|² from ∂RXᵀRX; lme4: derivative-free BOBYQA), polished by Newton steps whose Hessian is
forward differences of that gradient.

With one random-effects term of at most ``KERNEL_MAXQ`` columns, an evaluation and its gradient are one pass of
the C extension ``mrcstats.models._lmmkernel`` over the levels (log|L|², K = (ΛᵀZᵀ[y X])ᵀM⁻¹ΛᵀZᵀ[y X], the sums
the gradient needs; q ≤ 2 four levels per vector step): ~1.5 ms instead of ~16 ms on 122,701 levels. The
extension is built on install where a C compiler is (optional in ``setup.py``); without it the numpy path
below runs, with the same numbers to rounding (``tests/models/test_lmm_kernel.py``).

The tests of the fixed effects are :mod:`mrcstats.models.lmm_tests`; the fit's result and :func:`fit_lmm`
:mod:`mrcstats.models.lmm_results`; the entry :func:`mrcstats.models.lmm.lmer`.
"""
from __future__ import annotations

import importlib
import math
import weakref
from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy import linalg as sla
from scipy import optimize

from mrcstats.errors import ModelError
from mrcstats.models.numdiff import forward_jacobian, richardson_jacobian

try:    # the one-term kernel, a C loop over the levels (src/mrcstats/models/_lmmkernel.c; built on install)
    KERNEL: Any = importlib.import_module("mrcstats.models._lmmkernel")
except ImportError:  # pragma: no cover - installed without a C compiler: the numpy path below
    KERNEL = None
KERNEL_MAXQ = 8

SINGULAR_TOL = 1e-4
DENSE_MAX = 6000             # random effects outside the first term (dense Schur complement)
PAIRS_MAX = 30_000_000       # first-term x other-term coupling entries kept dense
RECENT_PAIRS = 4_000_000     # above, one recent evaluation is remembered instead of two


# ----------------------------------------------------------------------------- the PLS system


def _along(T: np.ndarray, X: np.ndarray, axis: int = 0, out: np.ndarray | None = None,
           tmp: np.ndarray | None = None) -> np.ndarray:
    """T applied along one axis of X: out[..., a, ...] = Σ_b T[a, b] X[..., b, ...] (T: q x q, small), as scaled
    sums of X's slices (contiguous for axis 0, the component-major layout; no transposed copies). ``out`` and
    ``tmp`` (axis 0: X.shape and X.shape[1:]) are reused buffers for the large first-term arrays."""
    q = T.shape[0]
    if q == 1:
        return X * T[0, 0] if out is None else np.multiply(X, T[0, 0], out=out)
    Xv = np.moveaxis(X, axis, 0) if axis else X
    out = np.empty(X.shape) if out is None else out
    ov = np.moveaxis(out, axis, 0) if axis else out
    tmp = np.empty(Xv.shape[1:]) if tmp is None else tmp
    for a in range(q):
        np.multiply(Xv[0], T[a, 0], out=ov[a])
        for b in range(1, q):
            if T[a, b] != 0.0:
                np.multiply(Xv[b], T[a, b], out=tmp)
                ov[a] += tmp
    return out


def _sblk(M: np.ndarray, X: np.ndarray, lead: bool = False, tmp: np.ndarray | None = None) -> np.ndarray:
    """Per level j: M[:, :, j] @ X[:, :, j] for M (q x q x levels) and X (q x m x levels), or with ``lead``
    X (q x levels x m): the first-term blocks component-major, every operation on contiguous runs (``tmp``, of
    X.shape[1:], a reused buffer)."""
    q = M.shape[0]
    if q == 1:
        return (M[0, 0][:, None] if lead else M[0, 0]) * X
    out = np.empty(X.shape)
    tmp = np.empty(X.shape[1:]) if tmp is None else tmp
    for a in range(q):
        np.multiply(M[a, 0][:, None] if lead else M[a, 0], X[0], out=out[a])
        for b in range(1, q):
            np.multiply(M[a, b][:, None] if lead else M[a, b], X[b], out=tmp)
            out[a] += tmp
    return out


def _lsum(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """out[i, j] = Σ X[i, ...] Y[j, ...] (the sum over the levels and any middle axis), as dot products of
    contiguous slices."""
    Xf = X.reshape(X.shape[0], -1)
    Yf = Y.reshape(Y.shape[0], -1)
    return Xf @ Yf.T


def _combine(W: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """W[:, 0] − Σ_k β_k W[:, 1 + k] for W (q x (1 + p) x levels)."""
    if not len(beta):
        return W[:, 0, :].copy()
    return W[:, 0, :] - np.matmul(beta, W[:, 1:, :])


class _Evaluation(dict):
    """:meth:`LmmSystem.evaluate`'s result; ``u`` (the spherical modes in u's order) is assembled when read. An
    evaluation by the one-term kernel holds the sums (``sums``: K, Q, G) and the profiled quantities; the PLS
    pieces the result needs (``fac``, ``W``, ``u_split``, ``Y1``, ``Ts``) are computed when first read (at the
    optimum only), with the kernel's β."""

    HEAVY = frozenset({"fac", "W", "u_split", "Y1", "Ts", "cv1"})
    MODES = frozenset({"u_split", "Ts", "cv1"})      # what the kernel's second pass gives (the result needs no more)

    def __missing__(self, key):
        if key == "u":
            u1, u2 = self["u_split"]
            self["u"] = u = np.concatenate([u1.T.ravel(), u2])
            return u
        ref = self.get("system")
        sys_ = ref() if ref is not None else None
        if key in self.HEAVY and sys_ is not None:
            modes = sys_.kernel_modes(self["theta"], self["beta"]) if key in self.MODES else None
            if modes is None:
                del self["system"]
                modes = sys_.pls_pieces(self["theta"], self["beta"])
            for k, v in modes.items():
                self.setdefault(k, v)
            return self[key]
        raise KeyError(key)


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
        sizes = [t.nlevels * t.q for t in self.terms]
        self.offs = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
        self.nq = int(self.offs[-1])
        self.m1 = int(self.offs[1])        # first term's random effects
        self.Q2 = self.nq - self.m1
        if self.Q2 > DENSE_MAX:
            raise ModelError(f"lmer: the random-effects terms after the first have {self.Q2} random effects "
                             f"(limit {DENSE_MAX} for the dense Schur complement); simplify the model")
        if self.Q2 and self.m1 * self.Q2 > PAIRS_MAX:
            raise ModelError(f"lmer: the coupling of the random-effects terms would have {self.m1 * self.Q2} "
                             f"entries (limit {PAIRS_MAX}); simplify the model")
        self.XtX = X.T @ X
        self.Xty = X.T @ y
        self.yty = float(y @ y)
        self.response = _response_name(design)
        if self.n and np.all(y == y[0]):
            raise ModelError(f"lmer: the response {self.response} is constant (every one of the {self.n} rows is "
                             f"{y[0]:g}): there is no variance to split between the groups and the residual (lme4 "
                             f"returns a singular fit without a covariance matrix); check the response column")
        self._crossprods(X, y)
        self.ZtR = np.column_stack([self.Zty, self.ZtX])         # Zᵀ[y X], one Λᵀ product per evaluation
        self._ztr = (None, None)
        self.nfev = 0
        self._cache: dict[bytes, tuple] = {}
        self._recent: list[tuple[bytes, dict[str, Any]]] = []
        self._best: tuple[bytes | None, dict[str, Any] | None] = (None, None)
        self._bufs: dict[str, np.ndarray] = {}

    def _crossprods(self, X: np.ndarray, y: np.ndarray) -> None:
        """ZᵀZ (as its first-term diagonal blocks A11, the coupling A12 and the other terms' A22), Zᵀy and ZᵀX in
        one pass per pair of random-effects columns: Z's columns are indicators times a row value (1 or a slope
        covariate), so every block is a bincount of products over the level codes (no sparse Z)."""
        n, p = self.n, self.p
        # every weight vector contiguous once (a strided one is copied by each bincount) and the products into one
        # reused buffer: the same products summed in the same order, without a fresh row-length array per block
        zc = [[None if t.Z is None else np.ascontiguousarray(t.Z[:, c], dtype=float) for c in range(t.q)]
              for t in self.terms]
        codes = [np.asarray(t.codes, np.intp) for t in self.terms]
        R = [np.ascontiguousarray(y, dtype=float)] + [np.ascontiguousarray(X[:, j]) for j in range(p)]   # [y X]
        buf = np.empty(n)

        def bc(idx, a, b, size):
            if a is None and b is None:
                return np.bincount(idx, minlength=size)[:size].astype(float)
            w = b if a is None else (a if b is None else np.multiply(a, b, out=buf))
            return np.bincount(idx, weights=w, minlength=size)[:size]

        ZtR = np.empty((self.nq, 1 + p))
        for k, t in enumerate(self.terms):
            blk = ZtR[self.offs[k]:self.offs[k + 1]].reshape(t.nlevels, t.q, 1 + p)
            for c in range(t.q):
                for m in range(1 + p):
                    blk[:, c, m] = bc(codes[k], zc[k][c], R[m], t.nlevels)
        self.Zty = np.ascontiguousarray(ZtR[:, 0])
        self.ZtX = np.ascontiguousarray(ZtR[:, 1:])
        q1, n1 = self.qs[0], self.nls[0]
        # first-term diagonal blocks of ZᵀZ, component-major (q1 x q1 x levels: every per-level operation is on
        # contiguous vectors over the levels)
        A11 = np.empty((q1, q1, n1))
        for a in range(q1):
            for b in range(a, q1):
                A11[a, b] = A11[b, a] = bc(codes[0], zc[0][a], zc[0][b], n1)
        self.A11 = A11
        # the first term's rows in component-major order (row c·n1 + j holds level j's column c)
        self._perm1 = (np.arange(n1)[None, :] * q1 + np.arange(q1)[:, None]).ravel()
        self.A12 = self.A22 = None
        if not self.Q2:
            return
        m1, Q2 = self.m1, self.Q2
        A12 = np.empty((q1, n1, Q2))                                  # component-major rows
        A22 = np.zeros((Q2, Q2))
        for k in range(1, len(self.terms)):
            nk, qk, o = self.nls[k], self.qs[k], self.offs[k] - m1
            pair = codes[0] * nk + codes[k]
            for a in range(q1):
                for b in range(qk):
                    A12[a, :, o + b:o + nk * qk:qk] = bc(pair, zc[0][a], zc[k][b], n1 * nk).reshape(n1, nk)
            lv = np.arange(nk)
            for a in range(qk):                                        # the term's own diagonal blocks
                for b in range(a, qk):
                    v = bc(codes[k], zc[k][a], zc[k][b], nk)
                    A22[o + lv * qk + a, o + lv * qk + b] = v
                    A22[o + lv * qk + b, o + lv * qk + a] = v
            for m in range(k + 1, len(self.terms)):                    # the coupling with the later terms
                nl, ql, ol = self.nls[m], self.qs[m], self.offs[m] - m1
                pair = codes[k] * nl + codes[m]
                for a in range(qk):
                    for b in range(ql):
                        blk = bc(pair, zc[k][a], zc[m][b], nk * nl).reshape(nk, nl)
                        A22[o + a:o + nk * qk:qk, ol + b:ol + nl * ql:ql] = blk
                        A22[ol + b:ol + nl * ql:ql, o + a:o + nk * qk:qk] = blk.T
        self.A12 = A12.reshape(m1, Q2)
        self.A22 = A22

    def _scratch(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        """A work array reused across evaluations (never part of a result): the m1 x Q2 temporaries of every
        evaluation would otherwise be fresh allocations, mapped and page-faulted anew each time."""
        buf = self._bufs.get(name)
        if buf is None or buf.shape != shape:
            buf = self._bufs[name] = np.empty(shape)
        return buf

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

    # ------------------------------------------------------------------ the start
    def _diag_blocks(self, k: int, A: np.ndarray) -> np.ndarray:
        """The diagonal blocks of a later term k (k >= 1) in a Q2 x Q2 array (A₂₂, S⁻¹): levels x q x q."""
        qk, o = self.qs[k], self.offs[k] - self.m1
        idx = o + np.arange(self.nls[k])[:, None] * qk + np.arange(qk)[None, :]
        return A[idx[:, :, None], idx[:, None, :]]

    def _term_blocks(self, k: int) -> np.ndarray:
        """Z_jᵀZ_j of term k's levels (levels x q x q), from the cross-products."""
        return self.A11.transpose(2, 0, 1) if k == 0 else self._diag_blocks(k, self.A22)

    def moment_start(self, lower: np.ndarray) -> np.ndarray | None:
        """A start for θ from moments of the ordinary least-squares residuals r = y − Xβ̂_OLS (each term alone, the
        others treated as noise; Henderson's method-of-moments idea, Searle, Casella & McCulloch 1992, ch. 5): per
        level j of term k the residuals' regression on the term's columns b_j = (Z_jᵀZ_j)⁻¹Z_jᵀr, the within-level
        variance s_k² = (rᵀr − Σ_j b_jᵀZ_jᵀr)/(n − p − q·J), and Σ_k = mean_j b_jb_jᵀ − s_k² mean_j (Z_jᵀZ_j)⁻¹
        ; σ² = rᵀr/(n − p) − Σ_k tr(Σ_k Σ_j Z_jᵀZ_j)/n (floored at a tenth of the first; at most the smallest s_k²),
        and T_k diagonal with the SDs √(Σ_k,ii/σ²) (at least 0.05): the correlations start at 0 as from lme4's
        identity start (a few levels' sample correlation can put the start in the basin of a boundary optimum of
        the other sign). Everything comes from the cross-products (no pass over the rows). None when the residuals or a term's levels leave nothing to estimate."""
        n, p = self.n, self.p
        if p:
            beta = np.linalg.lstsq(self.XtX, self.Xty, rcond=None)[0]
            rss = self.yty - float(beta @ self.Xty)
            zr = self.Zty - self.ZtX @ beta
        else:
            rss, zr = self.yty, self.Zty
        if not (n > p and rss > 0 and math.isfinite(rss)):
            return None
        s2 = rss / (n - p)
        sigmas, used, within = [], 0.0, []
        for k, t in enumerate(self.terms):
            q, nk = self.qs[k], self.nls[k]
            A = self._term_blocks(k)
            c = zr[self.offs[k]:self.offs[k + 1]].reshape(nk, q)
            if q == 1:
                ok = A[:, 0, 0] > 0
                Ai = np.zeros_like(A)
                Ai[ok, 0, 0] = 1.0 / A[ok, 0, 0]
            else:
                det = np.linalg.det(A)
                scale = np.einsum("jaa->j", A) ** q
                ok = det > 1e-8 * scale
                Ai = np.zeros_like(A)
                if ok.any():
                    Ai[ok] = np.linalg.inv(A[ok])
            nok = int(ok.sum())
            dof = n - p - q * nok
            if nok < 2 or dof <= 0:
                return None
            b = np.einsum("jab,jb->ja", Ai, c)[ok]
            sw = (rss - float(np.einsum("ja,ja->", b, c[ok]))) / dof
            Sig = b.T @ b / nok - max(sw, 0.0) * Ai[ok].mean(axis=0)
            sigmas.append(Sig)
            within.append(sw)
            used += float(np.trace(Sig @ A.sum(axis=0))) / n
        sig2 = max(s2 - used, 0.1 * s2)
        sw = min(within)
        if sw < sig2:                       # a term's within-level variance bounds σ² (tiny residual variance)
            sig2 = max(sw, 1e-10 * s2)
        th = []
        for k, Sig in enumerate(sigmas):
            sd = np.sqrt(np.maximum(np.diag(Sig) / sig2, 0.05 ** 2))
            th.extend(sd[i] if i == j else 0.0 for i, j in self.terms[k]._tri())
        th = np.asarray(th, float)
        if not np.all(np.isfinite(th)):
            return None
        return np.maximum(th, lower)

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
        S = Λ₂ᵀA₂₂Λ₂ + I − CᵀG, log|M|, and (for the gradient) T₁ᵀA_j and P = C₀ᵀG with C₀ = Λ₁ᵀA₁₂ (CᵀG = Λ₂ᵀP: one
        m1·Q2² product per evaluation)."""
        T1 = Ts[0]
        q1 = self.qs[0]
        TA = _along(T1.T, self.A11)                         # T₁ᵀA_j
        D = _along(T1.T, TA, 1)                                                  # T₁ᵀA_jT₁
        for a in range(q1):
            D[a, a] += 1.0
        Dinv, ld = _sinv(D)
        if not self.Q2:
            return Dinv, None, None, None, ld, None, TA
        n1 = self.nls[0]
        Q2 = self.Q2
        C0 = _along(T1.T, self.A12.reshape(q1, n1, Q2), out=self._scratch("C0", (q1, n1, Q2)),
                    tmp=self._scratch("tmp", (n1, Q2))).reshape(self.m1, Q2)                # Λ₁ᵀA₁₂
        C = self._right_lam2(Ts, C0)
        B = self._right_lam2(Ts, self._right_lam2(Ts, self.A22).T) + np.eye(Q2)   # Λ₂ᵀ A₂₂ Λ₂ + I
        G = _sblk(Dinv, C.reshape(q1, n1, Q2), lead=True, tmp=self._scratch("tmp", (n1, Q2))).reshape(self.m1, Q2)
        P = self._right_lam2(Ts, self._dinv_gram(D, C0)) if q1 <= 2 else C0.T @ G
        S = B - self._lam2(Ts, P, transpose=True)
        try:
            cho = sla.cho_factor(S, lower=True, check_finite=False)
        except np.linalg.LinAlgError:  # pragma: no cover
            raise ModelError("lmer: the random-effects system is not positive definite") from None
        ld += 2.0 * float(np.log(np.diag(cho[0])).sum())
        return Dinv, C, G, cho, ld, P, TA

    def _dinv_gram(self, D: np.ndarray, C0: np.ndarray) -> np.ndarray:
        """C₀ᵀD⁻¹C₀ (Q2 x Q2, D block-diagonal with q1 <= 2) as EᵀE with E = L_D⁻¹C₀ per level (D_j = L_jL_jᵀ in
        closed form): one symmetric rank-k update (numpy's matmul of a transposed array with itself), half the flops of
        the product C₀ᵀG."""
        q1, n1, Q2 = self.qs[0], self.nls[0], self.Q2
        C3 = C0.reshape(q1, n1, Q2)
        l11 = np.sqrt(D[0, 0])
        if q1 == 1:
            E = np.divide(C0, l11[:, None], out=self._scratch("E", C0.shape))
        else:
            l21 = D[1, 0] / l11
            l22 = np.sqrt(D[1, 1] - l21 * l21)
            E = self._scratch("E", C3.shape)
            np.divide(C3[0], l11[:, None], out=E[0])
            np.multiply(E[0], l21[:, None], out=E[1])
            np.subtract(C3[1], E[1], out=E[1])
            E[1] /= l22[:, None]
            E = E.reshape(self.m1, Q2)
        return E.T @ E

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
        Dinv, C, G, cho = fac[:4]
        if C is None:
            return _sblk(Dinv, R1), R2
        y2 = sla.cho_solve(cho, R2 - G.T @ self._as2d(R1), check_finite=False)
        return _sblk(Dinv, R1 - self._as3d(C @ y2)), y2

    # ------------------------------------------------------------------ the deviance
    def evaluate(self, theta: np.ndarray) -> dict[str, Any]:
        """The PLS solution and the deviance at θ. The last two results (one when the coupling of the terms is
        large: each holds m1 x Q2 arrays) and the lowest deviance so far are remembered (the optimiser's end, the
        result and the Satterthwaite step revisit the optimum); a result is read-only."""
        theta = np.asarray(theta, float)
        key = theta.tobytes()
        for k, hit in (*self._recent, self._best):
            if k == key:
                return hit
        e = self._evaluate(theta)
        self._recent = [(key, e), *self._recent[:1 if self.m1 * self.Q2 < RECENT_PAIRS else 0]]
        if self._best[1] is None or e["dev"] <= self._best[1]["dev"]:
            self._best = (key, e)
        return e

    @property
    def kernel(self) -> bool:
        """Whether :meth:`evaluate` runs the one-term C kernel (one term of at most ``KERNEL_MAXQ`` columns,
        the extension built): one pass over the levels per evaluation and gradient."""
        return KERNEL is not None and not self.Q2 and self.qs[0] <= KERNEL_MAXQ

    def _evaluate(self, theta: np.ndarray) -> dict[str, Any]:
        self.nfev += 1
        if self.kernel:
            return self._kernel_evaluate(theta)
        Ts, fac, W, Y1, K = self._pls(theta)
        prof = self._profile(K, fac[4])
        return _Evaluation(prof, fac=fac, Ts=Ts, W=W, u_split=self._modes(W, prof["beta"]), Y1=Y1)

    def _kernel_evaluate(self, theta: np.ndarray) -> dict[str, Any]:
        """The profiled quantities from the kernel's sums (``_lmmkernel.one_term``: log|L|², K, Q, G in one pass
        over the levels); the PLS pieces follow when read (:class:`_Evaluation`)."""
        q, m = self.qs[0], 1 + self.p
        T = np.ascontiguousarray(self.factors(theta)[0], dtype=float)
        Z1 = self._ztr_split()[0]
        K, Q, G = np.empty((m, m)), np.empty((q, q)), np.empty((q, q, m, m))
        try:
            ld = KERNEL.one_term(T, self.A11, Z1, K, Q, G, q, m, self.nls[0])
        except FloatingPointError:  # pragma: no cover - D_j = TᵀA_jT + I is positive definite
            raise ModelError("lmer: a random-effects block is not positive definite") from None
        # (the system by weak reference: it remembers its recent evaluations, and a cycle would keep their
        # level-length arrays alive until the cyclic garbage collector ran, in the middle of a later fit)
        return _Evaluation(self._profile(K, ld), sums=(Q, G), theta=np.array(theta, dtype=float),
                           system=weakref.ref(self))

    def _pls(self, theta: np.ndarray):
        """Λ's factors, the factorisation of M, W = M⁻¹ΛᵀZᵀ[y X] (split layout), Λ₁W₁ (one term; None otherwise) and
        K = (ΛᵀZᵀ[y X])ᵀ W ((1 + p) x (1 + p)) at θ."""
        Ts = self.factors(theta)
        fac = self._factor(Ts)
        Z1, Z2 = self._ztr_split()
        if self.Q2:
            B1 = _along(Ts[0].T, Z1)                           # Λᵀ Zᵀ[y X]
            B2 = self._lam2(Ts, Z2, transpose=True)
            W1, W2 = self._solve(fac, B1, B2)
            Y1 = None
            K = B2.T @ W2
            for a in range(self.qs[0]):
                K = K + B1[a] @ W1[a].T
        else:                        # one term: W_j = D_j⁻¹T₁ᵀ Z_j, K = Σ_j Z_jᵀ T₁W_j (Λ₁W kept for the gradient)
            W1 = _sblk(_along(Ts[0], fac[0], 1), Z1)
            W2 = Z2
            Y1 = _along(Ts[0], W1)
            K = Z1[0] @ Y1[0].T
            for a in range(1, self.qs[0]):
                K = K + Z1[a] @ Y1[a].T
        return Ts, fac, (W1, W2), Y1, K

    def pls_pieces(self, theta: np.ndarray, beta: np.ndarray) -> dict[str, Any]:
        """The PLS pieces at θ (``fac``, ``Ts``, ``W``, ``Y1``, ``u_split``) with the spherical modes at the given β:
        what a kernel evaluation lacks for the result (the random effects, their conditional variances)."""
        Ts, fac, W, Y1, _ = self._pls(theta)
        return {"fac": fac, "Ts": Ts, "W": W, "Y1": Y1, "u_split": self._modes(W, beta)}

    def kernel_modes(self, theta: np.ndarray, beta: np.ndarray) -> dict[str, Any] | None:
        """The random effects at θ by the kernel (q <= 2, p <= 5): ``u_split`` (û = D_j⁻¹T₁ᵀZ_jᵀ(y − Xβ) per level),
        ``Ts`` and ``cv1`` (the blocks T₁D_j⁻¹T₁ᵀ, levels x q x q: :meth:`condvar`); None where it does not apply."""
        q, m, n1 = self.qs[0], 1 + self.p, self.nls[0]
        if not self.kernel:
            return None
        Ts = self.factors(theta)
        U, V = np.empty((q, n1)), np.empty((q, q, n1))
        c = np.concatenate([[1.0], -np.asarray(beta, dtype=float)])
        if not KERNEL.one_term_modes(np.ascontiguousarray(Ts[0], dtype=float), self.A11, self._ztr_split()[0], c,
                                     U, V, q, m, n1):
            return None
        return {"u_split": (U, np.zeros(0)), "Ts": Ts, "cv1": np.ascontiguousarray(V.transpose(2, 0, 1))}

    @staticmethod
    def _modes(W, beta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """û = W [1, −β] in the split layout."""
        W1, W2 = W
        return _combine(W1, beta), W2[:, 0] - W2[:, 1:] @ beta

    def _profile(self, K: np.ndarray, ldL2: float) -> dict[str, Any]:
        """β̂, r², RXᵀRX, log|RX|² and the profiled deviance from K = (ΛᵀZᵀ[y X])ᵀ M⁻¹ ΛᵀZᵀ[y X] and log|L|²:
        RXᵀRX = XᵀX − K_XX, β̂ = (RXᵀRX)⁻¹(Xᵀy − K_Xy), r² = yᵀy − K_yy − β̂ᵀ(Xᵀy − K_Xy) (lme4's PLS, the module's
        docstring)."""
        p = self.p
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
        if not r2 > 1e-12 * self.yty:   # below the precision of the difference above: no residual variance
            raise ModelError(f"lmer: the response {self.response} has no residual variance (the residual sum of "
                             f"squares is below 1e-12 of the response's): the fixed and random effects fit it "
                             f"exactly (e.g. it is constant within every level of "
                             f"{', '.join(repr(t.name) for t in self.terms)}), so the residual SD is 0 and the "
                             f"likelihood unbounded (lme4 warns the model is nearly unidentifiable); check the "
                             f"response, or leave out the term that explains it")
        n = self.n
        if self.reml:
            nmp = n - p
            dev = ldL2 + ldRX2 + nmp * (1.0 + math.log(2 * math.pi * r2 / nmp))
        else:
            dev = ldL2 + n * (1.0 + math.log(2 * math.pi * r2 / n))
        return {"dev": dev, "r2": r2, "ldL2": ldL2, "ldRX2": ldRX2, "beta": beta, "RXtRX": RtR}

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
        ∂log|RX|² = −2 tr((RXᵀRX)⁻¹ Vᵀ dΛ W_X) (Bates et al. 2015, sec. 3, differentiated). Remembered in
        ``e`` (the optimum's gradient is asked for by the optimiser, the Hessian and the Jacobian)."""
        hit = e.get("_grad")
        if hit is not None and (hit[3] is not None or not drtr):
            return hit
        out = self._grad_parts(e, drtr)
        e["_grad"] = out
        return out

    def _grad_parts(self, e: dict[str, Any], drtr: bool):
        if "sums" in e:
            return self._kernel_grad_parts(e, drtr)
        Ts, beta = e["Ts"], e["beta"]
        W1, W2 = e["W"]
        u1, u2 = e["u_split"]
        Dinv, _C, G, cho, _ld, P, TA = e["fac"]
        n1, q1, p, m1, Q2 = self.nls[0], self.qs[0], self.p, self.m1, self.Q2
        T1 = Ts[0]
        Z1, Z2 = self._ztr_split()
        # A Λ W in the split layout
        Y1 = _along(T1, W1) if e["Y1"] is None else e["Y1"]
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
        F1 = np.matmul(Ri, Wx1)                                            # (W_X Ri) per component
        Q = [sum(Dinv[:, s] @ TA[s].T for s in range(q1))]                  # Σ D_j⁻¹ T₁ᵀ A_j
        RU = [res1 @ u1.T]
        VF = [sum(V1[:, m, :] @ F1[:, m, :].T for m in range(p)) if p else np.zeros((q1, q1))]
        if Q2:
            Sinv = sla.cho_solve(cho, np.eye(Q2), check_finite=False)
            # Σ_j (GS⁻¹)_j H_jᵀ with H = A₁₁Λ₁G − A₁₂Λ₂, without forming H: the first part from the diagonal
            # blocks R_j of GS⁻¹Gᵀ (Σ_j A_j T₁ R_jᵀ), the second as one sum of products
            if q1 == 1:
                # one first-term column: A₁₂Λ₂ = (D/t₁)G, so the sum is Σ_j R_j (a_j t₁ − D_j/t₁) = −tr(S⁻¹GᵀG)/t₁
                # (G = 0 at t₁ = 0)
                if T1[0, 0] != 0.0:
                    Q[0] = Q[0] - np.vdot(Sinv, G.T @ G) / T1[0, 0]
            elif np.min(np.abs(np.diag(T1))) > 1e-3 * max(1.0, float(np.max(np.abs(T1)))):
                # T₁ invertible: (A₁₂Λ₂)_j = T₁⁻ᵀC_j = T₁⁻ᵀD_jG_j, so Σ_j (GS⁻¹)_j (A₁₂Λ₂)_jᵀ = Σ_j R_j D_j T₁⁻¹ and with
                # D_j = T₁ᵀA_jT₁ + I the sum below is −(Σ_j R_j) T₁⁻¹; Σ_j R_j = Σ_j K_jK_jᵀ with K = G L_S⁻ᵀ (one
                # triangular solve, m1·Q2² flops, instead of the product G S⁻¹ and the per-level blocks)
                Kt = sla.solve_triangular(cho[0], G.T, lower=True, check_finite=False)      # Q2 x m1
                K2 = np.ascontiguousarray(Kt.T).reshape(q1, -1)     # (LAPACK's result is column-major: a view)
                Q[0] = Q[0] - (K2 @ K2.T) @ np.linalg.inv(T1)
            else:
                GSi3 = (G @ Sinv).reshape(q1, n1, Q2)
                R = np.einsum("ajs,djs->adj", GSi3, G.reshape(q1, n1, Q2))
                Q[0] = (Q[0] + np.einsum("bcj,acj->ab", self.A11, _along(T1, R, 1))
                        - _lsum(GSi3, self._right_lam2(Ts, self.A12).reshape(q1, n1, Q2)))
            H2 = self._right_lam2(Ts, self.A22).T - P.T                     # Λ₂ᵀA₂₂ − GᵀΛ₁ᵀA₁₂ (P = C₀ᵀG)
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
        def pair(k, i, j):
            if k == 0:
                return V1[i] @ Wx1[j].T
            a, b = self.offs[k] - m1, self.offs[k + 1] - m1
            nk, qk = self.nls[k], self.qs[k]
            return V2[a:b].reshape(nk, qk, p)[:, i, :].T @ W2[a:b, 1:].reshape(nk, qk, p)[:, j, :]

        return self._assemble(Q, RU, VF, pair if drtr else None)

    def _assemble(self, Q, RU, VF, pair):
        """The gradient's parts per θ entry (i, j) of term k from the per-term sums: ∂log|L|² = 2 Q_k[j, i],
        ∂r² = −2 RU_k[i, j], ∂log|RX|² = −2 VF_k[i, j], and (``pair`` given) ∂RXᵀRX = −(P + Pᵀ) with
        P = pair(k, i, j) = Σ_levels V_iᵀ W_X,j."""
        nth = int(self.th_off[-1])
        dL, dr2, dRX = np.empty(nth), np.empty(nth), np.empty(nth)
        dR = [] if pair is not None else None
        for k, t in enumerate(self.terms):
            for m, (i, j) in enumerate(t._tri()):
                o = self.th_off[k] + m
                dL[o] = 2.0 * Q[k][j, i]
                dr2[o] = -2.0 * RU[k][i, j]
                dRX[o] = -2.0 * VF[k][i, j]
                if pair is not None:
                    P = pair(k, i, j)
                    dR.append(-(P + P.T))
        return dL, dr2, dRX, dR

    def _kernel_grad_parts(self, e: dict[str, Any], drtr: bool):
        """:meth:`grad_parts` from the kernel's sums: with c = [1, −β̂], RU = Σ_j res_j û_jᵀ = G contracted with
        c ⊗ c (res_j = ZA_j c, û_j = W_j c), VF = Σ_j V_j (RXᵀRX)⁻¹ W_X,jᵀ = G's XX block contracted with
        (RXᵀRX)⁻¹, and P = G[i, j]'s XX block."""
        Q, G = e["sums"]
        c = np.concatenate([[1.0], -e["beta"]])
        RU = np.einsum("abkl,k,l->ab", G, c, c)
        Ri = np.linalg.inv(e["RXtRX"]) if self.p else np.zeros((0, 0))
        VF = np.einsum("abkl,kl->ab", G[:, :, 1:, 1:], Ri)
        return self._assemble([Q], [RU], [VF], (lambda k, i, j: G[i, j, 1:, 1:]) if drtr else None)

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
        """The Hessian of :meth:`devfun_vp` at (θ, σ): the θθ block by central differences (steps 1e-4·|θ|; forward
        differences for one term on more than ``START_MIN_ROWS`` rows) of the exact θ-gradient (:meth:`grad_parts`: ∂log|L|² + ∂r²/σ² [+ ∂log|RX|²]), the σ row exactly
        (∂²/∂σ² = 6r²/σ⁴ − 2ν/σ², ∂²/∂θ∂σ = −2 ∂r²/σ³, ν = n [− p]). lmerTest's numDeriv Hessian of the same
        function, from far fewer deviance evaluations."""
        theta = np.asarray(theta, float)
        s2 = sigma * sigma

        def gth(th):
            dL, dr2, dRX, _ = self.grad_parts(self.evaluate(th))
            return dL + dr2 / s2 + (dRX if self.reml else 0.0)

        k = len(theta)
        H = np.empty((k + 1, k + 1))
        if len(self.terms) == 1 and self.n > START_MIN_ROWS:
            # one term on many rows (where each gradient is a pass over every level): forward differences at
            # 1e-7·max(1, |θ_i|), len(θ) gradients instead of 2·len(θ), within ~1e-7 relative of Richardson's
            # (lmer_big500k: 1.4e-7)
            Htt = forward_jacobian(gth, theta, gth(theta), rel=1e-7)
        else:
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
        if "sums" in e:                  # a kernel evaluation: the kernel's blocks where it gives them
            try:
                return [e["cv1"]]
            except KeyError:
                pass
        Dinv, C, G, cho = e["fac"][:4]
        Ts = e["Ts"]
        out = []
        n1, q1 = self.nls[0], self.qs[0]
        if C is None:            # one term: T₁ D_j⁻¹ T₁ᵀ component-major (slices over the levels), then levels first
            out.append(np.ascontiguousarray(_along(Ts[0], _along(Ts[0], Dinv, 1)).transpose(2, 0, 1)))
            return out
        blocks1 = np.ascontiguousarray(Dinv.transpose(2, 0, 1))
        Sinv = sla.cho_solve(cho, np.eye(self.Q2), check_finite=False)
        GS = (G @ Sinv).reshape(q1, n1, self.Q2)
        blocks1 = blocks1 + np.einsum("ajs,bjs->jab", GS, G.reshape(q1, n1, self.Q2))
        out.append(np.matmul(np.matmul(Ts[0], blocks1), Ts[0].T))
        for k in range(1, len(self.terms)):
            blocks = self._diag_blocks(k, Sinv)
            out.append(np.matmul(np.matmul(Ts[k], blocks), Ts[k].T))
        return out


def _response_name(design: Any) -> str:
    """The response's column as quoted in messages (``'score'``), or ``the response`` when unknown."""
    try:
        return repr(design.info.spec.response.column)
    except AttributeError:
        return "(y)"




# ----------------------------------------------------------------------------- the optimiser


def reduced_system(sys_: LmmSystem, j: int, b: float) -> LmmSystem:
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
    r._recent = []
    r._best = (None, None)
    return r



#: one random-effects term on more than START_MIN_ROWS rows starts from the fit on about START_ROWS of them
START_MIN_ROWS, START_ROWS = 100_000, 15_000


def subsample_theta(design, reml: bool, lower: np.ndarray, th0: np.ndarray) -> np.ndarray | None:
    """A start near θ̂ for one random-effects term on many rows: θ minimising the profiled deviance of the rows of
    evenly spaced levels (about ``START_ROWS`` rows, :func:`~mrcstats.models.optimize.first_term_levels`) from
    lme4's start, to a loose tolerance. None for small data, several terms or when the sub-fit fails (then lme4's
    start). The optimum does not depend on the start (:func:`optimise_theta` converges to it); the number of
    deviance evaluations on all rows does (lmer_big500k: 19 to 13 in the optimiser, for 13 on a thirtieth of the
    rows). As the GLMM's :func:`~mrcstats.models.optimize.subsample_start`."""
    import dataclasses

    from mrcstats.models.optimize import first_term_levels

    re = tuple(design.re)
    n = len(design.y)
    if len(re) != 1 or n <= START_MIN_ROWS or re[0].nlevels < 200:
        return None
    t = re[0]
    keep, newcode, rows = first_term_levels(t.codes, t.nlevels, START_ROWS)
    sub_t = dataclasses.replace(t, codes=newcode[np.asarray(t.codes, dtype=np.intp)[rows]],
                                levels=tuple(t.levels[i] for i in keep), Z=None if t.Z is None else t.Z[rows])
    sub = dataclasses.replace(design, X=design.X[rows], y=design.y[rows], weights=design.weights[rows], re=(sub_t,),
                              offset=None if design.offset is None else design.offset[rows])
    try:
        th = lbfgs_theta(LmmSystem(sub, reml=reml).deviance_grad, th0, lower,
                         {"maxiter": 200, "ftol": 1e-8, "gtol": 1e-4, "maxcor": 20})[0]
    except (ModelError, np.linalg.LinAlgError):
        return None
    return th if np.all(np.isfinite(th)) else None


def min_theta(sys_: LmmSystem, th0: np.ndarray, lower: np.ndarray) -> np.ndarray:
    """θ minimising sys_'s profiled deviance from th0 (L-BFGS-B; the exact gradient for one term)."""
    return lbfgs_theta(sys_.deviance_grad, th0, lower,
                        {"maxiter": 2000, "ftol": 1e-15, "gtol": 1e-9, "maxcor": 20})[0]


def lbfgs_theta(fg, th0: np.ndarray, lower: np.ndarray, options: Mapping[str, Any]):
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


def optimise_theta(sys_: LmmSystem, lower: np.ndarray, th0: np.ndarray):
    """θ̂ minimising the profiled deviance: :func:`lbfgs_theta` on the exact gradient, then Newton steps on the
    free parameters (those off the boundary) whose Hessian is forward differences of that gradient, computed at
    the first step and kept while its steps are taken (a chord method: one evaluation per further step;
    recomputed when the free set changes or a step is not taken). Returns (θ̂, scipy's L-BFGS-B result, converged: the projected gradient below 2e-3)."""
    fg = sys_.deviance_grad

    def grad(th):
        return fg(th)[1]

    th, r = lbfgs_theta(fg, th0, lower, {"maxiter": 1000, "ftol": 1e-12, "gtol": 1e-7, "maxcor": 20})
    fval, g_end = fg(th)
    converged = bool(np.all(np.abs(np.where((lower == 0) & (th <= 1e-8), np.minimum(g_end, 0), g_end)) < 2e-3))
    # Newton polish on the free parameters (those off the boundary), the Hessian by forward differences of the
    # exact gradient
    H, h_idx = None, None
    for _ in range(8):
        free = ~((lower == 0) & (th <= 1e-8))
        if not free.any():
            break
        idx = np.flatnonzero(free)
        g = g_end[idx]
        fresh = H is None or not np.array_equal(idx, h_idx)
        if fresh:                                 # forward differences (Newton's step needs no more)
            H = forward_jacobian(grad, th, g_end, 1e-6, cols=idx)[idx]
            H, h_idx = 0.5 * (H + H.T), idx
        try:
            step = np.linalg.solve(H, g)
        except np.linalg.LinAlgError:
            break
        tn = th.copy()
        tn[idx] = th[idx] - step
        tn = np.maximum(tn, lower)
        fn, gn = fg(tn)
        # a step is taken when it lowers the deviance, or leaves it equal to rounding (50 ulps) and lowers the
        # gradient: at the optimum the deviance is flat to its last digits and which side of them a step lands
        # on is the arithmetic's order, the gradient is not
        lower_dev = fn <= fval or (fn - fval <= 1e-14 * max(1.0, abs(fval))
                                   and np.max(np.abs(gn[idx])) < np.max(np.abs(g)))
        if lower_dev and np.max(np.abs(tn - th)) > 0:
            moved = np.max(np.abs(tn - th))
            th, fval, g_end = tn, fn, gn
            if moved < 1e-10:
                break
        elif not fresh:                           # the kept Hessian's step was not taken: once more, a new one
            H = None
        else:
            break
    return th, r, converged


def fit_theta(sys_: LmmSystem, lower: np.ndarray, th0: np.ndarray):
    """:func:`optimise_theta` as the fit runs it, from the start chosen here (th0 is lme4's identity start):

    * one random-effects term on many rows: the fit on a subsample of its levels (:func:`subsample_theta`);
    * crossed or nested terms (Q2 > 0): :meth:`LmmSystem.moment_start` (about half the evaluations of th0); when
      that optimum is on the boundary (a diagonal θ below SINGULAR_TOL), where the deviance can have several local
      optima on the boundary's faces, the fit from th0 is run too and the lower deviance kept (th0's on a tie:
      lme4's path), so no fit ends higher than from th0;
    * otherwise th0.

    Returns what :func:`optimise_theta` returns (nfev counts every run) and the subsample start (None when it was
    not used), which the result's ``optinfo`` records."""
    sub = subsample_theta(sys_.design, sys_.reml, lower, th0)
    if sub is not None:
        return (*optimise_theta(sys_, lower, sub), sub)
    mom = sys_.moment_start(lower) if sys_.Q2 else None
    if mom is None:
        return (*optimise_theta(sys_, lower, th0), None)
    out = optimise_theta(sys_, lower, mom)
    if not np.any(out[0][lower == 0] < SINGULAR_TOL):
        return (*out, None)
    alt = optimise_theta(sys_, lower, th0)
    d_mom, d_alt = sys_.deviance(out[0]), sys_.deviance(alt[0])
    return (*(alt if d_alt <= d_mom + 1e-12 * max(1.0, abs(d_mom)) else out), None)


__all__ = ["DENSE_MAX", "PAIRS_MAX", "SINGULAR_TOL", "LmmSystem", "fit_theta", "lbfgs_theta", "min_theta",
           "optimise_theta", "reduced_system", "subsample_theta"]
