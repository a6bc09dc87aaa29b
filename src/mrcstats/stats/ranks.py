"""Confidence sets for the ranks of models, tie groups and the top-k set (Mogstad, Romano, Shaikh & Wilhelm 2024).

Reference: M. Mogstad, J. P. Romano, A. M. Shaikh and D. Wilhelm (2024), "Inference for Ranks with
Applications to Mobility across Neighbourhoods and Academic Achievement across Countries", Review of
Economic Studies 91(1), 476-518, doi:10.1093/restud/rdad006; the procedure of R's ``csranks::csranks``
(two-sided, ``stepdown = TRUE``, parametric bootstrap), read from its source and written here anew.

**Notation.** ``θ̂_1..θ̂_p`` are the models' accuracies (mean per-item scores), ``Σ̂`` the estimated covariance
of ``θ̂``, ``σ̂_jk = sqrt(Σ̂_jj + Σ̂_kk - 2 Σ̂_jk)`` the SE of ``θ̂_j - θ̂_k``. The rank of ``j`` is
``r_j = 1 + #{k : θ_k > θ_j}`` (1 = best; ties share the smaller rank, csranks' ``irank``).

**Max-t stepdown** (MRSW §3, Algorithm 3.1). For a set ``I`` of ordered pairs ``(j, k)``, ``c(I)`` is the
``1-α`` quantile of ``max_{(j,k)∈I} (Z_j - Z_k) / σ̂_jk`` over ``R`` draws ``Z ~ N(0, Σ̂)`` (the parametric
bootstrap; quantile as R's ``quantile`` type 7). Start with ``I_0``; at each step reject every ``(j, k) ∈ I``
with ``θ̂_j - θ̂_k - σ̂_jk c(I) > 0`` ("``j`` is better than ``k``"), drop them from ``I`` and repeat until a
step rejects nothing or nothing is left. Then::

    N⁻_j = #{k : (k, j) rejected}     (models shown better than j)
    N⁺_j = #{k : (j, k) rejected}     (models j is shown better than)
    rank set of j = [1 + N⁻_j, p - N⁺_j]

*Simultaneous* sets (all ``p`` ranks covered jointly with probability ``≥ 1-α``): ``I_0`` = all ordered pairs.
*Marginal* set of ``j`` (its own rank covered with probability ``≥ 1-α``): ``I_0`` = the ``2(p-1)`` pairs
that involve ``j``. One matrix of ``R`` draws serves every quantile (csranks draws afresh at each step and
resets the seed for each marginal set; the draws have the same distribution).

**Top-k set** (MRSW §4, the "τ-best"): ``{j : 1 + N⁻_j ≤ k}`` from the simultaneous procedure; it holds
every model truly among the best ``k`` with probability ``≥ 1-α`` (with ``stepdown`` the one-sided
procedure of ``csranks::cstaubest`` rejects exactly the pairs above). The **top set** is the top-1 set: the
models whose simultaneous rank set includes 1, i.e. that no model is shown better than.
**Tiers** layer the board by the simultaneous rejections: tier 1 is the top set; tier ``t+1`` the models no
model outside tiers ``1..t`` is shown better than (the longest chain of "shown better" above a model, + 1).

**Where Σ̂ comes from** (``method``):

* ``"paired"`` (default): the models answered the same items, so their errors are correlated and
  ``Var(θ̂_j - θ̂_k)`` is the paired variance of :func:`mrcstats.stats.compare.compare` (``se`` of the
  per-item differences, or ``se_cluster`` with ``cluster``: Miller 2024 Eq. 8 and 4) with each model's own
  ``se_j`` (the same estimator): ``Σ̂_jj = se_j²``, ``Σ̂_jk = (se_j² + se_k² - se_jk²) / 2``. Without clusters
  and with every item shared this is ``cov(s_j, s_k) / n``, the sample covariance of the per-item scores over
  ``n`` (csranks' own example); with ``cluster`` the CR1 sandwich of the vector of means. When the models
  answered different items the pieces come from different item sets and ``Σ̂`` may not be positive
  semi-definite: it is then made so (negative eigenvalues set to 0) and a note says so.
* ``"independent"``: ``Σ̂ = diag(se_j²)`` from each model's own SE (as ranking from published intervals
  does); it ignores the shared items and gives wider sets when the models' errors are positively
  correlated.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from mrcstats._repr import Result
from mrcstats._words import plural
from mrcstats.errors import InputError

__all__ = ["METHODS", "RANK_FIELDS", "RankSets", "RanksResult", "rank_sets", "ranks"]

#: ``method`` choices: where the covariance of the accuracies comes from (module docstring)
METHODS: tuple[str, ...] = ("paired", "independent")
#: the per-model fields of ``ranks(...).to_dict()["models"]`` (the JSON contract)
RANK_FIELDS: tuple[str, ...] = ("model", "estimate", "rank", "marginal", "simultaneous", "tier")


# --------------------------------------------------------------------------- the procedure on (θ̂, Σ̂)

@dataclass(frozen=True, repr=False)
class RankSets(Result):
    """Rank confidence sets of ``p`` estimates (:func:`rank_sets`); arrays in the order of the input.

    ``rank``: point ranks (1 = largest); ``marginal``/``simultaneous``: ``p x 2`` integer arrays ``[lo, hi]``;
    ``better``: ``p x p`` booleans, ``better[k, j]`` = the simultaneous procedure shows ``k`` better than ``j``;
    ``tier``: the layer of each estimate (module docstring); ``sd_diff``: ``σ̂_jk``; ``quantiles``: the
    critical values ``c(I)`` of the simultaneous stepdown, step by step.
    """

    estimates: np.ndarray
    rank: np.ndarray
    marginal: np.ndarray
    simultaneous: np.ndarray
    better: np.ndarray
    tier: np.ndarray
    sd_diff: np.ndarray
    level: float = 0.95
    draws: int = 1000
    quantiles: tuple[float, ...] = ()

    def top_k(self, k: int = 1) -> np.ndarray:
        """Indices of the top-``k`` set: every estimate whose simultaneous lower rank bound is ``≤ k``."""
        _check_k(k, len(self.estimates))
        return np.flatnonzero(self.simultaneous[:, 0] <= k)

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame({"estimate": self.estimates, "rank": self.rank,
                             "marginal_lo": self.marginal[:, 0], "marginal_hi": self.marginal[:, 1],
                             "simultaneous_lo": self.simultaneous[:, 0], "simultaneous_hi": self.simultaneous[:, 1],
                             "tier": self.tier})

    def summary(self) -> str:
        return self.to_frame().to_string(index=False)


def point_ranks(x: np.ndarray) -> np.ndarray:
    """``r_j = 1 + #{k : x_k > x_j}`` (1 = largest; ties share the smaller rank, csranks' ``irank``)."""
    x = np.asarray(x, dtype=float)
    return 1 + (x[None, :] > x[:, None]).sum(axis=1)


def _check_k(k: int, p: int) -> None:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= p:
        raise InputError(f"k of the top-k set (--top K) must be a whole number from 1 to the number of models ({p}), "
                         f"got {k!r}")


def _max_t(Z: np.ndarray, sd: np.ndarray, jj: np.ndarray, kk: np.ndarray) -> np.ndarray:
    """``max_{(j,k)} (Z_j - Z_k) / σ̂_jk`` for each draw (row of ``Z``); pairs with ``σ̂_jk = 0`` left out."""
    keep = sd[jj, kk] > 0
    jj, kk = jj[keep], kk[keep]
    out = np.full(len(Z), -np.inf)
    step = max(1, 4_000_000 // max(len(Z), 1))     # pairs per block: a few tens of MB at most
    for lo in range(0, len(jj), step):
        j, k = jj[lo:lo + step], kk[lo:lo + step]
        np.maximum(out, ((Z[:, j] - Z[:, k]) / sd[j, k]).max(axis=1), out=out)
    return out


def _stepdown(diff: np.ndarray, sd: np.ndarray, Z: np.ndarray, I0: np.ndarray,
              level: float) -> tuple[np.ndarray, list[float]]:
    """The max-t stepdown on the ordered pairs ``I0`` (module docstring): the rejected pairs and the ``c(I)``."""
    active = I0.copy()
    rejected = np.zeros_like(I0)
    qs: list[float] = []
    while active.any():
        jj, kk = np.nonzero(active)
        stat = _max_t(Z, sd, jj, kk)
        c = float(np.quantile(stat, level))
        qs.append(c)
        width = np.where(sd[jj, kk] > 0, sd[jj, kk] * c, 0.0)
        rej = diff[jj, kk] - width > 0
        if not rej.any():
            break
        rejected[jj[rej], kk[rej]] = True
        active[jj[rej], kk[rej]] = False
    return rejected, qs


def rank_sets(estimates: Sequence[float] | np.ndarray, cov: np.ndarray, *, level: float = 0.95, draws: int = 1000,
              seed: int | None = None, sims: np.ndarray | None = None) -> RankSets:
    """Marginal and simultaneous confidence sets for the ranks of ``estimates`` (R's ``csranks(x, Sigma)``).

    Args:
        estimates: ``θ̂`` (larger = better; rank 1 is the largest).
        cov: ``Σ̂``, the estimated covariance of ``θ̂`` (``p x p``, symmetric positive semi-definite).
        level: the coverage ``1-α`` of every set.
        draws: ``R``, the parametric bootstrap draws ``Z ~ N(0, Σ̂)``.
        seed: their seed (:func:`mrcstats._seeds.stream`, label ``"rank-sets"``); None = fresh entropy.
        sims: an ``R x p`` matrix of draws of ``θ̂ - θ`` to use instead of drawing (tests, other bootstraps).

    Returns:
        :class:`RankSets`. The procedure: the module docstring (MRSW 2024, Algorithm 3.1 and §4).
    """
    from mrcstats._seeds import stream

    x = np.asarray(estimates, dtype=float)
    p = len(x)
    _check_level(level)
    if x.ndim != 1 or p < 2:
        raise InputError(f"rank sets need at least two estimates, got {p}")
    if not np.isfinite(x).all():
        raise InputError(f"estimate {int(np.flatnonzero(~np.isfinite(x))[0]) + 1} is not a finite number")
    S = np.asarray(cov, dtype=float)
    if S.shape != (p, p) or not np.isfinite(S).all():
        raise InputError(f"the covariance must be a finite {p} x {p} matrix, got shape {S.shape}")
    if not np.allclose(S, S.T, rtol=1e-8, atol=1e-14):
        raise InputError("the covariance matrix must be symmetric")
    var_d = np.add.outer(np.diag(S), np.diag(S)) - 2 * S
    if (var_d < -1e-12 * max(1.0, float(np.abs(S).max()))).any():
        raise InputError("the covariance matrix gives a negative variance of a difference; it must be positive "
                         "semi-definite")
    sd = np.sqrt(np.clip(var_d, 0.0, None))
    if sims is None:
        if isinstance(draws, bool) or not isinstance(draws, (int, np.integer)) or draws < 100:
            raise InputError(f"draws (bootstrap draws) must be a whole number >= 100, got {draws!r}")
        w, U = np.linalg.eigh((S + S.T) / 2)
        A = U * np.sqrt(np.clip(w, 0.0, None))
        Z = stream(seed, "rank-sets").standard_normal((int(draws), p)) @ A.T
    else:
        Z = np.asarray(sims, dtype=float)
        if Z.ndim != 2 or Z.shape[1] != p or len(Z) < 1:
            raise InputError(f"sims must be an R x {p} matrix of draws, got shape {Z.shape}")
    diff = x[:, None] - x[None, :]
    off = ~np.eye(p, dtype=bool)
    better, qs = _stepdown(diff, sd, Z, off, level)
    simul = np.column_stack([1 + better.sum(axis=0), p - better.sum(axis=1)])
    marg = np.empty((p, 2), dtype=np.int64)
    for j in range(p):
        I0 = np.zeros((p, p), dtype=bool)
        I0[j, :] = I0[:, j] = True
        I0 &= off
        rej, _ = _stepdown(diff, sd, Z, I0, level)
        marg[j] = (1 + rej[:, j].sum(), p - rej[j, :].sum())
    return RankSets(estimates=x, rank=point_ranks(x), marginal=marg, simultaneous=simul.astype(np.int64),
                    better=better, tier=_tiers(better), sd_diff=sd, level=float(level), draws=len(Z),
                    quantiles=tuple(qs))


def _tiers(better: np.ndarray) -> np.ndarray:
    """Layer of each model: 1 + the longest chain of "shown better" above it (``better[k, j]``: k above j)."""
    p = len(better)
    tier = np.zeros(p, dtype=np.int64)
    left = np.ones(p, dtype=bool)
    t = 0
    while left.any():
        t += 1
        top = left & ~better[left].any(axis=0)
        tier[top] = t
        left &= ~top
    return tier


def _check_level(level: float) -> None:
    if isinstance(level, bool) or not isinstance(level, (int, float, np.floating)) or not 0 < float(level) < 1:
        raise InputError(f"level must be between 0 and 1 (e.g. 0.95), got {level!r}")


# --------------------------------------------------------------------------- from a log

@dataclass(frozen=True, repr=False)
class RanksResult(Result):
    """Rank confidence sets of the models of a log (:func:`ranks`; every formula in the module docstring).

    ``models``: one row per model, best point estimate first: ``model, estimate, se, rank, marginal_lo,
    marginal_hi, simultaneous_lo, simultaneous_hi, tier`` with the sets of ``method``, then the same sets
    with the other method (``<other>_marginal_lo`` ...), for comparison. ``top_set``: the models whose
    simultaneous rank set includes 1. ``covariance``: the ``Σ̂`` of ``method`` (models x models, in the order
    of ``models``; module docstring); ``rank_sets(models.estimate, covariance)`` gives the sets again for the same seed.
    """

    models: pd.DataFrame = field(repr=False)
    covariance: pd.DataFrame = field(repr=False)
    method: str = "paired"
    level: float = 0.95
    cluster: str | None = None
    draws: int = 1000
    seed: int | None = None
    n_items: int = 0
    top_set: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    outcome: str = "correct"

    @property
    def other(self) -> str:
        """The method shown for comparison."""
        return METHODS[1 - METHODS.index(self.method)]

    def to_frame(self) -> pd.DataFrame:
        """The models table (one row per model, by point rank)."""
        return self.models.copy()

    def top_k(self, k: int = 1) -> tuple[str, ...]:
        """The top-``k`` set: models whose simultaneous lower rank bound is ``≤ k`` (it holds every model truly
        among the best ``k`` with probability ``≥ level``; MRSW 2024 §4)."""
        _check_k(k, len(self.models))
        return tuple(self.models.loc[self.models["simultaneous_lo"] <= k, "model"])

    def tiers(self) -> list[tuple[str, ...]]:
        """The models tier by tier (tier 1 = the top set)."""
        m = self.models
        return [tuple(m.loc[m["tier"] == t, "model"]) for t in sorted(m["tier"].unique())]

    def to_dict(self) -> dict[str, Any]:
        """The ``mrcstats ranks --json`` object."""
        def rows(prefix: str) -> list[dict[str, Any]]:
            return [{"model": str(r["model"]), "estimate": float(r["estimate"]), "se": _num(r["se"]),
                     "estimate_all": _num(r["estimate_all"]),
                     "rank": int(r["rank"]),
                     "marginal": [int(r[f"{prefix}marginal_lo"]), int(r[f"{prefix}marginal_hi"])],
                     "simultaneous": [int(r[f"{prefix}simultaneous_lo"]), int(r[f"{prefix}simultaneous_hi"])],
                     "tier": int(r[f"{prefix}tier"])} for _, r in self.models.iterrows()]
        other = self.other
        return {"models": rows(""), "method": self.method, "level": self.level, "cluster": self.cluster,
                "n_items": self.n_items, "draws": self.draws, "seed": self.seed, "top_set": list(self.top_set),
                "outcome": self.outcome, "notes": list(self.notes),
                "alternative": {"method": other, "models": rows(f"{other}_"),
                                "top_set": list(self.models.loc[self.models[f"{other}_simultaneous_lo"] == 1,
                                                                "model"])}}

    def summary(self) -> str:
        lvl = f"{100 * self.level:g}%"
        se = f"clustered on {self.cluster!r} (CR1)" if self.cluster else "CLT"
        what = "mean score" if self.outcome == "score" else "accuracy"
        used = ("paired: the variance of each difference from the shared items" if self.method == "paired" else
                "independent: each model's own SE, correlation of shared items ignored")
        lines = [(f"Rank confidence sets ({lvl}; Mogstad, Romano, Shaikh & Wilhelm 2024; {self.draws} parametric "
                  f"bootstrap draws), by {what}, {self.n_items} items, SE {se}"),
                 f"method: {used}; '{self.other}' sets shown for comparison", ""]
        head = ["tier", "rank", "model", what.replace(" ", "_"), "se", "marginal", "simultaneous",
                f"{self.other} marg.", f"{self.other} simul."]
        o = self.other
        body = [[str(int(r["tier"])), str(int(r["rank"])), str(r["model"]), f"{r['estimate']:.4f}",
                 "NA" if pd.isna(r["se"]) else f"{r['se']:.4f}",
                 f"[{int(r['marginal_lo'])}, {int(r['marginal_hi'])}]",
                 f"[{int(r['simultaneous_lo'])}, {int(r['simultaneous_hi'])}]",
                 f"[{int(r[f'{o}_marginal_lo'])}, {int(r[f'{o}_marginal_hi'])}]",
                 f"[{int(r[f'{o}_simultaneous_lo'])}, {int(r[f'{o}_simultaneous_hi'])}]"]
                for _, r in self.models.iterrows()]
        widths = [max([len(h)] + [len(b[i]) for b in body]) for i, h in enumerate(head)]
        lines.append("  ".join(h.ljust(w) for h, w in zip(head, widths)))
        lines += ["  ".join(c.ljust(w) for c, w in zip(b, widths)) for b in body]
        lines += ["", f"top set (simultaneous rank set includes 1): {', '.join(self.top_set)}"]
        lines += [f"tier {t}: {', '.join(ms)}" for t, ms in enumerate(self.tiers(), start=1)]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def _num(v: Any) -> float | None:
    return None if v is None or pd.isna(v) else float(v)


def _on_shared_items(log: Any, names: list[str]) -> tuple[pd.DataFrame, list[str]]:
    """The rows of ``log``'s models ``names`` on the items every one of them answered, and the note counting, per
    model, the rows of other items left out (issue 36: a model that skipped hard items must not rank higher)."""
    from mrcstats.backends.passes import dataset_pass

    if (rows := dataset_pass(log)) is not None:        # a dataset folder: the rows in memory
        log = rows.to_frame()
    m = log["model"].astype(str)
    keep_m = m.isin(names)
    sub = log[keep_m]
    per_item = sub.groupby(sub["item"].astype(str), sort=False)["model"].nunique()
    shared = per_item.index[per_item.to_numpy() == len(names)]
    if len(shared) < 2:
        raise InputError(f"the {len(names)} models share {len(shared)} item(s): too few to rank on shared items; "
                         "rank fewer models (models=...) or use items='all'")
    on = sub["item"].astype(str).isin(shared)
    left = sub.loc[~on, "model"].astype(str).value_counts().sort_index()
    out = sub[on]
    out.attrs = dict(log.attrs)
    by_count: dict[int, list[str]] = {}
    for k, v in left.items():
        by_count.setdefault(int(v), []).append(str(k))
    shown = "; ".join(f"{ms[0]} {plural(v, 'row')}" if len(ms) == 1 else
                      f"{plural(v, 'row')} each of {', '.join(ms)}" if len(ms) <= 3 else
                      f"{plural(v, 'row')} each of {len(ms)} models ({', '.join(ms[:2])}, ...)"
                      for v, ms in sorted(by_count.items(), key=lambda kv: (-len(kv[1]), kv[0])))
    note = (f"item sets differ: ranked on the {len(shared):,} items every ranked model answered; left out: {shown} "
            "(estimate_all: each model's accuracy over its own items; items='all' / --items all ranks on those)")
    return out, [note]


def ranks(log: pd.DataFrame, *, level: float = 0.95, cluster: str | None = None, method: str = "paired",
          draws: int = 1000, seed: int | None = None, models: Sequence[str] | None = None,
          outcome: str = "auto", items: str = "shared") -> RanksResult:
    """Which ranks does the data support? Marginal and simultaneous confidence sets of every model's rank.

    Args:
        log: a canonical log of one condition (or a log dataset); invalid answers count as not correct.
        level: the coverage of every set (0.95).
        cluster: a column grouping items (passage, subject) for cluster-robust SEs; None = items independent.
        method: ``"paired"`` (default: differences' variances from the shared items) or ``"independent"``
            (each model's own SE); the result also holds the sets of the other method for comparison.
        draws: parametric bootstrap draws (1000, as csranks).
        seed: the draws' seed (identical results for the same seed; None = not reproducible).
        models: the models to rank (default all).
        outcome: ``"auto"``, ``"correct"`` or ``"score"`` (as :func:`mrcstats.stats.compare.compare`).
        items: ``"shared"`` (default): when the models' item sets differ, rank on the items every ranked model
            answered (estimates, SEs and paired covariances all from those items; the rows of the other items
            are counted per model in the notes and each model's accuracy over its own items is the column
            ``estimate_all``); ``"all"``: each model's estimate over its own items, paired variances from the
            items each pair shares (a model that skipped hard items then ranks too high).

    Returns:
        :class:`RanksResult`. Formulas and references: the module docstring (MRSW 2024; Miller 2024 for
        the SEs, computed by :func:`mrcstats.stats.compare.compare`).

    Raises:
        InputError: bad arguments, fewer than two models, a model with fewer than two items, or what
            :func:`mrcstats.stats.compare.compare` refuses (several conditions, a missing cluster column).
    """
    from mrcstats._seeds import check_seed
    from mrcstats.stats.compare import compare

    _check_level(level)
    check_seed(seed)
    if method not in METHODS:
        raise InputError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    if isinstance(draws, bool) or not isinstance(draws, (int, np.integer)) or draws < 100:
        raise InputError(f"draws (bootstrap draws) must be a whole number >= 100, got {draws!r}")
    if items not in ("shared", "all"):
        raise InputError(f"items must be 'shared' or 'all', got {items!r}")
    res = compare(log, models=models, cluster=cluster, alpha=1 - float(level), adjust="none", outcome=outcome)
    mt = res.models.reset_index(drop=True)
    shared_notes: list[str] = []
    own = dict(zip(mt["model"].astype(str), mt["accuracy"].astype(float), strict=True))
    if items == "shared" and (mt["n_items"] != mt["n_items"].max()).any():
        log, shared_notes = _on_shared_items(log, [str(m) for m in mt["model"]])
        res = compare(log, models=models, cluster=cluster, alpha=1 - float(level), adjust="none", outcome=outcome)
        mt = res.models.reset_index(drop=True)
    names = [str(m) for m in mt["model"]]
    p = len(names)
    se_col = "se_cluster" if cluster else "se"
    se_m = mt[se_col].to_numpy(dtype=float)
    bad = np.flatnonzero(~np.isfinite(se_m))
    if len(bad):
        m = names[int(bad[0])]
        raise InputError(f"model {m!r} has {int(mt['n_items'].iloc[int(bad[0])])} item(s)"
                         f"{' or one cluster' if cluster else ''}; a rank set needs a standard error "
                         f"(at least two items{' in two clusters' if cluster else ''} per model)")
    index = {m: k for k, m in enumerate(names)}
    V = np.zeros((p, p))
    for r in res.pairs.itertuples(index=False):
        v = float(getattr(r, se_col)) ** 2
        a, b = index[str(r.model_a)], index[str(r.model_b)]
        V[a, b] = V[b, a] = v
    if not np.isfinite(V).all():
        raise InputError("a pair of models has too few common items (or clusters) for a paired standard error; "
                         "use method='independent' or rank models that share items")
    var_m = se_m ** 2
    paired_cov = (np.add.outer(var_m, var_m) - V) / 2      # Cov(θ̂_j, θ̂_k) = (se_j² + se_k² - se_jk²) / 2
    np.fill_diagonal(paired_cov, var_m)
    notes: list[str] = [*shared_notes, *res.notes]
    w, U = np.linalg.eigh(paired_cov)
    if w.min() < -1e-10 * max(1.0, float(np.abs(w).max())):
        paired_cov = (U * np.clip(w, 0.0, None)) @ U.T
        notes.append("the paired variances of the differences were not jointly consistent (models answered "
                     "different items); their covariance was made positive semi-definite before drawing")
    n_items = mt["n_items"].to_numpy()
    if (n_items != n_items.max()).any():
        notes.append("models answered different numbers of items (items='all'); each estimate is the model's "
                     "accuracy on its own items and paired variances come from the items each pair shares")
    if (V[~np.eye(p, dtype=bool)] == 0).any():
        notes.append("some pairs have identical per-item scores (difference variance 0); their difference is "
                     "taken as exact")
    x = mt["accuracy"].to_numpy(dtype=float)
    covs = {"paired": paired_cov, "independent": np.diag(se_m ** 2)}
    sets = {m: rank_sets(x, covs[m], level=level, draws=draws, seed=seed) for m in METHODS}
    main, other = sets[method], sets[METHODS[1 - METHODS.index(method)]]
    oname = METHODS[1 - METHODS.index(method)]
    tab = pd.DataFrame({
        "model": names, "estimate": x, "se": se_m, "rank": main.rank,
        "marginal_lo": main.marginal[:, 0], "marginal_hi": main.marginal[:, 1],
        "simultaneous_lo": main.simultaneous[:, 0], "simultaneous_hi": main.simultaneous[:, 1], "tier": main.tier,
        f"{oname}_marginal_lo": other.marginal[:, 0], f"{oname}_marginal_hi": other.marginal[:, 1],
        f"{oname}_simultaneous_lo": other.simultaneous[:, 0], f"{oname}_simultaneous_hi": other.simultaneous[:, 1],
        f"{oname}_tier": other.tier, "estimate_all": [own[m] for m in names]})
    order = np.lexsort((np.array(names, dtype=object), main.rank))
    tab = tab.iloc[order].reset_index(drop=True)
    cov = pd.DataFrame(covs[method][np.ix_(order, order)], index=tab["model"].to_list(),
                       columns=tab["model"].to_list())
    top = tuple(tab.loc[tab["simultaneous_lo"] == 1, "model"])
    return RanksResult(models=tab, covariance=cov, method=method, level=float(level), cluster=cluster, draws=int(draws), seed=seed,
                       n_items=int(n_items.max()), top_set=top, notes=tuple(notes), outcome=res.outcome)
