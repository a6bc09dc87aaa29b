"""``summary``: accuracy per group with its interval (:func:`mrcstats.stats.accuracy.summarize`)."""
from __future__ import annotations

from typing import Any, ClassVar

from mrcstats.report.analyses.base import Analysis, AnalysisSpec, Context, Key, Output
from mrcstats.report.tables import Table
from mrcstats.stats.accuracy import summarize


class Summary(Analysis):
    type = "summary"
    title = "Accuracy"
    keys: ClassVar[dict[str, Key]] = {"by": Key((list, str), ["model"], help="grouping columns")}

    def check(self, opts: dict[str, Any], err: Any, base: Any) -> None:
        if isinstance(opts["by"], str):
            opts["by"] = [c.strip() for c in opts["by"].split(",") if c.strip()]

    def run(self, ctx: Context, a: AnalysisSpec) -> Output:
        title = a.get("title") or self.title
        by = list(a.get("by"))
        res = summarize(ctx.rows(a), by=by)
        f = res.to_frame()
        cols = [*by, "n", "accuracy", "ci_low", "ci_high", "se_cluster", "accuracy_valid", "invalid"]
        t = Table(f[[c for c in cols if c in f.columns]].rename(columns={
            "accuracy": "Accuracy", "ci_low": "95% CI low", "ci_high": "95% CI high", "se_cluster": "SE (cluster)",
            "accuracy_valid": "Acc. (valid)", "invalid": "Invalid"}),
            caption=f"{title} by {', '.join(by) or 'all'}: accuracy over all responses (invalid = not "
                    "correct), Wilson 95% interval, cluster-robust SE (clustered on `cluster`).",
            label=f"a{a.index}_summary_{'_'.join(by)}", stub=len(by),
            formats={"Accuracy": "{:.4f}", "95% CI low": "{:.4f}", "95% CI high": "{:.4f}",
                     "SE (cluster)": "{:.4f}", "Acc. (valid)": "{:.4f}"})
        out = Output(f"{title} by {', '.join(by)}" if by else title)
        out.table(t)
        out.methods_title = title
        out.methods.append("Accuracy = correct / all responses per group (invalid answers count as not correct); "
                           "Wilson score interval as R's prop.test(k, n, correct = FALSE); cluster-robust SE (CR0) "
                           "as Miller (2024), Eq. 4.")
        return out
