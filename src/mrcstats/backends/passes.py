"""The row passes: one O(N) pass over a log's rows -> small integer tables (counts), in three backends.

A *backend* is where the rows are read: ``memory`` (a pandas frame, :class:`MemoryPass`),
``duckdb`` (SQL streamed over a Parquet log dataset in bounded memory, :class:`DuckDBPass`; the SQL
is :mod:`mrcstats.backends.sql`) or ``dask`` (``dask.dataframe`` partitions on a cluster, partial
counts reduced on the client, :class:`DaskPass`). Each implements the whole :class:`RowPass`
protocol; the counts are integers, so every backend gives the same tables exactly.

Layer: io (datasets) -> backends -> models (GLMM collapse, :mod:`mrcstats.models.outofcore`) and
stats (accuracy of a dataset, :mod:`mrcstats.stats.accuracy`). Nothing here knows a model: the
crossed count grid is built by the caller's ``make_grid`` (its level order is the model's).

Which kind of log came in is decided here, once: :func:`dataset_pass` gives the statistics the DuckDB
pass of a log dataset (None for an in-memory log), and a :class:`DuckDBPass` also answers the log-level
sufficient statistics of :mod:`mrcstats.backends.sql` (:class:`DatasetPass`), so no statistic tests the
log's kind or writes SQL.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pandas as pd

from mrcstats.backends.sql import (
    canonical_dtypes,
    check_columns,
    cluster_model_counts,
    group_counts,
    pair_counts,
    per_item_scores,
    q,
    summary_moments,
)
from mrcstats.errors import InputError

BACKENDS = ("memory", "duckdb", "dask")


@runtime_checkable
class RowPass(Protocol):
    """The method set of every backend.

    * ``columns()``: the column names;
    * ``cell_counts(cols, response)``: per distinct ``cols`` with a 0/1 response and no missing
      ``cols``: ``k`` successes and ``n`` rows, sorted; plus the rows dropped by reason
      (``{"response": .., "covariate": ..}``);
    * ``grid_counts(factors, response, make_grid)``: the two-factor count grid: ``make_grid(values)``
      (the distinct values of each factor) returns the grid the rows are added into
      (``add``/``add_codes``/``add_cells``); returns (grid, dropped);
    * ``group_counts(cols, response)``: per distinct ``cols`` (nulls kept as a group) ``n`` rows,
      ``k`` correct, ``inv`` null responses (the counts behind an accuracy summary).
    """

    name: str

    def columns(self) -> list[str]: ...

    def cell_counts(self, cols: Sequence[str], response: str) -> tuple[pd.DataFrame, dict[str, int]]: ...

    def grid_counts(self, factors: Sequence[str], response: str,
                    make_grid: Callable[[list[np.ndarray]], Any]) -> tuple[Any, dict[str, int]]: ...

    def group_counts(self, cols: Sequence[str], response: str = "correct") -> pd.DataFrame: ...

    def check_columns(self, cols: Sequence[str], what: str = "group by") -> None: ...

    def typed(self, frame: pd.DataFrame, cols: Sequence[str]) -> pd.DataFrame: ...


@runtime_checkable
class DatasetPass(RowPass, Protocol):
    """A row pass over a log dataset (:class:`DuckDBPass`): besides :class:`RowPass`, the log-level
    sufficient statistics of :mod:`mrcstats.backends.sql`, each a small frame the statistic finishes in
    Python (see that module), and the way back to memory (``to_frame``) for what only pandas computes.

    * ``path``: the dataset folder (for messages); ``graded()``: the log holds graded scores
      (:func:`mrcstats.io.dataset.dataset_graded`); ``to_frame()``: the whole log in memory;
    * ``summary_moments(by, cluster)``, ``per_item_scores(cluster)``, ``cluster_model_counts(...)``,
      ``pair_counts(rows, cols)``: :mod:`mrcstats.backends.sql`'s functions of the same names;
    * ``select(cols)``: those columns of every row (a frame; for a statistic that needs the rows).
    """

    path: Any

    def graded(self) -> bool: ...

    def to_frame(self) -> pd.DataFrame: ...

    def summary_moments(self, by: Sequence[str], cluster: str = "cluster") -> pd.DataFrame: ...

    def per_item_scores(self, cluster: str = "cluster") -> pd.DataFrame: ...

    def cluster_model_counts(self, cluster: str = "cluster", model: str = "model", correct: str = "correct",
                             item: str | None = "item") -> tuple[pd.DataFrame, pd.DataFrame | None]: ...

    def pair_counts(self, rows: str, cols: str) -> tuple[pd.DataFrame, int]: ...

    def select(self, cols: Sequence[str]) -> pd.DataFrame: ...


def dataset_pass(log: Any) -> DatasetPass | None:
    """The DuckDB row pass of ``log`` when it is a log dataset (a folder larger than memory,
    :class:`~mrcstats.io.dataset.LogDataset`), None for anything else (an in-memory log, which the caller
    computes on in pandas). The one place a statistic learns which kind of log it was given."""
    from mrcstats.io.dataset import LogDataset

    return DuckDBPass(log) if isinstance(log, LogDataset) else None


def _frame_columns_check(frame: Any, cols: Sequence[str], what: str) -> None:
    have = [str(c) for c in frame.columns]
    for c in cols:
        if c not in have:
            raise InputError(f"no column {c!r} in the log to {what}; columns: {', '.join(have)}")


class MemoryPass:
    """The collapse pass over an in-memory frame (pandas ``groupby``)."""

    name = "memory"

    def __init__(self, frame: pd.DataFrame):
        self.frame = frame

    def columns(self) -> list[str]:
        return [str(c) for c in self.frame.columns]

    def cell_counts(self, cols: Sequence[str], response: str) -> tuple[pd.DataFrame, dict[str, int]]:
        return _partial_counts(self.frame[[*cols, response]], list(cols), response, final=True)

    def grid_counts(self, factors: Sequence[str], response: str, make_grid: Callable[[list[np.ndarray]], Any]):
        y, ymiss = _response_values(self.frame[response], response)
        fmiss = np.zeros(len(self.frame), dtype=bool)
        for f in factors:
            fmiss |= self.frame[f].isna().to_numpy()
        keep = ~ymiss & ~fmiss
        grid = make_grid([pd.unique(self.frame.loc[keep, f].to_numpy()) for f in factors])
        grid.add([self.frame.loc[keep, f].to_numpy() for f in factors], y[keep])
        return grid, {"response": int(ymiss.sum()), "covariate": int((~ymiss & fmiss).sum())}

    def group_counts(self, cols: Sequence[str], response: str = "correct") -> pd.DataFrame:
        """Per distinct ``cols`` (nulls kept as a group): ``n`` rows, ``k`` correct, ``inv`` null responses."""
        cols = list(cols)
        out = _partial_groups(self.frame[[*cols, response]], cols, response)
        out = out.groupby(cols, sort=True, dropna=False, observed=True)[["n", "k", "inv"]].sum().reset_index()
        return out.astype({"n": "int64", "k": "int64", "inv": "int64"})

    def check_columns(self, cols: Sequence[str], what: str = "group by") -> None:
        """InputError naming the first of ``cols`` the log lacks."""
        _frame_columns_check(self.frame, cols, what)

    def typed(self, frame: pd.DataFrame, cols: Sequence[str]) -> pd.DataFrame:
        """``frame``'s key columns ``cols`` in the log's dtypes."""
        return frame.astype({c: self.frame[c].dtype for c in cols})


class DuckDBPass:
    """The collapse pass as DuckDB SQL over a Parquet log dataset (streamed, spills past its memory limit)."""

    name = "duckdb"

    def __init__(self, ds: Any):
        self.ds = ds

    def columns(self) -> list[str]:
        return self.ds.columns

    @property
    def path(self) -> Any:
        return self.ds.path

    def graded(self) -> bool:
        from mrcstats.io.dataset import dataset_graded

        return dataset_graded(self.ds)

    def to_frame(self) -> pd.DataFrame:
        return self.ds.to_log()

    def check_columns(self, cols: Sequence[str], what: str = "group by") -> None:
        check_columns(self.ds, cols, what)

    def typed(self, frame: pd.DataFrame, cols: Sequence[str]) -> pd.DataFrame:
        return canonical_dtypes(frame, cols, self.ds)

    def summary_moments(self, by: Sequence[str], cluster: str = "cluster") -> pd.DataFrame:
        return summary_moments(self.ds, by, cluster)

    def per_item_scores(self, cluster: str = "cluster") -> pd.DataFrame:
        return per_item_scores(self.ds, cluster)

    def cluster_model_counts(self, cluster: str = "cluster", model: str = "model", correct: str = "correct",
                             item: str | None = "item") -> tuple[pd.DataFrame, pd.DataFrame | None]:
        return cluster_model_counts(self.ds, cluster, model, correct, item)

    def pair_counts(self, rows: str, cols: str) -> tuple[pd.DataFrame, int]:
        return pair_counts(self.ds, rows, cols)

    def select(self, cols: Sequence[str]) -> pd.DataFrame:
        return self.ds.sql("SELECT " + ", ".join(q(c) for c in cols) + " FROM log")

    def cell_counts(self, cols: Sequence[str], response: str) -> tuple[pd.DataFrame, dict[str, int]]:

        cols = list(cols)
        r = self._check(cols, response)
        notnull = " AND ".join(f"{q(c)} IS NOT NULL" for c in cols) or "TRUE"
        g = ", ".join(q(c) for c in cols)
        cells = self.ds.sql(
            f"SELECT {g}, sum({r}::DOUBLE)::BIGINT AS k, count(*) AS n FROM log "
            f"WHERE {r} IS NOT NULL AND {notnull} GROUP BY ALL ORDER BY ALL")
        cells = canonical_dtypes(cells, cols, self.ds)
        return cells, self._dropped(r, notnull)

    def group_counts(self, cols: Sequence[str], response: str = "correct") -> pd.DataFrame:
        """Per distinct ``cols`` (nulls kept as a group): ``n``, ``k``, ``inv`` (:func:`mrcstats.backends.sql.group_counts`)."""

        return group_counts(self.ds, cols, response)

    def _dropped(self, r: str, notnull: str) -> dict[str, int]:
        """Rows left out: a missing response ``r``; a response but not ``notnull`` (a missing variable)."""
        miss = self.ds.sql(f"SELECT count(*) FILTER (WHERE {r} IS NULL) AS resp, "
                           f"count(*) FILTER (WHERE {r} IS NOT NULL AND NOT ({notnull})) AS cov FROM log")
        return {"response": int(miss["resp"].iloc[0]), "covariate": int(miss["cov"].iloc[0])}

    def _check(self, cols: Sequence[str], response: str) -> str:

        check_columns(self.ds, [*cols, response], "fit a model on")
        r = q(response)
        rng = self.ds.sql(f"SELECT min({r}::DOUBLE) AS lo, max({r}::DOUBLE) AS hi FROM log")
        lo, hi = rng["lo"].iloc[0], rng["hi"].iloc[0]
        if pd.notna(lo) and (lo < 0 or hi > 1):
            raise InputError(f"{self.ds.path}: response {response!r} must be 0/1 or true/false for a binomial "
                             f"GLMM (found values from {lo:g} to {hi:g})")
        return r

    def grid_counts(self, factors: Sequence[str], response: str, make_grid: Callable[[list[np.ndarray]], Any],
                    batch_rows: int = 1 << 22):
        """The count tables in one streamed pass: DuckDB maps each row's levels to codes (a join with the
        sorted levels) and Arrow batches of (code, code, y) are added into the tables."""
        from mrcstats._progress import progress
        r = self._check(factors, response)
        a, b = (q(f) for f in factors)
        notnull = f"{a} IS NOT NULL AND {b} IS NOT NULL"
        keep = f"{r} IS NOT NULL AND {notnull}"
        vals = []
        for f in factors:
            d = self.ds.sql(f"SELECT DISTINCT {q(f)} FROM log WHERE {keep}")
            vals.append(canonical_dtypes(d, [f], self.ds)[f].to_numpy())
        grid = make_grid(vals)
        tables = {f"_mrc_levels{i}": pd.DataFrame({"v": vals[i], "c": grid.code_of[i]}) for i in range(2)}
        bar = progress(total=len(self.ds), desc="count table", unit=" rows")
        try:
            for batch in self.ds.stream(
                    f"SELECT l0.c AS c0, l1.c AS c1, {r}::TINYINT AS y FROM log JOIN _mrc_levels0 l0 "
                    f"ON log.{a} = l0.v JOIN _mrc_levels1 l1 ON log.{b} = l1.v WHERE {keep}", batch_rows, tables):
                grid.add_codes(batch.column(0).to_numpy(), batch.column(1).to_numpy(),
                               batch.column(2).to_numpy())
                bar.update(batch.num_rows)
        finally:
            bar.close()
        return grid, self._dropped(r, notnull)


class DaskPass:
    """The collapse pass on ``dask.dataframe`` partitions: partial counts per partition on the workers,
    summed on the client. ``client``: a ``distributed.Client`` (or None for dask's default scheduler)."""

    name = "dask"

    def __init__(self, ddf: Any, client: Any = None, source: Any = None):
        self.ddf = ddf
        self.client = client
        self.source = source    # what ddf was made from (a LogDataset, a pandas frame), for checks and dtypes

    def columns(self) -> list[str]:
        return [str(c) for c in self.ddf.columns]

    def check_columns(self, cols: Sequence[str], what: str = "group by") -> None:
        """InputError naming the first of ``cols`` the source log lacks (a dask frame given as is: unchecked)."""
        if isinstance(self.source, pd.DataFrame):
            _frame_columns_check(self.source, cols, what)
        elif self.source is not None:
            check_columns(self.source, cols, what)

    def typed(self, frame: pd.DataFrame, cols: Sequence[str]) -> pd.DataFrame:
        """``frame``'s key columns in the source log's dtypes (a dask frame given as is: unchanged)."""
        if isinstance(self.source, pd.DataFrame):
            return frame.astype({c: self.source[c].dtype for c in cols})
        if self.source is not None:
            return canonical_dtypes(frame, cols, self.source)
        return frame

    def cell_counts(self, cols: Sequence[str], response: str) -> tuple[pd.DataFrame, dict[str, int]]:
        cols = list(cols)
        parts = self.ddf[[*cols, response]].map_partitions(
            _partial_frame, cols, response, meta=_meta(cols))
        got = parts.compute() if self.client is None else self.client.compute(parts).result()
        dropped = {"response": int(got.attrs.get("resp", 0)), "covariate": 0}
        miss = got[got["_kind"] != 0]
        dropped = {"response": int(miss.loc[miss["_kind"] == 1, "n"].sum()),
                   "covariate": int(miss.loc[miss["_kind"] == 2, "n"].sum())}
        cells = got[got["_kind"] == 0].drop(columns="_kind")
        cells = cells.groupby(cols, sort=True, dropna=False, observed=True)[["k", "n"]].sum().reset_index()
        cells["k"] = cells["k"].astype("int64")
        cells["n"] = cells["n"].astype("int64")
        return cells, dropped


    def grid_counts(self, factors: Sequence[str], response: str, make_grid: Callable[[list[np.ndarray]], Any]):
        """The count tables: distinct levels first, then per partition the (code, code) counts on the
        workers, added into the tables on the client (integers: exact, any partitioning)."""
        factors = list(factors)
        sub = self.ddf[[*factors, response]]
        distinct = sub.map_partitions(_partial_distinct, factors, response, meta=_meta(["f", "v"], ()))
        got = distinct.compute() if self.client is None else self.client.compute(distinct).result()
        vals = [pd.Series(pd.unique(got.loc[got["f"] == i, "v"].to_numpy())).infer_objects().to_numpy()
                for i in range(2)]
        grid = make_grid(vals)
        maps = list(zip(grid.index, grid.code_of))
        parts = sub.map_partitions(_partial_grid, factors, response, maps, grid.nlev_caller[1],
                                   meta=pd.DataFrame({c: pd.Series([], dtype="int64") for c in ("idx", "k", "n")}))
        got = parts.compute() if self.client is None else self.client.compute(parts).result()
        cnt = got[got["idx"] >= 0]
        grid.add_cells(cnt["idx"].to_numpy(np.int64), cnt["k"].to_numpy(np.int64), cnt["n"].to_numpy(np.int64))
        dropped = {"response": int(got.loc[got["idx"] == -1, "n"].sum()),
                   "covariate": int(got.loc[got["idx"] == -2, "n"].sum())}
        return grid, dropped

    def group_counts(self, cols: Sequence[str], response: str = "correct") -> pd.DataFrame:
        """Per distinct ``cols`` (nulls kept as a group): ``n`` rows, ``k`` correct, ``inv`` null responses;
        partial counts per partition on the workers, summed on the client (integers: exact)."""
        cols = list(cols)
        parts = self.ddf[[*cols, response]].map_partitions(_partial_groups, cols, response,
                                                           meta=_meta(cols, ("n", "k", "inv")))
        got = parts.compute() if self.client is None else self.client.compute(parts).result()
        out = got.groupby(cols, sort=True, dropna=False, observed=True)[["n", "k", "inv"]].sum().reset_index()
        return out.astype({"n": "int64", "k": "int64", "inv": "int64"})


def _partial_groups(frame: pd.DataFrame, cols: list[str], response: str) -> pd.DataFrame:
    y, miss = _response_values(frame[response], response)
    work = frame[cols].astype(object).copy()
    work["n"], work["k"], work["inv"] = 1, y.astype(np.int64), miss.astype(np.int64)
    return work.groupby(cols, sort=False, dropna=False)[["n", "k", "inv"]].sum().reset_index()


def _partial_distinct(frame: pd.DataFrame, factors: list[str], response: str) -> pd.DataFrame:
    keep = frame[response].notna() & frame[factors[0]].notna() & frame[factors[1]].notna()
    out = [pd.DataFrame({"f": i, "v": pd.unique(frame.loc[keep, f]).astype(object)}) for i, f in enumerate(factors)]
    return pd.concat(out, ignore_index=True).astype({"f": object, "v": object})


def _partial_grid(frame: pd.DataFrame, factors: list[str], response: str, maps, q2: int) -> pd.DataFrame:
    """Per partition: (flat cell index, successes, trials), plus rows idx -1 / -2 counting rows
    dropped for a missing response / grouping factor."""
    y, ymiss = _response_values(frame[response], response)
    fmiss = frame[factors[0]].isna().to_numpy() | frame[factors[1]].isna().to_numpy()
    keep = ~ymiss & ~fmiss
    c = [m[1][m[0].get_indexer(frame.loc[keep, f])] for m, f in zip(maps, factors)]
    idx = c[0].astype(np.int64) * q2 + c[1]
    df = pd.DataFrame({"idx": idx, "k": y[keep].astype(np.int64), "n": np.ones(len(idx), np.int64)})
    out = df.groupby("idx", sort=False)[["k", "n"]].sum().reset_index()
    extra = pd.DataFrame({"idx": [-1, -2], "k": [0, 0], "n": [int(ymiss.sum()), int((~ymiss & fmiss).sum())]})
    return pd.concat([out, extra], ignore_index=True).astype("int64")


def _meta(cols: list[str], values: tuple[str, ...] = ("k", "n", "_kind")) -> pd.DataFrame:
    d = {c: pd.Series([], dtype=object) for c in cols}
    d.update({v: pd.Series([], dtype="int64") for v in values})
    return pd.DataFrame(d)


def _response_values(s: pd.Series, response: str) -> tuple[np.ndarray, np.ndarray]:
    """(0/1 float values, missing mask) of a response column; InputError for non-binary values."""
    miss = s.isna().to_numpy()
    if s.dtype == object:
        s = s.where(~miss, None)
        vals = pd.to_numeric(s.map(lambda v: float(v) if isinstance(v, (bool, np.bool_, int, float)) else v),
                             errors="coerce")
    else:
        vals = pd.to_numeric(s, errors="coerce")
    v = vals.to_numpy(dtype=float, na_value=np.nan)
    bad = ~miss & ~np.isin(v, [0.0, 1.0])
    if bad.any():
        raise InputError(f"response {response!r} must be 0/1 or true/false for a binomial GLMM; found "
                         f"{s.iloc[int(np.flatnonzero(bad)[0])]!r}")
    return np.where(miss, 0.0, v), miss


def _partial_counts(frame: pd.DataFrame, cols: list[str], response: str,
                    final: bool = False) -> tuple[pd.DataFrame, dict[str, int]]:
    y, ymiss = _response_values(frame[response], response)
    cmiss = np.zeros(len(frame), dtype=bool)
    for c in cols:
        cmiss |= frame[c].isna().to_numpy()
    keep = ~ymiss & ~cmiss
    work = frame.loc[keep, cols].copy()
    work["k"] = y[keep]
    work["n"] = 1
    cells = work.groupby(cols, sort=True, dropna=False, observed=True)[["k", "n"]].sum().reset_index()
    cells["k"] = np.rint(cells["k"].to_numpy(dtype=float)).astype("int64")
    cells["n"] = cells["n"].astype("int64")
    return cells, {"response": int(ymiss.sum()), "covariate": int((~ymiss & cmiss).sum())}


def _partial_frame(frame: pd.DataFrame, cols: list[str], response: str) -> pd.DataFrame:
    """Per-partition cell counts plus two rows counting the dropped rows (``_kind`` 1, 2)."""
    cells, dropped = _partial_counts(frame, cols, response)
    cells = cells.astype({c: object for c in cols})
    cells["_kind"] = 0
    extra = pd.DataFrame({**{c: [None, None] for c in cols}, "k": [0, 0],
                          "n": [dropped["response"], dropped["covariate"]], "_kind": [1, 2]})
    return pd.concat([cells, extra.astype({c: object for c in cols})], ignore_index=True)


def pass_backend(data: Any, backend: str | None = None, scheduler: str | Any | None = None) -> RowPass:
    """The row pass for ``data`` and ``backend`` (None: DuckDB for a dataset, memory for a frame, Dask
    with a ``scheduler``)."""
    engine = backend
    from mrcstats.io.dataset import LogDataset, is_dataset, open_dataset

    if isinstance(data, (str, bytes)) or hasattr(data, "__fspath__"):
        if not is_dataset(data):
            raise InputError(f"{data}: not a log dataset folder; read other files with mrcstats.read_log first")
        data = open_dataset(data)
    if engine is None:
        engine = "dask" if scheduler is not None else ("duckdb" if isinstance(data, LogDataset) else "memory")
    if engine not in BACKENDS:
        raise InputError(f"backend {engine!r}: use one of {', '.join(BACKENDS)}")
    if engine == "memory":
        if isinstance(data, LogDataset):
            data = data.to_log()
        if not isinstance(data, pd.DataFrame):
            raise InputError(f"backend='memory' needs a pandas DataFrame, got {type(data).__name__}")
        return MemoryPass(data)
    if engine == "duckdb":
        if isinstance(data, pd.DataFrame):
            raise InputError("backend='duckdb' works on a log dataset folder (mrcstats ingest --dataset DIR)")
        return DuckDBPass(data)
    client = dask_client(scheduler)
    if isinstance(data, LogDataset):
        return DaskPass(data.to_dask(), client, data)
    if isinstance(data, pd.DataFrame):
        import dask.dataframe as dd

        return DaskPass(dd.from_pandas(data, npartitions=max(1, min(64, len(data) // 250_000 + 1))), client, data)
    return DaskPass(data, client)


def keep_value(log: Any, column: str, value: str, reason: str | None = None) -> tuple[Any, dict[str, int]]:
    """The rows of ``log`` whose ``column`` equals ``value`` (compared as text), and the rows of every value of
    ``column`` (``{value: rows}``, from the log's row pass: :meth:`RowPass.group_counts`), so the caller can say
    what was left out and which values there are. A frame is filtered in memory (its ``attrs`` kept, the rows
    left out counted in ``attrs["skipped"][reason]`` when ``reason`` is given); a log dataset lazily
    (:meth:`mrcstats.io.dataset.LogDataset.filter`). A ``value`` no row has returns the log unchanged: the
    caller checks ``counts`` and says which values there are."""
    rows = pass_backend(log)
    rows.check_columns([column], "filter on")
    g = rows.group_counts([column], "correct" if "correct" in rows.columns() else column)
    counts = {("<NA>" if pd.isna(v) else str(v)): int(n) for v, n in zip(g[column], g["n"])}
    if not counts.get(value):
        return log, counts
    if isinstance(rows, DuckDBPass):
        return log.filter(**{column: value}), counts
    keep = (log[column].astype(str) == value).to_numpy()
    attrs = dict(log.attrs)
    left = int((~keep).sum())
    if left and reason:
        from mrcstats.io.schema import merge_skipped

        attrs["skipped"] = merge_skipped(attrs.get("skipped") or {}, {reason: left})
    out = log[keep].reset_index(drop=True)
    out.attrs = attrs
    return out, counts


def dask_client(scheduler: str | Any | None):
    """A ``distributed.Client`` for ``scheduler`` (an address such as ``tcp://host:8786``, or a Client);
    None: the client already active in this process, else dask's local scheduler. mrcstats never starts
    or stops a cluster."""
    if scheduler is None:
        try:
            from distributed import get_client

            return get_client()
        except (ImportError, ValueError):
            return None
    try:
        from distributed import Client
    except ImportError:  # pragma: no cover - dask is an extra
        raise InputError("backend='dask' needs dask.distributed: pip install 'mrcstats[dask]'") from None
    if isinstance(scheduler, Client):
        return scheduler
    try:
        return Client(scheduler, timeout="20s", set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise InputError(f"cannot connect to the Dask scheduler at {scheduler!r} ({exc}); start the cluster "
                         f"first (dask-jobqueue, dask-kubernetes, or `dask scheduler`) and pass its address") \
            from None


