"""``ranks``: a leaderboard with honest uncertainty -- every model's marginal and simultaneous rank confidence set
(Mogstad, Romano, Shaikh & Wilhelm 2024; :mod:`mrcstats.stats.ranks`), its tier and the top set, from the paired
statistics of the shared items, beside the sets the independent statistics would give.

Spec keys: ``models`` (default all), ``cluster`` (cluster-robust SEs), ``method`` (paired | independent), ``level``
(0.95), ``draws`` (parametric bootstrap draws, 1000). Lays out the leaderboard table and the rank-set figure.
"""
from __future__ import annotations

from typing import Any, ClassVar

from mrcstats.report import figures as F
from mrcstats.report.analyses.base import Analysis, AnalysisSpec, Context, Key, Output, filter_note
from mrcstats.report.tables import Table
from mrcstats.stats.ranks import METHODS, ranks


def _set(lo: Any, hi: Any) -> str:
    return f"{int(lo)}" if int(lo) == int(hi) else f"[{int(lo)}, {int(hi)}]"


class Ranks(Analysis):
    type = "ranks"
    title = "Leaderboard with rank confidence sets"
    keys: ClassVar[dict[str, Key]] = {
        "models": Key((list,), None, help="models to rank (default all)"),
        "cluster": Key((str,), None, help="column grouping items, for cluster-robust SEs"),
        "method": Key((str,), "paired", choices=METHODS, help="where the covariance of the accuracies comes from"),
        "level": Key((float,), 0.95, help="coverage of every rank set"),
        "draws": Key((int,), 1000, help="parametric bootstrap draws (>= 100)"),
    }

    def check(self, opts: dict[str, Any], err: Any, base: Any) -> None:
        if not 0 < opts["level"] < 1:
            raise err("level", f"expected a number between 0 and 1, got {opts['level']}")
        if opts["draws"] < 100:
            raise err("draws", f"expected a whole number >= 100, got {opts['draws']}")
        if opts["models"] is not None:
            opts["models"] = [str(m) for m in opts["models"]]

    def run(self, ctx: Context, a: AnalysisSpec) -> Output:
        res = ranks(ctx.rows(a), level=a.get("level"), cluster=a.get("cluster"), method=a.get("method"),
                    draws=a.get("draws"), seed=ctx.seed, models=a.get("models"))
        title = a.get("title") or self.title
        out = Output(title)
        lvl = f"{100 * res.level:g}%"
        o = res.other
        what = "mean score" if res.outcome == "score" else "accuracy"
        m = res.models
        scale = 1.0 if res.outcome == "score" else 100.0
        unit = "" if res.outcome == "score" else " (%)"
        t = m[["tier", "rank", "model", "estimate", "se"]].copy()
        t["estimate"], t["se"] = t["estimate"] * scale, t["se"] * scale
        t["marginal"] = [_set(lo, hi) for lo, hi in zip(m["marginal_lo"], m["marginal_hi"])]
        t["simultaneous"] = [_set(lo, hi) for lo, hi in zip(m["simultaneous_lo"], m["simultaneous_hi"])]
        t[f"{o} marginal"] = [_set(lo, hi) for lo, hi in zip(m[f"{o}_marginal_lo"], m[f"{o}_marginal_hi"])]
        t[f"{o} simultaneous"] = [_set(lo, hi) for lo, hi in zip(m[f"{o}_simultaneous_lo"],
                                                                   m[f"{o}_simultaneous_hi"])]
        t.columns = ["Tier", "Rank", "Model", f"{what.capitalize()}{unit}", f"SE{unit}", "Marginal set",
                     "Simultaneous set", f"Marginal ({o})", f"Simultaneous ({o})"]
        used = ("paired: the variance of each difference from the items the models share" if res.method == "paired"
                else "independent: each model's own SE, the correlation through shared items ignored")
        se_words = f"clustered on {res.cluster} (CR1)" if res.cluster else "items independent"
        out.table(Table(t, caption=(
            f"{title}: models by {what} with their {lvl} marginal rank set (its own rank) and simultaneous rank set "
            f"(all ranks jointly), Mogstad, Romano, Shaikh & Wilhelm (2024), max-t stepdown with {res.draws} "
            f"parametric bootstrap draws; statistics {used} ({res.n_items:,} items, SE {se_words}); the last two "
            f"columns give the sets with the {o} statistics for comparison. Tier 1 is the top set (models no model "
            f"is shown better than); tier t + 1 the models shown worse only by models of tiers 1..t."),
            label=f"a{a.index}_ranks", stub=3,
            formats={f"{what.capitalize()}{unit}": "{:.2f}" if scale == 100 else "{:.4f}",
                     f"SE{unit}": "{:.2f}" if scale == 100 else "{:.4f}"}))
        out.figure(F.rank_sets_plot(m, other=(f"{o}_simultaneous_lo", f"{o}_simultaneous_hi"),
                                    other_label=f"simultaneous ({o})"),
                   f"a{a.index}_ranks",
                   f"Rank of each model (dot; 1 = best) with its {lvl} marginal rank set (thick bar) and simultaneous "
                   f"rank set (thin line) from the {res.method} statistics, and the simultaneous set with the {o} "
                   "statistics (grey, above).")
        top = ", ".join(res.top_set)
        tiers = res.tiers()
        widths_main = (m["simultaneous_hi"] - m["simultaneous_lo"] + 1).mean()
        widths_other = (m[f"{o}_simultaneous_hi"] - m[f"{o}_simultaneous_lo"] + 1).mean()
        out.text(f"Top set ({lvl}, simultaneous): {top} ({len(res.top_set)} of {len(m)} models). The board falls into "
                 f"{len(tiers)} tier(s). Mean simultaneous set size: {widths_main:.1f} ranks with the {res.method} "
                 f"statistics, {widths_other:.1f} with the {o} ones.")
        for n in res.notes:
            out.note(n[0].upper() + n[1:] + ".")
        out.headline["ranks"] = res.to_dict()
        out.methods.append(
            f"Rank confidence sets{filter_note(a.get('filter'))}: for every model a marginal and a simultaneous "
            f"{lvl} confidence set of its rank by the max-t stepdown of Mogstad, Romano, Shaikh & Wilhelm (2024) "
            f"(as R's csranks), from the {res.method} covariance of the accuracies ({used}), {res.draws} parametric "
            "bootstrap draws; tiers layer the board by the simultaneous rejections.")
        return out
