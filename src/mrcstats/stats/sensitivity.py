"""Prompt sensitivity: each model's score across prompt templates, and how stable the ranking is across templates.

A log with several templates per item (a ``prompt`` column, or ``condition``, or any column named by ``over``)
gives a score ``s_mt`` for model ``m`` under template ``t``: its mean outcome over the items (0/1 correctness or
the graded score; invalid answers count as 0; several trials of a cell are averaged with the item's other rows).

**Each model's distribution across templates** (PromptEval, Maia Polo et al. 2024, arXiv:2405.17202, report
the same quantiles from an estimated distribution over many templates; here the templates of the log): the
mean, the SD across templates, and the quantiles ``q_p`` (``p`` in 0, .25, .5, .75, 1; R's ``quantile`` type 7)
of ``s_m1..s_mT``, and the range ``q_1 − q_0`` -- how far the template alone moves the score. Their CIs are
percentile intervals of a bootstrap over items (Efron & Tibshirani 1993, §13): an item is drawn with all its
rows (every model and template), so the CIs keep the pairing of templates and models on the same items.
They describe these templates; they are not a sample-of-templates inference.

**Rank stability across templates.**

* Kendall's coefficient of concordance ``W`` of the models' rankings under the ``T`` templates (templates as
  judges, the ``n`` models as objects; Kendall & Babington Smith 1939; with the tie correction of Siegel &
  Castellan 1988, §9.4): ``R_m = Σ_t rank_t(m)`` (ranks 1..n, mid-ranks for ties),
  ``S = Σ_m (R_m − T(n + 1)/2)²``, ``W = 12 S / (T²(n³ − n) − T Σ_t Σ_g (τ_g³ − τ_g))`` (``τ_g`` the size of each
  tie group within a template). ``W = 1``: every template orders the models alike; ``W = 0``: no agreement.
  Friedman's ``χ² = T(n − 1)W`` on ``n − 1`` df tests ``W = 0``.
* The pairwise concordance: the share of (template pair, model pair) combinations in which both templates order
  the two models the same way (a tie in either template counts half) -- the probability that switching the
  template keeps the order of two models; per model pair as well.
* Each model's rank range across templates.

``W`` and the concordance get the same item-bootstrap CIs.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from mrcstats._jsonout import plain_records
from mrcstats._repr import Result
from mrcstats.errors import InputError

__all__ = ["QUANTILES", "SENSITIVITY_FIELDS", "SensitivityResult", "kendall_w", "pair_concordance", "sensitivity"]

#: the quantiles of each model's scores across templates
QUANTILES: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0)
#: the columns of ``SensitivityResult.models``
SENSITIVITY_FIELDS = ("model", "templates", "mean", "sd", "q0", "q25", "q50", "q75", "q100", "range", "q0_low",
                      "q0_high", "q50_low", "q50_high", "q100_low", "q100_high", "range_low", "range_high",
                      "rank_min", "rank_max")


def _ranks(scores: np.ndarray) -> np.ndarray:
    """Ranks (1 = best) of each column's models along axis -2 (models), mid-ranks for ties: ``(..., n, T)``."""
    from scipy.stats import rankdata

    return rankdata(-scores, axis=-2, method="average")


def kendall_w(scores: np.ndarray) -> tuple[Any, Any, Any]:
    """Kendall's ``W`` with the tie correction (module docstring) of a models × templates score matrix ``scores``
    (or a ``(B, n, T)`` stack of them), Friedman's ``χ²`` and its p-value: ``(W, chi2, p)`` (floats, or arrays for
    a stack). A tie group of size ``τ`` holds ``τ`` models each tied with ``τ`` (itself included), so
    ``Σ_g (τ_g³ − τ_g) = Σ_m (c_m² − 1)`` with ``c_m`` the models tied with ``m``."""
    from scipy.stats import chi2 as chi2_dist

    s = np.asarray(scores, dtype=float)
    n, T = s.shape[-2:]
    if n < 2 or T < 2:
        nan = np.full(s.shape[:-2], np.nan)
        return (float("nan"),) * 3 if s.ndim == 2 else (nan, nan, nan)    # type: ignore[return-value]
    r = _ranks(s)
    R = r.sum(axis=-1)
    S = ((R - T * (n + 1) / 2) ** 2).sum(axis=-1)
    c = (r[..., :, None, :] == r[..., None, :, :]).sum(axis=-2)           # (..., n, T): models tied with m
    ties = (c.astype(float) ** 2 - 1).sum(axis=(-2, -1))
    den = T * T * (n ** 3 - n) - T * ties
    with np.errstate(invalid="ignore", divide="ignore"):
        w = np.where(den > 0, 12 * S / np.where(den > 0, den, 1), np.nan)
    chi2 = T * (n - 1) * w
    p = chi2_dist.sf(chi2, n - 1)
    if s.ndim == 2:
        return float(w), float(chi2), float(p)
    return w, chi2, p


def pair_concordance(scores: np.ndarray) -> tuple[float, np.ndarray]:
    """The share of (template pair, model pair) combinations ordered alike (a tie counts half), overall and per
    model pair (``n × n``, NaN on the diagonal), from a models × templates (or ``(B, n, T)``) score array."""
    s = np.asarray(scores, dtype=float)
    sign = np.sign(s[..., :, None, :] - s[..., None, :, :])             # (..., n, n, T)
    T = s.shape[-1]
    iu, ju = np.triu_indices(T, 1)
    prod = sign[..., iu] * sign[..., ju]                                   # (..., n, n, T(T-1)/2)
    agree = np.where(prod > 0, 1.0, np.where(prod < 0, 0.0, 0.5))
    per = agree.mean(axis=-1)
    n = s.shape[-2]
    a, b = np.triu_indices(n, 1)
    overall = per[..., a, b].mean(axis=-1)
    eye = np.eye(n, dtype=bool)
    per = np.where(eye, np.nan, per)
    return overall, per


@dataclass(frozen=True, repr=False)
class SensitivityResult(Result):
    """Prompt sensitivity (module docstring): ``models`` (:data:`SENSITIVITY_FIELDS`), ``scores`` (models ×
    templates), ``pairs`` (model pairs: the share of template pairs ordering them alike), Kendall's ``w`` with
    its CI and Friedman's test, and the overall pairwise ``concordance`` with its CI."""

    models: pd.DataFrame = field(repr=False)
    scores: pd.DataFrame = field(repr=False)
    pairs: pd.DataFrame = field(repr=False)
    over: str = "prompt"
    by: str = "model"
    n_items: int = 0
    w: float = float("nan")
    w_low: float = float("nan")
    w_high: float = float("nan")
    chi2: float = float("nan")
    df: int = 0
    p: float = float("nan")
    concordance: float = float("nan")
    concordance_low: float = float("nan")
    concordance_high: float = float("nan")
    level: float = 0.95
    bootstrap: int = 1000
    seed: int | None = 0
    outcome: str = "correct"
    notes: tuple = ()

    def to_frame(self) -> pd.DataFrame:
        return self.models.copy()

    def to_dict(self) -> dict[str, Any]:
        """``{"over", "by", "n_items", "templates", "level", "bootstrap", "seed", "outcome", "models": [...],
        "scores": {model: {template: score}}, "kendall_w": {"estimate", "ci_low", "ci_high", "chi2", "df", "p"},
        "concordance": {"estimate", "ci_low", "ci_high"}, "pairs": [...], "notes"}``."""
        def v(x: float) -> float | None:
            return None if isinstance(x, float) and math.isnan(x) else x

        return {"over": self.over, "by": self.by, "n_items": self.n_items, "templates": list(self.scores.columns),
                "level": self.level, "bootstrap": self.bootstrap, "seed": self.seed, "outcome": self.outcome,
                "models": plain_records(self.models[list(SENSITIVITY_FIELDS)]),
                "scores": {str(m): {str(t): float(x) for t, x in row.items()} for m, row in self.scores.iterrows()},
                "kendall_w": {"estimate": v(self.w), "ci_low": v(self.w_low), "ci_high": v(self.w_high),
                              "chi2": v(self.chi2), "df": self.df, "p": v(self.p)},
                "concordance": {"estimate": v(self.concordance), "ci_low": v(self.concordance_low),
                                "ci_high": v(self.concordance_high)},
                "pairs": plain_records(self.pairs), "notes": list(self.notes)}

    def summary(self) -> str:
        from mrcstats._pformat import p_clause

        def f(x: float) -> str:
            return f"{x:.4f}" if math.isfinite(x) else "NA"

        lvl = f"{100 * self.level:g}%"
        T = self.scores.shape[1]
        lines = [(f"Prompt sensitivity over {self.over!r} ({T} templates, {self.n_items} items): each {self.by}'s "
                 f"{'mean score' if self.outcome == 'score' else 'accuracy'} across templates, with {lvl} CIs from "
                  f"a bootstrap over items (B = {self.bootstrap}, seed = {self.seed})")]
        for r in self.models.itertuples(index=False):
            lines.append(f"  {r.model}: mean {f(r.mean)}, SD {f(r.sd)}; min {f(r.q0)} [{f(r.q0_low)}, {f(r.q0_high)}], "
                         f"median {f(r.q50)} [{f(r.q50_low)}, {f(r.q50_high)}], max {f(r.q100)} [{f(r.q100_low)}, "
                         f"{f(r.q100_high)}]; range {f(r.range)} [{f(r.range_low)}, {f(r.range_high)}]; rank "
                         f"{r.rank_min:g}..{r.rank_max:g}")
        lines.append(f"Rank stability across templates: Kendall's W = {f(self.w)} [{f(self.w_low)}, {f(self.w_high)}] "
                     f"(Friedman chi2 = {f(self.chi2)} on {self.df} df, {p_clause(self.p)}); template pairs "
                     f"ordering two {self.by}s alike: {f(self.concordance)} [{f(self.concordance_low)}, "
                     f"{f(self.concordance_high)}]")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def _quantiles(x: np.ndarray) -> np.ndarray:
    """R's type-7 quantiles :data:`QUANTILES` along the last axis (NaN-free input)."""
    return np.quantile(x, QUANTILES, axis=-1)


def sensitivity(log: pd.DataFrame, over: str = "prompt", *, by: str = "model", outcome: str = "auto",
                level: float = 0.95, bootstrap: int = 1000, seed: int | None = 0) -> SensitivityResult:
    """Each model's score distribution across prompt templates and the rank stability across templates (module
    docstring).

    Args:
        log: a canonical log (or a log dataset) with several templates per item in column ``over``.
        over: the template column (``prompt``, ``condition``, ...).
        by: the compared units (``model``).
        outcome: ``"auto"``, ``"correct"`` or ``"score"``.
        level: the CIs' coverage.
        bootstrap: item-bootstrap resamples for the CIs (0: none).
        seed: the bootstrap's seed.

    Raises:
        InputError: a missing or empty column, fewer than two templates or models, a model without a score
            under some template, a bad level or bootstrap.
    """
    from mrcstats._seeds import check_seed, stream
    from mrcstats.backends.passes import dataset_pass
    from mrcstats.io.schema import outcome_values, require_log, resolve_outcome
    from mrcstats.stats.variance import check_over_by

    if (rows := dataset_pass(log)) is not None:      # a dataset folder: the rows in memory
        log = rows.to_frame()
    log = require_log(log, "sensitivity")
    check_over_by(log, over, by, "sensitivity")
    if not (isinstance(level, (int, float)) and not isinstance(level, bool) and 0 < level < 1):
        raise InputError(f"level must be a number between 0 and 1, got {level!r}")
    if isinstance(bootstrap, bool) or not isinstance(bootstrap, (int, np.integer)) or bootstrap < 0:
        raise InputError(f"bootstrap must be a whole number >= 0, got {bootstrap!r}")
    check_seed(seed)
    used = resolve_outcome(log, outcome, "sensitivity")
    val = outcome_values(log, used)
    invalid = int(val.isna().sum())
    y = val.to_numpy(dtype=float, na_value=0.0)
    mcode, models = pd.factorize(log[by].astype(str), sort=True)
    tcode, temps = pd.factorize(log[over].astype(str), sort=True)
    icode, items = pd.factorize(log["item"].astype(str))
    n, T, I = len(models), len(temps), len(items)
    if T < 2:
        raise InputError(f"sensitivity: {over!r} has one level ({temps[0]!r}); the spread across templates needs "
                         "at least two")
    if n < 2:
        raise InputError(f"sensitivity: {by!r} has one level ({models[0]!r}); rank stability needs two")
    cell = mcode * T + tcode
    S = np.zeros((n * T, I))
    C = np.zeros((n * T, I))
    np.add.at(S, (cell, icode), y)
    np.add.at(C, (cell, icode), 1.0)
    tot = C.sum(axis=1).reshape(n, T)
    if (tot == 0).any():
        m, t = np.argwhere(tot == 0)[0]
        raise InputError(f"sensitivity: {by} {models[m]!r} has no answer under {over} {temps[t]!r}; every {by} "
                         f"needs a score under every template (leave the {by} or the template out)")
    s = (S.sum(axis=1) / C.sum(axis=1)).reshape(n, T)
    q = _quantiles(s)                                                   # (5, n)
    r = _ranks(s)
    w, chi2, p = kendall_w(s)
    conc, per = pair_concordance(s)
    a = 1 - float(level)
    boot_q = boot_w = boot_c = None
    if bootstrap:
        rng = stream(seed, "sensitivity", "items")
        boot_q = np.empty((bootstrap, len(QUANTILES), n))
        boot_w = np.empty(bootstrap)
        boot_c = np.empty(bootstrap)
        for start in range(0, bootstrap, 100):
            b = min(100, bootstrap - start)
            idx = rng.integers(0, I, size=(b, I))
            wts = np.zeros((b, I))
            np.add.at(wts, (np.repeat(np.arange(b), I), idx.ravel()), 1.0)
            with np.errstate(invalid="ignore", divide="ignore"):
                sb = ((wts @ S.T) / (wts @ C.T)).reshape(b, n, T)
            boot_q[start:start + b] = np.moveaxis(_quantiles(sb), 0, 1)
            boot_w[start:start + b] = kendall_w(sb)[0]
            boot_c[start:start + b] = pair_concordance(sb)[0]

    def ci(arr: np.ndarray | None) -> tuple[float, float]:
        if arr is None:
            return float("nan"), float("nan")
        ok = arr[np.isfinite(arr)]
        if len(ok) < len(arr) * 0.9:
            return float("nan"), float("nan")
        lo, hi = np.quantile(ok, [a / 2, 1 - a / 2])
        return float(lo), float(hi)

    rows = []
    for m in range(n):
        row: dict[str, Any] = {"model": str(models[m]), "templates": T, "mean": float(s[m].mean()),
                               "sd": float(s[m].std(ddof=1)), **{f"q{round(100 * pq)}": float(q[k, m])
                                                                 for k, pq in enumerate(QUANTILES)},
                               "range": float(q[-1, m] - q[0, m])}
        for key, k in (("q0", 0), ("q50", 2), ("q100", 4)):
            row[f"{key}_low"], row[f"{key}_high"] = ci(None if boot_q is None else boot_q[:, k, m])
        row["range_low"], row["range_high"] = ci(None if boot_q is None else boot_q[:, 4, m] - boot_q[:, 0, m])
        row["rank_min"], row["rank_max"] = float(r[m].min()), float(r[m].max())
        rows.append(row)
    table = pd.DataFrame(rows, columns=list(SENSITIVITY_FIELDS)).sort_values(["mean", "model"], ascending=[False, True])
    pairs = pd.DataFrame([{"model_a": str(models[i]), "model_b": str(models[j]), "diff": float(s[i].mean() - s[j].mean()),
                           "concordance": float(per[i, j])} for i, j in itertools.combinations(range(n), 2)],
                         columns=["model_a", "model_b", "diff", "concordance"])
    notes = []
    if invalid:
        notes.append(f"{invalid} invalid answer(s) count as 0 (not correct)")
    counts = C.sum(axis=1)
    if len(np.unique(counts)) > 1:
        notes.append(f"unbalanced: the answers per {by} and {over} range from {int(counts.min())} to "
                     f"{int(counts.max())}; each score is the mean over the cell's own answers")
    if T < 5:
        notes.append(f"{T} templates: the quantiles across templates are coarse (min, max and interpolations)")
    wl, wh = ci(boot_w)
    cl, chh = ci(boot_c)
    return SensitivityResult(models=table.reset_index(drop=True),
                             scores=pd.DataFrame(s, index=pd.Index([str(x) for x in models], name=by),
                                                 columns=[str(t) for t in temps]),
                             pairs=pairs, over=over, by=by, n_items=I, w=w, w_low=wl, w_high=wh, chi2=chi2, df=n - 1,
                             p=p, concordance=float(conc), concordance_low=cl, concordance_high=chh,
                             level=float(level), bootstrap=int(bootstrap), seed=seed, outcome=used, notes=tuple(notes))
