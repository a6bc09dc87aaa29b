"""The in-memory fit: rows of a data frame -> :class:`GlmerResult` (:func:`fit_rows`, by the native
kernels or by lme4 through :mod:`.r_engine`; :func:`fit_design`: a built :class:`~mrcstats.models.design.Design`).

The optimizer and its checks are :mod:`mrcstats.models.optimize` (lme4 1.1-31 ``optimizeGlmer``,
``vcov.merMod``, ``checkConv``); this module only assembles the result.
"""
from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from mrcstats.errors import InputError, ModelError
from mrcstats.io.columns import Columns, is_columns
from mrcstats.models.design import Design, build_design
from mrcstats.models.deviance import GeneralModel, MultiFactor, ResponseData, SingleFactor
from mrcstats.models.family_table import require, supports
from mrcstats.models.formula import ModelSpec
from mrcstats.models.laplace import LaplaceModel, laplace_optimum
from mrcstats.models.optimize import (
    SINGULAR_TOL,
    blas_controller,
    check_conv,
    glm_start,
    hessian_from_values,
    make_model,
    optimize_laplace,
    ranef_tables,
    rx_vcov_safe,
    scale_check,
    subsample_start,
    varcorr_rows,
    vcov_from_hessian,
)
from mrcstats.models.results import GlmerResult

if TYPE_CHECKING:
    import pandas as pd


def fit_design(design: Design, nagq: int = 1, t0: float | None = None,
               fit_options: Mapping[str, Any] | None = None) -> GlmerResult:
    """Fit a built :class:`Design` with the native engine; returns a :class:`GlmerResult`.

    BLAS runs single-threaded during the fit: the matrices are small or matrix-vector
    products, and threaded OpenBLAS is many times slower on a loaded machine.
    """
    ctl = blas_controller()
    if ctl is None:  # pragma: no cover
        return _fit_design(design, nagq, t0, fit_options)
    with ctl.limit(limits=1, user_api="blas"):
        return _fit_design(design, nagq, t0, fit_options)


def _fit_design(design: Design, nagq: int, t0: float | None,
                fit_options: Mapping[str, Any] | None) -> GlmerResult:
    t0 = time.perf_counter() if t0 is None else t0
    y, w = design.y, design.weights
    d = ResponseData.from_design(design)
    fam = d.family
    re = design.re
    messages = list(design.messages) + scale_check(d.XT)
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
    beta0 = glm_start(d)
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
        # nAGQ = 0 and AGQ only: the Laplace fit imports no scipy (issue 28)
        from scipy import optimize

        r = optimize.minimize_scalar(f0, bounds=(0.0, max(10.0, 5 * theta0[0])), method="bounded",
                                     options={"xatol": 1e-9})
        theta = np.array([abs(float(r.x))])
        fval, beta = sf.nagq0(theta[0], state["beta"])
        vcov = rx_vcov_safe(sf, theta[0], beta, messages)
        vcov_method, vcov_other = "RX", None     # nAGQ = 0 has no Hessian in (θ, β)
        H = None
        grad = np.zeros(1)
        optinfo.update(optimizer="brent", nfev=sf.nfev, fval=fval)
    else:
        x0, scale = np.concatenate([theta0, beta0]), None
        start = subsample_start(d, re, model, x0, lower) if isinstance(model, (MultiFactor, GeneralModel)) \
            else None
        if start is not None:                 # crossed random intercepts or slopes on many rows (issue 28)
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
            from scipy import optimize

            ra = optimize.minimize(lambda z: (fa(z), fa_grad(z)), x, jac=True, method="L-BFGS-B",
                                   bounds=bounds, options={"maxiter": 500, "ftol": 1e-15, "gtol": 1e-7})
            x = ra.x.copy()
            grad, H = hessian_from_values(fa, x)
            fval = fa(x)
            optinfo.update(optimizer="L-BFGS-B (AGQ)", agq_nit=int(ra.nit))
        theta, beta = x[:k], x[k:]
        optinfo.update(nfev=model.nfev, fval=fval, grad=grad.tolist(), hessian=H.tolist(), par=x.tolist())
        vcov = None

    singular = bool(np.any(theta[lower == 0] < SINGULAR_TOL))
    if nagq == 0:
        converged, cmsgs = True, (["boundary (singular) fit: see help('isSingular')"] if singular else [])
    else:
        converged, cmsgs = check_conv(np.asarray(grad), H, k, singular)
        n_before = len(cmsgs)
        vcov = vcov_from_hessian(H, k, lambda: rx_vcov_safe(model, th_arg(theta), beta, cmsgs), cmsgs)
        if any("falling back to var-cov estimated from RX" in m for m in cmsgs[n_before:]):
            vcov_method, vcov_other = "RX", None
        else:       # lme4's vcov(m, use.hessian = TRUE); the RX one (use.hessian = FALSE) kept beside it
            vcov_method = "hessian"
            try:
                vcov_other = model.rx_vcov(th_arg(theta), beta)
            except (np.linalg.LinAlgError, AttributeError):
                vcov_other = None
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
    loglik = -0.5 * fval        # the Laplace or AGQ deviance alike
    ranef = ranef_tables(re, ex["b"], ex["condvar"])
    fit_seconds = time.perf_counter() - t0
    return GlmerResult.from_estimates(
        info=design.info, beta=beta, vcov=vcov, theta=theta, group_names=[r_.name for r_ in re],
        theta_names=[n for r_ in re for n in r_.theta_names], varcorr=varcorr_rows(re, theta),
        ngroups=design.ngroups, ranef=ranef, loglik=loglik, deviance=devres_sum, pearson_resid=pearson,
        nobs=design.nobs, converged=converged, messages=messages, engine="native", nagq=nagq,
        fit_seconds=fit_seconds, singular=singular, optinfo=optinfo, fit_options=fit_options or {},
        frame=design.frame, design=design, family=fam, vcov_method=vcov_method, vcov_other=vcov_other)


def _graded(data: Columns) -> bool:
    """A row with a score and no correctness (:func:`mrcstats.io.schema.graded_rows`' rule, on Columns)."""
    if "score" not in data or "correct" not in data:
        return False
    return bool(np.any(~data["score"].missing() & data["correct"].missing()))


def require_binary_response(fam: Any, data: pd.DataFrame | Columns, who: str) -> None:
    """The models' one graded-log check: a family fitting a 0/1 response (``fit.binary``) refuses rows with a
    ``score`` and no ``correct`` (a graded log has no 0/1 response until thresholded;
    :func:`mrcstats.io.schema.require_binary` words the message, which names ``who`` asked and the family ``fam``
    asked, e.g. ``glmer (family binomial, logit link)``). :func:`mrcstats.models.fit.glmer` calls it
    before invalid answers are handled (a graded row is not an invalid answer), :func:`fit_rows` for every
    other caller."""
    if not supports(fam, "fit.binary"):
        return
    if is_columns(data):
        if not _graded(data):
            return
        data = data.to_pandas()     # the message reads a pandas frame
    from mrcstats.io.schema import require_binary

    require_binary(data, f"{who} (family {fam.name}, {fam.link} link)")


def fit_rows(spec: ModelSpec, data: pd.DataFrame | Columns, *, contrasts: Mapping[str, str] | None = None,
             nagq: int = 1, engine: str = "native", weights: Any = None, levels: Mapping[str, Any] | None = None,
             lme4_defaults: bool = False, t0: float | None = None, who: str = "glmer") -> GlmerResult:
    """The fit of a parsed ``spec`` (with its family, ``spec.family``) on the rows of a data frame, by ``engine``
    (native or lme4); ``who`` (the function or command that asked) starts its messages about the data."""

    t0 = time.perf_counter() if t0 is None else t0
    fam = spec.require_family()
    if is_columns(data) and engine == "lme4":
        data = data.to_pandas()     # R's data.frame
    require_binary_response(fam, data, who)
    try:
        nagq = int(nagq)
    except (TypeError, ValueError):
        raise InputError(f"nagq must be a whole number 0..25, got {nagq!r}") from None
    if not 0 <= nagq <= 25:
        raise InputError(f"nagq must be between 0 and 25, got {nagq}")
    if engine == "lme4":
        require(fam, "fit.lme4")
        from mrcstats.models.r_engine import fit_lme4  # rpy2 and R only when asked for (start-up, issue 28)

        res = fit_lme4(spec, data, contrasts=contrasts, nagq=nagq, weights=weights, levels=levels,
                       lme4_defaults=lme4_defaults)
        opt = dict(res.optinfo)
        opt["r_glmer_seconds"] = res.fit_seconds     # R's glmer() call alone
        return dataclasses.replace(res, fit_seconds=time.perf_counter() - t0, optinfo=opt)
    design = build_design(spec, data, contrasts=contrasts, levels=levels, weights=weights)
    if fam.loglik_rows is not None:         # no canonical kernel: the Laplace fit of the row log-likelihood
        if nagq != 1:
            raise InputError(f"family {fam.name!r} is fitted by the Laplace approximation; use nagq=1")
        return fit_laplace(design, t0=t0, fit_options={"contrasts": dict(contrasts or {}),
                                                        "levels": dict(levels or {}), "family": fam.name})
    return fit_design(design, nagq=nagq, t0=t0,
                      fit_options={"contrasts": dict(contrasts or {}), "levels": dict(levels or {}),
                                   "weights": weights if isinstance(weights, str) else None, "nagq": nagq,
                                   "family": fam.name})


HESSIAN_R = 1   # plain central differences of the analytic gradient (relative error ~1e-8 in the SEs)


def fit_laplace(design, t0: float | None = None, fit_options: Mapping[str, Any] | None = None):
    """Fit a design of a family with ``loglik_rows`` (beta-binomial) by the Laplace approximation; returns a
    :class:`~mrcstats.models.results.GlmerResult` with ``dispersion`` (glmmTMB's ``sigma``)."""
    from mrcstats.models.numdiff import richardson_hessian, richardson_jacobian
    from mrcstats.models.optimize import glm_start, ranef_tables, varcorr_rows
    from mrcstats.models.results import GlmerResult

    t0 = time.perf_counter() if t0 is None else t0
    model = LaplaceModel(design)
    re = design.re
    lower = np.concatenate([r.lower for r in re])
    k, p = len(lower), model.p
    from mrcstats.models.deviance import ResponseData

    # β's start: the GLM of the family's canonical kernels (the beta-binomial's are the binomial's)
    d = ResponseData(design.X, design.y, design.weights, design.offset, 0.0, design.family)
    beta0 = glm_start(d)
    x0 = np.concatenate([np.concatenate([r.start for r in re]), beta0, [math.log(design.family.start_dispersion)]])

    r = laplace_optimum(model, x0, lower)
    x = r.x.copy()

    def obj(x):
        return model.objective(x[:k], x[k:k + p], math.exp(x[-1]))

    fval = obj(x)
    # SEs: the Hessian of −2 log L in (θ, β, log φ) off the boundary; θ at 0 is left out (as TMB's log-SD
    # parameterisation cannot reach it, its row carries no information about β)
    free = np.ones(len(x), bool)
    free[:k] = ~((lower == 0) & (x[:k] < 1e-4))
    idx = np.flatnonzero(free)

    def fsub(z):
        xx = x.copy()
        xx[idx] = z
        return obj(xx)

    if model.has_gradient:      # central differences of the analytic gradient (numDeriv's jacobian steps)
        def gsub(z):
            xx = x.copy()
            xx[idx] = z
            return model.gradient(xx[:k], xx[k:k + p], math.exp(xx[-1]))[1][idx]

        J = richardson_jacobian(gsub, x[idx], r=HESSIAN_R)
        H = 0.5 * (J + J.T)
    else:
        H = richardson_hessian(fsub, x[idx])          # numDeriv's steps (d = 0.1), Richardson r = 4
    try:
        Hinv = np.linalg.inv(H)
    except np.linalg.LinAlgError:
        raise ModelError("the Hessian of the Laplace objective is singular; no standard errors") from None
    pos = {j: i for i, j in enumerate(idx)}
    bi = [pos[k + j] for j in range(p)]
    V = 2.0 * Hinv[np.ix_(bi, bi)]
    theta, beta, phi = x[:k], x[k:k + p], math.exp(x[-1])
    model.objective(theta, beta, phi)
    eta, b_all, cov_blocks = model.conditional(theta, beta, phi)
    bs, cvs = [], []
    for kk, t in enumerate(re):
        sl = slice(model.offs[kk], model.offs[kk + 1])
        blk = b_all[sl].reshape(t.nlevels, t.q)
        cv = cov_blocks[kk]
        bs.append(blk[:, 0] if t.is_scalar else blk)
        cvs.append(cv[:, 0, 0] if t.is_scalar else cv)
    fam = design.family
    mu = fam.linkinv(eta)
    # Pearson residuals with the family's V(μ) (for the beta-binomial the binomial one, without the (1 + (n-1)/(φ+1))
    # overdispersion factor), as glmmTMB 1.1.5's residuals(m, "pearson") computes them
    with np.errstate(divide="ignore", invalid="ignore"):
        pearson = (design.y - mu) * np.sqrt(design.weights) / np.sqrt(fam.variance(mu))
    singular = bool(np.any(theta[lower == 0] < 1e-4))
    msgs = list(design.messages) + (["boundary (singular) fit: see help('isSingular')"] if singular else [])
    return GlmerResult.from_estimates(
        info=design.info, beta=beta, vcov=V, theta=theta, group_names=[t.name for t in re],
        theta_names=[nm for t in re for nm in t.theta_names], varcorr=varcorr_rows(re, theta),
        ngroups=design.ngroups, ranef=ranef_tables(re, bs, cvs), loglik=-0.5 * fval,
        deviance=float("nan"), pearson_resid=np.where(np.isfinite(pearson), pearson, 0.0), nobs=design.nobs,
        converged=bool(r.success) or float(np.max(np.abs(r.jac))) < 1e-3, messages=msgs,
        engine="native (Laplace)", nagq=1, fit_seconds=time.perf_counter() - t0, singular=singular,
        optinfo={"optimizer": "L-BFGS-B", "nit": int(r.nit), "nfev": model.nfev, "par": x.tolist()},
        fit_options=fit_options or {}, frame=design.frame, design=design, family=design.family,
        npar_extra=1, dispersion=phi)
