"""Two crossed random intercepts on a grid of binomial counts, in bounded memory.

The leaderboard model ``correct ~ 1 + (1 | item) + (1 | model)`` with one trial per model and
item has as many distinct covariate patterns as rows, so collapsing rows to cells
(:mod:`mrcstats.models.outofcore`) does not shrink it. Its data are, however, exactly two
q1 x q2 tables of small integers: ``K[j, k]`` successes and ``N[j, k]`` trials of level j of
the first term (the one with more levels, as lme4 orders terms) and level k of the second
(empty cells: 0 and 0). :class:`CrossedGrid` evaluates lme4's Laplace deviance on those
tables in chunks of rows (never a per-row array), on two worker threads:

* linear predictor   η_jk = β₀ + θ₁u₁ⱼ + θ₂u₂ₖ,  μ = logistic(η);
* penalised IRLS (lme4's ``pwrssUpdate``, Newton steps to a squared decrement of 1e-22 per
  random effect): with v = Nμ(1-μ), e = K - Nμ,
  M = I + ΛZᵀWZΛ = [[D₁, C], [Cᵀ, B]] where D₁ = 1 + θ₁² Σₖ v_jk (diagonal, q1),
  B = 1 + θ₂² Σⱼ v_jk (diagonal, q2) and C = θ₁θ₂ V (q1 x q2), eliminated through the dense
  Schur complement S = B - θ₁²θ₂² Vᵀ D₁⁻¹ V (q2 x q2, accumulated chunk by chunk with BLAS
  ``dsyrk``);
* deviance  2 Σ [N softplus(η) - Kη] + |u|² + log|D₁| + log|S|  (the Bernoulli rows'
  likelihood: ``correct ~ …`` on the rows and this grid give the same number);
* its analytic gradient in (θ, β), the same algebra as
  :class:`mrcstats.models.deviance.MultiFactor` (selected inverse of M through G S⁻¹, one
  GEMM per chunk).

Memory: the two count tables (int32), v and μ per cell (float64) while they fit ``CACHE_BYTES``
(otherwise recomputed from η), a few q2 x q2 matrices and chunk buffers; time: one ``dsyrk``
(q1·q2²/2 multiply-adds) per IRLS step and one GEMM (q1·q2²) per gradient. The optimiser is the
native engine's (:func:`mrcstats.models.fit.optimize_laplace`), so the fit equals ``glmer`` on the
rows to the optimiser's tolerance (lme4 ``glmer(nAGQ = 1)``; Bates et al. 2015, J. Stat. Softw.
67(1), sec. 3 and 5.4). Grids over ``START_CELLS`` start from the fit on an evenly spaced sub-grid
(``START_SHAPE``), with its standard errors as the optimiser's step scale: the optimum does not
depend on the start, the number of full-grid evaluations does.
"""
from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import linalg as sla
from scipy.linalg import blas

from mrcstats.errors import ModelError
from mrcstats.models.deviance import PIRLS_MAXIT, PIRLS_TOL, halving_step
from mrcstats.models.family import BINOMIAL

CHUNK_CELLS = 1 << 21      # cells per chunk of rows (16 MB per float64 buffer)
CACHE_BYTES = 4e9          # keep v and μ of every cell when they fit (2 x 8 bytes per cell)
QUANTILE_BINS = 1 << 16    # residual quantiles: histogram bins of η, and the most cells sorted in one bin
QUANTILE_EXACT = 1 << 22
THREADS = 2                # worker threads of every pass (fixed: the sums do not depend on the machine)
START_CELLS = 4_000_000    # larger grids start the optimiser from the fit on an evenly spaced sub-grid
START_SHAPE = (20000, 200)  # that sub-grid's rows x columns (at most)
MAX_SECOND = 6000          # levels of the smaller factor (dense q2 x q2 Schur complement), as MultiFactor


_POOL: list = []


def _pool():
    """The module's thread pool (``THREADS`` workers, created on first use)."""
    if not _POOL:
        from concurrent.futures import ThreadPoolExecutor

        _POOL.append(ThreadPoolExecutor(THREADS, thread_name_prefix="mrcstats-grid"))
    return _POOL[0]


class CrossedGrid:
    """Laplace deviance of ``y ~ 1 + (1 | a) + (1 | b)`` on count tables ``K``, ``N`` (q1 x q2).

    ``evaluate(θ, β)`` returns (deviance, gradient) like the other deviance objects of
    :mod:`mrcstats.models.deviance`; ``u`` holds the last conditional modes (warm start).
    """

    def __init__(self, K: np.ndarray, N: np.ndarray, chunk_cells: int = CHUNK_CELLS,
                 cache_bytes: float = CACHE_BYTES):
        if K.shape != N.shape or K.ndim != 2:
            raise ValueError("K and N must be q1 x q2 tables of the same shape")
        self.K, self.N = K, N
        self.family = BINOMIAL         # the grid holds binomial counts: b = softplus, V = μ(1-μ)
        self.q1, self.q2 = K.shape
        if self.q2 > MAX_SECOND:
            raise ModelError(f"the crossed grid handles a second factor of at most {MAX_SECOND} levels "
                             f"(here {self.q2}); use engine='lme4'")
        self.m = max(1, min(self.q1, chunk_cells // max(1, self.q2)))
        self.u = np.zeros(self.q1 + self.q2)
        self.nfev = 0
        self.pirls_iters = 0
        self.on_eval = None            # callback(deviance) after each evaluation (the progress bar)
        # v = Nμ(1-μ) and μ at the point of the last IRLS pass, kept when they fit ``cache_bytes``:
        # the solves and the gradient then reuse them instead of recomputing η and μ
        self._cache = 16 * self.q1 * self.q2 <= cache_bytes
        self._V = np.empty((self.q1, self.q2)) if self._cache else None
        self._MU = np.empty((self.q1, self.q2)) if self._cache else None
        self._at: tuple | None = None
        self.n_trials = int(N.sum(dtype=np.int64))
        self.n_success = int(K.sum(dtype=np.int64))

    # ------------------------------------------------------------------ chunks
    def _chunks(self):
        for r0 in range(0, self.q1, self.m):
            yield slice(r0, min(self.q1, r0 + self.m))

    def _run(self, work) -> list:
        """``work(list of row slices) -> partial sums`` on ``THREADS`` fixed, interleaved shares of the
        chunks, in worker threads (NumPy and BLAS release the GIL) with BLAS single-threaded meanwhile;
        the partials come back in share order, so their sum is the same on every machine."""
        chunks = list(self._chunks())
        shares = [sh for sh in (chunks[w::THREADS] for w in range(THREADS)) if sh]
        if len(shares) == 1:
            return [work(shares[0])]
        from mrcstats.models.optimize import _blas_controller

        ctl = _blas_controller()
        pool = _pool()
        if ctl is None:  # pragma: no cover
            return [f.result() for f in [pool.submit(work, sh) for sh in shares]]
        with ctl.limit(limits=1, user_api="blas"):
            return [f.result() for f in [pool.submit(work, sh) for sh in shares]]

    def _eta_mu(self, sl: slice, beta0: float, a1: np.ndarray, a2: np.ndarray):
        """η and μ of the rows ``sl``; a1 = θ₁u₁, a2 = θ₂u₂."""
        eta = a1[sl, None] + a2[None, :]
        eta += beta0
        return eta, self.family.mean(eta)

    def _vmu(self, sl: slice, theta, beta0: float, u: np.ndarray, a1=None, a2=None):
        """v = Nμ(1-μ) and μ of the rows ``sl`` at (θ, β, u): from the cache when it holds that point."""
        if self._cache and self._at is not None and self._same(theta, beta0, u):
            return self._V[sl], self._MU[sl]
        t1, t2 = float(theta[0]), float(theta[1])
        if a1 is None:
            a1, a2 = t1 * u[:self.q1], t2 * u[self.q1:]
        _eta, mu = self._eta_mu(sl, beta0, a1, a2)
        v = self.family.variance(mu)
        v *= self.N[sl]
        return v, mu

    def _same(self, theta, beta0, u) -> bool:
        th, b, uu = self._at
        return th[0] == theta[0] and th[1] == theta[1] and b == beta0 and (uu is u or np.array_equal(uu, u))

    def _pen_part(self, theta, beta0, u) -> float:
        """2 Σ [N softplus(η) - Kη] (the deviance-residual part of the penalised deviance)."""
        t1, t2 = theta
        a1, a2 = t1 * u[:self.q1], t2 * u[self.q1:]

        def work(share):
            tot = 0.0
            for sl in share:
                eta = a1[sl, None] + a2[None, :]
                eta += beta0
                f = self.family.cumulant(eta)
                f *= self.N[sl]
                eta *= self.K[sl]
                f -= eta
                tot += float(f.sum())
            return tot
        return 2.0 * sum(self._run(work))

    # ------------------------------------------------------------------ penalised IRLS
    def _system(self, theta, beta0, u):
        """One pass at u: gradient halves g1, g2, D₁, B, the Schur complement S, Gᵀg₁ and the pen. deviance."""
        t1, t2 = float(theta[0]), float(theta[1])
        q1, q2 = self.q1, self.q2
        u1, u2 = u[:q1], u[q1:]
        a1, a2 = t1 * u1, t2 * u2
        rs_e, rs_v = np.empty(q1), np.empty(q1)
        c = t1 * t2

        def work(share):
            cs_e, cs_v, Gtg1 = np.zeros(q2), np.zeros(q2), np.zeros(q2)
            S = np.zeros((q2, q2), order="F")
            dev = 0.0
            for sl in share:
                eta, mu = self._eta_mu(sl, beta0, a1, a2)
                Nc, Kc = self.N[sl], self.K[sl]
                f = self.family.cumulant(eta)
                f *= Nc
                eta *= Kc
                f -= eta
                dev += float(f.sum())
                if self._cache:
                    v = self.family.variance(mu, out=self._V[sl])
                    self._MU[sl] = mu
                else:
                    v = self.family.variance(mu)
                v *= Nc
                e = np.multiply(mu, Nc, out=eta)
                np.subtract(Kc, e, out=e)
                rs_e[sl] = e.sum(axis=1)
                rs_v[sl] = v.sum(axis=1)
                cs_e += e.sum(axis=0)
                cs_v += v.sum(axis=0)
                D1 = 1.0 + t1 * t1 * rs_v[sl]
                g1 = u1[sl] - t1 * rs_e[sl]
                if c != 0.0:
                    Vs = np.multiply(v, (c / np.sqrt(D1))[:, None], out=f)
                    S = blas.dsyrk(-1.0, Vs, beta=1.0, c=S, trans=1, lower=1, overwrite_c=1)
                    Gtg1 += c * (v.T @ (g1 / D1))
            return cs_e, cs_v, Gtg1, S, dev

        parts = self._run(work)
        cs_e, cs_v, Gtg1, S, dev = parts[0]
        for p in parts[1:]:
            cs_e += p[0]
            cs_v += p[1]
            Gtg1 += p[2]
            S += p[3]
            dev += p[4]
        if self._cache:
            self._at = (np.array(theta, float), beta0, u.copy())
        D1 = 1.0 + t1 * t1 * rs_v
        B = 1.0 + t2 * t2 * cs_v
        S[np.diag_indices(q2)] += B
        g1 = u1 - t1 * rs_e
        g2 = u2 - t2 * cs_e
        return {"D1": D1, "S": S, "g1": g1, "g2": g2, "Gtg1": Gtg1, "pen": 2.0 * dev + float(u @ u),
                "rs_e": rs_e, "cs_e": cs_e, "rs_v": rs_v, "cs_v": cs_v}

    def _cmul(self, theta, beta0, u, x2: np.ndarray) -> np.ndarray:
        """C x₂ = θ₁θ₂ V x₂ (one pass; V at u)."""
        t1, t2 = float(theta[0]), float(theta[1])
        out = np.empty(self.q1)

        def work(share):
            for sl in share:
                v, _mu = self._vmu(sl, theta, beta0, u)
                out[sl] = v @ x2
        self._run(work)
        return (t1 * t2) * out

    def _start(self, theta: np.ndarray) -> np.ndarray:
        """IRLS start: the last modes rescaled to keep b = θu (the random effects move little between
        nearby θ; fewer Newton steps than starting from u itself)."""
        u = self.u.copy()
        th = getattr(self, "_u_theta", None)
        if th is not None:
            for k, sl in enumerate((slice(0, self.q1), slice(self.q1, None))):
                if th[k] > 0 and theta[k] > 0:
                    u[sl] *= th[k] / theta[k]
        return u

    def modes(self, theta, beta0: float, u: np.ndarray | None = None):
        """Conditional modes û(θ, β) by Newton steps with step halving (lme4's PIRLS);
        returns (û, system at û, Cholesky factor of S at û)."""
        u = self.u.copy() if u is None else u.copy()
        for _ in range(PIRLS_MAXIT):
            sy = self._system(theta, beta0, u)
            try:
                cho = sla.cho_factor(sy["S"], lower=True, check_finite=False, overwrite_a=False)
            except np.linalg.LinAlgError:  # pragma: no cover
                raise ModelError("penalised IRLS: the random-effects system is not positive definite") from None
            y2 = sla.cho_solve(cho, sy["g2"] - sy["Gtg1"])
            x1 = (sy["g1"] - self._cmul(theta, beta0, u, y2)) / sy["D1"]
            step = np.concatenate([x1, y2])
            dec = float(np.concatenate([sy["g1"], sy["g2"]]) @ step)
            self.pirls_iters += 1
            if dec < PIRLS_TOL * max(1, len(step)):
                return u, sy, cho
            if dec > 1e-3:
                u, _f = halving_step(u, step, sy["pen"], lambda un: self._pen_part(theta, beta0, un) + float(un @ un))
            else:
                u = u - step
        raise ModelError(f"penalised IRLS did not converge in {PIRLS_MAXIT} iterations; check for separation")

    # ------------------------------------------------------------------ deviance and gradient
    def _selected(self, theta, beta0, u, sy, cho, Sinv, need_rows: bool):
        """The pass with G S⁻¹: row sums of t∘h (t = v(1-2μ), h = z Λ M⁻¹ Λ zᵀ per cell), their column
        sums, the diagonal of M⁻¹ for the first term, Gᵀ(θ₁ rowsum(t∘h)), Vᵀu₁ and V u₂."""
        t1, t2 = float(theta[0]), float(theta[1])
        q1, q2 = self.q1, self.q2
        u1, u2 = u[:q1], u[q1:]
        a1, a2 = t1 * u1, t2 * u2
        D1 = sy["D1"]
        diag2 = np.diag(Sinv).copy()
        c = t1 * t2
        rs_th, diag1, Vu2 = np.empty(q1), np.empty(q1), np.empty(q1)

        def work(share):
            cs_th, Gta1, VTu1 = np.zeros(q2), np.zeros(q2), np.zeros(q2)
            for sl in share:
                v, mu = self._vmu(sl, theta, beta0, u, a1, a2)
                G = v * (c / D1[sl])[:, None]
                GS = G @ Sinv
                d1 = 1.0 / D1[sl] + np.einsum("ij,ij->i", G, GS)
                diag1[sl] = d1
                if need_rows:
                    t = self.family.dvariance(mu)
                    t *= v
                    h = GS
                    h *= -2.0 * c
                    h += (t1 * t1) * d1[:, None]
                    h += (t2 * t2) * diag2[None, :]
                    h *= t
                    rs = h.sum(axis=1)
                    rs_th[sl] = rs
                    cs_th += h.sum(axis=0)
                    Gta1 += G.T @ (t1 * rs)
                    VTu1 += v.T @ u1[sl]
                    Vu2[sl] = v @ u2
            return cs_th, Gta1, VTu1

        parts = self._run(work)
        cs_th, Gta1, VTu1 = parts[0]
        for p in parts[1:]:
            cs_th += p[0]
            Gta1 += p[1]
            VTu1 += p[2]
        return {"rs_th": rs_th, "cs_th": cs_th, "diag1": diag1, "diag2": diag2, "Gta1": Gta1,
                "VTu1": VTu1, "Vu2": Vu2}

    def evaluate(self, theta, beta, grad: bool = True, keep: bool = True):
        theta = np.asarray(theta, float)
        beta0 = float(np.asarray(beta, float)[0])
        self.nfev += 1
        u, sy, cho = self.modes(theta, beta0, self._start(theta))
        if keep:
            self.u = u
            self._u_theta = theta.copy()
        D1 = sy["D1"]
        logdet = float(np.log(D1).sum() + 2.0 * np.log(np.diag(cho[0])).sum())
        D = sy["pen"] + logdet
        if self.on_eval is not None:
            self.on_eval(D)
        if not grad:
            return D, None
        t1, t2 = float(theta[0]), float(theta[1])
        q1, q2 = self.q1, self.q2
        u1, u2 = u[:q1], u[q1:]
        Sinv = sla.cho_solve(cho, np.eye(q2))
        sel = self._selected(theta, beta0, u, sy, cho, Sinv, need_rows=True)
        rs_e, cs_e, rs_v, cs_v = sy["rs_e"], sy["cs_e"], sy["rs_v"], sy["cs_v"]
        a1, a2 = t1 * sel["rs_th"], t2 * sel["cs_th"]
        # w = M⁻¹ ΛZᵀ(t∘h) by the Schur complement
        w2 = Sinv @ (a2 - sel["Gta1"])
        w1 = (a1 - self._cmul(theta, beta0, u, w2)) / D1
        sum_e = float(rs_e.sum())
        sum_th = float(sel["rs_th"].sum())
        vzw = t1 * float(w1 @ rs_v) + t2 * float(w2 @ cs_v)
        g_beta = -2.0 * sum_e + sum_th - vzw
        tr1, tr2 = float(sel["diag1"].sum()), float(sel["diag2"].sum())
        # θ₁ (first term): direct = u₁[j]
        dg1 = t1 * u1 * rs_v - rs_e
        dg2 = t2 * sel["VTu1"]
        ld = float(u1 @ sel["rs_th"]) - float(w1 @ dg1 + w2 @ dg2)
        if t1 != 0:
            ld += (2.0 / t1) * (q1 - tr1)
        g0 = -2.0 * float(u1 @ rs_e) + ld
        # θ₂ (second term): direct = u₂[k]
        dg1 = t1 * sel["Vu2"]
        dg2 = t2 * u2 * cs_v - cs_e
        ld = float(u2 @ sel["cs_th"]) - float(w1 @ dg1 + w2 @ dg2)
        if t2 != 0:
            ld += (2.0 / t2) * (q2 - tr2)
        g1 = -2.0 * float(u2 @ cs_e) + ld
        return D, np.array([g0, g1, g_beta])

    def extras(self, theta, beta) -> dict[str, Any]:
        """Conditional modes b = Λû and conditional variances (lme4's ``ranef(condVar = TRUE)``)."""
        theta = np.asarray(theta, float)
        beta0 = float(np.asarray(beta, float)[0])
        u, sy, cho = self.modes(theta, beta0)
        Sinv = sla.cho_solve(cho, np.eye(self.q2))
        sel = self._selected(theta, beta0, u, sy, cho, Sinv, need_rows=False)
        t1, t2 = float(theta[0]), float(theta[1])
        return {"b": [t1 * u[:self.q1], t2 * u[self.q1:]],
                "condvar": [t1 * t1 * sel["diag1"], t2 * t2 * sel["diag2"]], "u": u}

    def rx_vcov(self, theta, beta) -> np.ndarray:
        """Var(β̂) from R_X (lme4's ``vcov`` fallback): (Σv - aᵀ M⁻¹ a)⁻¹ with a = ΛZᵀv."""
        theta = np.asarray(theta, float)
        beta0 = float(np.asarray(beta, float)[0])
        u, sy, cho = self.modes(theta, beta0)
        t1, t2 = float(theta[0]), float(theta[1])
        A1, A2 = t1 * sy["rs_v"], t2 * sy["cs_v"]
        Gta1 = self._gt(theta, beta0, u, sy["D1"], A1)
        W2 = sla.cho_solve(cho, A2 - Gta1)
        W1 = (A1 - self._cmul(theta, beta0, u, W2)) / sy["D1"]
        RX = float(sy["rs_v"].sum()) - float(A1 @ W1 + A2 @ W2)
        return np.array([[1.0 / RX]])

    def _gt(self, theta, beta0, u, D1, r1) -> np.ndarray:
        """Gᵀ r₁ = θ₁θ₂ Vᵀ (r₁ / D₁)."""
        t1, t2 = float(theta[0]), float(theta[1])
        x = r1 / D1

        def work(share):
            out = np.zeros(self.q2)
            for sl in share:
                v, _mu = self._vmu(sl, theta, beta0, u)
                out += v.T @ x[sl]
            return out
        out = sum(self._run(work))
        return (t1 * t2) * out

    def pearson_quantiles(self, theta, beta, u: np.ndarray, probs: Sequence[float]) -> np.ndarray:
        """Quantiles (R's type 7) of the row-level Pearson residuals (y-μ)/√(μ(1-μ)): a success row of a
        cell gives √((1-μ)/μ) = exp(-η/2), a failure -√(μ/(1-μ)) = -exp(η/2), each as many times as the
        cell has them. Sorted ascending the residuals are the failures by η descending, then the successes
        by η descending; each order statistic is found by a histogram of η over the cells (weights: the
        cell's failures or successes) and the exact values of the few cells in the bin that holds it."""
        t1, t2 = float(theta[0]), float(theta[1])
        beta0 = float(np.asarray(beta, float)[0])
        a1, a2 = t1 * u[:self.q1], t2 * u[self.q1:]
        nf = int(self.n_trials - self.n_success)
        n = int(self.n_trials)
        ranks = []                       # (side, rank by η descending within the side)
        want = []
        for p in probs:
            h = (n - 1) * float(p)
            lo = math.floor(h)
            hi = min(n - 1, lo + 1)
            want.append((lo, hi, h - lo))
            ranks += [lo, hi]
        need = {i: ((0, i) if i < nf else (1, i - nf)) for i in set(ranks)}
        vals = self._eta_order_stats(beta0, a1, a2, sorted(set(need.values())))

        def stat(i: int) -> float:
            side, r = need[i]
            e = vals[(side, r)]
            return -math.exp(0.5 * e) if side == 0 else math.exp(-0.5 * e)

        out = []
        for lo, hi, frac in want:
            x_lo = stat(lo)
            out.append(x_lo + frac * (stat(hi) - x_lo) if hi != lo else x_lo)
        return np.array(out)

    def _eta_order_stats(self, beta0: float, a1: np.ndarray, a2: np.ndarray, wanted: list[tuple[int, int]],
                         bins: int | None = None, exact_cells: int | None = None) -> dict[tuple[int, int], float]:
        """η of the r-th cell-row by η descending, rows weighted by failures (side 0) or successes (side 1).

        One pass histograms η (``bins`` equal bins on [min, max]); a second collects the cells of the bins
        holding the wanted ranks and sorts them exactly. A bin with more than ``exact_cells`` cells is
        histogrammed again on its own range (at most three times)."""
        bins = bins or QUANTILE_BINS
        exact_cells = exact_cells or QUANTILE_EXACT

        def binof(eta, lo, scale):
            b = np.floor((eta - lo) * scale) if scale else np.zeros_like(eta)
            return np.clip(b, 0, bins - 1).astype(np.int64)

        def cells(path):
            """Per chunk: η, failures, successes of the non-empty cells inside every bin of ``path``."""
            for sl in self._chunks():
                eta = (a1[sl, None] + a2[None, :] + beta0).ravel()
                nn, kk = self.N[sl].ravel(), self.K[sl].ravel()
                m = nn > 0
                for lo, scale, b in path:
                    m &= binof(eta, lo, scale) == b
                yield eta[m], (nn[m] - kk[m]).astype(np.int64), kk[m].astype(np.int64)

        out: dict[tuple[int, int], float] = {}
        lo0, hi0 = float(a1.min()) + float(a2.min()) + beta0, float(a1.max()) + float(a2.max()) + beta0
        todo = [((), lo0, hi0, side, r, r) for side, r in wanted]  # (path, range, side, wanted rank, rank in path)
        for level in range(4):
            if not todo:
                break
            groups: dict[tuple, list] = {}
            for path, lo, hi, side, key, r in todo:
                groups.setdefault((path, lo, hi), []).append((side, key, r))
            todo = []
            for (path, lo, hi), items in groups.items():
                scale = bins / (hi - lo) if hi > lo else 0.0
                H = np.zeros((2, bins))
                C = np.zeros(bins, np.int64)
                for eta, f, k in cells(path):
                    b = binof(eta, lo, scale)
                    H[0] += np.bincount(b, weights=f.astype(float), minlength=bins)
                    H[1] += np.bincount(b, weights=k.astype(float), minlength=bins)
                    C += np.bincount(b, minlength=bins)
                picks: dict[int, list] = {}
                for side, key, r in items:
                    desc = np.cumsum(H[side][::-1])              # weight in the top bins, from the top
                    j = min(int(np.searchsorted(desc, r, side="right")), bins - 1)
                    b = bins - 1 - j
                    before = int(desc[j - 1]) if j > 0 else 0
                    if C[b] > exact_cells and scale and level < 3:
                        width = (hi - lo) / bins
                        todo.append(((*path, (lo, scale, b)), lo + b * width, lo + (b + 1) * width, side, key,
                                     r - before))
                    else:
                        picks.setdefault(b, []).append((side, key, r - before))
                if not picks:
                    continue
                sel = np.array(sorted(picks), np.int64)
                got = [[], [], []]
                for eta, f, k in cells(path):
                    m = np.isin(binof(eta, lo, scale), sel)
                    for lst, x in zip(got, (eta, f, k)):
                        lst.append(x[m])
                e_all, f_all, k_all = (np.concatenate(x) for x in got)
                b_all = binof(e_all, lo, scale)
                for b, lst in picks.items():
                    m = b_all == b
                    order = np.argsort(e_all[m], kind="stable")[::-1]
                    eb = e_all[m][order]
                    for side, key, rr in lst:
                        cw = np.cumsum((f_all if side == 0 else k_all)[m][order])
                        out[(side, key)] = float(eb[min(int(np.searchsorted(cw, rr, side="right")), len(eb) - 1)])
        return out

def fit_grid(K: np.ndarray, N: np.ndarray, *, levels: Sequence[Sequence[str]], names: Sequence[str],
             spec: Any, t0: float | None = None, messages: Sequence[str] = (),
             optinfo: dict[str, Any] | None = None, chunk_cells: int = CHUNK_CELLS):
    """Fit ``y ~ 1 + (1 | names[0]) + (1 | names[1])`` on the count tables (rows = first term, which
    has at least as many levels as the second, lme4's term order) with the native optimiser.

    Returns a :class:`~mrcstats.models.results.GlmerResult` in row terms (``nobs`` = Σ N, logLik of the
    Bernoulli rows, residual quantiles of the rows' Pearson residuals).
    """
    from mrcstats._progress import progress
    from mrcstats.models.design import DesignInfo
    from mrcstats.models.optimize import SINGULAR_TOL, _check_conv, optimize_laplace, vcov_from_hessian
    from mrcstats.models.results import GlmerResult

    t0 = time.perf_counter() if t0 is None else t0
    model = CrossedGrid(K, N, chunk_cells=chunk_cells)
    n, s = model.n_trials, model.n_success
    if n == 0:
        raise ModelError("no rows left to fit")
    if s in (0, n):
        raise ModelError(f"every response is {'a success' if s == n else 'a failure'} ({n} rows): "
                         f"a binomial model has nothing to estimate")
    lower = np.zeros(2)
    ybar = s / n
    beta0 = np.array([model.family.linkfun(ybar)])         # the intercept-only GLM's β̂
    x0 = np.concatenate([np.ones(2), beta0])                # lme4's start θ = 1
    start = None
    if K.size > START_CELLS:
        start = _subgrid_start(K, N, x0, lower, chunk_cells)
        if start is not None:
            x0, model.u, model._u_theta, scale = start
    bar = progress(desc=f"glmer on a {K.shape[0]:,} x {K.shape[1]:,} grid", unit=" deviance evaluations")
    model.on_eval = lambda D: (bar.update(1), bar.set_postfix_str(f"deviance {D:.6f}", refresh=False))
    try:
        x, fval, grad, H, info = optimize_laplace(model, x0, lower, scale=None if start is None else scale)
    finally:
        bar.close()
    if start is not None:
        info["start"] = {"from": "sub-grid fit", "shape": [min(K.shape[0], START_SHAPE[0]),
                                                           min(K.shape[1], START_SHAPE[1])], "x0": x0.tolist()}
    theta, beta = x[:2], x[2:]
    singular = bool(np.any(theta < SINGULAR_TOL))
    converged, cmsgs = _check_conv(np.asarray(grad), H, 2, singular)
    msgs = list(messages)
    vcov = vcov_from_hessian(H, 2, lambda: model.rx_vcov(theta, beta), cmsgs)
    msgs += cmsgs
    ex = model.extras(theta, beta)
    rq = model.pearson_quantiles(theta, beta, ex["u"], [0, .25, .5, .75, 1])
    devres = model._pen_part(theta, float(beta[0]), ex["u"])
    info_d = DesignInfo(spec=spec, column_names=("(Intercept)",), assign=(0,), contrasts={}, xlevels={})
    ranef = {g: pd.DataFrame({"mode": b, "condvar": cv}, index=pd.Index(list(lv), name=g, dtype=object))
             for g, lv, b, cv in zip(names, levels, ex["b"], ex["condvar"])}
    varcorr = pd.DataFrame({"group": list(names), "name": ["(Intercept)"] * 2, "var2": [None, None],
                            "variance": theta ** 2, "sd": theta})
    opt = dict(optinfo or {})
    opt.update(info)
    opt.update(nfev=model.nfev, pirls_iters=model.pirls_iters, fval=fval, grad=np.asarray(grad).tolist(),
               hessian=np.asarray(H).tolist(), par=x.tolist())
    return GlmerResult.from_estimates(
        info=info_d, beta=beta, vcov=vcov, theta=theta, group_names=list(names),
        theta_names=[f"{g}.(Intercept)" for g in names], varcorr=varcorr,
        ngroups={g: len(lv) for g, lv in zip(names, levels)}, ranef=ranef, loglik=-0.5 * fval, deviance=devres,
        resid_quantiles=rq, nobs=n, converged=converged, messages=msgs, engine="native (crossed grid)",
        nagq=1, fit_seconds=time.perf_counter() - t0, singular=singular, optinfo=opt,
        fit_options={"nagq": 1, "family": model.family.name}, family=model.family)


def _subgrid_start(K, N, x0, lower, chunk_cells):
    """(θ, β) and modes from the fit on evenly spaced rows and columns of the tables: a start near the
    optimum, so the full grid's optimiser needs a few evaluations (the optimum does not depend on the
    start; lme4's θ = 1 start is used below ``START_CELLS``)."""
    from mrcstats.models.optimize import optimize_laplace

    rows = np.unique(np.linspace(0, K.shape[0] - 1, min(K.shape[0], START_SHAPE[0])).round().astype(np.int64))
    cols = np.unique(np.linspace(0, K.shape[1] - 1, min(K.shape[1], START_SHAPE[1])).round().astype(np.int64))
    Ks, Ns = K[np.ix_(rows, cols)], N[np.ix_(rows, cols)]
    s, n = int(Ks.sum()), int(Ns.sum())
    if n == 0 or s in (0, n):
        return None
    sub = CrossedGrid(np.ascontiguousarray(Ks), np.ascontiguousarray(Ns), chunk_cells=chunk_cells)
    try:
        x, _f, _g, H, _i = optimize_laplace(sub, x0.copy(), lower)
        se = np.sqrt(np.diag(np.linalg.inv(H)))
    except (ModelError, np.linalg.LinAlgError):
        return None
    # the optimiser's step scale on the full grid: the sub-grid's standard errors (larger than the full
    # grid's), where finite
    scale = np.where(np.isfinite(se) & (se > 0), se, np.maximum(np.abs(x), 0.1))
    th = np.maximum(x[:2], 0.05)                           # away from the boundary, where u is undefined
    x = np.concatenate([th, x[2:]])
    u = np.zeros(K.shape[0] + K.shape[1])
    b1, b2 = x[0] * sub.u[:sub.q1], x[1] * sub.u[sub.q1:]
    u[rows] = b1 / th[0]
    u[K.shape[0] + cols] = b2 / th[1]
    return x, u, th.copy(), scale


__all__ = ["CrossedGrid", "fit_grid"]
