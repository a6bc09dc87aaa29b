"""``contingency``: a cross-table of two log columns with Fisher's and/or Pearson's test."""
from __future__ import annotations

from typing import Any, ClassVar

from mrcstats.report.analyses import _tests as T
from mrcstats.report.analyses.base import (
    Analysis,
    AnalysisSpec,
    Context,
    Key,
    Output,
    compare_published,
    filter_note,
    words,
)
from mrcstats.stats.tables import crosstab

#: keys of the analyses that run table tests
TEST_KEYS = {"tests": Key((list, str), ["fisher"], help="fisher and/or chisq"),
             "simulate": Key((bool,), False, help="Monte Carlo p for Fisher's r×c test"),
             "B": Key((int,), 2000, help="Monte Carlo replicates")}


def check_tests(opts: dict[str, Any], err: Any) -> None:
    tests = [opts["tests"]] if isinstance(opts["tests"], str) else list(opts["tests"])
    for t in tests:
        if t not in ("fisher", "chisq"):
            raise err("tests", f"expected fisher and/or chisq, got {t!r}")
    opts["tests"] = tests
    if opts["B"] < 1:
        raise err("B", f"expected a positive number of replicates, got {opts['B']}")


def published_frame(counts: Any, labels: dict[str, str]) -> Any:
    """The counts as the paper's tables print them, for ``published:``: one row per row level, one column per
    column level (labelled as in the report: ``correct``, ``not correct``), ``Total``, and for a table against
    correctness ``error rate (%)`` = 100 · not correct / Total."""
    ours = counts.copy()
    ours.index = ours.index.astype(str)
    ours.columns = [labels.get(str(c), str(c)) for c in ours.columns]
    ours["Total"] = ours.sum(axis=1)
    if "not correct" in ours.columns:
        ours["error rate (%)"] = 100.0 * ours["not correct"] / ours["Total"]
    return ours


class Contingency(Analysis):
    type = "contingency"
    title = "Fisher and chi-square tests"
    keys: ClassVar[dict[str, Key]] = {"rows": Key((str,), None, required=True), "cols": Key((str,), None, required=True),
            "unit": Key((str,), "rows", choices=("rows", "item"), help="item: one row per item"), **TEST_KEYS}

    def check(self, opts: dict[str, Any], err: Any, base: Any) -> None:
        check_tests(opts, err)

    def run(self, ctx: Context, a: AnalysisSpec) -> Output:
        d = ctx.rows(a)
        if a.get("unit") == "item":
            d = d.drop_duplicates("item")
        rows, cols = a.get("rows"), a.get("cols")
        results = [T.table_test(crosstab, d, rows, cols, test=t, **T.fisher_kw(ctx.seed, a.get("simulate"),
                                                                                   a.get("B")))
                   for t in a.get("tests")]
        tests = [(T.test_name(r), r.test) for r in results]
        counts = results[0].table
        title = a.get("title") or f"{rows} × {cols}"
        kind = "Fisher" if "fisher" in a.get("tests") else "Chi-square"
        out = Output(f"{kind}: {title}")
        out.methods_title = f"Contingency table: {title}"
        labels = T.CORRECT_LABELS if cols == "correct" or rows == "correct" else {}
        out.table(T.contingency_table(counts, tests, caption=f"Counts of {words(rows)} by {words(cols)} "
                                      f"({'one row per item' if a.get('unit') == 'item' else 'one row per response'}"
                                      f"{filter_note(a.get('filter'), lead=', ')}).",
                                      label=f"a{a.index}_contingency_{rows}_{cols}",
                                      effects=T.effects(counts, rows, cols), labels=labels))
        out.headline.setdefault("tests", {})[title] = {n: T.p_of(r) for n, r in tests}
        T.finish(out, results, tests, title, counts,
                 f"Counts of {words(rows)} by {words(cols)}{filter_note(a.get('filter'))}; invalid answers "
                 "(missing correctness) are left out of tables against correctness and counted.")
        if a.get("published"):
            compare_published(out, title, published_frame(counts, labels), a.get("published"), a.get("tolerance"),
                              f"a{a.index}_contingency",
                              unit="counts" + ("; error rate in percent" if any(
                                  "error rate (%)" in c for c in a.get("published").values()) else ""),
                              not_compared=a.get("not_compared"))
        return out
