"""``irt`` and ``subset_eval``: item response theory beside P_d, and held-out validation of item subsets."""
from __future__ import annotations

from typing import Any, ClassVar

import pandas as pd

from mrcstats._words import plural
from mrcstats.report import figures as F
from mrcstats.report.analyses.base import Analysis, AnalysisSpec, Context, Key, Output
from mrcstats.report.format import format_p
from mrcstats.report.tables import Table
from mrcstats.stats.irt import irt
from mrcstats.stats.subsets import METHODS, subset_eval

_NONE = type(None)


class Irt(Analysis):
    type = "irt"
    title = "Item response theory"
    keys: ClassVar[dict[str, Key]] = {
        "model": Key((str,), "2pl", choices=("1pl", "2pl", "rasch")),
        "prior_sd": Key((float, int, _NONE), 1.0),
        "quadrature": Key((int,), 11),
        "n": Key((int,), 10, help="items listed in the most/least discriminating table"),
    }

    def run(self, ctx: Context, a: AnalysisSpec) -> Output:
        res = irt(ctx.rows(a), model=a.get("model"), prior_sd=a.get("prior_sd"), quadrature=a.get("quadrature"),
                  progress=False)
        fit = res.fit
        out = Output(a.get("title") or f"Item response theory ({fit.model.upper()})")
        it = res.items
        fitted = it[it["fitted"]]
        stats = pd.DataFrame([{"Model": fit.model.upper(), "Items": len(fit.items), "Models": fit.n_models,
                               "logLik": fit.loglik, "AIC": fit.aic, "BIC": fit.bic,
                               "LRT χ² (1PL vs 2PL)": res.lrt["chisq"] if res.lrt else None,
                               "df": res.lrt["df"] if res.lrt else None, "p": res.lrt["p"] if res.lrt else None}])
        fit_caveat = "".join(f" Caveat: {c}." for c in res.caveats)
        out.table(Table(stats, caption=f"Marginal maximum likelihood fit (models as respondents).{fit_caveat}",
                        label=f"a{a.index}_irt_fit", formats={"Items": "{:,.0f}", "df": "{:.0f}", "p": format_p,
                                                             "logLik": "{:.2f}", "AIC": "{:.1f}", "BIC": "{:.1f}",
                                                             "LRT χ² (1PL vs 2PL)": "{:.2f}"}))
        rho = res.rank_correlations
        out.figure(F.item_map_plot(fitted), f"a{a.index}_irt_item_map",
                   "Item map: difficulty b against discrimination a of every fitted item.")
        out.figure(F.pd_vs_a_plot(fitted, rho=float(rho.at["pd", "a"]) if len(rho) else None),
                   f"a{a.index}_irt_pd_vs_a", "Seed 003's discriminatory power P_d (item as cluster) against the "
                   "IRT discrimination a.")
        rc = rho.reset_index().rename(columns={"index": ""})
        out.table(Table(rc, caption="Spearman rank correlations between the item statistics over the fitted items: "
                        "P_d, IRT a and b, share correct p and point-biserial r_pb.",
                        label=f"a{a.index}_irt_rank_correlations"))
        n = a.get("n")
        ranked = res.top_items(len(fitted) if n is None else int(n), by="a")
        top = ranked.table
        cols = ["item", "a", "se_a", "b", "se_b", "p", "r_pb", "pd"]
        caveat = "".join(f" Caveat: {c}." for c in ranked.caveats)
        out.table(Table(top[cols].rename(columns={"pd": "P_d", "r_pb": "r_pb"}),
                        caption=f"The {len(top)} most discriminating items (highest a).{caveat}",
                        label=f"a{a.index}_irt_top_items"))
        th = fit.abilities.sort_values("theta", ascending=False)[["model", "theta", "sd"]]
        out.table(Table(th.rename(columns={"model": "Model", "theta": "θ (EAP)", "sd": "posterior SD"}),
                        caption="Model abilities (posterior means and SDs).", label=f"a{a.index}_irt_abilities"))
        for why, k in res.skipped.items():
            out.note(f"{k} {why}.")
        out.headline["irt"] = {"model": fit.model, "loglik": fit.loglik, "items": len(fit.items),
                               "rho_pd_a": float(rho.at["pd", "a"]) if len(rho) else None,
                               "lrt": dict(res.lrt) if res.lrt else None}
        prior = ("no prior (a in [0.001, 100])" if fit.prior_sd is None else
                 f"a normal prior on log a with SD {fit.prior_sd:g} centred at the estimated mean")
        out.methods.append(
            f"IRT: {fit.model.upper()} (logit P = a_i θ_j + d_i, b = −d/a, θ ~ N(0, 1)) by marginal maximum likelihood "
            f"with {fit.quadrature}-node adaptive Gauss–Hermite quadrature per model"
            + (f"; {prior}" if fit.model == "2pl" else "") +
            f"; SEs from the observed information ({fit.se_method}); abilities are EAP. Items every model answered "
            "correctly (or none) are not fitted. P_d per item: seed 003 eq. 4–7 with the item as cluster.")
        if not fit.converged:
            out.note(f"The fit stopped after {fit.iterations} iterations before converging.")
        return out


class SubsetEval(Analysis):
    type = "subset_eval"
    title = "Evaluation subsets"
    keys: ClassVar[dict[str, Key]] = {
        "ks": Key((list,), [25, 50, 100, 200, 400]),
        "methods": Key((list,), list(METHODS)),
        "folds": Key((int,), 5),
        "seeds": Key((int,), 3),
        "groups": Key((str, _NONE), None, help="log column: models held out together"),
    }

    def check(self, opts: dict[str, Any], err: Any, base: Any) -> None:
        bad = [m for m in opts["methods"] if m not in METHODS]
        if bad:
            raise err("methods", f"expected a list of {', '.join(METHODS)}, got {bad}")
        try:
            opts["ks"] = [int(k) for k in opts["ks"]]
        except (TypeError, ValueError):
            raise err("ks", f"expected a list of whole numbers, got {opts['ks']!r}") from None

    def run(self, ctx: Context, a: AnalysisSpec) -> Output:
        res = subset_eval(ctx.rows(a), ks=a.get("ks"), methods=a.get("methods"), folds=a.get("folds"),
                          seeds=a.get("seeds"), groups=a.get("groups"), progress=False)
        out = Output(a.get("title") or self.title)
        r = res.results
        out.figure(F.subset_error_plot(r, "mae"), f"a{a.index}_subset_mae",
                   f"Held-out mean absolute error of the full-benchmark accuracy against subset size, per method / "
                   f"estimator ({res.folds} folds × {len(res.seeds)} seeds; bars: 95% t intervals).")
        out.figure(F.subset_error_plot(r, "tau", ylabel="Kendall τ of the held-out ranking"), f"a{a.index}_subset_tau",
                   "Kendall τ between estimated and true accuracies of the held-out models.")
        tab = r[["method", "estimator", "k", "mae", "mae_ci_low", "mae_ci_high", "tau", "tau_ci_low", "tau_ci_high"]]
        caveat = "".join(f" Caveat: {c}." for c in res.caveats)
        out.table(Table(tab.rename(columns={"method": "Method", "estimator": "Estimator", "mae": "MAE",
                                            "mae_ci_low": "MAE low", "mae_ci_high": "MAE high", "tau": "τ",
                                            "tau_ci_low": "τ low", "tau_ci_high": "τ high"}),
                        caption="Leave-models-out validation: MAE of the estimated full-benchmark accuracy and "
                                "Kendall τ of the held-out ranking, means over folds × seeds with 95% t intervals."
                                + caveat,
                        label=f"a{a.index}_subset_eval", stub=3,
                        formats={"k": "{:.0f}", **{c: "{:.4f}" for c in ("MAE", "MAE low", "MAE high")}}))
        for nt in res.notes:
            out.note(nt)
        out.headline["subset_eval"] = res.to_dict()
        out.methods.append(
            f"Subsets: {', '.join(res.methods)}; leave-models-out cross-validation with {res.folds} folds"
            + (f" grouped by {a.get('groups')}" if a.get("groups") else "") +
            f" and {plural(len(res.seeds), 'seed')}; subset and 2PL chosen on the training models only; estimators: subset "
            "mean, anchor-weighted mean, prediction-powered IRT estimate (p-IRT: observed subset answers plus 2PL predictions for the other items).")
        return out
