"""``modeltable``: GLMMs fitted earlier in the report side by side (:func:`mrcstats.report.modeltable.table`)."""
from __future__ import annotations

from typing import Any, ClassVar

from mrcstats.report.analyses.base import Analysis, AnalysisSpec, Context, Key, Output, Skip
from mrcstats.report.modeltable import GOF_ROWS, table


class ModelTableAnalysis(Analysis):
    type = "modeltable"
    title = "Models side by side"
    keys: ClassVar[dict[str, Key]] = {
        "glmms": Key((list,), None, required=True, help="names of glmm analyses earlier in the spec, in column order"),
        "model_names": Key((dict,), {}, help="{glmm name: column header} (default: the glmm names)"),
        "statistic": Key((str,), "se", choices=("se", "ci", "none"), help="under each estimate: SE, Wald CI or none"),
        "conf_level": Key((float,), 0.95),
        "stars": Key((bool,), False),
        "coef_map": Key((dict, list), None, help="{term: label}: keep, order and rename coefficient rows"),
        "coef_rename": Key((dict,), {}, help="{term: label}: rename, keep all rows"),
        "exponentiate": Key((bool,), False, help="odds ratios exp(β)"),
        "gof": Key((list,), ["nobs", "groups", "aic", "bic", "loglik"]),
        "layout": Key((str,), "stacked", choices=("stacked", "inline")),
        "caption": Key((str,), None),
    }

    def check(self, opts: dict[str, Any], err: Any, base: Any) -> None:
        glmms = opts["glmms"]
        if not glmms or not all(isinstance(g, str) for g in glmms):
            raise err("glmms", "expected a list of glmm analysis names, e.g. [token count, syntactic density]")
        if len(set(glmms)) != len(glmms):
            raise err("glmms", f"each GLMM once, got {glmms}")
        bad = sorted(set(opts["model_names"]) - set(glmms))
        if bad:
            raise err(f"model_names.{bad[0]}", f"not one of the glmms {glmms}")
        if not 0 < opts["conf_level"] < 1:
            raise err("conf_level", f"expected a number strictly between 0 and 1, got {opts['conf_level']}")
        for j, g in enumerate(opts["gof"]):
            if g not in GOF_ROWS:
                raise err(f"gof[{j}]", f"expected one of {', '.join(GOF_ROWS)}, got {g!r}")

    def run(self, ctx: Context, a: AnalysisSpec) -> Output:
        names = list(a.get("glmms"))
        missing = [g for g in names if g not in ctx.glmms]
        if missing:  # the spec check guarantees they are glmm analyses before this one: they were skipped
            raise Skip(f"the GLMM{'s' if len(missing) > 1 else ''} {', '.join(missing)} could not be fitted")
        heads = dict(a.get("model_names") or {})
        models = {heads.get(g, g): ctx.glmms[g][0] for g in names}
        what = ", ".join(f"'{g}' ({ctx.glmms[g][0].formula})" for g in names)
        caption = a.get("caption") or (f"The GLMMs {what} side by side: fixed effects, random-effect SDs and "
                                        "fit statistics.")
        t = table(models, statistic=a.get("statistic"), conf_level=a.get("conf_level"), stars=a.get("stars"),
                  coef_map=a.get("coef_map"), coef_rename=a.get("coef_rename") or None,
                  exponentiate=a.get("exponentiate"), gof=tuple(a.get("gof")), layout=a.get("layout"),
                  caption=caption, label=f"a{a.index}_modeltable")
        out = Output(a.get("title") or f"Models side by side: {', '.join(models)}")
        out.table(t.to_table())
        out.methods_title = "Models side by side"
        under = {"se": "standard errors", "ci": f"{a.get('conf_level'):.0%} Wald confidence intervals "
                 "(estimate ± z·SE, as lme4's confint(method = \"Wald\"))", "none": "no uncertainty"}[a.get("statistic")]
        out.methods.append(f"The fits of {what} are shown in one table with {under}"
                           + (", as odds ratios exp(β)" if a.get("exponentiate") else "")
                           + "; each column's numbers are that model's own (its fixed-effects table, variance "
                             "components, number of observations and groups, AIC, BIC and log-likelihood).")
        out.headline.setdefault("modeltable", {})[f"a{a.index}"] = {"models": list(t.models),
                                                                     "rows": len(t._rows())}
        return out
