"""Binomial GLMMs on logs larger than memory: collapse to binomial counts in one streamed pass.

A binomial GLMM with random intercepts depends on the data only through the number of
successes ``k`` and trials ``n`` of each distinct *covariate pattern*: the combination of
the values of every column the formula uses (fixed-effect variables and grouping factors).
Rows that share a pattern have the same linear predictor, so

    Σ_rows [y log μ + (1-y) log(1-μ)] = Σ_cells [k log μ + (n-k) log(1-μ)],

and the Laplace (or AGQ) deviance, its optimum, the conditional modes and the Hessian are the
same for ``correct ~ rhs`` on the rows and ``cbind(k, n - k) ~ rhs`` on the cells (lme4's own
equivalence of Bernoulli and binomial responses). The fit here therefore

1. runs **one O(N) pass** over the data with a row-pass backend (:mod:`mrcstats.backends`) — in-memory
   pandas (``backend="memory"``), DuckDB SQL streamed over a Parquet log dataset in bounded memory
   (``backend="duckdb"``, the default for datasets), or ``dask.dataframe`` partitions on a
   cluster, reduced on the client (``backend="dask"``) — producing the cell table; the counts
   are integers, so every backend gives the same table exactly;
2. fits ``cbind(successes, failures) ~ rhs`` (the parsed :class:`~mrcstats.models.formula.ModelSpec`
   with its response replaced; no formula text is rebuilt) with the native engine
   (:func:`mrcstats.models.native.fit_rows`) in memory on at most two weighted rows per cell, its
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
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from mrcstats.backends import BACKENDS, DaskPass, DuckDBPass, MemoryPass, dask_client, pass_backend
from mrcstats.errors import InputError, ModelError
from mrcstats.models.design import factor_levels
from mrcstats.models.family import BINOMIAL
from mrcstats.models.formula import ModelSpec, Response, parse_formula
from mrcstats.models.grid import MAX_SECOND, NotSeparable, fit_grid, grid_covariates
from mrcstats.models.native import fit_rows

GRID_MAX_CELLS = 400_000_000    # q1 x q2 cells of the crossed grid (two int32 tables: 3.2 GB)
#: method="auto" fits the crossed grid when at least this fraction of its cells is filled, else the cell table
#: (the grid's kernels cost per cell, the cell table's per filled cell: on the ELP's shape, 80,000 x 800 with
#: 4.25% filled, the grid fit took 2.6x the in-memory row fit, whose kernels cost ~9x more per row than the
#: grid's per cell; issue 41)
GRID_MIN_FILL = 0.1


class _Grid:
    """Successes K and trials N per (level of factor 1, level of factor 2), levels as the design orders
    them (:func:`mrcstats.models.design.factor_levels`: text by code point, numbers numerically), rows =
    the factor with more levels (lme4's term order; ties keep the formula order)."""

    def __init__(self, factors: Sequence[str], values: Sequence[np.ndarray], levels: Mapping[str, Any] | None):
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

    def level_codes(self, side: int, values: Any) -> np.ndarray:
        """Positions of ``values`` among the levels of the grid's row (side 0) or column (side 1) factor; -1
        for a value that is not a level."""
        ci = (1 - side) if self.swap else side           # the factor's position in the caller's order
        pos = self.index[ci].get_indexer(pd.Index(np.asarray(values)))
        return np.where(pos >= 0, self.code_of[ci][np.maximum(pos, 0)], -1)

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


# ----------------------------------------------------------------------------- the fit


def glmer_outofcore(formula: str | ModelSpec, data: Any, *, backend: str | None = None,
                    scheduler: str | Any | None = None, contrasts: Mapping[str, str] | None = None,
                    levels: Mapping[str, Any] | None = None, nagq: int = 1, method: str = "auto",
                    engine: str | None = None, invalid: str = "exclude") -> Any:
    """Fit ``formula`` (binomial, random intercepts) on data of any size by collapsing to binomial counts.

    Args:
        formula: a :class:`~mrcstats.models.formula.ModelSpec` (from the front door,
            :func:`mrcstats.glmer`) or lme4 formula text with a 0/1 or boolean response column, e.g.
            ``"correct ~ 1 + (1 | item) + (1 | model)"`` (parsed once, here).
        data: a log dataset (path or :class:`~mrcstats.io.dataset.LogDataset`), a pandas frame, or a
            ``dask.dataframe``.
        backend: the row pass: ``"duckdb"`` (datasets; default), ``"memory"`` or ``"dask"``
            (:mod:`mrcstats.backends`). ``engine=`` is its deprecated old name.
        scheduler: ``backend="dask"``: a scheduler address (``tcp://host:8786``) or a ``Client``.
        contrasts, levels, nagq: as :func:`mrcstats.glmer`.
        method: ``"auto"``: the crossed grid (:mod:`mrcstats.models.grid`) for ``y ~ X + (1 | a) + (1 | b)``
            when every fixed-effect column is constant within a level of ``a`` or of ``b`` (item- and
            model-level covariates) and at least :data:`GRID_MIN_FILL` of the a x b cells have rows, the
            cell table otherwise (a sparse grid: a second pass); ``"grid"``: the crossed grid or one
            InputError saying which covariate it cannot take; ``"cells"``: always the cell table.
        invalid: the pass leaves rows with an empty response out (``"exclude"``); ``"wrong"`` (the front
            door's default, :func:`mrcstats.glmer`) then refuses a ``correct`` response with invalid answers,
            whose rows an in-memory fit counts as not correct, rather than fit other rows than it.

    Returns:
        A :class:`~mrcstats.models.results.GlmerResult` equal to ``glmer(formula, rows)`` (same estimates,
        SEs, θ, conditional modes, logLik; ``nobs`` = rows used); ``optinfo["collapse"]`` has the row and
        cell counts and the backend, and ``messages`` says the fit was collapsed.

    Reference: the Bernoulli/binomial equivalence of the GLM likelihood (McCullagh & Nelder 1989,
    sec. 4.2; lme4 ``glmer`` with ``cbind(k, n - k)``).
    """
    t0 = time.perf_counter()
    if engine is not None:
        warnings.warn("glmer_outofcore(engine=) is deprecated: the row pass is backend=", DeprecationWarning,
                      stacklevel=2)
        backend = backend or engine
    if method not in ("auto", "cells", "grid"):
        raise InputError(f"method {method!r}: use 'auto', 'grid' or 'cells'")
    spec = formula if isinstance(formula, ModelSpec) else parse_formula(formula)
    formula = spec.formula
    if spec.response.is_cbind:
        raise InputError(f"formula {formula!r}: out-of-core fits take a 0/1 response column (the rows are "
                         f"collapsed to cbind counts here)")
    if not spec.random:
        raise InputError(f"formula {formula!r} has no random term; use a GLM")
    if spec.random_slopes:
        raise InputError(f"formula {formula!r}: random slopes are not supported out of core")
    response = spec.response.column
    cols = [c for c in spec.columns if c != response]
    backend = pass_backend(data, backend, scheduler)
    have = set(backend.columns())
    missing = [c for c in [response, *cols] if c not in have]
    if missing:
        raise InputError(f"formula {formula!r}: column(s) {', '.join(map(repr, missing))} not in the data; "
                         f"columns: {', '.join(sorted(have))}")
    grid_factors = _grid_factors(spec, nagq)
    if method == "grid" and grid_factors is None:
        raise InputError(f"formula {formula!r}: the crossed grid fits y ~ X + (1 | a) + (1 | b) with an intercept "
                         f"(Laplace, nagq=1); use method='cells'")
    sparse_note = []
    if grid_factors is not None and method != "cells":
        try:
            res = _fit_on_grid(spec, backend, grid_factors, response, levels, t0, contrasts, invalid,
                               min_fill=GRID_MIN_FILL if method == "auto" else 0.0)
        except NotSeparable as exc:
            if method == "grid":
                raise InputError(f"formula {formula!r}: {exc}") from None
        else:
            if isinstance(res, str):
                sparse_note = [res]
            else:
                return res
    t_pass = time.perf_counter()
    cells, dropped = backend.cell_counts(cols, response)
    t_pass = time.perf_counter() - t_pass
    _check_invalid(dropped, response, invalid)
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
    lhs = Response(successes=(sname,), failures=(fname,), text=f"cbind({sname}, {fname})")
    counts = dataclasses.replace(spec, response=lhs, family=BINOMIAL, weights=None)   # the same terms, parsed once
    res = fit_rows(counts, wrows, contrasts=contrasts, levels=levels, nagq=nagq)
    loglik = res.loglik
    npar = len(res.fixef) + len(res.theta)
    msgs = [(f"fitted exactly on binomial counts: {len(cells):,} cells (one per distinct {', '.join(cols)}) "
             f"collapsed from {rows:,} rows by the {backend.name} pass, given to the engine as {len(wrows):,} "
             f"weighted rows cbind(successes, failures) (same likelihood, estimates and SEs as the row-level "
             f"fit; residuals are per weighted row)")]
    msgs += sparse_note + _dropped_messages(dropped, "formula variable")
    opt = dict(res.optinfo)
    opt["collapse"] = {"rows": rows, "cells": len(cells), "weighted_rows": len(wrows),
                       "backend": backend.name, "dropped": dropped, "pass_seconds": t_pass}
    return dataclasses.replace(
        res, formula=spec.formula, loglik=loglik, minus2loglik=-2 * loglik, aic=-2 * loglik + 2 * npar,
        bic=-2 * loglik + np.log(rows) * npar, nobs=rows, df_resid=rows - npar,
        messages=tuple(msgs) + tuple(res.messages), optinfo=opt, fit_seconds=time.perf_counter() - t0,
        engine=f"native ({backend.name} collapse)")


def _check_invalid(dropped: Mapping[str, int], response: str, invalid: str) -> None:
    """``invalid="wrong"``: a pass that left out invalid answers fitted other rows than the in-memory fit."""
    if invalid == "wrong" and response == "correct" and dropped["response"]:
        raise InputError(f"{dropped['response']:,} invalid answers (empty correct) in the data: an out-of-core fit "
                         f"leaves them out, while invalid='wrong' (the default; CLI --invalid wrong) counts them "
                         f"as not correct; pass invalid='exclude' (CLI --invalid exclude) to fit without them, or "
                         f"read the log into memory (mrcstats.read_log) to count them as wrong")


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
                 levels: Mapping[str, Any] | None, t0: float, contrasts: Mapping[str, str] | None = None,
                 invalid: str = "exclude", min_fill: float = 0.0) -> Any:
    """The fit on the crossed grid of binomial counts; with fewer than ``min_fill`` of the cells filled, no fit
    but the note saying so (the caller fits the cell table)."""
    t_pass = time.perf_counter()
    grid, dropped = backend.grid_counts(factors, response, lambda vals: _Grid(factors, vals, levels))
    t_pass = time.perf_counter() - t_pass
    _check_invalid(dropped, response, invalid)
    K, N = grid.tables()
    rows = int(N.sum(dtype=np.int64))
    if rows == 0:
        raise InputError("no rows left to fit: every response or grouping factor is missing")
    if grid.shape[1] > MAX_SECOND:
        raise ModelError(f"crossed terms with {grid.shape[0]:,} and {grid.shape[1]:,} levels: the native engine "
                         f"handles a smaller factor of at most {MAX_SECOND:,} levels; use engine='lme4'")
    filled = int(np.count_nonzero(N))
    if filled < min_fill * N.size:
        return (f"the {grid.shape[0]:,} x {grid.shape[1]:,} grid of {' x '.join(grid.factors)} has "
                f"{filled / N.size:.1%} of its cells filled (the grid path needs {min_fill:.0%}): fitted on the "
                f"cell table")
    cov = grid_covariates(spec, backend, grid, response, contrasts, levels) if spec.terms else None
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


# the passes moved to mrcstats.backends (issue 26); their names stay importable from here
__all__ = ["BACKENDS", "DaskPass", "DuckDBPass", "MemoryPass", "ModelError", "dask_client", "glmer_outofcore",
           "pass_backend"]
