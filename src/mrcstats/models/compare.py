"""Model comparison for binomial GLMMs, as lme4 and car compute it.

* :func:`anova` -- the likelihood-ratio test of two nested fits, lme4's ``anova(m0, m1)``
  (``anova.merMod``): models sorted by number of parameters, ``Chisq = 2 max(0, ΔlogLik)``,
  ``Df = Δnpar``, ``p = P(χ²_Df > Chisq)``, with R's AIC/BIC/logLik/deviance table
  (there ``deviance`` is ``-2 logLik``).
* :func:`drop1` -- single-term deletions respecting marginality, lme4's
  ``drop1(m, test = "Chisq")`` (``drop1.merMod``): the scope is R's ``drop.scope`` (terms
  not contained in a higher-order term), each reduced model is refitted with the same
  engine, data and options, ``LRT = (AIC_reduced - 2 npar_reduced) - (AIC_full - 2 npar_full)``
  and ``p = P(χ²_npar > LRT)`` with ``npar`` the number of parameters the term removes.
* :func:`gvif` -- generalized variance-inflation factors, ``car::vif`` for merMod
  (Fox & Monette 1992, *JASA* 87:178-183, eq. 10): with ``R`` the correlation matrix of the
  fixed-effect covariance without the intercept,
  ``GVIF_j = det(R_jj) det(R_-j,-j) / det(R)``, ``Df_j`` the number of columns of term j and
  ``GVIF_j^(1/(2 Df_j))`` comparable across terms.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as _st

from mrcstats._pformat import format_pval
from mrcstats._repr import Result
from mrcstats.errors import InputError, ModelError
from mrcstats.models.family_table import require
from mrcstats.models.results import GlmerResult, fmt_sig


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    """Lines of an R-printed table: row names left-aligned, other columns right-aligned."""
    w = [max(len(r[k]) for r in [head, *rows]) for k in range(len(head))]
    return [" ".join(c.rjust(w[k]) if k else c.ljust(w[k]) for k, c in enumerate(r)) for r in [head, *rows]]


# ----------------------------------------------------------------------------- anova


@dataclass(frozen=True, repr=False)
class AnovaResult(Result):
    """lme4's ``anova(m0, m1)`` table: one row per model, sorted by ``npar``.

    ``chisq``, ``df`` and ``p`` are the likelihood-ratio test of the second (larger) model
    against the first; ``p`` is None when ``df`` is 0 (R prints NA).
    """

    formulas: tuple[str, ...]
    npar: tuple[int, ...]
    aic: tuple[float, ...]
    bic: tuple[float, ...]
    loglik: tuple[float, ...]
    deviance: tuple[float, ...]
    chisq: float
    df: int
    p: float | None

    def to_frame(self) -> pd.DataFrame:
        """R's table: ``npar AIC BIC logLik deviance Chisq Df Pr(>Chisq)``, index m0, m1."""
        return pd.DataFrame({"npar": self.npar, "AIC": self.aic, "BIC": self.bic, "logLik": self.loglik,
                             "deviance": self.deviance, "Chisq": [np.nan, self.chisq],
                             "Df": [np.nan, self.df],
                             "Pr(>Chisq)": [np.nan, np.nan if self.p is None else self.p]},
                            index=pd.Index(["m0", "m1"], name="model"))

    def to_dict(self) -> dict[str, Any]:
        """``{"chisq", "df", "p", "loglik": [reduced, full], ...}`` (the CLI's ``--compare``)."""
        return {"formulas": list(self.formulas), "npar": list(self.npar), "aic": list(self.aic),
                "bic": list(self.bic), "loglik": list(self.loglik), "deviance": list(self.deviance),
                "chisq": self.chisq, "df": self.df, "p": self.p}

    def summary(self) -> str:
        """The text of R's ``anova(m0, m1)`` printout."""
        lines = ["Models:"] + [f"m{i}: {f}" for i, f in enumerate(self.formulas)]
        head = ["", "npar", "AIC", "BIC", "logLik", "deviance", "Chisq", "Df", "Pr(>Chisq)"]
        rows = []
        for i in range(2):
            rows.append([f"m{i}", str(self.npar[i]), fmt_sig(self.aic[i], 5), fmt_sig(self.bic[i], 5),
                         fmt_sig(self.loglik[i], 5), fmt_sig(self.deviance[i], 5),
                         "" if i == 0 else f"{self.chisq:.4f}", "" if i == 0 else str(self.df),
                         "" if i == 0 or self.p is None else format_pval(self.p)])
        return "\n".join(lines + _table(head, rows))


def anova(m0: GlmerResult, m1: GlmerResult) -> AnovaResult:
    """Likelihood-ratio test of two nested GLMM fits, as lme4's ``anova(m0, m1)``.

    The models are ordered by their number of parameters (θ and β); ``Chisq =
    2 max(0, logLik_1 - logLik_0)``, ``Df = npar_1 - npar_0``, ``p = P(χ²_Df > Chisq)``.
    Both fits must use the same observations (lme4 stops otherwise).

    >>> # r = anova(glmer("y ~ x + (1 | g)", d), glmer("y ~ x * f + (1 | g)", d)); r.chisq, r.p
    """
    for m in (m0, m1):
        require(m, "anova")
        if not isinstance(m, GlmerResult):
            raise InputError(f"anova() compares two GlmerResult fits, got {type(m).__name__}")
    if m0.nobs != m1.nobs:
        raise ModelError(f"models were not all fitted to the same size of dataset ({m0.nobs} and {m1.nobs} "
                         "observations); fit both to the same rows (drop missing values first)")
    pair = sorted([m0, m1], key=lambda m: m.npar)  # stable, as R's order()
    ll = [m.loglik for m in pair]
    npar = [m.npar for m in pair]
    chisq = 2.0 * max(0.0, ll[1] - ll[0])
    df = npar[1] - npar[0]
    p = None if df == 0 else float(_st.chi2.sf(chisq, df))
    return AnovaResult(formulas=tuple(m.formula for m in pair), npar=tuple(npar),
                       aic=tuple(m.aic for m in pair), bic=tuple(m.bic for m in pair), loglik=tuple(ll),
                       deviance=tuple(-2.0 * x for x in ll), chisq=chisq, df=df, p=p)


# ----------------------------------------------------------------------------- drop1


@dataclass(frozen=True, repr=False)
class Drop1Result(Result):
    """lme4's ``drop1(m, test = "Chisq")``: one row per droppable term.

    ``npar`` is the number of parameters the term removes (R's ``npar`` column, also
    ``df``), ``aic`` the reduced model's AIC, ``chisq`` R's ``LRT`` and ``p`` ``Pr(Chi)``;
    ``none_aic`` is the full model's AIC (R's ``<none>`` row).
    """

    formula: str
    terms: tuple[str, ...]
    npar: tuple[int, ...]
    aic: tuple[float, ...]
    chisq: tuple[float, ...]
    p: tuple[float, ...]
    none_aic: float
    fits: tuple[GlmerResult, ...] = ()

    @property
    def df(self) -> tuple[int, ...]:
        return self.npar

    def to_frame(self) -> pd.DataFrame:
        """R's table: ``npar AIC LRT Pr(Chi)`` indexed by ``<none>`` and the terms."""
        return pd.DataFrame({"npar": [np.nan, *self.npar], "AIC": [self.none_aic, *self.aic],
                             "LRT": [np.nan, *self.chisq], "Pr(Chi)": [np.nan, *self.p]},
                            index=pd.Index(["<none>", *self.terms], name="term"))

    def to_dict(self) -> dict[str, Any]:
        """``{"term": [], "chisq": [], "df": [], "p": [], "aic": [], "none_aic"}`` (CLI ``--drop1``)."""
        return {"term": list(self.terms), "chisq": list(self.chisq), "df": list(self.npar), "p": list(self.p),
                "aic": list(self.aic), "none_aic": self.none_aic}

    def summary(self) -> str:
        """The text of R's ``drop1`` printout."""
        lines = ["Single term deletions", "", "Model:", self.formula]
        head = ["", "npar", "AIC", "LRT", "Pr(Chi)"]
        rows = [["<none>", "", fmt_sig(self.none_aic, 5), "", ""]]
        for i, t in enumerate(self.terms):
            rows.append([t, str(self.npar[i]), fmt_sig(self.aic[i], 5), f"{self.chisq[i]:.4f}",
                         format_pval(self.p[i])])
        return "\n".join(lines + _table(head, rows))


#: how much lower -2 logLik a reduced refit may reach (optimizer noise) before drop1 refuses it
_LRT_SLACK = 0.5


def _refit_options(m: GlmerResult, spec) -> dict[str, Any]:
    """The options of ``m``'s fit for a refit of ``spec`` (contrasts only for variables it keeps)."""
    opts = dict(m.fit_options or {})
    keep = set(spec.fixed_columns) | {v.label for t in spec.terms for v in t.variables}
    contrasts = {k: v for k, v in (opts.get("contrasts") or {}).items() if k in keep}
    out: dict[str, Any] = {"contrasts": contrasts or None, "levels": opts.get("levels") or None,
                           "weights": opts.get("weights"), "nagq": int(opts.get("nagq", m.nagq)),
                           "family": m.family}
    if m.engine == "lme4":
        out["lme4_defaults"] = bool(opts.get("lme4_defaults", False))
    return out


def drop1(m: GlmerResult, data: pd.DataFrame | None = None) -> Drop1Result:
    """Single-term deletions with likelihood-ratio tests, as lme4's ``drop1(m, test = "Chisq")``.

    Only terms not contained in a higher-order term are dropped (R's ``drop.scope``:
    with ``x * f`` only ``x:f``). Each reduced model is refitted with ``m``'s engine, data
    (``data`` or the frame kept with ``m``) and options; ``LRT`` is the rise of
    ``-2 logLik`` and ``p = P(χ²_npar > LRT)`` with ``npar`` the parameters removed.
    """
    from mrcstats.models.fit import glmer

    require(m, "drop1")
    if not isinstance(m, GlmerResult) or m.spec is None:
        raise InputError("drop1() needs a GlmerResult from mrcstats.glmer()")
    from mrcstats.io.columns import as_frame

    frame = as_frame(data if data is not None else m.frame)     # a fit on Columns kept those
    if frame is None:
        raise InputError("drop1(): this fit kept no data to refit on; pass data=<the DataFrame it was fitted to>")
    spec = m.spec
    w = (m.fit_options or {}).get("weights")
    if w is not None and not isinstance(w, str) and len(w) != len(frame):
        raise InputError(f"drop1(): the fit's weights have {len(w)} values but the data to refit on has "
                         f"{len(frame)} rows; pass data= the DataFrame the model was fitted to")
    terms = spec.droppable()
    fits, npar, aic, chisq, p = [], [], [], [], []
    for label in terms:
        reduced = spec.drop(label)
        r = glmer(reduced, frame, engine="lme4" if m.engine == "lme4" else "native", **_refit_options(m, reduced))
        if r.nobs != m.nobs:
            raise ModelError(f"drop1(): number of rows in use has changed ({m.nobs} -> {r.nobs}) when dropping "
                             f"{label!r}: remove missing values from the data before fitting")
        d_par = m.npar - r.npar
        lrt = (r.aic - 2 * r.npar) - (m.aic - 2 * m.npar)
        if lrt < -_LRT_SLACK:
            # a nested model cannot fit better: the refit did not see the same data or weights
            raise ModelError(f"drop1(): the model without {label!r} fits better than the full model "
                             f"(-2 logLik lower by {-lrt:.4g}), so the refit does not match the original fit; "
                             "pass data= with every column the fit used (including the weights)")
        fits.append(r)
        npar.append(d_par)
        aic.append(r.aic)
        chisq.append(lrt)
        p.append(float(_st.chi2.sf(lrt, d_par)) if d_par > 0 else float("nan"))
    return Drop1Result(formula=m.formula, terms=tuple(terms), npar=tuple(npar), aic=tuple(aic),
                       chisq=tuple(chisq), p=tuple(p), none_aic=m.aic, fits=tuple(fits))


# ----------------------------------------------------------------------------- gvif


@dataclass(frozen=True, repr=False)
class GvifResult(Result):
    """``car::vif(m)``: one row per fixed-effect term (GVIF, Df, GVIF^(1/(2*Df))).

    car returns a plain vector of VIFs when every term has one column; here the
    table always has the three columns (then ``gvif_adj = sqrt(gvif)``).
    """

    terms: tuple[str, ...]
    gvif: tuple[float, ...]
    df: tuple[int, ...]
    gvif_adj: tuple[float, ...]
    messages: tuple[str, ...] = ()

    def to_frame(self) -> pd.DataFrame:
        """car's table: ``GVIF Df GVIF^(1/(2*Df))`` indexed by term."""
        return pd.DataFrame({"GVIF": self.gvif, "Df": self.df, "GVIF^(1/(2*Df))": self.gvif_adj},
                            index=pd.Index(self.terms, name="term"))

    def to_dict(self) -> dict[str, Any]:
        """``{"term": [], "gvif": [], "df": [], "gvif_adj": []}`` (the CLI's ``--gvif``)."""
        return {"term": list(self.terms), "gvif": list(self.gvif), "df": list(self.df),
                "gvif_adj": list(self.gvif_adj), "messages": list(self.messages)}

    def summary(self) -> str:
        """car's printout of ``vif(m)``."""
        head = ["", "GVIF", "Df", "GVIF^(1/(2*Df))"]
        rows = [[t, f"{g:.6f}", str(d), f"{a:.6f}"] for t, g, d, a in zip(self.terms, self.gvif, self.df,
                                                                         self.gvif_adj)]
        return "\n".join(_table(head, rows) + list(self.messages))


def gvif_from_vcov(vcov: pd.DataFrame, assign: tuple[int, ...] | list[int],
                   term_labels: tuple[str, ...] | list[str]) -> GvifResult:
    """car's ``vif.merMod`` on a fixed-effect covariance matrix with R's ``assign``.

    Raises ModelError "there are aliased coefficients in the model" for NaN entries and
    car's "model contains fewer than 2 terms"; warns "No intercept: vifs may not be
    sensible." when the first column is not ``(Intercept)``.
    """
    names = list(vcov.index)
    v = np.asarray(vcov, dtype=float)
    if not np.all(np.isfinite(v)):
        raise ModelError("gvif: there are aliased coefficients in the model")
    assign = np.asarray(list(assign), dtype=int)
    messages: list[str] = []
    if names and names[0] == "(Intercept)":
        v = v[1:, 1:]
        assign = assign[1:]
    else:
        msg = "No intercept: vifs may not be sensible."
        warnings.warn(msg, stacklevel=3)
        messages.append(msg)
    terms = list(term_labels)
    if len(terms) < 2:
        raise ModelError(f"gvif: model contains fewer than 2 terms ({len(terms)}: {terms}); "
                         "GVIFs compare two or more fixed-effect terms")
    sd = np.sqrt(np.diag(v))
    R = v / np.outer(sd, sd)
    det_r = np.linalg.det(R)
    gv, dfs = [], []
    for j in range(1, len(terms) + 1):
        subs = assign == j
        g = np.linalg.det(R[np.ix_(subs, subs)]) * np.linalg.det(R[np.ix_(~subs, ~subs)]) / det_r
        gv.append(float(g))
        dfs.append(int(subs.sum()))
    adj = [g ** (1.0 / (2 * d)) if d > 0 else float("nan") for g, d in zip(gv, dfs)]
    return GvifResult(terms=tuple(terms), gvif=tuple(gv), df=tuple(dfs), gvif_adj=tuple(adj),
                      messages=tuple(messages))


def gvif(m: GlmerResult) -> GvifResult:
    """Generalized variance-inflation factors of a GLMM's fixed effects, as ``car::vif(m)``.

    ``GVIF_j = det(R_jj) det(R_-j,-j) / det(R)`` with R the correlation matrix of
    ``vcov(m)`` without the intercept (Fox & Monette 1992, eq. 10); ``Df`` the number of
    columns of term j; ``GVIF^(1/(2 Df))``. car's error when the model has fewer than two
    terms, and its warning when it has no intercept.
    """
    require(m, "gvif")
    if not isinstance(m, GlmerResult):
        raise InputError(f"gvif() needs a GlmerResult, got {type(m).__name__}")
    if m.fixef.isna().any():
        raise ModelError("gvif: there are aliased coefficients in the model")
    return gvif_from_vcov(m.vcov, m.assign, m.term_labels)
