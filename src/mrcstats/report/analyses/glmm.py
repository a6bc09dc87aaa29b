"""``glmm``: a GLMM (:func:`mrcstats.models.glmer`, binomial by default) with drop1, GVIF, σ tables, LOESS and
random effects."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from mrcstats.errors import DependencyError, InputError
from mrcstats.models import drop1, glmer, gvif
from mrcstats.models.family_table import family_labels
from mrcstats.models.predict import probability_frame
from mrcstats.report import figures as F
from mrcstats.report.analyses.base import (
    Analysis,
    AnalysisSpec,
    Context,
    Key,
    Output,
    Skip,
    TestRecord,
    filter_note,
)
from mrcstats.report.analyses.glmm_tables import (
    anova_table,
    coef_frame,
    emmeans_table,
    fit_statistics_table,
    pairs_table,
    random_effects_table,
    regression_table,
)
from mrcstats.report.analyses.probability import probability_table
from mrcstats.report.format import format_stat
from mrcstats.report.tables import Table, format_number

_SIGMA_KEYS = {"feature", "factor", "raw", "sigmas", "label"}
_Z975 = 1.959963984540054


def truth_recovery(cf: pd.DataFrame, vcov: pd.DataFrame, truth: Mapping[str, float]) -> dict[str, Any]:
    """How far a fit's fixed effects are from a simulated truth, as tests that hold their level.

    Per term ``z = (β̂ − β) / SE`` (standard normal when the model is right and the truth is what the data were
    simulated from); jointly the Wald statistic ``W = (β̂ − β)ᵀ V⁻¹ (β̂ − β)`` over the k terms with a truth,
    χ²(k) under the same hypothesis (V the fit's covariance of those terms; Wald 1943), and its p-value. The
    share of terms inside β̂ ± 1.96 SE is kept as ``coverage_95`` (descriptive only: the k intervals are
    correlated, so it is not a binomial count)."""
    from scipy.stats import chi2

    terms = [t for t in cf["term"] if t in truth]
    est = cf.set_index("term")["estimate"].reindex(terms).to_numpy(dtype=float)
    se = cf.set_index("term")["se"].reindex(terms).to_numpy(dtype=float)
    tv = np.array([float(truth[t]) for t in terms], dtype=float)
    d = est - tv
    with np.errstate(divide="ignore", invalid="ignore"):
        z = d / se
    V = vcov.loc[terms, terms].to_numpy(dtype=float)
    try:
        w = float(d @ np.linalg.solve(V, d)) if terms else float("nan")
    except np.linalg.LinAlgError:
        w = float("nan")
    k = len(terms)
    return {"max_abs_error": float(np.max(np.abs(d))) if k else float("nan"),
            "coverage_95": float(np.mean(np.abs(z) <= _Z975)) if k else float("nan"),
            "z_truth": dict(zip(terms, (float(v) for v in z))),
            "wald_truth": {"chi2": w, "df": k, "p": float(chi2.sf(w, k)) if k and not np.isnan(w) else float("nan")}}


def _recovery_sentence(rec: Mapping[str, Any], labels: Mapping[str, str] | None = None) -> str:
    """The recovery paragraph: largest error, each term's z against the truth, the joint Wald test."""
    from mrcstats.report.format import format_p

    labels = labels or {}
    z = rec["z_truth"]
    wt = rec["wald_truth"]
    far = [t for t, v in z.items() if abs(v) > _Z975]
    zs = "; ".join(f"{labels.get(t, t)} {format_number(v, 2)}" for t, v in z.items())
    return (f"Recovery: the largest |estimate − truth| is {rec['max_abs_error']:.3f}. Estimate − truth in standard "
            f"errors (z, standard normal if the fit recovers the truth): {zs}"
            + (f"; {len(far)} of {len(z)} beyond ±1.96." if far else f"; none of {len(z)} beyond ±1.96.")
            + f" Joint Wald test that all {wt['df']} fixed effects equal the truth (the z's are correlated, so "
            f"they are tested together): {format_stat('chi2', wt['chi2'], wt['df'])}, p {_p_words(format_p(wt['p']))}"
            + (" — the estimates are further from the truth than chance explains." if wt["p"] < 0.05 else "."))


def _p_words(fp: str) -> str:
    return fp if fp[:1] in "<>" else f"= {fp}"


class Glmm(Analysis):
    type = "glmm"
    title = "Fixed effects and random effects"
    keys: ClassVar[dict[str, Key]] = {
        "name": Key((str,), None, help="referred to by other analyses (wh_extremes)"),
        "formula": Key((str,), None, required=True), "contrasts": Key((dict,), {}), "levels": Key((dict,), {}),
        "nagq": Key((int,), 1), "engine": Key((str,), "native", choices=("native", "lme4")),
        "invalid": Key((str,), "wrong", choices=("wrong", "exclude"),
                       help="invalid answers: not correct (as the accuracy tables) or left out"),
        "vcov": Key((str,), "hessian", choices=("hessian", "RX"),
                    help="covariance behind the SEs, as lme4's vcov(use.hessian = TRUE/FALSE)"),
        "lme4_defaults": Key((bool,), False), "drop1": Key((bool,), False), "gvif": Key((bool,), False),
        "sigma_table": Key((dict, list), None), "loess": Key((bool, dict), False), "ranef": Key((bool, dict), True),
        "truth": Key((dict,), None), "truth_sd": Key((dict,), None),
        "layout": Key((str,), "apa", choices=("apa", "lme4", "compact")), "labels": Key((dict,), {}),
        "confint": Key((bool, str, dict), None,
                       help="confidence intervals as lme4's confint(): true (profile), 'Wald'|'profile'|'boot', "
                            "or {method, level, nsim, seed}"),
        "emmeans": Key((str, dict, list), None,
                       help="estimated marginal means: 'LLM', or {specs, by, type: link|response, at, pairs, "
                            "adjust: tukey|holm|bonferroni|sidak|none}, or a list of those"),
    }

    def check(self, opts: dict[str, Any], err: Any, base: Any) -> None:
        if not 0 <= opts["nagq"] <= 25:
            raise err("nagq", f"expected an integer from 0 to 25, got {opts['nagq']}")
        for k, v in opts["contrasts"].items():
            if v not in ("sum", "treatment"):
                raise err(f"contrasts.{k}", f"expected sum or treatment, got {v!r}")
        st = opts.get("sigma_table")
        for j, s in enumerate([st] if isinstance(st, dict) else (st or [])):
            key = "sigma_table" + (f"[{j}]" if isinstance(st, list) else "")
            if not isinstance(s, dict) or "feature" not in s or "factor" not in s:
                raise err(key, "expected a mapping with `feature` and `factor` (optional: raw, sigmas, label)")
            bad = sorted(set(s) - _SIGMA_KEYS)
            if bad:
                raise err(f"{key}.{bad[0]}", "unknown key; known keys: feature, factor, raw, sigmas, label")
        if opts.get("emmeans") is not None:
            opts["emmeans"] = _check_emmeans(opts["emmeans"], opts["formula"], err)
        if opts.get("confint") not in (None, False):
            opts["confint"] = _check_confint(opts["confint"], err)

    def run(self, ctx: Context, a: AnalysisSpec) -> Output:
        name = a.get("name")
        data = ctx.rows(a)
        from mrcstats.io.schema import apply_invalid

        data, n_invalid = apply_invalid(data, a.get("invalid"))
        try:
            res = glmer(a.get("formula"), data, contrasts=a.get("contrasts") or None, nagq=a.get("nagq"),
                        engine=a.get("engine"), levels=a.get("levels") or None, lme4_defaults=a.get("lme4_defaults"),
                        vcov=a.get("vcov"), invalid=a.get("invalid"))
        except NotImplementedError as exc:
            raise Skip(f"the {a.get('engine')} GLMM engine is not available: {exc}") from None
        except (ImportError, DependencyError) as exc:
            raise Skip(f"the {a.get('engine')} GLMM engine needs a missing piece: {exc}") from None
        ctx.glmms[name] = (res, data, a)
        labels = dict(a.get("labels") or {})
        truth = a.get("truth")
        out = Output(f"Fixed effects: {name}")
        out.methods_title = f"GLMM '{name}'"
        out.methods += _methods(res, data, a, n_invalid)
        if a.get("invalid") == "exclude":
            out.leave_out("invalid answer (left out, as asked)", n_invalid)
        out.leave_out("missing model variable, dropped as R's na.omit", len(data) - res.nobs)
        if res.engine == "lme4":
            from mrcstats.models.r_engine import r_versions

            out.software.append(r_versions())
        terms, term_note = term_labels(res)

        out.text(_fit_sentence(res, name))
        fx = regression_table(res, caption=f"Fixed effects of the {name} GLMM ({res.formula}), "
                                           f"{family_labels(res).eta_desc} scale"
                              + ("; Truth = simulated value" if truth else "") + ".",
                              label=f"fixef_{name}", layout=a.get("layout"), truth=truth, terms=terms)
        if term_note:
            fx = type(fx)(**{**fx.__dict__, "notes": (*fx.notes, term_note)})
        out.table(fx)
        ctx.extra_tables.append(regression_table(res, caption=f"Fixed effects of the {name} GLMM, compact layout.",
                                                 label=f"fixef_{name}_compact", layout="compact", truth=truth))
        out.table(fit_statistics_table(res, caption=f"Fit statistics of the {name} GLMM.", label=f"fit_{name}"))
        if truth:
            cf = coef_frame(res)
            rec = truth_recovery(cf, res.vcov, truth)
            out.headline.setdefault("glmm", {})[name] = {
                "estimate": dict(zip(cf["term"], cf["estimate"])), "se": dict(zip(cf["term"], cf["se"])),
                "truth": {t: truth[t] for t in cf["term"] if t in truth}, **rec}
            out.text(_recovery_sentence(rec, terms))
            out.figure(F.fixef_truth_plot(cf, truth, labels=terms), f"fixef_truth_{name}",
                       f"Recovered fixed effects (±1.96 SE) of the {name} GLMM against the simulated truth (×).")
        if a.get("drop1"):
            d1 = drop1(res).to_frame()
            out.table(anova_table(d1, caption=f"Likelihood-ratio tests dropping each term that respects marginality "
                                  f"(R's drop1(m, test = \"Chisq\")), {name} GLMM.", label=f"drop1_{name}"))
            for term, r in d1.iterrows():
                p = r.get("Pr(Chi)")
                if p is not None and not pd.isna(p):
                    out.tests.append(TestRecord(f"drop1, {name} GLMM", f"drop {term} ({name} GLMM)",
                                                "likelihood-ratio test", float(p),
                                                format_stat("chi2", float(r["LRT"]), int(r["npar"]))))
        if a.get("gvif"):
            out.table(anova_table(gvif(res).to_frame(), caption=f"Generalized variance inflation factors, {name} "
                                  "GLMM.", label=f"gvif_{name}"))
        st = a.get("sigma_table")
        for s in [st] if isinstance(st, dict) else (st or []):
            _sigma_section(out, res, data, s, name, labels, a.get("loess"))
        for j, e in enumerate(a.get("emmeans") or []):
            _emmeans_section(out, res, e, name, j)
        if a.get("confint"):
            _confint_section(out, res, a.get("confint"), name, ctx.seed)

        rsec = Output(f"Random effects: {name}")
        tsd = a.get("truth_sd")
        rsec.table(random_effects_table(res, caption=f"Random-effect variance components of the {name} GLMM"
                                        + (" with the simulated SD." if tsd else "."), label=f"ranef_{name}",
                                        truth=tsd))
        opt = a.get("ranef")
        if opt:
            n = opt.get("n", 100) if isinstance(opt, dict) else 100
            for g, frame in dict(res.ranef).items():
                r = frame.reset_index(names="level") if "level" not in frame.columns else frame
                rsec.figure(F.caterpillar_plot(r, n=n, seed=ctx.seed), f"ranef_{name}_{g}",
                            f"Conditional modes of the {g} random intercepts of the {name} GLMM with 95% intervals "
                            f"(mode ± 1.96 × the square root of its conditional variance); {min(n, len(r))} of {len(r):,} levels "
                            f"sampled with seed {ctx.seed}, sorted.")
                modes = r.sort_values("mode")
                rsec.text(f"{g}: hardest level {modes['level'].iloc[0]} (mode {modes['mode'].iloc[0]:.3f}), "
                          f"easiest {modes['level'].iloc[-1]} (mode {modes['mode'].iloc[-1]:.3f}); SD of the "
                          f"modes {modes['mode'].std():.3f}.")
        out.sections.append(rsec)
        return out


def _vcov_words(res: Any) -> str:
    """The covariance rule behind the standard errors, as the Methods state it."""
    if getattr(res, "vcov_method", "hessian") == "hessian":
        return ("Standard errors from the Hessian of the deviance in (θ, β) (2 H⁻¹, fixed-effect block), lme4's "
                "vcov(m, use.hessian = TRUE), its default for a GLMM; the RX-based alternative "
                "(use.hessian = FALSE, θ treated as known) is kept in the result (vcov_other).")
    return ("Standard errors from the RX-based covariance (R_X'R_X)⁻¹ at the estimated θ, lme4's "
            "vcov(m, use.hessian = FALSE)" + (", used because the Hessian was not positive definite"
                                               if res.vcov_other is None else "") + ".")


def _methods(res: Any, data: pd.DataFrame, a: AnalysisSpec, n_invalid: int = 0) -> list[str]:
    contr = dict(res.contrasts or {})
    nagq = int(res.nagq)
    approx = ("nAGQ = 0 (β estimated inside the penalized IRLS)" if nagq == 0 else
              "Laplace approximation (nAGQ = 1)" if nagq == 1 else f"adaptive Gauss-Hermite quadrature, nAGQ = {nagq}")
    lines = [f"Model: glmer({res.formula}, family = {res.family.name}({res.link})), fitted by maximum likelihood "
             "with the "
             f"{approx}; engine: {res.engine}" + (" with lme4's default tolerances" if a.get("lme4_defaults") else "")
             + ".",
             "Contrasts: " + (", ".join(f"{k} = contr.{str(v).removeprefix('contr.')}" for k, v in contr.items())
                              if contr else "none (no factors) or R's default contr.treatment")
             + ". " + _vcov_words(res) + " Wald z tests and Wald 95% intervals (estimate ± 1.96 standard "
               "errors) of the individual coefficients, not adjusted for multiplicity.",
             f"Data: {len(data):,} log rows{filter_note(a.get('filter'))}; "
             + (f"{n_invalid:,} invalid answers count as not correct (correct = 0), as in the accuracy "
                "tables" if a.get("invalid") == "wrong" else
                f"{n_invalid:,} invalid answers are left out, as asked")
             + f"; rows missing another model variable are dropped as R's na.omit ({len(data) - res.nobs:,} here). "
             f"Observations used: {res.nobs:,}; groups: "
             + ", ".join(f"{g} {n:,}" for g, n in dict(res.ngroups).items())
             + f"; converged: {'yes' if res.converged else 'no'}; singular fit: {'yes' if res.singular else 'no'}."]
    opt = dict(res.optinfo or {})
    if res.engine == "native":
        lines.append(
            f"Optimizer: {opt.get('optimizer', 'L-BFGS-B')} (scipy) over (θ, β)"
            + (f", {opt['nit']} iterations, {opt['nfev']} deviance evaluations" if "nit" in opt and "nfev" in opt
               else "")
            + "; the conditional modes are iterated to machine precision at every evaluation (the optimum lme4 "
            "reaches with glmerControl(tolPwrss = 1e-13)). Convergence criterion as lme4's check: max |scaled "
            "gradient| < 0.002 at the optimum; singular fit when a θ < 1e-4.")
    else:
        lines.append("Optimizer: lme4's default (bobyqa then Nelder-Mead for nAGQ > 0)"
                     + ("" if a.get("lme4_defaults") else " with glmerControl(tolPwrss = 1e-13)")
                     + "; convergence as lme4 reports it (max |scaled gradient| < 0.002).")
    for m in res.messages or ():
        lines.append(f"Fit message: {m}")
    if a.get("drop1"):
        lines.append("drop1: likelihood-ratio χ² tests dropping each term that respects marginality, as R's "
                     "drop1(m, test = \"Chisq\").")
    if a.get("gvif"):
        lines.append("GVIF: generalized variance inflation factors as car::vif for merMod "
                     "(GVIF, Df, GVIF^(1/(2·Df))).")
    if a.get("confint"):
        c = a.get("confint")
        how = {"Wald": "Wald intervals (estimate ± z·SE; none for the random-effect parameters, as lme4)",
               "profile": "likelihood-profile intervals (signed square root of the deviance difference, as "
                          "lme4's profile() + confint())",
               "boot": f"parametric-bootstrap percentile intervals ({c['nsim']} simulated refits, as lme4's "
                       "bootMer)"}[c["method"]]
        lines.append(f"Confidence intervals ({c['level']:g}): {how}; rows .sig01, … are the random-effect SDs and "
                     "correlations in lme4's order.")
    if a.get("emmeans"):
        lab = family_labels(res)
        lines.append("Estimated marginal means as R's emmeans 1.8 (reference grid: factors at every level, numeric "
                     "covariates at their mean, equal weights over the other factors; delta-method SEs from vcov(); "
                     f"asymptotic intervals, back-transformed from the {lab.scale_name} for "
                     f"{lab.response_plural}); pairwise contrasts as pairs() ({lab.ratio_desc.lower()} "
                     "on the response scale, tests on the log scale), p values adjusted within each family as noted "
                     "under each table.")
    if a.get("truth"):
        lines.append("The data were simulated with known fixed effects; the tables show the truth beside the "
                     "estimates.")
    return lines


def term_labels(res: Any) -> tuple[dict[str, str], str]:
    """Display names of the coefficient terms: ``model1`` → ``model1 (Davinci-002)`` under sum contrasts
    (treatment-coded terms already carry the level, ``modelbeta``), and a note saying what they mean."""
    contr = {k: str(v).removeprefix("contr.") for k, v in dict(res.contrasts or {}).items()}
    levels = {k: list(v) for k, v in dict(res.xlevels or {}).items()}
    parts: dict[str, str] = {}
    notes = []
    for f, lv in levels.items():
        kind = contr.get(f, "treatment")
        if kind == "sum":
            for i, lev in enumerate(lv[:-1]):
                parts[f"{f}{i + 1}"] = f"{f}{i + 1} ({lev})"
            notes.append(f"{f} is sum-coded: {f}k (L) is level L's deviation from the mean over the levels; the "
                         f"last level, {lv[-1]}, is minus the sum of the others")
        else:
            notes.append(f"{f} is treatment-coded: {f}L is level L against the reference level {lv[0]}")
    out = {}
    for t in res.fixef.index:
        out[str(t)] = " × ".join(parts.get(p, p) for p in str(t).split(":"))
    return out, ("; ".join(notes) + ".") if notes else ""


def _fit_sentence(res: Any, name: str) -> str:
    """What lme4's summary header says, as a sentence (a report shows no raw console output)."""
    nagq = int(res.nagq)
    how = ("the Laplace approximation" if nagq == 1 else "nAGQ = 0" if nagq == 0
           else f"adaptive Gauss-Hermite quadrature with {nagq} points")
    vc = res._varcorr()
    sds = "; ".join(f"{r.group} {r.name if r.name != '(Intercept)' else 'intercept'} standard deviation "
                    f"{float(r.sd):.3f}" for r in vc.itertuples(index=False) if not isinstance(r.var2, str))
    groups = ", ".join(f"{n:,} levels of {g}" for g, n in dict(res.ngroups).items())
    return (f"The {name} generalized linear mixed model (GLMM) was fitted by maximum likelihood with {how} to "
            f"{res.nobs:,} observations in {groups}. Random effects: {sds}. Log-likelihood "
            f"{res.loglik:,.1f}, Akaike information criterion (AIC) {res.aic:,.1f}.")


def _sigma_section(out: Output, res: Any, data: pd.DataFrame, s: Mapping[str, Any], name: str,
                   labels: Mapping[str, str], loess: Any) -> None:
    feature, factor = s["feature"], s["factor"]
    levels = list(dict(res.xlevels or {}).get(factor, ()))
    if not levels:
        levels = sorted(pd.unique(data[factor].dropna().astype(str)))
    coding = dict(res.contrasts or {}).get(factor, "treatment")
    sigmas = s.get("sigmas", [-2, 0, 2, 4])
    raw = s.get("raw")
    rm = rsd = None
    if raw:
        if raw not in data.columns:
            raise InputError(f"sigma_table.raw: no column {raw!r} in the data")
        items = data.drop_duplicates("item")[raw].astype(float)
        rm, rsd = float(items.mean()), float(items.std(ddof=1))
    label = s.get("label") or feature
    out.table(probability_table(dict(res.fixef), feature, factor, levels, coding=coding, sigmas=sigmas, raw_mean=rm,
                                raw_sd=rsd, feature_label=label, labels=labels,
                                caption=f"Predicted probability of a correct answer per {factor} at {label} "
                                        f"{', '.join(format_number(float(x), 0) for x in sigmas)} SD from the mean"
                                        + (f" (raw {raw} in brackets)" if raw else "") + f" ({name} GLMM, seed 003 "
                                        "Tables 1-2 layout).", label=f"sigma_{name}_{feature}"))
    if loess:
        x = pd.to_numeric(data[feature], errors="coerce")
        grid = np.linspace(float(np.nanmin(x)), float(np.nanmax(x)), 60)
        pf = probability_frame(dict(res.fixef), feature, factor, levels, coding, sigmas=grid)
        curves = pf[pf[factor] != "Grand Mean"].melt(id_vars=factor, var_name=feature, value_name="p")
        frac = loess.get("frac", 0.6) if isinstance(loess, dict) else 0.6
        fig = F.loess_plot(data, feature, by=factor, glmm=curves, frac=frac, order=levels, labels=labels,
                           xlabel=f"{label} (SD from the mean)")
        out.figure(fig, f"loess_{name}_{feature}",
                   f"LOESS (statsmodels lowess, frac = {frac}, no robustness iterations) of P(correct) against {label} "
                   f"per {factor}, with the {name} GLMM's population-level curve (thin dashed) overlaid (seed 003 "
                   "Fig. 1).")


# ----------------------------------------------------------------------------- emmeans: option


_EMM_KEYS = {"specs", "by", "type", "at", "pairs", "adjust"}


def _check_emmeans(value: Any, formula: str, err: Any) -> list[dict[str, Any]]:
    """``emmeans:`` as a list of ``{specs, by, type, at, pairs, adjust}`` (names checked against the formula)."""
    from mrcstats.models.emmeans import ADJUST_METHODS, resolve_specs
    from mrcstats.models.formula import parse_formula

    items = value if isinstance(value, list) else [value]
    out = []
    for j, e in enumerate(items):
        key = "emmeans" + (f"[{j}]" if isinstance(value, list) else "")
        if isinstance(e, str):
            e = {"specs": e}
        if not isinstance(e, dict) or "specs" not in e:
            raise err(key, "expected a variable name such as LLM, or a mapping with `specs` "
                           "(optional: by, type, at, pairs, adjust)")
        bad = sorted(set(e) - _EMM_KEYS)
        if bad:
            raise err(f"{key}.{bad[0]}", f"unknown key; known keys: {', '.join(sorted(_EMM_KEYS))}")
        e = {"by": None, "type": "link", "at": None, "pairs": False, "adjust": "tukey", **e}
        if e["type"] not in ("link", "response"):
            raise err(f"{key}.type", f"expected link or response, got {e['type']!r}")
        if e["adjust"] not in ADJUST_METHODS:
            raise err(f"{key}.adjust", f"expected one of {', '.join(ADJUST_METHODS)}, got {e['adjust']!r}")
        if not isinstance(e["pairs"], bool):
            raise err(f"{key}.pairs", f"expected true or false, got {e['pairs']!r}")
        if e["at"] is not None and not isinstance(e["at"], dict):
            raise err(f"{key}.at", "expected a mapping {variable: value or [values]}")
        try:
            resolve_specs(parse_formula(formula), e["specs"], e["by"])
        except InputError as exc:
            raise err(key, str(exc)) from None
        out.append(e)
    return out


def _emmeans_section(out: Output, res: Any, e: Mapping[str, Any], name: str, j: int) -> None:
    from mrcstats.models.emmeans import emmeans, pairs

    em = emmeans(res, e["specs"], by=e["by"], type=e["type"], at=e["at"])
    what = " × ".join(em.specs) + (f" by {' × '.join(em.by)}" if em.by else "")
    lab = family_labels(res)
    scale = lab.response_desc if em.type == "response" else lab.scale_name
    tag = f"{name}_{j}"
    out.table(emmeans_table(em, caption=f"Estimated marginal means of {what} ({scale}), {name} GLMM; "
                                        "as R's emmeans.", label=f"emmeans_{tag}"))
    if e["pairs"]:
        pr = pairs(em, adjust=e["adjust"])
        kind = lab.ratio_desc.lower() if em.type == "response" else f"differences on the {lab.scale_name}"
        out.table(pairs_table(pr, caption=f"Pairwise contrasts of {what} ({kind}, {pr.adjust} adjustment), "
                                          f"{name} GLMM; as R's pairs(emmeans(...)).", label=f"pairs_{tag}"))


# ----------------------------------------------------------------------------- confint: option


def _check_confint(value: Any, err: Any) -> dict[str, Any]:
    """``confint:`` as ``{method, level, nsim, seed}`` (lme4's ``confint.merMod`` arguments)."""
    c: dict[str, Any] = {"method": "profile"} if value is True else {"method": value} if isinstance(value, str) \
        else dict(value)
    bad = sorted(set(c) - {"method", "level", "nsim", "seed"})
    if bad:
        raise err(f"confint.{bad[0]}", "unknown key; known keys: method, level, nsim, seed")
    c = {"method": "profile", "level": 0.95, "nsim": 1000, "seed": None, **c}
    if c["method"] not in ("Wald", "profile", "boot"):
        raise err("confint.method", f"expected Wald, profile or boot, got {c['method']!r}")
    if not isinstance(c["level"], (int, float)) or not 0 < float(c["level"]) < 1:
        raise err("confint.level", f"expected a number between 0 and 1, got {c['level']!r}")
    if not isinstance(c["nsim"], int) or c["nsim"] < 1:
        raise err("confint.nsim", f"expected a positive integer, got {c['nsim']!r}")
    c["level"] = float(c["level"])
    return c


def _confint_section(out: Output, res: Any, c: Mapping[str, Any], name: str, seed: int) -> None:

    ci = res.confint(method=c["method"], level=c["level"], nsim=c["nsim"],
                     seed=c["seed"] if c["seed"] is not None else seed)
    frame = ci.to_frame().astype(float).reset_index(names="Parameter")
    notes = list(ci.messages) + [f"Refused: {r}" for r in ci.refused]    # NA rows say why
    if c["method"] == "boot":
        notes.append(f"{ci.nsim} parametric-bootstrap refits (seed {ci.seed}), {ci.n_failed} failed.")
    out.table(Table(frame, caption=f"{c['level']:.0%} confidence intervals ({c['method']}) of the {name} GLMM; as "
                                   "lme4's confint().", label=f"confint_{name}",
                    formats={col: "{:.4f}" for col in frame.columns[1:]}, notes=tuple(notes)))
