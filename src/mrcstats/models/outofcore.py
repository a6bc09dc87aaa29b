"""Binomial GLMMs on logs larger than memory: collapse to binomial counts in one streamed pass.

A binomial GLMM with random intercepts depends on the data only through the number of
successes ``k`` and trials ``n`` of each distinct *covariate pattern*: the combination of
the values of every column the formula uses (fixed-effect variables and grouping factors).
Rows that share a pattern have the same linear predictor, so

    Σ_rows [y log μ + (1-y) log(1-μ)] = Σ_cells [k log μ + (n-k) log(1-μ)],

and the Laplace (or AGQ) deviance, its optimum, the conditional modes and the Hessian are the
same for ``correct ~ rhs`` on the rows and ``cbind(k, n - k) ~ rhs`` on the cells (lme4's own
equivalence of Bernoulli and binomial responses). The fit here therefore

1. runs **one O(N) pass** over the data with a pluggable *pass backend* — in-memory pandas
   (``engine="memory"``), DuckDB SQL streamed over a Parquet log dataset in bounded memory
   (``engine="duckdb"``, the default for datasets), or ``dask.dataframe`` partitions on a
   cluster, reduced on the client (``engine="dask"``) — producing the cell table; the counts
   are integers, so every backend gives the same table exactly;
2. fits ``cbind(successes, failures) ~ rhs`` with the native engine
   (:func:`mrcstats.models.fit.glmer`) in memory on at most two weighted rows per cell, its
   successes ``cbind(k, 0)`` and its failures ``cbind(0, n - k)``: the binomial coefficients are
   then all 1, so the log-likelihood, AIC and BIC are those of the row-level fit; the cells are
   usually 10-100x fewer than the rows (trials, repeated conditions, item-level covariates);
3. reports the fit in row terms (``nobs`` = rows used) with a message saying the fit is exact
   and how many cells it used (``optinfo["collapse"]``). Residuals (quantiles) are per weighted row.

Rows with a missing response (invalid answers) or a missing formula variable are left out, as
``glmer`` does, and counted in the result's messages.

When every row is its own pattern (one trial per model x item in a crossed
``(1 | item) + (1 | model)`` model) the cells are as many as the rows: the fit then needs the
cell table in memory (four numbers per cell, not the log's text columns), and its crossed
random-effects solve is the native engine's dense Schur complement, which bounds the number
of levels of the smaller factor (see :class:`mrcstats.models.deviance.MultiFactor`).
"""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from mrcstats.errors import InputError, ModelError

ENGINES = ("memory", "duckdb", "dask")
GRID_MAX_CELLS = 400_000_000    # q1 x q2 cells of the crossed grid (two int32 tables: 3.2 GB)


# ----------------------------------------------------------------------------- pass backends


class MemoryPass:
    """The collapse pass over an in-memory frame (pandas ``groupby``)."""

    name = "memory"

    def __init__(self, frame: pd.DataFrame):
        self.frame = frame

    def columns(self) -> list[str]:
        return [str(c) for c in self.frame.columns]

    def cell_counts(self, cols: Sequence[str], response: str) -> tuple[pd.DataFrame, dict[str, int]]:
        return _partial_counts(self.frame[[*cols, response]], list(cols), response, final=True)

    def grid_counts(self, factors: Sequence[str], response: str, levels: Mapping[str, Any] | None = None):
        y, ymiss = _response_values(self.frame[response], response)
        fmiss = np.zeros(len(self.frame), dtype=bool)
        for f in factors:
            fmiss |= self.frame[f].isna().to_numpy()
        keep = ~ymiss & ~fmiss
        grid = _Grid(factors, [pd.unique(self.frame.loc[keep, f].to_numpy()) for f in factors], levels)
        grid.add([self.frame.loc[keep, f].to_numpy() for f in factors], y[keep])
        return grid, {"response": int(ymiss.sum()), "covariate": int((~ymiss & fmiss).sum())}


class DuckDBPass:
    """The collapse pass as DuckDB SQL over a Parquet log dataset (streamed, spills past its memory limit)."""

    name = "duckdb"

    def __init__(self, ds: Any):
        self.ds = ds

    def columns(self) -> list[str]:
        return self.ds.columns

    def cell_counts(self, cols: Sequence[str], response: str) -> tuple[pd.DataFrame, dict[str, int]]:
        from mrcstats.stats._sql import canonical_dtypes, q

        cols = list(cols)
        r = self._check(cols, response)
        notnull = " AND ".join(f"{q(c)} IS NOT NULL" for c in cols) or "TRUE"
        g = ", ".join(q(c) for c in cols)
        cells = self.ds.sql(
            f"SELECT {g}, sum({r}::DOUBLE)::BIGINT AS k, count(*) AS n FROM log "
            f"WHERE {r} IS NOT NULL AND {notnull} GROUP BY ALL ORDER BY ALL")
        cells = canonical_dtypes(cells, cols, self.ds)
        return cells, self._dropped(r, notnull)

    def _dropped(self, r: str, notnull: str) -> dict[str, int]:
        """Rows left out: a missing response ``r``; a response but not ``notnull`` (a missing variable)."""
        miss = self.ds.sql(f"SELECT count(*) FILTER (WHERE {r} IS NULL) AS resp, "
                           f"count(*) FILTER (WHERE {r} IS NOT NULL AND NOT ({notnull})) AS cov FROM log")
        return {"response": int(miss["resp"].iloc[0]), "covariate": int(miss["cov"].iloc[0])}

    def _check(self, cols: Sequence[str], response: str) -> str:
        from mrcstats.stats._sql import check_columns, q

        check_columns(self.ds, [*cols, response], "fit a model on")
        r = q(response)
        rng = self.ds.sql(f"SELECT min({r}::DOUBLE) AS lo, max({r}::DOUBLE) AS hi FROM log")
        lo, hi = rng["lo"].iloc[0], rng["hi"].iloc[0]
        if pd.notna(lo) and (lo < 0 or hi > 1):
            raise InputError(f"{self.ds.path}: response {response!r} must be 0/1 or true/false for a binomial "
                             f"GLMM (found values from {lo:g} to {hi:g})")
        return r

    def grid_counts(self, factors: Sequence[str], response: str, levels: Mapping[str, Any] | None = None,
                    batch_rows: int = 1 << 22):
        """The count tables in one streamed pass: DuckDB maps each row's levels to codes (a join with the
        sorted levels) and Arrow batches of (code, code, y) are added into the tables."""
        from mrcstats._progress import progress
        from mrcstats.stats._sql import canonical_dtypes, q

        r = self._check(factors, response)
        a, b = (q(f) for f in factors)
        notnull = f"{a} IS NOT NULL AND {b} IS NOT NULL"
        keep = f"{r} IS NOT NULL AND {notnull}"
        vals = []
        for f in factors:
            d = self.ds.sql(f"SELECT DISTINCT {q(f)} FROM log WHERE {keep}")
            vals.append(canonical_dtypes(d, [f], self.ds)[f].to_numpy())
        grid = _Grid(factors, vals, levels)
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

    def __init__(self, ddf: Any, client: Any = None):
        self.ddf = ddf
        self.client = client

    def columns(self) -> list[str]:
        return [str(c) for c in self.ddf.columns]

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


    def grid_counts(self, factors: Sequence[str], response: str, levels: Mapping[str, Any] | None = None):
        """The count tables: distinct levels first, then per partition the (code, code) counts on the
        workers, added into the tables on the client (integers: exact, any partitioning)."""
        factors = list(factors)
        sub = self.ddf[[*factors, response]]
        distinct = sub.map_partitions(_partial_distinct, factors, response, meta=_meta(["f", "v"], ()))
        got = distinct.compute() if self.client is None else self.client.compute(distinct).result()
        vals = [pd.Series(pd.unique(got.loc[got["f"] == i, "v"].to_numpy())).infer_objects().to_numpy()
                for i in range(2)]
        grid = _Grid(factors, vals, levels)
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


class _Grid:
    """Successes K and trials N per (level of factor 1, level of factor 2), levels as the design orders
    them (:func:`mrcstats.models.design.factor_levels`: text by code point, numbers numerically), rows =
    the factor with more levels (lme4's term order; ties keep the formula order)."""

    def __init__(self, factors: Sequence[str], values: Sequence[np.ndarray], levels: Mapping[str, Any] | None):
        from mrcstats.models.design import factor_levels

        lv, code_of = [], []
        for f, v in zip(factors, values):
            codes, labels = factor_levels(pd.Series(v), (levels or {}).get(f), f)
            lv.append(labels)
            code_of.append(np.asarray(codes, np.int64))
        self.swap = len(lv[1]) > len(lv[0])
        order = [1, 0] if self.swap else [0, 1]
        self.factors = [factors[i] for i in order]
        self.levels = [lv[i] for i in order]
        self.code_of = code_of                      # in the caller's factor order
        self.index = [pd.Index(v) for v in values]
        self.nlev_caller = [len(x) for x in lv]
        self.shape = (len(self.levels[0]), len(self.levels[1]))
        cells = self.shape[0] * self.shape[1]
        if cells > GRID_MAX_CELLS:
            raise ModelError(f"{self.shape[0]:,} x {self.shape[1]:,} cells exceed the crossed grid's "
                             f"{GRID_MAX_CELLS:,}; use engine='lme4' or fewer levels")
        self.K = np.zeros(cells, np.int32)
        self.N = np.zeros(cells, np.int32)

    def _flat(self, c0: np.ndarray, c1: np.ndarray) -> np.ndarray:
        r, c = (c1, c0) if self.swap else (c0, c1)
        return r.astype(np.int64) * self.shape[1] + c

    def add(self, cols: Sequence[np.ndarray], y: np.ndarray) -> None:
        """Add rows given by their factor values (any of the values the grid was built from)."""
        c = [m[ix.get_indexer(x)] for m, ix, x in zip(self.code_of, self.index, cols)]
        self.add_codes(c[0], c[1], y)

    def add_codes(self, c0: np.ndarray, c1: np.ndarray, y: np.ndarray) -> None:
        idx = self._flat(np.asarray(c0, np.int64), np.asarray(c1, np.int64))
        np.add.at(self.N, idx, np.ones(len(idx), np.int32))
        np.add.at(self.K, idx, np.asarray(y, np.int32))

    def add_cells(self, idx: np.ndarray, k: np.ndarray, n: np.ndarray) -> None:
        """Cells indexed in the caller's factor order (code0 * q_caller1 + code1)."""
        if self.swap:
            c0, c1 = idx // self.shape[0], idx % self.shape[0]
            idx = self._flat(c0, c1)
        np.add.at(self.N, idx, n.astype(np.int32))
        np.add.at(self.K, idx, k.astype(np.int32))

    def tables(self) -> tuple[np.ndarray, np.ndarray]:
        return self.K.reshape(self.shape), self.N.reshape(self.shape)


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


def pass_backend(data: Any, engine: str | None = None, scheduler: str | Any | None = None):
    """The pass backend for ``data`` and ``engine`` (None: DuckDB for a dataset, memory for a frame)."""
    from mrcstats.io.dataset import LogDataset, is_dataset, open_dataset

    if isinstance(data, (str, bytes)) or hasattr(data, "__fspath__"):
        if not is_dataset(data):
            raise InputError(f"{data}: not a log dataset folder; read other files with mrcstats.read_log first")
        data = open_dataset(data)
    if engine is None:
        engine = "dask" if scheduler is not None else ("duckdb" if isinstance(data, LogDataset) else "memory")
    if engine not in ENGINES:
        raise InputError(f"engine {engine!r}: use one of {', '.join(ENGINES)}")
    if engine == "memory":
        if isinstance(data, LogDataset):
            data = data.to_log()
        if not isinstance(data, pd.DataFrame):
            raise InputError(f"engine='memory' needs a pandas DataFrame, got {type(data).__name__}")
        return MemoryPass(data)
    if engine == "duckdb":
        if isinstance(data, pd.DataFrame):
            raise InputError("engine='duckdb' works on a log dataset folder (mrcstats ingest --dataset DIR)")
        return DuckDBPass(data)
    client = dask_client(scheduler)
    if isinstance(data, LogDataset):
        ddf = data.to_dask()
    elif isinstance(data, pd.DataFrame):
        import dask.dataframe as dd

        ddf = dd.from_pandas(data, npartitions=max(1, min(64, len(data) // 250_000 + 1)))
    else:
        ddf = data
    return DaskPass(ddf, client)


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
        raise InputError("engine='dask' needs dask.distributed: pip install 'mrcstats[dask]'") from None
    if isinstance(scheduler, Client):
        return scheduler
    try:
        return Client(scheduler, timeout="20s", set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise InputError(f"cannot connect to the Dask scheduler at {scheduler!r} ({exc}); start the cluster "
                         f"first (dask-jobqueue, dask-kubernetes, or `dask scheduler`) and pass its address") \
            from None


# ----------------------------------------------------------------------------- the fit


def glmer_outofcore(formula: str, data: Any, *, engine: str | None = None, scheduler: str | Any | None = None,
                    contrasts: Mapping[str, str] | None = None, levels: Mapping[str, Any] | None = None,
                    nagq: int = 1, method: str = "auto") -> Any:
    """Fit ``formula`` (binomial, random intercepts) on data of any size by collapsing to binomial counts.

    Args:
        formula: lme4 formula with a 0/1 or boolean response column, e.g.
            ``"correct ~ 1 + (1 | item) + (1 | model)"``.
        data: a log dataset (path or :class:`~mrcstats.io.dataset.LogDataset`), a pandas frame, or a
            ``dask.dataframe``.
        engine: the pass backend: ``"duckdb"`` (datasets; default), ``"memory"`` or ``"dask"``.
        scheduler: ``engine="dask"``: a scheduler address (``tcp://host:8786``) or a ``Client``.
        contrasts, levels, nagq: as :func:`mrcstats.glmer`.
        method: ``"auto"``: the crossed grid (:mod:`mrcstats.models.grid`) for ``y ~ X + (1 | a) + (1 | b)``
            when every fixed-effect column is constant within a level of ``a`` or of ``b`` (item- and
            model-level covariates), the cell table otherwise; ``"grid"``: the crossed grid or one
            InputError saying which covariate it cannot take; ``"cells"``: always the cell table.

    Returns:
        A :class:`~mrcstats.models.results.GlmerResult` equal to ``glmer(formula, rows)`` (same estimates,
        SEs, θ, conditional modes, logLik; ``nobs`` = rows used); ``optinfo["collapse"]`` has the row and
        cell counts and the backend, and ``messages`` says the fit was collapsed.

    Reference: the Bernoulli/binomial equivalence of the GLM likelihood (McCullagh & Nelder 1989,
    sec. 4.2; lme4 ``glmer`` with ``cbind(k, n - k)``).
    """
    from mrcstats.models.fit import glmer
    from mrcstats.models.formula import parse_formula

    t0 = time.perf_counter()
    if method not in ("auto", "cells", "grid"):
        raise InputError(f"method {method!r}: use 'auto', 'grid' or 'cells'")
    spec = parse_formula(formula)
    if spec.response.is_cbind:
        raise InputError(f"formula {formula!r}: out-of-core fits take a 0/1 response column (the rows are "
                         f"collapsed to cbind counts here)")
    if not spec.random:
        raise InputError(f"formula {formula!r} has no random term; use a GLM")
    if spec.random_slopes:
        raise InputError(f"formula {formula!r}: random slopes are not supported out of core")
    response = spec.response.column
    cols = [c for c in spec.columns if c != response]
    backend = pass_backend(data, engine, scheduler)
    have = set(backend.columns())
    missing = [c for c in [response, *cols] if c not in have]
    if missing:
        raise InputError(f"formula {formula!r}: column(s) {', '.join(map(repr, missing))} not in the data; "
                         f"columns: {', '.join(sorted(have))}")
    grid_factors = _grid_factors(spec, nagq)
    if method == "grid" and grid_factors is None:
        raise InputError(f"formula {formula!r}: the crossed grid fits y ~ X + (1 | a) + (1 | b) with an intercept "
                         f"(Laplace, nagq=1); use method='cells'")
    if grid_factors is not None and method != "cells":
        from mrcstats.models.grid import NotSeparable

        try:
            return _fit_on_grid(spec, backend, grid_factors, response, levels, t0, contrasts)
        except NotSeparable as exc:
            if method == "grid":
                raise InputError(f"formula {formula!r}: {exc}") from None
    t_pass = time.perf_counter()
    cells, dropped = backend.cell_counts(cols, response)
    t_pass = time.perf_counter() - t_pass
    if cells.empty:
        raise InputError("no rows left to fit: every response or formula variable is missing")
    rows = int(cells["n"].sum())
    sname, fname = _free_names(cols)
    # each cell as (at most) two weighted Bernoulli rows, its successes cbind(k, 0) and failures cbind(0, n-k):
    # the log-likelihood then has no binomial coefficients (log C(k, k) = 0), exactly the row-level one, and
    # a group never collapses to a single row (lme4's check: levels < observations)
    k = cells["k"].to_numpy(np.int64)
    n = cells["n"].to_numpy(np.int64)
    succ = cells.loc[k > 0, cols].assign(**{sname: k[k > 0], fname: 0})
    fail = cells.loc[n - k > 0, cols].assign(**{sname: 0, fname: (n - k)[n - k > 0]})
    wrows = pd.concat([succ, fail], ignore_index=True)
    rhs = formula.split("~", 1)[1].strip()
    res = glmer(f"cbind({sname}, {fname}) ~ {rhs}", wrows, contrasts=contrasts, levels=levels, nagq=nagq)
    loglik = res.loglik
    npar = len(res.fixef) + len(res.theta)
    msgs = [(f"fitted exactly on binomial counts: {len(cells):,} cells (one per distinct {', '.join(cols)}) "
             f"collapsed from {rows:,} rows by the {backend.name} pass, given to the engine as {len(wrows):,} "
             f"weighted rows cbind(successes, failures) (same likelihood, estimates and SEs as the row-level "
             f"fit; residuals are per weighted row)")]
    msgs += _dropped_messages(dropped, "formula variable")
    opt = dict(res.optinfo)
    opt["collapse"] = {"rows": rows, "cells": len(cells), "weighted_rows": len(wrows),
                       "backend": backend.name, "dropped": dropped, "pass_seconds": t_pass}
    return dataclasses.replace(
        res, formula=spec.formula, loglik=loglik, minus2loglik=-2 * loglik, aic=-2 * loglik + 2 * npar,
        bic=-2 * loglik + np.log(rows) * npar, nobs=rows, df_resid=rows - npar,
        messages=tuple(msgs) + tuple(res.messages), optinfo=opt, fit_seconds=time.perf_counter() - t0,
        engine=f"native ({backend.name} collapse)")


def _dropped_messages(dropped: Mapping[str, int], what: str) -> list[str]:
    """The result's lines counting the rows a pass left out (``dropped``: response, covariate)."""
    out = []
    if dropped["response"]:
        out.append(f"{dropped['response']:,} row(s) with a missing response (invalid answers) left out")
    if dropped["covariate"]:
        out.append(f"{dropped['covariate']:,} row(s) with a missing {what} left out")
    return out


def _grid_factors(spec: Any, nagq: int) -> tuple[str, str] | None:
    """The two grouping columns when the formula is ``y ~ X + (1 | a) + (1 | b)`` with an intercept
    (Laplace), else None (whether X is separable is decided on the data: :func:`~mrcstats.models.grid.grid_covariates`)."""
    if nagq != 1 or not spec.intercept or len(spec.random) != 2:
        return None
    if not all(r.is_scalar and len(r.factors) == 1 for r in spec.random):
        return None
    a, b = spec.random[0].factors[0], spec.random[1].factors[0]
    return None if a == b else (a, b)


def _fit_on_grid(spec: Any, backend: Any, factors: tuple[str, str], response: str,
                 levels: Mapping[str, Any] | None, t0: float, contrasts: Mapping[str, str] | None = None) -> Any:
    from mrcstats.models.grid import MAX_SECOND, fit_grid, grid_covariates

    t_pass = time.perf_counter()
    grid, dropped = backend.grid_counts(factors, response, levels)
    t_pass = time.perf_counter() - t_pass
    K, N = grid.tables()
    rows = int(N.sum(dtype=np.int64))
    if rows == 0:
        raise InputError("no rows left to fit: every response or grouping factor is missing")
    if grid.shape[1] > MAX_SECOND:
        raise ModelError(f"crossed terms with {grid.shape[0]:,} and {grid.shape[1]:,} levels: the native engine "
                         f"handles a smaller factor of at most {MAX_SECOND:,} levels; use engine='lme4'")
    cov = grid_covariates(spec, backend, grid, response, contrasts, levels) if spec.terms else None
    filled = int(np.count_nonzero(N))
    msgs = [(f"fitted exactly on a {grid.shape[0]:,} x {grid.shape[1]:,} grid of binomial counts "
             f"({' x '.join(grid.factors)}; {filled:,} non-empty cells) collapsed from {rows:,} rows by the "
             f"{backend.name} pass (same likelihood, estimates and SEs as the row-level fit)")]
    msgs += _dropped_messages(dropped, "grouping factor")
    opt = {"collapse": {"rows": rows, "cells": filled, "grid": list(K.shape), "backend": backend.name,
                        "dropped": dropped, "pass_seconds": t_pass}}
    res = fit_grid(K, N, levels=grid.levels, names=grid.factors, spec=spec, t0=t0, messages=msgs, optinfo=opt,
                   covariates=cov)
    return dataclasses.replace(res, engine=f"native ({backend.name} grid)")


def _free_names(cols: Sequence[str]) -> tuple[str, str]:
    k, n = "successes_", "failures_"
    while k in cols or n in cols:
        k, n = k + "_", n + "_"
    return k, n


__all__ = ["DaskPass", "DuckDBPass", "MemoryPass", "ModelError", "dask_client", "glmer_outofcore", "pass_backend"]
