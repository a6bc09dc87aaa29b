"""Accuracy per group with a Wilson interval and a cluster-robust standard error.

For a group of ``n`` rows with scores ``x_i`` (1 = correct; 0 = wrong *or invalid*):

* ``accuracy = sum(x) / n`` (invalid answers count as not correct, as in ``mrcstats ingest``);
* ``accuracy_valid = sum(x) / (n - invalid)`` (null when no answer is valid);
* Wilson 95% score interval (Wilson 1927), the interval of R's
  ``prop.test(k, n, correct = FALSE)``::

      centre = (p + z^2 / (2n)) / (1 + z^2 / n)
      half   = z / (1 + z^2 / n) * sqrt(p (1 - p) / n + z^2 / (4 n^2))

* the cluster-robust standard error of the mean, clustered on ``cluster`` (Miller
  2024, "Adding Error Bars to Evals", Eq. 4, with the 1/n variance of the CLT term)::

      se_cluster = sqrt( sum_c ( sum_{i in c} (x_i - xbar) )^2 ) / n

  which is the CR0 sandwich of an intercept-only regression: R's
  ``sqrt(sandwich::vcovCL(lm(x ~ 1), cluster = ~cluster, type = "HC0", cadjust = FALSE))``
  and statsmodels' ``OLS(...).fit(cov_type="cluster", cov_kwds={"use_correction": False})``.
  With one row per cluster it is the plain ``sqrt(p (1 - p) / n)``.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from mrcstats.errors import InputError

#: the per-group fields of ``summarize(...).to_dict()["groups"]`` besides the ``by`` columns
GROUP_FIELDS: tuple[str, ...] = ("n", "accuracy", "accuracy_valid", "invalid", "ci_low", "ci_high", "se_cluster")


def wilson_interval(k: np.ndarray | float, n: np.ndarray | float, level: float = 0.95) -> tuple[Any, Any]:
    """Wilson score interval for ``k`` successes in ``n`` trials (R ``prop.test(k, n, correct=FALSE)``)."""
    from scipy.stats import norm

    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    z = float(norm.ppf(0.5 + level / 2.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        p = k / n
        denom = 1.0 + z * z / n
        centre = (p + z * z / (2.0 * n)) / denom
        half = z / denom * np.sqrt(p * (1.0 - p) / n + z * z / (4.0 * n * n))
    return np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)


def cluster_se(x: np.ndarray, clusters: np.ndarray) -> float:
    """Cluster-robust (CR0) standard error of ``mean(x)``: ``sqrt(sum_c (sum_{i in c}(x_i - xbar))^2) / n``."""
    x = np.asarray(x, dtype=float)
    n = len(x)
    if n == 0:
        return float("nan")
    codes, _ = pd.factorize(pd.Series(clusters), use_na_sentinel=False)
    resid = np.bincount(codes, weights=x - x.mean())
    return float(np.sqrt(np.sum(resid * resid)) / n)


@dataclass(frozen=True)
class AccuracySummary:
    """Accuracy per group (see the module docstring for the formulas).

    ``table`` has the ``by`` columns, then ``n``, ``correct``, ``accuracy``,
    ``accuracy_valid``, ``invalid``, ``ci_low``, ``ci_high``, ``se_cluster`` and
    ``clusters`` (number of clusters in the group).
    """

    by: tuple[str, ...]
    table: pd.DataFrame = field(repr=False)
    level: float = 0.95

    def to_frame(self) -> pd.DataFrame:
        return self.table.copy()

    def to_dict(self) -> dict[str, Any]:
        """``{"groups": [{<by columns>, "n", "accuracy", "accuracy_valid", "invalid", "ci_low", "ci_high",
        "se_cluster"}, ...]}``."""
        cols = [*self.by, *GROUP_FIELDS]
        groups = []
        for rec in self.table[cols].to_dict(orient="records"):
            out = {}
            for k, v in rec.items():
                if v is pd.NA or (isinstance(v, float) and np.isnan(v)):
                    v = None
                elif isinstance(v, np.integer):
                    v = int(v)
                elif isinstance(v, np.floating):
                    v = float(v)
                out[k] = v
            groups.append(out)
        return {"groups": groups}

    def summary(self) -> str:
        """A plain-text table."""
        t = self.table
        head = [*self.by, "n", "accuracy", f"{int(self.level * 100)}% CI (Wilson)", "se_cluster",
                "acc_valid", "invalid"]
        rows = []
        for _, r in t.iterrows():
            rows.append([*(_fmt(r[b]) for b in self.by), str(int(r["n"])), f"{r['accuracy']:.4f}",
                         f"[{r['ci_low']:.4f}, {r['ci_high']:.4f}]",
                         "NA" if pd.isna(r["se_cluster"]) else f"{r['se_cluster']:.4f}",
                         "NA" if pd.isna(r["accuracy_valid"]) else f"{r['accuracy_valid']:.4f}",
                         str(int(r["invalid"]))])
        widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(head)]
        lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def _fmt(v: Any) -> str:
    if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)):
        return "NA"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def summarize(log: Any, by: str | Sequence[str] = ("model",), *, cluster: str = "cluster",
              level: float = 0.95, engine: str | None = None, scheduler: Any = None) -> AccuracySummary:
    """Accuracy, accuracy over valid answers, invalid count, Wilson CI and cluster-robust SE per group.

    Args:
        log: a canonical log (``correct`` nullable boolean; other frames are validated first), or a
            :class:`~mrcstats.io.dataset.LogDataset` (a dataset folder, larger than memory: the
            per-group moments are computed by DuckDB SQL, :func:`mrcstats.stats._sql.summary_moments`,
            and finished here, identical to the in-memory path).
        by: grouping column(s); ``[]`` for one overall row.
        cluster: the clustering column for ``se_cluster`` (default ``cluster``: passage/group).
        level: confidence level of the Wilson interval.
        engine: ``"dask"`` aggregates a dataset (or frame) on Dask partitions, reduced on the client
            (``scheduler``: an address or ``distributed.Client``); default: DuckDB for a dataset, pandas
            for a frame. Every engine gives the same integer moments, so the same table.

    References: Wilson (1927); Miller (2024), "Adding Error Bars to Evals", Eq. 4.
    """
    from mrcstats.io.dataset import LogDataset
    from mrcstats.io.schema import is_canonical, validate_log

    if not (isinstance(by, str) or (isinstance(by, Sequence) and all(isinstance(b, str) for b in by))):
        raise InputError(f"summarize: by must be a column name or a list of them, got {by!r}")
    by_cols = [by] if isinstance(by, str) else list(by)
    if not 0 < level < 1:
        raise InputError(f"level must be between 0 and 1, got {level}")
    if engine not in (None, "duckdb", "memory", "dask"):
        raise InputError(f"summarize: engine must be duckdb, memory or dask, got {engine!r}")
    if engine == "dask":  # partial (group, cluster) counts on the workers, moments on the client
        from mrcstats.models.outofcore import pass_backend

        cl = pass_backend(log, "dask", scheduler).group_counts([*by_cols, cluster])
        if isinstance(log, LogDataset):
            from mrcstats.stats._sql import canonical_dtypes

            cl = canonical_dtypes(cl, by_cols, log)
        elif isinstance(log, pd.DataFrame):
            cl = cl.astype({b: log[b].dtype for b in by_cols})
        return finish_summary(_moments(cl.rename(columns={cluster: "_cl", "k": "s", "n": "m"}), by_cols),
                              by_cols, level)
    if isinstance(log, LogDataset) and engine == "memory":
        log = log.to_log()
    if isinstance(log, LogDataset):  # larger than memory: the per-group moments come from DuckDB SQL
        from mrcstats.stats._sql import summary_moments

        return finish_summary(summary_moments(log, by_cols, cluster), by_cols, level)
    if not isinstance(log, pd.DataFrame):
        raise InputError(f"summarize: expected a canonical log (a pandas DataFrame from mrcstats.read_log, or a "
                         f"dataset from mrcstats.open_log), got {type(log).__name__}")
    if not is_canonical(log):
        log = validate_log(log)
    for c in [*by_cols, cluster]:
        if c not in log.columns:
            raise InputError(f"no column {c!r} in the log to group by; columns: {', '.join(map(str, log.columns))}")
    corr = log["correct"]
    x = corr.fillna(False).to_numpy(dtype=np.int64)
    inv = corr.isna().to_numpy(dtype=np.int64)
    work = pd.DataFrame({"_x": x, "_inv": inv, "_cl": log[cluster].to_numpy()})
    for i, b in enumerate(by_cols):
        work[f"_g{i}"] = pd.Series(log[b].array)
    gcols = [f"_g{i}" for i in range(len(by_cols))]
    if not gcols:
        work["_g"] = 0
        gcols = ["_g"]
    # per (group, cluster): rows m_c, correct s_c, invalid; then the integer moments per group
    cl = work.groupby([*gcols, "_cl"], sort=False, dropna=False).agg(
        s=("_x", "sum"), m=("_x", "size"), inv=("_inv", "sum")).reset_index()
    if by_cols:
        cl = cl.rename(columns={f"_g{i}": b for i, b in enumerate(by_cols)})
    else:
        cl = cl.drop(columns=["_g"])
    return finish_summary(_moments(cl, by_cols), by_cols, level)


def _moments(cl: pd.DataFrame, by_cols: list[str]) -> pd.DataFrame:
    """Per group: n, correct, invalid, clusters, ss, sm, mm from per (group, cluster) ``s``, ``m``, ``inv``."""
    cl = cl.copy()
    cl["ss"], cl["sm"], cl["mm"] = cl["s"] * cl["s"], cl["s"] * cl["m"], cl["m"] * cl["m"]
    if not by_cols:
        cl["_g"] = 0
    gcols = by_cols or ["_g"]
    mom = cl.groupby(gcols, sort=True, dropna=False).agg(
        n=("m", "sum"), correct=("s", "sum"), invalid=("inv", "sum"), clusters=("s", "size"),
        ss=("ss", "sum"), sm=("sm", "sum"), mm=("mm", "sum")).reset_index()
    return mom.drop(columns=["_g"]) if not by_cols else mom


def finish_summary(moments: pd.DataFrame, by: Sequence[str], level: float = 0.95) -> AccuracySummary:
    """The summary table from per-group integer moments (the one place the formulas are evaluated).

    ``moments`` has the ``by`` columns and, per group, ``n`` (rows), ``correct`` (k), ``invalid``,
    ``clusters`` and, over the group's clusters c with m_c rows and s_c correct, ``ss`` = Σ s_c²,
    ``sm`` = Σ s_c m_c, ``mm`` = Σ m_c² (from pandas in memory, or DuckDB SQL over a dataset).
    The cluster residual sum of squares is evaluated exactly in integers::

        Σ_c (s_c - m_c k/n)² = (n² ss - 2 n k sm + k² mm) / n²,   se_cluster = sqrt(n² ss - 2 n k sm + k² mm) / n²
    """
    import math

    by_cols = list(by)
    t = moments.sort_values(by_cols, kind="stable", na_position="last").reset_index(drop=True) \
        if by_cols else moments.reset_index(drop=True)
    n_i = [int(v) for v in t["n"]]
    k_i = [int(v) for v in t["correct"]]
    rss = [n * n * int(ss) - 2 * n * k * int(sm) + k * k * int(mm)
           for n, k, ss, sm, mm in zip(n_i, k_i, t["ss"], t["sm"], t["mm"])]
    se = np.array([math.sqrt(max(r, 0)) / (n * n) if n else float("nan") for r, n in zip(rss, n_i)], dtype=float)
    table = t[by_cols].copy()
    for c in ("n", "correct", "invalid", "clusters"):
        table[c] = t[c].astype("int64").to_numpy()
    n = table["n"].to_numpy(dtype=float)
    k = table["correct"].to_numpy(dtype=float)
    table["accuracy"] = k / n
    valid = table["n"] - table["invalid"]
    table["accuracy_valid"] = np.where(valid > 0, k / valid.where(valid > 0, 1).to_numpy(dtype=float), np.nan)
    lo, hi = wilson_interval(k, n, level)
    table["ci_low"], table["ci_high"] = lo, hi
    table["se_cluster"] = se
    # one observation has no spread to estimate: NA, not 0 (R: sd(1) is NA)
    table.loc[table["n"] < 2, "se_cluster"] = np.nan
    table = table[[*by_cols, "n", "correct", "accuracy", "accuracy_valid", "invalid", "ci_low", "ci_high",
                   "se_cluster", "clusters"]]
    return AccuracySummary(by=tuple(by_cols), table=table, level=level)
