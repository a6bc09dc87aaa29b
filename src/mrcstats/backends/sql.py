"""DuckDB SQL over a log dataset: the sufficient statistics of the log-level analyses.

The one home of the SQL. Each function takes a :class:`~mrcstats.io.dataset.LogDataset`
(the Parquet files are the view ``log``), aggregates in DuckDB (streamed, spilling
to disk past its memory limit) and returns a *small* frame of sufficient statistics;
the existing Python code of each analysis finishes the computation, so there is no
second copy of any statistic:

* :func:`summary_moments` -> :func:`mrcstats.stats.accuracy.finish_summary`
  (per group n, k, invalid, clusters and the integer cluster moments Σs², Σsm, Σm²);
* :func:`group_counts` -> integer counts per (group, trial) for ``trials="mean"`` and per
  (model, condition, masking rate, trial) for :func:`mrcstats.stats.masking.masking_accuracy`;
* :func:`per_item_scores` -> the per-item score table (model, item, cluster, score, n_trials),
  the seam of :func:`mrcstats.stats.compare.compare`;
* :func:`cell_counts` -> binomial counts per covariate pattern (GLMM collapse, contingency tables).

Only identifiers that are columns of the dataset are interpolated (quoted); values go in
as parameters.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from mrcstats.errors import InputError


def q(name: str) -> str:
    """A quoted SQL identifier."""
    return '"' + str(name).replace('"', '""') + '"'


def check_columns(ds: Any, cols: Sequence[str], what: str = "group by") -> None:
    have = set(ds.columns)
    for c in cols:
        if c not in have:
            raise InputError(f"no column {c!r} in the dataset {ds.path} to {what}; columns: "
                             f"{', '.join(ds.columns)}")


def canonical_dtypes(frame: pd.DataFrame, cols: Sequence[str], ds: Any) -> pd.DataFrame:
    """Cast key columns of a DuckDB result to the canonical log dtypes (strings, Float64, boolean)."""
    import pyarrow as pa

    for c in cols:
        t = ds.schema.field(c).type
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            frame[c] = frame[c].astype("string")
        elif pa.types.is_boolean(t):
            frame[c] = frame[c].astype("boolean")
        elif pa.types.is_floating(t):
            frame[c] = frame[c].astype("Float64") if c == "masking_rate" else frame[c].astype(float)
        elif pa.types.is_integer(t) and not frame[c].isna().any():
            frame[c] = frame[c].astype("int64")
    return frame


def summary_moments(ds: Any, by: Sequence[str], cluster: str = "cluster") -> pd.DataFrame:
    """Per group of ``by``: n, correct, invalid, clusters (non-null cluster values), clusters_valid (those
    with a valid row), ss = Σ_c s_c²,
    sm = Σ_c s_c m_c, mm = Σ_c m_c², smv = Σ_c s_c v_c, mmv = Σ_c v_c² (v_c = m_c - invalid_c: valid rows).

    Two GROUP BYs: (by, cluster) -> m_c rows, s_c correct, invalid; then by -> the sums. Integer
    arithmetic throughout (HUGEINT sums), so the result equals the in-memory path exactly.
    """
    by = list(by)
    check_columns(ds, [*by, cluster, "correct"])
    g = ", ".join(q(b) for b in by)
    inner = (f"SELECT {g + ', ' if by else ''}{q(cluster)} AS _cl, count(*) AS m, "
             f"count(*) FILTER (WHERE correct) AS s, count(*) FILTER (WHERE correct IS NULL) AS inv "
             f"FROM log GROUP BY ALL")
    outer = (f"SELECT {g + ', ' if by else ''}sum(m)::BIGINT AS n, sum(s)::BIGINT AS correct, "
             f"sum(inv)::BIGINT AS invalid, count(_cl) AS clusters, "
             f"count(_cl) FILTER (WHERE m > inv) AS clusters_valid, "
             f"sum(s::HUGEINT * s)::VARCHAR AS ss, sum(s::HUGEINT * m)::VARCHAR AS sm, "
             f"sum(m::HUGEINT * m)::VARCHAR AS mm, sum(s::HUGEINT * (m - inv))::VARCHAR AS smv, "
             f"sum((m - inv)::HUGEINT * (m - inv))::VARCHAR AS mmv "
             f"FROM ({inner}) {('GROUP BY ' + g) if by else ''}")
    out = ds.sql(outer)
    for c in ("ss", "sm", "mm", "smv", "mmv"):   # exact big integers (strings: HUGEINT has no numpy dtype)
        out[c] = [int(v) for v in out[c]]
    return canonical_dtypes(out, by, ds)


def group_counts(ds: Any, cols: Sequence[str], response: str = "correct") -> pd.DataFrame:
    """Per distinct ``cols`` (nulls kept as a group): ``n`` rows, ``k`` correct, ``inv`` null responses
    (:meth:`mrcstats.backends.DuckDBPass.group_counts`; the twin of :meth:`mrcstats.backends.DaskPass.group_counts`); key columns in the
    canonical dtypes."""
    cols = list(dict.fromkeys(cols))
    check_columns(ds, [*cols, response])
    g = ", ".join(q(c) for c in cols)
    r = q(response)
    out = ds.sql(f"SELECT {g + ', ' if cols else ''}count(*) AS n, count(*) FILTER (WHERE {r}) AS k, "
                 f"count(*) FILTER (WHERE {r} IS NULL) AS inv FROM log {'GROUP BY ALL' if cols else ''}")
    out = canonical_dtypes(out, cols, ds)
    return out.astype({"n": "int64", "k": "int64", "inv": "int64"})


def per_item_scores(ds: Any, cluster: str = "cluster") -> pd.DataFrame:
    """:func:`mrcstats.stats.compare.per_item_scores` of a dataset: one row per (model, item) with
    ``model, item, cluster, score, n_trials`` (score = mean correctness over trials, invalid = 0).

    Rows are sorted by model, then item (a dataset has no row order to keep). The same checks as the
    in-memory seam: one condition / masking rate, each item in one cluster. ``attrs``: ``skipped``
    and ``invalid`` (per model).
    """
    check_columns(ds, ["model", "item", cluster, "condition", "masking_rate"], "score items by")
    c = q(cluster)
    cond = ds.sql("SELECT DISTINCT condition, masking_rate FROM log ORDER BY ALL LIMIT 11")
    if len(cond) > 1:
        shown = ", ".join(repr(str(x)) for x in sorted(set(cond["condition"]))[:10])
        raise InputError(f"the log holds {len(cond)}{'+' if len(cond) > 10 else ''} conditions/masking rates "
                         f"(conditions: {shown}); compare models within one: filter it (Python: "
                         f"dataset.filter(condition='x'); CLI: --condition X)")
    two = ds.sql(f"SELECT item, min({c}) AS a, max({c}) AS b FROM log GROUP BY item "
                 f"HAVING count(DISTINCT {c}) > 1 LIMIT 1")
    if len(two):
        r = two.iloc[0]
        raise InputError(f"item {r['item']!r} lies in two clusters ({r['a']!r} and {r['b']!r}, {cluster!r} "
                         f"column); each item must belong to one cluster")
    out = ds.sql(f"SELECT model, item, min({c}) AS cluster, count(*) FILTER (WHERE correct) AS k, "
                 f"count(*) AS n FROM log GROUP BY model, item ORDER BY model, item")
    if out.empty:
        raise InputError("the log has no rows")
    inv = ds.sql("SELECT model, count(*) FILTER (WHERE correct IS NULL) AS i FROM log GROUP BY model "
                 "ORDER BY model")
    items = pd.DataFrame({
        "model": out["model"].astype("string"), "item": out["item"].astype("string"),
        "cluster": out["cluster"].astype(str).astype("string"),
        "score": out["k"].to_numpy(dtype=float) / out["n"].to_numpy(dtype=float),
        "n_trials": out["n"].astype("int64"),
    })
    items.attrs["skipped"] = ds.skipped
    items.attrs["invalid"] = {str(m): int(i) for m, i in zip(inv["model"], inv["i"])}
    return items


def cell_counts(ds: Any, columns: Sequence[str], *, response: str = "correct",
                drop_invalid: bool = True) -> tuple[pd.DataFrame, int]:
    """Binomial counts per distinct combination of ``columns``: ``k`` (correct) and ``n`` (rows).

    With ``drop_invalid`` rows whose ``response`` is null are left out (as a GLMM does) and
    their number is returned beside the table (``(table, n_dropped)``).
    """
    cols = list(dict.fromkeys(columns))
    check_columns(ds, [*cols, response], "count by")
    g = ", ".join(q(c) for c in cols)
    cond = f"WHERE {q(response)} IS NOT NULL" if drop_invalid else ""
    sql = (f"SELECT {g}, count(*) FILTER (WHERE {q(response)}) AS k, count(*) AS n FROM log {cond} "
           f"GROUP BY ALL ORDER BY ALL")
    out = ds.sql(sql)
    dropped = 0
    if drop_invalid:
        dropped = int(ds.sql(f"SELECT count(*) AS d FROM log WHERE {q(response)} IS NULL")["d"].iloc[0])
    out = canonical_dtypes(out, cols, ds)
    out["k"] = out["k"].astype("int64")
    out["n"] = out["n"].astype("int64")
    return out, dropped


def cluster_model_counts(ds: Any, cluster: str = "cluster", model: str = "model", correct: str = "correct",
                         item: str | None = "item") -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """P_d's sufficient statistics: per (cluster, model) ``k`` (correct; invalid = not correct) and ``n``
    rows, clusters and models as text (as :func:`mrcstats.stats.discrimination.discrimination` casts them);
    and, with ``item``, the distinct (cluster, item) pairs."""
    check_columns(ds, [cluster, model, correct] + ([item] if item else []), "compute P_d by")
    counts = ds.sql(f"SELECT {q(cluster)}::VARCHAR AS cluster, {q(model)}::VARCHAR AS model, "
                    f"count(*) FILTER (WHERE {q(correct)}) AS k, count(*) AS n FROM log GROUP BY ALL")
    items = None
    if item:
        items = ds.sql(f"SELECT DISTINCT {q(cluster)}::VARCHAR AS cluster, {q(item)}::VARCHAR AS item FROM log")
    return counts, items


def pair_counts(ds: Any, rows: str, cols: str) -> tuple[pd.DataFrame, int]:
    """Counts of the distinct (``rows``, ``cols``) values (both present) and the rows with either missing,
    for :func:`mrcstats.stats.tables.crosstab` (the labels are made text in Python, as in memory)."""
    check_columns(ds, [rows, cols], "cross-tabulate")
    tab = ds.sql(f"SELECT {q(rows)} AS a, {q(cols)} AS b, count(*) AS n FROM log "
                 f"WHERE {q(rows)} IS NOT NULL AND {q(cols)} IS NOT NULL GROUP BY ALL")
    miss = ds.sql(f"SELECT count(*) AS m FROM log WHERE {q(rows)} IS NULL OR {q(cols)} IS NULL")
    return canonical_dtypes(tab.rename(columns={"a": rows, "b": cols}), [rows, cols], ds) \
        if rows != cols else tab, int(miss["m"].iloc[0])
