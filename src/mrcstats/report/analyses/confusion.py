"""``confusion``: gold × predicted label counts, heat map, and a test of association."""
from __future__ import annotations

from typing import Any, ClassVar

from mrcstats.report import figures as F
from mrcstats.report.analyses import _tests as T
from mrcstats.report.analyses.base import (
    Analysis,
    AnalysisSpec,
    Context,
    Key,
    Output,
    TestRecord,
    filter_note,
)
from mrcstats.report.analyses.contingency import TEST_KEYS, check_tests
from mrcstats.report.tables import contingency_table
from mrcstats.stats.tables import confusion_table


class Confusion(Analysis):
    type = "confusion"
    title = "Confusion matrix"
    keys: ClassVar[dict[str, Key]] = {"gold": Key((str,), "gold"), "pred": Key((str,), "pred"), "model": Key((str,), None),
            "labels": Key((list,), None), **TEST_KEYS, "tests": Key((list, str), ["chisq"])}

    def check(self, opts: dict[str, Any], err: Any, base: Any) -> None:
        check_tests(opts, err)

    def run(self, ctx: Context, a: AnalysisSpec) -> Output:
        d = ctx.rows(a)
        gold, pred = a.get("gold"), a.get("pred")
        results = [T.table_test(confusion_table, d, gold, pred, model=a.get("model"), labels=a.get("labels"),
                                test=t, **T.fisher_kw(ctx.seed, a.get("simulate"), a.get("B")))
                   for t in a.get("tests")]
        tests = [(T.test_name(r), r.test) for r in results]
        counts = results[0].table
        title = a.get("title") or f"{gold} × {pred}"
        out = Output(f"Confusion matrix: {title}")
        out.figure(F.confusion_matrix_plot(counts, xlabel=f"predicted ({pred})", ylabel=f"gold ({gold})"),
                   f"a{a.index}_confusion", f"Confusion matrix, {title}: rows = gold, columns = predicted, counts "
                   "in the cells.")
        out.table(contingency_table(counts, tests, caption=f"Confusion matrix, {title} (rows gold, columns "
                                    "predicted).", label=f"a{a.index}_confusion"))
        for why, k in dict(results[0].skipped).items():
            out.leave_out(why, k)
            out.note(f"Left out {k} row(s): {why}.")
        out.headline.setdefault("tests", {})[title] = {n: T.p_of(r) for n, r in tests}
        out.tests.append(TestRecord("report", title, tests[0][0], float(T.p_of(tests[0][1]))))
        out.methods += [f"Counts of gold {gold} by predicted {pred}{filter_note(a.get('filter'))}."] + \
            [T.test_method(out, n) for n, _ in tests]
        return out
