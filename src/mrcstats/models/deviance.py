"""lme4's deviance functions for GLMMs with a canonical link (binomial-logit, Poisson-log, ...).

Notation as Bates et al. (2015, J. Stat. Softw. 67(1), sec. 3 and 5): η = Xβ + ZΛθ u,
μ = b'(η) (the family's mean, :mod:`mrcstats.models.family`), u ~ N(0, I), Λθ diagonal (θ_k for
every level of term k). The Laplace deviance lme4 minimises (``glmerLaplace``, ``glmResp::Laplace``) is

    D(θ, β) = aic(y, μ̂) + ‖û‖² + log|L|²,   L Lᵀ = I + Λ Zᵀ W Z Λ,

with û the conditional mode (penalised IRLS, here iterated to machine precision,
lme4 with ``tolPwrss`` tightened), ``aic`` = -2 Σ log f(y | μ) = 2 Σ w (b(η) − yη) − 2 const
(``family()$aic``) and W = diag(w V(μ)) at û; the gradient uses b‴(η) = V'(μ) V(μ). The kernels
ask the family (``data.family``) for b, b', V and V' and keep their linear algebra; below, the
binomial case reads b = softplus, μ(1−μ) = V(μ), 1 − 2μ = V'(μ).  For one grouping factor L is diagonal, so the modes are
one-dimensional Newton problems per group, solved vectorised with segment sums;
the gradient in (θ, β) is analytic (envelope theorem for the penalised deviance plus
the derivative of log|L|² through W, including dû/d(θ, β)).

For several grouping factors the term with the most levels is eliminated by its
diagonal block and the rest (the Schur complement) is a dense matrix, which is
exact and fast when the other factors have up to a few thousand levels in total.

Adaptive Gauss-Hermite quadrature (``glmerAGQ``, one grouping factor) and nAGQ = 0
(β inside the penalised IRLS, lme4's ``nAGQ = 0``) are here as well.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from mrcstats.errors import ModelError
from mrcstats.models.family import Family

PIRLS_TOL = 1e-22      # Newton decrement (squared) below which the modes are converged
PIRLS_MAXIT = 200
DENSE_PAIRS_MAX = 32_000_000  # largest q1 x q2 table of pair sums kept dense (crossed terms; 256 MB)
GRID_ORDER = True      # complete crossed grids: kernels in cell order (False: the row-order path, for tests)
#: two crossed terms with each pair of levels at most once and at least this fraction of the pairs observed
#: are fitted as a complete grid, the missing cells with prior weight 0 (:meth:`ResponseData.on_cells`).
#: Measured per deviance evaluation (31 x 3,000 and 29 x 12,000, one BLAS thread): the cell-order kernels are
#: 1.2-1.6x the row-order ones from about 80% fill, even at 60-70%, and 0.7-0.8x at 50%
GRID_MIN_FILL = 0.7


def grid_cells(codes1: np.ndarray, codes2: np.ndarray, n1: int, n2: int) -> np.ndarray | None:
    """The cell index ``level₁ x n2 + level₂`` of every row when two crossed factors (``n1`` and ``n2``
    levels) can be fitted as a grid (:data:`GRID_ORDER`): each pair of levels at most once, at least
    :data:`GRID_MIN_FILL` of the n1 x n2 pairs observed, at most :data:`DENSE_PAIRS_MAX` cells; else None."""
    n, cells = len(codes1), n1 * n2
    if not GRID_ORDER or cells > DENSE_PAIRS_MAX or n < GRID_MIN_FILL * cells:
        return None
    keys = np.asarray(codes1, dtype=np.int64) * n2 + codes2
    if int(np.bincount(keys, minlength=cells).max(initial=0)) > 1:
        return None
    return keys


def _key(theta, beta) -> bytes:
    """The point (θ, β) as bytes: the key under which a model keeps its factorisation for ``rx_vcov``."""
    return np.asarray(theta, float).tobytes() + np.asarray(beta, float).tobytes()


def _kept_at(model, theta, beta):
    """What the model's last kept evaluation left for ``rx_vcov`` (its ``_at``, set by ``evaluate(keep=True)``)
    when that evaluation was at (θ, β); None otherwise (``rx_vcov`` then runs PIRLS itself)."""
    at = model._at
    return at[1] if at is not None and at[0] == _key(theta, beta) else None


def halving_step(u: np.ndarray, step: np.ndarray, f0: float, pen) -> tuple[np.ndarray, float]:
    """The penalised-IRLS update with step halving (lme4's ``pwrssUpdate``): u - 2⁻ᵏ step for the first
    k = 0..39 whose penalised deviance ``pen(u_new)`` does not exceed ``f0`` (up to 1e-12 relative);
    returns (u_new, pen(u_new))."""
    fac = 1.0
    for _ in range(40):
        un = u - fac * step
        f1 = pen(un)
        if f1 <= f0 + 1e-12 * abs(f0):
            break
        fac /= 2
    return un, f1


# Up to this order the Schur complement is factored with numpy and inverted once (np.linalg.cholesky, the
# inverse of the factor): no scipy import on the common path (crossed designs whose smaller factor has a few
# dozen levels, e.g. the models of an evaluation), and each solve is one small matrix product. numpy has no
# triangular solve: np.linalg.solve on the factor is an LU solve with ~30 µs of call overhead, several per
# PIRLS step. Above this order scipy's LAPACK (dpotrf/dpotrs) is imported (0.15 s, once) and used.
NUMPY_CHOLESKY_MAX = 64


def cho_factor(S: np.ndarray) -> tuple:
    """The lower Cholesky factor of S as ``scipy.linalg.cho_factor(S, lower=True)`` returns it, ``(c, True)``,
    without its argument checks. Up to order :data:`NUMPY_CHOLESKY_MAX`: ``np.linalg.cholesky`` (the upper
    triangle zero) and, third, S⁻¹ = L⁻ᵀL⁻¹ for :func:`cho_solve`; above it LAPACK ``dpotrf`` (the upper
    triangle left as S's, as ``cho_factor`` leaves it). Raises ``np.linalg.LinAlgError`` when S is not
    positive definite."""
    if S.shape[0] <= NUMPY_CHOLESKY_MAX:
        L = np.linalg.cholesky(S)
        Li = np.linalg.inv(L)
        return L, True, Li.T @ Li
    from scipy.linalg import lapack

    c, info = lapack.dpotrf(S, lower=1, clean=0)
    if info != 0:
        raise np.linalg.LinAlgError("the matrix is not positive definite")
    return c, True


def cho_solve(cho: tuple, b: np.ndarray) -> np.ndarray:
    """``scipy.linalg.cho_solve(cho, b)`` = S⁻¹ b for a factor from :func:`cho_factor`: the kept inverse
    times b up to order :data:`NUMPY_CHOLESKY_MAX`, LAPACK ``dpotrs`` (L y = b, then Lᵀ x = y) above."""
    if len(cho) == 3:
        return cho[2] @ b
    from scipy.linalg import lapack

    x, info = lapack.dpotrs(cho[0], b, lower=1)
    if info != 0:  # pragma: no cover
        raise ValueError(f"dpotrs: illegal value in argument {-info}")
    return x


def gh_rule(k: int) -> tuple[np.ndarray, np.ndarray]:
    """lme4's ``GHrule(k)``: nodes z and weights w for the standard normal density."""
    x, w = np.polynomial.hermite.hermgauss(k)
    z = x * math.sqrt(2.0)
    w = w / w.sum()
    z = (z - z[::-1]) / 2
    w = (w + w[::-1]) / 2
    return z, w


class ResponseData:
    """Arrays shared by the deviance functions (rows optionally aggregated) and the response's family.

    ``XT`` is X transposed (p x n, C order, for fast Xᵀv), ``w`` the weights (binomial: trials times
    prior weights), ``y`` the response on the family's scale (binomial: the proportion); ``const`` the
    log-likelihood's constant Σ c(y) (aic = dev-part - 2 const; binomial: the log binomial coefficients)
    and ``ent`` the family's saturated term, so that Σ devResid = Σ 2w(b(η) - yη) + ent.
    """

    def __init__(self, X: np.ndarray, y: np.ndarray, w: np.ndarray, offset: np.ndarray | None,
                 const: float, family: Family):
        self.family = family
        self.XT = np.ascontiguousarray(X.T)
        self.y = y
        self.w = w
        self.wy = w * y
        self.offset = offset
        self.const = const
        self.ent = family.saturated(y, w)
        self.unit = bool(np.all(w == 1.0))
        self.n, self.p = X.shape[0], X.shape[1]

    @classmethod
    def from_design(cls, design, y: np.ndarray | None = None) -> ResponseData:
        """The data of a built :class:`~mrcstats.models.design.Design` (``y``: another response, e.g. a
        simulated one)."""
        return cls(design.X, design.y if y is None else y, design.weights, design.offset, design.loglik_const,
                   design.family)

    def reordered(self, order: np.ndarray) -> ResponseData:
        """The same data with the rows in ``order`` (a permutation); the sums over all rows (``const``,
        ``ent``) are kept, not recomputed in the new order."""
        out = object.__new__(ResponseData)
        out.__dict__.update(self.__dict__)
        out.XT = np.ascontiguousarray(self.XT[:, order])
        out.y, out.w, out.wy = self.y[order], self.w[order], self.wy[order]
        out.offset = None if self.offset is None else self.offset[order]
        return out

    def on_cells(self, keys: np.ndarray, ncells: int) -> ResponseData:
        """The data as a complete table of ``ncells`` cells, row i in cell ``keys[i]`` (distinct keys), the cells
        no row fills with prior weight 0 (y = 0, X = 0, offset 0). A weight-0 row adds exactly 0 to every sum
        of the Laplace deviance and PIRLS: w(b(η) − yη), w(y − μ), wV(μ) and wV(μ)V'(μ) are 0 at any finite η,
        so the deviance, the modes, the gradient and M = I + ΛZᵀWZΛ are those of the rows (their sums taken in
        cell order). ``const`` and ``ent`` are the rows' sums, kept. With ``len(keys) == ncells``: the rows
        reordered (:meth:`reordered`)."""
        keys = np.asarray(keys, dtype=np.intp)
        if len(keys) == ncells:
            order = np.empty(ncells, dtype=np.intp)
            order[keys] = np.arange(ncells)
            return self.reordered(order)
        out = object.__new__(ResponseData)
        out.__dict__.update(self.__dict__)

        def spread(v: np.ndarray) -> np.ndarray:
            full = np.zeros(ncells)
            full[keys] = v
            return full

        XT = np.zeros((self.p, ncells))
        XT[:, keys] = self.XT
        out.XT = XT
        out.y, out.w, out.wy = spread(self.y), spread(self.w), spread(self.wy)
        out.offset = None if self.offset is None else spread(self.offset)
        out.unit = False
        out.n = ncells
        return out

    def linpred(self, beta: np.ndarray) -> np.ndarray:
        eta = beta @ self.XT if self.p else np.zeros(self.n)
        if self.offset is not None:
            eta = eta + self.offset
        return eta


#: the name the binomial-only engine gave this class
BinomialData = ResponseData


class SingleFactor:
    """Laplace deviance and its gradient for one random intercept term (diagonal L)."""

    def __init__(self, data: ResponseData, codes: np.ndarray, q: int):
        self.d = data
        self.g = np.ascontiguousarray(codes, dtype=np.intp)
        self.q = q
        self.u = np.zeros(q)
        self._at: tuple | None = None       # (key of (θ, β), what rx_vcov needs) of the last kept evaluation
        self.nfev = 0
        self.pirls_iters = 0
        n = data.n
        # work buffers reused by every evaluation (fresh 10M-row temporaries cost page faults)
        self._eta0, self._eta, self._mu, self._r, self._v, self._t = (np.empty(n) for _ in range(6))

    def _seg(self, v: np.ndarray) -> np.ndarray:
        return np.bincount(self.g, weights=v, minlength=self.q)

    def _group_obj(self, eta: np.ndarray, u: np.ndarray, f: np.ndarray | None = None,
                   tmp: np.ndarray | None = None) -> np.ndarray:
        """Per-group penalised deviance Σ 2w(b(η) - yη) + u² (f, tmp: optional buffers)."""
        f = np.empty_like(eta) if f is None else f
        tmp = np.empty_like(eta) if tmp is None else tmp
        self._half_dev(eta, f, tmp)
        return 2 * self._seg(f) + u * u

    def _half_dev(self, eta: np.ndarray, f: np.ndarray, tmp: np.ndarray) -> np.ndarray:
        """Row terms w(b(η) − yη) into ``f``, in place (``tmp`` is scratch); returns ``f``
        (binomial: b(η) = softplus(η) = log1p(exp(−|η|)) + max(η, 0), stable for any η)."""
        d = self.d
        d.family.cumulant(eta, out=f, tmp=tmp)
        if d.unit:
            np.multiply(d.y, eta, out=tmp)
        else:
            f *= d.w
            np.multiply(d.wy, eta, out=tmp)
        f -= tmp
        return f

    def _mu_r_v(self, eta: np.ndarray):
        """μ, w(y-μ), wV(μ) into the work buffers."""
        d = self.d
        mu, r, v = self._mu, self._r, self._v
        d.family.mean(eta, out=mu)
        d.family.variance(mu, out=v)
        if d.unit:
            np.subtract(d.y, mu, out=r)
        else:
            np.multiply(d.w, mu, out=r)
            np.subtract(d.wy, r, out=r)
            v *= d.w
        return mu, r, v

    def modes(self, eta0: np.ndarray, theta: float, u: np.ndarray | None = None):
        """Converged conditional modes û for fixed (θ, β).

        Returns (u, eta, mu, E, S) with E_j = Σ w(y-μ), S_j = Σ wV(μ) over group j at û;
        eta and mu are work buffers, valid until the next call.
        """
        g = self.g
        u = self.u.copy() if u is None else u.copy()
        eta = self._eta
        if theta == 0.0:
            u[:] = 0.0
            eta[:] = eta0
            mu, r, v = self._mu_r_v(eta)
            return u, eta, mu, self._seg(r), self._seg(v)
        fcur = None
        th2 = theta * theta
        for it in range(PIRLS_MAXIT):
            np.take(u, g, out=eta)
            eta *= theta
            eta += eta0
            mu, r, v = self._mu_r_v(eta)
            E = self._seg(r)
            S = self._seg(v)
            grad = u - theta * E
            L = 1.0 + th2 * S
            step = grad / L
            dec = grad * step
            dmax = float(dec.max())
            self.pirls_iters += 1
            if dmax < PIRLS_TOL:
                return u, eta, mu, E, S
            unew = u - step
            if dmax > 1e-4:
                # step-halving per group where the penalised deviance does not decrease
                # r and v are free here (E and S are computed); t holds the trial η
                if fcur is None:
                    fcur = self._group_obj(eta, u, self._r, self._v)
                eta_n = self._t
                for _ in range(60):
                    np.take(unew, g, out=eta_n)
                    eta_n *= theta
                    eta_n += eta0
                    fnew = self._group_obj(eta_n, unew, self._r, self._v)
                    bad = fnew > fcur + 1e-10 * np.abs(fcur)
                    if not bad.any():
                        break
                    step[bad] *= 0.5
                    unew = np.where(bad, u - step, unew)
                fcur = fnew
            else:
                fcur = None
            u = unew
        raise ModelError("penalised IRLS did not converge in "
                         f"{PIRLS_MAXIT} iterations (conditional modes); check for separation")

    def evaluate(self, theta: float, beta: np.ndarray, grad: bool = True, keep: bool = True):
        """(D, gradient in (θ, β)) of the Laplace deviance, warm-starting the modes."""
        d = self.d
        self.nfev += 1
        eta0 = self._eta0
        if d.p:
            np.dot(beta, d.XT, out=eta0)
        else:
            eta0[:] = 0.0
        if d.offset is not None:
            eta0 += d.offset
        u, eta, mu, E, S = self.modes(eta0, theta)
        if keep:
            self.u = u
            self._at = (_key(theta, beta), (self._v.copy(), S))    # for rx_vcov at this point (no second PIRLS)
        th2 = theta * theta
        L = 1.0 + th2 * S
        f = self._half_dev(eta, self._t, eta0)  # eta0 is free from here on: scratch
        D = 2.0 * float(f.sum()) - 2.0 * d.const + float(u @ u) + float(np.log(L).sum())
        if not grad:
            return D, None
        e, v = self._r, self._v
        t = self._t
        d.family.dvariance(mu, out=t)
        t *= v                                 # t = w V(μ) V'(μ) = w b‴(η)
        T = self._seg(t)
        invL = 1.0 / L
        comb = eta0
        np.take(th2 * invL, self.g, out=comb)
        comb *= t                              # θ² t / L
        np.multiply(e, 2.0, out=t)
        comb -= t
        np.take(th2 * th2 * T * invL * invL, self.g, out=t)
        t *= v
        comb -= t
        g_beta = d.XT @ comb
        dudth = (E - theta * S * u) * invL
        g_theta = -2.0 * float(u @ E) + float(((2 * theta * S + th2 * T * (u + theta * dudth)) * invL).sum())
        return D, np.concatenate([[g_theta], g_beta])

    def extras(self, theta: float, beta: np.ndarray):
        """Quantities for the result at (θ, β): modes, condvar of b = θu, μ, deviance residual sum."""
        eta0 = self.d.linpred(beta)
        u, eta, mu, _E, S = self.modes(eta0, theta)
        L = 1.0 + theta * theta * S
        return {"b": [theta * u], "condvar": [theta * theta / L], "mu": mu.copy(), "eta": eta.copy()}

    def rx_vcov(self, theta: float, beta: np.ndarray) -> np.ndarray:
        """lme4's RX-based covariance of β (``pp$unsc()``), the fallback when the Hessian is not PD."""
        d = self.d
        kept = _kept_at(self, theta, beta)
        if kept is not None:
            v, S = kept
        else:
            _u, _eta, mu, _E, S = self.modes(d.linpred(beta), theta)
            v = d.w * d.family.variance(mu)
        L = 1.0 + theta * theta * S
        XtWX = (d.XT * v) @ d.XT.T
        A = np.stack([self._seg(v * d.XT[k]) for k in range(d.p)], axis=1)
        RX = XtWX - theta * theta * (A / L[:, None]).T @ A
        return np.linalg.inv(RX)

    # ------------------------------------------------------------------ adaptive GHQ
    def agq(self, theta: float, beta: np.ndarray, nagq: int) -> float:
        """lme4's ``glmerAGQ`` deviance (Σ devc0 + log|L|² - 2 Σ log mult)."""
        d, g = self.d, self.g
        self.nfev += 1
        eta0 = d.linpred(beta)
        u, _eta, _mu, _E, S = self.modes(eta0, theta)
        self.u = u
        L = 1.0 + theta * theta * S
        sd = 1.0 / np.sqrt(L)

        def devc(uu):
            e = eta0 + theta * uu[g]
            f = d.family.cumulant(e)
            f *= d.w
            f -= d.wy * e
            return 2 * self._seg(f) + uu * uu

        ent_g = self._seg(d.family.saturated_rows(d.y, d.w))
        devc0 = devc(u) + ent_g
        z, w = gh_rule(nagq)
        mult = np.zeros(self.q)
        for zk, wk in zip(z, w):
            if zk == 0:
                mult += wk
            else:
                dk = devc(u + zk * sd) + ent_g
                mult += np.exp(-0.5 * (dk - devc0) + 0.5 * zk * zk) * wk
        return float(devc0.sum() + np.log(L).sum() - 2 * np.log(mult).sum())

    # ------------------------------------------------------------------ nAGQ = 0
    def nagq0(self, theta: float, beta0: np.ndarray) -> tuple[float, np.ndarray]:
        """Deviance with β inside the penalised IRLS (lme4 nAGQ = 0); returns (D, β̂(θ))."""
        d, g = self.d, self.g
        self.nfev += 1
        beta = beta0.copy()
        u = self.u.copy()
        th2 = theta * theta
        fcur = None
        for it in range(PIRLS_MAXIT):
            eta = d.linpred(beta) + theta * u[g]
            mu = d.family.mean(eta)
            e = d.wy - d.w * mu
            v = d.w * d.family.variance(mu)
            E, S = self._seg(e), self._seg(v)
            gu = u - theta * E          # half-gradient in u
            gb = -(d.XT @ e)            # half-gradient in β
            Du = 1.0 + th2 * S
            A = np.stack([self._seg(v * d.XT[k]) for k in range(d.p)], axis=1) * theta  # q x p
            XtWX = (d.XT * v) @ d.XT.T
            Sch = XtWX - (A / Du[:, None]).T @ A
            rb = gb - A.T @ (gu / Du)
            db = np.linalg.solve(Sch, rb)
            du = (gu - A @ db) / Du
            dec = float(gu @ du + gb @ db)
            self.pirls_iters += 1
            if dec < 1e-20:
                break
            fac = 1.0
            f0 = self._pen(eta, u) if fcur is None else fcur
            for _ in range(40):
                un, bn = u - fac * du, beta - fac * db
                en = d.linpred(bn) + theta * un[g]
                f1 = self._pen(en, un)
                if f1 <= f0 + 1e-10 * abs(f0):
                    break
                fac /= 2
            u, beta, fcur = un, bn, f1
        self.u = u
        eta = d.linpred(beta) + theta * u[g]
        mu = d.family.mean(eta)
        S = self._seg(d.w * d.family.variance(mu))
        f = d.family.cumulant(eta)
        f *= d.w
        f -= d.wy * eta
        D = 2 * float(f.sum()) - 2 * d.const + float(u @ u) + float(np.log(1 + th2 * S).sum())
        return D, beta

    def _pen(self, eta, u) -> float:
        d = self.d
        f = d.family.cumulant(eta)
        f *= d.w
        f -= d.wy * eta
        return 2 * float(f.sum()) + float(u @ u)


class MultiFactor:
    """Laplace deviance for several random-intercept terms (nested or crossed).

    u = (u₁, u_rest): the first term (most levels) has a diagonal block D₁; the others
    form a dense block; Newton steps and log|L|² use the Schur complement
    S = D_rest - Cᵀ D₁⁻¹ C (dense, size = total levels of the other terms).
    The gradient uses the selected inverse of M = I + ΛZᵀWZΛ at the observed pairs.
    """

    MAX_DENSE = 6000

    def __init__(self, data: ResponseData, codes: list[np.ndarray], nlev: list[int]):
        self.d = data
        self._dd = data         # the rows in the order the kernels use (the grid's cell order, see below)
        self.k = len(codes)
        self.nlev = nlev
        self.q1 = nlev[0]
        self.q2 = int(sum(nlev[1:]))
        if self.q2 > self.MAX_DENSE:
            raise ModelError(f"the native engine handles crossed/nested terms when all but the largest "
                             f"have at most {self.MAX_DENSE} levels in total (here {self.q2}); use engine='lme4'")
        self.c1 = codes[0]
        offs = np.cumsum([0] + nlev[1:])
        self.cr = [c + o for c, o in zip(codes[1:], offs[:-1])]   # column indices into the rest block
        self.term_of_rest = np.concatenate([np.full(m, j + 1) for j, m in enumerate(nlev[1:])])
        q1, q2 = self.q1, self.q2
        # pair sums P[a, c] = Σ_{i: level a of term 1, column c of the rest} vec_i give
        # Z1ᵀvec (row sums over the first rest term), Z_restᵀvec (column sums) and C;
        # dense (q1 x q2, one bincount) when small enough, else over the observed pairs
        self.nrest = len(self.cr)
        self.nfirst = nlev[1]
        self.dense = q1 * q2 <= min(DENSE_PAIRS_MAX, max(2 * data.n, 200_000))
        keys = np.concatenate([self.c1.astype(np.int64) * q2 + c for c in self.cr])
        # two crossed terms with every pair of levels at most once (every model answered most items once):
        # the rows are the cells of the q1 x q2 table, the cells no row fills weighted 0 (grid_cells,
        # ResponseData.on_cells). The kernels then keep the rows in cell order, so pair sums are a reshape and
        # the per-row η a broadcast sum (no bincount, no gather); the table of pair sums is the same to the
        # bit (one row per cell), only whole-data sums add in another order.
        cells = grid_cells(codes[0], codes[1], q1, q2) if self.nrest == 1 else None   # (= keys when not None)
        self.grid = cells is not None
        if self.grid:
            self.dense = True
            self._dd = data.on_cells(cells, q1 * q2)  # cell j*q2 + k <- the row of level pair (j, k)
            self.c1 = np.repeat(np.arange(q1, dtype=np.intp), q2)     # the levels of each cell
            self.cr = [np.tile(np.arange(q2, dtype=np.intp), q1)]
        if self.dense:
            self.key1 = keys
        else:
            uk, inv = np.unique(keys, return_inverse=True)
            self.inv1 = inv
            self.nnz1 = len(uk)
            self.rows1 = (uk // q2).astype(np.int64)
            self.cols1 = (uk % q2).astype(np.int64)
            self.first1 = self.cols1 < self.nfirst
            self.indptr1 = np.concatenate([[0], np.cumsum(np.bincount(self.rows1, minlength=q1))])
        # off-diagonal rest-rest blocks (only with three or more terms)
        keys2 = []
        for a in range(self.nrest):
            for b in range(self.nrest):
                if a != b:
                    keys2.append(self.cr[a].astype(np.int64) * q2 + self.cr[b])
        self.key2 = np.concatenate(keys2) if keys2 else None
        self.u = np.zeros(self.q1 + self.q2)
        self._u_theta: np.ndarray | None = None     # the θ of the kept modes
        self._at: tuple | None = None               # (key of (θ, β), what rx_vcov needs) of the last kept evaluation
        self._lam_cache: tuple | None = None
        self.nfev = 0
        self.pirls_iters = 0

    def _pairs(self, vec):
        if self.grid:
            return vec.reshape(self.q1, self.q2)
        vr = np.tile(vec, self.nrest) if self.nrest > 1 else vec
        if self.dense:
            return np.bincount(self.key1, weights=vr, minlength=self.q1 * self.q2).reshape(self.q1, self.q2)
        return np.bincount(self.inv1, weights=vr, minlength=self.nnz1)

    def _rowsum(self, P):
        if self.dense:
            return P[:, :self.nfirst] @ _ones(self.nfirst)     # BLAS: ~8x numpy's sum over a short axis
        return np.bincount(self.rows1[self.first1], weights=P[self.first1], minlength=self.q1)

    def _colsum(self, P):
        if self.dense:
            return _ones(P.shape[0]) @ P
        return np.bincount(self.cols1, weights=P, minlength=self.q2)

    def _lam(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        """(θ₁, the θ of each column of the rest block), cached for the last θ (called many times per θ)."""
        key = np.asarray(theta, float).tobytes()
        if self._lam_cache is None or self._lam_cache[0] != key:
            self._lam_cache = (key, (float(theta[0]), np.asarray(theta[1:], float)[self.term_of_rest - 1]))
        return self._lam_cache[1]

    def _gather(self, a1, a2):
        """Per observation a1[level of term 1] + Σ_k a2[column of term k] (one gather of the
        q1 x q2 table when the pair table is dense and there are two terms)."""
        if self.dense and self.nrest == 1:
            return self._cells(np.add.outer(a1, a2))
        out = np.take(a1, self.c1)
        for c in self.cr:
            out += np.take(a2, c)
        return out

    def _cells(self, tab: np.ndarray) -> np.ndarray:
        """Per observation the entry of a q1 x q2 table at its pair of levels."""
        return tab.ravel() if self.grid else np.take(tab.ravel(), self.key1)

    def _rows(self, x: np.ndarray) -> np.ndarray:
        """A per-observation array in the kernels' order back in the data's row order."""
        return x[self.key1] if self.grid else x

    def _eta(self, eta0, theta, u):
        t1, lr = self._lam(theta)
        eta = self._gather(u[:self.q1] * t1, u[self.q1:] * lr)
        eta += eta0
        return eta

    def _system(self, theta, v):
        """D1 (q1), C (q1 x q2, dense or sparse), B (q2 x q2 dense) of M = I + ΛZᵀWZΛ."""
        t1, lr = self._lam(theta)
        q1, q2 = self.q1, self.q2
        P = self._pairs(v)
        D1 = 1.0 + t1 * t1 * self._rowsum(P)
        if self.dense:
            C = P * (t1 * lr)[None, :]
        else:
            from scipy import sparse  # the pair table too large to keep dense: scipy's CSR

            C = sparse.csr_matrix((P * (t1 * lr[self.cols1]), self.cols1, self.indptr1), shape=(q1, q2))
        B = np.diag(1.0 + lr * lr * self._colsum(P))
        if self.key2 is not None:
            vr2 = np.tile(v, self.nrest * (self.nrest - 1))
            B += np.bincount(self.key2, weights=vr2, minlength=q2 * q2).reshape(q2, q2) * np.outer(lr, lr)
        return D1, C, B

    def _factor(self, D1, C):
        if self.dense:
            return C / D1[:, None]
        from scipy import sparse

        return sparse.csr_matrix(C.multiply(1.0 / D1[:, None]))     # D1⁻¹ C

    def _schur(self, B, C, G):
        if self.dense:
            return B - C.T @ G
        return B - (C.T @ G).toarray()

    def _solve(self, D1, C, G, cho, r1, r2):
        """Solve M x = r with the Schur complement."""
        y2 = cho_solve(cho, r2 - G.T @ r1)
        x1 = (r1 - C @ y2) / (D1 if np.ndim(r1) == 1 else D1[:, None])
        return x1, y2

    def _zt(self, theta, vec):
        """(Λ Zᵀ vec) split into (term 1, rest)."""
        t1, lr = self._lam(theta)
        P = self._pairs(vec)
        return t1 * self._rowsum(P), lr * self._colsum(P)

    def _start(self, theta: np.ndarray) -> np.ndarray:
        """PIRLS start: the last kept modes, rescaled per term to keep b = θu (between nearby θ the random
        effects move little; fewer Newton steps than from u itself). The modes are iterated to the same
        tolerance from any start."""
        u = self.u.copy()
        old = self._u_theta
        if old is not None:
            t_old, t_new = self._lam(old), self._lam(theta)
            if t_old[0] > 0 and t_new[0] > 0:
                u[:self.q1] *= t_old[0] / t_new[0]
            ok = (t_old[1] > 0) & (t_new[1] > 0)
            u[self.q1:][ok] *= t_old[1][ok] / t_new[1][ok]
        return u

    def modes(self, eta0, theta, u=None):
        u = self._start(theta) if u is None else u.copy()
        fcur = None
        for it in range(PIRLS_MAXIT):
            eta = self._eta(eta0, theta, u)
            mu = self._dd.family.mean(eta)
            e, v = self._ev(mu)
            a1, a2 = self._zt(theta, e)
            g1 = u[:self.q1] - a1
            g2 = u[self.q1:] - a2
            D1, C, B = self._system(theta, v)
            G = self._factor(D1, C)
            S = self._schur(B, C, G)
            try:
                cho = cho_factor(S)
            except np.linalg.LinAlgError:  # pragma: no cover
                raise ModelError("penalised IRLS: the random-effects system is not positive definite")
            s1, s2 = self._solve(D1, C, G, cho, g1, g2)
            step = np.concatenate([s1, s2])
            dec = float(np.concatenate([g1, g2]) @ step)
            self.pirls_iters += 1
            if dec < PIRLS_TOL * max(1, len(step)):
                return u, eta, mu, (D1, C, G, cho, v)
            if dec > 1e-3:
                # step-halving when the penalised deviance does not decrease
                f0 = self._pen(eta, u) if fcur is None else fcur
                u, fcur = halving_step(u, step, f0, lambda un: self._pen(self._eta(eta0, theta, un), un))
            else:
                u, fcur = u - step, None
        raise ModelError(f"penalised IRLS did not converge in {PIRLS_MAXIT} iterations; check for separation")

    def _ev(self, mu):
        """w(y-μ) and wV(μ)."""
        d = self._dd
        if d.unit:
            return d.y - mu, d.family.variance(mu)
        return d.wy - d.w * mu, d.w * d.family.variance(mu)

    def _pen(self, eta, u):
        d = self._dd
        f = d.family.cumulant(eta)
        f *= d.w
        f -= d.wy * eta
        return 2 * float(f.sum()) + float(u @ u)

    def _logdet(self, D1, cho):
        return float(np.log(D1).sum() + 2 * np.log(np.diag(cho[0])).sum())

    def _selinv(self, theta, D1, C, G, cho):
        """Per observation h_i = z_iΛ M⁻¹ Λz_iᵀ and the diagonal of M⁻¹."""
        Sinv = cho_solve(cho, np.eye(self.q2))
        GS = G @ Sinv                                   # q1 x q2 dense (D1⁻¹ C S⁻¹)
        if self.dense:
            diag1 = 1.0 / D1 + np.einsum("ij,ij->i", G, GS)
        else:
            diag1 = 1.0 / D1 + np.asarray(G.multiply(GS).sum(axis=1)).ravel()
        diag2 = np.diag(Sinv)
        t1, lr = self._lam(theta)
        if self.dense and self.nrest == 1:
            tab = (t1 * t1) * diag1[:, None] - (2 * t1) * GS * lr[None, :] + (lr * lr * diag2)[None, :]
            return self._cells(tab), diag1, diag2, GS, Sinv
        h = diag1[self.c1]
        h *= t1 * t1
        n = self._dd.n
        for a, ca in enumerate(self.cr):
            gs = GS.ravel()[self.key1[a * n:(a + 1) * n]] if self.dense else GS[self.c1, ca]
            h -= (2 * t1) * lr[ca] * gs
            h += lr[ca] * lr[ca] * diag2[ca]
        if self.key2 is not None:
            sv = Sinv.ravel()[self.key2]
            for k, (a, b) in enumerate((a, b) for a in range(self.nrest) for b in range(self.nrest) if a != b):
                ca, cb = self.cr[a], self.cr[b]
                h += lr[ca] * lr[cb] * sv[k * n:(k + 1) * n]
        return h, diag1, diag2, GS, Sinv

    def evaluate(self, theta: np.ndarray, beta: np.ndarray, grad: bool = True, keep: bool = True):
        d = self._dd
        self.nfev += 1
        theta = np.asarray(theta, float)
        eta0 = d.linpred(beta)
        u, eta, mu, (D1, C, G, cho, v) = self.modes(eta0, theta)
        if keep:
            self.u = u
            self._u_theta = theta.copy()
            self._at = (_key(theta, beta), (D1, C, G, cho, v))    # for rx_vcov at this point (no second PIRLS)
        f = d.family.cumulant_at(eta, mu)
        if not d.unit:
            f *= d.w
        f -= d.wy * eta
        D = 2.0 * float(f.sum()) - 2.0 * d.const + float(u @ u) + self._logdet(D1, cho)
        if not grad:
            return D, None
        e = d.y - mu if d.unit else d.wy - d.w * mu
        t = d.family.dvariance(mu)
        t *= v
        h, diag1, diag2, _GS, _Sinv = self._selinv(theta, D1, C, G, cho)
        # gradient of the penalised deviance part (envelope): -2 eᵀ ∂η/∂φ at fixed u
        nth = len(theta)
        # per-term Z_k u_k (with u_rest split per term)
        ur = u[self.q1:]
        zu = [u[:self.q1][self.c1]] + [ur[c] for c in self.cr]
        # the log-det derivative: tr(M⁻¹ dM) = Σ_k (2/θ_k)(q_k - tr_k M⁻¹) dθ_k + Σ_i t_i h_i dη_i
        tr = [float(diag1.sum())] + [float(diag2[self.term_of_rest == j].sum()) for j in range(1, nth)]
        nl = self.nlev
        # dû/dφ = -M⁻¹ ∂g/∂φ with g = u - ΛZᵀe (half gradient); ∂g/∂β = ΛZᵀ diag(v) X,
        # ∂g/∂θ_k = -Z_kᵀe + ΛZᵀ diag(v) Z_k u_k
        th = h * t
        a1, a2 = self._zt(theta, th)     # ΛZᵀ(t∘h)
        # w_vec = M⁻¹ ΛZᵀ (t∘h) (adjoint trick: dη/dφ contribution via dû is -Z Λ M⁻¹ ∂g/∂φ)
        w1, w2 = self._solve(D1, C, G, cho, a1, a2)
        t1, lr = self._lam(theta)
        zw = self._gather(t1 * w1, lr * w2)
        # ∂η/∂β directly = X; via û: -ZΛ M⁻¹ ΛZᵀ V X -> contributes -(v∘zw)ᵀX
        comb_b = -2.0 * e + th - v * zw
        g_beta = d.XT @ comb_b
        Pe = self._pairs(e)
        Pe_row, Pe_col = self._rowsum(Pe), self._colsum(Pe)
        g_theta = np.empty(nth)
        for k in range(nth):
            # η depends on θ_k through Z_k u_k (direct) and through û
            direct = zu[k]
            # ∂g/∂θ_k = -(Z_kᵀ e)·1 + ΛZᵀ(v∘Z_k u_k)  (unscaled for term k part)
            dg1, dg2 = self._zt(theta, v * direct)
            if k == 0:
                dg1 = dg1 - Pe_row
            else:
                mask = self.term_of_rest == k
                dg2 = dg2 - np.where(mask, Pe_col, 0.0)
            # ldet part: Σ t h (direct - Z Λ M⁻¹ ∂g) = (t h)ᵀ direct - w·∂g
            ld = float(th @ direct) - float(w1 @ dg1 + w2 @ dg2)
            thk = theta[k]
            if thk != 0:
                ld += (2.0 / thk) * (nl[k] - tr[k])
            g_theta[k] = -2.0 * float(e @ direct) + ld
        return D, np.concatenate([g_theta, g_beta])

    def extras(self, theta, beta):
        theta = np.asarray(theta, float)
        eta0 = self._dd.linpred(beta)
        u, eta, mu, (D1, C, G, cho, _v) = self.modes(eta0, theta)
        _h, diag1, diag2, _GS, _Sinv = self._selinv(theta, D1, C, G, cho)
        t1, _lr = self._lam(theta)
        b = [t1 * u[:self.q1]]
        cv = [t1 * t1 * diag1]
        offs = np.cumsum([0] + self.nlev[1:])
        ur = u[self.q1:]
        for j in range(1, self.k):
            sl = slice(offs[j - 1], offs[j])
            b.append(theta[j] * ur[sl])
            cv.append(theta[j] ** 2 * diag2[sl])
        return {"b": b, "condvar": cv, "mu": self._rows(mu), "eta": self._rows(eta)}

    def rx_vcov(self, theta, beta):
        d = self._dd
        theta = np.asarray(theta, float)
        kept = _kept_at(self, theta, beta)
        if kept is not None:
            D1, C, G, cho, v = kept
        else:
            _u, _eta, _mu, (D1, C, G, cho, v) = self.modes(d.linpred(beta), theta)
        VX = d.XT * v
        XtWX = VX @ d.XT.T
        if self.grid:           # ΛZᵀVX of all columns at once: row and column sums of the p tables
            t1, lr = self._lam(theta)
            P = VX.reshape(d.p, self.q1, self.q2)
            A1, A2 = t1 * P.sum(axis=2).T, lr[:, None] * P.sum(axis=1).T
        else:
            cols1, cols2 = [], []
            for k in range(d.p):
                a1, a2 = self._zt(theta, VX[k])
                cols1.append(a1)
                cols2.append(a2)
            A1, A2 = np.stack(cols1, 1), np.stack(cols2, 1)
        W1, W2 = self._solve(D1, C, G, cho, A1, A2)
        RX = XtWX - (A1.T @ W1 + A2.T @ W2)
        return np.linalg.inv(RX)


# ----------------------------------------------------------------------------- general terms


@functools.lru_cache(maxsize=16)
def _ones(n: int) -> np.ndarray:
    """A read-only vector of n ones: row and column sums of a table as matrix-vector products (BLAS's dgemv
    sums in another order than numpy's pairwise sum: the last bits differ, never more)."""
    out = np.ones(n)
    out.flags.writeable = False
    return out


def _binv(D: np.ndarray) -> np.ndarray:
    """Inverses of a stack of small SPD matrices (k x q x q); closed forms for q <= 2."""
    q = D.shape[1]
    if q == 1:
        return 1.0 / D
    if q == 2:
        a, b, c = D[:, 0, 0], D[:, 0, 1], D[:, 1, 1]
        det = a * c - b * b
        out = np.empty_like(D)
        out[:, 0, 0] = c / det
        out[:, 1, 1] = a / det
        out[:, 0, 1] = out[:, 1, 0] = -b / det
        return out
    return np.linalg.inv(D)


def _blogdet(D: np.ndarray) -> float:
    q = D.shape[1]
    if q == 1:
        return float(np.log(D[:, 0, 0]).sum())
    if q == 2:
        return float(np.log(D[:, 0, 0] * D[:, 1, 1] - D[:, 0, 1] ** 2).sum())
    sign, ld = np.linalg.slogdet(D)
    if np.any(sign <= 0):  # pragma: no cover
        raise ModelError("penalised IRLS: a random-effects block is not positive definite")
    return float(ld.sum())


def _bmatvec(M: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Per row M[k] @ x[k] for stacks (k x q x q) and (k x q)."""
    if M.shape[1] == 1:
        return M[:, :, 0] * x
    return np.einsum("kab,kb->ka", M, x)


def _rows_blockvec(M: np.ndarray, codes: np.ndarray, A: np.ndarray) -> np.ndarray:
    """Per row i: M[codes[i]] @ A[i] (M: levels x q x q, A: n x q) without n x q x q temporaries."""
    q = A.shape[1]
    out = np.zeros_like(A)
    for a in range(q):
        for b in range(q):
            out[:, a] += np.take(M[:, a, b], codes) * A[:, b]
    return out


class GeneralModel:
    """Laplace deviance and its gradient for any set of random-effects terms in lme4's
    parameterisation (``mkReTrms``): η = Xβ + Σ_k Z_k T_k u_k, u ~ N(0, I).

    The penalised system M = I + Λᵀ Zᵀ W Z Λ is ordered as lme4's Z (per term, level by
    level, the term's columns together). The first term (most levels) is block-diagonal
    (one q₁ x q₁ block per level); the other terms form a dense block of size
    Q₂ = Σ levels x columns, eliminated through the Schur complement
    S = B - Cᵀ D⁻¹ C, so each PIRLS pass is O(N) plus O(levels₁ q₁ Q₂ + Q₂³). A single
    term is block-diagonal and solved group by group. log|L|² = Σ log|D_j| + log|S|.

    Gradient: with A = ZΛ (rows a_i), e = w(y - μ), v = wV(μ), t = vV'(μ) (binomial: wμ(1-μ), v(1 - 2μ)),
    h_i = a_iᵀ M⁻¹ a_i, s_i = M⁻¹ a_i (only its entries at row i's levels) and
    ω = M⁻¹ Aᵀ(t∘h) (the adjoint of the modes),
    ∂D/∂β = Xᵀ ρ, ρ = -2e + t∘h - v∘(Aω); and for θ_m of term k (dT = ∂T_k/∂θ_m)
    ∂D/∂θ_m = Σ_{r,c} dT[r,c] Σ_i z_ik[r] (ρ_i u_k[c] + e_i ω_k[c] + 2 v_i s_ik[c]).
    """

    DENSE_MAX = 6000          # Q₂ limit (dense Schur complement)
    PAIRS_MAX = 30_000_000    # levels₁ q₁ x Q₂ limit (dense C)

    def __init__(self, data: ResponseData, terms) -> None:
        self.d = data
        self._dd = data     # the rows in the order the kernels use (a complete grid's cell order, see below)
        self.terms = list(terms)
        n = data.n
        t1 = self.terms[0]
        self.q1, self.n1 = t1.q, t1.nlevels
        self.codes = [np.ascontiguousarray(t.codes, dtype=np.intp) for t in self.terms]
        self.Zs = [np.ones((n, 1)) if t.Z is None else np.asarray(t.Z, float) for t in self.terms]
        # two grouping factors with every pair of levels exactly once: the kernels keep the rows in cell
        # order (level of the first term major), so the per-level sums are row/column sums of an n1 x n2
        # table and the coupling block C is a reshape (no bincount over Q₂-long keys)
        # (a grid with missing pairs: the missing cells weighted 0, their Z rows 0; grid_cells, on_cells)
        self.grid = None
        keys = None if len(self.terms) != 2 else grid_cells(self.codes[0], self.codes[1], self.n1,
                                                              self.terms[1].nlevels)
        if keys is not None:
            n2 = self.terms[1].nlevels
            cells = self.n1 * n2
            self.grid = (self.n1, n2)
            self._rowkey = keys
            self._dd = data.on_cells(keys, cells)
            self.codes = [np.repeat(np.arange(self.n1, dtype=np.intp), n2),
                          np.tile(np.arange(n2, dtype=np.intp), self.n1)]
            Zc = []
            for Z in self.Zs:
                full = np.zeros((cells, Z.shape[1]))
                full[keys] = Z
                Zc.append(full)
            self.Zs = Zc
        self.qs = [t.q for t in self.terms]
        self.nls = [t.nlevels for t in self.terms]
        self.nth = [t.ntheta for t in self.terms]
        self.th_off = np.concatenate([[0], np.cumsum(self.nth)]).astype(int)
        rest = list(range(1, len(self.terms)))
        self.rest = rest
        sizes = [self.nls[k] * self.qs[k] for k in rest]
        self.Q2 = int(sum(sizes))
        self.base_off = {k: int(o) for k, o in zip(rest, np.concatenate([[0], np.cumsum(sizes)])[:-1])}
        if self.Q2 > self.DENSE_MAX:
            raise ModelError(f"the native engine handles several random-effects terms when all but the largest "
                             f"have at most {self.DENSE_MAX} random effects in total (here {self.Q2}); "
                             "use engine='lme4'")
        if rest and self.n1 * self.q1 * self.Q2 > self.PAIRS_MAX:
            raise ModelError(f"the native engine's dense coupling of the random-effects terms would have "
                             f"{self.n1 * self.q1 * self.Q2} entries (limit {self.PAIRS_MAX}); use engine='lme4'")
        # row i's column index (level x columns) in the rest block, per rest term
        self.base = {k: self.base_off[k] + self.codes[k] * self.qs[k] for k in rest}
        self.nu = self.n1 * self.q1 + self.Q2
        self.u = np.zeros(self.nu)
        self._u_theta: np.ndarray | None = None     # the θ of the kept modes
        self._at: tuple | None = None               # (key of (θ, β), what rx_vcov needs) of the last kept evaluation
        self.nfev = 0
        self.pirls_iters = 0
        self._A_key: tuple | None = None
        self._ckeys: dict[tuple[int, int, int], np.ndarray] = {}

    # ------------------------------------------------------------------ pieces
    def _segsum(self, k: int, w: np.ndarray) -> np.ndarray:
        """Σ of w over the rows of each level of term k (a row/column sum on a complete grid)."""
        if self.grid is not None:       # row or column sums as BLAS products (~8x numpy's reduction here)
            W = w.reshape(self.grid)
            return W @ _ones(self.grid[1]) if k == 0 else _ones(self.grid[0]) @ W
        return np.bincount(self.codes[k], weights=w, minlength=self.nls[k])

    def _rows(self, x: np.ndarray) -> np.ndarray:
        """A per-row array in the kernels' order back in the data's row order."""
        return x if self.grid is None else x[self._rowkey]

    def _ckey(self, a: int, k: int, c: int) -> np.ndarray:
        """Flat index of row i's entry (level₁ column a, term k column c) in the dense C (cached)."""
        key = (a, k, c)
        out = self._ckeys.get(key)
        if out is None:
            out = (self.codes[0] * self.q1 + a) * self.Q2 + self.base[k] + c
            self._ckeys[key] = out
        return out

    @property
    def ntheta(self) -> int:
        return int(self.th_off[-1])

    def _A(self, theta: np.ndarray) -> list[np.ndarray]:
        key = tuple(np.asarray(theta, float).tolist())
        if key != self._A_key:
            self._Ts = [t.factor(theta[self.th_off[k]:self.th_off[k + 1]]) for k, t in enumerate(self.terms)]
            # column-major: every kernel below works on whole columns of A
            self._As = [np.asfortranarray(Z * T[0, 0]) if T.shape == (1, 1) else np.asfortranarray(Z @ T)
                        for Z, T in zip(self.Zs, self._Ts)]
            self._A_key = key
        return self._As

    def _split(self, u: np.ndarray) -> list[np.ndarray]:
        """u as per-term (levels x q) arrays (views)."""
        out = [u[:self.n1 * self.q1].reshape(self.n1, self.q1)]
        for k in self.rest:
            o = self.base_off[k]
            out.append(u[self.n1 * self.q1 + o:self.n1 * self.q1 + o + self.nls[k] * self.qs[k]]
                       .reshape(self.nls[k], self.qs[k]))
        return out

    def _gather(self, A: list[np.ndarray], U: list[np.ndarray]) -> np.ndarray:
        """Σ_k Σ_c A_k[i, c] U_k[level_k(i), c] per row (on a complete grid: the level values broadcast along
        the table's rows or columns instead of gathered per row; the same products added in the same order)."""
        if self.grid is not None:
            n1, n2 = self.grid
            tab = np.zeros(self.grid)
            for k, (Ak, Uk) in enumerate(zip(A, U)):
                for c in range(Ak.shape[1]):
                    tab += Ak[:, c].reshape(n1, n2) * (Uk[:, c][:, None] if k == 0 else Uk[:, c][None, :])
            return tab.ravel()
        out = np.zeros(self._dd.n)
        for Ak, Uk, ck in zip(A, U, self.codes):
            for c in range(Ak.shape[1]):
                out += Ak[:, c] * np.take(Uk[:, c], ck)
        return out

    def _zt(self, A: list[np.ndarray], r: np.ndarray) -> np.ndarray:
        """Aᵀ r as a flat vector in u's order."""
        parts = []
        for k, Ak in enumerate(A):
            parts.append(np.stack([self._segsum(k, Ak[:, c] * r)
                                   for c in range(Ak.shape[1])], axis=1).ravel())
        return np.concatenate(parts)

    def _system(self, A: list[np.ndarray], v: np.ndarray):
        """D (levels₁ x q₁ x q₁), C (levels₁ q₁ x Q₂) and B (Q₂ x Q₂) of M."""
        q1, n1 = self.q1, self.n1
        A1 = A[0]
        D = np.empty((n1, q1, q1))
        for a in range(q1):
            for b in range(a, q1):
                D[:, a, b] = self._segsum(0, v * A1[:, a] * A1[:, b])
                D[:, b, a] = D[:, a, b]
            D[:, a, a] += 1.0
        if not self.rest:
            return D, None, None
        Q2 = self.Q2
        if self.grid is not None:       # one rest term, one row per (level₁, level₂): C is that table
            qk = self.qs[1]
            C4 = np.empty((n1, q1, self.grid[1], qk))
            for a in range(q1):
                va = v * A1[:, a]
                for c in range(qk):
                    C4[:, a, :, c] = (va * A[1][:, c]).reshape(self.grid)
            C = C4.reshape(n1 * q1, Q2)
        else:
            C = np.zeros(n1 * q1 * Q2)
            for a in range(q1):
                va = v * A1[:, a]
                for k in self.rest:
                    for c in range(self.qs[k]):
                        C += np.bincount(self._ckey(a, k, c), weights=va * A[k][:, c], minlength=n1 * q1 * Q2)
            C = C.reshape(n1 * q1, Q2)
        B = np.eye(Q2)
        for k in self.rest:
            qk, nk = self.qs[k], self.nls[k]
            blk = np.empty((nk, qk, qk))
            for a in range(qk):
                for b in range(a, qk):
                    blk[:, a, b] = self._segsum(k, v * A[k][:, a] * A[k][:, b])
                    blk[:, b, a] = blk[:, a, b]
            o = self.base_off[k]
            for j in range(nk):
                B[o + j * qk:o + (j + 1) * qk, o + j * qk:o + (j + 1) * qk] += blk[j]
        if len(self.rest) > 1:
            for k in self.rest:
                for m in self.rest:
                    if k == m:
                        continue
                    for a in range(self.qs[k]):
                        for b in range(self.qs[m]):
                            B += np.bincount((self.base[k] + a) * Q2 + self.base[m] + b,
                                             weights=v * A[k][:, a] * A[m][:, b], minlength=Q2 * Q2).reshape(Q2, Q2)
        return D, C, B

    def _factor(self, D, C, B):
        Dinv = _binv(D)
        if C is None:
            return Dinv, None, None, _blogdet(D)
        n1, q1, Q2 = self.n1, self.q1, self.Q2
        C3 = C.reshape(n1, q1, Q2)
        G = np.einsum("jab,jbk->jak", Dinv, C3) if q1 > 1 else Dinv[:, :, :1] * C3
        S = B - C.T @ G.reshape(n1 * q1, Q2)
        try:
            cho = cho_factor(S)
        except np.linalg.LinAlgError:  # pragma: no cover
            raise ModelError("penalised IRLS: the random-effects system is not positive definite") from None
        ld = _blogdet(D) + 2.0 * float(np.log(np.diag(cho[0])).sum())
        return Dinv, G, cho, ld

    def _solve(self, fac, C, r: np.ndarray) -> np.ndarray:
        """M⁻¹ r (r flat in u's order, or u-order x m)."""
        Dinv, G, cho, _ld = fac
        n1, q1 = self.n1, self.q1
        m1 = n1 * q1
        r1, r2 = r[:m1], r[m1:]
        if G is None:
            if r.ndim == 1:
                return _bmatvec(Dinv, r1.reshape(n1, q1)).ravel()
            return np.einsum("jab,jbm->jam", Dinv, r1.reshape(n1, q1, -1)).reshape(m1, -1)
        Gf = G.reshape(m1, self.Q2)
        y2 = cho_solve(cho, r2 - Gf.T @ r1)
        t = r1 - C @ y2
        if r.ndim == 1:
            x1 = _bmatvec(Dinv, t.reshape(n1, q1)).ravel()
        else:
            x1 = np.einsum("jab,jbm->jam", Dinv, t.reshape(n1, q1, -1)).reshape(m1, -1)
        return np.concatenate([x1, y2])

    def _pen(self, eta: np.ndarray, u: np.ndarray, mu: np.ndarray | None = None) -> float:
        d = self._dd
        f = d.family.cumulant(eta) if mu is None else d.family.cumulant_at(eta, mu)
        if not d.unit:
            f *= d.w
        f -= d.wy * eta
        return 2 * float(f.sum()) + float(u @ u)

    def _ev(self, mu):
        d = self._dd
        v = d.family.variance(mu)
        if d.unit:
            return d.y - mu, v
        return d.wy - d.w * mu, d.w * v

    # ------------------------------------------------------------------ PIRLS
    def _start(self, theta: np.ndarray) -> np.ndarray:
        """PIRLS start: the last kept modes, moved per term to keep the random effects b_k = u_k T_kᵀ of
        the θ they were found at (between nearby θ the random effects move little: fewer Newton steps
        than from u itself, as :meth:`MultiFactor._start`). The modes are iterated to the same tolerance
        from any start."""
        u = self.u.copy()
        old = self._u_theta
        if old is None or np.array_equal(old, theta):
            return u
        U = self._split(u)
        for k, term in enumerate(self.terms):
            lo, hi = self.th_off[k], self.th_off[k + 1]
            T_old, T_new = term.factor(old[lo:hi]), term.factor(np.asarray(theta[lo:hi], float))
            if np.all(np.abs(np.diag(T_new)) > 1e-10):
                U[k][:] = np.linalg.solve(T_new, T_old @ U[k].T).T
        return u

    def modes(self, eta0: np.ndarray, theta: np.ndarray, u: np.ndarray | None = None):
        A = self._A(theta)
        u = self._start(np.asarray(theta, float)) if u is None else u.copy()
        fcur = None
        for _it in range(PIRLS_MAXIT):
            eta = eta0 + self._gather(A, self._split(u))
            mu = self._dd.family.mean(eta)
            e, v = self._ev(mu)
            g = u - self._zt(A, e)
            D, C, B = self._system(A, v)
            fac = self._factor(D, C, B)
            step = self._solve(fac, C, g)
            dec = float(g @ step)
            self.pirls_iters += 1
            if dec < PIRLS_TOL * max(1, len(step)):
                return u, eta, mu, e, v, C, fac
            if dec > 1e-3:
                f0 = self._pen(eta, u) if fcur is None else fcur
                u, fcur = halving_step(u, step, f0, lambda un: self._pen(eta0 + self._gather(A, self._split(un)), un))
            else:
                u, fcur = u - step, None
        raise ModelError(f"penalised IRLS did not converge in {PIRLS_MAXIT} iterations; check for separation")

    # ------------------------------------------------------------------ selected inverse
    def _rows_minv(self, A, C, fac):
        """Per row and term k the entries of M⁻¹ a_i at row i's levels of term k (n x q_k)."""
        Dinv, G, cho, _ld = fac
        c1, q1, n1 = self.codes[0], self.q1, self.n1
        A1 = A[0]
        if G is None:
            return [_rows_blockvec(Dinv, c1, A1)], None
        Q2 = self.Q2
        Sinv = cho_solve(cho, np.eye(Q2))
        Gf = G.reshape(n1 * q1, Q2)
        GS = Gf @ Sinv
        K = np.einsum("jak,jbk->jab", GS.reshape(n1, q1, Q2), G)
        M11 = Dinv + K
        if self.grid is not None:       # the per-row entries are the level tables broadcast (no gathers)
            return self._rows_minv_grid(A, M11, GS, Sinv), (M11, Sinv)
        GSf, Sf = GS.ravel(), Sinv.ravel()
        s1 = _rows_blockvec(M11, c1, A1)
        out = [s1]
        for a in range(q1):
            for k in self.rest:
                for c in range(self.qs[k]):
                    s1[:, a] -= np.take(GSf, self._ckey(a, k, c)) * A[k][:, c]
        for k in self.rest:
            sk = np.zeros((self._dd.n, self.qs[k]))
            for c in range(self.qs[k]):
                rk = (self.base[k] + c) * Q2
                for m in self.rest:
                    for b in range(self.qs[m]):
                        sk[:, c] += np.take(Sf, rk + self.base[m] + b) * A[m][:, b]
                for b in range(q1):
                    sk[:, c] -= np.take(GSf, self._ckey(b, k, c)) * A1[:, b]
            out.append(sk)
        return out, (M11, Sinv)

    def _rows_minv_grid(self, A, M11, GS, Sinv):
        """:meth:`_rows_minv` on a complete grid (two terms, every pair of levels once, rows in cell order):
        row (j, l)'s entries of M⁻¹ a_i are sums over the level blocks of j and l, so each product is a
        level table broadcast over the other factor's levels, the same products as the gathers give."""
        n1, n2 = self.grid
        q1, qk, Q2 = self.q1, self.qs[1], self.Q2
        o = self.base_off[1]
        A1, Ak = A[0], A[1]
        GS3 = GS.reshape(n1, q1, Q2)
        s1 = np.zeros((n1, n2, q1))
        for a in range(q1):
            for b in range(q1):
                s1[:, :, a] += M11[:, a, b][:, None] * A1[:, b].reshape(n1, n2)
        for a in range(q1):
            for c in range(qk):
                s1[:, :, a] -= GS3[:, a, o + c:o + n2 * qk:qk] * Ak[:, c].reshape(n1, n2)
        sk = np.zeros((n1, n2, qk))
        for c in range(qk):
            for b in range(qk):
                sk[:, :, c] += Sinv[o + c:o + n2 * qk:qk, o + b:o + n2 * qk:qk].diagonal()[None, :] \
                    * Ak[:, b].reshape(n1, n2)
            for b in range(q1):
                sk[:, :, c] -= GS3[:, b, o + c:o + n2 * qk:qk] * A1[:, b].reshape(n1, n2)
        return [s1.reshape(n1 * n2, q1), sk.reshape(n1 * n2, qk)]

    # ------------------------------------------------------------------ deviance
    def evaluate(self, theta, beta, grad: bool = True, keep: bool = True):
        d = self._dd
        self.nfev += 1
        theta = np.asarray(theta, float)
        eta0 = d.linpred(beta)
        u, eta, mu, e, v, C, fac = self.modes(eta0, theta)
        if keep:
            self.u = u
            self._u_theta = theta.copy()
            self._at = (_key(theta, beta), (v, C, fac))    # for rx_vcov at this point (no second PIRLS)
        D = self._pen(eta, u, mu) - 2.0 * d.const + fac[3]
        if not grad:
            return D, None
        A = self._A(theta)
        t = v * d.family.dvariance(mu)
        s, _ = self._rows_minv(A, C, fac)
        h = np.zeros(d.n)
        for Ak, sk in zip(A, s):
            for c in range(Ak.shape[1]):
                h += Ak[:, c] * sk[:, c]
        th = t * h
        w = self._solve(fac, C, self._zt(A, th))
        U, W = self._split(u), self._split(w)
        rho = -2.0 * e + th - v * self._gather(A, W)
        g_beta = d.XT @ rho
        g_theta = np.empty(self.ntheta)
        v2 = 2.0 * v
        for k, term in enumerate(self.terms):
            Zk = self.Zs[k]
            # ZQ[r, c] = Σ_i z_ik[r] (ρ_i u_k[c] + e_i ω_k[c] + 2 v_i s_ik[c])
            ZQ = np.empty((Zk.shape[1], self.qs[k]))
            for r in range(Zk.shape[1]):
                zr = Zk[:, r]
                zrho = self._segsum(k, zr * rho)
                ze = self._segsum(k, zr * e)
                zv = zr * v2
                for c in range(self.qs[k]):
                    ZQ[r, c] = zrho @ U[k][:, c] + ze @ W[k][:, c] + zv @ s[k][:, c]
            th_k = theta[self.th_off[k]:self.th_off[k + 1]]
            for m, dT in enumerate(term.factor_derivs(th_k)):
                g_theta[self.th_off[k] + m] = float(np.sum(dT * ZQ))
        return D, np.concatenate([g_theta, g_beta])

    def extras(self, theta, beta):
        """Modes b_k = u_k T_kᵀ (levels x q) and their conditional covariances T M⁻¹_jj Tᵀ."""
        theta = np.asarray(theta, float)
        eta0 = self._dd.linpred(beta)
        u, eta, mu, _e, _v, C, fac = self.modes(eta0, theta)
        A = self._A(theta)
        _s, extra = self._rows_minv(A, C, fac)
        Dinv = fac[0]
        U = self._split(u)
        b, cv = [], []
        for k, T in enumerate(self._Ts):
            b.append(U[k] @ T.T)
            if k == 0:
                blocks = extra[0] if extra is not None else Dinv
            else:
                Sinv = extra[1]
                qk, o = self.qs[k], self.base_off[k]
                idx = o + np.arange(self.nls[k])[:, None] * qk + np.arange(qk)[None, :]
                blocks = Sinv[idx[:, :, None], idx[:, None, :]]
            cv.append(np.einsum("ab,jbc,dc->jad", T, blocks, T))
        return {"b": b, "condvar": cv, "mu": self._rows(mu), "eta": self._rows(eta)}

    def rx_vcov(self, theta, beta):
        d = self._dd
        theta = np.asarray(theta, float)
        kept = _kept_at(self, theta, beta)
        if kept is not None:
            v, C, fac = kept
        else:
            _u, _eta, _mu, _e, v, C, fac = self.modes(d.linpred(beta), theta)
        A = self._A(theta)
        XtWX = (d.XT * v) @ d.XT.T
        AVX = np.stack([self._zt(A, v * d.XT[k]) for k in range(d.p)], axis=1)
        RX = XtWX - AVX.T @ self._solve(fac, C, AVX)
        return np.linalg.inv(RX)
