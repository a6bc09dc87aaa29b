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


class DuckDBPass:
    """The collapse pass as DuckDB SQL over a Parquet log dataset (streamed, spills past its memory limit)."""

    name = "duckdb"

    def __init__(self, ds: Any):
        self.ds = ds

    def columns(self) -> list[str]:
        return self.ds.columns

    def cell_counts(self, cols: Sequence[str], response: str) -> tuple[pd.DataFrame, dict[str, int]]:
        from mrcstats.stats._sql import canonical_dtypes, check_columns, q

        cols = list(cols)
        check_columns(self.ds, [*cols, response], "fit a model on")
        r = q(response)
        rng = self.ds.sql(f"SELECT min({r}::DOUBLE) AS lo, max({r}::DOUBLE) AS hi FROM log")
        lo, hi = rng["lo"].iloc[0], rng["hi"].iloc[0]
        if pd.notna(lo) and (lo < 0 or hi > 1):
            raise InputError(f"{self.ds.path}: response {response!r} must be 0/1 or true/false for a binomial "
                             f"GLMM (found values from {lo:g} to {hi:g})")
        notnull = " AND ".join(f"{q(c)} IS NOT NULL" for c in cols) or "TRUE"
        g = ", ".join(q(c) for c in cols)
        cells = self.ds.sql(
            f"SELECT {g}, sum({r}::DOUBLE)::BIGINT AS k, count(*) AS n FROM log "
            f"WHERE {r} IS NOT NULL AND {notnull} GROUP BY ALL ORDER BY ALL")
        miss = self.ds.sql(f"SELECT count(*) FILTER (WHERE {r} IS NULL) AS resp, "
                           f"count(*) FILTER (WHERE {r} IS NOT NULL AND NOT ({notnull})) AS cov FROM log")
        cells = canonical_dtypes(cells, cols, self.ds)
        return cells, {"response": int(miss["resp"].iloc[0]), "covariate": int(miss["cov"].iloc[0])}


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
                    nagq: int = 1) -> Any:
    """Fit ``formula`` (binomial, random intercepts) on data of any size by collapsing to binomial counts.

    Args:
        formula: lme4 formula with a 0/1 or boolean response column, e.g.
            ``"correct ~ 1 + (1 | item) + (1 | model)"``.
        data: a log dataset (path or :class:`~mrcstats.io.dataset.LogDataset`), a pandas frame, or a
            ``dask.dataframe``.
        engine: the pass backend: ``"duckdb"`` (datasets; default), ``"memory"`` or ``"dask"``.
        scheduler: ``engine="dask"``: a scheduler address (``tcp://host:8786``) or a ``Client``.
        contrasts, levels, nagq: as :func:`mrcstats.glmer`.

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
    if dropped["response"]:
        msgs.append(f"{dropped['response']:,} row(s) with a missing response (invalid answers) left out")
    if dropped["covariate"]:
        msgs.append(f"{dropped['covariate']:,} row(s) with a missing formula variable left out")
    opt = dict(res.optinfo)
    opt["collapse"] = {"rows": rows, "cells": len(cells), "weighted_rows": len(wrows),
                       "backend": backend.name, "dropped": dropped, "pass_seconds": t_pass}
    return dataclasses.replace(
        res, formula=spec.formula, loglik=loglik, minus2loglik=-2 * loglik, aic=-2 * loglik + 2 * npar,
        bic=-2 * loglik + np.log(rows) * npar, nobs=rows, df_resid=rows - npar,
        messages=tuple(msgs) + tuple(res.messages), optinfo=opt, fit_seconds=time.perf_counter() - t0,
        engine=f"native ({backend.name} collapse)")


def _free_names(cols: Sequence[str]) -> tuple[str, str]:
    k, n = "successes_", "failures_"
    while k in cols or n in cols:
        k, n = k + "_", n + "_"
    return k, n


__all__ = ["DaskPass", "DuckDBPass", "MemoryPass", "ModelError", "dask_client", "glmer_outofcore", "pass_backend"]
