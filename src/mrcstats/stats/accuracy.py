"""Accuracy per group with its 95% interval and a cluster-robust standard error.

For a group of ``n`` rows with scores ``x_i`` (1 = correct; 0 = wrong *or invalid*):

* ``accuracy = sum(x) / n`` (invalid answers count as not correct, as in ``mrcstats ingest``);
* ``accuracy_valid = sum(x) / (n - invalid)`` (null when no answer is valid);
* ``se_cluster``, the cluster-robust (CR1) standard error of the mean, clustered on ``cluster`` (Miller
  2024, "Adding Error Bars to Evals", Eq. 4, with the small-sample factor G/(G-1), G = clusters)::

      se_cluster = sqrt( G/(G-1) * sum_c ( sum_{i in c} (x_i - xbar) )^2 ) / n

  R's ``sqrt(sandwich::vcovCL(lm(x ~ 1), cluster = ~cluster, type = "HC1", cadjust = TRUE))`` (for an
  intercept-only model HC1's (n-1)/(n-k) is 1, so this is the cluster adjustment alone) and statsmodels'
  ``OLS(...).fit(cov_type="cluster")``. It is the one ``se_cluster`` of the package: ``compare``, the report
  tables and figures take it from here. With one row per cluster it is ``sqrt(p (1 - p) / (n - 1))``.
* **one interval rule** (:func:`accuracy_interval`; the rule's name is the ``ci_method`` column and field):

  - ``"wilson"`` when every cluster of the table holds one row: the Wilson score interval (Wilson 1927),
    the interval of R's ``prop.test(k, n, correct = FALSE)``::

        centre = (p + z^2 / (2n)) / (1 + z^2 / n)
        half   = z / (1 + z^2 / n) * sqrt(p (1 - p) / n + z^2 / (4 n^2))

  - ``"clustered wilson"`` when a cluster holds several rows (repeated trials of an item, questions of a
    passage): the same Wilson formula at the effective sample size ``n_eff = min(p (1 - p) / se_cluster^2, n)``
    (Kish's design effect; Korn & Graubard 1998, "Confidence intervals for proportions with small expected
    number of positive counts estimated from survey data", Survey Methodology 24:193-201, who use n_eff the
    same way; ``n_eff = n`` when p is 0 or 1 and the SE vanishes; the cap keeps an interval from being
    narrower than the unclustered one) with the critical value ``t_{G-1}`` (G = clusters) in place of
    ``z``::

        c = qt(1 - (1 - level)/2, G - 1)
        centre = (p + c^2 / (2 n_eff)) / (1 + c^2 / n_eff)
        half   = c / (1 + c^2 / n_eff) * sqrt(p (1 - p) / n_eff + c^2 / (4 n_eff^2))

    This is Inspect AI's ``ci_wilson(cluster=)`` (inspect_ai 0.3.285; tests/stats/data/inspect_ci.json).
    The t on G - 1 df is the small-cluster correction of Cameron, Gelbach & Miller (2008, "Bootstrap-based
    improvements for inference with clustered errors", REStat 90:414-427, §III.B): the CR1 variance
    rests on G cluster sums, so with few clusters ``z`` gives intervals that cover 80% (G = 3), 87% (5),
    92% (10) on independent data (benchmarks/sim_few_clusters.py); with t they cover at least 93% from
    G = 3 on. For balanced clusters the intercept-only CR2 SE of Bell & McCaffrey (2002) equals CR1 and
    its Bell-McCaffrey df are G - 1, so this rule is also theirs there. Near p = 1/2 its half-width is
    ``t_{G-1} se_cluster`` (Miller 2024, Eq. 5), and unlike ``p ± t se`` it stays inside [0, 1]. A group
    within one cluster (G = 1: no between-cluster variance) gets the Wilson interval of its rows, which
    is conditional on that cluster.
* **few clusters**: below :data:`FEW_CLUSTERS` (10) clusters the result's ``notes`` (JSON ``notes``, the
  text and the report's table notes) warn that the interval rests on few independent units.

The conventions are parameters, so this is the one accuracy of the package (ELAGENT scoring and the
masking curves call it too):

* ``invalid="wrong"`` (default) counts an invalid answer as not correct (denominator: all rows);
  ``invalid="exclude"`` leaves invalid answers out (denominator: valid rows; ``accuracy`` is then
  ``accuracy_valid`` and the intervals are over the valid rows);
* ``trials="pool"`` (default) pools the trials; ``trials="mean"`` takes the mean over trials of the
  per-trial accuracy (seed 000's Acc(MR), seed 004's tables) and adds ``trials``, ``sd`` (sample SD
  over trials, R ``sd``) and ``se_trials``; the interval stays the one rule above (repeated trials make
  it ``"clustered wilson"``), so a table and a figure of the same cells draw the same interval.

**Graded scores** (``outcome="score"``; docs/scores.md): a log whose ``score`` holds partial credit, a
metric (f1, bleu) or a judge rating is summarised by its mean score with the same clustered SE,
the CR1 ``se_cluster`` above (Miller 2024 holds for any bounded score; R ``sandwich::vcovCL(lm(score ~ 1),
cluster = ~cluster, type = "HC1")``). The table keeps its columns: ``accuracy`` is then the mean score,
``correct`` the sum of scores, and ``ci_low``/``ci_high`` the normal interval ``xbar ± z se`` with the
plain ``se = sqrt(sum (x_i - xbar)^2) / n`` (``ci_method`` ``"normal"``) or, when clusters hold several
rows, ``xbar ± t_{G-1} se_cluster`` (``"clustered t"``: Inspect's ``ci(cluster=)``); no interval is
clipped (a score need not lie in [0, 1]).
``outcome`` says which was used.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from mrcstats._jsonout import plain_records
from mrcstats._repr import Result
from mrcstats.errors import InputError

#: the per-group fields of ``summarize(...).to_dict()["groups"]`` besides the ``by`` columns
GROUP_FIELDS: tuple[str, ...] = ("n", "accuracy", "accuracy_valid", "invalid", "ci_low", "ci_high", "ci_method",
                                  "ci_df", "se_cluster", "clusters")
#: the fields added for ``by`` a model when the models' item sets differ (:func:`shared_items`)
SHARED_FIELDS: tuple[str, ...] = ("n_shared", "accuracy_shared")
#: the fields added with ``trials="mean"``
TRIAL_FIELDS: tuple[str, ...] = ("trials", "sd", "se_trials")
#: the interval rules (``ci_method``) and the words a caption, table note or legend names them with
CI_METHODS: dict[str, str] = {
    "wilson": "Wilson score interval",
    "clustered wilson": "clustered Wilson interval (effective sample size from the cluster-robust CR1 standard "
                        "error, capped at n; t critical value on clusters - 1 df)",
    "normal": "normal interval",
    "clustered t": "t interval from the cluster-robust CR1 standard error (clusters - 1 df)"}
#: below this many clusters (G) a clustered interval or test carries a warning in the result's notes
#: (docs/accuracy.md, "Few clusters"): the t critical value holds the level there, but the SE rests on
#: few independent units and the interval is wide and approximate
FEW_CLUSTERS: int = 10


def ci_words(method: str, level: float = 0.95) -> str:
    """``"95% Wilson score interval"``: how a caption names the interval of ``ci_method``."""
    return f"{level:.0%} {CI_METHODS.get(method, method)}"


def cr1_factor(g: Any) -> Any:
    """The CR1 small-sample factor ``G / (G - 1)`` on the clustered variance (NaN for G < 2); R's
    ``sandwich::vcovCL(cadjust = TRUE)``, Miller (2024) §2.2."""
    g = np.asarray(g, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(g > 1, g / np.where(g > 1, g - 1.0, 1.0), np.nan)
    return float(out) if out.ndim == 0 else out


def interval_method(n: Any, clusters: Any) -> str:
    """The interval rule of a table: ``"clustered wilson"`` when some group has more rows than clusters
    (repeated trials of an item, several questions of a passage), else ``"wilson"``."""
    n, clusters = np.asarray(n, dtype=float), np.asarray(clusters, dtype=float)
    return "clustered wilson" if bool(np.any(n > clusters)) else "wilson"


def cluster_df(clusters: Any) -> Any:
    """The degrees of freedom of a clustered interval or test: ``G - 1`` (NaN for G < 2, where the
    cluster-robust variance cannot be estimated); the df of Inspect's ``ci(cluster=)`` and
    ``ci_wilson(cluster=)`` and of Cameron, Gelbach & Miller (2008, §III.B: t(G - 1) critical values)."""
    g = np.asarray(clusters, dtype=float)
    with np.errstate(invalid="ignore"):
        out = np.where(g >= 2, g - 1.0, np.nan)
    return float(out) if out.ndim == 0 else out


def critical_value(level: float, df: Any = None) -> Any:
    """The two-sided critical value of an interval at ``level``: Student t on ``df`` degrees of freedom
    (R ``qt(1 - (1 - level)/2, df)``) or, where ``df`` is None, NaN or infinite, the normal one (``qnorm``)."""
    from mrcstats._dist import norm_ppf, t_ppf

    z = float(norm_ppf(0.5 + level / 2.0))
    if df is None:
        return z
    d = np.asarray(df, dtype=float)
    fin = np.isfinite(d) & (d > 0)
    with np.errstate(invalid="ignore"):
        out = np.where(fin, t_ppf(0.5 + level / 2.0, np.where(fin, d, 1.0)), z)
    return float(out) if out.ndim == 0 else out


def mean_test(est: Any, se: Any, level: float = 0.95, df: Any = None) -> tuple[Any, Any, Any, Any]:
    """The one Wald test and interval of an estimate (a mean score, a paired difference):
    ``stat = est / se``, two-sided ``p = 2 P(T_df > |stat|)`` and ``est ± c se`` with ``c`` the
    :func:`critical_value` (t on ``df = G - 1`` for a clustered SE, normal where ``df`` is None/NaN).
    ``se = 0`` gives ``stat = ±inf`` (0 when ``est`` is 0 too). Returns ``(stat, p, lo, hi)``."""
    from mrcstats._dist import norm_sf, t_sf

    est, se = np.asarray(est, dtype=float), np.asarray(se, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        stat = np.where(se > 0, est / np.where(se > 0, se, 1.0),
                        np.where(est == 0, 0.0, np.copysign(np.inf, est)))
        stat = np.where(np.isnan(se) | np.isnan(est), np.nan, stat)
        if df is None:
            p = 2.0 * norm_sf(np.abs(stat))
        else:
            d = np.broadcast_to(np.asarray(df, dtype=float), stat.shape)
            fin = np.isfinite(d) & (d > 0)
            p = np.where(fin, 2.0 * t_sf(np.abs(stat), np.where(fin, d, 1.0)), 2.0 * norm_sf(np.abs(stat)))
        c = critical_value(level, df)
        lo, hi = est - c * se, est + c * se
    return tuple(v[()] if isinstance(v, np.ndarray) else v for v in (stat, p, lo, hi))  # type: ignore[return-value]


def few_clusters_note(clusters: Any, labels: Sequence[str] | None = None) -> str | None:
    """The warning of a clustered interval or test on fewer than :data:`FEW_CLUSTERS` clusters (None when
    every G is at least that): which groups, their G, and what it means."""
    g = np.asarray(clusters, dtype=float).ravel()
    few = np.flatnonzero((g < FEW_CLUSTERS) & (g >= 1))
    if not len(few):
        return None
    where = ""
    if labels is not None:
        shown = [f"{labels[i]} (G = {int(g[i])})" for i in few[:8]]
        where = ": " + ", ".join(shown) + (f" and {len(few) - 8} more" if len(few) > 8 else "")
    one = bool(np.any(g[few] < 2))
    return (f"few clusters{where}: with fewer than {FEW_CLUSTERS} clusters the cluster-robust SE rests on few "
            f"independent units, so the interval uses a t critical value on G - 1 df and is wide; treat it as "
            f"approximate" + ("; a group within one cluster has no between-cluster variance to estimate and "
                              "gets the Wilson interval of its rows (conditional on that cluster)" if one else "")
            + " (docs/accuracy.md, few clusters)")


def accuracy_interval(p: Any, n: Any, se: Any, method: str, level: float = 0.95,
                      clusters: Any = None) -> tuple[Any, Any]:
    """The one accuracy interval, always inside [0, 1]:

    * ``method="wilson"``: Wilson at ``n`` with the normal critical value;
    * ``method="clustered wilson"``: Wilson at the effective sample size
      ``n_eff = min(p (1 - p) / se^2, n)`` (Korn & Graubard 1998; ``n_eff = n`` where p is 0 or 1 or the
      SE is 0 or missing) with the critical value ``t_{G-1}`` of ``G = clusters`` in place of ``z``
      (:func:`critical_value`; the normal one where G < 2: one cluster, no between-cluster variance).
      This is Inspect's ``ci_wilson(cluster=)`` (inspect_ai 0.3.285) on the same rows.

    See the module docstring for the formula and references."""
    p = np.asarray(p, dtype=float)
    n = np.asarray(n, dtype=float)
    if method == "wilson":
        return wilson_interval(p * n, n, level)
    if method != "clustered wilson":
        raise InputError(f"accuracy_interval: method must be 'wilson' or 'clustered wilson', got {method!r}")
    se = np.asarray(se, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        ok = (p > 0) & (p < 1) & (se > 0) & np.isfinite(se)
        n_eff = np.where(ok, np.minimum(p * (1.0 - p) / np.where(ok, se * se, 1.0), n), n)
    crit = critical_value(level, None if clusters is None else cluster_df(clusters))
    return wilson_interval(p * n_eff, n_eff, level, crit)


def wilson_interval(k: np.ndarray | float, n: np.ndarray | float, level: float = 0.95,
                    critical: Any = None) -> tuple[Any, Any]:
    """Wilson score interval for ``k`` successes in ``n`` trials (R ``prop.test(k, n, correct=FALSE)``);
    ``critical`` replaces the normal critical value ``z`` (the clustered interval's ``t_{G-1}``)."""
    from mrcstats._dist import norm_ppf

    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    z = np.asarray(norm_ppf(0.5 + level / 2.0) if critical is None else critical, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = k / n
        denom = 1.0 + z * z / n
        centre = (p + z * z / (2.0 * n)) / denom
        half = z / denom * np.sqrt(p * (1.0 - p) / n + z * z / (4.0 * n * n))
    return np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)


def cr1_se(rss: Any, n: Any, clusters: Any) -> Any:
    """The one CR1 standard error of a mean from its cluster residual sum of squares
    ``rss = sum_c (sum_{i in c} (x_i - xbar))^2``: ``sqrt(G/(G-1) * rss) / n`` (NaN for G < 2 or n = 0).
    :func:`cluster_se`, :func:`finish_summary` and :mod:`mrcstats.stats.compare` (models and paired
    differences) compute their ``rss`` in their own fast way and their SE here."""
    rss, n = np.asarray(rss, dtype=float), np.asarray(n, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.sqrt(cr1_factor(clusters) * np.maximum(rss, 0.0)) / np.where(n > 0, n, np.nan)
    return float(out) if np.ndim(out) == 0 else out


def cluster_se(x: np.ndarray, clusters: np.ndarray) -> float:
    """Cluster-robust (CR1) standard error of ``mean(x)``:
    ``sqrt(G/(G-1) * sum_c (sum_{i in c}(x_i - xbar))^2) / n`` (NaN for fewer than 2 clusters);
    R ``sandwich::vcovCL(lm(x ~ 1), cluster = ~cl, type = "HC1", cadjust = TRUE)``."""
    x = np.asarray(x, dtype=float)
    n = len(x)
    if n == 0:
        return float("nan")
    codes, _ = pd.factorize(pd.Series(clusters), use_na_sentinel=False)
    resid = np.bincount(codes, weights=x - x.mean())
    g = int(codes.max()) + 1
    return float(cr1_se(np.sum(resid * resid), n, g))


@dataclass(frozen=True, repr=False)
class AccuracySummary(Result):
    """Accuracy per group (see the module docstring for the formulas).

    ``table`` has the ``by`` columns, then ``n``, ``correct``, ``accuracy``,
    ``accuracy_valid``, ``invalid``, ``ci_low``, ``ci_high`` (the one interval rule), ``ci_method`` (its
    name, :data:`CI_METHODS`), ``se_cluster`` (CR1), ``clusters`` (number of clusters in the group)
    and, with ``trials="mean"``, ``trials``, ``sd``, ``se_trials``. ``ci_method`` is also a field (one rule
    per table) and :meth:`ci_words` names it as a caption does.
    """

    by: tuple[str, ...]
    table: pd.DataFrame = field(repr=False)
    level: float = 0.95
    invalid: str = "wrong"      # the convention used: "wrong" or "exclude"
    trials: str = "pool"        # "pool" or "mean"
    cluster: str | None = "cluster"
    outcome: str = "correct"    # "correct" (accuracy) or "score" (mean graded score)
    ci_method: str = "wilson"   # the interval rule of ci_low/ci_high (CI_METHODS)
    notes: tuple[str, ...] = ()  # warnings in plain sentences (few clusters, differing item sets)
    metric: str | None = None   # the tool's per-sample metric analysed (the log's ``metric`` column), if named

    def ci_words(self) -> str:
        """The interval as a caption names it: ``"95% Wilson score interval"``."""
        return ci_words(self.ci_method, self.level)

    def to_frame(self) -> pd.DataFrame:
        return self.table.copy()

    def to_dict(self) -> dict[str, Any]:
        """``{"outcome", "ci_method", "invalid", "groups": [{<by columns>, "n", "accuracy", "accuracy_valid",
        "invalid", "ci_low", "ci_high", "ci_method", "se_cluster"}, ...]}``; with ``trials="mean"`` also
        ``trials``, ``sd``, ``se_trials``."""
        cols = [*self.by, *GROUP_FIELDS, *(c for c in SHARED_FIELDS if c in self.table.columns),
                *(TRIAL_FIELDS if self.trials == "mean" else ())]
        groups = plain_records(self.table[cols])
        return {"outcome": self.outcome, **({"metric": self.metric} if self.metric else {}),
                "ci_method": self.ci_method, "ci_rule": self.ci_words(),
                "invalid": self.invalid, "notes": list(self.notes), "groups": groups}

    def summary(self) -> str:
        """A plain-text table."""
        t = self.table
        graded = self.outcome == "score"
        head = [*self.by, "n", "mean_score" if graded else "accuracy",
                f"{int(self.level * 100)}% CI ({self.ci_method})", "se_cluster (CR1)",
                "score_valid" if graded else "acc_valid", "invalid"]
        shared = "accuracy_shared" in t.columns
        if shared:
            head.append("acc_shared (n_shared)")
        rows = []
        for _, r in t.iterrows():
            rows.append([*(_fmt(r[b]) for b in self.by), str(int(r["n"])), f"{r['accuracy']:.4f}",
                         f"[{r['ci_low']:.4f}, {r['ci_high']:.4f}]",
                         "NA" if pd.isna(r["se_cluster"]) else f"{r['se_cluster']:.4f}",
                         "NA" if pd.isna(r["accuracy_valid"]) else f"{r['accuracy_valid']:.4f}",
                         str(int(r["invalid"])),
                         *([("NA" if pd.isna(r["accuracy_shared"]) else f"{r['accuracy_shared']:.4f}")
                            + f" ({int(r['n_shared'])})"] if shared else [])])
        widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(head)]
        lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows]
        lines.append(f"interval: {self.ci_words()}; se_cluster: cluster-robust CR1 on "
                     f"{self.cluster or 'rows'}; invalid answers "
                     + (("score 0" if graded else "count as wrong") if self.invalid == "wrong" else "left out"))
        if graded:
            lines.append("outcome: score (mean graded score)")
        if self.metric:
            lines.append(f"metric: {self.metric} (the tool's per-sample metric analysed)")
        lines += [f"note: {n}" for n in self.notes]
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
              level: float = 0.95, invalid: str = "wrong", trials: str = "pool", backend: str | None = None,
              scheduler: Any = None, outcome: str = "auto", engine: str | None = None) -> AccuracySummary:
    """Accuracy, accuracy over valid answers, invalid count, Wilson and clustered intervals per group.

    Args:
        log: a canonical log (``correct`` nullable boolean; other frames are validated first).
        by: grouping column(s); ``[]`` for one overall row.
        cluster: the clustering column for ``se_cluster`` (default ``cluster``: passage/group; ``item`` when
            the log names no cluster).
        level: confidence level of the intervals.
        invalid: ``"wrong"`` (invalid = not correct) or ``"exclude"`` (over valid answers only).
        trials: ``"pool"`` or ``"mean"`` (mean over trials of the per-trial accuracy, with its SD).
        backend: where the rows are read (:mod:`mrcstats.backends`; ``engine=`` is its deprecated old
            name): for a :class:`~mrcstats.io.dataset.LogDataset` (a dataset folder larger than memory) the
            per-(group, cluster) counts come from DuckDB SQL (default, :func:`mrcstats.backends.sql.summary_moments`)
            or, with ``"dask"``, from Dask partitions reduced on the client (``scheduler``: an address or a
            ``distributed.Client``), and per (group, trial) for ``trials="mean"``; :func:`finish_summary`
            turns them into the same table as in memory (every convention).
        outcome: ``"auto"`` (default: the mean ``score`` when the log has graded scores, else accuracy),
            ``"correct"`` or ``"score"`` (see the module docstring; the result's ``outcome`` says which).

    References: Wilson (1927); Miller (2024), "Adding Error Bars to Evals", Eqs. 4-5.
    """
    from mrcstats.backends import dataset_pass
    from mrcstats.io.schema import check_grouping, is_canonical, validate_log

    if engine is not None:
        import warnings

        warnings.warn("summarize(engine=) is deprecated: the row pass is backend= (engine means native/lme4)",
                      DeprecationWarning, stacklevel=2)
        if backend not in (None, engine):
            raise InputError(f"summarize: engine={engine!r} and backend={backend!r} disagree; pass backend only")
    engine = backend if backend is not None else engine       # below: the backend
    if engine not in (None, "duckdb", "memory", "dask"):
        raise InputError(f"summarize: backend must be duckdb, memory or dask, got {engine!r}")
    if isinstance(log, pd.DataFrame) and engine != "dask" and not is_canonical(log):
        log = validate_log(log)
    rows = dataset_pass(log)       # the row pass of a dataset folder larger than memory; None in memory
    if rows is not None or isinstance(log, pd.DataFrame):
        by = check_grouping(by, log.columns)  # one check, one message, in memory and on a dataset
        if cluster:
            check_grouping(cluster, log.columns, "cluster by")
    if rows is not None and (engine == "memory" or (outcome != "correct" and rows.graded())):
        log, rows = rows.to_frame(), None      # graded scores are summed in floats, in memory
    by_list = [by] if isinstance(by, str) else list(by)
    if (rows is not None or engine == "dask") and outcome != "score":
        res = _summarize_counts(log, by_list, cluster, level, invalid, trials, engine, scheduler)
        return with_shared_items(res, _item_counts(log, by_list, engine, scheduler))
    if not isinstance(log, pd.DataFrame):
        raise InputError(f"summarize: expected a canonical log (a pandas DataFrame from mrcstats.read_log, or a "
                         f"dataset from mrcstats.open_log), got {type(log).__name__}")
    if not is_canonical(log):
        log = validate_log(log)
    from mrcstats.io.schema import resolve_outcome

    if resolve_outcome(log, outcome, "summary") == "score":
        res = summarize_scores(log, by, cluster=cluster, level=level, invalid=invalid, trials=trials)
    else:
        res = with_shared_items(summarize_frame(log, by, cluster=cluster, level=level, invalid=invalid,
                                                trials=trials), _item_counts(log, by_list, engine, scheduler))
    return _with_metric(res, log)


def _with_metric(res: AccuracySummary, log: pd.DataFrame) -> AccuracySummary:
    """``res`` naming the tool's per-sample metric(s) it analysed: the distinct values of the log's ``metric``
    column (the harness and lighteval readers write it), comma-separated."""
    if "metric" not in log.columns:
        return res
    names = sorted({str(m) for m in log["metric"].dropna().unique()})
    if not names:
        return res
    import dataclasses

    return dataclasses.replace(res, metric=", ".join(names))


def _item_counts(log: Any, by_cols: list[str], engine: str | None, scheduler: Any) -> pd.DataFrame | None:
    """Counts per (``by`` groups, item) — ``n``, ``k``, ``inv`` — for :func:`with_shared_items`; None unless
    ``by`` holds ``model`` and the log has ``item``."""
    if "model" not in by_cols or "item" not in log.columns or "item" in by_cols:
        return None
    cols = [*by_cols, "item"]
    if isinstance(log, pd.DataFrame) and engine != "dask":
        corr = log["correct"]
        work = pd.DataFrame({c: pd.Series(log[c].array) for c in cols})
        work["k"] = corr.fillna(False).to_numpy(dtype=np.int64)
        work["inv"] = corr.isna().to_numpy(dtype=np.int64)
        return work.groupby(cols, sort=False, dropna=False, observed=True).agg(
            n=("k", "size"), k=("k", "sum"), inv=("inv", "sum")).reset_index()
    from mrcstats.backends import pass_backend

    return pass_backend(log, "dask" if engine == "dask" else "duckdb", scheduler).group_counts(cols)


def with_shared_items(res: AccuracySummary, item_counts: pd.DataFrame | None) -> AccuracySummary:
    """``res`` with the shared-item accuracy beside the full one when the models' item sets differ.

    ``item_counts`` has the ``by`` columns (one of them ``model``), ``item`` and per (group, item) ``n``
    rows, ``k`` correct, ``inv`` invalid. Within each stratum of the other ``by`` columns (all rows when
    ``by`` is just ``model``) the shared items are those every model of the stratum answered; when some
    model lacks some item, the table gains ``n_shared`` (rows on shared items) and ``accuracy_shared``
    (correct / rows there, under the same ``invalid`` convention; pooled over trials) and ``notes`` says
    which models miss which share of the items. A ranking on ``accuracy`` alone rewards a model that
    skipped hard items (MMLU-Pro: a model lacking 1,681 mostly-hard questions ranked #3 though below #4
    on the shared items). Unchanged when every model answered the same items, or without counts."""
    if item_counts is None or res.outcome == "score" or item_counts.empty:
        return res
    by_cols = list(res.by)
    others = [b for b in by_cols if b != "model"]
    c = item_counts.copy()
    if not others:
        c["_s"] = 0
    strat = others or ["_s"]
    n_models = c.groupby(strat, dropna=False, observed=True)["model"].nunique().rename("_nm")
    per_item = c.groupby([*strat, "item"], dropna=False, observed=True)["model"].nunique().rename("_im")
    c = c.join(n_models, on=strat).join(per_item, on=[*strat, "item"])
    c["_shared"] = c["_im"] == c["_nm"]
    if bool(c["_shared"].all()):
        return res
    union = c.groupby(strat, dropna=False, observed=True)["item"].nunique().rename("_u")
    own = c.groupby(by_cols, dropna=False, observed=True)["item"].nunique().rename("_own")
    sh = c[c["_shared"]].groupby(by_cols, dropna=False, observed=True)[["n", "k", "inv"]].sum()
    t = res.table.copy()
    key = pd.MultiIndex.from_frame(t[by_cols]) if len(by_cols) > 1 else pd.Index(t[by_cols[0]])
    shn = sh.reindex(key)
    n_sh = shn["n"].fillna(0).to_numpy(dtype=float)
    k_sh = shn["k"].fillna(0).to_numpy(dtype=float)
    den = n_sh - (shn["inv"].fillna(0).to_numpy(dtype=float) if res.invalid == "exclude" else 0.0)
    t["n_shared"] = n_sh.astype("int64")
    with np.errstate(invalid="ignore", divide="ignore"):
        t["accuracy_shared"] = np.where(den > 0, k_sh / np.where(den > 0, den, 1.0), np.nan)
    own_n = own.reindex(key).fillna(0).to_numpy(dtype=float)
    tu = t[by_cols].copy()
    if not others:
        tu["_s"] = 0
    u = tu.join(union, on=strat)["_u"].to_numpy(dtype=float)
    lack = [(" / ".join(_fmt(v) for v in row), int(uu - oo), uu) for row, oo, uu in
            zip(t[by_cols].itertuples(index=False), own_n, u) if uu > oo]
    shown = ", ".join(f"{name} lacks {m:,} of {int(uu):,} items ({m / uu:.1%})" for name, m, uu in lack[:8])
    more = f" and {len(lack) - 8} more" if len(lack) > 8 else ""
    n_shared_items = int(c.loc[c["_shared"], [*strat, "item"]].drop_duplicates().shape[0])
    note = (f"item sets differ: {shown}{more}; accuracy_shared is over the {n_shared_items:,} items every model "
            f"answered{' (within each ' + ', '.join(others) + ')' if others else ''}, the basis a ranking "
            f"should use (mrcstats compare ranks on it)")
    import dataclasses

    return dataclasses.replace(res, table=t, notes=(*res.notes, note))


def summarize_scores(log: pd.DataFrame, by: str | Sequence[str] = (), *, cluster: str | None = "cluster",
                     level: float = 0.95, invalid: str = "wrong", trials: str = "pool") -> AccuracySummary:
    """:func:`summarize` of the ``score`` column (graded outcomes): mean score, the CR1 clustered SE of
    :func:`cluster_se` (Miller 2024 Eq. 4 with the factor G/(G-1)), the normal interval and, for ``trials="mean"``, the mean over
    trials of the per-trial mean score (:func:`trial_summary`). Invalid answers (``score`` <NA>) score 0
    (``invalid="wrong"``) or are left out (``"exclude"``). Same table as :func:`summarize_frame`, with
    ``outcome="score"``; reference: R ``sandwich::vcovCL(lm(score ~ 1), cluster = ~cluster, type = "HC1",
    cadjust = TRUE)`` (tests/stats/_r_scores.py)."""
    from mrcstats._dist import norm_ppf

    by_cols = [by] if isinstance(by, str) else list(by)
    for c in [*by_cols, *([cluster] if cluster else []), *(["trial"] if trials == "mean" else [])]:
        if c not in log.columns:
            raise InputError(f"no column {c!r} in the log to group by; columns: {', '.join(map(str, log.columns))}")
    _check_conventions(level, invalid, trials)
    sc = log["score"] if "score" in log.columns else log["correct"].astype("Float64")
    inv = sc.isna().to_numpy()
    x = sc.to_numpy(dtype=float, na_value=0.0)
    work = pd.DataFrame({"x": x, "inv": inv.astype(np.int64)})
    for i, b in enumerate(by_cols):
        work[f"_g{i}"] = pd.Series(log[b].array)
    keys = [f"_g{i}" for i in range(len(by_cols))]
    cl = log[cluster].to_numpy() if cluster else None
    z = float(norm_ppf(0.5 + level / 2.0))
    recs = []
    groups = work.groupby(keys, sort=True, dropna=False) if keys else [((), work)]
    for key, g in groups:
        key = key if isinstance(key, tuple) else (key,)
        idx = g.index.to_numpy()
        use = idx[~inv[idx]] if invalid == "exclude" else idx
        n, n_inv = len(idx), int(inv[idx].sum())
        den = len(use)
        xs = x[use]
        mean = float(xs.sum() / den) if den else float("nan")
        valid = idx[~inv[idx]]
        se_iid = float(np.sqrt(np.sum((xs - mean) ** 2)) / den) if den else float("nan")
        se_cl = cluster_se(xs, cl[use]) if (cluster and den >= 2) else float("nan")
        rec = dict(zip(by_cols, key))
        rec.update(n=n, correct=float(xs.sum()), accuracy=mean,
                   accuracy_valid=float(x[valid].mean()) if len(valid) else float("nan"), invalid=n_inv,
                   ci_low=mean - z * se_iid, ci_high=mean + z * se_iid, se_cluster=se_cl,
                   clusters=int(pd.Series(cl[use]).nunique()) if cluster else den, _den=den, _se_iid=se_iid)
        recs.append(rec)
    table = pd.DataFrame(recs, columns=[*by_cols, "n", "correct", "accuracy", "accuracy_valid", "invalid", "ci_low",
                                        "ci_high", "se_cluster", "clusters", "_den", "_se_iid"])
    clustered = bool(cluster) and interval_method(table["_den"], table["clusters"]) == "clustered wilson"
    method = "clustered t" if clustered else "normal"
    g_used = table["clusters"].to_numpy(dtype=float)
    if clustered:
        # mean ± t_{G-1} se_cluster (mean_test); a group within one cluster keeps its normal interval
        one = g_used < 2
        _, _, lo, hi = mean_test(table["accuracy"].to_numpy(dtype=float), table["se_cluster"].to_numpy(dtype=float),
                                 level, cluster_df(g_used))
        table["ci_low"] = np.where(one, table["ci_low"], lo)
        table["ci_high"] = np.where(one, table["ci_high"], hi)
    table.insert(table.columns.get_loc("ci_high") + 1, "ci_method", method)
    table.insert(table.columns.get_loc("ci_method") + 1, "ci_df", cluster_df(g_used) if clustered else np.nan)
    table = table.drop(columns=["_den", "_se_iid"])
    for c in by_cols:
        table[c] = table[c].astype(log[c].dtype)
    if trials == "mean":
        work["_t"] = log["trial"].to_numpy()
        per = work.groupby([*keys, "_t"], sort=False, dropna=False).agg(
            n=("x", "size"), k=("x", "sum"), inv=("inv", "sum")).reset_index()
        per = per.rename(columns={f"_g{i}": b for i, b in enumerate(by_cols)})
        tr = trial_summary(per, by_cols, level, invalid)
        table["trials"] = tr["trials"].to_numpy()
        table["accuracy"] = tr["accuracy"].to_numpy()
        for c in ("sd", "se_trials"):
            table[c] = tr[c].to_numpy()
    return AccuracySummary(by=tuple(by_cols), table=table, level=level, invalid=invalid, trials=trials,
                           cluster=cluster, outcome="score", ci_method=method,
                           notes=_interval_notes(table, by_cols, clustered))


def summarize_frame(log: pd.DataFrame, by: str | Sequence[str] = (), *, cluster: str | None = "cluster",
                    level: float = 0.95, invalid: str = "wrong", trials: str = "pool") -> AccuracySummary:
    """:func:`summarize` on a frame already checked by the caller: ``correct`` (boolean with <NA> = invalid),
    the ``by`` columns, ``cluster`` (or None: no cluster SE) and, for ``trials="mean"``, ``trial``.

    The frame is reduced to integer counts per (group, cluster) and, for ``trials="mean"``, per
    (group, trial); :func:`finish_summary` (the one home of the statistics, shared with the dataset
    and Dask paths) turns them into the table.
    """
    from mrcstats.io.schema import check_grouping

    by_cols = check_grouping(by, log.columns)
    need = [*([cluster] if cluster else []), *(["trial"] if trials == "mean" else [])]
    for c in need:
        if c not in log.columns:
            raise InputError(f"no column {c!r} in the log to group by; columns: {', '.join(map(str, log.columns))}")
    _check_conventions(level, invalid, trials)
    corr = log["correct"]
    work = pd.DataFrame({"k": corr.fillna(False).to_numpy(dtype=np.int64),
                         "inv": corr.isna().to_numpy(dtype=np.int64)})
    keys = []
    for i, b in enumerate(by_cols):
        work[f"_g{i}"] = pd.Series(log[b].array)
        keys.append(f"_g{i}")
    names = {f"_g{i}": b for i, b in enumerate(by_cols)}

    def counts(extra: str | None) -> pd.DataFrame:
        cols = [*keys, *([extra] if extra else [])]
        if not cols:
            return pd.DataFrame({"n": [len(work)], "k": [int(work["k"].sum())], "inv": [int(work["inv"].sum())]})
        g = work.groupby(cols, sort=False, dropna=False)
        out = g.agg(k=("k", "sum"), inv=("inv", "sum"), n=("k", "size")).reset_index()
        return out.rename(columns=names)

    if cluster:
        work["_cl"] = log[cluster].to_numpy()
        mom = group_moments(counts("_cl").rename(columns={"k": "s", "n": "m"}), by_cols)
    else:
        mom = None
    per = None
    if trials == "mean":
        work["_t"] = log["trial"].to_numpy()
        per = counts("_t")
    if mom is None:   # no cluster: each row is its own cluster (the SE is not computed)
        mom = _moments_unclustered(per if per is not None else counts(None), by_cols)
    return finish_summary(mom, by_cols, level, cluster, invalid=invalid, trial_counts=per)


def _check_conventions(level: float, invalid: str, trials: str) -> None:
    if not 0 < level < 1:
        raise InputError(f"level must be between 0 and 1, got {level}")
    if invalid not in ("wrong", "exclude"):
        raise InputError(f"invalid must be 'wrong' (invalid = not correct) or 'exclude', got {invalid!r}")
    if trials not in ("pool", "mean"):
        raise InputError(f"trials must be 'pool' or 'mean', got {trials!r}")


# ----------------------------------------------------------------------------- logs larger than memory


def _summarize_counts(log: Any, by_cols: list[str], cluster: str, level: float, invalid: str, trials: str,
                      engine: str | None, scheduler: Any) -> AccuracySummary:
    """:func:`summarize` of a dataset (DuckDB) or on Dask: integer counts per (group, cluster) and, for
    ``trials="mean"``, per (group, trial), then :func:`finish_summary` (the same code as in memory)."""
    from mrcstats.backends import pass_backend

    _check_conventions(level, invalid, trials)
    backend = pass_backend(log, "dask" if engine == "dask" else "duckdb", scheduler)
    if engine == "dask":
        backend.check_columns([*by_cols, cluster, "correct", *(["trial"] if trials == "mean" else [])])
        cl = backend.typed(backend.group_counts([*by_cols, cluster]), by_cols)
        mom = group_moments(cl.rename(columns={cluster: "_cl", "k": "s", "n": "m"}), by_cols)
        per = (backend.typed(backend.group_counts(list(dict.fromkeys([*by_cols, "trial"]))), by_cols)
               if trials == "mean" else None)
    else:
        mom = backend.summary_moments(by_cols, cluster)
        per = backend.group_counts([*by_cols, "trial"]) if trials == "mean" else None
    return finish_summary(mom, by_cols, level, cluster, invalid=invalid, trial_counts=per)


def group_moments(cl: pd.DataFrame, by_cols: list[str]) -> pd.DataFrame:
    """Per group: n, correct, invalid, clusters (non-null cluster values), clusters_valid (those with a
    valid row) and the integer moments
    ss = Σ s², sm = Σ s m, mm = Σ m², smv = Σ s v, mmv = Σ v² (v = m - inv: valid rows) from per
    (group, cluster) ``_cl``, ``s`` (correct), ``m`` (rows), ``inv`` (invalid)."""
    cl = cl.copy()
    s = cl["s"].astype("int64")
    m = cl["m"].astype("int64")
    v = m - cl["inv"].astype("int64")
    cl["ss"], cl["sm"], cl["mm"], cl["smv"], cl["mmv"] = s * s, s * m, m * m, s * v, v * v
    cl["_has"] = cl["_cl"].notna().astype("int64")
    cl["_hasv"] = (cl["_cl"].notna() & (v > 0)).astype("int64")
    if not by_cols:
        cl["_g"] = 0
    gcols = by_cols or ["_g"]
    mom = cl.groupby(gcols, sort=True, dropna=False).agg(
        n=("m", "sum"), correct=("s", "sum"), invalid=("inv", "sum"), clusters=("_has", "sum"),
        clusters_valid=("_hasv", "sum"),
        ss=("ss", "sum"), sm=("sm", "sum"), mm=("mm", "sum"), smv=("smv", "sum"), mmv=("mmv", "sum")).reset_index()
    return mom.drop(columns=["_g"]) if not by_cols else mom


def _moments_unclustered(counts: pd.DataFrame, by_cols: list[str]) -> pd.DataFrame:
    """Per group n, correct, invalid from finer counts (``n``, ``k``, ``inv``); every row its own cluster
    (``clusters`` = n; the cluster moments are left out: no cluster SE)."""
    c = counts.copy()
    if not by_cols:
        c["_g"] = 0
    gcols = by_cols or ["_g"]
    mom = c.groupby(gcols, sort=True, dropna=False).agg(n=("n", "sum"), correct=("k", "sum"),
                                                        invalid=("inv", "sum")).reset_index()
    mom["clusters"] = mom["n"]
    return mom.drop(columns=["_g"]) if not by_cols else mom


def trial_summary(per: pd.DataFrame, by: Sequence[str], level: float = 0.95,
                  invalid: str = "wrong") -> pd.DataFrame:
    """Mean over trials of the per-trial accuracy, per group, from integer counts per (group, trial).

    ``per`` has the ``by`` columns, one row per (group, trial), and ``n`` (rows), ``k`` (correct),
    ``inv`` (invalid). Per trial t: ``acc_t = k_t / n_t`` (``invalid="wrong"``) or
    ``k_t / (n_t - inv_t)`` (``"exclude"``; a trial without a valid answer has no accuracy and is left
    out). Per group over the T trials with an accuracy: ``trials`` = T, ``accuracy`` = mean, ``sd`` (R
    ``sd``, ddof 1), ``se_trials`` = sd / sqrt(T), ``ci_low_t``/``ci_high_t`` = mean -/+ t_{T-1} se
    (R ``t.test(acc_t, conf.level = level)$conf.int``); sd, se and the interval are null for T < 2.
    Vectorised over groups (two-pass SD: Σ (acc_t - mean)² / (T - 1)).
    Rows come out in the order of the groups sorted by ``by`` (missing last), as :func:`finish_summary`.
    """
    from mrcstats._dist import t_ppf

    by_cols = list(by)
    p = per.copy()
    if not by_cols:
        p["_g"] = 0
    gcols = by_cols or ["_g"]
    # sorted by every key (the trial too): the float sums then run in one order whatever order the
    # counts came in (DuckDB returns groups in any order), so every path gives the same bits
    keys = [c for c in p.columns if c not in ("n", "k", "inv")]
    p = p.sort_values(gcols + [c for c in keys if c not in gcols], kind="stable",
                      na_position="last").reset_index(drop=True)
    gid = p.groupby(gcols, sort=False, dropna=False).ngroup().to_numpy()
    n_groups = int(gid.max()) + 1 if len(gid) else 0
    k = p["k"].to_numpy(dtype=float)
    den = p["n"].to_numpy(dtype=float) - (p["inv"].to_numpy(dtype=float) if invalid == "exclude" else 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = np.where(den > 0, k / np.where(den > 0, den, 1.0), np.nan)
    ok = ~np.isnan(acc)
    g_ok, a_ok = gid[ok], acc[ok]
    nt = np.bincount(g_ok, minlength=n_groups).astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.bincount(g_ok, weights=a_ok, minlength=n_groups) / np.where(nt > 0, nt, np.nan)
        dev = a_ok - mean[g_ok]
        ss = np.bincount(g_ok, weights=dev * dev, minlength=n_groups)
        sd = np.where(nt > 1, np.sqrt(ss / np.where(nt > 1, nt - 1, 1)), np.nan)
        se = sd / np.sqrt(np.where(nt > 1, nt, np.nan))
        tq = np.where(nt > 1, t_ppf(0.5 + level / 2, np.where(nt > 1, nt - 1, 1)), np.nan)
    half = tq * se
    out = np.column_stack([nt, mean, sd, se, mean - half, mean + half])
    first = p.drop_duplicates(subset=gcols, keep="first") if len(p) else p
    res = first[by_cols].reset_index(drop=True)
    res["trials"] = out[:, 0].astype("int64")
    res["accuracy"], res["sd"], res["se_trials"] = out[:, 1], out[:, 2], out[:, 3]
    res["ci_low_t"], res["ci_high_t"] = out[:, 4], out[:, 5]
    return res


def finish_summary(moments: pd.DataFrame | None, by: Sequence[str], level: float = 0.95,
                   cluster: str | None = "cluster", *, invalid: str = "wrong",
                   trial_counts: pd.DataFrame | None = None) -> AccuracySummary:
    """The summary table from per-group integer moments (and per-(group, trial) counts): the one place
    the statistics of :func:`summarize` are computed, in memory, over a dataset (DuckDB) or on Dask.

    ``moments`` has the ``by`` columns and, per group, ``n`` (rows), ``correct`` (k), ``invalid``,
    ``clusters`` and, over the group's clusters c with m_c rows, v_c valid rows and s_c correct,
    ``ss`` = Σ s_c², ``sm`` = Σ s_c m_c, ``mm`` = Σ m_c², ``smv`` = Σ s_c v_c, ``mmv`` = Σ v_c²
    (``cluster=None``: no cluster SE; ``moments=None`` then takes the totals from ``trial_counts``). With N the rows the accuracy is over (all rows for
    ``invalid="wrong"``, the valid ones for ``"exclude"``; M, SM the matching moments), the cluster
    residual sum of squares Σ_c (s_c - m_c k/N)² is evaluated exactly in integers::

        Σ_c (s_c - m_c k/N)² = (N² ss - 2 N k SM + k² MM) / N²,
        se_cluster = sqrt(G/(G-1)) sqrt(N² ss - 2 N k SM + k² MM) / N²   (CR1, G = clusters)

    The interval is :func:`accuracy_interval` under the table's rule (:func:`interval_method`). With
    ``trial_counts`` (``trials="mean"``), ``accuracy`` is the mean over trials (:func:`trial_summary`) and
    the trial columns are added; the interval stays that of the pooled rows.
    """


    by_cols = list(by)
    if moments is None:   # no cluster moments: the totals come from the per-trial counts
        if trial_counts is None or cluster:
            raise InputError("finish_summary: moments are needed unless cluster=None and trial_counts are given")
        moments = _moments_unclustered(trial_counts, by_cols)
    t = moments.sort_values(by_cols, kind="stable", na_position="last").reset_index(drop=True) \
        if by_cols else moments.reset_index(drop=True)
    table = t[by_cols].copy()
    for c in ("n", "correct", "invalid", "clusters"):
        table[c] = t[c].astype("int64").to_numpy()
    n_i = [int(v) for v in t["n"]]
    k_i = [int(v) for v in t["correct"]]
    inv_i = [int(v) for v in t["invalid"]]
    den_i = n_i if invalid == "wrong" else [n - i for n, i in zip(n_i, inv_i)]
    if cluster:
        sm_c, mm_c = ("sm", "mm") if invalid == "wrong" else ("smv", "mmv")
        g_col = "clusters" if invalid == "wrong" or "clusters_valid" not in t.columns else "clusters_valid"
        g_i = t[g_col].to_numpy(dtype=float)
        # N² Σ_c (s_c - m_c k/N)², exact in integers; divided by N² in floats for cr1_se
        rss = [d * d * int(ss) - 2 * d * k * int(sm) + k * k * int(mm)
               for d, k, ss, sm, mm in zip(den_i, k_i, t["ss"], t[sm_c], t[mm_c])]
        se = np.asarray(cr1_se([max(r, 0) / (d * d) if d else float("nan")
                                for r, d in zip(rss, den_i)], den_i, g_i), dtype=float).reshape(-1)
    else:
        g_i = np.asarray(den_i, dtype=float)
        se = np.full(len(t), np.nan)
    den = np.asarray(den_i, dtype=float)
    k = table["correct"].to_numpy(dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        table["accuracy"] = k / np.where(den > 0, den, np.nan)
    valid = table["n"] - table["invalid"]
    table["accuracy_valid"] = np.where(valid > 0, k / valid.where(valid > 0, 1).to_numpy(dtype=float), np.nan)
    se[den < 2] = np.nan          # one observation has no spread to estimate: NA, not 0 (R: sd(1) is NA)
    method = interval_method(den, g_i) if cluster else "wilson"
    with np.errstate(invalid="ignore", divide="ignore"):
        lo, hi = accuracy_interval(k / np.where(den > 0, den, np.nan), den, se, method, level, clusters=g_i)
    table["ci_low"], table["ci_high"] = lo, hi
    table["ci_method"] = method
    table["ci_df"] = cluster_df(g_i) if method == "clustered wilson" else np.nan
    table["se_cluster"] = se
    extra: list[str] = []
    if trial_counts is not None:
        tr = trial_summary(trial_counts, by_cols, level, invalid)
        if len(tr) != len(table):
            raise InputError("summarize: the per-trial counts do not cover the same groups as the totals")
        table["trials"] = tr["trials"].to_numpy()
        table["accuracy"] = tr["accuracy"].to_numpy()
        for c in ("sd", "se_trials"):
            table[c] = tr[c].to_numpy()
        extra = ["trials", "sd", "se_trials"]
    table = table[[*by_cols, "n", "correct", "accuracy", "accuracy_valid", "invalid", "ci_low", "ci_high",
                   "ci_method", "ci_df", "se_cluster", "clusters", *extra]]
    return AccuracySummary(by=tuple(by_cols), table=table, level=level, invalid=invalid,
                           trials="mean" if trial_counts is not None else "pool", cluster=cluster, ci_method=method,
                           notes=_interval_notes(table, by_cols, method == "clustered wilson", g_i))


def _interval_notes(table: pd.DataFrame, by_cols: Sequence[str], clustered: bool,
                    clusters: Any = None) -> tuple[str, ...]:
    """The few-clusters warning of a summary table (:func:`few_clusters_note`), naming its groups;
    ``clusters``: the G of each group's interval (default the ``clusters`` column)."""
    if not clustered or table.empty:
        return ()
    labels = [" / ".join(_fmt(v) for v in row) for row in table[list(by_cols)].itertuples(index=False)] \
        if by_cols else ["all"]
    g = table["clusters"].to_numpy(dtype=float) if clusters is None else np.asarray(clusters, dtype=float)
    note = few_clusters_note(g, labels)
    return (note,) if note else ()
