"""The ``engine="lme4"`` GLMM: the same call fitted by R's lme4 through rpy2 (extra ``mrcstats[r]``).

The fit is R's

``glmer(formula, data, family = binomial, nAGQ = nagq, control = glmerControl(tolPwrss = 1e-13))``

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

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mrcstats.errors import DependencyError, InputError, ModelError

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
    try:
        import rpy2.robjects as ro
    except Exception as exc:  # R missing or incompatible: rpy2 raises various errors here
        raise DependencyError(f"engine='lme4': rpy2 could not start R ({type(exc).__name__}: {exc}); "
                              f"check that R is installed and R_HOME points to it; {_INSTALL_HINT}") from None
    for pkg in ("lme4", "car"):
        if not ro.r(f'isTRUE(requireNamespace("{pkg}", quietly = TRUE))')[0]:
            raise DependencyError(f"engine='lme4': the R package {pkg} is not installed "
                                  f"(apt-get install r-cran-{pkg}, or install.packages('{pkg}') in R)")
    ro.r["source"](str(R_LIB))
    _STATE["ro"] = ro
    return ro


def lme4_available() -> str | None:
    """None when the lme4 engine can run here, else the reason it cannot."""
    try:
        _robjects()
    except DependencyError as exc:
        return str(exc)
    return None


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
        except Exception as exc:
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


def lme4_fit_dict(formula: str, data: pd.DataFrame, *, contrasts: Mapping[str, str] | None = None,
                  levels: Mapping[str, Sequence[str]] | None = None, nagq: int = 1,
                  weights: str | None = None, lme4_defaults: bool = False,
                  tol_pwrss: float | None = None, ranef: bool = True, drop1: bool = False,
                  gvif: bool = False, compare: str | None = None) -> dict[str, Any]:
    """Fit ``formula`` with lme4 through rpy2 and return R's figures as plain Python.

    The keys are those of ``R/fit_glmer.R``'s JSON (``fixef``, ``se``, ``z``, ``p``, ``vcov``,
    ``theta``, ``loglik``, ``aic``, ``bic``, ``deviance``, ``df_resid``, ``nobs``, ``ngroups``,
    ``messages``, ``singular``, ``resid_quantiles``, ``ranef``, ...), plus R's own
    ``drop1(m, test = "Chisq")``, ``car::vif(m)`` and ``anova(m_compare, m)`` when asked.
    """
    ro = _robjects()
    if not isinstance(data, pd.DataFrame):
        raise InputError("data must be a pandas DataFrame")
    contrasts = dict(contrasts or {})
    for k, v in contrasts.items():
        if v not in ("sum", "treatment"):
            raise InputError(f"contrasts[{k!r}] must be 'sum' or 'treatment', got {v!r}")
    formulas = [formula] + ([compare] if compare else [])
    vars_ = _formula_vars(ro, formulas)
    if weights is not None:
        vars_.append(weights)
    missing = [v for v in vars_ if v not in data.columns]
    if missing:
        raise InputError(f"column(s) {', '.join(map(repr, missing))} used by the formula are not in the data; "
                         f"columns are: {', '.join(map(str, data.columns))}")
    levels = {k: [str(x) for x in v] for k, v in (levels or {}).items()}
    for v in vars_:
        s = data[v]
        if v not in levels and isinstance(s.dtype, pd.CategoricalDtype) and s.cat.ordered:
            levels[v] = [str(c) for c in s.cat.categories]
    df = ro.DataFrame({v: _r_column(ro, data[v]) for v in vars_})
    try:
        rdata = ro.r["mrc_prepare"](df, ro.StrVector(vars_),
                                    _r_list(ro, {k: ro.StrVector(v) for k, v in levels.items()}),
                                    _r_list(ro, {k: ro.StrVector([v]) for k, v in contrasts.items()}),
                                    weights if weights is not None else ro.NULL)
    except Exception as exc:
        raise InputError(_r_message(exc)) from None
    tol = ro.NULL if tol_pwrss is None else float(tol_pwrss)
    try:
        fit = ro.r["mrc_fit"](formula, rdata, int(nagq), weights is not None, bool(lme4_defaults), tol)
    except Exception as exc:
        raise ModelError(f"lme4 could not fit {formula!r}: {_r_message(exc)}") from None
    out = ro.r["mrc_extract"](fit, formula, int(nagq), bool(lme4_defaults), bool(ranef))
    model = fit.rx2("model")
    extra: dict[str, Any] = {}
    if drop1:
        extra["drop1"] = ro.r["mrc_drop1"](model)
    if gvif:
        extra["gvif"] = ro.r["mrc_gvif"](model)
    if compare:
        try:
            fit0 = ro.r["mrc_fit"](compare, rdata, int(nagq), weights is not None, bool(lme4_defaults),
                                   tol, fit.rx2("env"))
        except Exception as exc:
            raise ModelError(f"lme4 could not fit the reduced model {compare!r}: {_r_message(exc)}") from None
        extra["anova"] = ro.r["mrc_anova"](fit0.rx2("model"), model)
    res = _numbers(json.loads(ro.r["mrc_to_json"](out)[0]))
    for k, v in extra.items():
        res[k] = _numbers(json.loads(ro.r["mrc_to_json"](v)[0]))
    return res
