"""``summary``: accuracy per group with its 95% interval (:func:`mrcstats.stats.accuracy.summarize`)."""
from __future__ import annotations

from typing import Any, ClassVar

import pandas as pd

from mrcstats.report.analyses.base import (
    Analysis,
    AnalysisSpec,
    Context,
    Key,
    Output,
    cluster_words,
    compare_published,
)
from mrcstats.report.tables import PairTable, kind_formats
from mrcstats.stats.accuracy import summarize


class Summary(Analysis):
    type = "summary"
    title = "Accuracy"
    keys: ClassVar[dict[str, Key]] = {
        "by": Key((list, str), ["model"], help="grouping columns"),
        "cluster": Key((str,), "cluster", help="column the interval is clustered on"),
        "invalid": Key((str,), "wrong", choices=("wrong", "exclude"), help="invalid answers: wrong or left out")}

    def check(self, opts: dict[str, Any], err: Any, base: Any) -> None:
        if isinstance(opts["by"], str):
            opts["by"] = [c.strip() for c in opts["by"].split(",") if c.strip()]

    def run(self, ctx: Context, a: AnalysisSpec) -> Output:
        title = a.get("title") or self.title
        by, cluster = list(a.get("by")), a.get("cluster")
        data = ctx.rows(a)
        res = summarize(data, by=by, cluster=cluster, invalid=a.get("invalid"))
        f = res.to_frame()
        repeated = res.ci_method == "clustered wilson"
        lo, hi = "ci_low", "ci_high"
        how = res.ci_words() + (f", clustered by {cluster_words(data, cluster)}" if repeated
                                else " (one response per cluster)")
        names = {b: b.replace("_", " ").capitalize() for b in by}
        vis = pd.DataFrame({**{names[b]: f[b] for b in by}, "n": f["n"], "Accuracy": f["accuracy"],
                            "95% CI": list(zip(f[lo], f[hi])), "Accuracy (valid)": f["accuracy_valid"],
                            "Invalid": f["invalid"]})
        shared = "accuracy_shared" in f.columns        # the models' item sets differ: the shared-item accuracy
        if shared:
            vis["Accuracy (shared items)"] = f["accuracy_shared"]
        fm = kind_formats({"n": "count", "Accuracy": "accuracy", "Accuracy (valid)": "accuracy", "Invalid": "count",
                           **({"Accuracy (shared items)": "accuracy"} if shared else {})})
        fm["95% CI"] = lambda v: f"[{kind_formats({'x': 'accuracy'})['x'](v[0])}, {kind_formats({'x': 'accuracy'})['x'](v[1])}]"
        inv = ("invalid answers count as not correct" if a.get("invalid") == "wrong" else
               "invalid answers left out (accuracy over valid answers)")
        out = Output(f"{title} by {', '.join(names.values())}" if by else title)
        out.table(PairTable(vis, raw=f, caption=f"{title} by {', '.join(names.values()) or 'all'}: accuracy over all "
                            f"responses ({inv}) with its {how}; accuracy over valid answers and the number "
                            "of invalid answers beside it"
                            + ("; the models answered different items, so the accuracy over the items every "
                               "model answered is beside it too (rank on that column)." if shared else "."),
                            label=f"a{a.index}_summary_{'_'.join(by)}",
                            stub=len(by), formats=fm))
        if a.get("published"):
            ours = f.assign(_k=f[by].astype(str).agg(" / ".join, axis=1)).set_index("_k")[["accuracy"]]
            compare_published(out, title, ours, a.get("published"), a.get("tolerance"), f"a{a.index}_summary",
                              not_compared=a.get("not_compared"))
        out.methods_title = title
        out.methods.append(
            f"Accuracy = correct / all responses per group ({inv}); interval: {how}. The package's one interval "
            "rule: when clusters hold several responses (repeated trials of an item, questions of a passage) "
            "Wilson's formula at the effective sample size p(1 − p)/SE² (at most n), SE the cluster-robust "
            "standard error with the small-sample factor G/(G − 1), G = clusters, and a t critical value on "
            "G − 1 degrees of freedom in place of z (Miller 2024, Eq. 4; Korn and Graubard 1998; Cameron, "
            "Gelbach and Miller 2008; Inspect's ci_wilson(cluster=)), else the Wilson score interval as R's "
            "prop.test(k, n, correct = FALSE); both stay inside [0, 1].")
        for n in res.notes:
            out.note(n[0].upper() + n[1:] + ".")
        return out
