"""The result of a binomial GLMM fit, shared by the native and the lme4 engine.

:class:`GlmerResult` is a frozen dataclass; both engines build it through
:meth:`GlmerResult.from_estimates`, which derives the standard errors, z and p
values, correlations, AIC/BIC and the variance-component table exactly as lme4's
``summary.merMod``/``llikAIC``/``VarCorr`` do, so the two engines cannot drift apart
in presentation.

References: Bates, Mächler, Bolker & Walker (2015), *Fitting linear mixed-effects
models using lme4*, J. Stat. Softw. 67(1); lme4 1.1-31 ``print.summary.merMod``.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from mrcstats._dist import norm_sf
from mrcstats._repr import Result
from mrcstats.errors import InputError
from mrcstats.models._checks import check_level  # noqa: F401  (re-exported)
from mrcstats.models.design import DesignInfo
from mrcstats.models.family import BINOMIAL, Family
from mrcstats.models.formula import ModelSpec
from mrcstats.models.predict import predict as _predict

_QNAMES = ("Min", "1Q", "Median", "3Q", "Max")
COEF_COLUMNS = ("Estimate", "Std. Error", "z value", "Pr(>|z|)")


def wald_table(estimate: Mapping[str, float] | pd.Series, se: Mapping[str, float] | pd.Series) -> pd.DataFrame:
    """lme4's coefficient table from estimates and standard errors given elsewhere (e.g. a paper).

    ``z = estimate / se`` and ``p = 2 * pnorm(-|z|)`` (Wald z tests, as ``summary.merMod``), with the columns
    and term index of :meth:`GlmerResult.coef_table`; a fitted model's table comes from the fit itself.
    """
    est = pd.Series(estimate, dtype=float, name=COEF_COLUMNS[0])
    s = pd.Series(se, dtype=float).reindex(est.index).rename(COEF_COLUMNS[1])
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (est / s).rename(COEF_COLUMNS[2])
    p = pd.Series(2.0 * norm_sf(np.abs(z.to_numpy())), index=est.index, name=COEF_COLUMNS[3])
    return pd.concat([est, s, z, p], axis=1)


@dataclass(frozen=True, eq=False, repr=False)
class GlmerResult(Result):
    """A fitted GLMM, in lme4's terms; ``family`` (:class:`~mrcstats.models.family.Family`) is its
    response distribution and link (binomial-logit, Poisson-log).

    Attributes
    ----------
    fixef, se, z, p : pandas.Series indexed by R's column names (``LLM1``, ``scaled_tok:LLM1``).
        ``se`` from ``vcov`` (the rule ``vcov_method`` names); ``z = fixef / se``; ``p = 2 Φ(-|z|)``
        (``Pr(>|z|)``).
    vcov, corr : pandas.DataFrame, covariance and correlation of the fixed effects.
    vcov_method : which covariance ``vcov``/``se`` report, as lme4's ``vcov(m, use.hessian = )``:
        ``"hessian"`` (the default of both engines, lme4's default for a GLMM: 2 H⁻¹ of the deviance in
        (θ, β), β block) or ``"RX"`` (``use.hessian = FALSE``: (R_X' R_X)⁻¹ at θ̂, θ treated as known; also
        what a fit falls back to when H is not positive definite, with lme4's message).
    vcov_other : the other rule's covariance (None when not available); :meth:`use_vcov` switches.
    theta : pandas.Series, lme4's ``getME(m, "theta")``: per term the lower triangle of the
        relative covariance factor T, column by column, keyed ``"g.(Intercept)"``,
        ``"g.x.(Intercept)"``, ``"g.x"``; for random intercepts θ is the SD of the intercept.
    varcorr : pandas.DataFrame with columns ``group, name, var2, variance, sd``, rows as
        ``as.data.frame(VarCorr(m))``: SD rows (``var2`` None) then correlation rows
        (``variance`` = covariance, ``sd`` = correlation of ``name`` and ``var2``).
    ranef : mapping group -> DataFrame indexed by level, columns ``mode`` (conditional
        mode, ``ranef(m)``) and ``condvar`` (its conditional variance, ``attr(, "postVar")``).
    loglik, aic, bic, minus2loglik : as ``logLik``/``AIC``/``BIC``/``-2*logLik``; for cbind
        responses the log-likelihood includes the binomial coefficients (``binomial()$aic``).
    deviance : sum of squared deviance residuals, as lme4's ``deviance()`` for GLMMs.
    df_resid : nobs - number of parameters (``df.residual``).
    resid_quantiles : quantiles of the scaled Pearson residuals (``summary``'s "Scaled residuals").
    info : DesignInfo, the parsed formula (``info.spec``), column ``assign``, contrasts, levels.
    optinfo : optimizer details: ``par`` (θ then β), ``grad``, ``hessian``, ``nfev``, ...
    fit_options : the arguments needed to refit on ``frame`` (contrasts, levels, weights, nagq).
    """

    formula: str
    engine: str
    nagq: int
    fixef: pd.Series
    se: pd.Series
    z: pd.Series
    p: pd.Series
    vcov: pd.DataFrame
    corr: pd.DataFrame
    theta: pd.Series
    varcorr: pd.DataFrame
    ranef: Mapping[str, pd.DataFrame]
    loglik: float
    aic: float
    bic: float
    minus2loglik: float
    deviance: float
    df_resid: int
    nobs: int
    ngroups: Mapping[str, int]
    converged: bool
    singular: bool
    messages: tuple[str, ...]
    resid_quantiles: pd.Series
    fit_seconds: float
    info: DesignInfo | None = None
    family: Family = BINOMIAL
    dispersion: float | None = None
    optinfo: Mapping[str, Any] = field(default_factory=dict, repr=False)
    fit_options: Mapping[str, Any] = field(default_factory=dict, repr=False)
    frame: pd.DataFrame | None = field(default=None, repr=False)
    design: Any = field(default=None, repr=False)
    vcov_method: str = "hessian"
    vcov_other: pd.DataFrame | None = field(default=None, repr=False)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_estimates(cls, *, info: DesignInfo, beta: Sequence[float], vcov: np.ndarray,
                       theta: Sequence[float], group_names: Sequence[str], ngroups: Mapping[str, int],
                       ranef: Mapping[str, pd.DataFrame], loglik: float, deviance: float,
                       pearson_resid: np.ndarray | None = None, resid_quantiles: Sequence[float] | None = None,
                       nobs: int, converged: bool, messages: Sequence[str] = (), engine: str = "native",
                       nagq: int = 1, fit_seconds: float = float("nan"), formula: str | None = None,
                       singular: bool | None = None, optinfo: Mapping[str, Any] | None = None,
                       fit_options: Mapping[str, Any] | None = None, frame: pd.DataFrame | None = None,
                       theta_names: Sequence[str] | None = None, varcorr: pd.DataFrame | None = None,
                       design: Any = None, family: Family = BINOMIAL, npar_extra: int = 0) -> GlmerResult:
        """Build a result from the estimates; every derived figure is computed here.

        ``beta`` follows ``info.column_names``; ``theta`` and ``group_names`` follow lme4's
        random-term order; ``vcov`` is the covariance of β (lme4: ``vcov(m)``).
        Either ``pearson_resid`` (scaled Pearson residuals) or ``resid_quantiles`` is given.
        """
        names = list(info.column_names)
        beta = np.asarray(beta, dtype=float)
        V = np.asarray(vcov, dtype=float).reshape(len(names), len(names))
        se = np.sqrt(np.where(np.diag(V) >= 0, np.diag(V), np.nan))
        with np.errstate(divide="ignore", invalid="ignore"):
            z = beta / se
            d = np.sqrt(np.outer(np.diag(V), np.diag(V)))
            C = V / d
        p = 2.0 * norm_sf(np.abs(z))
        th = np.asarray(theta, dtype=float)
        tnames = list(theta_names) if theta_names is not None else [f"{g}.(Intercept)" for g in group_names]
        npar = len(names) + len(th) + npar_extra
        m2 = -2.0 * float(loglik)
        aic = m2 + 2 * npar
        bic = m2 + math.log(nobs) * npar
        if resid_quantiles is None:
            if pearson_resid is None:
                raise ValueError("from_estimates needs pearson_resid or resid_quantiles")
            resid_quantiles = np.quantile(np.asarray(pearson_resid, float), [0, .25, .5, .75, 1])
        vc = varcorr if varcorr is not None else pd.DataFrame(
            {"group": list(group_names), "name": ["(Intercept)"] * len(th), "var2": [None] * len(th),
             "variance": th ** 2, "sd": th})
        if singular is None:
            singular = bool(np.any(th < 1e-4))
        return cls(
            formula=formula or info.spec.formula, engine=engine, nagq=int(nagq),
            fixef=pd.Series(beta, index=names, name="Estimate"),
            se=pd.Series(se, index=names, name="Std. Error"),
            z=pd.Series(z, index=names, name="z value"),
            p=pd.Series(p, index=names, name="Pr(>|z|)"),
            vcov=pd.DataFrame(V, index=names, columns=names),
            corr=pd.DataFrame(C, index=names, columns=names),
            theta=pd.Series(th, index=tnames, name="theta"),
            varcorr=vc, ranef=dict(ranef), loglik=float(loglik), aic=aic, bic=bic, minus2loglik=m2,
            deviance=float(deviance), df_resid=int(nobs - npar), nobs=int(nobs), ngroups=dict(ngroups),
            converged=bool(converged), singular=bool(singular),
            messages=tuple(dict.fromkeys([*messages, *separation_messages(names, beta, se)])),  # each once
            resid_quantiles=pd.Series(np.asarray(resid_quantiles, float), index=list(_QNAMES)),
            fit_seconds=float(fit_seconds), info=info, optinfo=dict(optinfo or {}),
            fit_options=dict(fit_options or {}), frame=frame, design=design, family=family)

    def use_vcov(self, method: str) -> GlmerResult:
        """The same fit reporting the ``"hessian"`` or the ``"RX"`` covariance (lme4's
        ``vcov(m, use.hessian = TRUE/FALSE)``): ``se``, ``z``, ``p``, ``corr`` follow; the previous matrix
        becomes ``vcov_other``."""
        import dataclasses

        if method not in ("hessian", "RX"):
            raise InputError(f"vcov must be 'hessian' or 'RX' (lme4's use.hessian = TRUE/FALSE), got {method!r}")
        if method == self.vcov_method:
            return self
        if self.vcov_other is None:
            raise InputError(f"this fit has no {method} covariance (vcov_method is {self.vcov_method!r}; "
                             "nAGQ = 0 and out-of-core fits have the RX one only)")
        V = self.vcov_other.to_numpy(dtype=float)
        se = np.sqrt(np.where(np.diag(V) >= 0, np.diag(V), np.nan))
        with np.errstate(divide="ignore", invalid="ignore"):
            z = self.fixef.to_numpy(dtype=float) / se
            C = V / np.sqrt(np.outer(np.diag(V), np.diag(V)))
        idx = self.fixef.index
        return dataclasses.replace(
            self, vcov=self.vcov_other, vcov_other=self.vcov, vcov_method=method,
            se=pd.Series(se, index=idx, name="Std. Error"), z=pd.Series(z, index=idx, name="z value"),
            p=pd.Series(2.0 * norm_sf(np.abs(z)), index=idx, name="Pr(>|z|)"),
            corr=pd.DataFrame(C, index=idx, columns=idx))

    # ------------------------------------------------------------------ accessors
    @property
    def link(self) -> str:
        """The link's R name (``logit``, ``log``)."""
        return self.family.link

    @property
    def spec(self) -> ModelSpec | None:
        return self.info.spec if self.info is not None else None

    @property
    def assign(self) -> tuple[int, ...]:
        return self.info.assign if self.info is not None else ()

    @property
    def term_labels(self) -> tuple[str, ...]:
        return self.info.term_labels if self.info is not None else ()

    @property
    def contrasts(self) -> Mapping[str, str]:
        return self.info.contrasts if self.info is not None else {}

    @property
    def xlevels(self) -> Mapping[str, tuple[str, ...]]:
        return self.info.xlevels if self.info is not None else {}

    @property
    def npar(self) -> int:
        return len(self.fixef) + len(self.theta)

    def _varcorr(self) -> pd.DataFrame:
        """``varcorr`` with the ``var2`` column (None on SD rows) even for older results."""
        vc = self.varcorr
        if "var2" not in vc.columns:
            vc = vc.assign(var2=None)
        return vc

    def coef_table(self) -> pd.DataFrame:
        """The fixed-effects table of ``summary()`` (Estimate, Std. Error, z value, Pr(>|z|)), indexed by term."""
        return pd.concat([self.fixef, self.se, self.z, self.p], axis=1)

    def confint(self, method: str = "profile", level: float = 0.95, nsim: int = 1000, seed: int | None = None,
                parm: Any = None, **kw: Any):
        """lme4's ``confint(m, parm, level, method)``: ``"Wald"``, ``"profile"`` (default, as lme4)
        or ``"boot"`` (parametric bootstrap, ``nsim`` refits, ``seed``); rows ``.sig01``, …
        then the fixed effects. See :mod:`mrcstats.models.confint` (imported here: fitting does not load it)."""
        from mrcstats.models.confint import confint as _confint

        return _confint(self, method=method, level=level, nsim=nsim, seed=seed, parm=parm, **kw)

    def predict(self, newdata: pd.DataFrame | None = None, re_form: str | None = None,
                type: str = "link", allow_new_levels: bool = False) -> np.ndarray:
        """Predictions as lme4's ``predict.merMod``; see :func:`mrcstats.models.predict.predict`."""
        return _predict(self, newdata, re_form=re_form, type=type, allow_new_levels=allow_new_levels)

    # ------------------------------------------------------------------ output
    def to_dict(self) -> dict[str, Any]:
        """The CLI ``--json`` object (issue: formula, engine, nobs, ngroups, fixef, se, ...)."""
        return {
            "formula": self.formula, "family": self.family.name, "link": self.family.link, "engine": self.engine,
            "nagq": self.nagq, "nobs": self.nobs, "vcov_method": self.vcov_method,
            "ngroups": dict(self.ngroups),
            "fixef": self.fixef.to_dict(), "se": self.se.to_dict(), "z": self.z.to_dict(), "p": self.p.to_dict(),
            "theta": self.theta.to_dict(),
            "varcorr": [{"group": r.group, "name": r.name, "var2": r.var2 if isinstance(r.var2, str) else None,
                         "variance": float(r.variance),
                         "sd": float(r.sd)} for r in self._varcorr().itertuples(index=False)],
            "loglik": self.loglik, "aic": self.aic, "bic": self.bic, "minus2loglik": self.minus2loglik,
            "deviance": self.deviance, "df_resid": self.df_resid, "converged": self.converged,
            "singular": self.singular, "messages": list(self.messages), "fit_seconds": self.fit_seconds,
            **({"dispersion": self.dispersion} if self.dispersion is not None else {}),
        }

    def ranef_dict(self) -> dict[str, dict[str, dict[str, float]]]:
        """``{group: {level: {"mode", "condvar"}}}`` (the CLI's ``--ranef``); for slope terms the
        keys are the columns (``(Intercept)``, ``x``) and ``condvar:<column>``."""
        return ranef_dict(self.ranef)

    def to_frame(self) -> pd.DataFrame:
        """Fixed effects then random-effect SDs, one row per parameter (tidy, like broom.mixed)."""
        fx = self.coef_table().reset_index(names="term")
        fx.columns = ["term", "estimate", "std_error", "statistic", "p_value"]
        fx.insert(0, "effect", "fixed")
        fx.insert(1, "group", None)
        vc = self._varcorr()
        terms = [f"cor__{r.name}.{r.var2}" if isinstance(r.var2, str) else f"sd__{r.name}" for r in vc.itertuples()]
        rx = pd.DataFrame({"effect": "ran_pars", "group": list(vc["group"]),
                           "term": terms, "estimate": list(vc["sd"]),
                           "std_error": np.nan, "statistic": np.nan, "p_value": np.nan})
        return pd.concat([fx, rx], ignore_index=True)

    def summary(self) -> str:
        """The text of lme4's ``summary(m)`` (seed 003 Appendix B layout)."""
        out = []
        meth = ("Laplace Approximation" if self.nagq == 1
                else f"Adaptive Gauss-Hermite Quadrature, nAGQ = {self.nagq}")
        out.append(f"Generalized linear mixed model fit by maximum likelihood ({meth}) ['glmerMod']")
        out.append(f" Family: {self.family}  ( {self.link} )")
        out.append(f"Formula: {self.formula}")
        out.append(f" Engine: {self.engine}")
        out.append("")
        tab = [("AIC", self.aic), ("BIC", self.bic), ("logLik", self.loglik), ("deviance", self.minus2loglik)]
        cells = [_fmt_sig(v, 6) for _, v in tab] + [str(self.df_resid)]
        heads = [h for h, _ in tab] + ["df.resid"]
        w = [max(len(h), len(c)) + 1 for h, c in zip(heads, cells)]
        out.append(" ".join(h.rjust(k) for h, k in zip(heads, w)))
        out.append(" ".join(c.rjust(k) for c, k in zip(cells, w)))
        out.append("")
        out.append("Scaled residuals: ")
        q = [f"{v:.4f}" for v in self.resid_quantiles]
        wq = max(len(x) for x in q + list(_QNAMES))
        out.append(" ".join(h.rjust(wq) for h in _QNAMES))
        out.append(" ".join(x.rjust(wq) for x in q))
        out.append("")
        out.append("Random effects:")
        out.extend(_varcorr_lines(self._varcorr()))
        grp = "; ".join(f"{k}, {v}" for k, v in self.ngroups.items())
        out.append(f"Number of obs: {self.nobs}, groups:  {grp}")
        if self.dispersion is not None:     # glmmTMB's wording for the beta-binomial's φ
            out.append(f"\nDispersion parameter for {self.family.name} family (): {_fmt_sig(self.dispersion, 3)}")
        out.append("")
        out.append(f"Fixed effects (standard errors: {'Hessian' if self.vcov_method == 'hessian' else 'RX'}-based "
                   f"vcov, lme4's use.hessian = {'TRUE' if self.vcov_method == 'hessian' else 'FALSE'}):")
        out.extend(_coef_lines(self.coef_table()))
        out.append("---")
        out.append("Signif. codes:  0 '***' 0.001 '**' 0.01 '*' 0.05 '.' 0.1 ' ' 1")
        if len(self.fixef) > 1:
            out.append("")
            out.append("Correlation of Fixed Effects:")
            out.extend(_corr_lines(self.corr))
        if self.messages:
            out.append("")
            out.extend(self.messages)
        return "\n".join(out)

    def __str__(self) -> str:
        return self.summary()


def ranef_dict(ranef: Mapping[str, pd.DataFrame]) -> dict[str, dict[str, dict[str, float]]]:
    """``{group: {level: {column: value}}}`` of per-group random-effect frames (``ranef``), for JSON."""
    return {g: {str(k): {str(c): float(v) for c, v in r.items()} for k, r in df.iterrows()}
            for g, df in ranef.items()}


#: a fixed effect is flagged as separated when |estimate| > SEPARATION_ESTIMATE and its SE exceeds
#: SEPARATION_SE_RATIO * |estimate| (logit scale): the likelihood is flat in that direction
SEPARATION_ESTIMATE = 10.0
SEPARATION_SE_RATIO = 10.0


def separation_messages(names: Sequence[str], beta: np.ndarray, se: np.ndarray) -> list[str]:
    """Warnings for fixed effects that look (quasi-)separated: a huge estimate with a far larger SE.

    Under separation the maximum likelihood estimate is infinite; the optimizer stops at
    some large value (e.g. 17.49 with SE 4445) whose Wald z and p mean nothing. Criterion:
    ``|b| > 10`` and ``SE > 10 |b|`` on the logit scale (cf. Heinze & Schemper 2002;
    R's glm warns "fitted probabilities numerically 0 or 1 occurred").
    """
    out = []
    for n, b, s in zip(names, np.asarray(beta, float), np.asarray(se, float)):
        if np.isfinite(b) and abs(b) > SEPARATION_ESTIMATE and (not np.isfinite(s) or s > SEPARATION_SE_RATIO * abs(b)):
            out.append(f"possible separation: {n} = {b:.4g} with SE {s:.4g}; the outcome is (almost) perfectly "
                       f"predicted along this term, so its estimate, SE, z and p are not reliable (check the "
                       f"cross-table of the outcome and this term; drop or merge the offending level)")
    return out


# ----------------------------------------------------------------------------- formatting


def _varcorr_lines(vc: pd.DataFrame) -> list[str]:
    """lme4's ``print(VarCorr(m))`` block of ``summary``: Groups, Name, Variance, Std.Dev.
    and, when a term has several columns, the lower triangle of correlations (``Corr``)."""
    sdrows = vc[vc["var2"].isna()]
    cors = vc[vc["var2"].notna()]
    cor = {(r.group, r.name, r.var2): r.sd for r in cors.itertuples()}
    g, nm, va, sd, cr = ["Groups"], ["Name"], ["Variance"], ["Std.Dev."], ["Corr"]
    prev = None
    names_in_group: list[str] = []
    for r in sdrows.itertuples():
        if r.group != prev:
            names_in_group = []
        g.append(r.group if r.group != prev else "")
        prev = r.group
        nm.append(r.name)
        va.append(_fmt_sig(r.variance, 4))
        sd.append(_fmt_sig(r.sd, 4))
        cr.append(" ".join(f"{cor.get((r.group, o, r.name), float('nan')):.2f}".rjust(5)
                           for o in names_in_group))
        names_in_group.append(r.name)
    wg, wn, wv, ws = (max(map(len, x)) for x in (g, nm, va, sd))
    with_corr = len(cors) > 0
    lines = []
    for a, b, c, d, e in zip(g, nm, va, sd, cr):
        line = f" {a.ljust(wg)} {b.ljust(wn)} {c.ljust(wv)} {d.ljust(ws) if with_corr else d}"
        if with_corr:
            line += f" {e}"
        lines.append(line.rstrip())
    return lines


def _fmt_sig(v: float, digits: int) -> str:
    if v is None or not np.isfinite(v):
        return "NA"
    if v == 0:
        return "0"
    if abs(v) < 1e-4 or abs(v) >= 1e15:  # R's format(): scientific where fixed notation would be long
        return f"{v:.{digits}g}"
    mag = math.floor(math.log10(abs(v)))
    dec = max(0, digits - 1 - mag)
    return f"{v:.{dec}f}"


def _stars(p: float) -> str:
    if not np.isfinite(p):
        return ""
    return "***" if p < 0.001 else "**" if p < 0.01 else "*" if p < 0.05 else "." if p < 0.1 else ""


def _coef_lines(tab: pd.DataFrame) -> list[str]:
    est, se, z, p = (tab.iloc[:, k].to_numpy() for k in range(4))
    # R's printCoefmat: estimates and SEs share a number of decimals (digits = 5 significant)
    finite = np.abs(np.concatenate([est, se]))
    finite = finite[np.isfinite(finite) & (finite > 0)]
    dec = 6
    if finite.size:
        dec = int(min(10, max(0, 5 - 1 - math.floor(math.log10(finite.min())))))
        dec = max(dec, 3)
    cols = {
        "Estimate": [f"{v:.{dec}f}" for v in est],
        "Std. Error": [f"{v:.{dec}f}" for v in se],
        "z value": [f"{v:.3f}" if np.isfinite(v) else "NA" for v in z],
        "Pr(>|z|)": [("< 2e-16" if pv < 2e-16 else f"{pv:.3g}" if pv < 1e-4 else f"{pv:.5f}")
                     if np.isfinite(pv) else "NA" for pv in p],
    }
    names = list(tab.index)
    wn = max(len(n) for n in names)
    widths = {k: max(len(k), max(len(x) for x in v)) for k, v in cols.items()}
    lines = [" " * wn + " " + " ".join(k.rjust(widths[k]) for k in cols)]
    for i, n in enumerate(names):
        row = " ".join(cols[k][i].rjust(widths[k]) for k in cols)
        lines.append(f"{n.ljust(wn)} {row} {_stars(p[i])}".rstrip())
    return lines


def r_abbreviate(name: str, minlength: int) -> str:
    """R's ``abbreviate(name, minlength)``: drop lower-case vowels, then lower-case
    letters, from the right (never the first character), until short enough."""
    chars = list(name.replace(" ", ""))
    if len(chars) <= minlength:
        return "".join(chars)
    for pred in (lambda c: c in "aeiou", lambda c: c.islower()):
        i = len(chars) - 1
        while len(chars) > minlength and i > 0:
            if pred(chars[i]):
                del chars[i]
            i -= 1
    return "".join(chars)


def _corr_lines(C: pd.DataFrame) -> list[str]:
    names = list(C.index)
    rn = [r_abbreviate(n, 11) for n in names]
    cn = [r_abbreviate(n, 6) for n in rn]
    vals = C.to_numpy()
    cells = [[f"{vals[i, j]:.3f}" if j < i else "" for j in range(len(names) - 1)] for i in range(1, len(names))]
    wr = max(len(r) for r in rn[1:])
    wc = [max([len(cn[j])] + [len(cells[i][j]) for i in range(len(cells))]) for j in range(len(names) - 1)]
    lines = [" " * wr + " " + " ".join(cn[j].ljust(wc[j]) for j in range(len(wc)))]
    for i, row in enumerate(cells):
        lines.append(rn[i + 1].ljust(wr) + " " + " ".join(c.rjust(wc[j]) if c else " " * wc[j]
                                                           for j, c in enumerate(row)).rstrip())
    return lines
