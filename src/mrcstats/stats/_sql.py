"""DuckDB SQL over a log dataset: the sufficient statistics of the log-level analyses.

The one home of the SQL. Each function takes a :class:`~mrcstats.io.dataset.LogDataset`
(the Parquet files are the view ``log``), aggregates in DuckDB (streamed, spilling
to disk past its memory limit) and returns a *small* frame of sufficient statistics;
the existing Python code of each analysis finishes the computation, so there is no
second copy of any statistic:

* :func:`summary_moments` -> :func:`mrcstats.stats.accuracy.finish_summary`
  (per group n, k, invalid, clusters and the integer cluster moments Σs², Σsm, Σm²);
* :func:`per_item_scores` -> the per-item score table (model, item, cluster, mean, n) of
  ``compare``;
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
    """Per group of ``by``: n, correct, invalid, clusters, ss = Σ_c s_c², sm = Σ_c s_c m_c, mm = Σ_c m_c².

    Two GROUP BYs: (by, cluster) -> m_c rows, s_c correct, invalid; then by -> the sums. Integer
    arithmetic throughout (HUGEINT sums), so the result equals the in-memory path exactly.
    """
    by = list(by)
    check_columns(ds, [*by, cluster])
    g = ", ".join(q(b) for b in by)
    inner = (f"SELECT {g + ', ' if by else ''}{q(cluster)} AS _cl, count(*) AS m, "
             f"count(*) FILTER (WHERE correct) AS s, count(*) FILTER (WHERE correct IS NULL) AS inv "
             f"FROM log GROUP BY ALL")
    outer = (f"SELECT {g + ', ' if by else ''}sum(m)::BIGINT AS n, sum(s)::BIGINT AS correct, "
             f"sum(inv)::BIGINT AS invalid, count(*) AS clusters, "
             f"sum(s::HUGEINT * s)::VARCHAR AS ss, sum(s::HUGEINT * m)::VARCHAR AS sm, "
             f"sum(m::HUGEINT * m)::VARCHAR AS mm FROM ({inner}) {('GROUP BY ' + g) if by else ''}")
    out = ds.sql(outer)
    for c in ("ss", "sm", "mm"):   # exact big integers (strings: HUGEINT has no numpy dtype)
        out[c] = [int(v) for v in out[c]]
    return canonical_dtypes(out, by, ds)


def per_item_scores(ds: Any, *, model: str = "model", item: str = "item", cluster: str = "cluster",
                    where: str | None = None, params: Sequence[Any] | None = None) -> pd.DataFrame:
    """Per (model, item): its cluster, the mean score over trials (invalid = 0) and the number of trials.

    Columns ``model, item, cluster, mean, n`` sorted by model and item (the per-item-scores seam of
    ``compare``). ``mean = sum(correct) / n`` with invalid answers counted as not correct.
    """
    check_columns(ds, [model, item, cluster], "score items by")
    sql = (f"SELECT {q(model)} AS model, {q(item)} AS item, min({q(cluster)}) AS cluster, "
           f"count(*) FILTER (WHERE correct) AS k, count(*) AS n FROM log "
           f"{('WHERE ' + where) if where else ''} GROUP BY 1, 2 ORDER BY 1, 2")
    out = ds.sql(sql, params)
    out["mean"] = out["k"].to_numpy(dtype=float) / out["n"].to_numpy(dtype=float)
    out = out[["model", "item", "cluster", "mean", "n"]]
    for c in ("model", "item", "cluster"):
        out[c] = out[c].astype("string")
    out["n"] = out["n"].astype("int64")
    return out


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
