"""The result of a binomial GLMM fit, shared by the native and the lme4 engine.

:class:`GlmerResult` is a frozen dataclass; both engines build it through
:meth:`GlmerResult.from_estimates`, which derives the standard errors, z and p
values, correlations, AIC/BIC and the variance-component table exactly as lme4's
``summary.merMod``/``llikAIC``/``VarCorr`` do, so the two engines cannot drift apart
in presentation. It stores arrays and plain records; its pandas attributes are built when
first read, and its text and JSON output need no pandas (issue 28).

References: Bates, Mächler, Bolker & Walker (2015), *Fitting linear mixed-effects
models using lme4*, J. Stat. Softw. 67(1); lme4 1.1-31 ``print.summary.merMod``.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from mrcstats._dist import norm_sf
from mrcstats._pformat import format_pval
from mrcstats._repr import Result
from mrcstats.errors import InputError
from mrcstats.models._checks import check_level  # noqa: F401  (re-exported)
from mrcstats.models.design import DesignInfo
from mrcstats.models.family import BINOMIAL, Family, RecordsFamily
from mrcstats.models.family_table import Capabilities
from mrcstats.models.formula import ModelSpec
from mrcstats.models.records import (
    RanefTable,
    VarCorrRow,
    as_varcorr_rows,
    named_series,
    named_square,
    varcorr_to_frame,
)

if TYPE_CHECKING:
    import pandas as pd

_QNAMES = ("Min", "1Q", "Median", "3Q", "Max")
COEF_COLUMNS = ("Estimate", "Std. Error", "z value", "Pr(>|z|)")


def wald_table(estimate: Mapping[str, float] | pd.Series, se: Mapping[str, float] | pd.Series) -> pd.DataFrame:
    """lme4's coefficient table from estimates and standard errors given elsewhere (e.g. a paper).

    ``z = estimate / se`` and ``p = 2 * pnorm(-|z|)`` (Wald z tests, as ``summary.merMod``), with the columns
    and term index of :meth:`GlmerResult.coef_table`; a fitted model's table comes from the fit itself.
    """
    import pandas as pd

    est = pd.Series(estimate, dtype=float, name=COEF_COLUMNS[0])
    s = pd.Series(se, dtype=float).reindex(est.index).rename(COEF_COLUMNS[1])
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (est / s).rename(COEF_COLUMNS[2])
    p = pd.Series(2.0 * norm_sf(np.abs(z.to_numpy())), index=est.index, name=COEF_COLUMNS[3])
    return pd.concat([est, s, z, p], axis=1)


def wald(beta: np.ndarray, V: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``summary.merMod``'s Wald figures from β and its covariance V: standard errors ``sqrt(diag(V))`` (NaN for
    a negative variance), ``z = β / se``, ``p = 2 Φ(-|z|)`` and the correlation matrix of V."""
    dv = np.diag(V)
    se = np.sqrt(np.where(dv >= 0, dv, np.nan))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = beta / se
        C = V / np.sqrt(np.outer(dv, dv))
    return se, z, 2.0 * norm_sf(np.abs(z)), C


def _matrix(V: Any, k: int) -> np.ndarray:
    """A k x k covariance as a float array (from an array, nested lists or a DataFrame)."""
    return np.asarray(V.to_numpy(dtype=float) if hasattr(V, "to_numpy") else V, dtype=float).reshape(k, k)


@dataclass(frozen=True, eq=False, repr=False)
class GlmerResult(Result, RecordsFamily):
    """A fitted GLMM, in lme4's terms; ``family`` (:class:`~mrcstats.models.family.Family`) is its
    response distribution and link (binomial-logit, Poisson-log), a required field that the engine which built
    the fit sets from its design (no default: a result never claims a family nobody asked for).

    The estimates are stored as NumPy arrays with their names and the random-effect tables as plain records
    (:mod:`mrcstats.models.records`); the pandas attributes below are built from them when first read, so
    ``to_dict()``, ``ranef_dict()`` and ``summary()`` (``mrcstats glmer --json``) never import pandas (issue 28).

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
    resid_quantiles : quantiles of the scaled Pearson residuals (``summary``'s "Scaled residuals").
    fixef_names, fixef_values, vcov_values, vcov_other_values, theta_names, theta_values, varcorr_rows,
    ranef_tables, resid_quantile_values : the stored figures behind the pandas attributes above (arrays,
        tuples of names, :class:`~mrcstats.models.records.VarCorrRow` and
        :class:`~mrcstats.models.records.RanefTable` records); ``dataclasses.replace`` takes these.
    loglik, aic, bic, minus2loglik : as ``logLik``/``AIC``/``BIC``/``-2*logLik``; for cbind
        responses the log-likelihood includes the binomial coefficients (``binomial()$aic``).
    deviance : sum of squared deviance residuals, as lme4's ``deviance()`` for GLMMs.
    df_resid : nobs - number of parameters (``df.residual``).
    info : DesignInfo, the parsed formula (``info.spec``), column ``assign``, contrasts, levels.
    optinfo : optimizer details: ``par`` (θ then β), ``grad``, ``hessian``, ``nfev``, ...
    fit_options : the arguments needed to refit on ``frame`` (contrasts, levels, weights, nagq).
    """

    formula: str
    engine: str
    nagq: int
    fixef_names: tuple[str, ...]
    fixef_values: np.ndarray
    vcov_values: np.ndarray
    theta_names: tuple[str, ...]
    theta_values: np.ndarray
    varcorr_rows: tuple[VarCorrRow, ...]
    ranef_tables: Mapping[str, RanefTable]
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
    resid_quantile_values: np.ndarray
    fit_seconds: float
    family: Family                    # required: set by the engine that built the fit (design.family)
    info: DesignInfo | None = None
    dispersion: float | None = None
    optinfo: Mapping[str, Any] = field(default_factory=dict, repr=False)
    fit_options: Mapping[str, Any] = field(default_factory=dict, repr=False)
    frame: pd.DataFrame | None = field(default=None, repr=False)
    design: Any = field(default=None, repr=False)
    vcov_method: str = "hessian"
    vcov_other_values: np.ndarray | None = field(default=None, repr=False)

    STORED_FAMILY = BINOMIAL           # a fit stored before results recorded their family (RecordsFamily)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_estimates(cls, *, info: DesignInfo, beta: Sequence[float], vcov: np.ndarray,
                       theta: Sequence[float], group_names: Sequence[str], ngroups: Mapping[str, int],
                       ranef: Mapping[str, RanefTable | pd.DataFrame], loglik: float, deviance: float,
                       pearson_resid: np.ndarray | None = None, resid_quantiles: Sequence[float] | None = None,
                       nobs: int, converged: bool, messages: Sequence[str] = (), engine: str = "native",
                       nagq: int = 1, fit_seconds: float = float("nan"), formula: str | None = None,
                       singular: bool | None = None, optinfo: Mapping[str, Any] | None = None,
                       fit_options: Mapping[str, Any] | None = None, frame: pd.DataFrame | None = None,
                       theta_names: Sequence[str] | None = None,
                       varcorr: Iterable[VarCorrRow] | pd.DataFrame | None = None,
                       design: Any = None, family: Family, npar_extra: int = 0,
                       vcov_method: str = "hessian", vcov_other: np.ndarray | pd.DataFrame | None = None,
                       dispersion: float | None = None) -> GlmerResult:
        """Build a result from the estimates; AIC, BIC, df and the separation messages are computed here,
        ``se``, ``z``, ``p`` and ``corr`` from ``beta`` and ``vcov`` when read (:func:`wald`).

        ``beta`` follows ``info.column_names``; ``theta`` and ``group_names`` follow lme4's
        random-term order; ``vcov`` is the covariance of β (lme4: ``vcov(m)``), by the rule ``vcov_method``
        names, and ``vcov_other`` the other rule's (arrays or DataFrames).
        Either ``pearson_resid`` (scaled Pearson residuals) or ``resid_quantiles`` is given.
        ``varcorr`` (default: one random intercept per group, SD θ) and the ``ranef`` tables may be records
        (:mod:`mrcstats.models.records`) or pandas frames.
        ``family`` (required) is the design's family, the one the engine fitted.
        """
        names = tuple(info.column_names)
        beta = np.asarray(beta, dtype=float)
        V = _matrix(vcov, len(names))
        se = wald(beta, V)[0]
        th = np.asarray(theta, dtype=float)
        tnames = tuple(theta_names) if theta_names is not None else tuple(f"{g}.(Intercept)" for g in group_names)
        npar = len(names) + len(th) + npar_extra
        m2 = -2.0 * float(loglik)
        aic = m2 + 2 * npar
        bic = m2 + math.log(nobs) * npar
        if resid_quantiles is None:
            if pearson_resid is None:
                raise ValueError("from_estimates needs pearson_resid or resid_quantiles")
            resid_quantiles = np.quantile(np.asarray(pearson_resid, float), [0, .25, .5, .75, 1])
        vc = (as_varcorr_rows(varcorr) if varcorr is not None else
              tuple(VarCorrRow(g, "(Intercept)", None, float(t ** 2), float(t)) for g, t in zip(group_names, th)))
        if singular is None:
            singular = bool(np.any(th < 1e-4))
        return cls(
            formula=formula or info.spec.formula, engine=engine, nagq=int(nagq),
            fixef_names=names, fixef_values=beta, vcov_values=V, theta_names=tnames, theta_values=th,
            varcorr_rows=vc, ranef_tables={g: t if isinstance(t, RanefTable) else RanefTable.from_frame(t)
                                           for g, t in ranef.items()},
            loglik=float(loglik), aic=aic, bic=bic, minus2loglik=m2,
            deviance=float(deviance), df_resid=int(nobs - npar), nobs=int(nobs), ngroups=dict(ngroups),
            converged=bool(converged), singular=bool(singular),
            messages=tuple(dict.fromkeys([*messages, *separation_messages(names, beta, se)])),  # each once
            resid_quantile_values=np.asarray(resid_quantiles, float),
            fit_seconds=float(fit_seconds), info=info, optinfo=dict(optinfo or {}),
            fit_options=dict(fit_options or {}), frame=frame, design=design, family=family,
            dispersion=dispersion, vcov_method=vcov_method,
            vcov_other_values=None if vcov_other is None else _matrix(vcov_other, len(names)))

    def use_vcov(self, method: str) -> GlmerResult:
        """The same fit reporting the ``"hessian"`` or the ``"RX"`` covariance (lme4's
        ``vcov(m, use.hessian = TRUE/FALSE)``): ``se``, ``z``, ``p``, ``corr`` follow; the previous matrix
        becomes ``vcov_other``."""
        import dataclasses

        if method not in ("hessian", "RX"):
            raise InputError(f"vcov must be 'hessian' or 'RX' (lme4's use.hessian = TRUE/FALSE), got {method!r}")
        if method == self.vcov_method:
            return self
        if self.vcov_other_values is None:
            raise InputError(f"this fit has no {method} covariance (vcov_method is {self.vcov_method!r}; "
                             "nAGQ = 0 and out-of-core fits have the RX one only)")
        return dataclasses.replace(self, vcov_values=self.vcov_other_values, vcov_other_values=self.vcov_values,
                                   vcov_method=method)

    # ------------------------------------------------------------------ the pandas views (built when read)
    @cached_property
    def _wald(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(se, z, p, corr) arrays of ``fixef_values`` and ``vcov_values`` (:func:`wald`)."""
        return wald(self.fixef_values, self.vcov_values)

    def _series(self, values: np.ndarray, name: str) -> pd.Series:
        return named_series(values, self.fixef_names, name)

    def _square(self, values: np.ndarray) -> pd.DataFrame:
        return named_square(values, self.fixef_names)

    @cached_property
    def fixef(self) -> pd.Series:
        return self._series(self.fixef_values, COEF_COLUMNS[0])

    @cached_property
    def se(self) -> pd.Series:
        return self._series(self._wald[0], COEF_COLUMNS[1])

    @cached_property
    def z(self) -> pd.Series:
        return self._series(self._wald[1], COEF_COLUMNS[2])

    @cached_property
    def p(self) -> pd.Series:
        return self._series(self._wald[2], COEF_COLUMNS[3])

    @cached_property
    def vcov(self) -> pd.DataFrame:
        return self._square(self.vcov_values)

    @cached_property
    def corr(self) -> pd.DataFrame:
        return self._square(self._wald[3])

    @cached_property
    def vcov_other(self) -> pd.DataFrame | None:
        return None if self.vcov_other_values is None else self._square(self.vcov_other_values)

    @cached_property
    def theta(self) -> pd.Series:
        return named_series(self.theta_values, self.theta_names, "theta")

    @cached_property
    def varcorr(self) -> pd.DataFrame:
        return varcorr_to_frame(self.varcorr_rows)

    @cached_property
    def ranef(self) -> dict[str, pd.DataFrame]:
        return {g: t.to_pandas() for g, t in self.ranef_tables.items()}

    @cached_property
    def resid_quantiles(self) -> pd.Series:
        import pandas as pd

        return pd.Series(self.resid_quantile_values, index=list(_QNAMES))

    # ------------------------------------------------------------------ accessors
    @property
    def link(self) -> str:
        """The link's R name (``logit``, ``log``)."""
        return self.family.link

    @property
    def capabilities(self) -> Capabilities:
        """What this fit supports: its family's row of :data:`~mrcstats.models.family_table.CAPABILITIES`."""
        return self.family.capabilities

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
        return len(self.fixef_names) + len(self.theta_values)

    def _varcorr(self) -> pd.DataFrame:
        """``varcorr`` (it always has the ``var2`` column, None on SD rows)."""
        return self.varcorr

    def coef_table(self) -> pd.DataFrame:
        """The fixed-effects table of ``summary()`` (Estimate, Std. Error, z value, Pr(>|z|)), indexed by term."""
        import pandas as pd

        return pd.concat([self.fixef, self.se, self.z, self.p], axis=1)

    def confint(self, method: str = "profile", level: float = 0.95, nsim: int = 1000, seed: int | None = None,
                parm: Any = None, **kw: Any):
        """lme4's ``confint(m, parm, level, method)``: ``"Wald"``, ``"profile"`` (default, as lme4)
        or ``"boot"`` (parametric bootstrap, ``nsim`` refits, ``seed``); rows ``.sig01``, …
        then the fixed effects. See :mod:`mrcstats.models.confint` (imported here: fitting does not load it)."""
        from mrcstats.models.confint import confint as _confint

        return _confint(self, method=method, level=level, nsim=nsim, seed=seed, parm=parm, **kw)

    def simulate(self, nsim: int = 1, seed: int | None = None):
        """lme4's ``simulate(m, nsim, seed)`` (new random effects); see :func:`mrcstats.models.simulate.simulate`."""
        from mrcstats.models.simulate import simulate as _simulate

        return _simulate(self, nsim=nsim, seed=seed)

    def predict(self, newdata: pd.DataFrame | None = None, re_form: str | None = None,
                type: str = "link", allow_new_levels: bool = False) -> np.ndarray:
        """Predictions as lme4's ``predict.merMod``; see :func:`mrcstats.models.predict.predict`."""
        from mrcstats.models.predict import predict as _predict

        return _predict(self, newdata, re_form=re_form, type=type, allow_new_levels=allow_new_levels)

    # ------------------------------------------------------------------ output
    def to_dict(self) -> dict[str, Any]:
        """The CLI ``--json`` object (issue: formula, engine, nobs, ngroups, fixef, se, ...); no pandas."""
        se, z, p, _ = self._wald

        def named(values: np.ndarray) -> dict[str, float]:
            return dict(zip(self.fixef_names, np.asarray(values, dtype=float).tolist()))

        return {
            "formula": self.formula, "family": self.family.name, "link": self.family.link, "engine": self.engine,
            "nagq": self.nagq, "nobs": self.nobs, "vcov_method": self.vcov_method,
            "ngroups": dict(self.ngroups),
            "fixef": named(self.fixef_values), "se": named(se), "z": named(z), "p": named(p),
            "theta": dict(zip(self.theta_names, self.theta_values.tolist())),
            "varcorr": [r._asdict() for r in self.varcorr_rows],
            "loglik": self.loglik, "aic": self.aic, "bic": self.bic, "minus2loglik": self.minus2loglik,
            "deviance": self.deviance, "df_resid": self.df_resid, "converged": self.converged,
            "singular": self.singular, "messages": list(self.messages), "fit_seconds": self.fit_seconds,
            **({"dispersion": self.dispersion} if self.dispersion is not None else {}),
        }

    def ranef_dict(self) -> dict[str, dict[str, dict[str, float]]]:
        """``{group: {level: {"mode", "condvar"}}}`` (the CLI's ``--ranef``); for slope terms the
        keys are the columns (``(Intercept)``, ``x``) and ``condvar:<column>``."""
        return ranef_dict(self.ranef_tables)

    def to_frame(self) -> pd.DataFrame:
        """Fixed effects then random-effect SDs, one row per parameter (tidy, like broom.mixed)."""
        import pandas as pd

        fx = self.coef_table().reset_index(names="term")
        fx.columns = ["term", "estimate", "std_error", "statistic", "p_value"]
        fx.insert(0, "effect", "fixed")
        fx.insert(1, "group", None)
        vc = self.varcorr_rows
        terms = [f"cor__{r.name}.{r.var2}" if r.var2 is not None else f"sd__{r.name}" for r in vc]
        rx = pd.DataFrame({"effect": "ran_pars", "group": [r.group for r in vc],
                           "term": terms, "estimate": [r.sd for r in vc],
                           "std_error": np.nan, "statistic": np.nan, "p_value": np.nan})
        return pd.concat([fx, rx], ignore_index=True)

    def summary(self, correlation: bool | None = None) -> str:
        """The text of lme4's ``summary(m)`` (seed 003 Appendix B layout).

        ``correlation``: print the correlation matrix of the fixed effects. None (the default) follows
        lme4's ``print.summary.merMod``: shown when there are at most :data:`COR_MAX` fixed effects
        (``getOption("lme4.summary.cor.max")``, 12), otherwise a note says how to ask for it.
        """
        out = []
        meth = ("Laplace Approximation" if self.nagq == 1
                else f"Adaptive Gauss-Hermite Quadrature, nAGQ = {self.nagq}")
        out.append(f"Generalized linear mixed model fit by maximum likelihood ({meth}) ['glmerMod']")
        out.append(f" Family: {self.family}  ( {self.link} )")
        out.append(f"Formula: {self.formula}")
        out.append(f" Engine: {self.engine}")
        out.append("")
        tab = [("AIC", self.aic), ("BIC", self.bic), ("logLik", self.loglik), ("deviance", self.minus2loglik)]
        cells = [fmt_sig(v, 6) for _, v in tab] + [str(self.df_resid)]
        heads = [h for h, _ in tab] + ["df.resid"]
        w = [max(len(h), len(c)) + 1 for h, c in zip(heads, cells)]
        out.append(" ".join(h.rjust(k) for h, k in zip(heads, w)))
        out.append(" ".join(c.rjust(k) for c, k in zip(cells, w)))
        out.append("")
        out.append("Scaled residuals: ")
        q = [f"{v:.4f}" for v in self.resid_quantile_values]
        wq = max(len(x) for x in q + list(_QNAMES))
        out.append(" ".join(h.rjust(wq) for h in _QNAMES))
        out.append(" ".join(x.rjust(wq) for x in q))
        out.append("")
        out.append("Random effects:")
        out.extend(varcorr_lines(self.varcorr_rows))
        grp = "; ".join(f"{k}, {v}" for k, v in self.ngroups.items())
        out.append(f"Number of obs: {self.nobs}, groups:  {grp}")
        if self.dispersion is not None:     # glmmTMB's wording for the beta-binomial's φ
            out.append(f"\nDispersion parameter for {self.family.name} family (): {fmt_sig(self.dispersion, 3)}")
        out.append("")
        out.append(f"Fixed effects (standard errors: {'Hessian' if self.vcov_method == 'hessian' else 'RX'}-based "
                   f"vcov, lme4's use.hessian = {'TRUE' if self.vcov_method == 'hessian' else 'FALSE'}):")
        out.extend(_coef_block(self.fixef_names, self.fixef_values, *self._wald[:3]))
        out.append("---")
        out.append("Signif. codes:  0 '***' 0.001 '**' 0.01 '*' 0.05 '.' 0.1 ' ' 1")
        p = len(self.fixef_names)
        if correlation is None:
            correlation = p <= COR_MAX
            if not correlation:
                out += ["", f"Correlation matrix not shown by default, as p = {p} > {COR_MAX}.",
                        "Use summary(correlation=True) (CLI: --correlation)  or",
                        "    vcov        if you need it"]
        if correlation and p > 1:
            out.append("")
            out.append("Correlation of Fixed Effects:")
            out.extend(_corr_lines(self.fixef_names, self._wald[3]))
        if self.messages:
            out.append("")
            out.extend(self.messages)
        return "\n".join(out)

    def __str__(self) -> str:
        return self.summary()


def ranef_dict(ranef: Mapping[str, RanefTable | pd.DataFrame]) -> dict[str, dict[str, dict[str, float]]]:
    """``{group: {level: {column: value}}}`` of per-group random-effect tables or frames (``ranef``), for JSON."""
    return {g: (t if isinstance(t, RanefTable) else RanefTable.from_frame(t)).to_dict() for g, t in ranef.items()}


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


def varcorr_lines(vc: Iterable[VarCorrRow] | pd.DataFrame) -> list[str]:
    """lme4's ``print(VarCorr(m))`` block of ``summary``: Groups, Name, Variance, Std.Dev.
    and, when a term has several columns, the lower triangle of correlations (``Corr``);
    ``vc`` as ``varcorr`` (records or a frame)."""
    rows = as_varcorr_rows(vc)
    sdrows = [r for r in rows if r.var2 is None]
    cors = [r for r in rows if r.var2 is not None]
    cor = {(r.group, r.name, r.var2): r.sd for r in cors}
    g, nm, va, sd, cr = ["Groups"], ["Name"], ["Variance"], ["Std.Dev."], ["Corr"]
    prev = None
    names_in_group: list[str] = []
    for r in sdrows:
        if r.group != prev:
            names_in_group = []
        g.append(r.group if r.group != prev else "")
        prev = r.group
        nm.append(r.name)
        va.append(fmt_sig(r.variance, 4))
        sd.append(fmt_sig(r.sd, 4))
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


#: lme4's ``getOption("lme4.summary.cor.max")``: above this many fixed effects ``summary()`` leaves out their
#: correlation matrix unless asked (``print.summary.merMod(correlation = NULL)``)
COR_MAX = 12

def fmt_sig(v: float, digits: int) -> str:
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


def coef_lines(tab: pd.DataFrame) -> list[str]:
    """:func:`_coef_block` of a coefficient table (estimate, SE, statistic, p columns, indexed by term)."""
    return _coef_block(list(tab.index), *(tab.iloc[:, k].to_numpy() for k in range(4)))


def _coef_block(names: Sequence[str], est: np.ndarray, se: np.ndarray, z: np.ndarray, p: np.ndarray) -> list[str]:
    """R's ``printCoefmat`` of ``summary``: Estimate, Std. Error, z value, Pr(>|z|) and the stars, per term."""
    est, se, z, p = (np.asarray(a) for a in (est, se, z, p))
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
        "Pr(>|z|)": [format_pval(pv) for pv in p],
    }
    names = list(names)
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


def _corr_lines(names: Sequence[str], vals: np.ndarray) -> list[str]:
    """The lower triangle of the fixed effects' correlations ``vals``, with R's abbreviated ``names``."""
    names = list(names)
    rn = [r_abbreviate(n, 11) for n in names]
    cn = [r_abbreviate(n, 6) for n in rn]
    cells = [[f"{vals[i, j]:.3f}" if j < i else "" for j in range(len(names) - 1)] for i in range(1, len(names))]
    wr = max(len(r) for r in rn[1:])
    wc = [max([len(cn[j])] + [len(cells[i][j]) for i in range(len(cells))]) for j in range(len(names) - 1)]
    lines = [" " * wr + " " + " ".join(cn[j].ljust(wc[j]) for j in range(len(wc)))]
    for i, row in enumerate(cells):
        lines.append(rn[i + 1].ljust(wr) + " " + " ".join(c.rjust(wc[j]) if c else " " * wc[j]
                                                           for j, c in enumerate(row)).rstrip())
    return lines
