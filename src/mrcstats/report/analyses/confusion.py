"""``confusion``: gold × predicted label counts, heat map, and a test of association."""
from __future__ import annotations

from typing import Any, ClassVar

from mrcstats._words import plural
from mrcstats.report import figures as F
from mrcstats.report.analyses import _tests as T
from mrcstats.report.analyses.base import (
    Analysis,
    AnalysisSpec,
    Context,
    Key,
    Output,
    filter_note,
)
from mrcstats.report.analyses.contingency import TEST_KEYS, check_tests
from mrcstats.stats.tables import confusion_table

OTHER = "other"


class Confusion(Analysis):
    type = "confusion"
    title = "Confusion matrix"
    keys: ClassVar[dict[str, Key]] = {"gold": Key((str,), "gold"), "pred": Key((str,), "pred"), "model": Key((str,), None),
            "labels": Key((list,), None), **TEST_KEYS, "tests": Key((list, str), ["chisq"]),
            "group_other": Key((bool,), True, help="predicted values that are no gold label counted as 'other'")}

    def check(self, opts: dict[str, Any], err: Any, base: Any) -> None:
        check_tests(opts, err)

    def run(self, ctx: Context, a: AnalysisSpec) -> Output:
        d = ctx.rows(a)
        gold, pred = a.get("gold"), a.get("pred")
        grouped = 0
        if a.get("group_other") and not a.get("labels"):
            known = set(d[gold].dropna().astype(str))
            pv = d[pred].astype("string")
            odd = pv.notna() & ~pv.isin(known)
            grouped = int(pv[odd].nunique())
            if grouped:
                d = d.assign(**{pred: pv.where(~odd, OTHER)})
        results = [T.table_test(confusion_table, d, gold, pred, model=a.get("model"), labels=a.get("labels"),
                                test=t, **T.fisher_kw(ctx.seed, a.get("simulate"), a.get("B")))
                   for t in a.get("tests")]
        tests = [(T.test_name(r), r.test) for r in results]
        counts = results[0].table
        title = a.get("title") or f"{gold} × {pred}"
        out = Output(f"Confusion matrix: {title}")
        if OTHER in [str(c) for c in counts.columns]:
            counts = counts[[c for c in counts.columns if str(c) != OTHER] + [OTHER]]
        n_other = int(counts[OTHER].sum()) if OTHER in [str(c) for c in counts.columns] else 0
        other = (f" {plural(n_other, 'extracted answer')} ({plural(grouped, 'distinct value')}) that are not among "
                 f"the gold labels (extraction leftovers) are counted in the column '{OTHER}'." if n_other else "")
        out.figure(F.confusion_matrix_plot(counts, xlabel="predicted label", ylabel="gold label"),
                   f"a{a.index}_confusion", f"Confusion matrix, {title}: rows = gold, columns = predicted, counts "
                   f"in the cells.{other}")
        out.table(T.contingency_table(counts, tests, caption=f"Confusion matrix, {title} (rows gold, columns "
                                      f"predicted).{other}", label=f"a{a.index}_confusion",
                                      effects=T.effects(counts, gold, pred)))
        out.headline.setdefault("tests", {})[title] = {n: T.p_of(r) for n, r in tests}
        T.finish(out, results, tests, title, counts,
                 f"Counts of gold {gold} by predicted {pred}{filter_note(a.get('filter'))}; answers with no "
                 "extracted label are left out and counted; extracted values that are no gold label are "
                 f"counted as '{OTHER}'.")
        return out
