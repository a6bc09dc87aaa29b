"""Helpers shared by the table-test plug-ins (contingency, confusion, error types, wh-word tables)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mrcstats._words import plural
from mrcstats.report.analyses.base import Output

TEST_TEXT = {
    "fisher": ("Fisher's exact test as R's fisher.test: for 2×2 tables the exact p, the conditional maximum-likelihood "
               "odds ratio and its 95% interval; for r×c tables the exact p (network algorithm) or, where stated, a "
               "Monte Carlo p from B Patefield random tables, (1 + #{sim ≥ obs}) / (B + 1), seeded."),
    "chisq": ("Pearson's chi-square test of independence as R's chisq.test (Yates' continuity correction for 2×2 "
              "tables only); a note flags expected counts below 5."),
}


def fisher_kw(seed: int, simulate: bool, B: int) -> dict[str, Any]:
    return {"simulate": simulate, "B": B, "seed": seed}


def table_test(fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
    """Run a stats table builder; if the exact r×c Fisher network outgrows memory, use its Monte Carlo p."""
    try:
        return fn(*args, **kw)
    except MemoryError:
        kw["simulate"] = True
        return fn(*args, **kw)


def test_name(res: Any) -> str:
    """The test's name as printed ("Fisher's exact test (Monte Carlo p, B = 2000, seed 4)")."""
    t = getattr(res, "test", res)
    if type(t).__name__.startswith("Fisher"):
        mc = getattr(t, "method", "") == "monte-carlo"
        return "Fisher's exact test" + (f" (Monte Carlo p, B = {t.B}, seed {t.seed})" if mc else " (exact)")
    return "Pearson's chi-square test" + (" with Yates' correction" if getattr(t, "correct", False) else "")


def test_method(out: Output, name: str) -> str:
    """Register the shared method paragraph of the test and return the analysis' one-line mention."""
    key = "fisher" if name.startswith("Fisher") else "chisq"
    out.test_methods[key] = TEST_TEXT[key]
    return f"Test: {name}."


#: readable labels of the correctness column's values
CORRECT_LABELS = {"False": "not correct", "True": "correct"}


def effects(counts: Any, rows: str, cols: str) -> list[Any]:
    """Effect sizes with 95% intervals for a table of counts: Cramér's V, and for two rows against
    ``correct`` the difference in accuracy between them (row 1 − row 2)."""
    import numpy as np

    from mrcstats.stats.effects import cramers_v, proportion_difference

    x = np.asarray(counts, dtype=float)
    out = []
    if min((x.sum(axis=1) > 0).sum(), (x.sum(axis=0) > 0).sum()) >= 2:
        out.append(cramers_v(x))
    if cols == "correct" and x.shape == (2, 2) and "True" in [str(c) for c in counts.columns]:
        j = [str(c) for c in counts.columns].index("True")
        n = x.sum(axis=1)
        if n.min() > 0:
            d = proportion_difference(int(x[0, j]), int(n[0]), int(x[1, j]), int(n[1]))
            r0, r1 = (str(r) for r in counts.index)
            out.append(type(d)(f"accuracy difference ({r0} − {r1})", d.estimate, d.ci_low, d.ci_high, d.level))
    return out


def record(name: str, res: Any, label: str, n: int) -> Any:
    """The :class:`TestRecord` of a table test (statistic with df for chi-square)."""
    from mrcstats.report.analyses.base import TestRecord
    from mrcstats.report.format import format_stat

    t = getattr(res, "test", res)
    stat = getattr(t, "statistic", None)
    df = getattr(t, "df", None)
    text = format_stat("chi2", stat, df, n=n) if stat is not None and df is not None else ""
    return TestRecord("report", label, name, float(t.p), text)


def finish(out: Output, results: list[Any], tests: list[tuple[str, Any]], title: str, counts: Any,
           method: str) -> None:
    """The common end of a table-test plug-in (contingency, confusion, error types): the rows its table left out
    (counted and noted), the record of its first test, and its methods lines (``method``, then one per test, then
    each test's caveat: a chi-square test's small expected counts, :attr:`mrcstats.stats.contingency.ChisqResult.note`)."""
    for why, k in dict(results[0].skipped).items():
        out.leave_out(why, k)
        out.note(f"Left out {plural(k, 'row')}: {why}.")
    out.tests.append(record(tests[0][0], results[0], title, int(counts.to_numpy().sum())))
    out.methods += [method] + [test_method(out, n) for n, _ in tests]
    out.methods += [f"{n}: {t.note}." for n, t in tests if getattr(t, "note", None)]   # small expected counts


def p_of(res: Any) -> Any:
    d = res.to_dict() if hasattr(res, "to_dict") else dict(res)
    return d.get("p")


def wh_table(out: Output, seed: int, data: Any, groups: Any, col: str, simulate: bool, B: int, label: str,
             caption: str, key: str) -> str:
    """The wh-word × group table with Fisher's test (seed 003 Table 3), added to ``out``; returns the test name."""
    from mrcstats.report.tables import contingency_table
    from mrcstats.stats.tables import wh_word_table

    feats = data.drop_duplicates("item")[["item", col]]
    tt = table_test(wh_word_table, data, feats, groups, wh_col=col, test="fisher", **fisher_kw(seed, simulate, B))
    counts = tt.table.copy()
    counts.index.name = ""
    name = test_name(tt)
    out.table(contingency_table(counts, [(name, tt.test)], ratio_rows=True, label=label, caption=caption,
                                effects=effects(counts, "", col)))
    for why, k in dict(tt.skipped).items():
        out.leave_out(why, k)
        out.note(f"Left out {plural(k, 'item')}: {why}.")
    out.headline.setdefault("tests", {})[key] = {name: tt.test.p}
    out.tests.append(record(name, tt, key, int(counts.to_numpy().sum())))
    return name
