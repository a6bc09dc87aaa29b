"""The GLMM plug-in's tables (:mod:`mrcstats.report.analyses.glmm`): fixed effects in R's, the compact and the APA
layout, fit statistics, variance components, drop1/GVIF frames and emmeans's means and contrasts.

They take a fit (:class:`~mrcstats.models.GlmerResult`, an emmeans result) or its frames and only lay the numbers
out, as :class:`~mrcstats.report.tables.Table` objects.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from mrcstats.errors import InputError
from mrcstats.report.format import format_p
from mrcstats.report.tables import (
    Formatter,
    PairTable,
    Table,
    format_number,
    is_missing,
    kind_formats,
    r_column_decimals,
    signif_stars,
)


def _as_series(obj: Any, name: str) -> pd.Series:
    if isinstance(obj, pd.Series):
        return obj.astype(float)
    if isinstance(obj, Mapping):
        return pd.Series({str(k): float(v) if not is_missing(v) else np.nan for k, v in obj.items()}, dtype=float)
    raise InputError(f"regression table: cannot read {name} of type {type(obj).__name__}")


def coef_frame(result: Any) -> pd.DataFrame:
    """``term, estimate, se, z, p`` from a fit's :meth:`~mrcstats.models.GlmerResult.coef_table`, or from a
    DataFrame of estimates and SEs given elsewhere (a ``term`` column or index; lme4's column names work too),
    through :func:`mrcstats.models.results.wald_table` — the one coefficient table."""
    from mrcstats.models.results import wald_table

    if isinstance(result, pd.DataFrame):
        df = result.copy()
        if "term" in df.columns:
            df = df.set_index("term")
        ren = {}
        for c in df.columns:
            lc = str(c).lower()
            if lc in ("estimate", "fixef", "coef", "beta"):
                ren[c] = "estimate"
            elif lc in ("se", "std. error", "std_error", "stderr", "std.error"):
                ren[c] = "se"
        df = df.rename(columns=ren)
        missing = [c for c in ("estimate", "se") if c not in df.columns]
        if missing:
            raise InputError(f"regression table: columns {missing} not found among {list(df.columns)}")
        tab = wald_table(df["estimate"], df["se"])
    elif hasattr(result, "coef_table"):
        tab = result.coef_table()
    else:
        raise InputError(f"regression table: {type(result).__name__} is neither a fit nor a DataFrame")
    tab = tab.reset_index(names="term")
    tab.columns = ["term", "estimate", "se", "z", "p"]
    tab["term"] = tab["term"].astype(str)
    return tab


def regression_table(result: Any, caption: str = "", label: str = "fixef", layout: str = "lme4",
                     truth: Mapping[str, float] | None = None, terms: Mapping[str, str] | None = None,
                     level: float = 0.95) -> Table:
    """The fixed-effects table.

    ``layout="lme4"``: Estimate, Std. Error, z value, Pr(>|z|) and significance
    stars, numbers formatted like R's ``printCoefmat`` (common decimals per column,
    4 significant digits for estimates/SEs, 3 for z, ``format.pval`` for p).
    ``layout="compact"``: ``β (SE)`` with stars and ``p``, the usual paper layout.
    ``layout="apa"``: Estimate, SE, Wald 95% CI (``β ± z SE``, lme4's ``confint(m, method = "Wald")``),
    z and p, numbers as journals print them (:mod:`mrcstats.report.format`).
    ``truth`` (term -> value) adds a "Truth" column (simulated data); ``terms`` renames terms for display
    (``{"model1": "model1 (gpt-a)"}``).
    """
    cf = coef_frame(result)
    names = dict(terms or {})
    from mrcstats.models.family_table import family_labels

    fam = getattr(result, "family", None)
    eta = family_labels(fam).eta_desc if fam is not None else "log-odds"
    if layout == "apa":
        from mrcstats._dist import norm_ppf
        from mrcstats.report.format import format_ci

        zc = float(norm_ppf(0.5 + level / 2))
        lo, hi = cf["estimate"] - zc * cf["se"], cf["estimate"] + zc * cf["se"]
        df = pd.DataFrame({"Term": [names.get(t, t) for t in cf["term"]], "Estimate": cf["estimate"],
                           "SE": cf["se"], f"{level:.0%} CI": list(zip(lo, hi)), "z": cf["z"], "p": cf["p"]})
        fmts: dict[str, Formatter] = kind_formats({"Estimate": "estimate", "SE": "se", "z": "statistic", "p": "p"})
        fmts[f"{level:.0%} CI"] = lambda v: format_ci(0.0, v[0], v[1]).split(" ", 1)[1]
        if truth is not None:
            df.insert(1, "Truth", [truth.get(t, np.nan) for t in cf["term"]])
            fmts.update(kind_formats({"Truth": "estimate"}))
        return PairTable(df, caption=caption, label=label, formats=fmts,
                          raw=pd.DataFrame({"Term": cf["term"], "Estimate": cf["estimate"], "SE": cf["se"],
                                            "CI low": lo, "CI high": hi, "z": cf["z"], "p": cf["p"],
                                            **({"Truth": df["Truth"]} if truth is not None else {})}),
                          notes=(f"Wald z tests; {level:.0%} CI = estimate ± {zc:.2f} SE ({eta}).",))
    notes = ["Signif. codes: 0 '***' 0.001 '**' 0.01 '*' 0.05 '.' 0.1 ' ' 1"]
    if layout == "lme4":
        df = pd.DataFrame({"Term": cf["term"], "Estimate": cf["estimate"], "Std. Error": cf["se"],
                           "z value": cf["z"], "Pr(>|z|)": cf["p"],
                           "": [signif_stars(p) for p in cf["p"]]})
        de = r_column_decimals([*cf["estimate"], *cf["se"]], 4)
        dz = min(r_column_decimals(cf["z"], 3), 3)
        fmts: dict[str, Formatter] = {"Estimate": f"{{:.{de}f}}", "Std. Error": f"{{:.{de}f}}",
                                      "z value": f"{{:.{dz}f}}", "Pr(>|z|)": format_p}
        if truth is not None:
            df.insert(2, "Truth", [truth.get(t, np.nan) for t in cf["term"]])
            fmts["Truth"] = f"{{:.{de}f}}"
    elif layout == "compact":
        cells = [f"{format_number(float(e), 2)} ({format_number(float(s), 2)}){signif_stars(p)}" for e, s, p in
                 zip(cf["estimate"], cf["se"], cf["p"])]
        df = pd.DataFrame({"Term": cf["term"], "β (SE)": cells, "p": cf["p"]})
        fmts = {"p": format_p}
        if truth is not None:
            df.insert(1, "Truth", [truth.get(t, np.nan) for t in cf["term"]])
            fmts["Truth"] = "{:.2f}"
        notes = ["*** p < .001, ** p < .01, * p < .05, . p < .1"]
    else:
        raise InputError(f"regression_table: layout must be 'apa', 'lme4' or 'compact', got {layout!r}")
    return Table(df, caption=caption, label=label, formats=fmts, notes=tuple(notes))


def fit_statistics_table(result: Any, caption: str = "", label: str = "fitstats") -> Table:
    """AIC, BIC, log-likelihood, −2 log-likelihood, deviance, df.resid, nobs and groups of a GLMM fit.

    lme4 prints two different "deviances": ``−2 logLik`` (the Laplace/AGQ objective, what AIC is built
    from) and ``deviance()`` (the sum of squared deviance residuals at the conditional modes); both are
    shown, each with its own label.
    """
    rows: list[tuple[str, Any]] = []
    for key, name in (("aic", "AIC"), ("bic", "BIC"), ("loglik", "Log-likelihood"),
                      ("minus2loglik", "−2 log-likelihood (lme4 summary \"deviance\")"),
                      ("deviance", "Conditional deviance (lme4 deviance())"), ("df_resid", "Residual df"),
                      ("nobs", "Observations")):
        v = getattr(result, key, None)
        if v is not None:
            rows.append((name, v))
    ng = getattr(result, "ngroups", None) or {}
    for g, n in dict(ng).items():
        rows.append((f"Groups: {g}", n))
    for key, name in (("converged", "Converged"), ("singular", "Singular fit")):
        v = getattr(result, key, None)
        if v is not None:
            rows.append((name, bool(v)))
    df = pd.DataFrame(rows, columns=["Statistic", "Value"]).astype({"Value": object})
    from mrcstats.report.format import format_num

    fmt = {"Value": lambda v: format_num(v, "ic") if isinstance(v, float)
           else (f"{int(v):,}" if isinstance(v, int | np.integer) and not isinstance(v, bool) else format_number(v))}
    return Table(df, caption=caption, label=label, formats=fmt,
                 notes=(("−2 log-likelihood is the objective AIC and BIC are built from; the conditional deviance "
                         "is the sum of squared deviance residuals given the random-effect modes."),))


def random_effects_table(result: Any, caption: str = "", label: str = "ranef_var",
                         truth: Mapping[str, float] | None = None) -> Table:
    """Random-effects variance components: Groups, Name, Variance, Std.Dev. (lme4's block)."""
    theta = getattr(result, "theta", None)
    if theta is None:
        raise InputError("random_effects_table: the result has no theta")
    rows = []
    for key, sd in dict(theta).items():
        g, _, name = str(key).partition(".")
        rows.append({"Groups": g, "Name": name or "(Intercept)", "Variance": float(sd) ** 2, "Std.Dev.": float(sd)})
    df = pd.DataFrame(rows).rename(columns={"Groups": "Group", "Name": "Term", "Std.Dev.": "SD"})
    kinds = {"Variance": "variance", "SD": "sd"}
    if truth is not None:
        df["True SD"] = [truth.get(k, np.nan) for k in dict(theta)]
        kinds["True SD"] = "sd"
    return Table(df, caption=caption, label=label, formats=kind_formats(kinds), stub=2)


def anova_table(frame: pd.DataFrame, caption: str = "", label: str = "drop1") -> Table:
    """A drop1/anova/GVIF frame with readable headers; numbers by column kind, p APA-style."""
    df = frame.copy()
    if df.index.name is not None or not isinstance(df.index, pd.RangeIndex):
        df = df.reset_index()
    heads = {"term": "Term", "index": "Term", "npar": "df", "df": "df", "aic": "AIC", "bic": "BIC",
             "loglik": "Log-likelihood", "deviance": "−2 log-likelihood", "lrt": "χ² (LRT)", "chisq": "χ²",
             "statistic": "χ² (LRT)", "p": "p", "p_value": "p", "pr(>chi)": "p", "pr(chi)": "p", "gvif": "GVIF",
             "gvif^(1/(2*df))": "GVIF^(1/(2·df))", "gvif_adj": "GVIF^(1/(2·df))"}
    df = df.rename(columns={c: heads.get(str(c).lower(), str(c)) for c in df.columns})
    kinds: dict[str, str] = {}
    for c in df.columns:
        if c == "p":
            kinds[c] = "p"
        elif c in ("df", "Parameters"):
            kinds[c] = "df"
        elif c in ("AIC", "BIC", "Log-likelihood", "−2 log-likelihood"):
            kinds[c] = "ic"
        elif c.startswith("χ²"):
            kinds[c] = "statistic"
        elif pd.api.types.is_float_dtype(df[c]):
            kinds[c] = "estimate"
    return Table(df, caption=caption, label=label, formats=kind_formats(kinds))


def emmeans_table(em: Any, caption: str = "", label: str = "emmeans") -> Table:
    """An :class:`~mrcstats.models.emmeans.EmmeansResult` as emmeans prints it (``prob``/``emmean``, SE,
    df, asymptotic limits), emmeans's messages as notes."""
    df = em.to_frame()
    stub = len(em.specs) + len(em.by)
    fmts: dict[str, Formatter] = {c: "{:.4f}" for c in df.columns[stub:] if c != "df"}
    return Table(df, caption=caption, label=label, formats=fmts, notes=tuple(em.notes), stub=stub)


def pairs_table(pr: Any, caption: str = "", label: str = "pairs") -> Table:
    """A :class:`~mrcstats.models.emmeans.PairsResult` as emmeans prints it (``estimate``/``odds.ratio``, SE,
    df, z.ratio, p.value adjusted as noted)."""
    df = pr.to_frame()
    stub = 1 + len(pr.by)
    fmts: dict[str, Formatter] = {c: "{:.4f}" for c in (pr.est_name, "SE")}
    fmts.update({"z.ratio": "{:.3f}", "p.value": format_p})
    if "null" in df.columns:
        fmts["null"] = "{:g}"
    return Table(df, caption=caption, label=label, formats=fmts, notes=tuple(pr.notes), stub=stub)

