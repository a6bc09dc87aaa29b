"""``error_types``: counts of a category column per condition, grouped bars and a test of association."""
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
    filter_note,
)
from mrcstats.report.analyses.contingency import TEST_KEYS, check_tests
from mrcstats.stats.tables import crosstab


class ErrorTypes(Analysis):
    type = "error_types"
    title = "Error types"
    keys: ClassVar[dict[str, Key]] = {"rows": Key((str,), "error_type"), "cols": Key((str,), "condition"), "order": Key((dict,), {}),
            **TEST_KEYS, "tests": Key((list, str), ["chisq"]), "simulate": Key((bool,), True)}

    def check(self, opts: dict[str, Any], err: Any, base: Any) -> None:
        check_tests(opts, err)

    def run(self, ctx: Context, a: AnalysisSpec) -> Output:
        d = ctx.rows(a)
        rows, cols = a.get("rows"), a.get("cols")
        results = [T.table_test(crosstab, d, rows, cols, test=t, **T.fisher_kw(ctx.seed, a.get("simulate"),
                                                                                   a.get("B")))
                   for t in a.get("tests")]
        counts = results[0].table
        order = dict(a.get("order") or {})
        if rows in order:
            first = [str(v) for v in order[rows]]
            counts = counts.reindex(first + [r for r in counts.index if r not in set(first)], fill_value=0)
        if cols in order:
            first = [str(v) for v in order[cols]]
            counts = counts.reindex(columns=first + [c for c in counts.columns if c not in set(first)], fill_value=0)
        tests = [(T.test_name(r), r.test) for r in results]
        title = a.get("title") or f"{rows} by {cols}"
        out = Output(f"Error types: {title}")
        out.figure(F.error_type_bars(counts), f"a{a.index}_error_types",
                   f"{title}: counts of each {rows} per {cols} (seed 004 Fig. 2 layout).")
        out.table(T.contingency_table(counts, tests, caption=f"{title}: counts of {rows.replace('_', ' ')} by "
                                      f"{cols.replace('_', ' ')}.", label=f"a{a.index}_error_types",
                                      effects=T.effects(counts, rows, cols)))
        out.headline.setdefault("error_types", {})[title] = counts.to_dict()
        T.finish(out, results, tests, title, counts, f"Counts of {rows} by {cols}{filter_note(a.get('filter'))}.")
        return out
