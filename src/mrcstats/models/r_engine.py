"""The ``engine="lme4"`` GLMM: the same call fitted by R's lme4 through rpy2 (extra ``mrcstats[r]``).

The fit is R's

``glmer(formula, data, family = family, nAGQ = nagq, control = glmerControl(tolPwrss = 1e-13))``

(Bates, Maechler, Bolker & Walker 2015, *J. Stat. Softw.* 67(1); lme4 1.1-31), refitted with
``tolPwrss = 1e-10`` when lme4's penalized IRLS fails ("PIRLS step-halvings failed",
"pwrssUpdate" errors) and a message says so. lme4's default ``tolPwrss = 1e-7`` stops the
inner iterations before the conditional modes converge (logLik off by 0.035 at 10k rows and
0.58 at 200k rows); ``lme4_defaults=True`` uses it anyway, to reproduce published numbers.

The data reach R as a ``data.frame`` built column by column: text columns become factors
whose levels are sorted by code point (R's order under ``LC_COLLATE=C``) or given by
``levels``, and ``contrasts={"LLM": "sum"}`` sets ``contr.sum`` -- the same rules as the native
design, so both engines name and code the fixed effects alike. The R side lives in
``glmer_lme4.R`` beside this module (shared with the Rscript program ``R/fit_glmer.R``).
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mrcstats.errors import DependencyError, InputError, ModelError
from mrcstats.models.design import Design, build_design
from mrcstats.models.formula import ModelSpec
from mrcstats.models.records import VarCorrRow
from mrcstats.models.results import GlmerResult

R_LIB = Path(__file__).with_name("glmer_lme4.R")

_INSTALL_HINT = ("install the R extra: pip install 'mrcstats[r]' (rpy2 3.5) and, on Debian, "
                 "apt-get install r-base-core r-cran-lme4 r-cran-car")

_STATE: dict[str, Any] = {}


def _robjects() -> Any:
    """Import rpy2, start R and source ``glmer_lme4.R`` once; DependencyError naming what is missing."""
    if "ro" in _STATE:
        return _STATE["ro"]
    try:
        import rpy2  # noqa: F401
    except ImportError as exc:
        raise DependencyError(f"engine='lme4' needs rpy2, which is not installed ({exc}); "
                              f"{_INSTALL_HINT}") from None
    # rpy2 prepends R's library dirs (and /usr/lib/<arch>) to LD_LIBRARY_PATH when it starts R. The
    # dynamic loader of this process read that variable at start-up, so the change only reaches child
    # processes, where it makes a non-system Python load the system libpython (e.g. `_ssl` then fails
    # with "undefined symbol"). Put it back once R is up.
    saved_ld = os.environ.get("LD_LIBRARY_PATH")
    try:
        import rpy2.robjects as ro
    except Exception as exc:  # noqa: BLE001 - R missing or incompatible: rpy2 raises various errors here
        raise DependencyError(f"engine='lme4': rpy2 could not start R ({type(exc).__name__}: {exc}); "
                              f"check that R is installed and R_HOME points to it; {_INSTALL_HINT}") from None
    finally:
        if saved_ld is None:
            os.environ.pop("LD_LIBRARY_PATH", None)
        else:
            os.environ["LD_LIBRARY_PATH"] = saved_ld
    for pkg in ("lme4", "car"):
        if not ro.r(f'isTRUE(requireNamespace("{pkg}", quietly = TRUE))')[0]:
            raise DependencyError(f"engine='lme4': the R package {pkg} is not installed "
                                  f"(apt-get install r-cran-{pkg}, or install.packages('{pkg}') in R)")
    from rpy2.rinterface_lib.embedded import RRuntimeError

    ro.r["source"](str(R_LIB))
    _STATE["ro"] = ro
    _STATE["error"] = RRuntimeError
    return ro


def lme4_available() -> str | None:
    """None when the lme4 engine can run here, else the reason it cannot."""
    try:
        _robjects()
    except DependencyError as exc:
        return str(exc)
    return None


def r_versions() -> str:
    """``"R 4.2.2, lme4 1.1.31"``: the R and lme4 behind the lme4 engine (for a report's Methods)."""
    ro = _robjects()
    r = ro.r('paste0(R.version$major, ".", R.version$minor)')[0]
    lme4 = ro.r('as.character(packageVersion("lme4"))')[0]
    return f"R {r}, lme4 {lme4}"


def _r_column(ro: Any, s: pd.Series) -> Any:
    """One pandas column as an R vector (missing values -> NA)."""
    miss = s.isna().to_numpy()
    if pd.api.types.is_bool_dtype(s.dtype):
        vals = s.to_numpy(dtype=object)
        return ro.BoolVector([ro.NA_Logical if m else bool(v) for v, m in zip(vals, miss)])
    if pd.api.types.is_numeric_dtype(s.dtype):
        arr = s.to_numpy(dtype=float, na_value=np.nan)
        if pd.api.types.is_integer_dtype(s.dtype) and (np.abs(arr[~miss]) < 2**31 - 1).all():
            return ro.IntVector([ro.NA_Integer if m else int(v) for v, m in zip(arr, miss)])
        return ro.FloatVector([ro.NA_Real if m else float(v) for v, m in zip(arr, miss)])
    vals = s.astype(object).to_numpy()
    return ro.StrVector([ro.NA_Character if m else str(v) for v, m in zip(vals, miss)])


def _r_list(ro: Any, d: Mapping[str, Any]) -> Any:
    return ro.ListVector({k: v for k, v in d.items()})


def _formula_vars(ro: Any, formulas: Sequence[str]) -> list[str]:
    out: list[str] = []
    for f in formulas:
        try:
            names = list(ro.r["all.vars"](ro.r["as.formula"](f)))
        except _STATE["error"] as exc:
            raise InputError(f"cannot read formula {f!r}: {_r_message(exc)}") from None
        out += [n for n in names if n not in out]
    return out


def _r_message(exc: Exception) -> str:
    msg = str(exc).strip()
    for prefix in ("Error in", "Error :", "Error:"):
        if msg.startswith(prefix):
            msg = msg.split(":", 1)[-1].strip() if prefix == "Error in" else msg[len(prefix):].strip()
    return " ".join(msg.split())


def _numbers(x: Any) -> Any:
    """Undo the JSON writer's "Inf"/"-Inf" strings inside numeric fields."""
    if isinstance(x, dict):
        return {k: _numbers(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_numbers(v) for v in x]
    if x == "Inf":
        return math.inf
    if x == "-Inf":
        return -math.inf
    return x


def lme4_fit_dict(formula: ModelSpec, data: pd.DataFrame, *,
                  contrasts: Mapping[str, str] | None = None,
                  levels: Mapping[str, Sequence[Any]] | None = None, nagq: int = 1,
                  weights: str | Sequence[float] | np.ndarray | None = None, lme4_defaults: bool = False,
                  tol_pwrss: float | None = None, ranef: bool = True, drop1: bool = False,
                  gvif: bool = False, compare: str | ModelSpec | None = None) -> dict[str, Any]:
    """Fit ``formula`` (a parsed model with its family, ``parse_formula(text).with_family("binomial")``) with lme4
    through rpy2 and return R's figures as plain Python.

    The keys are those of ``R/fit_glmer.R``'s JSON (``fixef``, ``se``, ``z``, ``p``, ``vcov``,
    ``theta``, ``loglik``, ``aic``, ``bic``, ``deviance``, ``df_resid``, ``nobs``, ``ngroups``,
    ``assign``, ``term_labels``, ``messages``, ``singular``, ``resid_quantiles``, ``ranef``,
    ``tol_pwrss``, ...), plus R's own ``drop1(m, test = "Chisq")``, ``car::vif(m)`` and
    ``anova(m_compare, m)`` when asked. ``contrasts`` maps a column to ``"sum"`` or
    ``"treatment"``; ``levels`` maps a column to its level order.
    """
    ro = _robjects()
    if not isinstance(data, pd.DataFrame):
        raise InputError(f"data must be a pandas DataFrame, got {type(data).__name__}")
    if not isinstance(formula, ModelSpec):
        raise InputError("lme4_fit_dict: expected a parsed model with its family "
                         f"(mrcstats.models.formula.parse_formula(text).with_family('binomial')), got {formula!r}")
    family = formula.require_family().name
    ftext = formula.formula
    ctext = compare.formula if isinstance(compare, ModelSpec) else compare
    contr: dict[str, str] = {}
    for k, v in (contrasts or {}).items():
        kind = {"contr.sum": "sum", "contr.treatment": "treatment"}.get(str(v), str(v))
        if kind not in ("sum", "treatment"):
            raise InputError(f"contrasts for {k!r}: {v!r} is not supported (use sum or treatment)")
        contr[k] = kind
    vars_ = _formula_vars(ro, [ftext] + ([ctext] if ctext else []))
    missing = [v for v in vars_ if v not in data.columns]
    if missing:
        raise InputError(f"column(s) {', '.join(map(repr, missing))} used by the formula are not in the data; "
                         f"columns are: {', '.join(map(str, data.columns))}")
    cols = {v: _r_column(ro, data[v]) for v in vars_}
    wname = None
    if weights is not None:
        if isinstance(weights, str):
            if weights not in data.columns:
                raise InputError(f"weights column {weights!r} is not in the data")
            wname = weights
            cols.setdefault(weights, _r_column(ro, data[weights]))
        else:
            w = np.asarray(weights, dtype=float)
            if w.shape != (len(data),):
                raise InputError(f"weights: expected {len(data)} values, got shape {w.shape}")
            wname = ".mrc_weights_in"
            cols[wname] = _r_column(ro, pd.Series(w))
    lv = {k: [_level_text(x) for x in v] for k, v in (levels or {}).items() if k in vars_}
    for v in vars_:
        s = data[v]
        if v not in lv and isinstance(s.dtype, pd.CategoricalDtype):
            used = s.cat.remove_unused_categories().cat.categories
            lv[v] = [_level_text(c) for c in used]
    df = ro.DataFrame(cols)
    try:
        rdata = ro.r["mrc_prepare"](df, ro.StrVector(vars_),
                                    _r_list(ro, {k: ro.StrVector(v) for k, v in lv.items()}),
                                    _r_list(ro, {k: ro.StrVector([v]) for k, v in contr.items()}),
                                    wname if wname is not None else ro.NULL)
    except _STATE["error"] as exc:
        raise InputError(_r_message(exc)) from None
    tol = ro.NULL if tol_pwrss is None else float(tol_pwrss)
    weighted = wname is not None
    try:
        fit = ro.r["mrc_fit"](ftext, rdata, int(nagq), weighted, bool(lme4_defaults), tol, family=family)
    except _STATE["error"] as exc:
        raise ModelError(f"lme4 could not fit {ftext!r}: {_r_message(exc)}") from None
    out = ro.r["mrc_extract"](fit, ftext, int(nagq), bool(lme4_defaults), bool(ranef))
    model = fit.rx2("model")
    extra: dict[str, Any] = {}
    if drop1:
        extra["drop1"] = ro.r["mrc_drop1"](model)
    if gvif:
        extra["gvif"] = ro.r["mrc_gvif"](model)
    if ctext:
        try:
            fit0 = ro.r["mrc_fit"](ctext, rdata, int(nagq), weighted, bool(lme4_defaults), tol, fit.rx2("env"),
                                   family=family)
        except _STATE["error"] as exc:
            raise ModelError(f"lme4 could not fit the reduced model {ctext!r}: {_r_message(exc)}") from None
        extra["anova"] = ro.r["mrc_anova"](fit0.rx2("model"), model)
    res = _numbers(json.loads(ro.r["mrc_to_json"](out)[0]))
    for k, v in extra.items():
        res[k] = _numbers(json.loads(ro.r["mrc_to_json"](v)[0]))
    return res


def _level_text(x: Any) -> str:
    """A level as R's ``as.character`` prints it (shared with the native design)."""
    from mrcstats.models.design import r_number_text

    if isinstance(x, (bool, np.bool_, int, np.integer, float, np.floating)):
        return r_number_text(x)
    return str(x)


def fit_lme4(formula: str | ModelSpec, data: pd.DataFrame, *, contrasts: Mapping[str, str] | None = None,
             nagq: int = 1, weights: str | Sequence[float] | np.ndarray | None = None,
             levels: Mapping[str, Sequence[Any]] | None = None, lme4_defaults: bool = False,
             tol_pwrss: float | None = None) -> GlmerResult:
    """``glmer(..., engine="lme4")``: the fit by R's lme4 as a :class:`GlmerResult`.

    The native design is built first (same parser, same na.omit, same factor levels and
    contrasts), and R receives the levels it chose, so both engines code the model alike;
    the fixed-effect names and ``assign`` of the result are R's own. ``fit_seconds`` here is the
    time of R's ``glmer()`` call alone.
    """
    design = build_design(formula, data, contrasts=contrasts, levels=levels, weights=weights, allow_slopes=True)
    family = design.family
    info = design.info
    spec = info.spec
    # levels R must use: those the native design chose for plain factor columns (and the response)
    lv: dict[str, list[str]] = {k: [_level_text(x) for x in v] for k, v in (levels or {}).items()}
    for t in spec.terms:
        for v in t.variables:
            if v.transform is None and v.label in info.xlevels:
                lv[v.column] = list(info.xlevels[v.label])
    contr = {}
    for label, kind in info.contrasts.items():
        var = next((v for t in spec.terms for v in t.variables if v.label == label), None)
        if var is not None and var.transform is None:
            contr[var.column] = "sum" if kind == "contr.sum" else "treatment"
        elif kind == "contr.sum":
            raise InputError(f"contrasts for {label!r}: engine='lme4' takes contrasts for plain columns only; "
                             f"make {var.column if var else label!r} a text column and give contrasts for it")
    r = lme4_fit_dict(spec, data, contrasts=contr, levels=lv, nagq=nagq, weights=weights,
                      lme4_defaults=lme4_defaults, tol_pwrss=tol_pwrss, ranef=True)
    return result_from_lme4(r, design, fit_options={
        "contrasts": dict(contrasts or {}), "levels": dict(levels or {}), "weights": weights,
        "nagq": int(nagq), "lme4_defaults": bool(lme4_defaults), "tol_pwrss": tol_pwrss, "family": family.name},
        data=data)


def result_from_lme4(r: Mapping[str, Any], design: Design, *, fit_options: Mapping[str, Any] | None = None,
                     data: pd.DataFrame | None = None) -> GlmerResult:
    """A :class:`GlmerResult` from lme4's figures (``lme4_fit_dict`` or ``R/fit_glmer.R`` JSON)."""
    names = list(r["fixef"])
    assign = [int(a) for a in _as_list(r.get("assign", []))] or list(design.info.assign)
    info = dataclasses.replace(design.info, column_names=tuple(names), assign=tuple(assign))
    V = np.array([[float(r["vcov"][a][b]) for b in names] for a in names], dtype=float).reshape(len(names),
                                                                                                len(names))
    tnames = list(r["theta"])
    slopes = bool(design.info.spec.random_slopes)
    groups = [t.removesuffix(".(Intercept)") for t in tnames]
    ranef = {}
    for g, levels in (r.get("ranef") or {}).items():
        ranef[g] = pd.DataFrame({"mode": [float(v["mode"]) for v in levels.values()],
                                 "condvar": [float(v["condvar"]) for v in levels.values()]},
                                index=pd.Index([str(k) for k in levels], name=g))
    msgs = list(design.messages) + [m for m in _as_list(r.get("messages", [])) if m not in design.messages]
    q = r["resid_quantiles"]
    vcov_other = None
    if r.get("vcov_rx") is not None:   # lme4's vcov(m, use.hessian = FALSE): the other rule
        vcov_other = np.array([[float(r["vcov_rx"][a][b]) for b in names] for a in names], dtype=float)
    varcorr = None
    if slopes:  # random slopes: lme4's theta (Cholesky factor entries); VarCorr with correlations
        if tnames == [n for t in design.re for n in t.theta_names]:
            from mrcstats.models.optimize import varcorr_rows

            varcorr = varcorr_rows(design.re, [float(r["theta"][t]) for t in tnames])
        else:  # pragma: no cover - lme4 ordered the terms differently: SDs as R gives them
            varcorr = [VarCorrRow(g, nm, None, float(var), float(sd)) for g, vc in r["varcorr"].items()
                       for nm, var, sd in zip(_as_list(vc["name"]), _as_list(vc["variance"]), _as_list(vc["sd"]))]
    return GlmerResult.from_estimates(
        info=info, beta=[float(r["fixef"][n]) for n in names], vcov=V,
        theta=[float(r["theta"][t]) for t in tnames], group_names=groups,
        ngroups={str(k): int(v) for k, v in r["ngroups"].items()}, ranef=ranef,
        loglik=float(r["loglik"]), deviance=float(r["deviance"]),
        resid_quantiles=[float(q[k]) for k in ("Min", "1Q", "Median", "3Q", "Max")],
        nobs=int(r["nobs"]), converged=bool(r["converged"]), messages=msgs, engine="lme4",
        nagq=int(r.get("nagq", 1)), fit_seconds=float(r.get("fit_seconds", float("nan"))),
        formula=str(r.get("formula") or info.spec.formula), singular=bool(r["singular"]),
        optinfo={"tol_pwrss": r.get("tol_pwrss"), "lme4_version": r.get("lme4_version"),
                 "lme4_defaults": r.get("lme4_defaults")},
        fit_options=fit_options, frame=data, family=design.family,
        theta_names=tnames if slopes else None, varcorr=varcorr,
        vcov_method=str(r.get("vcov_method") or "hessian") if vcov_other is not None else "hessian",
        vcov_other=vcov_other)


def _as_list(x: Any) -> list[Any]:
    return list(x) if isinstance(x, list) else [x]
