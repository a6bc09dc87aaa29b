"""Small evaluation subsets and their honest, held-out validation.

:func:`subset` picks ``k`` items of a canonical log by one of four rules:

* ``random``: ``k`` items drawn without replacement (seeded);
* ``pd``: the ``k`` items with the highest discriminatory power P_d (seed 003 eq. 4-7 with
  the item as cluster, :func:`mrcstats.stats.discrimination.discrimination`; ties broken at
  random) -- seed 003's closing suggestion of filtering a benchmark by P_d;
* ``irt-info``: greedy maximum IRT information across the models' ability range: with the
  2PL fitted to the models and ``theta_1..M`` their abilities, items are added one at a time
  to maximise ``sum_m log(1 + sum_{i in S} I_i(theta_m))`` (the log posterior precision
  of every model's ability under the N(0, 1) prior), so information is spread over the
  range instead of piling up where most models are;
* ``anchor``: anchor points (Vivek et al. 2024, "Anchor Points: Benchmarking Models with Much
  Fewer Examples", EACL; tinyBenchmarks, Polo et al. 2024, ICML, sec. 3.1): items are
  clustered by their correctness pattern across the models (k-means, k-means++ start,
  identical patterns merged with their counts as weights), each cluster is represented by
  its member nearest the centroid, weighted by the cluster's share of the items.

:func:`subset_eval` validates them by leave-models-out cross-validation: models are split
into ``folds`` (a ``groups`` mapping keeps, e.g., checkpoints of one model together); on the
training models the subset is chosen and the 2PL is fitted; each held-out model's
full-benchmark accuracy (the mean over all items of its share correct) is estimated from
its answers on the subset by

* ``mean``: the subset mean;
* ``weighted``: the anchor-weighted mean ``sum_c w_c y_c`` (anchor only);
* ``irt``: p-IRT (Polo et al. 2024, eq. 4): the observed answers on the subset plus, for the
  other items, ``P_i(theta_hat)`` with ``theta_hat`` the EAP ability from the subset under
  the training fit (items without variation on the training models count with their
  training share correct), averaged over all items.

Reported per method, estimator and ``k``: the mean absolute error over held-out models and
Kendall's tau-b between estimated and true accuracies of the held-out models, each averaged
over the ``folds x seeds`` replicates with a t interval ``mean +- t_{0.975, R-1} sd / sqrt(R)``
(R replicates; folds share training models, so the interval is approximate -- Bengio &
Grandvalet 2004).

Seeding: every random choice draws from its own stream, :func:`mrcstats._seeds.stream`
``(seed, "folds", folds)`` for the split of the models and ``(seed, "select", method, k,
"fold", f)`` for the subset of a fold (``(seed, "select", method, k)`` in :func:`subset`), so
the numbers of one (method, k) never depend on which other methods or ks were asked.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from mrcstats._repr import Result
from mrcstats._seeds import stream
from mrcstats._words import plural
from mrcstats.errors import InputError
from mrcstats.models.irt import IrtFit, ResponseMatrix, fit_irt, response_matrix, score_abilities

__all__ = ["METHODS", "TAU_MIN_MODELS", "SubsetEvalResult", "SubsetResult", "subset", "subset_eval"]

METHODS: tuple[str, ...] = ("random", "pd", "irt-info", "anchor")
#: Kendall's tau of a fold needs at least this many held-out models; with 1 it is undefined and with 2 it
#: can only be -1 or +1 (a coin flip, not a ranking), so such folds give no tau (NaN, counted in
#: ``n_tau`` and the ``caveats``).
TAU_MIN_MODELS: int = 3
ESTIMATORS: tuple[str, ...] = ("mean", "weighted", "irt")


@dataclass(frozen=True, repr=False)
class SubsetResult(Result):
    """``k`` items chosen by ``method``; ``weights`` (anchor only) sum to 1."""

    method: str
    k: int
    items: tuple[str, ...]
    weights: tuple[float, ...] | None
    seed: int | None
    n_items: int
    skipped: Mapping[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    stratify: str | None = None

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame({"item": list(self.items),
                             "weight": list(self.weights) if self.weights is not None else [np.nan] * self.k})

    def to_dict(self) -> dict[str, Any]:
        """The ``mrcstats subset --json`` object."""
        return {"method": self.method, "k": self.k, "items": list(self.items),
                "weights": list(self.weights) if self.weights is not None else None,
                "seed": self.seed, "stratify": self.stratify, "n_items": self.n_items, "skipped": dict(self.skipped), "notes": list(self.notes)}

    def summary(self) -> str:
        head = ", ".join(self.items[:10]) + (" ..." if self.k > 10 else "")
        lines = [f"{self.k} of {self.n_items} items by {self.method}"
                 + (f", stratified by {self.stratify}" if self.stratify else "")
                 + (f" (seed {self.seed})" if self.seed is not None else "") + f": {head}"]
        for why, n in self.skipped.items():
            lines.append(f"  {n} {why}")
        return "\n".join(lines)


# --------------------------------------------------------------------------- selection on a matrix

def _check_method(method: str) -> str:
    m = str(method).lower()
    if m not in METHODS:
        raise InputError(f"subset: method must be one of {', '.join(METHODS)}, got {method!r}")
    return m


def _check_k(k: Any, n_items: int) -> int:
    try:
        kk = int(k)
    except (TypeError, ValueError):
        raise InputError(f"subset: k must be a whole number of items, got {k!r}") from None
    if kk != k or kk < 1:
        raise InputError(f"subset: k must be a positive whole number of items, got {k!r}")
    if kk > n_items:
        raise InputError(f"subset: k = {kk} is larger than the {n_items} usable items (answered by two or more "
                         "models); choose a smaller k")
    return kk


def _shares(rm: ResponseMatrix) -> np.ndarray:
    """Models x items share correct (NaN where a model did not answer)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(rm.n > 0, rm.s / np.where(rm.n > 0, rm.n, 1.0), np.nan)


def _pick_random(n_items: int, k: int, rng: np.random.Generator) -> np.ndarray:
    return np.sort(rng.choice(n_items, size=k, replace=False))


def _pick_top(score: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of the k largest scores (NaN last), ties broken at random."""
    sc = np.where(np.isfinite(score), score, -np.inf)
    tie = rng.random(len(sc))
    order = np.lexsort((tie, -sc))
    return order[:k]


def _argmax_random(v: np.ndarray, rng: np.random.Generator, rtol: float = 1e-9) -> int:
    """Index of the largest value of ``v``, ties (within ``rtol``) broken at random under ``rng``."""
    top = float(np.max(v))
    if not np.isfinite(top):
        return int(np.argmax(v))
    cand = np.flatnonzero(v >= top - rtol * max(1.0, abs(top)))
    return int(cand[0]) if len(cand) == 1 else int(rng.choice(cand))


def _pick_info(fit: IrtFit, fit_index: np.ndarray, n_items: int, k: int, rng: np.random.Generator,
               quota: Mapping[int, int] | None = None, stratum: np.ndarray | None = None) -> np.ndarray:
    """Greedy log-precision design over the fitted models' abilities.

    Items with equal gain (e.g. identical response patterns, hence identical parameters) are
    tied: the tie is broken at random under the seed, not by item order. With ``quota``
    (``{stratum: number of items}``) and ``stratum`` (the stratum of every item of the matrix),
    a stratum stops contributing once its quota is filled.
    """
    theta = fit.abilities["theta"].to_numpy()
    info = fit.information(theta).to_numpy()            # models x fitted items
    total = np.zeros(len(theta))
    chosen: list[int] = []
    avail = np.ones(info.shape[1], bool)
    left = dict(quota) if quota is not None else None
    fit_stratum = stratum[fit_index] if stratum is not None else None
    for _ in range(min(k, info.shape[1])):
        gain = np.log1p((total[:, None] + info) / (1.0 + total[:, None])).sum(axis=0)
        gain[~avail] = -np.inf
        if left is not None and fit_stratum is not None:
            full = [g for g, n in left.items() if n <= 0]
            gain[np.isin(fit_stratum, full)] = -np.inf
        j = _argmax_random(gain, rng)
        if not np.isfinite(gain[j]):
            break
        chosen.append(j)
        avail[j] = False
        total += info[:, j]
        if left is not None and fit_stratum is not None:
            left[int(fit_stratum[j])] -= 1
    out = [int(i) for i in fit_index[chosen]]
    if len(out) < k:  # more items asked than have information: fill at random from the rest (within quotas)
        rest = np.setdiff1d(np.arange(n_items), out)
        if left is not None and stratum is not None:
            for g, n in sorted(left.items()):
                if n > 0:
                    pool = rest[stratum[rest] == g]
                    out.extend(int(i) for i in rng.choice(pool, size=min(n, len(pool)), replace=False))
        else:
            out.extend(int(i) for i in rng.choice(rest, size=k - len(out), replace=False))
    return np.asarray(out)


def _kmeans(x: np.ndarray, w: np.ndarray, k: int, rng: np.random.Generator, iters: int = 100) -> np.ndarray:
    """Weighted k-means (k-means++ start, Lloyd iterations); returns the label of each row."""
    m = len(x)
    xx = (x * x).sum(1)
    first = rng.choice(m, p=w / w.sum())
    cent = [x[first]]
    d2 = ((x - x[first]) ** 2).sum(1)
    for _ in range(1, k):
        pr = w * d2
        tot = pr.sum()
        j = rng.choice(m, p=pr / tot) if tot > 0 else rng.choice(m)
        cent.append(x[j])
        d2 = np.minimum(d2, ((x - x[j]) ** 2).sum(1))
    c = np.asarray(cent)
    labels = np.full(m, -1)
    for _ in range(iters):
        dist = xx[:, None] - 2.0 * x @ c.T + (c * c).sum(1)[None, :]
        new = np.argmin(dist, axis=1)
        if np.array_equal(new, labels):
            break
        labels = new
        for j in range(k):
            sel = labels == j
            if sel.any():
                c[j] = np.average(x[sel], axis=0, weights=w[sel])
            else:  # empty cluster: restart it at the worst-fitted point
                far = int(np.argmax(dist[np.arange(m), labels] * w))
                c[j] = x[far]
    return labels


def _pick_anchor(y: np.ndarray, k: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Anchor items and weights from the models x items share-correct matrix ``y``."""
    n_items = y.shape[1]
    col_mean = np.nanmean(y, axis=0)
    filled = np.where(np.isnan(y), col_mean[None, :], y).T                 # items x models
    patterns, inverse, counts = np.unique(filled, axis=0, return_inverse=True, return_counts=True)
    inverse = inverse.ravel()
    members = [np.flatnonzero(inverse == u) for u in range(len(patterns))]
    if len(patterns) <= k:
        # every distinct pattern is a cluster; the largest get extra anchors
        n_anchor = np.ones(len(patterns), int)
        for _ in range(k - len(patterns)):
            room = counts - n_anchor
            n_anchor[int(np.argmax(np.where(room > 0, counts / n_anchor, -1)))] += 1
        idx, wts = [], []
        for u, mem in enumerate(members):
            pick = rng.choice(mem, size=n_anchor[u], replace=False)
            idx.extend(pick)
            wts.extend([counts[u] / n_anchor[u] / n_items] * n_anchor[u])
        return np.asarray(idx), np.asarray(wts)
    labels = _kmeans(patterns, counts.astype(float), k, rng)
    idx, wts = [], []
    for j in range(k):
        sel = np.flatnonzero(labels == j)
        if len(sel) == 0:
            continue
        cen = np.average(patterns[sel], axis=0, weights=counts[sel])
        near = sel[np.argmin(((patterns[sel] - cen) ** 2).sum(1))]
        idx.append(rng.choice(members[near]))
        wts.append(counts[sel].sum() / n_items)
    idx_a, w_a = np.asarray(idx), np.asarray(wts)
    if len(idx_a) < k:  # empty clusters: top up with random items of weight 0
        rest = np.setdiff1d(np.arange(n_items), idx_a)
        extra = rng.choice(rest, size=k - len(idx_a), replace=False)
        idx_a = np.concatenate([idx_a, extra])
        w_a = np.concatenate([w_a, np.zeros(len(extra))])
    return idx_a, w_a


def _pd_items(log: pd.DataFrame, items: Sequence[str], models: Sequence[str], cols: Mapping[str, str]) -> np.ndarray:
    """Per-item P_d on the given models (seed 003, via :func:`discrimination` with cluster = item)."""
    import contextlib
    import io

    from mrcstats.stats.discrimination import discrimination

    sub = log[log[cols["model"]].astype(str).isin(set(models))]
    with contextlib.redirect_stderr(io.StringIO()):
        res = discrimination(sub, cluster=cols["item"], model=cols["model"], correct=cols["correct"],
                             item=cols["item"])
    return res.pd.reindex(list(items)).to_numpy(dtype=float)


def _quotas(stratum: np.ndarray, k: int) -> dict[int, int]:
    """Items per stratum, proportional to the stratum's size (largest remainder; ties in the remainder go
    to the larger, then the earlier stratum)."""
    sizes = np.bincount(stratum)
    exact = k * sizes / sizes.sum()
    q = np.floor(exact).astype(int)
    order = np.lexsort((np.arange(len(sizes)), -sizes, -(exact - q)))
    for g in order[: k - int(q.sum())]:
        q[g] += 1
    return {int(g): int(n) for g, n in enumerate(q)}


def _select(method: str, rm: ResponseMatrix, k: int, rng: np.random.Generator, *, log: pd.DataFrame,
            cols: Mapping[str, str], fit: IrtFit | None,
            cache: dict[str, Any] | None = None,
            stratum: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """Indices (and anchor weights) of the ``k`` items; with ``stratum`` (an integer code per item) each
    stratum gets its proportional quota (:func:`_quotas`) and the method runs within it (``irt-info``:
    one greedy design over all items, a stratum closed once its quota is filled)."""
    n_items = len(rm.items)
    cache = {} if cache is None else cache
    quota = _quotas(stratum, k) if stratum is not None else None
    if method == "irt-info":
        if fit is None:
            fit = fit_irt(rm, "2pl", tol=1e-5)
        pos = {it: i for i, it in enumerate(rm.items)}
        fit_index = np.array([pos[i] for i in fit.items["item"]])
        return _pick_info(fit, fit_index, n_items, k, rng, quota, stratum), None
    if method == "pd" and "pd" not in cache:  # the same for every k of a fold
        cache["pd"] = _pd_items(log, rm.items, rm.models, cols)
    if quota is None or stratum is None:
        return _select_plain(method, rm, np.arange(n_items), k, rng, cache)
    idx_all: list[np.ndarray] = []
    w_all: list[np.ndarray] = []
    for g, n in sorted(quota.items()):
        if n <= 0:
            continue
        members = np.flatnonzero(stratum == g)
        idx, w = _select_plain(method, rm, members, n, rng, cache)
        idx_all.append(idx)
        if w is not None:
            w_all.append(w * len(members) / n_items)
    idx = np.concatenate(idx_all)
    return idx, (np.concatenate(w_all) if method == "anchor" else None)


def _select_plain(method: str, rm: ResponseMatrix, members: np.ndarray, k: int, rng: np.random.Generator,
                  cache: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray | None]:
    """``random``, ``pd`` or ``anchor`` among the items ``members`` (indices into the matrix)."""
    if method == "random":
        return members[_pick_random(len(members), k, rng)], None
    if method == "pd":
        return members[_pick_top(cache["pd"][members], k, rng)], None
    idx, w = _pick_anchor(_shares(rm)[:, members], k, rng)
    return members[idx], w


def _strata(log: pd.DataFrame, rm: ResponseMatrix, item_col: str, col: str | None,
            where: str) -> np.ndarray | None:
    """Integer stratum code of every item of ``rm`` from the log column ``col`` (constant per item)."""
    if col is None:
        return None
    if col not in log.columns:
        raise InputError(f"{where}: stratify column {col!r} is not in the log (columns: {', '.join(map(str, log.columns))})")
    g = log[[item_col, col]].astype({item_col: str}).drop_duplicates()
    dup = g[item_col].duplicated(keep=False)
    if dup.any():
        it = g.loc[dup, item_col].iloc[0]
        raise InputError(f"{where}: item {it!r} has several values of {col!r}; the stratify column must be constant "
                         "per item (a subject, passage or cluster)")
    lab = dict(zip(g[item_col], g[col].astype(str)))
    names = sorted({lab[i] for i in rm.items})
    code = {n: c for c, n in enumerate(names)}
    return np.array([code[lab[i]] for i in rm.items])


def subset(log: pd.DataFrame, k: int, method: str = "random", seed: int | None = None, *,
           stratify: str | None = None,
           model_col: str = "model", item_col: str = "item", correct_col: str = "correct") -> SubsetResult:
    """Choose ``k`` items of a canonical log (see the module docstring for the methods).

    ``stratify``: a log column constant per item (subject, passage, cluster); each of its values gets
    ``k`` times its share of the items (largest remainder) and the method picks within it.
    """
    m = _check_method(method)
    rm = response_matrix(log, model=model_col, item=item_col, correct=correct_col, where="subset")
    kk = _check_k(k, len(rm.items))
    rng = stream(seed, "select", m, kk)
    cols = {"model": model_col, "item": item_col, "correct": correct_col}
    strat = _strata(log, rm, item_col, stratify, "subset")
    idx, w = _select(m, rm, kk, rng, log=log, cols=cols, fit=None, stratum=strat)
    items = tuple(rm.items[i] for i in idx)
    weights = tuple(float(v) for v in w) if w is not None else None
    skipped = {k_: v for k_, v in rm.skipped.items() if "left out" in k_}
    return SubsetResult(m, kk, items, weights, seed, len(rm.items), skipped, rm.notes, stratify)


# --------------------------------------------------------------------------- validation

@dataclass(frozen=True, repr=False)
class SubsetEvalResult(Result):
    """Held-out MAE and Kendall tau by method, estimator and k (see the module docstring).

    ``results``: one row per (method, estimator, k) with ``mae, mae_ci_low, mae_ci_high,
    tau, tau_ci_low, tau_ci_high, n_replicates, n_tau, caveat`` (mean and 95% t interval over the replicates, clipped to
    MAE >= 0 and tau in [-1, 1]); ``replicates``: one row per (seed, fold,
    method, estimator, k) with that replicate's ``mae`` and ``tau``; ``predictions``: every
    held-out estimate with the true accuracy.
    """

    folds: int
    seeds: tuple[int, ...]
    ks: tuple[int, ...]
    methods: tuple[str, ...]
    results: pd.DataFrame
    replicates: pd.DataFrame
    predictions: pd.DataFrame
    n_models: int
    n_items: int
    skipped: Mapping[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    caveats: tuple[str, ...] = ()

    def to_frame(self) -> pd.DataFrame:
        return self.results.copy()

    def to_dict(self) -> dict[str, Any]:
        """The ``mrcstats subset-eval --json`` object."""
        cols = ["method", "estimator", "k", "mae", "mae_ci_low", "mae_ci_high", "tau", "tau_ci_low", "tau_ci_high"]
        return {"folds": self.folds, "seeds": list(self.seeds), "n_models": self.n_models, "n_items": self.n_items,
                "results": self.results[cols + ["n_replicates", "n_tau", "caveat"]].to_dict(orient="records"),
                "skipped": dict(self.skipped), "notes": list(self.notes), "caveats": list(self.caveats)}

    def table(self, metric: str = "mae") -> pd.DataFrame:
        """``metric`` by (method, estimator) down and k across."""
        return self.results.pivot_table(index=["method", "estimator"], columns="k", values=metric)

    def summary(self) -> str:
        lines = [(f"Leave-models-out validation: {self.n_models} models, {self.n_items} items, {self.folds} folds x "
                 f"{plural(len(self.seeds), 'seed')}"),
                 "Mean absolute error of the full-benchmark accuracy (held-out models):",
                 self.table("mae").round(4).to_string(),
                 "Kendall tau of the held-out ranking:",
                 self.table("tau").round(3).to_string()]
        lines.extend(f"  note: {n}" for n in self.notes)
        lines.extend(f"  caveat: {c}" for c in self.caveats)
        return "\n".join(lines)


def _fold_ids(models: Sequence[str], folds: int, groups: Mapping[str, str] | None,
              rng: np.random.Generator) -> np.ndarray:
    keys = [str(groups.get(m, m)) if groups is not None else m for m in models]
    uniq = sorted(set(keys))
    perm = rng.permutation(len(uniq))
    fold_of = {u: int(i % folds) for u, i in zip(uniq, np.argsort(perm))}
    return np.array([fold_of[k_] for k_ in keys])


def _t_ci(v: np.ndarray, lo: float = -math.inf, hi: float = math.inf) -> tuple[float, float, float]:
    """Mean and t interval (R ``t.test(v)$conf.int``) over the replicates, the interval clipped to the
    statistic's range [lo, hi] (MAE >= 0, Kendall tau in [-1, 1])."""
    v = v[np.isfinite(v)]
    if len(v) == 0:
        return (math.nan, math.nan, math.nan)
    m = float(v.mean())
    if len(v) < 2:
        return (m, math.nan, math.nan)
    from scipy.stats import t

    h = float(t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v)))
    return (m, max(lo, m - h), min(hi, m + h))


def subset_eval(log: pd.DataFrame, ks: Sequence[int] = (25, 50, 100, 200, 400),
                methods: Sequence[str] = METHODS, folds: int = 5, seeds: int | Sequence[int] = 3, *,
                groups: Mapping[str, str] | str | None = None, stratify: str | None = None, progress: bool | None = None,
                irt_tol: float = 1e-4, irt_max_iter: int = 60, quadrature: int = 7,
                model_col: str = "model", item_col: str = "item", correct_col: str = "correct") -> SubsetEvalResult:
    """Leave-models-out cross-validation of the subset methods (see the module docstring).

    ``seeds``: a number of seeds (0, 1, ...) or the seeds themselves; each seed reshuffles the
    folds and redraws every random choice. ``groups``: ``{model: group}`` or a column of the
    log; models of one group are always held out together. ``stratify``: as in :func:`subset`. The 2PL of each training fold is
    fitted to ``irt_tol`` (largest parameter change) within ``irt_max_iter`` iterations with
    ``quadrature`` adaptive nodes: the estimates only feed predictions, so a loose fit suffices
    (folds that stop at the iteration limit are counted in ``notes``).
    """
    ms = tuple(_check_method(m) for m in methods)
    if not ms:
        raise InputError("subset-eval: give at least one method")
    rm = response_matrix(log, model=model_col, item=item_col, correct=correct_col, where="subset-eval")
    n_items = len(rm.items)
    kk = tuple(sorted({_check_k(k, n_items) for k in ks}))
    if not kk:
        raise InputError("subset-eval: give at least one k")
    seed_list = tuple(range(int(seeds))) if isinstance(seeds, (int, np.integer)) else tuple(int(s) for s in seeds)
    if not seed_list:
        raise InputError("subset-eval: give at least one seed")
    grp: Mapping[str, str] | None = None
    if isinstance(groups, str):
        from mrcstats.io.schema import check_grouping

        check_grouping(groups, log.columns)
        g = log[[model_col, groups]].drop_duplicates()
        if g[model_col].duplicated().any():
            raise InputError(f"subset-eval: a model has several values of {groups!r}; groups must be constant per model")
        grp = dict(zip(g[model_col].astype(str), g[groups].astype(str)))
    elif groups is not None:
        grp = {str(k_): str(v) for k_, v in groups.items()}
    n_units = len({(grp or {}).get(m, m) for m in rm.models})
    if not isinstance(folds, (int, np.integer)) or folds < 2:
        raise InputError(f"subset-eval: folds must be a whole number >= 2, got {folds!r}")
    if folds > n_units:
        raise InputError(f"subset-eval: {folds} folds but only {n_units} models (or model groups) to hold out")
    if len(rm.models) - math.ceil(len(rm.models) / folds) < 3:
        raise InputError(f"subset-eval: with {len(rm.models)} models and {folds} folds fewer than 3 models remain "
                         "for training; use fewer folds or more models")
    cols = {"model": model_col, "item": item_col, "correct": correct_col}
    strat = _strata(log, rm, item_col, stratify, "subset-eval")
    y = _shares(rm)
    truth = np.nanmean(y, axis=1)
    pred_rows: list[dict[str, Any]] = []
    rep_rows: list[dict[str, Any]] = []
    from mrcstats._progress import progress as _bar

    total = len(seed_list) * folds
    bar = _bar(total=total, desc="subset-eval", disable=progress if progress is None else not progress, unit="fold")
    notes: list[str] = list(rm.notes)
    unconverged = 0
    try:
        for seed in seed_list:
            fid = _fold_ids(rm.models, folds, grp, stream(seed, "folds", folds))
            for f in range(folds):
                test = np.flatnonzero(fid == f)
                train = np.flatnonzero(fid != f)
                tr = rm.subset_models(train)
                fit = fit_irt(tr, "2pl", tol=irt_tol, max_iter=irt_max_iter, quadrature=quadrature, quiet=True)
                unconverged += 0 if fit.converged else 1
                pos = {it: i for i, it in enumerate(rm.items)}
                fit_index = np.array([pos[i] for i in fit.items["item"]])
                # training share correct of every item (items without variation keep it as their prediction)
                with np.errstate(invalid="ignore"):
                    p_train = tr.s.sum(0) / tr.n.sum(0)
                cache: dict[str, Any] = {}
                for method in ms:
                    for k in kk:
                        rng = stream(seed, "select", method, k, "fold", f)
                        idx, w = _select(method, tr, k, rng, log=log, cols=cols, fit=fit, cache=cache,
                                       stratum=strat)
                        est = _estimate(method, idx, w, y[test], rm.s[test], rm.n[test], fit, fit_index, p_train)
                        for name, vals in est.items():
                            for j, v in zip(test, vals):
                                pred_rows.append({"seed": seed, "fold": f, "method": method, "estimator": name, "k": k,
                                                  "model": rm.models[j], "estimate": v, "truth": truth[j]})
                            err = np.abs(vals - truth[test])
                            tau = _kendall(vals, truth[test]) if len(test) >= TAU_MIN_MODELS else math.nan
                            rep_rows.append({"seed": seed, "fold": f, "method": method, "estimator": name, "k": k,
                                             "mae": float(np.nanmean(err)), "tau": tau, "n_test": len(test)})
                bar.update(1)
    finally:
        bar.close()
    reps = pd.DataFrame(rep_rows)
    out = []
    for (method, name, k), g in reps.groupby(["method", "estimator", "k"], sort=False):
        mae = _t_ci(g["mae"].to_numpy(dtype=float), lo=0.0)
        tv = g["tau"].to_numpy(dtype=float)
        tau = _t_ci(tv, lo=-1.0, hi=1.0)
        n_tau = int(np.isfinite(tv).sum())
        short = int((g["n_test"] < TAU_MIN_MODELS).sum())
        cav = (f"tau from {n_tau} of {len(g)} replicates: {short} held out fewer than {TAU_MIN_MODELS} models"
               if short else None)
        out.append({"method": method, "estimator": name, "k": int(k), "mae": mae[0], "mae_ci_low": mae[1],
                    "mae_ci_high": mae[2], "tau": tau[0], "tau_ci_low": tau[1], "tau_ci_high": tau[2],
                    "n_replicates": len(g), "n_tau": n_tau, "caveat": cav})
    res = pd.DataFrame(out)
    if unconverged:
        notes.append(f"{unconverged} of {total} training-fold 2PL fits stopped at {irt_max_iter} iterations before "
                     f"reaching tol {irt_tol:g}")
    caveats: list[str] = []
    short = reps.drop_duplicates(["seed", "fold"])
    n_short = int((short["n_test"] < TAU_MIN_MODELS).sum())
    if n_short:
        caveats.append(f"Kendall tau not computed in {n_short} of {len(short)} folds: they hold out fewer than "
                       f"{TAU_MIN_MODELS} models; use fewer folds or more "
                       "models" + ("; no tau at all" if n_short == len(short) else ""))
    return SubsetEvalResult(folds, seed_list, kk, ms, res, reps, pd.DataFrame(pred_rows), len(rm.models), n_items,
                            {k_: v for k_, v in rm.skipped.items() if "left out" in k_}, tuple(notes),
                            tuple(caveats))


def _kendall(x: np.ndarray, y: np.ndarray) -> float:
    from scipy.stats import kendalltau

    ok = np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 2:
        return math.nan
    t = kendalltau(x[ok], y[ok]).statistic
    return float(t) if np.isfinite(t) else math.nan


def _estimate(method: str, idx: np.ndarray, w: np.ndarray | None, y_test: np.ndarray, s_test: np.ndarray,
              n_test: np.ndarray, fit: IrtFit, fit_index: np.ndarray, p_train: np.ndarray) -> dict[str, np.ndarray]:
    """Full-benchmark accuracy estimates of the held-out models from their answers on ``idx``."""
    ys = y_test[:, idx]
    out: dict[str, np.ndarray] = {}
    with np.errstate(invalid="ignore", divide="ignore"):
        out["mean"] = np.nanmean(ys, axis=1) if ys.size else np.full(len(y_test), np.nan)
        if w is not None:
            ww = np.where(np.isnan(ys), 0.0, w[None, :])
            out["weighted"] = np.nansum(ys * w[None, :], axis=1) / ww.sum(axis=1)
    # p-IRT: abilities from the subset's fitted items, predictions for every other item
    in_fit = np.full(y_test.shape[1], -1)
    in_fit[fit_index] = np.arange(len(fit_index))
    sub_fit = in_fit[idx]
    use = sub_fit >= 0
    theta, _ = score_abilities(fit, s_test[:, idx[use]], n_test[:, idx[use]], items=sub_fit[use])
    prob = np.tile(p_train, (len(y_test), 1))
    prob[:, fit_index] = fit.prob(theta)
    filled = prob.copy()
    obs = ys.copy()
    has = ~np.isnan(obs)
    cols = np.broadcast_to(idx, obs.shape)
    rows = np.broadcast_to(np.arange(len(y_test))[:, None], obs.shape)
    filled[rows[has], cols[has]] = obs[has]
    answered = ~np.isnan(y_test)
    with np.errstate(invalid="ignore", divide="ignore"):
        out["irt"] = np.where(answered, filled, 0.0).sum(1) / answered.sum(1)
    return out
