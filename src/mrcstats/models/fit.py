"""Fitting: the public :func:`glmer` and the native optimizer (lme4's objective, converged).

lme4 (``optimizeGlmer``) minimises the Laplace deviance first over θ with β inside the
penalised IRLS (nAGQ = 0 stage), then over (θ, β) jointly, with PIRLS stopped at
``tolPwrss``. Here the conditional modes are always iterated to machine precision
and (θ, β) is found by L-BFGS-B with the analytic gradient, so the optimum is lme4's
optimum with ``tolPwrss`` tightened until its logLik stops changing.

Standard errors: lme4's default ``vcov`` (``use.hessian = TRUE``) inverts the Hessian
H of the deviance in (θ, β) and takes the β block of 2 H⁻¹; H here is the central
difference of the analytic gradient (lme4: ``deriv12`` of the deviance). When H is
not positive definite, lme4's RX-based matrix is used with lme4's warning.
Convergence and singularity checks follow lme4's ``checkConv`` (max|scaled grad|
< 2e-3; θ < 1e-4 is a singular fit) with its wording.
"""
from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from scipy import optimize

from mrcstats.errors import InputError, ModelError
from mrcstats.models.design import Design, build_design
from mrcstats.models.deviance import GeneralModel, MultiFactor, ResponseData, SingleFactor
from mrcstats.models.family import Family, get_family
from mrcstats.models.formula import ModelSpec
from mrcstats.models.results import GlmerResult

SINGULAR_TOL = 1e-4
GRAD_TOL = 2e-3
HESS_TOL = 1e-6


def glmer(formula: str | ModelSpec, data: pd.DataFrame, family: str | Family = "binomial",
          contrasts: Mapping[str, str] | None = None, nagq: int = 1, engine: str = "native",
          weights: Any = None, levels: Mapping[str, Any] | None = None,
          lme4_defaults: bool = False) -> GlmerResult:
    """Fit a GLMM as lme4's ``glmer(formula, data, family = family, nAGQ = nagq)``.

    Parameters
    ----------
    formula : R/lme4 formula text (``"correct ~ scaled_tok * LLM + (1 | passage)"``) or a parsed spec.
    data : pandas DataFrame (a canonical log or any table).
    family : ``"binomial"`` (logit link; 0/1, proportions with weights, ``cbind(k, n - k)``) or
        ``"poisson"`` (log link; non-negative integer counts), as R spells them, or a
        :class:`~mrcstats.models.family.Family`.
    contrasts : ``{"LLM": "sum"}`` for ``contr.sum``; treatment contrasts otherwise.
    nagq : 1 = Laplace; 0 = lme4's nAGQ = 0; 2..25 = adaptive Gauss-Hermite (one grouping factor).
    engine : ``"native"`` (this module) or ``"lme4"`` (R through rpy2, same result class).
    weights : prior weights, a column name or an array (R's ``weights=``).
    levels : ``{"LLM": ["gpt4", ...]}`` level orders (default: sorted by code point).
    lme4_defaults : lme4 engine only: keep lme4's default ``tolPwrss`` (to reproduce published numbers).

    Returns
    -------
    GlmerResult
        ``fit_seconds`` is the wall time of this whole call from the data frame (model frame,
        encoding of text columns, fit, standard errors); text columns are encoded once into
        categoricals kept in ``frame``, so refits (drop1, anova, confint) skip that work.

    References
    ----------
    Bates, Mächler, Bolker & Walker (2015), J. Stat. Softw. 67(1): eq. (30)-(31) (the
    Laplace deviance), sec. 5.3 (PIRLS); lme4 1.1-31 ``glmer``, ``vcov.merMod``, ``checkConv``.
    """
    t0 = time.perf_counter()        # fit_seconds: the whole call, from the data frame to the result
    if not isinstance(formula, (str, ModelSpec)):
        raise InputError(f"glmer: formula must be R formula text such as 'correct ~ x + (1 | cluster)', got "
                         f"{type(formula).__name__}")
    fam = get_family(family)
    if fam.response == "continuous":          # lme4: glmer(family = gaussian) is lmer()
        from mrcstats.models.lmm import lmer

        if engine != "native" or nagq != 1:
            raise InputError("family 'gaussian' is a linear mixed model (lmer): the native engine, no nagq")
        return lmer(formula, data, contrasts=contrasts, levels=levels, weights=weights)  # type: ignore[return-value]
    if engine in ("duckdb", "dask") or type(data).__name__ in ("LogDataset", "DataFrame") and \
            not isinstance(data, pd.DataFrame):
        from mrcstats.models.outofcore import glmer_outofcore  # datasets larger than memory, Dask (issue 19)

        if fam.name != "binomial":
            raise InputError(f"family {fam.name!r}: the out-of-core path (datasets, engine duckdb/dask) fits "
                             "binomial models only; read the rows into a data frame for other families")

        return glmer_outofcore(formula, data, engine=None if engine == "native" else engine,
                               contrasts=contrasts, levels=levels, nagq=nagq)
    if not isinstance(data, pd.DataFrame):
        raise InputError(f"glmer: data must be a pandas DataFrame (e.g. mrcstats.read_log(...) or "
                         f"mrcstats.io.read_data(...)), got {type(data).__name__}")
    if fam.name == "binomial":
        from mrcstats.io.schema import require_binary

        require_binary(data, "glmer (binomial)")    # a graded log has no 0/1 response until thresholded
    try:
        nagq = int(nagq)
    except (TypeError, ValueError):
        raise InputError(f"nagq must be a whole number 0..25, got {nagq!r}") from None
    if not 0 <= nagq <= 25:
        raise InputError(f"nagq must be between 0 and 25, got {nagq}")
    if engine == "lme4" and not fam.canonical:
        raise InputError(f"family {fam.name!r}: lme4 has no such family (glmmTMB has); use engine='native'")
    if engine == "lme4":
        from mrcstats.models.r_engine import fit_lme4

        res = fit_lme4(formula, data, contrasts=contrasts, nagq=nagq, weights=weights, levels=levels,
                       lme4_defaults=lme4_defaults, family=fam)
        import dataclasses

        opt = dict(res.optinfo)
        opt["r_glmer_seconds"] = res.fit_seconds     # R's glmer() call alone
        return dataclasses.replace(res, fit_seconds=time.perf_counter() - t0, optinfo=opt)
    if engine != "native":
        raise InputError(f"engine {engine!r}: use 'native' or 'lme4'")
    design = build_design(formula, data, contrasts=contrasts, levels=levels, weights=weights, family=fam)
    if fam.loglik_rows is not None:         # no canonical kernel: the Laplace fit of the row log-likelihood
        from mrcstats.models.laplace import fit_laplace

        if nagq != 1:
            raise InputError(f"family {fam.name!r} is fitted by the Laplace approximation; use nagq=1")
        return fit_laplace(design, t0=t0, fit_options={"contrasts": dict(contrasts or {}),
                                                        "levels": dict(levels or {}), "family": fam.name})
    res = fit_design(design, nagq=nagq, t0=t0,
                     fit_options={"contrasts": dict(contrasts or {}), "levels": dict(levels or {}),
                                  "weights": weights if isinstance(weights, str) else None, "nagq": nagq,
                                  "family": fam.name})
    return res


# ----------------------------------------------------------------------------- helpers


def _glm_start(d: ResponseData, maxit: int = 6, max_rows: int = 200_000) -> np.ndarray:
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
        v = np.maximum(fam.wvariance(mu, w), 1e-10)
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


def _hessian_from_grad(fun, x: np.ndarray, g0: np.ndarray | None = None, rel: float = 1e-6) -> np.ndarray:
    """Hessian from an analytic gradient: forward differences when the gradient at x is
    given (m evaluations), central otherwise; symmetrised."""
    m = len(x)
    H = np.empty((m, m))
    for k in range(m):
        h = rel * max(abs(x[k]), 0.1)
        xp = x.copy()
        xp[k] += h
        if g0 is not None:
            H[:, k] = (fun(xp) - g0) / h
        else:
            xm = x.copy()
            xm[k] -= h
            H[:, k] = (fun(xp) - fun(xm)) / (2 * h)
    return (H + H.T) / 2


def _hessian_from_values(f, x: np.ndarray, delta: float = 1e-4) -> tuple[np.ndarray, np.ndarray]:
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


def _check_conv(grad: np.ndarray, H: np.ndarray, ntheta: int, singular: bool) -> tuple[bool, list[str]]:
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


def _rx_vcov_safe(model, theta, beta, msgs: list[str]) -> np.ndarray:
    """RX-based covariance; a pseudo-inverse with a message when RX is singular."""
    try:
        return model.rx_vcov(theta, beta)
    except np.linalg.LinAlgError:
        msgs.append("the fixed-effect information matrix is singular (aliased or separated terms); "
                    "standard errors use its pseudo-inverse and are not reliable")
        d = model.d
        mu = model.extras(theta, beta)["mu"]
        v = d.family.wvariance(mu, d.w)
        return np.linalg.pinv((d.XT * v) @ d.XT.T)


def _scale_check(XT: np.ndarray) -> list[str]:
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
    k = len(lower)
    f = deviance_function(model)
    bounds = [(0.0 if lo == 0 else None, None) for lo in lower] + [(None, None)] * (len(x0) - k)
    r = optimize.minimize(lambda z: f(z[:k], z[k:]), x0, jac=True, method="L-BFGS-B", bounds=bounds,
                          options={"maxiter": 2000, "ftol": ftol, "gtol": 1e-6, "maxcor": 20})
    return r.x.copy(), float(r.fun), bool(r.success)


def optimize_laplace(model, x0: np.ndarray, lower: np.ndarray, th_arg=None, scale: np.ndarray | None = None):
    """Minimise a model's Laplace deviance over (θ, β) from ``x0`` (lme4's ``nAGQ = 1`` objective).

    L-BFGS-B with the model's analytic gradient, then a Newton polish with the Hessian of that
    gradient (forward differences), which also gives the SEs. ``model`` is any deviance object with
    ``evaluate(θ, β, grad, keep) -> (D, ∇D)`` (:mod:`mrcstats.models.deviance`, the crossed grid of
    :mod:`mrcstats.models.grid`). ``scale``: typical step sizes of the parameters (e.g. their standard
    errors from a fit on a subsample): L-BFGS-B then works in x = x0 + scale·z, so that its first trial
    step is about one such unit instead of one unit of each parameter. Returns (x, deviance, gradient,
    Hessian, optinfo).
    """
    k = len(lower)
    p = len(x0) - k
    th_arg = th_arg or (lambda th: np.asarray(th, float))
    x0 = np.asarray(x0, float)
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
    return x, fval, grad, H, {"optimizer": "L-BFGS-B+Newton", "nit": int(r.nit), "lbfgs_message": str(r.message)}


FAST_PATH = True          # False: lme4's start for crossed random intercepts on many rows (the path before issue 28)
START_ROWS = 50_000     # crossed random intercepts on more rows start from the fit on about this many


def _subsample_start(d: ResponseData, re, model: MultiFactor, x0: np.ndarray, lower: np.ndarray):
    """A start near the optimum for several random intercepts on many rows: the fit (lme4's start, the same
    optimiser) on the rows of evenly spaced levels of the first term (the one with the most levels), about
    ``START_ROWS`` rows, with every level of the other terms. Returns (x0, step scale = that fit's
    standard errors, a note for ``optinfo``), or None (small data, or the sub-fit failed: lme4's start).

    The optimum does not depend on the start (the optimiser and its Newton polish converge to it); the
    number of deviance evaluations on all rows does. As :func:`mrcstats.models.grid._subgrid_start`."""
    q1 = model.q1
    if d.n <= 2 * START_ROWS or q1 < 200:
        return None
    nkeep = max(100, int(q1 * START_ROWS / d.n))
    keep = np.unique(np.linspace(0, q1 - 1, nkeep).round().astype(np.intp))
    newcode = np.full(q1, -1, dtype=np.intp)
    newcode[keep] = np.arange(len(keep))
    c1 = np.asarray(re[0].codes, dtype=np.intp)
    rows = newcode[c1] >= 0
    sub_d = ResponseData(d.XT.T[rows], d.y[rows], d.w[rows], None if d.offset is None else d.offset[rows], 0.0,
                         d.family)
    sub = MultiFactor(sub_d, [newcode[c1[rows]]] + [np.asarray(r.codes)[rows] for r in re[1:]],
                      [len(keep)] + [r.nlevels for r in re[1:]])
    k = len(lower)
    try:
        x, _f, _g, H, _i = optimize_laplace(sub, x0.copy(), lower)
        se = np.sqrt(np.diag(np.linalg.inv(H)))
    except (ModelError, np.linalg.LinAlgError):
        return None
    if not np.all(np.isfinite(x)):
        return None
    scale = np.where(np.isfinite(se) & (se > 0), se, np.maximum(np.abs(x), 0.1))
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


def fit_design(design: Design, nagq: int = 1, t0: float | None = None,
               fit_options: Mapping[str, Any] | None = None) -> GlmerResult:
    """Fit a built :class:`Design` with the native engine; returns a :class:`GlmerResult`.

    BLAS runs single-threaded during the fit: the matrices are small or matrix-vector
    products, and threaded OpenBLAS is many times slower on a loaded machine.
    """
    ctl = _blas_controller()
    if ctl is None:  # pragma: no cover
        return _fit_design(design, nagq, t0, fit_options)
    with ctl.limit(limits=1, user_api="blas"):
        return _fit_design(design, nagq, t0, fit_options)


_CTL: list = []


def _blas_controller():
    """A cached threadpoolctl controller (scanning the loaded libraries takes ~20 ms)."""
    if not _CTL:
        try:
            from threadpoolctl import ThreadpoolController

            _CTL.append(ThreadpoolController())
        except (ImportError, OSError, RuntimeError):  # pragma: no cover
            _CTL.append(None)
    return _CTL[0]


def _fit_design(design: Design, nagq: int, t0: float | None,
                fit_options: Mapping[str, Any] | None) -> GlmerResult:
    t0 = time.perf_counter() if t0 is None else t0
    y, w = design.y, design.weights
    d = ResponseData.from_design(design)
    fam = d.family
    re = design.re
    messages = list(design.messages) + _scale_check(d.XT)
    scalar = all(r.is_scalar for r in re)
    if nagq > 1 and (len(re) != 1 or not scalar):
        have = ", ".join("(" + " + ".join(r.cnames) + " | " + r.name + ")" for r in re)
        raise ModelError(f"nAGQ = {nagq} needs a single scalar random-effects term such as (1 | g) (the model has "
                         f"{have}); use nagq=1 (Laplace), as lme4 requires")
    if nagq == 0 and (len(re) != 1 or not scalar):
        raise ModelError("nAGQ = 0 is implemented natively for one random intercept (1 | g); "
                         "use nagq=1 or engine='lme4'")
    model = make_model(d, re)
    lower = np.concatenate([r.lower for r in re])
    k = len(lower)
    p = d.p
    ybar = float(d.wy.sum() / d.w.sum()) if d.w.sum() > 0 else float("nan")
    why = fam.check_mean(ybar, design.nobs)
    if why:
        raise ModelError(why)
    beta0 = _glm_start(d)
    theta0 = np.concatenate([r.start for r in re])       # lme4's start

    def th_arg(th):
        return float(th[0]) if isinstance(model, SingleFactor) else np.asarray(th, float)

    optinfo: dict[str, Any] = {}
    if nagq == 0:
        if k != 1:
            raise ModelError("nAGQ = 0 is implemented natively for one grouping factor; use engine='lme4'")
        sf: SingleFactor = model  # type: ignore[assignment]
        state = {"beta": beta0}

        def f0(t):
            D, b = sf.nagq0(abs(float(t)), state["beta"])
            state["beta"] = b
            return D
        r = optimize.minimize_scalar(f0, bounds=(0.0, max(10.0, 5 * theta0[0])), method="bounded",
                                     options={"xatol": 1e-9})
        theta = np.array([abs(float(r.x))])
        fval, beta = sf.nagq0(theta[0], state["beta"])
        vcov = _rx_vcov_safe(sf, theta[0], beta, messages)
        H = None
        grad = np.zeros(1)
        optinfo.update(optimizer="brent", nfev=sf.nfev, fval=fval)
    else:
        x0, scale = np.concatenate([theta0, beta0]), None
        start = _subsample_start(d, re, model, x0, lower) if FAST_PATH and isinstance(model, MultiFactor) else None
        if start is not None:
            x0, scale, optinfo["start"] = start
        x, fval, grad, H, info = optimize_laplace(model, x0, lower, th_arg, scale=scale)
        optinfo.update(info)
        if nagq > 1:
            sf = model  # type: ignore[assignment]
            bounds = [(0.0 if lo == 0 else None, None) for lo in lower] + [(None, None)] * p

            def fa(z):
                return sf.agq(abs(float(z[0])), z[1:], nagq)

            def fa_grad(z):
                h = 1e-6
                gg = np.empty(len(z))
                for i in range(len(z)):
                    e = np.zeros(len(z))
                    e[i] = h * max(1.0, abs(z[i]))
                    gg[i] = (fa(z + e) - fa(z - e)) / (2 * e[i])
                return gg
            ra = optimize.minimize(lambda z: (fa(z), fa_grad(z)), x, jac=True, method="L-BFGS-B",
                                   bounds=bounds, options={"maxiter": 500, "ftol": 1e-15, "gtol": 1e-7})
            x = ra.x.copy()
            grad, H = _hessian_from_values(fa, x)
            fval = fa(x)
            optinfo.update(optimizer="L-BFGS-B (AGQ)", agq_nit=int(ra.nit))
        theta, beta = x[:k], x[k:]
        optinfo.update(nfev=model.nfev, fval=fval, grad=grad.tolist(), hessian=H.tolist(), par=x.tolist())
        vcov = None

    singular = bool(np.any(theta[lower == 0] < SINGULAR_TOL))
    if nagq == 0:
        converged, cmsgs = True, (["boundary (singular) fit: see help('isSingular')"] if singular else [])
    else:
        converged, cmsgs = _check_conv(np.asarray(grad), H, k, singular)
        vcov = vcov_from_hessian(H, k, lambda: _rx_vcov_safe(model, th_arg(theta), beta, cmsgs), cmsgs)
    messages += cmsgs

    ex = model.extras(th_arg(theta), beta)
    mu, eta = ex["mu"], ex["eta"]
    boundary = fam.boundary_message(mu)
    if boundary:
        messages.append(boundary)
    f = fam.cumulant(eta)
    devres_sum = float(np.sum(2 * d.w * f - 2 * d.wy * eta)) + d.ent
    with np.errstate(divide="ignore", invalid="ignore"):
        pearson = (y - mu) * np.sqrt(w) / np.sqrt(fam.variance(mu))
    pearson = np.where(np.isfinite(pearson), pearson, 0.0)
    if nagq > 1:
        loglik = -0.5 * fval
    else:
        loglik = -0.5 * fval
    ranef = _ranef_frames(re, ex["b"], ex["condvar"])
    fit_seconds = time.perf_counter() - t0
    return GlmerResult.from_estimates(
        info=design.info, beta=beta, vcov=vcov, theta=theta, group_names=[r_.name for r_ in re],
        theta_names=[n for r_ in re for n in r_.theta_names], varcorr=varcorr_frame(re, theta),
        ngroups=design.ngroups, ranef=ranef, loglik=loglik, deviance=devres_sum, pearson_resid=pearson,
        nobs=design.nobs, converged=converged, messages=messages, engine="native", nagq=nagq,
        fit_seconds=fit_seconds, singular=singular, optinfo=optinfo, fit_options=fit_options or {},
        frame=design.frame, design=design, family=fam)


def _ranef_frames(re, bs, cvs) -> dict[str, pd.DataFrame]:
    """``ranef(m, condVar = TRUE)`` per grouping factor: a random intercept alone gives
    columns ``mode``/``condvar``; otherwise one column per random-effect column (lme4's
    ``cnms``, terms of the same factor side by side) and ``condvar:<name>`` (the diagonal
    of ``postVar``)."""
    groups: dict[str, list] = {}
    for r_, b, cv in zip(re, bs, cvs):
        groups.setdefault(r_.name, []).append((r_, b, cv))
    out = {}
    for g, items in groups.items():
        r0 = items[0][0]
        idx = pd.Index(r0.levels, name=g, dtype=object)
        if len(items) == 1 and r0.is_scalar:
            b, cv = items[0][1], items[0][2]
            out[g] = pd.DataFrame({"mode": np.ravel(b), "condvar": np.ravel(cv)}, index=idx)
            continue
        cols: dict[str, np.ndarray] = {}
        var: dict[str, np.ndarray] = {}
        for r_, b, cv in items:
            b = np.asarray(b).reshape(r_.nlevels, r_.q)
            cv = np.asarray(cv).reshape(r_.nlevels, r_.q, r_.q)
            for c, name in enumerate(r_.cnames):
                cols[name] = b[:, c]
                var[f"condvar:{name}"] = cv[:, c, c]
        out[g] = pd.DataFrame({**cols, **var}, index=idx)
    return out


def varcorr_frame(re, theta) -> pd.DataFrame:
    """lme4's ``as.data.frame(VarCorr(m))``: per term the variances/SDs of its columns then
    the covariances/correlations (lower triangle, column by column); groups named as R
    (a factor appearing in several terms: ``g``, ``g.1``). Columns ``group, name, var2,
    variance, sd`` (for correlation rows ``variance`` is the covariance and ``sd`` the
    correlation, as ``vcov``/``sdcor``)."""
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
            rows.append({"group": grp, "name": name, "var2": None, "variance": float(S[c, c]), "sd": float(sd[c])})
        for j in range(r_.q):
            for i in range(j + 1, r_.q):
                cor = S[i, j] / (sd[i] * sd[j]) if sd[i] > 0 and sd[j] > 0 else float("nan")
                rows.append({"group": grp, "name": r_.cnames[j], "var2": r_.cnames[i], "variance": float(S[i, j]),
                             "sd": float(cor)})
    return pd.DataFrame(rows, columns=["group", "name", "var2", "variance", "sd"])
