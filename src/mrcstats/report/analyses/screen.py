"""``screen`` and ``dif``: suspect items (mis-keyed, ill-posed) with their evidence, and DIF between model groups."""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pandas as pd

from mrcstats.report import figures as F
from mrcstats.report.analyses.base import Analysis, AnalysisSpec, Context, Key, Output
from mrcstats.report.format import format_p
from mrcstats.report.tables import Table
from mrcstats.stats.dif import dif, dif_validate
from mrcstats.stats.screen import screen, screen_validate

_NONE = type(None)


def discrimination_difficulty_plot(items: pd.DataFrame, top: int = 0):
    """Signed 2PL slope ``a`` (abilities fixed; y) against the Rasch difficulty (x): flagged items marked with a
    cross, the next ``top`` highest-scoring items with an open circle. Every point's hover (HTML report) names
    the item and its P(wrong key)."""
    f = items[["b_rasch", "a", "flag"]].copy()
    f["tip"] = [f"{i} (P(wrong key) {s:.3g})" for i, s in zip(items["item"], items["score"].astype(float))]
    f["rank"] = np.arange(len(f))
    f = f[np.isfinite(f["a"].astype(float)) & np.isfinite(f["b_rasch"].astype(float))]
    flagged = f["flag"].astype(bool)
    ranked = ~flagged & (f["rank"] < top)
    rest = ~flagged & ~ranked
    fig, ax = F.new_figure("column", 0.72)
    with F.figure_style():
        pts = ax.scatter(f.loc[rest, "b_rasch"], f.loc[rest, "a"], s=4 if len(f) > 2000 else 9, color=F.PALETTE[2],
                         alpha=0.4 if len(f) > 500 else 0.8, linewidths=0, label="other items")
        F.point_labels(pts, f.loc[rest, "tip"])
        if ranked.any():
            pts = ax.scatter(f.loc[ranked, "b_rasch"], f.loc[ranked, "a"], s=16, facecolors="none",
                             edgecolors=F.PALETTE[0], linewidths=0.7, label=f"top {int(ranked.sum())} by score, not flagged")
            F.point_labels(pts, f.loc[ranked, "tip"])
        pts = ax.scatter(f.loc[flagged, "b_rasch"], f.loc[flagged, "a"], s=14, marker="x", color=F.PALETTE[4],
                         linewidths=0.8, label=f"flagged ({int(flagged.sum())})")
        F.point_labels(pts, f.loc[flagged, "tip"])
        ax.axhline(0.0, color="0.5", lw=0.5)
        ax.set_xlabel("difficulty (Rasch, ability units)")
        ax.set_ylabel("discrimination a (abilities fixed)")
        ax.legend(fontsize=6, frameon=False, loc="best")
        ax.set_title(f"{len(f):,} items", fontsize=7)
    return fig


def roc_plot(curves: pd.DataFrame, auc: pd.Series):
    """ROC curve of every signal of a validation run (``score`` drawn heavier)."""
    fig, ax = F.new_figure("column", 0.9)
    with F.figure_style():
        for k, (name, c) in enumerate(curves.groupby("signal", sort=False)):
            ax.plot(c["fpr"], c["tpr"], color=F.PALETTE[k % len(F.PALETTE)], lw=1.6 if name == "score" else 0.8,
                    ls=F.LINESTYLES[k % len(F.LINESTYLES)], label=f"{name} (AUC {auc[name]:.3f})")
        ax.plot([0, 1], [0, 1], color="0.7", lw=0.5)
        ax.set_xlabel("false-positive rate")
        ax.set_ylabel("true-positive rate (injected keys found)")
        ax.legend(fontsize=5.5, frameon=False, loc="lower right")
    return fig


class Screen(Analysis):
    type = "screen"
    title = "Item screen"
    keys: ClassVar[dict[str, Key]] = {
        "fdr": Key((float,), 0.1, help="flag items with Bayesian FDR (q-value) at most this"),
        "irt_model": Key((str,), "2pl", choices=("1pl", "2pl")),
        "shrinkage": Key((float, int), 30.0, help="weight, in items, of the overall error rates in each cluster's"),
        "validate": Key((int, _NONE), None, help="move this many keys and report the screen's power"),
        "verdicts": Key((str, _NONE), None, help="a filled review file (screen --review): realised precision of the "
                                                 "flags and each model's accuracy before and after the verdicts"),
        "n": Key((int,), 15, help="rows of the ranked table"),
    }

    def check(self, opts: dict[str, Any], err: Any, base: Any) -> None:
        if opts.get("verdicts"):
            from pathlib import Path

            p = Path(opts["verdicts"])
            p = p if p.is_absolute() else Path(base) / p
            if not p.is_file():
                raise err("verdicts", f"no such review file {str(p)!r} (a CSV `mrcstats screen --review` wrote, "
                                      "with its verdict column filled)")
            opts["verdicts"] = str(p)

    def run(self, ctx: Context, a: AnalysisSpec) -> Output:
        data = ctx.rows(a)
        k = a.get("validate")
        opts = {"fdr": a.get("fdr"), "irt_model": a.get("irt_model"), "shrinkage": float(a.get("shrinkage"))}
        val = screen_validate(data, k, seed=ctx.seed, progress=False, **opts) if k else None
        res = screen(data, progress=False, **opts)
        out = Output(a.get("title") or self.title)
        it = res.items
        n_flag = int(it["flag"].sum())
        types = it.loc[it["flag"], "error_type"].value_counts()
        out.text(f"{len(it):,} items screened; {n_flag} flagged at a Bayesian false-discovery rate of at most "
                 f"{res.fdr:g}" + (f" ({', '.join(f'{v} {t}' for t, v in types.items())})" if n_flag else "")
                 + ". The score is the posterior probability that the key is wrong.")
        cols = {"item": "Item", "score": "P(wrong key)", "q_value": "q", "error_type": "Type", "gold": "Key",
                "suggested_key": "Suggested", "choices": "Answers per option", "accuracy": "Accuracy",
                "p_broken": "P(broken)"}
        cols = {c: v for c, v in cols.items() if c in it.columns}
        top = it.head(a.get("n"))[list(cols)].rename(columns=cols)
        out.table(Table(top, caption=f"The {len(top)} most suspect items: posterior probability that the key is wrong, "
                        "Bayesian q-value (mean probability that the key is right over the items at least as "
                        "suspect), the most likely error type, the key, the most likely correct option, the answers "
                        "of all models per option (key starred), the accuracy and the probability of any error.",
                        label=f"a{a.index}_screen_items",
                        formats={"q": "{:.3g}", "P(wrong key)": "{:.3f}", "P(broken)": "{:.3f}"}))
        out.figure(discrimination_difficulty_plot(it, a.get("n")), f"a{a.index}_screen_map",
                   "Discrimination (signed slope with the abilities fixed) against Rasch difficulty; flagged items "
                   "and the other items of the ranked table marked. A mis-keyed item sits below zero: the stronger "
                   "the model, the less often it picks the key.")
        if val is not None:
            m = val.metrics.rename(columns={"signal": "Signal", "auc": "ROC AUC", "precision_at_k": f"Precision at {k}"})
            out.table(Table(m, caption=f"Power on this log: {k} keys moved to another option of the item "
                            f"(seed {ctx.seed}), the screen rerun; ROC AUC and precision among the {k} top-ranked "
                            "items of the score and of every single signal.",
                            label=f"a{a.index}_screen_validation", formats={"ROC AUC": "{:.4f}"}))
            out.figure(roc_plot(val.curves, val.metrics.set_index("signal")["auc"]), f"a{a.index}_screen_roc",
                       f"Validation curve: ROC of each signal at finding the {k} injected key errors.")
            out.headline["screen_validation"] = val.metrics.to_dict(orient="records")
        if a.get("verdicts"):
            self._verdicts(out, a, data, it, ctx)
        for why, c in res.skipped.items():
            out.note(f"{c} {why}.")
        for nt in res.notes:
            out.note(nt)
        out.headline["screen"] = {"items": len(it), "flagged": n_flag, "fdr": res.fdr,
                                  "top": list(it["item"].head(10))}
        prior = res.model.get("prior", {})
        out.methods.append(
            f"Item screen: abilities from a {res.irt_model.upper()} fitted by marginal maximum likelihood; every item "
            "then clean, mis-keyed, with several or with no correct option under a mixture model of the options the "
            "models chose (2PL choice of the correct option with the item's slope and difficulty integrated over a "
            "grid prior learned from the log, Dirichlet-multinomial wrong answers, error rates per cluster shrunk "
            f"to the log's with weight {res.model.get('shrinkage', 0):g} items; fitted shares "
            + ", ".join(f"{k_.replace('_', ' ')} {v:.3f}" for k_, v in prior.items())
            + "), fitted by EM; flags at a Bayesian false-discovery rate (mean posterior probability that the key is "
            "right over the flagged items).")
        return out

    def _verdicts(self, out: Output, a: AnalysisSpec, data: pd.DataFrame, it: pd.DataFrame, ctx: Context) -> None:
        """Realised precision of the flags from a person's verdicts, and the accuracy before and after them."""
        from mrcstats.io.relabel import apply_verdicts, read_verdicts
        from mrcstats.stats.review import relabel_effect

        path = a.get("verdicts")
        v = read_verdicts(path)
        flagged = set(it.loc[it["flag"], "item"])
        judged = v[v["item"].isin(flagged)]
        confirmed = int(judged["verdict"].isin(("rekey", "drop")).sum())
        prec = confirmed / len(judged) if len(judged) else float("nan")
        out.text(f"Review ({path}): {len(judged)} of the {len(flagged)} flagged items judged; {confirmed} confirmed "
                 f"as broken (re-keyed or dropped): realised precision {prec:.2f} against the nominal "
                 f"{1 - float(a.get('fdr')):.2f}.")
        fixed = apply_verdicts(data, path)
        eff = relabel_effect(data, fixed.log).rename(columns={
            "model": "Model", "accuracy_before": "Accuracy before", "accuracy_after": "Accuracy after",
            "change": "Change", "items_before": "Items before", "items_after": "Items after",
            "rank_before": "Rank before", "rank_after": "Rank after"})
        out.table(Table(eff, caption=f"Each model's accuracy and rank before and after the review's verdicts "
                        f"({fixed.changed} keys changed, {fixed.dropped} items dropped).",
                        label=f"a{a.index}_screen_relabel",
                        formats={"Accuracy before": "{:.4f}", "Accuracy after": "{:.4f}", "Change": "{:+.4f}"}))
        out.headline["screen_review"] = {"judged": len(judged), "confirmed": confirmed, "precision": prec,
                                         "changed": fixed.changed, "dropped": fixed.dropped}


class Dif(Analysis):
    type = "dif"
    title = "Differential item functioning"
    keys: ClassVar[dict[str, Key]] = {
        "group": Key((str,), None, required=True, help="log column naming each model's group (family)"),
        "strata": Key((int,), 5),
        "adjust": Key((str,), "BH", choices=("holm", "bonferroni", "BH", "none")),
        "validate": Key((int, _NONE), None, help="inject DIF into this many items and report detection"),
        "n": Key((int,), 15),
    }

    def run(self, ctx: Context, a: AnalysisSpec) -> Output:
        data = ctx.rows(a)
        res = dif(data, a.get("group"), strata=a.get("strata"), adjust=a.get("adjust"), progress=False)
        out = Output(a.get("title") or self.title)
        t = res.table
        cols = {"item": "Item", "group": "Focal", "favours": "Easier for", "delta_mh": "Δ_MH", "ets": "ETS",
                "mh_chisq": "MH χ²", "mh_p_adj": "MH p (adj.)", "lr_uniform": "LR uniform",
                "lr_nonuniform": "LR non-uniform", "lr_p_adj": "LR p (adj.)"}
        top = t.head(a.get("n"))[list(cols)].rename(columns=cols)
        out.table(Table(top, caption=f"Items ranked by Mantel–Haenszel χ² (ability strata: {len(res.strata_edges) - 1} "
                        "total-score quantile groups); Δ_MH = 2.35 ln OR_MH (positive: easier for the focal group), "
                        "ETS class, and the logistic-regression likelihood ratios; p-values adjusted by "
                        f"{res.adjust} over all items × groups.", label=f"a{a.index}_dif_items",
                        formats={"MH p (adj.)": format_p, "LR p (adj.)": format_p}))
        counts = t.groupby("group")["ets"].value_counts().unstack(fill_value=0)
        counts = counts.reindex(columns=["A", "B", "C"], fill_value=0).reset_index().rename(columns={"group": "Focal"})
        out.table(Table(counts, caption="ETS classes per focal group (A: negligible, B: moderate, C: large DIF).",
                        label=f"a{a.index}_dif_ets", formats={c: "{:.0f}" for c in ("A", "B", "C")}))
        k = a.get("validate")
        if k:
            v = dif_validate(data, a.get("group"), k, seed=ctx.seed, strata=a.get("strata"), adjust=a.get("adjust"))
            m = v.metrics.rename(columns={"method": "Method", "auc": "ROC AUC", "precision_at_k": f"Precision at {k}"})
            out.table(Table(m, caption=f"Detection of injected DIF: {k} items made easier for group {v.group!r} "
                            f"(wrong answers turned right with probability {v.rate:g}; seed {ctx.seed}).",
                            label=f"a{a.index}_dif_validation", formats={"ROC AUC": "{:.4f}"}))
            out.headline["dif_validation"] = v.to_dict()
        for nt in res.notes:
            out.note(nt)
        out.headline["dif"] = {"ets_counts": res.to_dict()["ets_counts"], "top": list(t["item"].head(10))}
        out.methods.append(
            "DIF: each group of models against the others; Mantel–Haenszel χ² with continuity correction and common "
            "odds ratio over total-score strata (R mantelhaen.test), Robins–Breslow–Greenland SE, ETS A/B/C; "
            "logistic regression on the rest score with group and rest × group terms, likelihood-ratio tests "
            f"(as difR's difLogistic); {res.adjust} adjustment.")
        return out

