"""``compare``: rank models and compare every pair (paired, clustered, multiplicity-adjusted; Miller 2024).

Spec keys: ``models`` (default all), ``cluster`` (column for cluster-robust SEs; default none), ``adjust``
(holm | BH | bonferroni | none), ``bootstrap`` (cluster-bootstrap resamples, 0 = none), ``alpha``.
Lays out the ranking table, the pairwise matrix of differences with significance marks after adjustment,
a forest plot of the accuracies with their CIs, and the pairs table (written beside the PDF when long).
"""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pandas as pd

from mrcstats.report.analyses.base import Analysis, AnalysisSpec, Context, Key, Output, filter_note
from mrcstats.report.tables import Table


def _pct(v: Any) -> str:
    import math

    return "NA" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{round(float(v), 1) + 0.0:.1f}"


def _p(v: Any) -> str:
    from mrcstats.report.format import format_p

    return format_p(v)


class Compare(Analysis):
    type = "compare"
    title = "Model comparison"
    keys: ClassVar[dict[str, Key]] = {
        "models": Key((list,), None, help="models to compare (all pairs among them; default all)"),
        "cluster": Key((str,), None, help="column grouping items, for cluster-robust SEs"),
        "adjust": Key((str,), "holm", choices=("holm", "BH", "bonferroni", "none"),
                      help="p-value adjustment across pairs (R's p.adjust)"),
        "bootstrap": Key((int,), 0, help="cluster-bootstrap resamples for the CI of each difference"),
        "alpha": Key((float,), 0.05, help="1 - confidence level; significance level of the marks"),
    }

    def check(self, opts: dict[str, Any], err: Any, base: Any) -> None:
        if opts["bootstrap"] < 0:
            raise err("bootstrap", f"expected 0 or a positive number of resamples, got {opts['bootstrap']}")
        if not 0 < opts["alpha"] < 1:
            raise err("alpha", f"expected a number between 0 and 1, got {opts['alpha']}")
        if opts["models"] is not None:
            opts["models"] = [str(m) for m in opts["models"]]

    def run(self, ctx: Context, a: AnalysisSpec) -> Output:
        from mrcstats.report.figures import forest_plot, pairwise_matrix_plot
        from mrcstats.stats.compare import compare

        res = compare(ctx.rows(a), models=a.get("models"), cluster=a.get("cluster"), alpha=a.get("alpha"),
                      adjust=a.get("adjust"), bootstrap=a.get("bootstrap"), seed=ctx.seed)
        alpha = res.alpha
        lvl = f"{100 * (1 - alpha):g}%"
        title = a.get("title") or self.title
        out = Output(title)
        rk = res.ranking()
        se_col = "se_cluster" if res.cluster else "se"
        differ = bool((rk["items_missing"] > 0).any())
        tab = rk[["rank", "model", "n_items", "accuracy", se_col, "ci_low", "ci_high",
                  *(["accuracy_shared"] if differ else [])]].copy()
        tab.columns = ["Rank", "Model", "Items", "Accuracy (%)", "SE (%)", f"{lvl} CI low", f"{lvl} CI high",
                       *([f"Shared-item accuracy (%, {int(rk['n_shared'].iloc[0])} items)"] if differ else [])]
        tab[tab.columns[3:]] = tab[tab.columns[3:]] * 100.0
        shared_words = (f" Item sets differ: ranks use the accuracy on the {int(rk['n_shared'].iloc[0]):,} items "
                        f"every model answered (last column)." if differ and res.rank_basis() == "shared items"
                        else "")
        from mrcstats.stats.accuracy import ci_words

        se_words = (f"cluster-robust standard error (SE) clustered on {res.cluster}, with the small-sample "
                    "factor G/(G−1) for G clusters" if res.cluster
                    else "standard error (SE) from the central limit theorem, items independent")
        ci_name = "; ".join(dict.fromkeys(ci_words(m, 1 - alpha) for m in rk["ci_method"]))
        out.table(Table(tab, caption=f"{title}: models ranked by accuracy (percent) with the {se_words}, and "
                                     f"the {ci_name} of the accuracy, the interval of the accuracy tables."
                                     + shared_words,
                        label=f"a{a.index}_compare_ranking", stub=2,
                        formats={c: _pct for c in tab.columns[3:]}))
        # (table values are percent: the CSV beside the PDF holds the same numbers unrounded)
        order = list(rk["model"])
        diff = res.matrix("diff").loc[order, order]
        padj = res.matrix("p_adjusted").loc[order, order]
        sig = padj.lt(alpha).fillna(False)
        adj_name = {"holm": "Holm", "BH": "Benjamini–Hochberg", "bonferroni": "Bonferroni",
                    "none": "no"}[res.adjust]
        low = pd.DataFrame(np.nan, index=order, columns=order)
        high = low.copy()
        for r in res.pairs.itertuples(index=False):     # row − column: the reversed pair's interval is negated
            low.loc[r.model_a, r.model_b], high.loc[r.model_a, r.model_b] = r.ci_low, r.ci_high
            low.loc[r.model_b, r.model_a], high.loc[r.model_b, r.model_a] = -r.ci_high, -r.ci_low
        out.figure(pairwise_matrix_plot(diff, sig, low=low, high=high, p=padj, p_label=f"{adj_name}-adjusted p"),
                   f"a{a.index}_compare_matrix",
                   f"Pairwise accuracy differences (row − column, percentage points), paired on items; * = "
                   f"{adj_name}-adjusted p < {alpha:g} over all {len(res.pairs)} pairs.")
        out.figure(forest_plot(rk), f"a{a.index}_compare_forest",
                   f"Accuracy with its {ci_name} (the interval of the ranking table), in rank order.")
        pairs = res.pairs.copy()
        se_used = pairs["se_cluster"] if res.cluster else pairs["se"]
        ptab = pairs[["model_a", "model_b", "n_items", "diff"]].copy()
        ptab["se"] = se_used
        ptab["ci_low"], ptab["ci_high"] = pairs["ci_low"], pairs["ci_high"]
        ptab["p"], ptab["p_adj"], ptab["p_mcnemar"] = pairs["p"], pairs["p_adjusted"], pairs["p_mcnemar"]
        ptab["corr"], ptab["var_ratio"] = pairs["corr"], pairs["variance_ratio"]
        head = ["Model A", "Model B", "Items", "Diff (pts)", "SE (pts)", "CI low", "CI high", "p",
                f"p ({adj_name})", "p McNemar", "r", "Variance ratio"]
        if res.bootstrap:
            ptab["boot_lo"], ptab["boot_hi"] = pairs["boot_ci_low"], pairs["boot_ci_high"]
            head += ["Boot. low", "Boot. high"]
        ptab.columns = head
        for c in ("Diff (pts)", "SE (pts)", "CI low", "CI high", "Boot. low", "Boot. high"):
            if c in ptab.columns:
                ptab[c] = ptab[c] * 100.0
        fm = {c: _pct for c in ("Diff (pts)", "SE (pts)", "CI low", "CI high", "Boot. low", "Boot. high")}
        fm.update({c: _p for c in ("p", f"p ({adj_name})", "p McNemar")})
        fm.update({"r": "{:.2f}", "Variance ratio": "{:.2f}"})
        fm = {k: v for k, v in fm.items() if k in ptab.columns}
        full = Table(ptab, caption=f"{title}: every pair (A − B, percentage points), paired on items.",
                     label=f"a{a.index}_compare_pairs", formats=fm, stub=2)
        ctx.extra_tables.append(full)
        lvl_ci = f"{lvl} CI"
        same_n = ptab["Items"].nunique() == 1
        compact = ptab[["Model A", "Model B", "Diff (pts)"] if same_n else ["Model A", "Model B", "Items",
                                                                          "Diff (pts)"]].copy()
        compact[lvl_ci] = [f"[{_pct(lo)}, {_pct(hi)}]" for lo, hi in zip(ptab["CI low"], ptab["CI high"])]
        compact[f"p ({adj_name})"] = ptab[f"p ({adj_name})"]
        if ptab["p McNemar"].notna().any():    # null for every pair with repeated trials: no column of dashes
            compact["p McNemar"] = ptab["p McNemar"]
        compact["Corr."] = ptab["r"]
        compact["Variance ratio"] = ptab["Variance ratio"]
        if res.bootstrap:
            compact["Bootstrap CI"] = [f"[{_pct(lo)}, {_pct(hi)}]" for lo, hi in zip(ptab["Boot. low"],
                                                                                    ptab["Boot. high"])]
        cfm = {k: v for k, v in fm.items() if k in compact.columns}
        cfm["Corr."] = "{:.2f}"
        if len(compact) <= 45:
            out.table(Table(compact, caption=f"{title}: every pair (A − B, percentage points), paired on "
                                             + (f"{int(ptab['Items'].iloc[0])} items each" if same_n else "items")
                                             + ("; CI and p from the clustered SE with a t critical value on G − 1 df (G clusters)"
                                                if res.cluster else "; CI and p from the paired SE (normal)")
                                             + "; Corr. = "
                                             f"correlation of the per-item scores; Variance ratio = paired / unpaired "
                                             f"variance. All columns (SEs, z, unadjusted p): table file "
                                             f"{full.label}.csv.",
                            label=f"a{a.index}_compare_pairs_pdf", formats=cfm, stub=2))
        else:
            out.note(f"The {len(ptab)} pairs are in the table file {full.label}.csv beside this report.")
        for why, n in res.skipped.items():
            if n:
                out.note(f"Left out: {n} {why}.")
        for n in res.notes:
            if not n.startswith("clustered SEs"):
                out.note(n[0].upper() + n[1:] + ".")
        out.headline["compare"] = {"ranking": list(rk["model"]),
                                   "significant_pairs": int(pairs["p_adjusted"].lt(alpha).sum())}
        out.methods.append(
            f"Model comparison{filter_note(a.get('filter'))} following Miller (2024, 'Adding Error Bars to Evals'): "
            f"per-item scores (mean over trials; invalid = not correct); accuracy SE by the CLT (Eq. 2)"
            + (f", clustered on {res.cluster} (Eq. 4 with G/(G−1))" if res.cluster else "")
            + "; pairs compared on the items both models answered through the per-item differences (Eq. 8), "
              + ("t-test on G − 1 df (G clusters of the pair's items; Cameron, Gelbach and Miller 2008)"
                 if res.cluster else "z-test")
            + f" with {adj_name} adjustment across pairs (R's p.adjust); exact McNemar p = "
              f"binom.test on the discordant items (single-trial data)"
            + (f"; percentile cluster bootstrap of each difference, B = {res.bootstrap}, seed {ctx.seed}"
               if res.bootstrap else "") + ".")
        return out
