"""Discriminatory power P_d of item clusters and P_d-filtered model rankings (seed 003, eq. 4-7, Table 5).

For each cluster (passage), with ``p_k`` the accuracy of model ``k`` on the cluster's
rows (invalid answers count as not correct; models without rows there are left out)::

    q_k = max(min(p_k, 1 - eps), eps)                                   (6)
    D_KL(P_i || P_j) = q_i ln(q_i / q_j) + (1 - q_i) ln((1 - q_i) / (1 - q_j))   (7)
    Dbar(P_i || P_j) = (D_KL(P_i || P_j) + D_KL(P_j || P_i)) / 2         (5)
    P_d = 2 / (n (n - 1)) sum_{i < j} Dbar(P_i || P_j)                   (4)

with ``P_k ~ Bernoulli(p_k)``, natural logarithms and ``eps = 1e-10``. Clusters with
fewer than two models get no P_d (counted in ``skipped``).

:meth:`DiscriminationResult.cutoffs` gives seed Table 5: for each cutoff, the clusters
with ``P_d > cutoff``, their items, every model's accuracy on them and the grand mean
(the mean of the model accuracies), plus Kendall's tau-b between the model accuracies
on the subset and on the whole log and a percentile cluster-bootstrap interval for
each accuracy. :func:`cluster_difficulty` lists the easiest and hardest clusters from a
fitted GLMM's conditional modes with their implied probabilities (seed 003, Sec. 5).
"""
from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from mrcstats._repr import Result
from mrcstats._seeds import rng as seed_rng
from mrcstats._words import plural
from mrcstats.errors import InputError
from mrcstats.models.predict import plogis

__all__ = [
    "ClusterDifficulty",
    "CutoffTable",
    "DiscriminationResult",
    "cluster_difficulty",
    "discrimination",
    "pd_value",
]

DEFAULT_CUTOFFS: tuple[float, ...] = (0.0, 5.0, 10.0, 15.0)


def pd_value(p: Sequence[float], epsilon: float = 1e-10) -> float:
    """P_d of one cluster from its model accuracies ``p`` (eq. 4-7); NaN for fewer than two models."""
    q = np.clip(np.asarray(p, dtype=float), epsilon, 1 - epsilon)
    n = len(q)
    if n < 2:
        return float("nan")
    qi, qj = q[:, None], q[None, :]
    kl = qi * np.log(qi / qj) + (1 - qi) * np.log((1 - qi) / (1 - qj))
    dbar = (kl + kl.T) / 2
    iu = np.triu_indices(n, k=1)
    return float(2.0 / (n * (n - 1)) * dbar[iu].sum())


def _correct_as_float(log: pd.DataFrame, correct: str) -> np.ndarray:
    try:
        return log[correct].astype("boolean").fillna(False).to_numpy(dtype=float)
    except (TypeError, ValueError):
        raise InputError(f"discrimination: column {correct!r} must hold true/false correctness values "
                         "(<NA> for invalid answers)") from None


@dataclass(frozen=True, repr=False)
class DiscriminationResult(Result):
    """P_d per cluster and the per-cluster model accuracies it was computed from.

    ``pd``: Series cluster -> P_d (clusters with two or more models); ``accuracy``:
    cluster x model accuracies (NaN where a model has no rows); ``n_correct`` / ``n_rows``:
    the counts behind them; ``n_items``: distinct items per cluster.
    """

    pd: pd.Series
    accuracy: pd.DataFrame
    n_correct: pd.DataFrame
    n_rows: pd.DataFrame
    n_items: pd.Series
    epsilon: float
    cluster: str
    model: str
    skipped: Mapping[str, int] = field(default_factory=dict)
    items: Mapping[str, frozenset] = field(default_factory=dict, repr=False)

    def to_frame(self) -> pd.DataFrame:
        """One row per cluster: P_d, number of models and items, then each model's accuracy."""
        out = pd.DataFrame({"pd": self.pd.reindex(self.accuracy.index),
                            "n_models": self.accuracy.notna().sum(axis=1),
                            "n_items": self.n_items.reindex(self.accuracy.index)})
        out = pd.concat([out, self.accuracy.add_prefix("acc_")], axis=1)
        out.index.name = self.cluster
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"pd": {str(k): float(v) for k, v in self.pd.items()}, "epsilon": self.epsilon,
                "skipped": dict(self.skipped)}

    def summary(self) -> str:
        s = self.pd
        lines = [(f"Discriminatory power P_d (seed 003 eq. 4-7, eps = {self.epsilon:g}) over "
                  f"{len(s)} clusters and {self.accuracy.shape[1]} models")]
        if len(s):
            lines.append(f"  min {s.min():.4g}, median {s.median():.4g}, mean {s.mean():.4g}, max {s.max():.4g}")
        for why, k in self.skipped.items():
            lines.append(f"  {plural(k, 'cluster')} without P_d: {why}")
        return "\n".join(lines)

    def default_cutoffs(self) -> list[float]:
        """0 and the quartiles of P_d (R ``quantile(type = 7)``), to 3 significant digits.

        The seed's cutoffs 0, 5, 10, 15 fit its P_d scale; on data whose P_d peaks at 0.16
        they select nothing, so the default follows the data: each cutoff keeps about
        100 %, 75 %, 50 % and 25 % of the clusters. ``[0]`` when no cluster has a P_d.
        """
        s = self.pd.dropna()
        if s.empty:
            return [0.0]
        qs = np.quantile(s.to_numpy(dtype=float), [0.25, 0.5, 0.75])
        out = [0.0]
        for q in qs:
            v = float(f"{q:.3g}")
            if v > out[-1]:
                out.append(v)
        return out

    def cutoffs(self, cutoffs: Sequence[float] | None = DEFAULT_CUTOFFS, bootstrap: int = 2000,
                seed: int | None = None, level: float = 0.95) -> CutoffTable:
        """Seed Table 5 for the given cutoffs (see :class:`CutoffTable`); ``None``: :meth:`default_cutoffs`."""
        if cutoffs is None:
            cutoffs = self.default_cutoffs()
        return _cutoff_table(self, cutoffs, bootstrap, seed, level)


def discrimination(log: pd.DataFrame, cluster: str = "cluster", model: str = "model",
                   epsilon: float = 1e-10, *, correct: str = "correct", item: str = "item") -> DiscriminationResult:
    """Discriminatory power P_d of every cluster of a canonical log (seed 003, eq. 4-7).

    ``p_k`` is model k's accuracy over all its rows in the cluster (every item and
    trial; <NA> = invalid counts as not correct). See the module docstring for the formula.
    """
    from mrcstats.backends import dataset_pass

    rows = dataset_pass(log)
    if rows is not None:  # larger than memory: the per (cluster, model) counts from its row pass (DuckDB)
        return _discrimination_dataset(rows, cluster, model, epsilon, correct, item)
    from mrcstats.io.schema import require_binary, require_log

    require_binary(log, "discrimination", correct)
    log = require_log(log, "discrimination", (cluster, model, correct), correct=correct)
    if not (0 <= epsilon < 0.5):
        raise InputError(f"discrimination: epsilon must lie in [0, 0.5), got {epsilon}")
    if len(log) == 0:
        raise InputError("discrimination: the log has no rows")
    cl = log[cluster].astype(str)
    md = log[model].astype(str)
    y = _correct_as_float(log, correct)
    frame = pd.DataFrame({"cluster": cl.to_numpy(), "model": md.to_numpy(), "y": y})
    g = frame.groupby(["cluster", "model"], sort=True)["y"]
    n_correct = g.sum().unstack("model")
    n_rows = g.size().unstack("model")
    if item in log.columns:
        items_by = frame.assign(item=log[item].astype(str).to_numpy()).groupby("cluster")["item"]
        n_items = items_by.nunique()
        items = {k: frozenset(v) for k, v in items_by.unique().items()}
    else:
        n_items = frame.groupby("cluster").size() * 0 + 1
        items = {}
    return _from_counts(n_correct, n_rows, n_items, items, epsilon, cluster, model)


def _discrimination_dataset(rows: Any, cluster: str, model: str, epsilon: float, correct: str,
                            item: str) -> DiscriminationResult:
    if not (0 <= epsilon < 0.5):
        raise InputError(f"discrimination: epsilon must lie in [0, 0.5), got {epsilon}")
    has_item = item in rows.columns()
    counts, pairs = rows.cluster_model_counts(cluster, model, correct, item if has_item else None)
    if counts.empty:
        raise InputError("discrimination: the log has no rows")
    n_correct = counts.pivot(index="cluster", columns="model", values="k").sort_index().sort_index(axis=1)
    n_rows = counts.pivot(index="cluster", columns="model", values="n").sort_index().sort_index(axis=1)
    n_correct = n_correct.astype(float)
    n_correct.index.name, n_correct.columns.name = "cluster", "model"
    n_rows.index.name, n_rows.columns.name = "cluster", "model"
    if pairs is not None:
        grp = pairs.groupby("cluster")["item"]
        n_items = grp.nunique()
        items = {k: frozenset(v) for k, v in grp.unique().items()}
    else:
        n_items = pd.Series(1, index=n_rows.index)
        items = {}
    return _from_counts(n_correct, n_rows, n_items, items, epsilon, cluster, model)


def _from_counts(n_correct: pd.DataFrame, n_rows: pd.DataFrame, n_items: Any, items: dict,
                 epsilon: float, cluster: str, model: str) -> DiscriminationResult:
    """Eq. 4-7 from the per (cluster, model) counts (cluster x model tables, NaN = model absent)."""
    acc = n_correct / n_rows
    # eq. 4-7 vectorised over clusters: models absent from a cluster are masked out
    q = np.clip(acc.to_numpy(dtype=float), epsilon, 1 - epsilon)
    present = acc.notna().to_numpy()
    n = present.sum(axis=1)
    m = q.shape[1]
    total = np.zeros(q.shape[0])
    for i in range(m - 1):  # one model against the later ones: memory O(clusters x models)
        qi, qj = q[:, i:i + 1], q[:, i + 1:]
        with np.errstate(invalid="ignore", divide="ignore"):
            kl_ij = qi * np.log(qi / qj) + (1 - qi) * np.log((1 - qi) / (1 - qj))
            kl_ji = qj * np.log(qj / qi) + (1 - qj) * np.log((1 - qj) / (1 - qi))
        mask = present[:, i:i + 1] & present[:, i + 1:]
        total += np.where(mask, (kl_ij + kl_ji) / 2, 0.0).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        pdv = 2.0 * total / (n * (n - 1))
    ok = n >= 2
    pd_series = pd.Series(pdv[ok], index=acc.index[ok], name="pd")
    pd_series.index.name = cluster
    skipped: dict[str, int] = {}
    if (~ok).any():
        skipped["fewer than two models"] = int((~ok).sum())
        print(f"discrimination: {plural(int((~ok).sum()), 'cluster')} have fewer than two models and get no P_d",
              file=sys.stderr)
    return DiscriminationResult(pd_series, acc, n_correct.fillna(0.0), n_rows.fillna(0).astype(float),
                                n_items, float(epsilon), cluster, model, skipped, items)


# --------------------------------------------------------------------------- Table 5

@dataclass(frozen=True, repr=False)
class CutoffTable(Result):
    """Seed Table 5: model accuracies on the clusters with ``P_d > cutoff``.

    Each row of ``rows``: ``cutoff``, ``clusters`` (count), ``items`` (distinct items),
    ``accuracy`` {model: accuracy on the subset's rows}, ``grand_mean`` (mean of those
    accuracies), ``kendall_tau`` (tau-b between the subset and whole-log accuracies of
    the models; null when undefined) and ``accuracy_ci`` {model: [lo, hi]}, the
    percentile interval of ``bootstrap`` cluster resamples (null without bootstrap).
    A cutoff that keeps nothing gives zero counts, an empty accuracy map and null tau.
    """

    rows: tuple[Mapping[str, Any], ...]
    overall: Mapping[str, float]
    bootstrap: int
    seed: int | None
    level: float

    def to_dict(self) -> dict[str, Any]:
        """``{"bootstrap", "seed", "level", "cutoffs": [...]}`` (the seed the intervals were drawn with)."""
        return {"bootstrap": self.bootstrap, "seed": self.seed, "level": self.level,
                "cutoffs": [dict(r) for r in self.rows]}

    def to_frame(self) -> pd.DataFrame:
        """Seed Table 5 layout: models (then grand mean and counts) down, cutoffs across."""
        cols = {}
        models = list(self.overall)
        for r in self.rows:
            col = {m: r["accuracy"].get(m, np.nan) for m in models}
            col["grand_mean"] = r["grand_mean"] if r["grand_mean"] is not None else np.nan
            col["clusters"] = r["clusters"]
            col["items"] = r["items"]
            col["kendall_tau"] = r["kendall_tau"] if r["kendall_tau"] is not None else np.nan
            cols[f"P_d > {r['cutoff']:g}"] = col
        return pd.DataFrame(cols)

    def summary(self) -> str:
        frame = self.to_frame()
        counts = {"clusters", "items"}

        def fmt(row: str, v: float) -> str:
            if pd.isna(v):
                return "NA"
            return f"{int(v)}" if row in counts else f"{v:.3f}"

        text = pd.DataFrame({c: [fmt(r, frame.at[r, c]) for r in frame.index] for c in frame.columns},
                            index=frame.index)
        boot = (f"\n{self.level:.0%} cluster-bootstrap intervals: {self.bootstrap} resamples, seed "
                f"{self.seed if self.seed is not None else 'none (not reproducible)'}"
                if self.bootstrap > 0 else "")
        return "Accuracy on clusters with P_d > cutoff (seed 003 Table 5)\n" + text.to_string() + boot


def _cutoff_table(res: DiscriminationResult, cutoffs: Sequence[float], bootstrap: int,
                  seed: int | None, level: float) -> CutoffTable:
    from scipy.stats import kendalltau

    if bootstrap < 0:
        raise InputError(f"bootstrap must be 0 (no intervals) or a positive number of resamples, got {bootstrap}")
    if not 0 < level < 1:
        raise InputError(f"level must lie strictly between 0 and 1, got {level}")
    models = list(res.accuracy.columns)
    corr, rows_n = res.n_correct[models], res.n_rows[models]
    overall_acc = corr.sum(axis=0) / rows_n.sum(axis=0)
    overall = {str(m): float(v) for m, v in overall_acc.items()}
    rng = seed_rng(seed)
    out = []
    for cut in cutoffs:
        keep = res.pd.index[res.pd.to_numpy() > float(cut)]
        row: dict[str, Any] = {"cutoff": float(cut), "clusters": len(keep)}
        if len(keep) == 0:
            row.update(items=0, accuracy={}, grand_mean=None, kendall_tau=None, accuracy_ci={})
            out.append(row)
            continue
        if res.items:
            row["items"] = len(frozenset().union(*(res.items[k] for k in keep)))
        else:
            row["items"] = len(keep)
        c = corr.loc[keep].to_numpy(dtype=float)
        t = rows_n.loc[keep].to_numpy(dtype=float)
        tot = t.sum(axis=0)
        has = tot > 0
        acc = c.sum(axis=0)[has] / tot[has]
        ms = [str(m) for m, h in zip(models, has) if h]
        row["accuracy"] = dict(zip(ms, (float(a) for a in acc)))
        row["grand_mean"] = float(np.mean(acc))
        tau = None
        if len(ms) >= 2:
            ref = np.array([overall[m] for m in ms])
            tval = kendalltau(acc, ref).statistic
            tau = None if not np.isfinite(tval) else float(tval)
        row["kendall_tau"] = tau
        ci: dict[str, list[float] | None] = {}
        if bootstrap > 0:
            k = len(keep)
            # resample k clusters with replacement, B times: w[b, c] = times cluster c is drawn
            draws = rng.integers(0, k, size=(bootstrap, k)) + (np.arange(bootstrap) * k)[:, None]
            w = np.bincount(draws.ravel(), minlength=bootstrap * k).reshape(bootstrap, k).astype(float)
            with np.errstate(invalid="ignore", divide="ignore"):
                boot = (w @ c[:, has]) / (w @ t[:, has])
            a = (1 - level) / 2
            lo = np.nanquantile(boot, a, axis=0)
            hi = np.nanquantile(boot, 1 - a, axis=0)
            ci = {m: [float(lo_), float(hi_)] for m, lo_, hi_ in zip(ms, lo, hi)}
        else:
            ci = {m: None for m in ms}
        row["accuracy_ci"] = ci
        out.append(row)
    return CutoffTable(tuple(out), overall, int(bootstrap), seed, float(level))


# --------------------------------------------------------------------------- easiest / hardest

@dataclass(frozen=True, repr=False)
class ClusterDifficulty(Result):
    """Clusters ranked by their GLMM conditional mode (higher = easier).

    ``table`` columns: ``level``, ``mode``, ``eta = intercept + mode`` and
    ``probability = 1 / (1 + exp(-eta))``, the implied probability of a correct answer
    for the reference (mean) model with every other covariate at zero; ``easiest`` and
    ``hardest`` are the top and bottom ``n`` rows.
    """

    table: pd.DataFrame
    intercept: float
    n: int
    group: str | None = None

    @property
    def easiest(self) -> pd.DataFrame:
        return self.table.head(self.n)

    @property
    def hardest(self) -> pd.DataFrame:
        """The ``n`` lowest modes, hardest first (ties by level name)."""
        return self.table.sort_values(["mode", "level"], kind="mergesort").head(self.n)

    def groups(self, easy: str = "Easiest", hard: str = "Hardest") -> dict[str, list[str]]:
        """{"Easiest": [levels], "Hardest": [levels]} for :func:`mrcstats.stats.tables.wh_word_table`."""
        return {easy: list(self.easiest["level"]), hard: list(self.hardest["level"])}

    def to_frame(self) -> pd.DataFrame:
        e = self.easiest.assign(kind="easiest")
        h = self.hardest.assign(kind="hardest")
        return pd.concat([e, h], ignore_index=True)

    def to_dict(self) -> dict[str, Any]:
        return {"intercept": self.intercept, "group": self.group,
                "easiest": self.easiest.to_dict(orient="records"),
                "hardest": self.hardest.to_dict(orient="records")}

    def summary(self) -> str:
        e, h = self.easiest.iloc[0], self.hardest.iloc[0]
        return (f"{len(self.table)} clusters ranked by conditional mode (intercept {self.intercept:.4g}); "
                f"easiest {e['level']} (p = {e['probability']:.3f}), hardest {h['level']} "
                f"(p = {h['probability']:.3f})")


def cluster_difficulty(ranef: Any, intercept: float | None = None, *, group: str | None = None,
                       n: int = 100) -> ClusterDifficulty:
    """Easiest and hardest clusters from a fitted GLMM's conditional modes.

    ``ranef``: a :class:`mrcstats.models.GlmerResult` (its ``ranef[group]``, intercept
    ``fixef["(Intercept)"]`` unless given), a ``{group: DataFrame}`` mapping as
    ``GlmerResult.ranef``, a DataFrame indexed by level with a ``mode`` column (or a
    single column), a Series or a ``{level: mode}`` mapping (then ``intercept`` is required).
    Implied probability: ``plogis(intercept + mode)`` (seed 003 Sec. 4: the easiest cluster
    at 0.91, the hardest at 0.36).
    """
    if n < 1:
        raise InputError(f"n must be at least 1, got {n}")
    modes: pd.Series
    if hasattr(ranef, "ranef") and hasattr(ranef, "fixef"):
        if intercept is None:
            if "(Intercept)" not in ranef.fixef.index:
                raise InputError("cluster_difficulty: the model has no (Intercept); pass intercept=")
            intercept = float(ranef.fixef["(Intercept)"])
        ranef = ranef.ranef
    if isinstance(ranef, Mapping) and ranef and all(isinstance(v, (pd.DataFrame, pd.Series))
                                                    for v in ranef.values()):
        if group is None:
            if len(ranef) != 1:
                raise InputError(f"cluster_difficulty: the model has several grouping factors "
                                 f"({', '.join(map(str, ranef))}); pass group=")
            group = str(next(iter(ranef)))
        if group not in ranef:
            raise InputError(f"cluster_difficulty: no random effects for group {group!r}")
        ranef = ranef[group]
    if isinstance(ranef, pd.DataFrame):
        if "mode" in ranef.columns:
            modes = ranef["mode"]
        elif "(Intercept)" in ranef.columns:
            modes = ranef["(Intercept)"]
        elif ranef.shape[1] == 1:
            modes = ranef.iloc[:, 0]
        else:
            raise InputError("cluster_difficulty: the random-effects table needs a 'mode' column")
    elif isinstance(ranef, pd.Series):
        modes = ranef
    elif isinstance(ranef, Mapping):
        modes = pd.Series({str(k): float(v) for k, v in ranef.items()})
    else:
        raise InputError("cluster_difficulty: give a GlmerResult, its ranef mapping, a DataFrame or {level: mode}")
    if intercept is None:
        raise InputError("cluster_difficulty: pass the model's intercept (intercept=...)")
    if len(modes) == 0:
        raise InputError("cluster_difficulty: there are no random-effect levels")
    modes = pd.to_numeric(modes, errors="coerce")
    if modes.isna().any():
        raise InputError(f"cluster_difficulty: {int(modes.isna().sum())} conditional mode(s) are not numbers")
    eta = float(intercept) + modes.to_numpy(dtype=float)
    tab = pd.DataFrame({"level": [str(v) for v in modes.index], "mode": modes.to_numpy(dtype=float),
                        "eta": eta, "probability": plogis(eta)})
    tab = tab.sort_values(["mode", "level"], ascending=[False, True], kind="mergesort").reset_index(drop=True)
    return ClusterDifficulty(tab, float(intercept), int(min(n, len(tab))), group)
