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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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
                 cache_bytes: float = CACHE_BYTES, Xr: np.ndarray | None = None, Xc: np.ndarray | None = None):
        if K.shape != N.shape or K.ndim != 2:
            raise ValueError("K and N must be q1 x q2 tables of the same shape")
        self.K, self.N = K, N
        self.family = BINOMIAL         # the grid holds binomial counts: b = softplus, V = μ(1-μ)
        self.q1, self.q2 = K.shape
        # fixed effects: β = (β_r, β_c), η_jk = (X_r β_r)_j + (X_c β_c)_k + θ₁u₁ⱼ + θ₂u₂ₖ
        self.Xr = np.ones((self.q1, 1)) if Xr is None else np.asarray(Xr, float).reshape(self.q1, -1)
        self.Xc = np.zeros((self.q2, 0)) if Xc is None else np.asarray(Xc, float).reshape(self.q2, -1)
        self.pr, self.pc = self.Xr.shape[1], self.Xc.shape[1]
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
    def _lin(self, theta, beta, u) -> tuple[np.ndarray, np.ndarray]:
        """The row and column parts of η: a₁ = X_r β_r + θ₁u₁ (q1) and a₂ = X_c β_c + θ₂u₂ (q2)."""
        beta = np.asarray(beta, float)
        a1 = self.Xr @ beta[:self.pr] + float(theta[0]) * u[:self.q1]
        a2 = self.Xc @ beta[self.pr:] + float(theta[1]) * u[self.q1:]
        return a1, a2

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
        from mrcstats.models.optimize import blas_controller

        ctl = blas_controller()
        pool = _pool()
        if ctl is None:  # pragma: no cover
            return [f.result() for f in [pool.submit(work, sh) for sh in shares]]
        with ctl.limit(limits=1, user_api="blas"):
            return [f.result() for f in [pool.submit(work, sh) for sh in shares]]

    def _eta_mu(self, sl: slice, a1: np.ndarray, a2: np.ndarray):
        """η and μ of the rows ``sl``; a1, a2 from :meth:`_lin`."""
        eta = a1[sl, None] + a2[None, :]
        return eta, self.family.mean(eta)

    def _vmu(self, sl: slice, theta, beta, u: np.ndarray, a1=None, a2=None):
        """v = Nμ(1-μ) and μ of the rows ``sl`` at (θ, β, u): from the cache when it holds that point."""
        if self._cache and self._at is not None and self._same(theta, beta, u):
            return self._V[sl], self._MU[sl]
        if a1 is None:
            a1, a2 = self._lin(theta, beta, u)
        _eta, mu = self._eta_mu(sl, a1, a2)
        v = self.family.variance(mu)
        v *= self.N[sl]
        return v, mu

    def _same(self, theta, beta, u) -> bool:
        th, b, uu = self._at
        return (th[0] == theta[0] and th[1] == theta[1] and np.array_equal(b, beta)
                and (uu is u or np.array_equal(uu, u)))

    def _pen_part(self, theta, beta, u) -> float:
        """2 Σ [N softplus(η) - Kη] (the deviance-residual part of the penalised deviance)."""
        a1, a2 = self._lin(theta, beta, u)

        def work(share):
            tot = 0.0
            for sl in share:
                eta = a1[sl, None] + a2[None, :]
                f = self.family.cumulant(eta)
                f *= self.N[sl]
                eta *= self.K[sl]
                f -= eta
                tot += float(f.sum())
            return tot
        return 2.0 * sum(self._run(work))

    # ------------------------------------------------------------------ penalised IRLS
    def _system(self, theta, beta, u):
        """One pass at u: gradient halves g1, g2, D₁, B, the Schur complement S, Gᵀg₁ and the pen. deviance."""
        t1, t2 = float(theta[0]), float(theta[1])
        q1, q2 = self.q1, self.q2
        u1, u2 = u[:q1], u[q1:]
        a1, a2 = self._lin(theta, beta, u)
        rs_e, rs_v = np.empty(q1), np.empty(q1)
        c = t1 * t2

        def work(share):
            cs_e, cs_v, Gtg1 = np.zeros(q2), np.zeros(q2), np.zeros(q2)
            S = np.zeros((q2, q2), order="F")
            dev = 0.0
            for sl in share:
                eta, mu = self._eta_mu(sl, a1, a2)
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
            self._at = (np.array(theta, float), np.array(beta, float), u.copy())
        D1 = 1.0 + t1 * t1 * rs_v
        B = 1.0 + t2 * t2 * cs_v
        S[np.diag_indices(q2)] += B
        g1 = u1 - t1 * rs_e
        g2 = u2 - t2 * cs_e
        return {"D1": D1, "S": S, "g1": g1, "g2": g2, "Gtg1": Gtg1, "pen": 2.0 * dev + float(u @ u),
                "rs_e": rs_e, "cs_e": cs_e, "rs_v": rs_v, "cs_v": cs_v}

    def _vx(self, theta, beta, u, x2: np.ndarray) -> np.ndarray:
        """V x₂ (q1, or q1 x p for a q2 x p matrix; one pass, V at u)."""
        out = np.empty((self.q1, *x2.shape[1:]))

        def work(share):
            for sl in share:
                v, _mu = self._vmu(sl, theta, beta, u)
                out[sl] = v @ x2
        self._run(work)
        return out

    def _vtx(self, theta, beta, u, x1: np.ndarray) -> np.ndarray:
        """Vᵀ x₁ (q2, or q2 x p for a q1 x p matrix; one pass, V at u)."""
        def work(share):
            out = np.zeros((self.q2, *x1.shape[1:]))
            for sl in share:
                v, _mu = self._vmu(sl, theta, beta, u)
                out += v.T @ x1[sl]
            return out
        return sum(self._run(work))

    def _cmul(self, theta, beta, u, x2: np.ndarray) -> np.ndarray:
        """C x₂ = θ₁θ₂ V x₂ (one pass; V at u)."""
        return (float(theta[0]) * float(theta[1])) * self._vx(theta, beta, u, x2)

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

    def modes(self, theta, beta, u: np.ndarray | None = None):
        """Conditional modes û(θ, β) by Newton steps with step halving (lme4's PIRLS);
        returns (û, system at û, Cholesky factor of S at û)."""
        u = self.u.copy() if u is None else u.copy()
        for _ in range(PIRLS_MAXIT):
            sy = self._system(theta, beta, u)
            try:
                cho = sla.cho_factor(sy["S"], lower=True, check_finite=False, overwrite_a=False)
            except np.linalg.LinAlgError:  # pragma: no cover
                raise ModelError("penalised IRLS: the random-effects system is not positive definite") from None
            y2 = sla.cho_solve(cho, sy["g2"] - sy["Gtg1"])
            x1 = (sy["g1"] - self._cmul(theta, beta, u, y2)) / sy["D1"]
            step = np.concatenate([x1, y2])
            dec = float(np.concatenate([sy["g1"], sy["g2"]]) @ step)
            self.pirls_iters += 1
            if dec < PIRLS_TOL * max(1, len(step)):
                return u, sy, cho
            if dec > 1e-3:
                u, _f = halving_step(u, step, sy["pen"], lambda un: self._pen_part(theta, beta, un) + float(un @ un))
            else:
                u = u - step
        raise ModelError(f"penalised IRLS did not converge in {PIRLS_MAXIT} iterations; check for separation")

    # ------------------------------------------------------------------ deviance and gradient
    def _selected(self, theta, beta, u, sy, cho, Sinv, need_rows: bool):
        """The pass with G S⁻¹: row sums of t∘h (t = v(1-2μ), h = z Λ M⁻¹ Λ zᵀ per cell), their column
        sums, the diagonal of M⁻¹ for the first term, Gᵀ(θ₁ rowsum(t∘h)), Vᵀu₁ and V u₂."""
        t1, t2 = float(theta[0]), float(theta[1])
        q1, q2 = self.q1, self.q2
        u1, u2 = u[:q1], u[q1:]
        a1, a2 = self._lin(theta, beta, u)
        D1 = sy["D1"]
        diag2 = np.diag(Sinv).copy()
        c = t1 * t2
        rs_th, diag1, Vu2 = np.empty(q1), np.empty(q1), np.empty(q1)

        def work(share):
            cs_th, Gta1, VTu1 = np.zeros(q2), np.zeros(q2), np.zeros(q2)
            for sl in share:
                v, mu = self._vmu(sl, theta, beta, u, a1, a2)
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
        beta = np.asarray(beta, float)
        self.nfev += 1
        u, sy, cho = self.modes(theta, beta, self._start(theta))
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
        sel = self._selected(theta, beta, u, sy, cho, Sinv, need_rows=True)
        rs_e, cs_e, rs_v, cs_v = sy["rs_e"], sy["cs_e"], sy["rs_v"], sy["cs_v"]
        a1, a2 = t1 * sel["rs_th"], t2 * sel["cs_th"]
        # w = M⁻¹ ΛZᵀ(t∘h) by the Schur complement
        w2 = Sinv @ (a2 - sel["Gta1"])
        Vw2 = self._vx(theta, beta, u, w2)
        w1 = (a1 - (t1 * t2) * Vw2) / D1
        # β: -2 xᵀe + xᵀ(t∘h) - (ΛZᵀ v x)ᵀ w per fixed-effect column x; a row covariate x_j has
        # ΛZᵀvx = (θ₁ v_j. x_j, θ₂ Vᵀx), a column covariate x_k has (θ₁ V x, θ₂ v_.k x_k)
        Xr, Xc = self.Xr, self.Xc
        g_r = Xr.T @ (-2.0 * rs_e + sel["rs_th"] - t1 * rs_v * w1 - t2 * Vw2)
        if self.pc:
            Vtw1 = self._vtx(theta, beta, u, w1)
            g_c = Xc.T @ (-2.0 * cs_e + sel["cs_th"] - t1 * Vtw1 - t2 * cs_v * w2)
        else:
            g_c = np.zeros(0)
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
        return D, np.concatenate([[g0, g1], g_r, g_c])

    def extras(self, theta, beta) -> dict[str, Any]:
        """Conditional modes b = Λû and conditional variances (lme4's ``ranef(condVar = TRUE)``)."""
        theta = np.asarray(theta, float)
        beta = np.asarray(beta, float)
        u, sy, cho = self.modes(theta, beta)
        Sinv = sla.cho_solve(cho, np.eye(self.q2))
        sel = self._selected(theta, beta, u, sy, cho, Sinv, need_rows=False)
        t1, t2 = float(theta[0]), float(theta[1])
        return {"b": [t1 * u[:self.q1], t2 * u[self.q1:]],
                "condvar": [t1 * t1 * sel["diag1"], t2 * t2 * sel["diag2"]], "u": u}

    def rx_vcov(self, theta, beta) -> np.ndarray:
        """Var(β̂) from R_X (lme4's ``vcov`` fallback): (XᵀVX - Aᵀ M⁻¹ A)⁻¹ with A = ΛZᵀVX."""
        theta = np.asarray(theta, float)
        beta = np.asarray(beta, float)
        u, sy, cho = self.modes(theta, beta)
        t1, t2 = float(theta[0]), float(theta[1])
        Xr, Xc, rs_v, cs_v = self.Xr, self.Xc, sy["rs_v"], sy["cs_v"]
        VXc = self._vx(theta, beta, u, Xc) if self.pc else np.zeros((self.q1, 0))
        VtXr = self._vtx(theta, beta, u, Xr)
        XVX = np.block([[Xr.T @ (rs_v[:, None] * Xr), Xr.T @ VXc],
                        [VXc.T @ Xr, Xc.T @ (cs_v[:, None] * Xc)]])
        A1 = t1 * np.hstack([rs_v[:, None] * Xr, VXc])
        A2 = t2 * np.hstack([VtXr, cs_v[:, None] * Xc])
        Gta1 = self._gt(theta, beta, u, sy["D1"], A1)
        W2 = sla.cho_solve(cho, A2 - Gta1)
        W1 = (A1 - self._cmul(theta, beta, u, W2)) / sy["D1"][:, None]
        RX = XVX - (A1.T @ W1 + A2.T @ W2)
        return np.linalg.inv(0.5 * (RX + RX.T))

    def _gt(self, theta, beta, u, D1, r1) -> np.ndarray:
        """Gᵀ r₁ = θ₁θ₂ Vᵀ (r₁ / D₁) (r₁: q1, or q1 x p)."""
        x = r1 / (D1 if r1.ndim == 1 else D1[:, None])
        return (float(theta[0]) * float(theta[1])) * self._vtx(theta, beta, u, x)

    def pearson_quantiles(self, theta, beta, u: np.ndarray, probs: Sequence[float]) -> np.ndarray:
        """Quantiles (R's type 7) of the row-level Pearson residuals (y-μ)/√(μ(1-μ)): a success row of a
        cell gives √((1-μ)/μ) = exp(-η/2), a failure -√(μ/(1-μ)) = -exp(η/2), each as many times as the
        cell has them. Sorted ascending the residuals are the failures by η descending, then the successes
        by η descending; each order statistic is found by a histogram of η over the cells (weights: the
        cell's failures or successes) and the exact values of the few cells in the bin that holds it."""
        a1, a2 = self._lin(theta, beta, u)
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
        vals = self._eta_order_stats(0.0, a1, a2, sorted(set(need.values())))

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

class NotSeparable(ValueError):
    """A fixed-effect column the crossed grid cannot take (the counts of the cells are then not sufficient,
    or X is not split into row and column parts); the message says which and why."""


@dataclass(frozen=True)
class GridCovariates:
    """Fixed-effect columns of the crossed grid: ``Xr`` (q1 x pr, the intercept first) constant within a level
    of the row factor, ``Xc`` (q2 x pc) constant within a level of the column factor; ``order[i]`` is the
    position of internal column i (``Xr`` then ``Xc``) in ``info.column_names`` (the formula's order)."""

    Xr: np.ndarray
    Xc: np.ndarray
    order: tuple[int, ...]
    info: Any
    message: str
    intercept: int = 0


def grid_covariates(spec: Any, backend: Any, grid: Any, response: str,
                    contrasts: Mapping[str, str] | None = None,
                    levels: Mapping[str, Any] | None = None) -> GridCovariates:
    """Collect the fixed-effect design of ``spec`` per level of the grid's two factors.

    η_jk = x_jᵀβ_r + x_kᵀβ_c + b_j + b_k is separable when every fixed-effect column is constant within a
    level of the row factor (item-level covariates: token count, wh-word) or of the column factor
    (model-level: size, family): the q1 x q2 count tables then stay sufficient. Each column ``c`` is placed
    by one pass per factor over the distinct (level, c) pairs (``backend.cell_counts``); a column that varies
    within an (item, model) cell, varies across both factors, is missing on some rows, or a term that mixes
    the two sides raises :class:`NotSeparable` (the cell-table fit, ``method="cells"``, takes those).
    ``scale(x)`` uses the rows' mean and SD (each level weighted by its rows), as R's ``scale`` on the rows.
    """
    from mrcstats.models.design import CONTRAST_NAMES, DesignInfo, r_model_matrix, rank_columns

    N = grid.tables()[1]
    side_factor = list(grid.factors)                  # [row factor, column factor]
    values: list[dict[str, np.ndarray]] = [{}, {}]
    for c in spec.fixed_columns:
        if c in side_factor:
            raise NotSeparable(f"column {c!r} is both a grouping factor and a fixed-effect variable")
        _cells, drop = backend.cell_counts([c], response)
        if drop["covariate"]:
            raise NotSeparable(f"covariate {c!r} is missing on {drop['covariate']:,} row(s); the grid fit needs it "
                               f"on every row (method='cells' leaves those rows out)")
        placed = False
        for side in (0, 1):
            f = side_factor[side]
            t, _d = backend.cell_counts([f, c], response)
            codes = grid.level_codes(side, t[f])
            ok = codes >= 0
            cc = codes[ok]
            if len(np.unique(cc)) == len(cc) and len(cc) == grid.shape[side]:
                vals = t[c].to_numpy()[ok]
                out = np.empty(len(cc), dtype=vals.dtype)
                out[cc] = vals
                values[side][c] = out
                placed = True
                break
        if not placed:
            t3, _d = backend.cell_counts(side_factor + [c], response)
            within = bool(t3.duplicated(side_factor).any())
            raise NotSeparable(
                f"covariate {c!r} varies within an ({side_factor[0]}, {side_factor[1]}) cell: the grid of counts "
                f"cannot hold it; use method='cells'" if within else
                f"covariate {c!r} varies across both {side_factor[0]!r} and {side_factor[1]!r} (it is constant "
                f"within neither); the crossed grid takes {side_factor[0]}-level or {side_factor[1]}-level "
                f"covariates only; use method='cells'")
    side_of = {c: s for s in (0, 1) for c in values[s]}
    for t in spec.terms:
        sides = {side_of[v.column] for v in t.variables}
        if len(sides) > 1:
            raise NotSeparable(f"term {t.label!r} mixes {side_factor[0]}-level and {side_factor[1]}-level "
                               f"covariates (η is then not separable); use method='cells'")
    # R's scale(x) over the rows: each level weighted by its number of rows
    weights = [N.sum(axis=1, dtype=np.int64).astype(float), N.sum(axis=0, dtype=np.int64).astype(float)]
    scaling = {}
    for t in spec.terms:
        for v in t.variables:
            if v.transform == "scale" and v.label not in scaling:
                s = side_of[v.column]
                x = np.asarray(values[s][v.column], float)
                w = weights[s]
                n = w.sum()
                m = float(w @ x / n)
                sd = float(np.sqrt(w @ (x - m) ** 2 / max(1.0, n - 1)))
                if sd == 0:
                    raise ModelError(f"grid: scale({v.column}) has zero variance; drop the term")
                scaling[v.label] = (m, sd)
    # one frame of q1 + q2 rows: the row levels' values (column-side variables at their first level's value),
    # then the column levels' (row-side ones at the first row level's): X's columns of each side are read there
    q1, q2 = grid.shape
    frame = {}
    for c, s in side_of.items():
        v = values[s][c]
        first = v[:1]
        parts = [v, np.repeat(first, q2)] if s == 0 else [np.repeat(first, q1), v]
        frame[c] = pd.Series(np.concatenate(parts), dtype=None if v.dtype != object else object)
    F = pd.DataFrame(frame, index=pd.RangeIndex(q1 + q2))
    contr = {k: CONTRAST_NAMES.get(str(v), str(v)) for k, v in (contrasts or {}).items()}
    X, assign, names, (used, xlevels, scale_out) = r_model_matrix(spec, F, contr, None, scaling, "grid",
                                                                 levels_arg=levels)
    if len(rank_columns(X)) < X.shape[1]:
        raise NotSeparable("the fixed-effect model matrix is rank deficient; use method='cells' (it drops the "
                           "aliased columns as lme4 does)")
    col_side = []
    for j, a in enumerate(assign):
        col_side.append(0 if a == 0 else side_of[spec.terms[a - 1].variables[0].column])
    rcols = [j for j, sd in enumerate(col_side) if sd == 0]
    ccols = [j for j, sd in enumerate(col_side) if sd == 1]
    Xr = np.ascontiguousarray(X[:q1, rcols])
    Xc = np.ascontiguousarray(X[q1:, ccols])
    info = DesignInfo(spec=spec, column_names=tuple(names), assign=tuple(assign), contrasts=used,
                      xlevels=xlevels, scaling=scale_out)
    lv = [", ".join(sorted(values[s])) or "none" for s in (0, 1)]
    msg = (f"fixed effects on the grid: {side_factor[0]}-level covariates {lv[0]}; {side_factor[1]}-level "
           f"covariates {lv[1]} (each constant within its level, so the counts stay sufficient)")
    return GridCovariates(Xr, Xc, tuple(rcols + ccols), info, msg)


def fit_grid(K: np.ndarray, N: np.ndarray, *, levels: Sequence[Sequence[str]], names: Sequence[str],
             spec: Any, t0: float | None = None, messages: Sequence[str] = (),
             optinfo: dict[str, Any] | None = None, chunk_cells: int = CHUNK_CELLS,
             covariates: GridCovariates | None = None):
    """Fit ``y ~ 1 + (1 | names[0]) + (1 | names[1])`` on the count tables (rows = first term, which
    has at least as many levels as the second, lme4's term order) with the native optimiser; with
    ``covariates``, ``y ~ X + (1 | names[0]) + (1 | names[1])`` where every column of X is constant within
    a level of the first term (``covariates.Xr``) or of the second (``covariates.Xc``).

    Returns a :class:`~mrcstats.models.results.GlmerResult` in row terms (``nobs`` = Σ N, logLik of the
    Bernoulli rows, residual quantiles of the rows' Pearson residuals).
    """
    from mrcstats._progress import progress
    from mrcstats.models.design import DesignInfo
    from mrcstats.models.optimize import SINGULAR_TOL, check_conv, optimize_laplace, vcov_from_hessian
    from mrcstats.models.results import GlmerResult

    t0 = time.perf_counter() if t0 is None else t0
    cov = covariates
    model = CrossedGrid(K, N, chunk_cells=chunk_cells, Xr=None if cov is None else cov.Xr,
                        Xc=None if cov is None else cov.Xc)
    p = model.pr + model.pc
    n, s = model.n_trials, model.n_success
    if n == 0:
        raise ModelError("no rows left to fit")
    if s in (0, n):
        raise ModelError(f"every response is {'a success' if s == n else 'a failure'} ({n} rows): "
                         f"a binomial model has nothing to estimate")
    lower = np.zeros(2)
    ybar = s / n
    # β start: the intercept-only GLM's β̂ (the covariates at 0; the optimum does not depend on it)
    beta0 = np.zeros(p)
    beta0[0 if cov is None else cov.intercept] = model.family.linkfun(ybar)
    x0 = np.concatenate([np.ones(2), beta0])                # lme4's start θ = 1
    start = None
    if K.size > START_CELLS:
        start = _subgrid_start(K, N, x0, lower, chunk_cells, model.Xr, model.Xc)
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
    converged, cmsgs = check_conv(np.asarray(grad), H, 2, singular)
    msgs = list(messages)
    vcov = vcov_from_hessian(H, 2, lambda: model.rx_vcov(theta, beta), cmsgs)
    msgs += cmsgs
    ex = model.extras(theta, beta)
    rq = model.pearson_quantiles(theta, beta, ex["u"], [0, .25, .5, .75, 1])
    devres = model._pen_part(theta, beta, ex["u"])
    if cov is None:
        info_d = DesignInfo(spec=spec, column_names=("(Intercept)",), assign=(0,), contrasts={}, xlevels={})
    else:
        # back to the formula's column order
        info_d = cov.info
        pos = np.asarray(cov.order)
        b_out = np.empty(p)
        b_out[pos] = beta
        v_out = np.empty((p, p))
        v_out[np.ix_(pos, pos)] = vcov
        beta, vcov = b_out, v_out
        msgs.append(cov.message)
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


def _subgrid_start(K, N, x0, lower, chunk_cells, Xr, Xc):
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
    sub = CrossedGrid(np.ascontiguousarray(Ks), np.ascontiguousarray(Ns), chunk_cells=chunk_cells,
                      Xr=Xr[rows], Xc=Xc[cols])
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


__all__ = ["CrossedGrid", "GridCovariates", "NotSeparable", "fit_grid", "grid_covariates"]
