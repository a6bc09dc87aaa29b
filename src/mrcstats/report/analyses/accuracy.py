"""``accuracy``: accuracy laid out rows × columns, mean ± SD over trials (seed 004 tables)."""
from __future__ import annotations

from typing import ClassVar

from mrcstats.report.analyses.base import Analysis, AnalysisSpec, Context, Key, Output
from mrcstats.report.tables import accuracy_table
from mrcstats.stats.accuracy import summarize


class Accuracy(Analysis):
    type = "accuracy"
    title = "Accuracy"
    keys: ClassVar[dict[str, Key]] = {"rows": Key((str, list), "condition"), "cols": Key((str,), "model"), "percent": Key((bool,), True),
            "order": Key((dict,), {}, help="{column: [values in display order]}")}

    def run(self, ctx: Context, a: AnalysisSpec) -> Output:
        rows = [a.get("rows")] if isinstance(a.get("rows"), str) else list(a.get("rows"))
        cols = a.get("cols")
        per = summarize(ctx.rows(a), by=[*rows, cols, "trial"]).to_frame()
        agg = per.groupby([*rows, cols], sort=False).agg(accuracy=("accuracy", "mean"), sd=("accuracy", "std"),
                                                        trials=("accuracy", "size"), n=("n", "sum")).reset_index()
        order = dict(a.get("order") or {})
        keys = [c for c in [*rows, cols] if c in order]
        if keys:
            rank = {c: {str(v): i for i, v in enumerate(order[c])} for c in keys}
            agg = agg.sort_values(by=keys, key=lambda s: s.astype(str).map(rank[s.name]).fillna(len(rank[s.name])),
                                  kind="mergesort").reset_index(drop=True)
        title = a.get("title") or f"Accuracy by {', '.join(rows)} and {cols}"
        one = bool((agg["trials"] <= 1).all())
        t = accuracy_table(agg, rows, cols, mean="accuracy", sd=None if one else "sd", percent=a.get("percent"),
                           caption=f"{title}: " + ("accuracy (percent), one trial per cell." if one else
                                                   "mean ± SD over trials (percent)."),
                           label=f"a{a.index}_accuracy_{'_'.join(rows)}_{cols}")
        out = Output(title)
        out.table(t)
        out.methods.append("Accuracy per cell = correct / all responses (invalid = not correct) per trial; mean and "
                           "sample SD over trials (seed 004 tables).")
        return out
