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
* the clustered 95% interval ``accuracy ± z * se_cluster`` (``ci_low_cluster``, ``ci_high_cluster``;
  Miller 2024, Eq. 5), clipped to [0, 1]: the interval for logs with several rows per cluster
  (repeated trials of an item, questions of a passage), where Wilson's treats rows as independent.

The conventions are parameters, so this is the one accuracy of the package (ELAGENT scoring and the
masking curves call it too):

* ``invalid="wrong"`` (default) counts an invalid answer as not correct (denominator: all rows);
  ``invalid="exclude"`` leaves invalid answers out (denominator: valid rows; ``accuracy`` is then
  ``accuracy_valid`` and the intervals are over the valid rows);
* ``trials="pool"`` (default) pools the trials; ``trials="mean"`` takes the mean over trials of the
  per-trial accuracy (seed 000's Acc(MR), seed 004's tables) and adds ``trials``, ``sd`` (sample SD
  over trials, R ``sd``), ``se_trials`` and the t interval ``ci_low_t``/``ci_high_t``
  (R ``t.test(acc_t)$conf.int``).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from mrcstats._jsonout import plain_records
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
    ``accuracy_valid``, ``invalid``, ``ci_low``, ``ci_high`` (Wilson), ``se_cluster``,
    ``clusters`` (number of clusters in the group), ``ci_low_cluster``, ``ci_high_cluster``
    and, with ``trials="mean"``, ``trials``, ``sd``, ``se_trials``, ``ci_low_t``, ``ci_high_t``.
    """

    by: tuple[str, ...]
    table: pd.DataFrame = field(repr=False)
    level: float = 0.95
    invalid: str = "wrong"      # the convention used: "wrong" or "exclude"
    trials: str = "pool"        # "pool" or "mean"
    cluster: str | None = "cluster"

    def to_frame(self) -> pd.DataFrame:
        return self.table.copy()

    def to_dict(self) -> dict[str, Any]:
        """``{"groups": [{<by columns>, "n", "accuracy", "accuracy_valid", "invalid", "ci_low", "ci_high",
        "se_cluster"}, ...]}``."""
        cols = [*self.by, *GROUP_FIELDS]
        groups = plain_records(self.table[cols])
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
              level: float = 0.95, invalid: str = "wrong", trials: str = "pool", engine: str | None = None,
              scheduler: Any = None) -> AccuracySummary:
    """Accuracy, accuracy over valid answers, invalid count, Wilson and clustered intervals per group.

    Args:
        log: a canonical log (``correct`` nullable boolean; other frames are validated first).
        by: grouping column(s); ``[]`` for one overall row.
        cluster: the clustering column for ``se_cluster`` (default ``cluster``: passage/group; ``item`` when
            the log names no cluster).
        level: confidence level of the intervals.
        invalid: ``"wrong"`` (invalid = not correct) or ``"exclude"`` (over valid answers only).
        trials: ``"pool"`` or ``"mean"`` (mean over trials of the per-trial accuracy, with SD and t interval).
        engine: for a :class:`~mrcstats.io.dataset.LogDataset` (a dataset folder larger than memory) the
            per-(group, cluster) counts come from DuckDB SQL (default, :func:`mrcstats.stats._sql.summary_moments`)
            or, with ``"dask"``, from Dask partitions reduced on the client (``scheduler``: an address or a
            ``distributed.Client``); :func:`finish_summary` turns them into the same table as in memory
            (``invalid="wrong"``, ``trials="pool"``).

    References: Wilson (1927); Miller (2024), "Adding Error Bars to Evals", Eqs. 4-5.
    """
    from mrcstats.io.dataset import LogDataset
    from mrcstats.io.schema import is_canonical, validate_log

    if not (isinstance(by, str) or (isinstance(by, Sequence) and all(isinstance(b, str) for b in by))):
        raise InputError(f"summarize: by must be a column name or a list of them, got {by!r}")
    if engine not in (None, "duckdb", "memory", "dask"):
        raise InputError(f"summarize: engine must be duckdb, memory or dask, got {engine!r}")
    if isinstance(log, LogDataset) and engine == "memory":
        log = log.to_log()
    if isinstance(log, LogDataset) or engine == "dask":
        return _summarize_counts(log, [by] if isinstance(by, str) else list(by), cluster, level, invalid, trials,
                                 engine, scheduler)
    if not isinstance(log, pd.DataFrame):
        raise InputError(f"summarize: expected a canonical log (a pandas DataFrame from mrcstats.read_log, or a "
                         f"dataset from mrcstats.open_log), got {type(log).__name__}")
    if not is_canonical(log):
        log = validate_log(log)
    return summarize_frame(log, by, cluster=cluster, level=level, invalid=invalid, trials=trials)


def summarize_frame(log: pd.DataFrame, by: str | Sequence[str] = (), *, cluster: str | None = "cluster",
                    level: float = 0.95, invalid: str = "wrong", trials: str = "pool") -> AccuracySummary:
    """:func:`summarize` on a frame already checked by the caller: ``correct`` (boolean with <NA> = invalid),
    the ``by`` columns, ``cluster`` (or None: no cluster SE) and, for ``trials="mean"``, ``trial``."""
    by_cols = [by] if isinstance(by, str) else list(by)
    need = [*by_cols, *([cluster] if cluster else []), *(["trial"] if trials == "mean" else [])]
    for c in need:
        if c not in log.columns:
            raise InputError(f"no column {c!r} in the log to group by; columns: {', '.join(map(str, log.columns))}")
    if not 0 < level < 1:
        raise InputError(f"level must be between 0 and 1, got {level}")
    if invalid not in ("wrong", "exclude"):
        raise InputError(f"invalid must be 'wrong' (invalid = not correct) or 'exclude', got {invalid!r}")
    if trials not in ("pool", "mean"):
        raise InputError(f"trials must be 'pool' or 'mean', got {trials!r}")
    corr = log["correct"]
    x = corr.fillna(False).to_numpy(dtype=float)
    inv = corr.isna().to_numpy(dtype=float)
    work = pd.DataFrame({"_x": x, "_inv": inv,
                         "_cl": log[cluster].to_numpy() if cluster else np.arange(len(log))})
    if trials == "mean":
        work["_t"] = log["trial"].to_numpy()
    for i, b in enumerate(by_cols):
        work[f"_g{i}"] = pd.Series(log[b].array)
    gcols = [f"_g{i}" for i in range(len(by_cols))]
    if not gcols:
        work["_g"] = 0
        gcols = ["_g"]
    grp = work.groupby(gcols, sort=True, dropna=False)
    agg = grp.agg(n=("_x", "size"), correct=("_x", "sum"), invalid=("_inv", "sum"),
                  clusters=("_cl", "nunique"))
    valid = agg["n"] - agg["invalid"]
    agg["accuracy_valid"] = np.where(valid > 0, agg["correct"] / valid.where(valid > 0, 1), np.nan)
    # the rows the accuracy is over, by convention
    use = work if invalid == "wrong" else work[work["_inv"] == 0]
    den = agg["n"] if invalid == "wrong" else valid
    with np.errstate(invalid="ignore", divide="ignore"):
        agg["accuracy"] = agg["correct"] / den.where(den > 0, np.nan)
    # cluster residual sums: sum_{i in c}(x_i - xbar_g) = S_c - n_c * xbar_g
    cl = use.groupby([*gcols, "_cl"], sort=False, dropna=False)["_x"].agg(["sum", "size"]).reset_index()
    cl = cl.merge(agg["accuracy"].reset_index(), on=gcols, how="left")
    cl["_r2"] = (cl["sum"] - cl["size"] * cl["accuracy"]) ** 2
    r2 = cl.groupby(gcols, sort=True, dropna=False)["_r2"].sum()
    with np.errstate(invalid="ignore", divide="ignore"):
        agg["se_cluster"] = (np.sqrt(r2.reindex(agg.index).to_numpy()) / den.to_numpy()) if cluster else np.nan
    # one observation has no spread to estimate: NA, not 0 (R: sd(1) is NA)
    agg.loc[den < 2, "se_cluster"] = np.nan
    lo, hi = wilson_interval(agg["correct"].to_numpy(), den.to_numpy(), level)
    agg["ci_low"], agg["ci_high"] = lo, hi
    from scipy.stats import norm

    z = float(norm.ppf(0.5 + level / 2.0))
    agg["ci_low_cluster"] = np.clip(agg["accuracy"] - z * agg["se_cluster"], 0.0, 1.0)
    agg["ci_high_cluster"] = np.clip(agg["accuracy"] + z * agg["se_cluster"], 0.0, 1.0)
    extra: list[str] = []
    if trials == "mean":
        per = use.groupby([*gcols, "_t"], sort=True, dropna=False)["_x"].agg(["sum", "size"]).reset_index()
        if invalid == "wrong":
            per["acc_t"] = per["sum"] / per["size"]
        else:
            tot = work.groupby([*gcols, "_t"], sort=True, dropna=False)["_x"].size().reset_index(name="_all")
            per = tot.merge(per, on=[*gcols, "_t"], how="left").fillna({"sum": 0.0, "size": 0})
            per["acc_t"] = np.where(per["size"] > 0, per["sum"] / per["size"].where(per["size"] > 0, 1), np.nan)
        stats_rows = {}
        from scipy import stats as _st

        for key, g in per.groupby(gcols, sort=True, dropna=False):
            xs = g["acc_t"].to_numpy(float)
            xs = xs[~np.isnan(xs)]
            nt = len(xs)
            mean = float(xs.mean()) if nt else np.nan
            sd = float(xs.std(ddof=1)) if nt > 1 else np.nan
            se = sd / np.sqrt(nt) if nt > 1 else np.nan
            half = float(_st.t.ppf(0.5 + level / 2, nt - 1)) * se if nt > 1 else np.nan
            stats_rows[key if isinstance(key, tuple) else (key,)] = (nt, mean, sd, se, mean - half, mean + half)
        keys = [k if isinstance(k, tuple) else (k,) for k in agg.index]
        cols = np.array([stats_rows[k] for k in keys], dtype=float).reshape(len(keys), 6)
        agg["trials"] = cols[:, 0].astype("int64")
        agg["accuracy"] = cols[:, 1]
        agg["sd"], agg["se_trials"], agg["ci_low_t"], agg["ci_high_t"] = cols[:, 2], cols[:, 3], cols[:, 4], cols[:, 5]
        extra = ["trials", "sd", "se_trials", "ci_low_t", "ci_high_t"]
    table = agg.reset_index()
    if by_cols:
        table = table.rename(columns={f"_g{i}": b for i, b in enumerate(by_cols)})
    else:
        table = table.drop(columns=["_g"])
    for c in ("n", "correct", "invalid", "clusters"):
        table[c] = table[c].astype("int64")
    table = table[[*by_cols, "n", "correct", "accuracy", "accuracy_valid", "invalid", "ci_low", "ci_high",
                   "se_cluster", "clusters", "ci_low_cluster", "ci_high_cluster", *extra]]
    return AccuracySummary(by=tuple(by_cols), table=table, level=level, invalid=invalid, trials=trials,
                           cluster=cluster)


# ----------------------------------------------------------------------------- logs larger than memory


def _summarize_counts(log: Any, by_cols: list[str], cluster: str, level: float, invalid: str, trials: str,
                      engine: str | None, scheduler: Any) -> AccuracySummary:
    """:func:`summarize` of a dataset (DuckDB) or on Dask: per-(group, cluster) counts, then :func:`finish_summary`."""
    from mrcstats.io.dataset import LogDataset

    if invalid != "wrong" or trials != "pool":
        raise InputError("summarize: a dataset folder / engine='dask' supports invalid='wrong', trials='pool'; "
                         "load the log with mrcstats.read_log for the other conventions")
    if not 0 < level < 1:
        raise InputError(f"level must be between 0 and 1, got {level}")
    if engine == "dask":
        from mrcstats.models.outofcore import pass_backend

        cl = pass_backend(log, "dask", scheduler).group_counts([*by_cols, cluster])
        if isinstance(log, LogDataset):
            from mrcstats.stats._sql import canonical_dtypes

            cl = canonical_dtypes(cl, by_cols, log)
        elif isinstance(log, pd.DataFrame):
            cl = cl.astype({b: log[b].dtype for b in by_cols})
        mom = _moments(cl.rename(columns={cluster: "_cl", "k": "s", "n": "m"}), by_cols)
    else:
        from mrcstats.stats._sql import summary_moments

        mom = summary_moments(log, by_cols, cluster)
    return finish_summary(mom, by_cols, level, cluster)


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


def finish_summary(moments: pd.DataFrame, by: Sequence[str], level: float = 0.95,
                   cluster: str = "cluster") -> AccuracySummary:
    """The summary table (``invalid="wrong"``, ``trials="pool"``) from per-group integer moments.

    ``moments`` has the ``by`` columns and, per group, ``n`` (rows), ``correct`` (k), ``invalid``,
    ``clusters`` and, over the group's clusters c with m_c rows and s_c correct, ``ss`` = Σ s_c²,
    ``sm`` = Σ s_c m_c, ``mm`` = Σ m_c² (DuckDB SQL over a dataset, or Dask partitions). The
    cluster residual sum of squares of :func:`summarize_frame` is evaluated exactly in integers::

        Σ_c (s_c - m_c k/n)² = (n² ss - 2 n k sm + k² mm) / n²,   se_cluster = sqrt(n² ss - 2 n k sm + k² mm) / n²
    """
    import math

    from scipy.stats import norm

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
    with np.errstate(invalid="ignore", divide="ignore"):
        table["accuracy"] = k / np.where(n > 0, n, np.nan)
    valid = table["n"] - table["invalid"]
    table["accuracy_valid"] = np.where(valid > 0, k / valid.where(valid > 0, 1).to_numpy(dtype=float), np.nan)
    lo, hi = wilson_interval(k, n, level)
    table["ci_low"], table["ci_high"] = lo, hi
    se[n < 2] = np.nan          # one observation has no spread to estimate (as summarize_frame)
    table["se_cluster"] = se
    z = float(norm.ppf(0.5 + level / 2.0))
    table["ci_low_cluster"] = np.clip(table["accuracy"] - z * table["se_cluster"], 0.0, 1.0)
    table["ci_high_cluster"] = np.clip(table["accuracy"] + z * table["se_cluster"], 0.0, 1.0)
    table = table[[*by_cols, "n", "correct", "accuracy", "accuracy_valid", "invalid", "ci_low", "ci_high",
                   "se_cluster", "clusters", "ci_low_cluster", "ci_high_cluster"]]
    return AccuracySummary(by=tuple(by_cols), table=table, level=level, invalid="wrong", trials="pool",
                           cluster=cluster)
