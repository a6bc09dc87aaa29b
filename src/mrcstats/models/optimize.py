"""The native optimizer's numerics: lme4's objective, its optimum, Hessian, checks (no result class).

lme4 (``optimizeGlmer``) minimises the Laplace deviance first over θ with β inside the
penalised IRLS (nAGQ = 0 stage), then over (θ, β) jointly, with PIRLS stopped at
``tolPwrss``. Here the conditional modes are always iterated to machine precision
and (θ, β) is found by Newton steps with the analytic gradient (:func:`newton_laplace`;
L-BFGS-B when those fail), so the optimum is lme4's optimum with ``tolPwrss`` tightened
until its logLik stops changing.

Standard errors: lme4's default ``vcov`` (``use.hessian = TRUE``) inverts the Hessian
H of the deviance in (θ, β) and takes the β block of 2 H⁻¹; H here is the central
difference of the analytic gradient (lme4: ``deriv12`` of the deviance). When H is
not positive definite, lme4's RX-based matrix is used with lme4's warning.
Convergence and singularity checks follow lme4's ``checkConv`` (max|scaled grad|
< 2e-3; θ < 1e-4 is a singular fit) with its wording.

Layer: deviance kernels -> this module -> confint/grid/lmm/native fit (it imports no result class).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from mrcstats._blas import blas_pinned
from mrcstats.errors import ModelError
from mrcstats.models.deviance import GeneralModel, MultiFactor, ResponseData, SingleFactor
from mrcstats.models.numdiff import forward_jacobian
from mrcstats.models.records import RanefTable, VarCorrRow, varcorr_to_frame

if TYPE_CHECKING:
    import pandas as pd

SINGULAR_TOL = 1e-4
GRAD_TOL = 2e-3
HESS_TOL = 1e-6



def glm_start(d: ResponseData, maxit: int = 6, max_rows: int = 200_000) -> np.ndarray:
    """β of the plain GLM of the family (a few IRLS steps with the canonical link, W = wV(μ),
    z = η + (y-μ)/V(μ), on at most ``max_rows`` evenly spaced rows), the starting value for the
    GLMM; only the optimizer's path depends on it."""
    fam = d.family
    p = d.p
    beta = np.zeros(p)
    if p == 0:
        return beta
    step = max(1, d.n // max_rows)
    if step > 1:
        XT, y, w = np.ascontiguousarray(d.XT[:, ::step]), d.y[::step].copy(), d.w[::step].copy()
    else:
        XT, y, w = d.XT, d.y, d.w
    eta = np.full(y.size, fam.linkfun(fam.start_mean(y, w)))
    for _ in range(maxit):
        mu = fam.mean(eta)
        v = np.maximum(w * fam.variance(mu), 1e-10)
        z = eta + (y - mu) / np.maximum(fam.variance(mu), 1e-10)
        XtWX = (XT * v) @ XT.T
        try:
            new = np.linalg.solve(XtWX, XT @ (v * z))
        except np.linalg.LinAlgError:
            break
        if np.max(np.abs(new - beta)) < 1e-8:
            beta = new
            break
        beta = new
        eta = beta @ XT
        if np.max(np.abs(beta)) > 30:
            break
    return np.clip(beta, -10, 10)


def _grad_columns(fun, x: np.ndarray, g0: np.ndarray, ncols: int, skip: np.ndarray | None = None,
                  rel: float = 1e-6) -> np.ndarray:
    """The first ``ncols`` columns of the Hessian by forward differences of the analytic gradient ``fun``
    (g0 = fun(x); one evaluation per column, step rel·max(|x_j|, 0.1): :func:`~mrcstats.models.numdiff.forward_jacobian`);
    a ``skip`` column is e_j."""
    held = np.zeros(ncols, dtype=bool) if skip is None else np.asarray(skip[:ncols], dtype=bool)
    cols = np.zeros((len(x), ncols))
    live = np.flatnonzero(~held)
    if live.size:
        cols[:, live] = forward_jacobian(fun, x, g0, rel, floor=0.1, cols=live)
    cols[np.flatnonzero(held), np.flatnonzero(held)] = 1.0
    return cols


def _hessian_from_grad(fun, x: np.ndarray, g0: np.ndarray | None = None, rel: float = 1e-6) -> np.ndarray:
    """Hessian from an analytic gradient: forward differences when the gradient at x is
    given (m evaluations, :func:`_grad_columns`), central otherwise; symmetrised."""
    m = len(x)
    if g0 is not None:
        H = _grad_columns(fun, x, g0, m, rel=rel)
        return (H + H.T) / 2
    H = np.empty((m, m))
    for k in range(m):
        h = rel * max(abs(x[k]), 0.1)
        xp = x.copy()
        xp[k] += h
        xm = x.copy()
        xm[k] -= h
        H[:, k] = (fun(xp) - fun(xm)) / (2 * h)
    return (H + H.T) / 2


def hessian_from_values(f, x: np.ndarray, delta: float = 1e-4) -> tuple[np.ndarray, np.ndarray]:
    """lme4's ``deriv12``: gradient and Hessian of f by central differences of values."""
    m = len(x)
    f0 = f(x)
    g = np.empty(m)
    H = np.empty((m, m))
    fp, fm = np.empty(m), np.empty(m)
    for i in range(m):
        e = np.zeros(m)
        e[i] = delta
        fp[i], fm[i] = f(x + e), f(x - e)
        g[i] = (fp[i] - fm[i]) / (2 * delta)
        H[i, i] = (fp[i] - 2 * f0 + fm[i]) / delta ** 2
    for i in range(m):
        for j in range(i):
            ei = np.zeros(m)
            ej = np.zeros(m)
            ei[i] = delta
            ej[j] = delta
            H[i, j] = H[j, i] = (f(x + ei + ej) - fp[i] - fp[j] + f0) / delta ** 2 \
                if False else (f(x + ei + ej) - f(x + ei - ej) - f(x - ei + ej) + f(x - ei - ej)) / (4 * delta ** 2)
    return g, H


def check_conv(grad: np.ndarray, H: np.ndarray, ntheta: int, singular: bool) -> tuple[bool, list[str]]:
    """lme4's ``checkConv``: messages and whether the fit counts as converged."""
    msgs: list[str] = []
    if singular:
        return True, ["boundary (singular) fit: see help('isSingular')"]
    converged = True
    try:
        R = np.linalg.cholesky(H).T
        scgrad = np.linalg.solve(R, grad)
        mg = np.minimum(np.abs(scgrad), np.abs(grad))
        if float(mg.max()) > GRAD_TOL:
            k = int(np.argmax(mg)) + 1
            msgs.append(f"Model failed to converge with max|grad| = {float(mg.max()):.6g} "
                        f"(tol = {GRAD_TOL:g}, component {k})")
            converged = False
    except np.linalg.LinAlgError:
        msgs.append("unable to evaluate scaled gradient")
        converged = False
    for Hs, kind in ((H[ntheta:, ntheta:], "fixed-effect "), (H, "")):
        if Hs.size == 0:
            continue
        ev = np.linalg.eigvalsh(Hs)
        neg = int(np.sum(ev < -HESS_TOL))
        if neg:
            msgs.append(f"Model failed to converge: degenerate {kind}Hessian with {neg} negative eigenvalues")
            converged = False
        elif np.sum(np.abs(ev) < HESS_TOL):
            msgs.append(f"{kind}Hessian is numerically singular: parameters are not uniquely determined".strip())
            converged = False
        else:
            if ev.max() * HESS_TOL > 1:
                msgs.append("Model is nearly unidentifiable: very large eigenvalue - Rescale variables?")
            elif ev.min() / ev.max() < HESS_TOL:
                msgs.append("Model is nearly unidentifiable: large eigenvalue ratio - Rescale variables?")
    # de-duplicate, keep order
    return converged, list(dict.fromkeys(msgs))


def vcov_from_hessian(H: np.ndarray, k: int, rx, msgs: list[str]) -> np.ndarray:
    """Var(β̂) = 2 H⁻¹ restricted to β (H: Hessian of the deviance in (θ, β), θ first, k of them), as lme4's
    ``vcov`` from the finite-difference Hessian; when that is not finite or not positive definite, lme4's
    message and ``rx()`` (the covariance from R_X)."""
    try:
        Hinv = np.linalg.inv(H)
        Vh = (Hinv + Hinv.T)[k:, k:]
        if not np.all(np.isfinite(Vh)) or np.linalg.eigvalsh(Vh).min() <= 0:
            raise np.linalg.LinAlgError
        return Vh
    except np.linalg.LinAlgError:
        msgs.append("variance-covariance matrix computed from finite-difference Hessian is\n"
                    "not positive definite or contains NA values: falling back to var-cov estimated from RX")
        return rx()


def rx_vcov_safe(model, theta, beta, msgs: list[str]) -> np.ndarray:
    """RX-based covariance; a pseudo-inverse with a message when RX is singular."""
    try:
        return model.rx_vcov(theta, beta)
    except np.linalg.LinAlgError:
        msgs.append("the fixed-effect information matrix is singular (aliased or separated terms); "
                    "standard errors use its pseudo-inverse and are not reliable")
        d = model.d
        mu = model.extras(theta, beta)["mu"]
        v = d.w * d.family.variance(mu)
        return np.linalg.pinv((d.XT * v) @ d.XT.T)


def scale_check(XT: np.ndarray) -> list[str]:
    """lme4's ``checkScaleX``: SDs of the non-0/1 columns differing by more than 1000-fold."""
    sds = []
    for row in XT:
        if np.all((row == 0) | (row == 1)):
            continue
        sds.append(float(row.std(ddof=1)))
    sds = [s for s in sds if s > 0]
    if len(sds) > 1 and max(sds) / min(sds) > 1000:
        return ["Some predictor variables are on very different scales: consider rescaling"]
    return []


# ----------------------------------------------------------------------------- native fit


def make_model(d: ResponseData, re) -> SingleFactor | MultiFactor | GeneralModel:
    """The deviance object for the random-effects terms ``re``.

    One general structure (:class:`GeneralModel`, any lme4 covariance terms); random
    intercepts have specialised kernels of it: one factor (diagonal L) and several
    (diagonal block + dense Schur complement)."""
    if all(r.is_scalar for r in re):
        if len(re) == 1:
            return SingleFactor(d, re[0].codes, re[0].nlevels)
        return MultiFactor(d, [r.codes for r in re], [r.nlevels for r in re])
    return GeneralModel(d, re)


def deviance_function(model):
    """(θ, β) -> (Laplace deviance, gradient) for any engine model (θ always an array)."""
    if isinstance(model, SingleFactor):
        return lambda th, beta, grad=True, keep=True: model.evaluate(float(th[0]), beta, grad=grad, keep=keep)
    return lambda th, beta, grad=True, keep=True: model.evaluate(np.asarray(th, float), beta, grad=grad, keep=keep)


def refit_optimum(model, lower: np.ndarray, x0: np.ndarray, ftol: float = 1e-12) -> tuple[np.ndarray, float, bool]:
    """Minimise the Laplace deviance over (θ, β) from ``x0`` (L-BFGS-B, analytic gradient);
    returns (x, deviance, converged). Used by the bootstrap's refits."""
    from scipy import optimize

    k = len(lower)
    f = deviance_function(model)
    bounds = [(0.0 if lo == 0 else None, None) for lo in lower] + [(None, None)] * (len(x0) - k)
    r = optimize.minimize(lambda z: f(z[:k], z[k:]), x0, jac=True, method="L-BFGS-B", bounds=bounds,
                          options={"maxiter": 2000, "ftol": ftol, "gtol": 1e-6, "maxcor": 20})
    return r.x.copy(), float(r.fun), bool(r.success)


def newton_laplace(model, x0: np.ndarray, lower: np.ndarray, th_arg, maxit: int = 60, tol: float = 1e-6):
    """Minimise the Laplace deviance by Newton steps on (θ, β) with a cheap Hessian (issue 28).

    The Hessian H of D(θ, β) = −2 log L is taken as: its θ columns (θθ and βθ blocks) by forward
    differences of the analytic gradient (k evaluations, k = number of θ, :func:`_grad_columns`) at the
    first iteration and after a step that needed backtracking, Broyden's secant update of those columns
    after the other steps (no evaluation); its ββ block as 2 R_Xᵀ R_X at every iteration, the curvature
    of the penalised deviance profiled over the modes (lme4's ``RX``, the inverse of ``rx_vcov``, from
    the factorisation the evaluation left; it leaves out only the β-dependence of log|L|², which is small).
    Steps are −H⁻¹∇D on the free parameters (θ on its bound 0 with ∂D/∂θ > 0 is held there), with
    negative or flat curvature taken by its size (|eigenvalue|) and θ then moving at most half its
    value, Armijo backtracking by quadratic interpolation (:func:`_backtrack`), and a θ the step would take
    below 0 going to a tenth of its value instead, the other parameters then taking their Newton step given
    it (:func:`_bound_step`). A full step of |Δx| < ``tol`` max(1, |x|) ends it; a θ within 1e-6 of 0 is then put on 0
    when that does not raise D (:func:`_snap_to_bound`). The caller's Newton polish with the full
    Hessian (needed for the SEs anyway) takes x the rest of the way.

    Compared with L-BFGS-B from lme4's start this needs about half the deviance evaluations (VerbAgg's
    shape: 26 instead of 54), and it does not stop on a boundary the optimum is not on
    (tests/models/test_fast_paths.py has a log where L-BFGS-B did and lme4 does not).

    Returns (x, D, ∇D, iterations), or None (the caller then runs L-BFGS-B from its start; the optimum is
    the objective's, only the path differs) when it did not converge in ``maxit`` iterations, met a
    non-finite value, had to cut a step below 1e-6, or took three large steps that no longer lowered D
    (separation: no finite optimum).
    """
    k = len(lower)
    x = np.asarray(x0, float).copy()
    x[:k] = np.maximum(x[:k], lower)

    def fg(z, keep=True):
        return model.evaluate(th_arg(z[:k]), z[k:], keep=keep)

    def gfun(z):
        return fg(z, keep=False)[1]

    D, g = fg(x)
    if not (np.isfinite(D) and np.all(np.isfinite(g))):
        return None
    m = len(x)
    bound = np.zeros(m, dtype=bool)
    bound[:k] = lower == 0
    cols, prev_held = None, None
    flat = 0
    for it in range(1, maxit + 1):
        # θ on its bound with ∂D/∂θ > 0 is held there; its column is not used (a difference across the
        # boundary of a singular fit is not a derivative)
        held = bound & (x <= 0) & (g > 0)
        if prev_held is not None and not np.array_equal(held, prev_held):
            cols = None
        prev_held = held
        H = np.empty((m, m))
        if cols is None:
            cols = _grad_columns(gfun, x, g, k, skip=held[:k])
        H[:, :k] = cols
        H[:k, :k] = (cols[:k] + cols[:k].T) / 2
        H[:k, k:] = cols[k:].T
        if m > k:
            try:
                H[k:, k:] = 2.0 * np.linalg.inv(model.rx_vcov(th_arg(x[:k]), x[k:]))
            except np.linalg.LinAlgError:
                return None
        if not np.all(np.isfinite(H)):
            return None
        free = ~held
        Hf, gf = H[np.ix_(free, free)], g[free]
        try:
            ev, V = np.linalg.eigh(Hf)
        except np.linalg.LinAlgError:
            return None
        # a negative or flat curvature (θ far from the optimum) is taken by its size: a descent step
        floor = 1e-8 * max(float(np.max(np.abs(ev))), 1e-300)
        modified = bool(np.any(ev < floor))
        ev = np.maximum(np.abs(ev), floor)
        s = np.zeros(m)
        s[free] = V @ ((V.T @ gf) / ev)
        if modified:
            # then θ moves by at most half its size (a quarter near 0): that step is no Newton step, and
            # the deviance is far from quadratic in θ where it is not convex
            lim = np.abs(s[:k]) / (0.5 * np.maximum(np.abs(x[:k]), 0.5))
            if lim.size and float(lim.max()) > 1:
                s /= float(lim.max())
        else:
            s = _bound_step(H, g, s, x, bound, free, k)
        slope = float(g @ s)
        alpha = 1.0
        for _ in range(30):
            xn = x - alpha * s
            # a θ the step would take below its bound 0 goes to a tenth of its value instead: it reaches a
            # boundary optimum geometrically (then _snap_to_bound) and never sits on a boundary that is a
            # saddle (∂D/∂θ = 0 there by symmetry, the deviance falling off it)
            out = bound[:k] & (xn[:k] < 0)
            xn[:k][out] = 0.1 * x[:k][out]
            Dn, gn = fg(xn)
            if np.isfinite(Dn) and Dn <= D - 1e-4 * alpha * max(slope, 0.0) + 1e-13 * abs(D):
                break
            alpha = _backtrack(alpha, D, float(Dn), slope)
        else:
            return None
        dx = float(np.max(np.abs(xn - x)))
        gn = np.asarray(gn, float)
        dth = (xn - x)[:k]
        if alpha < 1 or not BROYDEN or not np.any(dth):
            cols = None                         # fresh differences at the next point
        else:                                   # Broyden's update of the θ columns from this step's secant
            r = (gn - g) - H @ (xn - x)
            cols = cols + np.outer(r, dth) / float(dth @ dth)
        drop = D - float(Dn)
        x, D, g = xn, float(Dn), gn
        if alpha < 1e-6:
            return None         # stuck (a flat or separated direction): L-BFGS-B from the start takes over
        flat = flat + 1 if drop < 1e-10 * max(1.0, abs(D)) and dx >= 1e-2 * max(1.0, float(np.max(np.abs(x)))) else 0
        if flat >= 3:
            return None         # large steps that no longer lower D: no finite optimum (separation)
        if alpha == 1 and dx < tol * max(1.0, float(np.max(np.abs(x)))):
            return _snap_to_bound(fg, x, D, g, lower) + (it,)
    return None


def _bound_step(H: np.ndarray, g: np.ndarray, s: np.ndarray, x: np.ndarray, bound: np.ndarray,
                free: np.ndarray, k: int) -> np.ndarray:
    """A Newton step (x − s) that would take a θ on a bound 0 below it: that θ goes to a tenth of its value
    (s_j = 0.9 x_j) and the other free parameters take the Newton step of the quadratic model given it,
    s_r = H_rr⁻¹ (g_r − H_rc s_c) (the projected Newton step of Bertsekas, *SIAM J. Control Optim.* 20, 1982,
    on the face the cut θ approach); repeated while another θ then crosses. Clamping the crossing θ alone
    keeps the others' part of the full step, which was coupled to the θ's large move (boundary70k: a second
    θ went from 0.98 to 9.9; issue 41). Returns ``s`` unchanged when nothing crosses, or when the model
    given the cut is not positive definite or its step is no descent direction."""
    cut = np.zeros(len(x), dtype=bool)
    t = s.copy()
    for _ in range(k):
        new = np.zeros(len(x), dtype=bool)
        new[:k] = bound[:k] & free[:k] & ~cut[:k] & (x[:k] - t[:k] < 0)
        if not new.any():
            break
        cut |= new
        t[cut] = 0.9 * x[cut]
        rest = free & ~cut
        if not rest.any():
            break
        try:
            R = np.linalg.cholesky(H[np.ix_(rest, rest)])
        except np.linalg.LinAlgError:
            return s
        rhs = g[rest] - H[np.ix_(rest, cut)] @ t[cut]
        t[rest] = np.linalg.solve(R.T, np.linalg.solve(R, rhs))
    if not cut.any() or not np.all(np.isfinite(t)) or float(g @ t) <= 0:
        return s
    return t


def _backtrack(alpha: float, D: float, Dn: float, slope: float) -> float:
    """The next trial step length after step ``alpha`` failed Armijo's test: the minimiser of the quadratic
    through φ(0) = D, φ'(0) = −``slope`` and φ(alpha) = Dn (Nocedal & Wright, *Numerical Optimization*, 2nd ed.,
    eq. 3.57), kept within [alpha/10, alpha/2]; alpha/2 when Dn is not finite or the slope is not one of
    descent. Near a boundary (a small θ the Newton step multiplies) the deviance rises far above its quadratic
    model and halving alone needs several evaluations to come back (boundary70k: six; issue 41)."""
    if not (np.isfinite(Dn) and slope > 0):
        return alpha / 2
    curv = (Dn - D + slope * alpha) / alpha ** 2
    if not curv > 0:
        return alpha / 2
    return float(min(max(slope / (2 * curv), alpha / 10), alpha / 2))


def _snap_to_bound(fg, x: np.ndarray, D: float, g: np.ndarray, lower: np.ndarray):
    """θ within 1e-6 of its bound 0 is set to 0 when that does not raise the deviance by more than its
    rounding (1e-10 relative): near a singular optimum D is flat in θ (it depends on θ²), so θ is
    determined there only to about √ε; lme4's optimizers end on the bound itself."""
    k = len(lower)
    near = (lower == 0) & (x[:k] > 0) & (x[:k] < 1e-6)
    if not near.any():
        return x, D, g
    xs = x.copy()
    xs[:k][near] = 0.0
    Ds, gs = fg(xs)
    if np.isfinite(Ds) and Ds <= D + 1e-10 * max(1.0, abs(D)):
        return xs, float(Ds), np.asarray(gs, float)
    fg(x)                                   # the modes of x again (fg keeps those of its last point)
    return x, D, g


BROYDEN = True           # False: the θ columns by differences at every Newton iteration
NEWTON = True            # False: L-BFGS-B from the start (the path before issue 28's Newton phase)


def optimize_laplace(model, x0: np.ndarray, lower: np.ndarray, th_arg=None, scale: np.ndarray | None = None):
    """Minimise a model's Laplace deviance over (θ, β) from ``x0`` (lme4's ``nAGQ = 1`` objective).

    Newton steps (:func:`newton_laplace`; ``NEWTON = False`` or its failure: L-BFGS-B with the model's
    analytic gradient), then a Newton polish with the Hessian of that gradient (forward differences),
    which also gives the SEs. ``model`` is any deviance object with ``evaluate(θ, β, grad, keep) ->
    (D, ∇D)`` and ``rx_vcov(θ, β)`` (:mod:`mrcstats.models.deviance`, the crossed grid of
    :mod:`mrcstats.models.grid`). ``scale`` (L-BFGS-B only): typical step sizes of the parameters (e.g.
    their standard errors from a fit on a subsample): L-BFGS-B then works in x = x0 + scale·z, so that its
    first trial step is about one such unit instead of one unit of each parameter. Returns (x, deviance,
    gradient, Hessian, optinfo).
    """
    k = len(lower)
    p = len(x0) - k
    th_arg = th_arg or (lambda th: np.asarray(th, float))
    x0 = np.asarray(x0, float)
    nw = newton_laplace(model, x0, lower, th_arg) if NEWTON else None
    if nw is not None:
        x, fval, grad, nit = nw
        info = {"optimizer": "Newton+polish", "nit": nit}
    else:
        from scipy import optimize

        # x = c + s·z: the identity without ``scale``
        c, s, z0 = ((np.zeros(len(x0)), np.ones(len(x0)), x0) if scale is None
                    else (x0, np.asarray(scale, float), np.zeros(len(x0))))

        def fg(z):
            x = c + s * z
            D, g = model.evaluate(th_arg(x[:k]), x[k:])
            return D, g * s

        bounds = [((lo - c[i]) / s[i] if lo == 0 else None, None) for i, lo in enumerate(lower)] + [(None, None)] * p
        r = optimize.minimize(fg, z0, jac=True, method="L-BFGS-B", bounds=bounds,
                              options={"maxiter": 2000, "ftol": 1e-10, "gtol": 1e-5 * float(np.min(s)), "maxcor": 20})
        x, fval, grad = c + s * r.x, float(r.fun), np.asarray(r.jac, float) / s
        x[:k] = np.maximum(x[:k], lower)
        info = {"optimizer": "L-BFGS-B+Newton", "nit": int(r.nit), "lbfgs_message": str(r.message)}

    def gfun(z):
        return model.evaluate(th_arg(z[:k]), z[k:], keep=False)[1]

    # Newton polish with the Hessian of the analytic gradient (also used for the SEs);
    # the Hessian is recomputed when the polish moved the point noticeably
    H = _hessian_from_grad(gfun, x, grad)
    moved = 0.0
    for _ in range(6):
        try:
            step = np.linalg.solve(H, grad)
        except np.linalg.LinAlgError:
            break
        xn = x - step
        xn[:k] = np.maximum(xn[:k], lower)
        if np.max(np.abs(xn - x)) == 0:
            break
        Dn, gn = model.evaluate(th_arg(xn[:k]), xn[k:])
        if Dn <= fval + 1e-12 * abs(fval):
            moved = max(moved, float(np.max(np.abs(xn - x))))
            x, fval, grad = xn, Dn, gn
            if np.max(np.abs(step)) < 1e-9:
                break
        else:
            break
    if moved > 1e-4:
        H = _hessian_from_grad(gfun, x, grad)
    return x, fval, grad, H, info

_CTL: list = []


FAST_PATH = True          # False: lme4's start for crossed random intercepts on many rows (the path before issue 28)
START_ROWS = 50_000     # crossed random intercepts on more rows start from the fit on about this many
#: random slopes (GeneralModel) on more than SLOPE_MIN_ROWS rows start from the fit on about SLOPE_START_ROWS:
#: their deviance evaluations cost more, and Newton steps from lme4's start wander more (slope70k: 33 -> 21
#: evaluations on all rows, for a sub-fit of 24 on a fifth of them)
SLOPE_MIN_ROWS, SLOPE_START_ROWS = 50_000, 15_000


def subsample_start(d: ResponseData, re, model: MultiFactor | GeneralModel, x0: np.ndarray, lower: np.ndarray):
    """A start near the optimum for several random intercepts, or random slopes, on many rows: the fit (lme4's
    start, the same optimiser) on the rows of evenly spaced levels of the first term (the one with the most
    levels), about ``START_ROWS`` rows (``SLOPE_START_ROWS`` with slopes), with every level of the other
    terms; Newton steps to 1e-4 without polish or Hessian (``NEWTON = False``: the whole fit, whose standard
    errors become L-BFGS-B's step scale). Returns (x0, step scale or None, a note for ``optinfo``), or None
    (small data, or the sub-fit failed: lme4's start).

    The optimum does not depend on the start (the optimiser and its Newton polish converge to it); the
    number of deviance evaluations on all rows does. As :func:`mrcstats.models.grid._subgrid_start`."""
    if isinstance(model, GeneralModel):
        return _subsample_start_slopes(d, re, model, x0, lower)
    q1 = model.q1
    if not FAST_PATH or d.n <= 2 * START_ROWS or q1 < 200:
        return None
    keep, newcode, rows, sub_d = _first_term_rows(d, re, q1, START_ROWS)
    c1 = np.asarray(re[0].codes, dtype=np.intp)
    sub = MultiFactor(sub_d, [newcode[c1[rows]]] + [np.asarray(r.codes)[rows] for r in re[1:]],
                      [len(keep)] + [r.nlevels for r in re[1:]])
    k = len(lower)
    try:
        if NEWTON:      # a start needs no polish and no Hessian: Newton steps to 1e-4; the fit on all rows goes on
            nw = newton_laplace(sub, x0.copy(), lower, lambda th: np.asarray(th, float), tol=1e-4)
            if nw is None:
                return None
            x, scale = nw[0], None
        else:           # L-BFGS-B on all rows then steps in units of the subsample fit's standard errors
            x, _f, _g, H, _i = optimize_laplace(sub, x0.copy(), lower)
            se = np.sqrt(np.diag(np.linalg.inv(H)))
            scale = np.where(np.isfinite(se) & (se > 0), se, np.maximum(np.abs(x), 0.1))
    except (ModelError, np.linalg.LinAlgError):
        return None
    if not np.all(np.isfinite(x)):
        return None
    th = np.maximum(x[:k], 0.05)                 # away from the boundary, where u is undefined
    x = np.concatenate([th, x[k:]])
    # the modes: b = θu of the kept levels, 0 for the others
    u = np.zeros(model.q1 + model.q2)
    u[keep] = sub.u[:sub.q1] * (x[0] / th[0]) if x[0] > 0 else 0.0
    lr_sub, lr = sub._lam(x[:k])[1], model._lam(th)[1]
    u[model.q1:] = np.where(lr > 0, sub.u[sub.q1:] * lr_sub / np.where(lr > 0, lr, 1.0), 0.0)
    model.u, model._u_theta = u, th.copy()
    return x, scale, {"from": "subsample fit", "rows": int(rows.sum()), "levels": len(keep),
                      "x0": x.tolist(), "nfev": int(sub.nfev)}


def first_term_levels(codes: np.ndarray, n1: int, target: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Evenly spaced levels of a term with ``n1`` levels (the first, the one with the most), as many as make
    about ``target`` of the rows (``codes``, the term's level per row; at least 100 levels), and all their rows.
    Returns (kept levels, new code of each level (-1: left out), the rows kept as a mask)."""
    codes = np.asarray(codes, dtype=np.intp)
    keep = np.unique(np.linspace(0, n1 - 1, max(100, int(n1 * target / len(codes)))).round().astype(np.intp))
    newcode = np.full(n1, -1, dtype=np.intp)
    newcode[keep] = np.arange(len(keep))
    return keep, newcode, newcode[codes] >= 0


def _first_term_rows(d: ResponseData, re, n1: int, target: int):
    """The subsample of :func:`subsample_start`: evenly spaced levels of the first term (``re[0]``, the one
    with the most levels), as many as make about ``target`` rows (at least 100), and all their rows.
    Returns (kept levels, new code of each level (-1: left out), the rows kept, their ResponseData)."""
    keep, newcode, rows = first_term_levels(re[0].codes, n1, target)
    sub_d = ResponseData(d.XT.T[rows], d.y[rows], d.w[rows], None if d.offset is None else d.offset[rows], 0.0,
                         d.family)
    return keep, newcode, rows, sub_d


def _subsample_start_slopes(d: ResponseData, re, model: GeneralModel, x0: np.ndarray, lower: np.ndarray):
    """:func:`subsample_start` for terms with random slopes (:class:`GeneralModel`, whose terms are ``re`` in
    order): the sub-fit's θ and β, and its modes as PIRLS's start (u of the kept levels of the first term and
    of every level of the others, 0 elsewhere; at the sub-fit's θ, which PIRLS's start moves to keep
    b = T u)."""
    import dataclasses

    n1, q1 = model.n1, model.q1
    if not FAST_PATH or d.n <= SLOPE_MIN_ROWS or n1 < 200:
        return None
    keep, newcode, rows, sub_d = _first_term_rows(d, re, n1, SLOPE_START_ROWS)
    c1 = np.asarray(re[0].codes, dtype=np.intp)
    sub_re = [dataclasses.replace(re[0], codes=newcode[c1[rows]], levels=tuple(re[0].levels[i] for i in keep),
                                  Z=None if re[0].Z is None else re[0].Z[rows])]
    sub_re += [dataclasses.replace(r, codes=np.asarray(r.codes)[rows], Z=None if r.Z is None else r.Z[rows])
               for r in re[1:]]
    try:
        sub = GeneralModel(sub_d, sub_re)
        nw = newton_laplace(sub, x0.copy(), lower, lambda th: np.asarray(th, float), tol=1e-4)
    except (ModelError, np.linalg.LinAlgError):
        return None
    if nw is None or not np.all(np.isfinite(nw[0])):
        return None
    x = nw[0]
    u = np.zeros(model.nu)
    u[(keep[:, None] * q1 + np.arange(q1)).ravel()] = sub.u[:len(keep) * q1]
    u[n1 * q1:] = sub.u[len(keep) * q1:]
    model.u, model._u_theta = u, np.asarray(x[:len(lower)], float).copy()
    return x, None, {"from": "subsample fit", "rows": int(rows.sum()), "levels": len(keep),
                     "x0": x.tolist(), "nfev": int(sub.nfev)}


def blas_controller():
    """A cached threadpoolctl controller (scanning the loaded libraries takes ~20 ms); None when the command
    line pinned BLAS to one thread before numpy loaded (:mod:`mrcstats._blas`): nothing to limit."""
    if blas_pinned():
        return None
    if not _CTL:
        try:
            from threadpoolctl import ThreadpoolController

            _CTL.append(ThreadpoolController())
        except (ImportError, OSError, RuntimeError):  # pragma: no cover
            _CTL.append(None)
    return _CTL[0]

def ranef_tables(re, bs, cvs) -> dict[str, RanefTable]:
    """``ranef(m, condVar = TRUE)`` per grouping factor, as :class:`~mrcstats.models.records.RanefTable`: a
    random intercept alone gives columns ``mode``/``condvar``; otherwise one column per random-effect column
    (lme4's ``cnms``, terms of the same factor side by side) and ``condvar:<name>`` (the diagonal of
    ``postVar``)."""
    groups: dict[str, list] = {}
    for r_, b, cv in zip(re, bs, cvs):
        groups.setdefault(r_.name, []).append((r_, b, cv))
    out = {}
    for g, items in groups.items():
        r0 = items[0][0]
        if len(items) == 1 and r0.is_scalar:
            b, cv = items[0][1], items[0][2]
            out[g] = RanefTable(g, r0.levels, ("mode", "condvar"), (np.ravel(b), np.ravel(cv)))
            continue
        cols: dict[str, np.ndarray] = {}
        var: dict[str, np.ndarray] = {}
        for r_, b, cv in items:
            b = np.asarray(b).reshape(r_.nlevels, r_.q)
            cv = np.asarray(cv).reshape(r_.nlevels, r_.q, r_.q)
            for c, name in enumerate(r_.cnames):
                cols[name] = b[:, c]
                var[f"condvar:{name}"] = cv[:, c, c]
        both = {**cols, **var}
        out[g] = RanefTable(g, r0.levels, tuple(both), tuple(both.values()))
    return out


def ranef_frames(re, bs, cvs) -> dict[str, pd.DataFrame]:
    """:func:`ranef_tables` as pandas frames indexed by level (lmer's result keeps these)."""
    return {g: t.to_pandas() for g, t in ranef_tables(re, bs, cvs).items()}


def varcorr_rows(re, theta) -> tuple[VarCorrRow, ...]:
    """lme4's ``as.data.frame(VarCorr(m))`` as :class:`~mrcstats.models.records.VarCorrRow` records: per term
    the variances/SDs of its columns then the covariances/correlations (lower triangle, column by column);
    groups named as R (a factor appearing in several terms: ``g``, ``g.1``). Fields ``group, name, var2,
    variance, sd`` (for correlation rows ``variance`` is the covariance and ``sd`` the correlation, as
    ``vcov``/``sdcor``)."""
    theta = np.asarray(theta, float)
    rows = []
    seen: dict[str, int] = {}
    off = 0
    for r_ in re:
        th = theta[off:off + r_.ntheta]
        off += r_.ntheta
        n = seen.get(r_.name, 0)
        seen[r_.name] = n + 1
        grp = r_.name if n == 0 else f"{r_.name}.{n}"
        T = r_.factor(th)
        S = T @ T.T
        sd = np.sqrt(np.diag(S))
        for c, name in enumerate(r_.cnames):
            rows.append(VarCorrRow(grp, name, None, float(S[c, c]), float(sd[c])))
        for j in range(r_.q):
            for i in range(j + 1, r_.q):
                cor = S[i, j] / (sd[i] * sd[j]) if sd[i] > 0 and sd[j] > 0 else float("nan")
                rows.append(VarCorrRow(grp, r_.cnames[j], r_.cnames[i], float(S[i, j]), float(cor)))
    return tuple(rows)


def varcorr_frame(re, theta) -> pd.DataFrame:
    """:func:`varcorr_rows` as a pandas frame with columns ``group, name, var2, variance, sd``."""
    return varcorr_to_frame(varcorr_rows(re, theta))
