"""Helpers shared by the table-test plug-ins (contingency, confusion, error types, wh-word tables)."""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from mrcstats._words import plural
from mrcstats.report.analyses.base import Output
from mrcstats.report.tables import MISSING, Table, format_number, is_missing, result_dict

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


def describe_test(res: Any, name: str, n: int | None = None) -> str:
    """One line naming a test and its numbers, APA-style (``Pearson's chi-square test: χ²(2, N = 600) = 5.31,
    p = .070``; Fisher: ``p = .004``, the odds ratio with its interval for 2 × 2 tables; a Monte Carlo p
    with B and its Monte Carlo SE)."""
    from mrcstats.report.format import format_ci, format_p, format_stat

    d = result_dict(res)
    parts = []
    stat = d.get("statistic")
    if stat is not None and not is_missing(stat) and d.get("df") is not None:
        parts.append(format_stat("chi2", float(stat), d["df"], n=n))
    mc_b = getattr(res, "B", None) if getattr(res, "method", "") == "monte-carlo" else None
    if d.get("p") is not None:
        pv = format_p(d["p"], mc_b=mc_b)
        parts.append(f"p {pv}" if pv[:1] in "<>≤" else f"p = {pv}")     # as _pformat.p_clause, MC bounds too
    if d.get("odds_ratio") is not None and not is_missing(d.get("odds_ratio")):
        ci = d.get("conf_int") or (np.nan, np.nan)
        parts.append(f"odds ratio = {format_ci(float(d['odds_ratio']), ci[0], ci[1], 'odds_ratio')}")
    return name + (": " + ", ".join(parts) if parts else "")


def effect_line(e: Any) -> str:
    """``Cramér's V = 0.094 [0.000, 0.160]`` from an :class:`mrcstats.stats.effects.EffectSize`."""
    from mrcstats.report.format import format_ci

    kind = "cramers_v" if "Cramér" in e.name else "difference"
    return f"{e.name} = {format_ci(e.estimate, e.ci_low, e.ci_high, kind)} ({e.level:.0%} CI)"


def contingency_table(counts: pd.DataFrame, tests: Sequence[tuple[str, Any]] = (), caption: str = "",
                      label: str = "contingency", margins: bool = True, ratio_rows: bool = False,
                      effects: Sequence[Any] = (), labels: Mapping[str, str] | None = None) -> Table:
    """A table of counts (rows × columns, labels in the index) with totals and its tests as notes.

    ``tests`` is a list of (name, result) pairs, e.g. ``[("Fisher's exact test", fisher(...))]``;
    each result's ``to_dict()`` provides p (and statistic, df, odds ratio when present).
    ``ratio_rows`` adds, for a two-row table, the row-1/row-2 ratio of column shares
    (seed 003 Table 3's E/H and H/L rows). ``effects`` (effect sizes with intervals) are printed
    under the tests; ``labels`` renames row and column labels (``{"False": "not correct"}``).
    """
    if not isinstance(counts, pd.DataFrame):
        counts = pd.DataFrame(counts)
    names = dict(labels or {})
    t = counts.copy()
    if t.index.name:
        t.index.name = str(t.index.name).replace("_", " ").capitalize()
    t.columns = [names.get(str(c), str(c)) for c in t.columns]
    t.index = pd.Index([names.get(str(r), str(r)) for r in t.index], name=t.index.name)
    stub = str(t.index.name or "")
    body = t.apply(pd.to_numeric)
    if all(pd.api.types.is_integer_dtype(body[c]) for c in body.columns):
        body = body.astype("int64")
    t = body.copy()
    if margins:
        t["Total"] = body.sum(axis=1)
    df = t.reset_index().rename(columns={t.index.name or "index": stub or " "})
    df[df.columns[0]] = df[df.columns[0]].astype(str)
    if margins:
        tot = {df.columns[0]: "Total", **{c: body[c].sum() if c in body else body.values.sum() for c in df.columns[1:]}}
        tot["Total"] = body.values.sum()
        df = pd.concat([df, pd.DataFrame([tot])], ignore_index=True)
    if ratio_rows and len(body) == 2:
        share = body.div(body.sum(axis=1), axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = (share.iloc[0] / share.iloc[1]).replace([np.inf, -np.inf], np.nan)
        row = {df.columns[0]: f"{body.index[0]}/{body.index[1]}", **{c: ratio.get(c, np.nan) for c in df.columns[1:]}}
        if "Total" in row:
            row["Total"] = np.nan
        df = pd.concat([df, pd.DataFrame([row])], ignore_index=True)

    def fmt(v: Any) -> str:
        if is_missing(v):
            return MISSING
        v = float(v)
        return f"{int(v):,}" if v.is_integer() else format_number(v, 2)

    fmts = {c: fmt for c in df.columns[1:]}
    n = int(body.values.sum())
    notes = tuple(describe_test(res, name, n=n) for name, res in tests) + tuple(effect_line(e) for e in effects)
    return Table(df, caption=caption, label=label, formats=fmts, notes=notes)
