"""Compare models on a benchmark: paired, clustered, multiplicity-adjusted (Miller 2024).

Two steps with a public seam between them:

1. :func:`per_item_scores` turns a canonical log into one row per ``(model, item)``:
   ``model, item, cluster, score, n_trials`` — ``score`` is the mean over the item's
   trials of the 0/1 correctness, invalid answers counting as not correct (as in
   ``mrcstats summary``). Any other producer of that frame (e.g. a DuckDB query over a
   Parquet dataset) can feed step 2 directly.
2. :func:`compare_scores` computes every statistic from those per-item scores;
   :func:`compare` is step 1 then step 2.

Notation (Miller 2024, "Adding Error Bars to Evals", arXiv:2411.00640): ``s_i`` is
the score of item ``i`` (the mean of its ``K_i`` trials), ``n`` the number of items,
``s̄`` their mean, ``G`` the number of clusters, ``z = Φ⁻¹(1 - α/2)``.

**Per model** (all items the model answered)::

    accuracy   = s̄ = (1/n) Σ_i s_i
    se         = sqrt( (1/(n-1)) Σ_i (s_i - s̄)² / n )              CLT SE (Miller §2.1, Eq. 2)
    se_cluster = sqrt( G/(G-1) · Σ_c ( Σ_{i∈c} (s_i - s̄) )² ) / n  clustered SE (Miller §2.2, Eq. 4)

``se_cluster`` is the package's one clustered SE, :func:`mrcstats.stats.accuracy.cluster_se`
(CR1: Miller's Eq. 4 with the small-sample factor ``G/(G-1)`` on the variance; R's
``sqrt(sandwich::vcovCL(lm(s ~ 1), cluster = ~cluster, type = "HC1", cadjust = TRUE))``), the same
number ``summary`` reports for the same model. With one item per cluster it equals ``se``
exactly. CI of a model's accuracy: the one accuracy interval of
:func:`mrcstats.stats.accuracy.accuracy_interval` (``ci_method``): Wilson at n items for one binary answer
per item and no clusters, else the clustered Wilson interval (``"clustered wilson"``) at the effective
sample size ``min(s̄(1-s̄)/se_used², answers)`` with a t critical value on ``G - 1`` df (``ci_df``), with
``se_used = se_cluster`` when ``cluster`` is given, else ``se`` (items with repeated trials are then the
clusters); it stays inside [0, 1]. Graded scores keep ``s̄ ± c · se_used`` (``"normal"``, c = z; with
``cluster``, ``"clustered t"``, c = t_{G-1}). ``rank`` 1 is the highest accuracy (ties share the lower rank).

**Per pair** (model a vs model b, paired on ``item``; items only one of them answered
are left out and counted in ``skipped``), with ``d_i = s_{a,i} - s_{b,i}`` on the
``n`` common items (Miller §4.2, Eq. 8, paired differences)::

    diff           = d̄ = accuracy of a - accuracy of b (on the common items)
    se             = sqrt( Var(d) / n ),  Var(d) = Var(s_a) + Var(s_b) - 2 Cov(s_a, s_b)
    se_cluster     = as above with d_i in place of s_i
    z = diff / se_used,  p = 2 (1 - Φ(|z|)),  CI = diff ± z_{1-α/2} · se_used        (items independent)
    with ``cluster``: p = 2 P(T_{G-1} > |z|), CI = diff ± t_{G-1, 1-α/2} · se_cluster  (``df`` = G - 1,
    G = clusters among the pair's common items; Cameron, Gelbach & Miller 2008, §III.B: with few clusters
    the normal reference over-rejects, issue 36)
    corr           = Pearson correlation of s_a and s_b on the common items
    variance_ratio = se_used² / (se_used(a)² + se_used(b)²)       paired / unpaired (Miller Eq. 7)

``variance_ratio`` below 1 is the variance pairing saves over an unpaired comparison
of the same items (the unpaired SEs use the same estimator, clustered or not, on the
common items). ``p_mcnemar`` (single-trial items only) is the exact McNemar test:
the two-sided exact binomial test of ``b`` = #(a right, b wrong) among the ``b + c``
discordant items, R's ``binom.test(b, b + c)$p.value``
(:func:`mrcstats.stats.contingency.mcnemar_exact_p`). ``p_adjusted`` is ``p``
adjusted across all reported pairs by :func:`p_adjust` (R's ``p.adjust``).

**Bootstrap** (``bootstrap = B > 0``): the percentile interval of ``diff`` over ``B``
resamples of clusters (of items without ``cluster``) with replacement; a resample is a
vector of multinomial cluster counts ``w`` and ``diff* = Σ_c w_c D_c / Σ_c w_c n_c``
(``D_c``, ``n_c``: sum of ``d_i`` and number of items in cluster ``c``), computed for
all resamples at once as a matrix product.

**Graded scores** (``outcome="score"``, docs/scores.md): ``s_i`` is the mean of the item's graded
``score`` (partial credit, f1, a judge rating) instead of its 0/1 correctness; every formula above holds
as it is (Miller 2024 applies to any bounded score). ``p_mcnemar`` and the repeated-samples table
(binary within-item variance) are left out, and ``outcome`` says which was used.

**Repeated samples** (some item has ``K_i > 1``; Miller §3.1, Eq. 5-6): with
binary trials the within-item variance of item ``i`` is ``σ̂_i² = K_i/(K_i-1) ·
s_i (1 - s_i)`` (the sample variance of its trials) and
``Var(s̄) = (Var(x) + E[σ²/K]) / n``. Reported per model: ``within_var`` =
mean ``σ̂_i²`` over items with ``K_i ≥ 2``, ``between_var`` = ``Var(s_i) -
mean(σ̂_i²/K_i)`` (``Var(x)``, floored at 0), ``se_single = sqrt((between_var +
within_var)/n)`` (the SE one trial per item would give) and ``se_reduction = 1 -
se/se_single`` (what the K samples bought). A note says when ``K_i`` differs across
items.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from mrcstats._pformat import format_pval
from mrcstats._repr import Result
from mrcstats._seeds import rng as seed_rng
from mrcstats.errors import InputError
from mrcstats.stats.multiplicity import check_method, p_adjust

__all__ = [
    "ADJUST_METHODS",
    "ITEM_SCORE_COLUMNS",
    "MODEL_FIELDS",
    "PAIR_FIELDS",
    "CompareResult",
    "compare",
    "compare_scores",
    "p_adjust",
    "per_item_scores",
]

#: the columns of :func:`per_item_scores` (the seam between the log and the statistics)
ITEM_SCORE_COLUMNS: tuple[str, ...] = ("model", "item", "cluster", "score", "n_trials")
#: ``--adjust`` choices; ``BH`` = Benjamini-Hochberg (R's ``"BH"``/``"fdr"``)
ADJUST_METHODS: tuple[str, ...] = ("holm", "BH", "bonferroni", "none")
#: the per-model fields of ``compare(...).to_dict()["models"]``
MODEL_FIELDS: tuple[str, ...] = ("model", "n_items", "accuracy", "se", "se_cluster", "ci_low", "ci_high", "ci_method",
                                  "ci_df", "clusters", "n_shared", "accuracy_shared", "items_missing", "rank")
#: the per-pair fields of ``compare(...).to_dict()["pairs"]``
PAIR_FIELDS: tuple[str, ...] = ("model_a", "model_b", "n_items", "diff", "se", "se_cluster", "ci_low", "ci_high",
                                "df", "z", "p", "p_adjusted", "p_mcnemar", "corr", "variance_ratio", "boot_ci_low",
                                "boot_ci_high")
_UNPAIRED = "model-item scores without a partner in a pair (left out of that pair; summed over pairs)"


# --------------------------------------------------------------------------- step 1: per-item scores

def per_item_scores(log: pd.DataFrame, cluster: str = "cluster", outcome: str = "auto") -> pd.DataFrame:
    """One row per ``(model, item)``: ``model, item, cluster, score, n_trials``.

    ``score`` is the mean over the item's trials of the correctness (invalid = not
    correct, as ``summary``); ``n_trials`` the number of trials; ``cluster`` the value of
    the ``cluster`` column (each item must lie in one cluster). The log must hold one
    condition (and masking rate): filter it first, e.g. ``log[log.condition == "x"]``.
    Rows are ordered by model (sorted) then item (first appearance).

    ``outcome``: ``"auto"`` (the graded ``score`` when the log has one that is not 0/1, else the
    correctness), ``"correct"`` or ``"score"`` (:func:`mrcstats.io.schema.resolve_outcome`).

    ``attrs``: ``skipped`` (from the log), ``invalid`` (``{model: invalid answers}``) and ``outcome``.

    Raises:
        InputError: a missing cluster column, an item in two clusters, several conditions.
    """
    from mrcstats.backends import dataset_pass
    from mrcstats.io.schema import check_grouping, is_canonical, validate_log

    rows = dataset_pass(log)
    if rows is not None:  # a dataset folder larger than memory: the same table from its row pass (DuckDB)
        check_grouping(cluster, rows.columns(), "cluster by")
        if outcome == "correct" or (outcome == "auto" and not rows.graded()):
            out = rows.per_item_scores(cluster)
            out.attrs["outcome"] = "correct"
            return out
        log = rows.to_frame()
    if not isinstance(log, pd.DataFrame):
        raise InputError(f"expected a canonical log (pandas DataFrame), got {type(log).__name__}")
    if not is_canonical(log):
        log = validate_log(log)
    check_grouping(cluster, log.columns, "cluster by")
    if len(log) == 0:
        raise InputError("the log has no rows")
    cond_codes, cond_names = pd.factorize(log["condition"], sort=False)
    mr = log["masking_rate"].to_numpy(dtype=float, na_value=-1.0)
    n_cond = len(cond_names) if np.all(mr == mr[0]) else len(pd.DataFrame({"c": cond_codes, "m": mr}).drop_duplicates())
    cond = np.asarray(cond_names, dtype=object)
    if n_cond > 1:
        shown = ", ".join(repr(c) for c in sorted(map(str, pd.unique(cond)))[:10])
        raise InputError(f"the log holds {n_cond} conditions/masking rates (conditions: {shown}); compare models "
                         f"within one: filter the log (Python: log[log.condition == 'x']; CLI: --condition X)")
    m_codes, m_names = pd.factorize(log["model"], sort=True)
    i_codes, i_names = pd.factorize(log["item"], sort=False)
    c_codes, c_names = pd.factorize(log[cluster], sort=False, use_na_sentinel=False)
    n_items = len(i_names)
    # one cluster per item
    first = np.full(n_items, -1, dtype=np.int64)
    order = np.arange(len(i_codes))[::-1]
    first[i_codes[order]] = c_codes[order]
    bad = first[i_codes] != c_codes
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        it = i_names[i_codes[r]]
        raise InputError(f"item {it!r} lies in two clusters ({c_names[first[i_codes[r]]]!r} and "
                         f"{c_names[c_codes[r]]!r}, {cluster!r} column, row {r + 1}); each item must belong to one "
                         f"cluster")
    from mrcstats.io.schema import outcome_values, resolve_outcome

    used = resolve_outcome(log, outcome, "compare")
    val = outcome_values(log, used)
    x = val.to_numpy(dtype=float, na_value=0.0)
    inv = val.isna().to_numpy()
    key = m_codes.astype(np.int64) * n_items + i_codes
    size = len(m_names) * n_items
    sums = np.bincount(key, weights=x, minlength=size)
    counts = np.bincount(key, minlength=size)
    present = np.flatnonzero(counts)
    mi, ii = np.divmod(present, n_items)

    def labels(names: Any, codes: np.ndarray) -> Any:
        # convert the (few) distinct labels, then take: fast for Arrow-backed strings
        return pd.array(np.asarray(names, dtype=object).astype(str), dtype="string").take(codes)

    out = pd.DataFrame({
        "model": labels(m_names, mi),
        "item": labels(i_names, ii),
        "cluster": labels(c_names, first[ii]),
        "score": sums[present] / counts[present],
        "n_trials": counts[present].astype(np.int64),
    })
    invalid = np.bincount(m_codes, weights=inv.astype(float), minlength=len(m_names))
    out.attrs["skipped"] = dict(log.attrs.get("skipped", {}) or {})
    out.attrs["invalid"] = {str(m): int(v) for m, v in zip(m_names, invalid)}
    out.attrs["outcome"] = used
    return out


def _check_item_scores(items: pd.DataFrame) -> None:
    if not isinstance(items, pd.DataFrame):
        raise InputError(f"per-item scores must be a DataFrame, got {type(items).__name__}")
    miss = [c for c in ITEM_SCORE_COLUMNS if c not in items.columns]
    if miss:
        raise InputError(f"per-item scores need the columns {', '.join(ITEM_SCORE_COLUMNS)}; missing "
                         f"{', '.join(miss)} (build them with mrcstats.per_item_scores(log))")
    score = pd.to_numeric(items["score"], errors="coerce").to_numpy(dtype=float)
    if np.isnan(score).any():
        r = int(np.flatnonzero(np.isnan(score))[0])
        raise InputError(f"per-item scores, row {r + 1}: score {items['score'].iloc[r]!r} is not a number")
    k = pd.to_numeric(items["n_trials"], errors="coerce").to_numpy(dtype=float)
    bad = np.isnan(k) | (k < 1) | (k != np.round(k))
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        raise InputError(f"per-item scores, row {r + 1}: n_trials must be a whole number >= 1, got "
                         f"{items['n_trials'].iloc[r]!r}")
    if items.duplicated(["model", "item"]).any():
        r = int(np.flatnonzero(items.duplicated(["model", "item"]).to_numpy())[0])
        raise InputError(f"per-item scores, row {r + 1}: model {items['model'].iloc[r]!r} has item "
                         f"{items['item'].iloc[r]!r} twice; give one row per (model, item)")


# --------------------------------------------------------------------------- result

@dataclass(frozen=True, repr=False)
class CompareResult(Result):
    """Models ranked and compared pair by pair (see the module docstring for every formula).

    ``models`` has :data:`MODEL_FIELDS` plus ``clusters`` (clusters among its items);
    ``pairs`` has :data:`PAIR_FIELDS` plus ``n_unpaired`` (the two models' items left
    out because the other model lacks them), ``a_only``/``b_only`` (discordant counts,
    single-trial data), ``se_a``/``se_b`` (unpaired SEs on the common items, same
    estimator as ``se_used``) and ``clusters``; ``repeated`` (or None) the
    repeated-sample table; ``skipped`` ``{reason: count}``; ``notes`` plain sentences.
    """

    models: pd.DataFrame = field(repr=False)
    pairs: pd.DataFrame = field(repr=False)
    adjust: str = "holm"
    cluster: str | None = None
    alpha: float = 0.05
    bootstrap: int = 0
    seed: int | None = None
    repeated: pd.DataFrame | None = field(default=None, repr=False)
    skipped: dict[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    outcome: str = "correct"    # "correct" (accuracy) or "score" (mean graded score)

    def to_frame(self) -> pd.DataFrame:
        """The pairs table (one row per pair)."""
        return self.pairs.copy()

    def to_dict(self) -> dict[str, Any]:
        """The ``mrcstats compare --json`` object (numbers unrounded, NaN -> None)."""
        def recs(df: pd.DataFrame, cols: Sequence[str]) -> list[dict[str, Any]]:
            return [{c: _plain(r[c]) for c in cols} for r in df[list(cols)].to_dict(orient="records")]
        out: dict[str, Any] = {
            "models": recs(self.models, MODEL_FIELDS),
            "pairs": recs(self.pairs, PAIR_FIELDS),
            "adjust": self.adjust,
            "cluster": self.cluster,
            "skipped": dict(self.skipped),
            "alpha": self.alpha,
            "bootstrap": self.bootstrap,
            "seed": self.seed,
            "repeated": None if self.repeated is None else recs(self.repeated, list(self.repeated.columns)),
            "notes": list(self.notes),
            "outcome": self.outcome,
            "rank_basis": self.rank_basis(),
        }
        return out

    def rank_basis(self) -> str:
        """``"shared items"`` (ranks by ``accuracy_shared``, the items every compared model answered) or
        ``"own items"`` (no item shared by all: ranks by each model's ``accuracy``)."""
        n = self.models["n_shared"] if "n_shared" in self.models else pd.Series([1])
        return "shared items" if int(n.iloc[0]) > 0 else "own items"

    def ranking(self) -> pd.DataFrame:
        """The models table sorted by rank."""
        return self.models.sort_values(["rank", "model"], kind="stable").reset_index(drop=True)

    def matrix(self, value: str = "diff") -> pd.DataFrame:
        """A models x models matrix of a pair field (row minus column for ``diff``; symmetric otherwise)."""
        names = list(self.models["model"])
        mat = pd.DataFrame(np.nan, index=names, columns=names)
        sign = -1.0 if value in ("diff", "z", "ci_low", "ci_high", "boot_ci_low", "boot_ci_high") else 1.0
        for r in self.pairs.itertuples(index=False):
            v = getattr(r, value)
            v = np.nan if v is None else float(v)
            mat.loc[r.model_a, r.model_b] = v
            mat.loc[r.model_b, r.model_a] = sign * v if value in ("diff", "z") else v
        return mat

    def summary(self) -> str:
        """Ranking and pairs as plain-text tables."""
        lvl = f"{100 * (1 - self.alpha):g}%"
        from mrcstats.stats.accuracy import CI_METHODS

        se_name = f"clustered on {self.cluster!r} (CR1, G/(G-1))" if self.cluster else "CLT, unclustered"
        what = "mean score" if self.outcome == "score" else "accuracy"
        methods = list(dict.fromkeys(self.models["ci_method"])) if "ci_method" in self.models else []
        head = (f"Models ranked by {what} (SE {se_name}; {lvl} CI: "
                f"{', '.join(CI_METHODS.get(m, m) for m in methods)})")
        if self.rank_basis() == "shared items" and bool((self.models["items_missing"] > 0).any()):
            head += "; ranked on the items every model answered"
        lines = [head]
        rk = self.ranking()
        differ = bool((rk["items_missing"] > 0).any())
        head = ["rank", "model", "n_items", what.replace(" ", "_"), "se", "se_cluster", f"{lvl} CI",
                *([f"{what.replace(' ', '_')}_shared ({int(rk['n_shared'].iloc[0])} items)"] if differ else [])]
        rows = [[str(int(r["rank"])), str(r["model"]), str(int(r["n_items"])), _f(r["accuracy"]), _f(r["se"]),
                 _f(r["se_cluster"]), f"[{_f(r['ci_low'])}, {_f(r['ci_high'])}]",
                 *([_f(r["accuracy_shared"])] if differ else [])] for _, r in rk.iterrows()]
        lines += _table(head, rows)
        adj = {"holm": "Holm", "BH": "Benjamini-Hochberg", "bonferroni": "Bonferroni", "none": "none"}[self.adjust]
        lines += ["", f"Pairs (paired on item; diff = a - b; p adjusted: {adj}; * adjusted p < {self.alpha:g})"]
        head = ["model_a", "model_b", "n", "diff", "se_used", f"{lvl} CI", "p", "p_adj", "p_mcnemar", "corr",
                "var_ratio"]
        if self.bootstrap:
            head.append("boot CI")
        rows = []
        for _, r in self.pairs.iterrows():
            se = r["se_cluster"] if self.cluster else r["se"]
            star = " *" if (r["p_adjusted"] is not None and not pd.isna(r["p_adjusted"])
                            and r["p_adjusted"] < self.alpha) else ""
            row = [str(r["model_a"]), str(r["model_b"]), str(int(r["n_items"])), _f(r["diff"]), _f(se),
                   f"[{_f(r['ci_low'])}, {_f(r['ci_high'])}]", _g(r["p"]), _g(r["p_adjusted"]) + star,
                   _g(r["p_mcnemar"]), _f(r["corr"], 3), _f(r["variance_ratio"], 3)]
            if self.bootstrap:
                row.append(f"[{_f(r['boot_ci_low'])}, {_f(r['boot_ci_high'])}]")
            rows.append(row)
        lines += _table(head, rows)
        if self.repeated is not None:
            lines += ["", "Repeated samples (Miller 2024 §3.1): within-item variance and the SE the K samples buy"]
            head = ["model", "trials", "within_var", "between_var", "se", "se_single", "se_reduction"]
            rows = [[str(r["model"]), _f(r["trials_mean"], 2), _f(r["within_var"]), _f(r["between_var"]),
                     _f(r["se"]), _f(r["se_single"]), _f(r["se_reduction"], 3)] for _, r in self.repeated.iterrows()]
            lines += _table(head, rows)
        if self.skipped:
            lines += [""] + [f"skipped: {n} {why}" for why, n in self.skipped.items() if n]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def _plain(v: Any) -> Any:
    if v is None or v is pd.NA:
        return None
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return None if math.isnan(float(v)) else float(v)
    return v


def _f(v: Any, digits: int = 4) -> str:
    if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return "NA"
    return f"{float(v):.{digits}f}"


def _g(v: Any) -> str:
    """A p-value for the terminal (:func:`mrcstats._pformat.format_pval`: never a bare 0)."""
    return format_pval(None if v is pd.NA else v)


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(head)]
    out = ["  ".join(h.ljust(w) for h, w in zip(head, widths))]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    return out


# --------------------------------------------------------------------------- step 2: statistics

def compare(log: pd.DataFrame, models: Sequence[str] | None = None, cluster: str | None = None,
            alpha: float = 0.05, adjust: str = "holm", bootstrap: int = 0,
            seed: int | None = None, outcome: str = "auto") -> CompareResult:
    """Is model A better than model B, by how much, how sure — for every pair of models in a log.

    Args:
        log: a canonical log of one condition (invalid answers count as not correct).
        models: the models to compare (all pairs among them); default every model in the log.
        cluster: a column grouping items (passage, subject) for cluster-robust SEs and the
            cluster bootstrap; None = items independent.
        alpha: 1 - the confidence level of every interval, and the significance mark level.
        adjust: ``holm`` (default), ``BH``, ``bonferroni`` or ``none``: p-values adjusted across
            all pairs as R's ``p.adjust``.
        bootstrap: resamples for the percentile bootstrap CI of each difference (0 = none).
        seed: the bootstrap's random seed (results are identical for the same seed).
        outcome: ``"auto"`` (graded ``score`` when the log has one, else correctness), ``"correct"`` or
            ``"score"``; the result's ``outcome`` says which was used.

    Returns:
        :class:`CompareResult`. Formulas and references: the module docstring (Miller 2024,
        arXiv:2411.00640, Eq. 2, 4, 7, 8; §3.1; R's ``p.adjust`` and ``binom.test``).

    Raises:
        InputError: fewer than two models, an unknown model, a missing cluster column, two
            models without common items, several conditions in the log, bad arguments.
    """
    _check_args(alpha, adjust, bootstrap)
    if isinstance(log, pd.DataFrame) and cluster is not None:
        from mrcstats.io.schema import check_grouping

        check_grouping(cluster, log.columns, "cluster by")
    items = per_item_scores(log, cluster=cluster or "cluster", outcome=outcome)
    return compare_scores(items, models=models, clustered=cluster is not None, cluster_name=cluster, alpha=alpha,
                          adjust=adjust, bootstrap=bootstrap, seed=seed)


def _check_args(alpha: float, adjust: str, bootstrap: int) -> None:
    from mrcstats.models._checks import check_alpha, check_resamples

    check_alpha(alpha)
    check_method(adjust)
    check_resamples(bootstrap)


def _pick_models(available: list[str], models: Sequence[str] | None) -> list[str]:
    if models is None:
        chosen = list(available)
    else:
        if isinstance(models, str):
            models = [models]
        chosen = [str(m) for m in models]
        unknown = [m for m in chosen if m not in set(available)]
        if unknown:
            shown = ", ".join(repr(m) for m in available[:30]) + (" ..." if len(available) > 30 else "")
            raise InputError(f"unknown model{'s' if len(unknown) > 1 else ''} "
                             f"{', '.join(repr(m) for m in unknown)}; the log has {shown}")
        dup = sorted({m for m in chosen if chosen.count(m) > 1})
        if dup:
            raise InputError(f"model {dup[0]!r} is listed twice; name each model once")
    if len(chosen) < 2:
        only = repr(chosen[0]) if chosen else "none"
        raise InputError(f"compare needs at least two models; {'the log has' if models is None else 'got'} only "
                         f"{only}")
    return chosen


def compare_scores(items: pd.DataFrame, models: Sequence[str] | None = None, *, clustered: bool = False,
                   cluster_name: str | None = None, alpha: float = 0.05, adjust: str = "holm",
                   bootstrap: int = 0, seed: int | None = None) -> CompareResult:
    """The statistics of :func:`compare` from per-item scores (the frame of :func:`per_item_scores`).

    ``clustered=True`` uses the ``cluster`` column for cluster-robust SEs and the cluster
    bootstrap (``cluster_name`` only labels the result). See the module docstring.
    """
    from mrcstats.stats.accuracy import (
        accuracy_interval,
        cluster_df,
        cluster_se,
        cr1_se,
        few_clusters_note,
        mean_test,
    )
    from mrcstats.stats.contingency import mcnemar_exact_p

    _check_args(alpha, adjust, bootstrap)
    meth = check_method(adjust)
    _check_item_scores(items)
    all_codes, all_names = pd.factorize(items["model"], sort=False)
    available = sorted(map(str, all_names))
    names = _pick_models(available, models)
    m_index = {m: k for k, m in enumerate(names)}
    lookup = np.array([m_index.get(str(m), -1) for m in all_names], dtype=np.int64)
    row_m = lookup[all_codes]
    keep_rows = row_m >= 0
    sub = items[keep_rows] if not keep_rows.all() else items
    m_codes = row_m[keep_rows]
    i_codes, i_names = pd.factorize(sub["item"], sort=False)
    n_models, n_items = len(names), len(i_names)
    S = np.full((n_models, n_items), np.nan)
    K = np.zeros((n_models, n_items), dtype=np.int64)
    S[m_codes, i_codes] = pd.to_numeric(sub["score"]).to_numpy(dtype=float)
    K[m_codes, i_codes] = pd.to_numeric(sub["n_trials"]).to_numpy(dtype=np.int64)
    cl_codes_rows, _cl_names = pd.factorize(sub["cluster"], sort=False, use_na_sentinel=False)
    item_cl = np.full(n_items, -1, dtype=np.int64)
    item_cl[i_codes] = cl_codes_rows
    chk = item_cl[i_codes] != cl_codes_rows
    if chk.any():
        r = int(np.flatnonzero(chk)[0])
        raise InputError(f"item {i_names[i_codes[r]]!r} lies in two clusters; each item must belong to one cluster")
    if not clustered:
        item_cl = np.arange(n_items, dtype=np.int64)
    n_cl = int(item_cl.max()) + 1 if n_items else 0
    F = ~np.isnan(S)

    # ---- per model
    graded = items.attrs.get("outcome") == "score"
    mrows = []
    for k, m in enumerate(names):
        mask = F[k]
        x = S[k, mask]
        n = len(x)
        acc = float(x.mean())
        se = float(np.std(x, ddof=1) / math.sqrt(n)) if n > 1 else float("nan")
        g = len(np.unique(item_cl[mask]))
        if clustered:
            sec = cluster_se(x, item_cl[mask])   # CR1: the package's one se_cluster (G/(G-1) inside)
        else:
            sec = float("nan")
        used = sec if clustered else se
        # the clusters of the interval: the item clusters, or the items themselves (repeated trials)
        g_used = g if clustered else n
        df = float("nan")
        if graded:
            method = "clustered t" if clustered else "normal"
            df = cluster_df(g_used) if clustered else float("nan")
            _, _, lo, hi = (float(v) for v in mean_test(acc, used, 1 - alpha, df if clustered else None))
        else:
            method = "clustered wilson" if (clustered or (K[k, mask] > 1).any()) else "wilson"
            # n: the answers (trials) behind the accuracy, the cap of the effective n as in summary's rows
            rows = int(K[k, mask].sum())
            lo, hi = (float(v) for v in accuracy_interval(acc, rows, used, method, 1 - alpha, clusters=g_used))
            df = cluster_df(g_used) if method == "clustered wilson" else float("nan")
        mrows.append({"model": m, "n_items": n, "accuracy": acc, "se": se, "se_cluster": sec,
                      "ci_low": lo, "ci_high": hi, "ci_method": method, "ci_df": df, "clusters": g})
    mtab = pd.DataFrame(mrows)
    # shared items: those every compared model answered; the ranking's basis (issue 36)
    shared = F.all(axis=0)
    n_sh = int(shared.sum())
    mtab["n_shared"] = n_sh
    mtab["accuracy_shared"] = [float(S[k, shared].mean()) if n_sh else float("nan") for k in range(n_models)]
    mtab["items_missing"] = [int(n_items - F[k].sum()) for k in range(n_models)]
    basis = "accuracy_shared" if n_sh else "accuracy"
    mtab["rank"] = mtab[basis].rank(ascending=False, method="min").astype("int64")
    mtab = mtab[list(MODEL_FIELDS)]

    # ---- per pair
    pairs = [(a, b) for a in range(n_models) for b in range(a + 1, n_models)]
    n_pairs = len(pairs)
    full = F.all(axis=1)
    Xz = np.where(F, S, 0.0)
    # cluster sums and sizes per model (valid for pairs whose two item sets coincide)
    C = np.zeros((n_models, n_cl))
    NC = np.zeros((n_models, n_cl))
    for k in range(n_models):
        C[k] = np.bincount(item_cl, weights=Xz[k], minlength=n_cl)
        NC[k] = np.bincount(item_cl, weights=F[k].astype(float), minlength=n_cl)
    single = K <= 1
    bin_m = ((Xz == 0) | (Xz == 1)).all(axis=1)  # McNemar needs 0/1 scores (one binary trial per item)
    cols = {k: np.full(n_pairs, np.nan) for k in ("n", "diff", "va", "vb", "vd", "se_a_cl", "se_b_cl", "se_cl",
                                                   "g", "unp", "a_only", "b_only")}
    mcn_ok = np.zeros(n_pairs, dtype=bool)
    boot_jobs: list[tuple[int, np.ndarray, np.ndarray]] = []  # (pair index, D_c, n_c) for own-resample pairs
    pa = np.array([p[0] for p in pairs], dtype=np.int64)
    pb = np.array([p[1] for p in pairs], dtype=np.int64)
    both_full = full[pa] & full[pb] if n_pairs else np.zeros(0, dtype=bool)
    # (a) pairs of models that answered every item: all at once, as matrices
    blk = np.flatnonzero(both_full)
    if len(blk):
        n = n_items
        means = Xz.mean(axis=1)
        var_m = Xz.var(axis=1, ddof=1) if n > 1 else np.full(n_models, np.nan)
        nc_all = NC[pa[blk[0]]]
        present = nc_all > 0
        g = int(present.sum())
        meat_m = ((C[:, present] - nc_all[present] * means[:, None]) ** 2).sum(axis=1)
        XX = Xz @ Xz.T
        tot = Xz.sum(axis=1)
        sing_m = single.all(axis=1)
        for lo in range(0, len(blk), 64):
            idx = blk[lo:lo + 64]
            a, b = pa[idx], pb[idx]
            D = Xz[a] - Xz[b]
            dm = D.mean(axis=1)
            cols["diff"][idx] = dm
            cols["vd"][idx] = D.var(axis=1, ddof=1) if n > 1 else np.nan
            Dc = C[a][:, present] - C[b][:, present]
            cols["se_cl"][idx] = cr1_se(((Dc - nc_all[present] * dm[:, None]) ** 2).sum(axis=1), n, g)
        a, b = pa[blk], pb[blk]
        cols["n"][blk] = n
        cols["va"][blk], cols["vb"][blk] = var_m[a], var_m[b]
        cols["se_a_cl"][blk] = cr1_se(meat_m[a], n, g)
        cols["se_b_cl"][blk] = cr1_se(meat_m[b], n, g)
        cols["g"][blk] = g
        cols["unp"][blk] = 0
        mcn_ok[blk] = bin_m[a] & bin_m[b] & sing_m[a] & sing_m[b]
        cols["a_only"][blk] = tot[a] - XX[a, b]
        cols["b_only"][blk] = tot[b] - XX[a, b]
    # (b) pairs with differing item sets: one by one on their common items
    for idx in np.flatnonzero(~both_full):
        a, b = int(pa[idx]), int(pb[idx])
        common = F[a] & F[b]
        n = int(common.sum())
        if n == 0:
            raise InputError(f"models {names[a]!r} and {names[b]!r} have no items in common; a paired comparison "
                             f"needs items both answered (check the item ids, or compare other models)")
        xa, xb = S[a, common], S[b, common]
        d = xa - xb
        dm = float(d.mean())
        cols["n"][idx], cols["diff"][idx] = n, dm
        cols["unp"][idx] = int(F[a].sum() + F[b].sum() - 2 * n)
        if n > 1:
            cols["va"][idx], cols["vb"][idx], cols["vd"][idx] = (np.var(v, ddof=1) for v in (xa, xb, d))
        cc = item_cl[common]
        Dc = np.bincount(cc, weights=d, minlength=n_cl)
        nc = np.bincount(cc, minlength=n_cl).astype(float)
        Ca = np.bincount(cc, weights=xa, minlength=n_cl)
        Cb = np.bincount(cc, weights=xb, minlength=n_cl)
        present = nc > 0
        g = int(present.sum())
        cols["g"][idx] = g
        if g > 1:
            cols["se_cl"][idx] = cr1_se(np.sum((Dc[present] - nc[present] * dm) ** 2), n, g)
            cols["se_a_cl"][idx] = cr1_se(np.sum((Ca[present] - nc[present] * xa.mean()) ** 2), n, g)
            cols["se_b_cl"][idx] = cr1_se(np.sum((Cb[present] - nc[present] * xb.mean()) ** 2), n, g)
        if (single[a, common].all() and single[b, common].all() and np.all((xa == 0) | (xa == 1))
                and np.all((xb == 0) | (xb == 1))):
            mcn_ok[idx] = True
            cols["a_only"][idx] = np.sum(xa * (1.0 - xb))
            cols["b_only"][idx] = np.sum((1.0 - xa) * xb)
        if bootstrap:
            boot_jobs.append((int(idx), Dc[present], nc[present]))
    # (c) everything else, vectorised over pairs
    n = cols["n"]
    diff = cols["diff"]
    with np.errstate(invalid="ignore", divide="ignore"):
        se = np.sqrt(cols["vd"] / n)
        se_a, se_b = np.sqrt(cols["va"] / n), np.sqrt(cols["vb"] / n)
        if clustered:
            sec = cols["se_cl"]
            used, ua, ub = sec, cols["se_a_cl"], cols["se_b_cl"]
            pair_df = np.asarray(cluster_df(cols["g"]), dtype=float).reshape(-1)
        else:
            sec = np.full(n_pairs, np.nan)
            used, ua, ub = se, se_a, se_b
            pair_df = np.full(n_pairs, np.nan)
        # the one test and interval: t on G - 1 df for a clustered SE, normal for independent items
        z, p, ci_lo, ci_hi = (np.asarray(v, dtype=float).reshape(-1)
                              for v in mean_test(diff, used, 1 - alpha, pair_df if clustered else None))
        denom = ua ** 2 + ub ** 2
        vratio = np.where(denom > 0, used ** 2 / denom, np.nan)
        va, vb = cols["va"], cols["vb"]
        corr = np.where((va > 0) & (vb > 0), (va + vb - cols["vd"]) / (2.0 * np.sqrt(va * vb)), np.nan)
        corr = np.clip(corr, -1.0, 1.0)
    p_mc = np.full(n_pairs, np.nan)
    if mcn_ok.any():
        p_mc[mcn_ok] = mcnemar_exact_p(np.round(cols["a_only"][mcn_ok]), np.round(cols["b_only"][mcn_ok]))
    a_only = pd.array(np.where(mcn_ok, np.round(cols["a_only"]), np.nan), dtype="Float64").astype("Int64")
    b_only = pd.array(np.where(mcn_ok, np.round(cols["b_only"]), np.nan), dtype="Float64").astype("Int64")
    skipped_unpaired = int(np.nansum(cols["unp"]))
    shared_pairs = [int(i) for i in blk] if bootstrap else []
    ptab = pd.DataFrame({
        "model_a": [names[a] for a in pa], "model_b": [names[b] for b in pb], "n_items": n.astype(np.int64),
        "diff": diff, "se": se, "se_cluster": sec, "ci_low": ci_lo, "ci_high": ci_hi, "df": pair_df,
        "z": z, "p": p, "p_adjusted": np.nan, "p_mcnemar": p_mc, "corr": corr, "variance_ratio": vratio,
        "boot_ci_low": np.nan, "boot_ci_high": np.nan, "n_unpaired": cols["unp"].astype(np.int64),
        "a_only": a_only, "b_only": b_only, "se_a": ua, "se_b": ub, "clusters": cols["g"].astype(np.int64)})
    ptab["p_adjusted"] = p_adjust(ptab["p"].to_numpy(dtype=float), meth)
    if bootstrap:
        nc_all = np.bincount(item_cl, minlength=n_cl).astype(float)
        lo, hi = _bootstrap(pairs, shared_pairs, boot_jobs, C, nc_all, bootstrap, seed, alpha)
        ptab["boot_ci_low"], ptab["boot_ci_high"] = lo, hi

    # ---- repeated samples, notes, skipped
    notes: list[str] = []
    repeated = None
    graded = items.attrs.get("outcome") == "score"
    if graded:
        p_mc = np.full(len(ptab), np.nan)
        ptab["p_mcnemar"] = p_mc
        notes.append("outcome: score (mean graded score per item); p_mcnemar and the repeated-samples table need "
                     "a binary outcome and are left out")
    if (K > 1).any() and not graded:
        repeated = _repeated_table(names, S, K, F)
        for k, m in enumerate(names):
            kk = K[k, F[k]]
            if kk.min() != kk.max():
                notes.append(f"model {m!r}: the number of trials differs across items ({int(kk.min())} to "
                             f"{int(kk.max())}); items are weighted equally, each by the mean of its trials")
    if not shared.all():
        lack = [(m, int(mtab.loc[k, "items_missing"])) for k, m in enumerate(names) if mtab.loc[k, "items_missing"]]
        shown = ", ".join(f"{m} lacks {x:,} of {n_items:,} items ({x / n_items:.1%})" for m, x in lack[:8])
        more = f" and {len(lack) - 8} more" if len(lack) > 8 else ""
        notes.append(f"item sets differ: {shown}{more}; " + (
            f"ranks use accuracy_shared, over the {n_sh:,} items every compared model answered (accuracy, over "
            f"each model's own items, beside it)" if n_sh else
            "no item was answered by every compared model, so ranks use each model's own items (accuracy) and "
            "are not comparable; compare fewer models"))
    invalid = items.attrs.get("invalid") or {}
    inv = [f"{m} {invalid[m]}" for m in names if invalid.get(m)]
    if inv:
        notes.append(f"invalid answers counted as {'score 0' if graded else 'not correct'}: {', '.join(inv)}")
    if np.isnan(p_mc).any() and (K > 1).any() and not graded:
        notes.append("p_mcnemar is null for pairs with repeated trials (the exact McNemar test needs one binary "
                     "answer per item)")
    if clustered:
        notes.append(f"clustered SEs: CR sandwich with the small-sample factor G/(G-1) on the variance, G = clusters "
                     f"({n_cl} in all); intervals and p-values use a t critical value on G - 1 df")
        few = few_clusters_note(mtab["clusters"].to_numpy(dtype=float), [str(m) for m in mtab["model"]])
        if few is None and n_pairs:
            few = few_clusters_note(cols["g"], [f"{names[a]} - {names[b]}" for a, b in pairs])
        if few:
            notes.append(few)
    skipped = dict(items.attrs.get("skipped", {}) or {})
    if skipped_unpaired:
        skipped[_UNPAIRED] = skipped_unpaired
    return CompareResult(models=mtab, pairs=ptab, adjust=meth, cluster=cluster_name if clustered else None,
                         alpha=float(alpha), bootstrap=int(bootstrap), seed=seed, repeated=repeated,
                         skipped=skipped, notes=tuple(notes), outcome="score" if graded else "correct")


def _repeated_table(names: list[str], S: np.ndarray, K: np.ndarray, F: np.ndarray) -> pd.DataFrame:
    rows = []
    for k, m in enumerate(names):
        s, kk = S[k, F[k]], K[k, F[k]].astype(float)
        n = len(s)
        multi = kk >= 2
        sig2 = np.where(multi, kk / np.maximum(kk - 1, 1) * s * (1 - s), np.nan)
        within = float(np.nanmean(sig2)) if multi.any() else float("nan")
        var_s = float(np.var(s, ddof=1)) if n > 1 else float("nan")
        e_sig_k = float(np.mean(np.where(multi, sig2 / kk, 0.0))) if multi.any() else float("nan")
        between = max(var_s - e_sig_k, 0.0) if not math.isnan(e_sig_k) else float("nan")
        se = math.sqrt(var_s / n) if n > 1 else float("nan")
        se_single = math.sqrt((between + within) / n) if not math.isnan(within) else float("nan")
        rows.append({"model": m, "n_items": n, "trials_mean": float(kk.mean()), "trials_min": int(kk.min()),
                     "trials_max": int(kk.max()), "within_var": within, "between_var": between, "se": se,
                     "se_single": se_single,
                     "se_reduction": 1 - se / se_single if se_single and se_single > 0 else float("nan")})
    return pd.DataFrame(rows)


def _bootstrap(pairs: list[tuple[int, int]], shared: list[int], jobs: list[tuple[int, np.ndarray, np.ndarray]],
               C: np.ndarray, nc_full: np.ndarray, B: int, seed: int | None,
               alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentile cluster-bootstrap CIs of every pair's difference (multinomial cluster weights x cluster sums)."""
    from mrcstats._progress import progress

    rng = seed_rng(seed)
    lo = np.full(len(pairs), np.nan)
    hi = np.full(len(pairs), np.nan)
    q = [alpha / 2, 1 - alpha / 2]
    block = 250
    bar = progress(total=(len(shared) > 0) * B + len(jobs), desc="bootstrap", unit="rs")
    if shared:
        nc = nc_full
        keep = nc > 0
        nc_k = nc[keep]
        G = int(keep.sum())
        Ck = C[:, keep]
        a_idx = np.array([pairs[i][0] for i in shared])
        b_idx = np.array([pairs[i][1] for i in shared])
        draws = np.empty((B, len(shared)))
        for start in range(0, B, block):
            nb = min(block, B - start)
            W = rng.multinomial(G, np.full(G, 1.0 / G), size=nb).astype(float)
            T = W @ Ck.T                       # nb x models: resampled cluster sums
            den = W @ nc_k                      # nb: resampled item counts
            draws[start:start + nb] = (T[:, a_idx] - T[:, b_idx]) / den[:, None]
            bar.update(nb)
        qs = np.quantile(draws, q, axis=0)
        lo[shared], hi[shared] = qs[0], qs[1]
    for idx, Dc, nc in jobs:
        G = len(Dc)
        W = rng.multinomial(G, np.full(G, 1.0 / G), size=B).astype(float)
        vals = (W @ Dc) / (W @ nc)
        lo[idx], hi[idx] = np.quantile(vals, q)
        bar.update(1)
    bar.close()
    return lo, hi
