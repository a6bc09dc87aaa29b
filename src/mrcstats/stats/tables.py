"""Contingency tables built straight from a canonical log, each returned with its test.

* :func:`wh_word_table` - groups of clusters (e.g. the 100 easiest vs the 100 hardest,
  or the highest vs lowest P_d) x the question's wh-word, counting each item once
  (seed 003 Table 3; Fisher's exact test with a simulated p-value, 2,000 replicates).
  The wh-word comes from a features table joined on ``item`` (column ``wh_word``).
* :func:`condition_outcome_table` - condition x outcome (right / wrong / invalid)
  (seed 004 Table 13; Fisher's exact test).
* :func:`confusion_table` - gold x predicted label (seed 004 Tables 14-15) and
  :func:`crosstab` for any two columns, e.g. condition x predicted label (Table 16, chi-square).
"""
from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from mrcstats._repr import Result
from mrcstats._words import plural
from mrcstats.errors import InputError
from mrcstats.stats._rxc_exact import ExactTooLarge
from mrcstats.stats.contingency import ChisqResult, FisherResult, chisq, fisher

__all__ = [
    "OUTCOMES",
    "WH_ORDER",
    "TableTest",
    "condition_outcome_table",
    "confusion_table",
    "crosstab",
    "wh_word_table",
]

#: column order of seed 003 Table 3 (other values follow, sorted)
WH_ORDER = ("What", "When", "Which", "Why", "Where", "Who", "Whom", "How", "Other")
#: outcome columns of :func:`condition_outcome_table`
OUTCOMES = ("right", "wrong", "invalid")


@dataclass(frozen=True, repr=False)
class TableTest(Result):
    """A contingency table and the test run on it (``FisherResult`` or ``ChisqResult``)."""

    name: str
    table: pd.DataFrame
    test: FisherResult | ChisqResult
    skipped: Mapping[str, int] = field(default_factory=dict)

    def to_frame(self) -> pd.DataFrame:
        return self.table.copy()

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "rows": [str(r) for r in self.table.index],
                "columns": [str(c) for c in self.table.columns],
                "counts": self.table.to_numpy().tolist(), "test": self.test.to_dict(),
                "skipped": dict(self.skipped)}

    def summary(self) -> str:
        parts = [self.name, self.table.to_string(), self.test.summary()]
        for why, k in self.skipped.items():
            parts.append(f"skipped {k}: {why}")
        return "\n".join(parts)


def _run_test(tab: pd.DataFrame, test: str, simulate: bool, B: int, seed: int | None,
              correct: bool) -> FisherResult | ChisqResult:
    """Fisher (exact, falling back to Monte Carlo with a message when the exact network is too
    large) or chi-square."""
    if test == "fisher":
        try:
            return fisher(tab, simulate=simulate, B=B, seed=seed)
        except ExactTooLarge as exc:
            print(f"{exc}; using the Monte Carlo p-value with B = {B} instead", file=sys.stderr)
            return fisher(tab, simulate=True, B=B, seed=seed)
    if test == "chisq":
        return chisq(tab, correct=correct)
    raise InputError(f"test must be 'fisher' or 'chisq', got {test!r}")


def _need(log: pd.DataFrame, cols: Sequence[str], who: str) -> None:
    """The package's one log check (:func:`mrcstats.io.schema.require_log`): a DataFrame with ``cols``."""
    from mrcstats.io.schema import require_log

    require_log(log, who, tuple(cols), correct=None)


def _report(who: str, skipped: Mapping[str, int]) -> None:
    for why, k in skipped.items():
        if k:
            print(f"{who}: left out {plural(k, 'row')}: {why}", file=sys.stderr)


def crosstab(log: pd.DataFrame, rows: str, cols: str, *, test: str = "chisq", simulate: bool = False,
             B: int = 2000, seed: int | None = None, correct: bool = True,
             row_order: Sequence[str] | None = None, col_order: Sequence[str] | None = None,
             name: str | None = None) -> TableTest:
    """Counts of ``rows`` x ``cols`` over the log's rows, with Fisher's or the chi-square test.

    Rows where either column is missing are left out and counted in ``skipped``.
    """
    from mrcstats.backends import dataset_pass

    dsp = dataset_pass(log)
    if dsp is not None:  # larger than memory: the counts of each (rows, cols) pair from its row pass (DuckDB)
        pairs, n_miss = dsp.pair_counts(rows, cols)
        skipped = {f"missing {rows} or {cols}": n_miss} if n_miss else {}
        _report("crosstab", skipped)
        if pairs.empty:
            raise InputError(f"crosstab: no rows with both {rows!r} and {cols!r} present")
        lab = pd.DataFrame({"a": pairs[rows].astype(str).to_numpy(), "b": pairs[cols].astype(str).to_numpy(),
                            "n": pairs["n"].to_numpy()})
        tab = lab.pivot_table(index="a", columns="b", values="n", aggfunc="sum", fill_value=0)
    else:
        _need(log, [rows, cols], "crosstab")
        a, b = log[rows], log[cols]
        miss = a.isna() | b.isna()
        skipped = {f"missing {rows} or {cols}": int(miss.sum())} if miss.any() else {}
        _report("crosstab", skipped)
        a, b = a[~miss].astype(str), b[~miss].astype(str)
        if len(a) == 0:
            raise InputError(f"crosstab: no rows with both {rows!r} and {cols!r} present")
        tab = pd.crosstab(a, b)
    if row_order is not None:
        tab = tab.reindex([str(r) for r in row_order] + [r for r in tab.index if r not in set(map(str, row_order))],
                          fill_value=0)
    if col_order is not None:
        tab = tab.reindex(columns=[str(c) for c in col_order]
                          + [c for c in tab.columns if c not in set(map(str, col_order))], fill_value=0)
    tab.index.name, tab.columns.name = rows, cols
    tab = tab.astype(np.int64)
    return TableTest(name or f"{rows} x {cols}", tab, _run_test(tab, test, simulate, B, seed, correct), skipped)


def confusion_table(log: pd.DataFrame, gold: str = "gold", pred: str = "pred", *, model: str | None = None,
                    labels: Sequence[str] | None = None, test: str = "chisq", correct: bool = True,
                    simulate: bool = False, B: int = 2000, seed: int | None = None) -> TableTest:
    """Gold x predicted label confusion matrix (seed 004 Tables 14-15), rows = gold labels.

    ``labels`` fixes the order (and keeps labels never seen, as all-zero rows/columns; the
    test drops those with a message). ``model`` restricts the log to one model.
    """
    _need(log, [gold, pred], "confusion_table")
    if model is not None:
        _need(log, ["model"], "confusion_table")
        log = log[log["model"].astype(str) == str(model)]
        if len(log) == 0:
            raise InputError(f"confusion_table: model {model!r} has no rows in the log")
    res = crosstab(log, gold, pred, test=test, correct=correct, simulate=simulate, B=B, seed=seed,
                   row_order=labels, col_order=labels, name=f"confusion: {gold} x {pred}")
    return res


def condition_outcome_table(log: pd.DataFrame, condition: str = "condition", *, correct: str = "correct",
                            test: str = "fisher", simulate: bool = False, B: int = 2000,
                            seed: int | None = None, correct_yates: bool = True) -> TableTest:
    """Condition x outcome (right / wrong / invalid; <NA> correctness = invalid), seed 004 Table 13."""
    _need(log, [condition, correct], "condition_outcome_table")
    cond = log[condition]
    miss = cond.isna()
    skipped = {f"missing {condition}": int(miss.sum())} if miss.any() else {}
    _report("condition_outcome_table", skipped)
    try:
        y = log.loc[~miss, correct].astype("boolean")
    except (TypeError, ValueError):
        raise InputError(f"condition_outcome_table: column {correct!r} must hold true/false values") from None
    outcome = np.where(y.isna().to_numpy(), "invalid", np.where(y.fillna(False).to_numpy(dtype=bool), "right", "wrong"))
    tab = pd.crosstab(cond[~miss].astype(str).to_numpy(), outcome).reindex(columns=list(OUTCOMES), fill_value=0)
    tab.index.name, tab.columns.name = condition, "outcome"
    tab = tab.astype(np.int64)
    return TableTest(f"{condition} x outcome", tab, _run_test(tab, test, simulate, B, seed, correct_yates), skipped)


def wh_word_table(log: pd.DataFrame, features: pd.DataFrame, groups: Mapping[str, Sequence[str]] | Any, *,
                  item: str = "item", cluster: str = "cluster", wh_col: str = "wh_word",
                  test: str = "fisher", simulate: bool = True, B: int = 2000, seed: int | None = None,
                  correct: bool = True) -> TableTest:
    """Groups of clusters x wh-word, each item counted once (seed 003 Table 3).

    ``groups``: ``{"Easiest": [clusters], "Hardest": [clusters]}``, or a
    :class:`mrcstats.stats.discrimination.ClusterDifficulty` (its easiest / hardest lists).
    ``features``: one row per item with columns ``item`` and ``wh_word`` (joined on item).
    Default test: Fisher's exact test with a Monte Carlo p-value on ``B = 2000`` tables,
    as in the seed. Items without a wh-word are left out and counted.
    """
    if hasattr(groups, "groups") and callable(groups.groups):
        groups = groups.groups()
    if not isinstance(groups, Mapping) or len(groups) < 2:
        raise InputError("wh_word_table: groups must map at least two group names to lists of clusters")
    _need(log, [item, cluster], "wh_word_table")
    if not isinstance(features, pd.DataFrame) or item not in features.columns or wh_col not in features.columns:
        raise InputError(f"wh_word_table: the features table needs columns {item!r} and {wh_col!r}")
    dup = features[item].astype(str).duplicated()
    if dup.any():
        raise InputError(f"wh_word_table: the features table has {int(dup.sum())} repeated item(s); "
                         "give one row per item")
    items = log[[item, cluster]].dropna().astype(str).drop_duplicates()
    member: dict[str, str] = {}
    for g, cls in groups.items():
        for c in cls:
            c = str(c)
            if c in member and member[c] != str(g):
                raise InputError(f"wh_word_table: cluster {c!r} is in both group {member[c]!r} and {str(g)!r}")
            member[c] = str(g)
    items = items[items[cluster].isin(member)]
    items = items.assign(group=items[cluster].map(member))
    feats = features[[item, wh_col]].copy()
    feats[item] = feats[item].astype(str)
    merged = items.merge(feats, on=item, how="left")
    miss = merged[wh_col].isna()
    skipped = {f"items without {wh_col}": int(miss.sum())} if miss.any() else {}
    _report("wh_word_table", skipped)
    merged = merged[~miss]
    if len(merged) == 0:
        raise InputError("wh_word_table: no item of the given clusters has a wh-word")
    tab = pd.crosstab(merged["group"], merged[wh_col].astype(str))
    order = [w for w in WH_ORDER if w in tab.columns] + sorted(c for c in tab.columns if c not in WH_ORDER)
    tab = tab.reindex(index=[str(g) for g in groups], columns=order, fill_value=0).astype(np.int64)
    tab.index.name, tab.columns.name = "group", wh_col
    return TableTest("group x wh-word", tab, _run_test(tab, test, simulate, B, seed, correct), skipped)
