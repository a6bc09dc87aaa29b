"""An lmer fit's result (:class:`LmerResult`), its assembly from the optimum (:func:`fit_lmm`: β̂, σ̂, Var(β̂),
the conditional modes, Satterthwaite's df) and lme4's profile intervals (:func:`profile_confint`).

The model, its profiled deviance and the optimiser: :mod:`mrcstats.models.lmm_fit`; the tests:
:mod:`mrcstats.models.lmm_tests`.
"""
from __future__ import annotations

import functools
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import optimize

from mrcstats._dist import norm_ppf, t_ppf, t_sf
from mrcstats._pformat import format_pval_columns
from mrcstats._repr import Result
from mrcstats.errors import InputError, ModelError
from mrcstats.models import lmm_tests
from mrcstats.models._checks import check_level
from mrcstats.models.family import GAUSSIAN, Family, RecordsFamily
from mrcstats.models.family_table import CAPABILITIES, Capabilities, require
from mrcstats.models.lmm_fit import (
    SINGULAR_TOL,
    LmmSystem,
    fit_theta,
    min_theta,
    reduced_system,
)
from mrcstats.models.lmm_tests import KenwardRoger, LmerAnova
from mrcstats.models.records import RanefTable, VarCorrRow, named_series, named_square, varcorr_to_frame
from mrcstats.models.results import ranef_dict, varcorr_lines

if TYPE_CHECKING:
    import pandas as pd


def _coef_column(values: str, name: str) -> functools.cached_property:
    """A column of lmerTest's coefficient table as a pandas Series by the fixed effects' names, built from the
    stored array ``values`` when first read."""
    return functools.cached_property(lambda self: named_series(getattr(self, values), self.fixef_names, name))


@dataclass(frozen=True, eq=False, repr=False)
class LmerResult(Result, RecordsFamily):
    """A fitted linear mixed model in lme4's terms, with lmerTest's Satterthwaite t-tests.

    The estimates are stored as NumPy arrays with their names and the random-effect tables as plain records
    (:mod:`mrcstats.models.records`), as :class:`~mrcstats.models.results.GlmerResult` keeps them; the pandas
    attributes below are built from them when first read, so ``to_dict()`` and ``ranef_dict()``
    (``mrcstats lmer --json``) never import pandas (issue 41).

    Attributes
    ----------
    fixef, se, df, t, p : pandas.Series by R's column names; ``df`` Satterthwaite's, ``p`` = 2 P(T_df > |t|)
        (lmerTest's ``summary(m)$coefficients``).
    vcov : σ̂² (RXᵀRX)⁻¹ (lme4's ``vcov``); sigma : σ̂ (lme4's ``sigma``).
    theta : lme4's ``getME(m, "theta")`` (relative to σ); varcorr : ``as.data.frame(VarCorr(m))`` rows
        (``variance``/``sd`` in the response's units).
    ranef : per grouping factor the conditional modes (``mode`` or one column per random-effect column) and
        conditional variances (``condvar``).
    fixef_names, fixef_values, se_values, df_values, t_values, p_values, vcov_values, theta_names,
    theta_values, varcorr_rows, ranef_tables : the stored figures behind the pandas attributes above.
    loglik : the (RE)ML log-likelihood (lme4's ``logLik``); reml_criterion : lme4's ``REMLcrit`` (REML fits);
        aic, bic from loglik with np = p + len(θ) + 1.
    """

    formula: str
    reml: bool
    fixef_names: tuple[str, ...]
    fixef_values: np.ndarray
    se_values: np.ndarray
    df_values: np.ndarray
    t_values: np.ndarray
    p_values: np.ndarray
    vcov_values: np.ndarray
    theta_names: tuple[str, ...]
    theta_values: np.ndarray
    sigma: float
    varcorr_rows: tuple[VarCorrRow, ...]
    ranef_tables: Mapping[str, RanefTable]
    loglik: float
    aic: float
    bic: float
    reml_criterion: float | None
    nobs: int
    ngroups: Mapping[str, int]
    df_resid: int
    converged: bool
    singular: bool
    messages: tuple[str, ...]
    fit_seconds: float
    family: Family = field(repr=False)     # required: the design's (gaussian), set by fit_lmm
    engine: str = "native"
    info: Any = field(default=None, repr=False)
    optinfo: Mapping[str, Any] = field(default_factory=dict, repr=False)
    vcov_varpar: np.ndarray | None = field(default=None, repr=False)
    jac_varpar: tuple[np.ndarray, ...] = field(default=(), repr=False)
    frame: pd.DataFrame | None = field(default=None, repr=False)
    fit_options: Mapping[str, Any] = field(default_factory=dict, repr=False)
    design: Any = field(default=None, repr=False)

    STORED_FAMILY = GAUSSIAN          # a fit stored before results recorded their family (RecordsFamily)

    # ------------------------------------------------------------------ the pandas views (built when read)
    fixef = _coef_column("fixef_values", "Estimate")
    se = _coef_column("se_values", "Std. Error")
    df = _coef_column("df_values", "df")
    t = _coef_column("t_values", "t value")
    p = _coef_column("p_values", "Pr(>|t|)")

    @functools.cached_property
    def vcov(self) -> pd.DataFrame:
        return named_square(self.vcov_values, self.fixef_names)

    @functools.cached_property
    def theta(self) -> pd.Series:
        return named_series(self.theta_values, self.theta_names, "theta")

    @functools.cached_property
    def varcorr(self) -> pd.DataFrame:
        return varcorr_to_frame(self.varcorr_rows)

    @functools.cached_property
    def ranef(self) -> dict[str, pd.DataFrame]:
        return {g: t.to_pandas() for g, t in self.ranef_tables.items()}

    @property
    def link(self) -> str:
        """The link's R name (``identity``), the family's."""
        return self.family.link

    @property
    def capabilities(self) -> Capabilities:
        """What an lmer fit supports (:data:`~mrcstats.models.family_table.CAPABILITIES`)."""
        return CAPABILITIES["lmer"]

    def ranef_dict(self) -> dict[str, dict[str, dict[str, float]]]:
        """``{group: {level: {column: value}}}`` (the CLI's ``--ranef``)."""
        return ranef_dict(self.ranef_tables)

    def coef_table(self) -> pd.DataFrame:
        """lmerTest's coefficient table: Estimate, Std. Error, df, t value, Pr(>|t|)."""
        import pandas as pd

        return pd.DataFrame({"Estimate": self.fixef, "Std. Error": self.se, "df": self.df, "t value": self.t,
                             "Pr(>|t|)": self.p})

    def to_frame(self) -> pd.DataFrame:
        """Fixed effects, then the random-effect SDs/correlations and the residual SD (tidy, as broom.mixed)."""
        import pandas as pd

        fx = self.coef_table().reset_index(names="term")
        fx.columns = ["term", "estimate", "std_error", "df", "statistic", "p_value"]
        fx.insert(0, "effect", "fixed")
        fx.insert(1, "group", None)
        vc = self.varcorr
        terms = [f"cor__{r.name}.{r.var2}" if isinstance(r.var2, str) else f"sd__{r.name}" for r in vc.itertuples()]
        rx = pd.DataFrame({"effect": "ran_pars", "group": list(vc["group"]) + ["Residual"],
                           "term": terms + ["sd__Observation"], "estimate": list(vc["sd"]) + [self.sigma],
                           "std_error": np.nan, "df": np.nan, "statistic": np.nan, "p_value": np.nan})
        return pd.concat([fx, rx], ignore_index=True)

    def to_dict(self) -> dict[str, Any]:
        """The CLI ``--json`` object: glmer's keys plus ``sigma``, ``df``, ``t`` (and ``p`` Satterthwaite)."""
        return {
            "formula": self.formula, "family": self.family.name, "link": self.link, "engine": self.engine,
            "reml": self.reml, "nobs": self.nobs, "ngroups": dict(self.ngroups),
            **{key: dict(zip(self.fixef_names, map(float, values))) for key, values in (
                ("fixef", self.fixef_values), ("se", self.se_values), ("df", self.df_values), ("t", self.t_values),
                ("p", self.p_values))},
            "theta": dict(zip(self.theta_names, map(float, self.theta_values))), "sigma": self.sigma,
            "varcorr": [{"group": r.group, "name": r.name, "var2": r.var2 if isinstance(r.var2, str) else None,
                         "variance": float(r.variance), "sd": float(r.sd)} for r in self.varcorr_rows],
            "loglik": self.loglik, "aic": self.aic, "bic": self.bic, "minus2loglik": -2 * self.loglik,
            "reml_criterion": self.reml_criterion, "df_resid": self.df_resid, "converged": self.converged,
            "singular": self.singular, "messages": list(self.messages), "fit_seconds": self.fit_seconds,
        }

    def summary(self) -> str:
        """lmerTest's ``summary(m)`` layout (REML criterion or AIC table, random effects, coefficients)."""
        import pandas as pd

        from mrcstats.models.results import fmt_sig

        fit = "REML" if self.reml else "maximum likelihood"
        out = [f"Linear mixed model fit by {fit}. t-tests use Satterthwaite's method ['lmerModLmerTest']",
               f"Formula: {self.formula}", ""]
        if self.reml:
            out.append(f"REML criterion at convergence: {fmt_sig(self.reml_criterion, 6)}")
        else:
            heads = ["AIC", "BIC", "logLik", "deviance", "df.resid"]
            cells = [fmt_sig(v, 6) for v in (self.aic, self.bic, self.loglik, -2 * self.loglik)] + [str(self.df_resid)]
            w = [max(len(h), len(c)) + 1 for h, c in zip(heads, cells)]
            out += [" ".join(h.rjust(k) for h, k in zip(heads, w)), " ".join(c.rjust(k) for c, k in zip(cells, w))]
        out += ["", "Random effects:"]
        vc = pd.concat([self.varcorr, pd.DataFrame([{"group": "Residual", "name": "", "var2": None,
                                                      "variance": self.sigma ** 2, "sd": self.sigma}])],
                       ignore_index=True)
        out += varcorr_lines(vc)
        out.append("Number of obs: " + f"{self.nobs}, groups:  " +
                   ", ".join(f"{g}, {n}" for g, n in self.ngroups.items()))
        out += ["", "Fixed effects:", format_pval_columns(self.coef_table(), ["Pr(>|t|)"]).to_string(float_format=lambda v: f"{v:.6g}")]
        if self.messages:
            out += ["", *self.messages]
        return "\n".join(out)

    def __str__(self) -> str:
        return self.summary()

    # ------------------------------------------------------------------ contrasts (lmerTest's contest)

    # ------------------------------------------------------------------ contrasts (lmerTest's contest)
    @functools.cached_property
    def kenward_roger(self) -> KenwardRoger:
        """pbkrtest's Kenward-Roger pieces of this (REML) fit, computed once."""
        return KenwardRoger(self)

    def vcov_kr(self) -> pd.DataFrame:
        """pbkrtest's ``vcovAdj(m)``: the Kenward-Roger adjusted covariance of β̂."""
        return named_square(self.kenward_roger.PhiA, self.fixef_names)

    def contrast_df(self, L: np.ndarray, ddf: str = "Satterthwaite") -> np.ndarray:
        """Denominator df of each row of ``L`` (lmerTest's ``contest1D``; :func:`~mrcstats.models.lmm_tests.contrast_df`)."""
        return lmm_tests.contrast_df(self, L, ddf)

    def contest(self, L: np.ndarray, ddf: str = "Satterthwaite") -> dict[str, float]:
        """The F test of H0: Lβ = 0 (lmerTest's ``contestMD``; :func:`~mrcstats.models.lmm_tests.contest`)."""
        return lmm_tests.contest(self, L, ddf)

    def anova(self, type: int | str = 3, ddf: str = "Satterthwaite") -> LmerAnova:
        """lmerTest's ``anova(m, type = type, ddf = ddf)`` (:func:`~mrcstats.models.lmm_tests.anova`)."""
        return lmm_tests.anova(self, type, ddf)

    def confint(self, method: str = "profile", level: float = 0.95, parm: Any = None):
        """Confidence intervals as lme4's ``confint(m, parm, level, method)`` on an lmer fit (rows ``.sig01``, …,
        ``.sigma``, then the fixed effects; columns ``"2.5 %"``/``"97.5 %"``):

        * ``"profile"`` (lme4's default): the likelihood profile of each parameter on lme4's scale (SDs and
          correlations in the response's units, σ, β) from the ML fit (lme4 refits a REML fit by ML first), stepped
          as lme4's ``profile.merMod`` and inverted by its interpolating back-spline (:func:`profile_confint`);
        * ``"Wald"``: β ± z_{1-α/2} SE, NA for the variance parameters (lme4);
        * ``"satterthwaite"``: β ± t_{df, 1-α/2} SE with Satterthwaite's df (lmerTest's ``contest(...,
          confint = TRUE)``), fixed effects only.
        """
        import pandas as pd

        from mrcstats.models.confint import ConfintResult, format_perc, profile_which, sig_names

        level = check_level(level, "lmer confint")
        meth = {"profile": "profile", "wald": "Wald", "satterthwaite": "satterthwaite"}.get(str(method).lower())
        if meth is None:
            if str(method).lower() == "boot":
                require(self, "confint.boot")
            raise InputError(f"lmer confint method {method!r}: use profile, Wald or satterthwaite")
        require(self, f"confint.{meth}")
        if meth == "profile":
            return profile_confint(self, level=level, parm=parm)
        a = (1 - level) / 2
        cols = format_perc(np.array([a, 1 - a]))
        fe, se = self.fixef.to_numpy(), self.se.to_numpy()
        if meth == "satterthwaite":
            q = t_ppf(1 - a, self.df.to_numpy())
            tab = pd.DataFrame(np.column_stack([fe - q * se, fe + q * se]), index=self.fixef.index, columns=cols)
            rows = profile_which(parm, list(self.fixef.index), 0)
            return ConfintResult("satterthwaite", level, tab.iloc[rows])
        names = sig_names(len(self.theta)) + [".sigma"] + list(self.fixef.index)
        k = len(self.theta) + 1
        ci = np.full((len(names), 2), np.nan)
        ci[k:] = fe[:, None] + se[:, None] * norm_ppf([a, 1 - a])[None, :]
        rows = profile_which(parm, names, k)
        return ConfintResult("Wald", level, pd.DataFrame(ci, index=names, columns=cols).iloc[rows])



def fit_lmm(design, reml: bool = True, t0: float | None = None, satterthwaite: bool = True) -> LmerResult:
    """Fit a built Gaussian :class:`~mrcstats.models.design.Design` (see the module docstring)."""
    from mrcstats.models.optimize import ranef_tables, varcorr_rows

    t0 = time.perf_counter() if t0 is None else t0
    sys_ = LmmSystem(design, reml=reml)
    re = design.re
    lower = np.concatenate([r.lower for r in re])
    th0 = np.concatenate([r.start for r in re])
    th, r, converged, start = fit_theta(sys_, lower, th0)
    e = sys_.evaluate(th)
    n, p = sys_.n, sys_.p
    sigma2 = e["r2"] / (n - p if reml else n)
    sigma = math.sqrt(sigma2)
    beta = e["beta"]
    names = list(design.info.column_names)
    V = sigma2 * np.linalg.inv(e["RXtRX"]) if p else np.zeros((0, 0))
    se = np.sqrt(np.diag(V))
    messages = list(design.messages)
    singular = bool(np.any(th[lower == 0] < SINGULAR_TOL))
    if singular:
        messages.append("boundary (singular) fit: see help('isSingular')")
    # Satterthwaite (lmerTest)
    if satterthwaite:
        A, J, df, sat_messages = lmm_tests.satterthwaite(sys_, e, th, sigma, V)
        messages += sat_messages
    else:                                                    # (a refit inside profile: no tests needed)
        A, J, df = None, np.zeros((p * p, 0)), np.full(p, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        tval = beta / se
    pval = 2.0 * t_sf(np.abs(tval), df)
    # lme4's ranef: b = Λû (û in σ's units), condVar σ² Λ M⁻¹ Λᵀ
    b_all = sys_._lam(e["Ts"], e["u"])
    bs, cvs = [], []
    cv_blocks = sys_.condvar(e)
    for k, t in enumerate(re):
        bs.append(b_all[sys_.offs[k]:sys_.offs[k + 1]].reshape(t.nlevels, t.q) if not t.is_scalar
                  else b_all[sys_.offs[k]:sys_.offs[k + 1]])
        cvs.append(sigma2 * cv_blocks[k] if not t.is_scalar else sigma2 * cv_blocks[k][:, 0, 0])
    ranef = ranef_tables(re, bs, cvs)
    vc = tuple(r._replace(variance=r.variance * sigma2,                  # relative covariances times σ²
                          sd=r.sd * sigma if r.var2 is None else r.sd)    # correlations unchanged
               for r in varcorr_rows(re, th))
    dev = e["dev"]
    loglik = -0.5 * dev
    npar = p + len(th) + 1
    theta_names = [nm for t in re for nm in t.theta_names]
    return LmerResult(
        formula=design.info.spec.formula, reml=bool(reml),
        fixef_names=tuple(names), fixef_values=np.asarray(beta, float), se_values=se,
        df_values=np.asarray(df, float), t_values=tval, p_values=np.asarray(pval, float), vcov_values=V,
        theta_names=tuple(theta_names), theta_values=np.asarray(th, float), sigma=sigma, varcorr_rows=vc,
        ranef_tables=ranef,
        loglik=loglik, aic=-2 * loglik + 2 * npar, bic=-2 * loglik + math.log(n) * npar,
        reml_criterion=dev if reml else None, nobs=n, ngroups=design.ngroups, df_resid=n - npar,
        converged=converged, singular=singular, messages=tuple(dict.fromkeys(messages)),
        fit_seconds=time.perf_counter() - t0, family=design.family, info=design.info,
        optinfo={"optimizer": "L-BFGS-B+Newton", "nit": int(r.nit), "nfev": sys_.nfev, "message": str(r.message),
                 **({} if start is None else {"start": "subsample fit", "x0": start.tolist()})},
        vcov_varpar=A, jac_varpar=tuple(J[:, k].reshape(p, p) for k in range(J.shape[1])), frame=design.frame,
        fit_options={"contrasts": dict(design.info.contrasts)}, design=design)


def _central_grad(f, x: np.ndarray, lower: np.ndarray, h: float = 1e-6) -> np.ndarray:
    g = np.empty(len(x))
    for i in range(len(x)):
        hi = h * max(1.0, abs(x[i]))
        xp, xm = x.copy(), x.copy()
        xp[i] += hi
        xm[i] -= hi
        if xm[i] < lower[i]:          # one-sided at the boundary
            xm[i] = x[i]
            g[i] = (f(xp) - f(xm)) / hi
        else:
            g[i] = (f(xp) - f(xm)) / (2 * hi)
    return g


def profile_confint(m: LmerResult, level: float = 0.95, parm: Any = None, maxpts: int = 100,
                    alphamax: float = 0.01, delta_cutoff: float = 1 / 8, maxmult: float = 10.0):
    """lme4's ``confint(m, method = "profile")`` for an lmer fit (``profile.merMod`` + ``confint.thpr``).

    The profile is of the ML deviance (a REML fit is refitted by ML, as lme4's ``devfun2`` does), base D̂ = −2 logLik.
    Variance parameters on lme4's scale v = (SDs σ·sd(Λ), correlations, σ): D(v) = log|L|² + r²(θ)/σ² + n log(2πσ²)
    with θ from v (``Sv_to_Cv``) and β profiled; each v_w fixed in turn, D minimised over the other v (bounds
    SD, σ ≥ 0, |cor| ≤ 1), first step 1.01·v̂_w (1e-3 from 0). Fixed effects: β_j fixed by an offset, the ML
    profiled deviance minimised over θ, first step β̂_j + δ·SE_j. Steps of δ = cutoff/8 in ζ = sign·√(D − D̂)
    (``nextpar``/``fillmat``), cutoff √χ²_{nptot}(0.99); the bounds ζ = ∓z_{1-α/2} from R's back-spline of the
    interpolating spline ζ(x); NA (the range limit) where the profile does not reach the cutoff."""
    import pandas as pd

    from mrcstats.models.confint import (
        ConfintResult,
        ProfileScale,
        back_spline_predict,
        fill_profile_rows,
        format_perc,
        profile_cutoff,
        profile_which,
        profile_xz,
        sig_names,
    )

    require(m, "confint.profile")
    t0 = time.perf_counter()
    design = m.design
    if design is None:
        raise InputError("lmer confint: this fit kept no design; refit with mrcstats.lmer")
    ml = fit_lmm(design, reml=False, satterthwaite=False) if m.reml else m
    sys_ = LmmSystem(design, reml=False)
    n, p = sys_.n, sys_.p
    P = ProfileScale(design.re, p)
    nth = P.nth
    lower_th = np.concatenate([r.lower for r in design.re])
    th_hat = ml.theta.to_numpy()
    sig = ml.sigma
    sv = P.to_sdcor(th_hat)
    sv[P.is_sd] *= sig
    opt = np.concatenate([sv, [sig], ml.fixef.to_numpy()])
    nv = nth + 1
    lo = np.concatenate([np.where(P.is_sd, 0.0, -1.0), [0.0], np.full(p, -np.inf)])
    hi = np.concatenate([np.where(P.is_sd, np.inf, 1.0), [np.inf], np.full(p, np.inf)])

    def v_to_theta(v):
        s = np.array(v[:nth], float)
        s[P.is_sd] /= v[nth]
        return P.to_theta(s)

    def dev_v(v):
        if v[nth] <= 0:
            return math.inf
        try:
            ldL2, r2, _, _ = sys_._pieces(v_to_theta(v))
        except (ModelError, np.linalg.LinAlgError):
            return math.inf
        s2 = v[nth] ** 2
        return ldL2 + r2 / s2 + n * math.log(2 * math.pi * s2)

    base = min(-2.0 * ml.loglik, dev_v(opt[:nv]))
    nptot = len(opt)
    cutoff = profile_cutoff(alphamax, nptot)
    delta = cutoff * delta_cutoff
    se_ml = ml.se.to_numpy()

    def zeta(w, xx, prev):
        row = np.full(nptot + 1, np.nan)
        if w < nv:
            mask = np.ones(nv, bool)
            mask[w] = False
            start = prev[:nv][mask] if np.all(np.isfinite(prev[:nv])) else opt[:nv][mask]

            def fun(z):
                v = np.empty(nv)
                v[w] = xx
                v[mask] = z
                return dev_v(v)

            lo_m, hi_m = lo[:nv][mask], hi[:nv][mask]
            bnds = list(zip(lo_m, np.where(np.isfinite(hi_m), hi_m, None)))
            z0 = np.clip(start, lo_m, hi_m)
            r = optimize.minimize(lambda z: (fun(z), _central_grad(fun, z, lo_m)), z0, jac=True,
                                  method="L-BFGS-B", bounds=bnds,
                                  options={"maxiter": 3000, "ftol": 1e-15, "gtol": 1e-9, "maxcor": 20})
            dev = float(r.fun) - base
            v = np.empty(nv)
            v[w] = xx
            v[mask] = r.x
            row[1:nv + 1] = v
            row[nv + 1:] = opt[nv:]
        else:
            j = w - nv
            red = reduced_system(sys_, j, xx)
            th0 = v_to_theta(prev[:nv]) if np.all(np.isfinite(prev[:nv])) else th_hat
            th = min_theta(red, th0, lower_th)
            e = red.evaluate(th)
            dev = e["dev"] - base
            s = math.sqrt(e["r2"] / n)
            v = P.to_sdcor(th)
            v[P.is_sd] *= s
            row[1:nth + 1] = v
            row[nth + 1] = s
            row[nv + 1:] = np.insert(e["beta"], j, xx)
        if not np.isfinite(dev):
            return row
        row[0] = math.copysign(1.0, xx - opt[w]) * math.sqrt(max(dev, 1e-9))
        return row

    names = sig_names(nth) + [".sigma"] + list(m.fixef.index)
    rows = profile_which(parm, names, nv)
    a = (1 - level) / 2
    zq = norm_ppf([a, 1 - a])
    out = np.full((len(rows), 2), np.nan)
    msgs: list[str] = []
    opt_row = np.concatenate([[0.0], opt])
    ctl = None
    from mrcstats.models.optimize import blas_controller

    ctl = blas_controller()
    import contextlib

    with (ctl.limit(limits=1, user_api="blas") if ctl is not None else contextlib.nullcontext()):
        for k, w in enumerate(rows):
            pw = opt[w]
            if w < nv:
                shift = 1e-3 if pw == 0 else pw * 1.01
            else:
                shift = pw + delta * se_ml[w - nv]
            srow = zeta(w, shift, opt_row[1:])
            pres = np.tile(opt_row, (maxpts, 1))
            nres = pres.copy()
            pres[1] = srow
            nres[0] = srow
            up = fill_profile_rows(pres, w, lo[w], hi[w], zeta, delta, cutoff, maxpts, maxmult)
            dn = fill_profile_rows(nres, w, lo[w], hi[w], zeta, delta, cutoff, maxpts, maxmult) if pw > lo[w] else nres[:2]
            x, z = profile_xz(up, dn, w)
            try:
                ci = back_spline_predict(x, z, zq)
            except ValueError:
                msgs.append(f"non-monotonic profile for {names[w]}: linear interpolation")
                zu, inv = np.unique(z, return_inverse=True)
                xm = np.bincount(inv, weights=x) / np.bincount(inv)
                ci = (np.interp(zq, zu, xm, left=np.nan, right=np.nan) if len(zu) > 1
                      else np.array([np.nan, np.nan]))
            if np.isnan(ci[0]):
                ci[0] = lo[w]
            if np.isnan(ci[1]):
                ci[1] = hi[w]
            out[k] = ci
    refused = [f"{names[w]}: the profile does not reach the cutoff, the interval is unbounded"
               for k, w in enumerate(rows) if not np.all(np.isfinite(out[k]))]
    cols = format_perc(np.array([a, 1 - a]))
    return ConfintResult("profile", level, pd.DataFrame(out, index=[names[w] for w in rows], columns=cols),
                         tuple(msgs), seconds=time.perf_counter() - t0, refused=tuple(refused))


__all__ = ["LmerResult", "fit_lmm", "profile_confint"]
