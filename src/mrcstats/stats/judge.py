"""An LLM judge against human labels: agreement, and prediction-powered estimates of each model's score.

Rows are responses (one model's answer to one item) with a judge's score ``f_i`` on every row and a
human score ``y_i`` on a labelled subset (the other human cells empty). Per model, with ``N`` rows, ``n``
of them labelled, and ``Δ_i = y_i − f_i`` on the labelled rows:

* judge-only: ``mean(f)`` over the ``N`` rows, SE ``s_f/√N`` -- the judge's scale, biased when the judge is;
* human-only: ``mean(y)`` over the ``n`` labelled rows, SE ``s_y/√n``, its CI with the critical value of the PPI
  rule's interval (``z``, or ``t_{n−1}`` for the cross-fitted rule: one rule per output, so the two widths compare);
* prediction-powered inference for a mean (Angelopoulos, Bates, Fannjiang, Jordan & Zrnic 2023, *Science*
  382:669, §"Mean estimation"): ``θ_PP = mean_N(f) + mean_n(Δ)`` -- the judge's mean corrected by its
  average error on the labelled rows (the rectifier) -- with
  ``var(θ_PP) = s²_f/N + s²_Δ/n + 2·cov(f, Δ)/N``; the last term because the labelled rows are among the
  ``N`` (it is zero in the paper's split into disjoint labelled and unlabelled sets; cov from the
  labelled rows). The CI is ``θ_PP ± z·SE`` (``t_{n−1}`` for the cross-fitted rule below); it is valid when the labelled rows are a random subset of
  the rows and narrower than the human-only one when the judge predicts the human label well.
* the rule for ``λ`` (``ppi=``, :data:`PPI_METHODS`; the name is in every output):

  - ``"plain"``: ``λ = 1``, plain PPI (above); normal critical value ``z``.
  - ``"tuned"``: power tuning (PPI++, Angelopoulos, Duchi & Zrnic 2023, arXiv:2311.01453, §2 "mean
    estimation"): ``θ_λ = λ·mean_N(f) + mean_n(y − λf)`` with ``λ = cov(y, f)/s²_f`` on the labelled rows,
    variance ``λ²s²_f/N + s²_{y−λf}/n + 2λ·cov(f, y − λf)/N``. At that λ the variance is
    ``s²_y/n − (1/n − 1/N)·cov(y, f)²/s²_f``, never above the human-only one. (For the rows target it is the
    regression estimator, Cochran 1977 §7.1.) ``λ`` is fitted on the very rows whose residuals ``y − λf`` give
    the variance, so ``s²_{y−λf}`` is optimistic (λ minimises it in-sample): at n = 50..200 the interval covers
    91-94% instead of 95% on the JUDGE-BENCH labels (docs/agreement.md). Critical value ``z``.
  - ``"crossfit"`` (the default): PPI++ with a cross-fitted ``λ`` (cross-prediction, Zrnic & Candès 2024,
    *PNAS* 121:e2322083121, applied to the tuning parameter; Chernozhukov et al. 2018 for cross-fitting).
    The ``n`` labelled rows are put in a canonical order (sorted by ``(y, f)``: rows with equal scores are
    interchangeable, so the result does not depend on the order of the input rows), shuffled by the seeded
    stream ``stream(seed, "ppi crossfit", <model>)`` (:mod:`mrcstats._seeds`) and cut into ``K = min(5, n)``
    folds of sizes ``n_k`` differing by at most one (``numpy.array_split``). For fold ``k``, ``λ_(−k)`` is the
    slope ``cov(y, f)/s²_f`` on the other folds (1 when they have fewer than two rows or constant ``f``), and
    each row ``i`` of fold ``k`` gets the residual ``d_i = y_i − λ_(−k) f_i``, whose ``λ`` never saw row ``i``.
    With ``λ̄ = Σ_k (n_k/n)·λ_(−k)``,
    ``θ_CF = Σ_k (n_k/n)·λ_(−k)·mean_N(f) + mean_n(d) = λ̄·mean_N(f) + mean_n(d)``, which is unbiased for
    ``E[y]`` for any fixed λ's (``E[d_i] = E[y] − λ_(−k)·E[f]`` and the weights sum to λ̄). Its variance
    (population target) is that of the PPI++ estimator at ``λ̄``, with the out-of-fold residuals:
    ``λ̄²·s²_f/N + s²_d/n + 2λ̄·cov(f, d)/N`` (``cov`` on the labelled rows; the ``f`` term is the
    unlabelled-mean term, the last as above since the labelled rows are among the ``N``); rows target:
    ``(1 − n/N)·s²_d/n``. These treat the λ's as fixed -- the λ_(−k) converge to the same λ* as the
    tuned one, so asymptotically this is PPI++'s variance, but ``s²_d`` is honest at small ``n`` because
    no residual is fitted on its own row. Critical value ``t_{n−1}`` (the SE is dominated by the mean of
    ``n`` residuals): with it the interval covered 93.2-94.7% of the time (same-fold PPI++: 91.6-94.2%) on
    both JUDGE-BENCH data sets at n = 50, 100, 200, narrower than the human-only one except on medical-safety at
    n = 50 (2% wider; benchmarks/bench_judge_agreement.py, docs/agreement.md).
    Deterministic given the seed (``seed=None``: fresh entropy).
* ``target="rows"``: the same ``θ_PP`` read as the mean human score over these ``N`` rows (a finite
  population: the benchmark's own items), of which the labelled rows are a simple random sample. Then
  ``θ_PP − mean_N(y) = mean_n(Δ) − mean_N(Δ)`` and ``var = (1 − n/N)·s²_Δ/n`` -- the difference estimator of
  survey sampling (Cochran 1977, *Sampling Techniques*, 3rd ed., §6.1; Särndal, Swensson & Wretman 1992,
  §6.3); the human-only SE gets the same finite-population factor ``(1 − n/N)``. The default
  ``"population"`` target (the paper's) also counts the sampling of the rows themselves.

Human labels needed for a CI of full width ``W`` (``width=W``; ``v = (W/2q)²``, ``q`` the interval's critical
value), from the variance components of the labelled rows: human-only ``n = s²_y/v`` (rows target:
``1/(v/s²_y + 1/N)``); PPI with the same λ ``n = s²_{y−λf} / (v − (λ²s²_f + 2λ·cov(f, y − λf))/N)`` (rows
target: ``1/(v/s²_{y−λf} + 1/N)``), NA when no number of labels reaches ``W`` (the judge's own sampling error
already exceeds it). ``q`` is the interval's own critical value: ``z``, and for the cross-fitted rule
``t_{n−1}``, solved together with ``n`` (the smallest ``n`` whose interval is at most ``W`` wide); for that rule
``λ`` is λ̄ and ``y − λf`` its out-of-fold residuals.

The agreement of judge and human on the labelled rows is :func:`mrcstats.stats.agreement.agreement`
(two raters: Cohen's κ, α, AC1, ...).

Several judges (``judge=[j_1, …, j_k]``, :class:`JudgePanel`): on the labelled rows each judge's error
``e_j = f_j − y``; their error correlation matrix ``r_{jl}`` (Pearson over the rows) with a percentile
bootstrap CI over the rows (seeded), the mean off-diagonal correlation ``ρ̄`` and the effective number of
independent judges ``k_eff = k / (1 + (k − 1)·ρ̄)`` -- Kish's design effect for ``k`` equally correlated
measurements (Kish 1965, *Survey Sampling*, §5.4; the Spearman–Brown relation): the variance of the mean of
``k`` errors of equal variance and mean correlation ``ρ̄`` is that of the mean of ``k_eff`` independent
ones (six judges with ``ρ̄ = .42`` are worth ``6/3.1 = 1.94``). ``k_eff`` is infinite when
``ρ̄ ≤ −1/(k − 1)``. The panel's score on each row -- the majority label (a tie goes to the label of the
first-listed judge among the tied ones) or the mean score -- is then one judge: its PPI means and its
agreement with the humans are those above, beside each judge's own.

The judge's bias per model (``item=``: the item column; :class:`JudgeBias`): does the judge favour some
models? On the labelled rows two indicators: over-rating ``o_i = 1{f_i > y_i}`` on the rows where the judge
can over-rate (``y_i`` below the top score seen; for 0/1 labels the rows humans call wrong, so its rate is the
judge's false-positive rate), and disagreement ``d_i = 1{f_i ≠ y_i}`` on every labelled row; each fitted as a binomial GLMM with the model as a fixed effect and an item random
intercept (the same item is hard to judge for every model), ``logit P(o_{mi} = 1) = β_m + u_i``,
``u_i ~ N(0, σ²_item)`` (lme4's ``glmer(over ~ 0 + model + (1 | item))``, Laplace; :func:`mrcstats.models.glmer`);
per model ``plogis(β_m)`` -- the rate at an item of average difficulty to judge -- with the Wald CI
``plogis(β_m ± z·SE)``, the marginal rate averaged over the items ``∫ plogis(β_m + σ_item·u) φ(u) du``
(Gauss–Hermite, 40 nodes; its CI the same integral at ``β_m ± z·SE``, σ_item held at its estimate) -- the one to
read beside the observed rate when items differ much (``plogis(β_m)`` then lies far below it) -- and the likelihood-ratio test of ``β_1 = … = β_M`` against ``~ 1 + (1 | item)``
(χ² on ``M − 1`` df; lme4's ``anova``). A judge that favours a model over-rates it more often than the others.
The labels must take a few values (0/1, or a scale): at the interval and ratio levels with fractional scores
``f ≠ y`` almost everywhere and the GLMMs are not fitted. ``σ_item`` is learnt only from items with several labelled
rows: when every item has one it is not identified (lme4 refuses the fit), and the bias is the logistic regression
without the item effect (:func:`_bias_without_items`, :func:`_no_model_effect_lrt`); when the median item has two
or fewer, ``σ_item`` -- and with it ``plogis(β_m)`` -- is unstable (it falls to 0 or jumps with a few labels)
and a note points to the marginal and observed rates.

For scores on a scale (any score other than 0/1: ordinal ratings, or continuous scores) the judge's bias is
also read on the score's own scale: the signed difference ``e_i = f_i − y_i`` on the labelled rows fitted as a
linear mixed model ``e_{mi} = δ_m + u_i + ε_{mi}``, ``u_i ~ N(0, σ²_item)``, ``ε ~ N(0, σ²)`` (lme4's
``lmer(diff ~ 0 + model + (1 | item))``, REML; :func:`mrcstats.models.lmer`; :class:`JudgeBias`'s ``shift``):
per model ``δ_m`` -- how much the judge over-scores that model's answers at an item of average judging
difficulty (0: no bias) -- with its SE, Satterthwaite df and ``t``-interval (lmerTest's ``summary``;
Kuznetsova, Brockhoff & Christensen 2017), and the F test of ``δ_1 = … = δ_M`` (lmerTest's
``anova(lmer(diff ~ model + (1 | item)))``, Satterthwaite denominator df). A judge that favours a model
over-scores it more than the others.

Calibration (:func:`calibration`): on the labelled rows, the judge's score cut into bins (each distinct score
its own bin when there are at most ``bins`` of them, else ``bins`` quantile bins), and per bin the mean judge
score and the mean human score with a CI -- Wilson's score interval for 0/1 human labels (Wilson 1927), else
the normal interval ``mean ± z·s/√n``. A calibrated judge's points lie on the diagonal.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from mrcstats._jsonout import plain_records
from mrcstats._repr import Result
from mrcstats.errors import InputError
from mrcstats.stats.agreement import AgreementResult, agreement

__all__ = [
    "BIAS_FIELDS",
    "BIAS_OUTCOMES",
    "BIAS_TEST_FIELDS",
    "CALIBRATION_FIELDS",
    "COMBINE",
    "HUMAN_CI_RULE",
    "JUDGE_FIELDS",
    "PAIR_FIELDS",
    "PPI_FOLDS",
    "PPI_METHODS",
    "PPI_RULES",
    "SHIFT_FIELDS",
    "SHIFT_TEST_FIELDS",
    "TARGETS",
    "JudgeBias",
    "JudgePanel",
    "JudgeResult",
    "calibration",
    "effective_judges",
    "error_correlation",
    "judge",
    "judge_bias",
    "labels_needed",
    "normal_critical",
    "panel_scores",
    "ppi_critical",
    "ppi_lambdas",
    "ppi_mean",
]

#: the columns of ``judge(...).table``
JUDGE_FIELDS = ("model", "n", "n_labelled", "judge_mean", "judge_se", "judge_low", "judge_high", "human_mean",
                "human_se", "human_low", "human_high", "rectifier", "ppi_lambda", "ppi_mean", "ppi_se", "ppi_low",
                "ppi_high", "ppi_method", "n_for_width_human", "n_for_width_ppi")


TARGETS = ("population", "rows")
#: the rules for the PPI weight λ (module docstring): λ = 1, PPI++ tuned on the labelled rows, PPI++ cross-fitted
PPI_METHODS = ("plain", "tuned", "crossfit")
#: folds of the cross-fitted λ
PPI_FOLDS = 5
#: each rule's name as the outputs print it
PPI_RULES = {"plain": "PPI (lambda = 1, normal CI)",
             "tuned": "PPI++ (lambda tuned on the labelled rows, normal CI)",
             "crossfit": f"PPI++ cross-fit (lambda from {PPI_FOLDS} folds of the labelled rows, t(n-1) CI)"}
#: the human-only CI's rule, named beside the PPI rule wherever the two CIs are shown (:func:`ppi_critical`)
HUMAN_CI_RULE = "the human-only CI with the rule's critical value"
#: how several judges' scores become the panel's
COMBINE = ("majority", "mean")
#: the columns of ``JudgePanel.pairs``
PAIR_FIELDS = ("judge_a", "judge_b", "r", "ci_low", "ci_high", "n")
#: the columns of :func:`calibration`
CALIBRATION_FIELDS = ("bin", "n", "judge_low", "judge_high", "judge_mean", "human_mean", "ci_low", "ci_high")
#: the indicators of the judge's bias per model: over-rating (judge > human) and disagreement (judge ≠ human)
BIAS_OUTCOMES = ("over", "disagree")
#: the columns of ``JudgeBias.table`` (one row per outcome and model)
BIAS_FIELDS = ("outcome", "model", "n", "count", "rate", "logit", "se", "prob", "prob_low", "prob_high", "marginal",
               "marginal_low", "marginal_high")
#: the columns of ``JudgeBias.tests`` (one row per outcome: the LRT of no model effect)
BIAS_TEST_FIELDS = ("outcome", "chisq", "df", "p", "sd_item", "n", "n_items")
#: the columns of ``JudgeBias.shift`` (scores on a scale: one row per model, the LMM of judge − human)
SHIFT_FIELDS = ("model", "n", "mean_diff", "estimate", "se", "df", "ci_low", "ci_high")
#: the keys of ``JudgeBias.shift_test`` (the F test of no model effect in that LMM)
SHIFT_TEST_FIELDS = ("F", "num_df", "den_df", "p", "sd_item", "sd_resid", "n", "n_items")


def effective_judges(k: int, rho: float) -> float:
    """Kish's design effect for ``k`` judges with mean error correlation ``rho``: ``k / (1 + (k − 1)·rho)``
    independent judges (module docstring); ``inf`` when ``1 + (k − 1)·rho ≤ 0``, NaN for an undefined ``rho``."""
    if not math.isfinite(rho):
        return float("nan")
    den = 1.0 + (k - 1) * rho
    return float(k / den) if den > 0 else float("inf")


def _weighted_corr(e: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Pearson correlation matrices of the columns of ``e`` (n × k) under each row of resampling counts ``w``
    (B × n): ``(B, k, k)``, NaN where a column does not vary."""
    tot = w.sum(axis=1)[:, None]
    mean = (w @ e) / tot                                                      # B × k
    second = np.einsum("bn,nj,nl->bjl", w, e, e) / tot[:, :, None]            # B × k × k
    cov = second - mean[:, :, None] * mean[:, None, :]
    sd = np.sqrt(np.clip(np.einsum("bjj->bj", cov), 0, None))
    with np.errstate(divide="ignore", invalid="ignore"):
        r = cov / (sd[:, :, None] * sd[:, None, :])
    tiny = sd <= 1e-12 * (1 + np.abs(mean))
    r[np.broadcast_to(tiny[:, :, None] | tiny[:, None, :], r.shape)] = np.nan
    return np.clip(r, -1, 1)


def _mean_offdiag(r: np.ndarray) -> np.ndarray:
    k = r.shape[-1]
    iu = np.triu_indices(k, 1)
    v = r[..., iu[0], iu[1]]
    out = np.full(v.shape[:-1], np.nan)
    ok = np.isfinite(v).all(axis=-1)
    out[ok] = v[ok].mean(axis=-1)
    return out


def error_correlation(errors: np.ndarray, names: Any, *, bootstrap: int = 1000, seed: int | None = 0,
                      alpha: float = 0.05) -> tuple[pd.DataFrame, pd.DataFrame, tuple[float, float, float],
                                                    tuple[float, float, float]]:
    """The judges' error correlation (module docstring) from ``errors`` (rows × judges, ``f_j − y``):
    ``(matrix, pairs, (ρ̄, low, high), (k_eff, low, high))``; ``pairs`` has :data:`PAIR_FIELDS`; the CIs are
    percentile intervals of ``bootstrap`` resamples of the rows (``seed``'s own stream), NA with 0."""
    from mrcstats._seeds import stream
    from mrcstats.stats.agreement import percentile_interval

    e = np.asarray(errors, dtype=float)
    n, k = e.shape
    names = [str(x) for x in names]
    r = _weighted_corr(e, np.ones((1, n)))[0]
    np.fill_diagonal(r, np.where(np.isfinite(np.diag(r)), 1.0, np.nan))
    rho = float(_mean_offdiag(r))
    keff = effective_judges(k, rho)
    boot_r = boot_rho = None
    if bootstrap:
        idx = stream(seed, "judge", "error_correlation").integers(0, n, size=(bootstrap, n))
        w = np.zeros((bootstrap, n))
        np.add.at(w, (np.repeat(np.arange(bootstrap), n), idx.ravel()), 1.0)
        boot_r = np.empty((bootstrap, k, k))
        for s in range(0, bootstrap, 200):                                   # (memory: 200 resamples at a time)
            boot_r[s:s + 200] = _weighted_corr(e, w[s:s + 200])
        boot_rho = _mean_offdiag(boot_r)
    pairs = []
    for a in range(k):
        for b in range(a + 1, k):
            lo = hi = float("nan")
            if boot_r is not None:
                _, lo, hi = percentile_interval(boot_r[:, a, b], alpha)
            pairs.append({"judge_a": names[a], "judge_b": names[b], "r": float(r[a, b]), "ci_low": lo,
                          "ci_high": hi, "n": n})
    rlo = rhi = float("nan")
    if boot_rho is not None:
        _, rlo, rhi = percentile_interval(boot_rho, alpha)
    matrix = pd.DataFrame(r, index=pd.Index(names, name="judge"), columns=names)
    return (matrix, pd.DataFrame(pairs, columns=list(PAIR_FIELDS)), (rho, rlo, rhi),
            (keff, effective_judges(k, rhi), effective_judges(k, rlo)))


def panel_scores(scores: np.ndarray, combine: str) -> tuple[np.ndarray, int]:
    """The panel's score per row from ``scores`` (rows × judges, every cell scored): the mean, or the most
    frequent score with a tie going to the first-listed judge's score among the tied ones; and the number of
    tied rows."""
    s = np.asarray(scores, dtype=float)
    if combine == "mean":
        return s.mean(axis=1), 0
    if combine != "majority":
        raise InputError(f"combine must be one of {', '.join(COMBINE)}; got {combine!r}")
    count = (s[:, :, None] == s[:, None, :]).sum(axis=2)                      # votes for each judge's score
    top = count.max(axis=1)
    first = np.argmax(count == top[:, None], axis=1)                          # first judge holding a top score
    chosen = s[np.arange(len(s)), first]
    tied = int(((count == top[:, None]) & (s != chosen[:, None])).any(axis=1).sum())
    return chosen, tied


def labels_needed(width: float, method: str, N: int, s2: float, fixed: float = 0.0, target: str = "population",
                  alpha: float = 0.05) -> float:
    """Labelled rows for a CI of full ``width`` (module docstring) under the interval rule of ``method``
    (:func:`ppi_critical`: ``z``, or ``t_{n−1}`` for "crossfit", the same critical value the interval uses):
    ``s2`` the variance of the labelled term (``y``, or ``y − λf``), ``fixed`` the variance that does not shrink
    with labels (``(λ²s²_f + 2λ·cov)/N``, population target only); NaN when unreachable. With ``t_{n−1}`` the
    smallest ``n`` with ``t_{n−1}·SE(n) ≤ width/2`` is found from the ``z`` answer upwards (``n ↦ n(t_{n−1})`` is
    increasing from below and reaches its least fixed point in a few steps)."""
    if not (math.isfinite(s2) and s2 >= 0) or N < 1:
        return float("nan")
    if s2 == 0:
        return 2.0

    def need(q: float) -> float:
        v = (width / (2 * q)) ** 2
        if target == "rows":
            return float(min(N, math.ceil(1 / (v / s2 + 1 / N))))
        room = v - fixed
        return float(math.ceil(s2 / room)) if room > 0 else float("nan")

    n = need(normal_critical(alpha))                              # z: a lower bound
    if _check_method(method) != "crossfit":
        return n
    for _ in range(100):
        if not math.isfinite(n):
            return n
        nxt = need(ppi_critical(method, max(int(n), 2), alpha))
        if nxt <= n:
            return n
        n = nxt
    return n  # pragma: no cover


def _slope(f: np.ndarray, y: np.ndarray) -> float:
    """PPI++'s λ for a mean, ``cov(y, f)/s²_f`` (1 when ``f`` has fewer than two rows or does not vary)."""
    if len(f) < 2:
        return 1.0
    v = float(f.var(ddof=1))
    return float(np.cov(y, f, ddof=1)[0, 1] / v) if v > 0 else 1.0


def _check_method(method: str) -> str:
    if method not in PPI_METHODS:
        raise InputError(f"ppi must be one of {', '.join(PPI_METHODS)}; got {method!r}")
    return method


def ppi_lambdas(f_lab: np.ndarray, y_lab: np.ndarray, method: str = "crossfit", *, folds: int = PPI_FOLDS,
                seed: int | None = 0, key: object = "") -> np.ndarray:
    """The λ each labelled row's residual ``y_i − λ_i f_i`` uses under ``method`` (module docstring): all 1
    ("plain"), all the slope on the labelled rows ("tuned"), or the slope on the other folds ("crossfit":
    canonical order by ``(y, f)``, shuffled by ``stream(seed, "ppi crossfit", key)``, ``min(folds, n)``
    folds)."""
    from mrcstats._seeds import stream

    _check_method(method)
    f_lab, y_lab = np.asarray(f_lab, dtype=float), np.asarray(y_lab, dtype=float)
    n = len(y_lab)
    if method == "plain" or n < 2:
        return np.ones(n)
    if method == "tuned":
        return np.full(n, _slope(f_lab, y_lab))
    canon = np.lexsort((f_lab, y_lab))
    order = canon[stream(seed, "ppi crossfit", key).permutation(n)]
    lam = np.empty(n)
    for part in np.array_split(order, min(int(folds), n)):
        other = np.ones(n, dtype=bool)
        other[part] = False
        lam[part] = _slope(f_lab[other], y_lab[other])
    return lam


def normal_critical(alpha: float = 0.05) -> float:
    """``z_{1−α/2}`` = Φ⁻¹(1 − α/2), the two-sided normal critical value (1.959963984540054 at α = 0.05): the one
    z of the judge code (the plain and tuned PPI rules, ``labels_needed``'s lower bound, the calibration's normal
    intervals, the bias intervals); ``t_{n−1}`` for the cross-fitted rule is :func:`ppi_critical`'s."""
    from mrcstats._dist import norm_ppf

    return float(norm_ppf(1 - alpha / 2))


def ppi_critical(method: str, n: int, alpha: float = 0.05) -> float:
    """The critical value of the PPI interval ``θ ± q·SE`` under ``method``: ``t_{n−1}`` for "crossfit" (NaN
    below two rows), else the normal ``z`` (:func:`normal_critical`; module docstring)."""
    from mrcstats._dist import t_ppf

    if _check_method(method) == "crossfit":
        return float(t_ppf(1 - alpha / 2, n - 1)) if n >= 2 else float("nan")
    return normal_critical(alpha)


def _ppi_fit(f_all: np.ndarray, f_lab: np.ndarray, y_lab: np.ndarray, target: str, method: str, folds: int,
             seed: int | None, key: object) -> tuple[float, float, float, np.ndarray]:
    """``(θ, SE, λ̄, d)`` with ``d`` the labelled rows' residuals ``y_i − λ_i f_i``."""
    if target not in TARGETS:
        raise InputError(f"target must be one of {', '.join(TARGETS)}; got {target!r}")
    f_all, f_lab, y_lab = (np.asarray(v, dtype=float) for v in (f_all, f_lab, y_lab))
    N, n = len(f_all), len(y_lab)
    lams = ppi_lambdas(f_lab, y_lab, method, folds=folds, seed=seed, key=key)
    lam = float(lams.mean()) if n else 1.0
    d = y_lab - lams * f_lab
    est = float(lam * f_all.mean() + d.mean())
    if n < 2 or N < 2:
        return est, float("nan"), lam, d
    if target == "rows":
        var = (1 - n / N) * d.var(ddof=1) / n
    else:
        var = ppi_fixed_variance(f_all, f_lab, d, lam) + d.var(ddof=1) / n
    return est, float(math.sqrt(max(var, 0.0))), lam, d


def ppi_fixed_variance(f_all: np.ndarray, f_lab: np.ndarray, d: np.ndarray, lam: float) -> float:
    """The part of the population-target PPI variance that does not shrink with more labels,
    ``(λ²·s²_f + 2λ·cov(f_lab, d))/N`` (``d`` the labelled residuals; module docstring): the SE's and the
    labels-for-a-width's one formula."""
    N = len(f_all)
    return float((lam * lam * f_all.var(ddof=1) + 2 * lam * float(np.cov(f_lab, d, ddof=1)[0, 1])) / N)


def ppi_mean(f_all: np.ndarray, f_lab: np.ndarray, y_lab: np.ndarray, target: str = "population",
             method: str = "crossfit", *, folds: int = PPI_FOLDS, seed: int | None = 0,
             key: object = "") -> tuple[float, float, float]:
    """``(θ, SE, λ)`` of the prediction-powered mean (module docstring) from the judge's scores on all rows
    (``f_all``) and the judge's and humans' scores on the labelled rows (a subset of them); ``target``
    "population" (Angelopoulos et al. 2023) or "rows" (the mean over these rows; Cochran's difference
    estimator); ``method`` the rule for λ (:data:`PPI_METHODS`: "plain" λ = 1, "tuned" PPI++, "crossfit" PPI++
    with λ cross-fitted over ``folds`` seeded folds, ``key`` naming the stream, e.g. the model); ``λ`` returned
    is λ̄, the fold-size-weighted mean of the λ's for "crossfit". The interval is ``θ ± q·SE`` with
    ``q = ppi_critical(method, n, alpha)``."""
    est, se, lam, _ = _ppi_fit(f_all, f_lab, y_lab, target, _check_method(method), folds, seed, key)
    return est, se, lam


def _num(v: float) -> str:
    return f"{v:.4f}" if isinstance(v, float) and math.isfinite(v) else ("inf" if v == math.inf else "NA")


@dataclass(frozen=True, repr=False)
class JudgeBias(Result):
    """The judge's bias per model (module docstring): ``table`` (:data:`BIAS_FIELDS`: per outcome and model the
    labelled rows, the observed count and rate, the GLMM's log-odds ``β_m`` with its SE, and ``plogis(β_m)`` with
    its Wald CI) and ``tests`` (:data:`BIAS_TEST_FIELDS`: the likelihood-ratio test of no model effect and the
    item SD), from ``glmer(<outcome> ~ 0 + model + (1 | item))`` on the labelled rows."""

    table: pd.DataFrame = field(repr=False)
    tests: pd.DataFrame = field(repr=False)
    item: str = "item"
    alpha: float = 0.05
    notes: tuple = ()
    shift: pd.DataFrame | None = field(default=None, repr=False)
    shift_test: dict | None = field(default=None, repr=False)

    def to_frame(self) -> pd.DataFrame:
        return self.table.copy()

    def to_dict(self) -> dict[str, Any]:
        """``{"item", "alpha", "formula", "models": [{outcome, model, n, count, rate, logit, se, prob, prob_low,
        prob_high, marginal, marginal_low, marginal_high}], "tests": [{outcome, chisq, df, p, sd_item, n, n_items}],
        "notes"}``, and for scores on a scale ``"shift": {"formula", "models": [{model, n, mean_diff, estimate, se,
        df, ci_low, ci_high}], "test": {F, num_df, den_df, p, sd_item, sd_resid, n, n_items}}``."""
        out = {"item": self.item, "alpha": self.alpha, "formula": "<outcome> ~ 0 + model + (1 | item)",
               "models": plain_records(self.table[list(BIAS_FIELDS)]),
               "tests": plain_records(self.tests[list(BIAS_TEST_FIELDS)]), "notes": list(self.notes)}
        if self.shift is not None:
            test = self.shift_test or {}
            out["shift"] = {"formula": "judge - human ~ 0 + model + (1 | item)",
                            "models": plain_records(self.shift[list(SHIFT_FIELDS)]),
                            "test": plain_records(pd.DataFrame([{k: test.get(k, float("nan"))
                                                                  for k in SHIFT_TEST_FIELDS}]))[0]}
        return out

    def summary(self) -> str:
        from mrcstats._pformat import p_clause

        conf = f"{100 * (1 - self.alpha):g}%"
        words = {"over": "over-rating (judge > human)", "disagree": "disagreement (judge != human)"}
        lines = [(f"The judge's bias per model: binomial GLMM <outcome> ~ 0 + model + (1 | {self.item}) on the labelled "
                  f"rows (Laplace, as lme4's glmer); the rate at an item of average difficulty and the marginal rate over the "
                  f"items, with {conf} Wald CIs") if len(self.tests) else "The judge's bias per model, on the labelled rows:"]
        for t in self.tests.itertuples(index=False):
            lines.append(f"  {words.get(t.outcome, t.outcome)}: no model effect, LRT chi2 = {_num(t.chisq)} on "
                         f"{t.df} df, {p_clause(t.p)}; item SD {_num(t.sd_item)} ({t.n} rows, {t.n_items} items)")
            for r in self.table[self.table["outcome"] == t.outcome].itertuples(index=False):
                lines.append(f"    {r.model}: {r.count}/{r.n} observed ({_num(r.rate)}); average item {_num(r.prob)} "
                             f"[{_num(r.prob_low)}, {_num(r.prob_high)}]; marginal {_num(r.marginal)} "
                             f"[{_num(r.marginal_low)}, {_num(r.marginal_high)}]")
        if self.shift is not None:
            t = self.shift_test or {}
            lines.append(f"  judge - human on the score's scale: LMM (judge - human) ~ 0 + model + (1 | {self.item}) "
                         f"(REML, as lme4's lmer); no model effect, F = {_num(t.get('F'))} on {t.get('num_df')} "
                         f"and {_num(t.get('den_df'))} df (Satterthwaite), {p_clause(t.get('p', float('nan')))}; "
                         f"item SD {_num(t.get('sd_item'))}, residual SD {_num(t.get('sd_resid'))}")
            for r in self.shift.itertuples(index=False):
                lines.append(f"    {r.model}: observed mean {_num(r.mean_diff)} ({r.n} rows); average item "
                             f"{_num(r.estimate)} [{_num(r.ci_low)}, {_num(r.ci_high)}] (SE {_num(r.se)}, "
                             f"df {_num(r.df)})")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def calibration(f: np.ndarray, y: np.ndarray, bins: int = 10, alpha: float = 0.05) -> pd.DataFrame:
    """The judge's calibration against the humans on the labelled rows (module docstring): one row per bin of the
    judge's score ``f`` (:data:`CALIBRATION_FIELDS`: the bin's score range, its rows, the mean judge score, and the
    mean human score ``y`` with its CI -- Wilson for 0/1 labels, else normal)."""
    from mrcstats.stats.accuracy import wilson_interval

    f, y = np.asarray(f, dtype=float), np.asarray(y, dtype=float)
    if not isinstance(bins, int) or isinstance(bins, bool) or bins < 1:
        raise InputError(f"bins must be a whole number >= 1, got {bins!r}")
    values = np.unique(f)
    if len(values) <= bins:
        codes = np.searchsorted(values, f)
        edges = [(v, v) for v in values]
    else:
        q = np.unique(np.quantile(f, np.linspace(0, 1, bins + 1)))
        codes = np.clip(np.searchsorted(q, f, side="right") - 1, 0, len(q) - 2)
        edges = list(itertools.pairwise(q))
    binary = bool(np.isin(y, (0.0, 1.0)).all())
    z = normal_critical(alpha)
    rows = []
    for b, (lo, hi) in enumerate(edges):
        m = codes == b
        n = int(m.sum())
        if not n:
            continue
        hm = float(y[m].mean())
        if binary:
            cl, ch = (float(v) for v in wilson_interval(y[m].sum(), n, 1 - alpha))
        else:
            half = z * float(y[m].std(ddof=1)) / math.sqrt(n) if n > 1 else float("nan")
            cl, ch = hm - half, hm + half
        rows.append({"bin": b + 1, "n": n, "judge_low": float(lo), "judge_high": float(hi),
                     "judge_mean": float(f[m].mean()), "human_mean": hm, "ci_low": cl, "ci_high": ch})
    return pd.DataFrame(rows, columns=list(CALIBRATION_FIELDS))


def judge_bias(f: np.ndarray, y: np.ndarray, groups: np.ndarray, items: np.ndarray, *, item: str = "item",
               alpha: float = 0.05, discrete: bool = True, scale: bool | None = None) -> JudgeBias:
    """The judge's bias per model (module docstring) from the judge's (``f``) and humans' (``y``) scores on the
    labelled rows, their model (``groups``) and item (``items``): one binomial GLMM per outcome of
    :data:`BIAS_OUTCOMES` with the LRT of no model effect (``discrete``: the scores take a few values; else
    the GLMMs are not fitted and a note says why). An outcome that never (or always) occurs is not
    fitted (a note says so); nor is one with fewer than two models. ``scale`` (default: any score other than
    0/1): also the LMM of ``f − y`` on the model with item random intercepts (``shift``, ``shift_test``)."""
    from mrcstats.models import anova, glmer

    z = normal_critical(alpha)
    f, y = np.asarray(f, dtype=float), np.asarray(y, dtype=float)
    groups = np.asarray(groups).astype(str)
    order = list(pd.unique(groups))
    frame = pd.DataFrame({"model": groups, "item": np.asarray(items).astype(str)})
    rows, tests, notes = [], [], []
    top = float(np.nanmax(np.concatenate([f, y]))) if len(f) else 0.0
    if scale is None:
        scale = not bool(np.isin(np.concatenate([f, y]), (0.0, 1.0)).all())
    shift, shift_test = _shift_lmm(f - y, frame, order, alpha, notes) if scale else (None, None)
    if not discrete:
        notes.append("judge bias (over, disagree): GLMMs not fitted (fractional scores: judge and human differ on "
                     "almost every row); read the LMM of judge - human")
    for outcome, ind, keep in (("over", f > y, y < top), ("disagree", f != y, np.ones(len(y), dtype=bool))):
        if not discrete:
            break
        d = frame.assign(y=ind.astype(int))[keep]
        counts = d.groupby("model", sort=False)["y"].agg(["size", "sum"]).reindex(order, fill_value=0)
        base = [{"outcome": outcome, "model": m, "n": int(counts.loc[m, "size"]), "count": int(counts.loc[m, "sum"]),
                 "rate": float(counts.loc[m, "sum"] / counts.loc[m, "size"]) if counts.loc[m, "size"] else float("nan")}
                for m in order]
        nan = dict.fromkeys(BIAS_FIELDS[5:], float("nan"))
        test = {"outcome": outcome, "chisq": float("nan"), "df": max(len([m for m in order if (d["model"] == m).any()]) - 1, 0),
                "p": float("nan"),
                "sd_item": float("nan"), "n": len(d), "n_items": int(d["item"].nunique())}
        present = [b["model"] for b in base if b["n"]]
        if len(present) < 2 or d["y"].nunique() < 2:
            why = "fewer than two models" if len(present) < 2 else ("no labelled row" if not d["y"].any()
                                                                     else "every labelled row")
            if len(present) >= 2:
                why = f"{why} shows {outcome}"
            notes.append(f"judge bias ({outcome}): not fitted ({why})")
            rows += [{**b, **nan} for b in base]
            tests.append(test)
            continue
        per_item = d.groupby("item", sort=False).size()
        if int(per_item.max()) == 1:     # one labelled row per item: the item SD is not identified at all
            rows += _bias_without_items(base, z)
            test.update(_no_model_effect_lrt(base))
            notes.append(f"judge bias ({outcome}): every item has one labelled row ({len(d)} rows): the item SD is not "
                         "identified (one 0/1 row per item says nothing about how items differ), so the GLMM cannot "
                         "be fitted; fitted without the item effect instead (logistic regression <outcome> ~ 0 + "
                         "model: each model's rate is its observed rate, LRT against ~ 1)")
        else:
            m1 = glmer("y ~ 0 + model + (1 | item)", d, levels={"model": present})
            m0 = glmer("y ~ 1 + (1 | item)", d)
            lrt = anova(m0, m1)
            beta = dict(zip(m1.fixef_names, m1.fixef_values))
            se = dict(zip(m1.fixef_names, np.sqrt(np.diag(m1.vcov_values))))
            sd = float(m1.theta_values[0])
            for b in base:
                if not b["n"]:
                    rows.append({**b, **nan})
                    continue
                bm, sm = float(beta[f"model{b['model']}"]), float(se[f"model{b['model']}"])
                rows.append({**b, "logit": bm, "se": sm, "prob": _expit(bm), "prob_low": _expit(bm - z * sm),
                             "prob_high": _expit(bm + z * sm), "marginal": _marginal(bm, sd),
                             "marginal_low": _marginal(bm - z * sm, sd), "marginal_high": _marginal(bm + z * sm, sd)})
            test.update(chisq=float(lrt.chisq), p=float(lrt.p) if lrt.p is not None else float("nan"), sd_item=sd)
            notes += [f"judge bias ({outcome}): {msg}" for msg in m1.messages]
            if float(per_item.median()) <= 2:
                notes.append(f"judge bias ({outcome}): {len(d) / len(per_item):.2g} labelled rows per item on average "
                             f"({int((per_item == 1).sum())} of {len(per_item)} items have one): the item SD "
                             f"({sd:.2g}) rests on the few items with several rows and is unstable (it can fall to 0 "
                             "or jump with a few labels), and with it the rate at an average item; read the marginal "
                             "and the observed rates, which do not depend on it")
            if sd > 3:
                notes.append(f"judge bias ({outcome}): item SD {sd:.1f} on the logit scale ({len(d)} rows over "
                             f"{test['n_items']} items): the item effect is barely identified (few labelled rows per "
                             "item), so the GLMM's per-model rates are unstable -- read the observed rates; the LRT "
                             "still tests the model effect")
        tests.append(test)
        zero = [str(b["model"]) for b in base if b["n"] and b["count"] in (0, b["n"])]
        if zero:
            notes.append(f"judge bias ({outcome}): model(s) {', '.join(map(repr, zero))} show it on no or on every "
                         "labelled row: their log-odds are not finite (separation), read their rate, not the GLMM's")
    return JudgeBias(table=pd.DataFrame(rows, columns=list(BIAS_FIELDS)),
                     tests=pd.DataFrame(tests, columns=list(BIAS_TEST_FIELDS)), item=item, alpha=alpha,
                     notes=tuple(notes), shift=shift, shift_test=shift_test)


def _shift_lmm(e: np.ndarray, frame: pd.DataFrame, order: list, alpha: float, notes: list
               ) -> tuple[pd.DataFrame, dict]:
    """The LMM of the judge − human difference ``e`` on the model with item random intercepts (module docstring):
    per model the observed mean and ``δ_m`` with SE, Satterthwaite df and t-interval; the F test of equal
    ``δ_m``. Not fitted (NaNs and a note) with fewer than two models or a constant difference."""
    from mrcstats._dist import t_ppf
    from mrcstats.errors import ModelError
    from mrcstats.models import lmer
    from mrcstats.models.lmm_tests import contest

    d = frame.assign(diff=np.asarray(e, dtype=float))
    stats = d.groupby("model", sort=False)["diff"].agg(["size", "mean"]).reindex(order)
    present = [m for m in order if stats.loc[m, "size"] > 0]
    nan = float("nan")
    base = [{"model": m, "n": int(stats.loc[m, "size"]) if m in present else 0,
             "mean_diff": float(stats.loc[m, "mean"]) if m in present else nan} for m in order]
    test = dict.fromkeys(SHIFT_TEST_FIELDS, nan) | {"num_df": max(len(present) - 1, 0), "n": len(d),
                                                    "n_items": int(d["item"].nunique())}
    empty = [{**b, **dict.fromkeys(SHIFT_FIELDS[3:], nan)} for b in base]
    why = ("fewer than two models" if len(present) < 2 else
           "judge - human is the same on every labelled row" if np.ptp(d["diff"].to_numpy()) == 0 else None)
    if why is None and int(d.groupby("item", sort=False).size().max()) == 1:
        return _shift_without_items(d, base, present, alpha, test, notes, empty)
    if why is None:
        try:
            m1 = lmer("diff ~ 0 + model + (1 | item)", d, levels={"model": present})
        except ModelError as exc:
            why = f"lmer failed ({exc})"
    if why is not None:
        notes.append(f"judge bias (judge - human LMM): not fitted ({why})")
        return pd.DataFrame(empty, columns=list(SHIFT_FIELDS)), test
    rows = []
    for b in base:
        name = f"model{b['model']}"
        if name not in m1.fixef.index:
            rows.append({**b, **dict.fromkeys(SHIFT_FIELDS[3:], nan)})
            continue
        est, se, df = float(m1.fixef[name]), float(m1.se[name]), float(m1.df[name])
        q = float(t_ppf(1 - alpha / 2, df))
        rows.append({**b, "estimate": est, "se": se, "df": df, "ci_low": est - q * se, "ci_high": est + q * se})
    k = len(present)
    L = np.zeros((k - 1, k))
    L[:, 0] = 1.0
    L[np.arange(k - 1), np.arange(1, k)] = -1.0
    ft = contest(m1, L)
    test.update(F=float(ft["F value"]), num_df=int(ft["NumDF"]), den_df=float(ft["DenDF"]), p=float(ft["Pr(>F)"]),
                sd_item=float(m1.theta.iloc[0] * m1.sigma), sd_resid=float(m1.sigma))
    notes += [f"judge bias (judge - human LMM): {msg}" for msg in m1.messages]
    return pd.DataFrame(rows, columns=list(SHIFT_FIELDS)), test


def _shift_without_items(d: pd.DataFrame, base: list[dict[str, Any]], present: list, alpha: float, test: dict,
                         notes: list, empty: list[dict[str, Any]]) -> tuple[pd.DataFrame, dict]:
    """The shift LMM's fallback when every item has one labelled row (``σ_item`` is not identified; lme4 refuses
    the fit): the linear model ``diff ~ 0 + model`` without the item effect (R's ``lm``): ``δ_m`` the model's
    mean difference, ``SE = s / √n_m`` with ``s²`` the pooled residual variance on ``N − M`` df, the
    t-interval on those df, and the one-way F test of equal ``δ_m`` on ``(M − 1, N − M)`` df (R's
    ``anova(lm(diff ~ model))``); ``sd_item`` NaN, ``sd_resid = s``."""
    from scipy.stats import f as fdist

    from mrcstats._dist import t_ppf

    e = d["diff"].to_numpy(dtype=float)
    g = d["model"].to_numpy()
    N, M = len(e), len(present)
    means = {m: float(e[g == m].mean()) for m in present}
    resid = e - np.array([means[m] for m in g])
    dfr = N - M
    nan = float("nan")
    if dfr < 1:
        notes.append("judge bias (judge - human LMM): not fitted (one labelled row per item and no residual df)")
        return pd.DataFrame(empty, columns=list(SHIFT_FIELDS)), test
    s2 = float(resid @ resid / dfr)
    q = float(t_ppf(1 - alpha / 2, dfr))
    rows = []
    for b, blank in zip(base, empty):
        if not b["n"]:
            rows.append(blank)
            continue
        est, se = means[b["model"]], math.sqrt(s2 / b["n"])
        rows.append({**b, "estimate": est, "se": se, "df": float(dfr), "ci_low": est - q * se, "ci_high": est + q * se})
    between = float(sum(b["n"] * (means[b["model"]] - e.mean()) ** 2 for b in base if b["n"]))
    F = (between / (M - 1)) / s2 if s2 > 0 else nan
    test.update(F=F, num_df=M - 1, den_df=float(dfr), p=float(fdist.sf(F, M - 1, dfr)) if s2 > 0 else nan,
                sd_item=nan, sd_resid=math.sqrt(s2))
    notes.append(f"judge bias (judge - human LMM): every item has one labelled row ({N} rows): the item SD is not "
                 "identified, so the LMM cannot be fitted; fitted without the item effect instead (linear model "
                 "judge - human ~ 0 + model: each model's shift is its mean difference, one-way F test)")
    return pd.DataFrame(rows, columns=list(SHIFT_FIELDS)), test


def _bias_without_items(base: list[dict[str, Any]], z: float) -> list[dict[str, Any]]:
    """Per model the logistic regression ``<outcome> ~ 0 + model`` without the item effect (the fallback when
    every item has one labelled row): ``β_m = logit(k_m / n_m)``, ``SE = 1 / √(n_m p_m (1 − p_m))`` (the
    inverse Fisher information of a binomial proportion on the logit scale; Agresti 2013, *Categorical Data
    Analysis*, §3.1.4), ``prob = marginal = k_m / n_m`` with the Wald CI ``plogis(β_m ± z·SE)``; a model at
    0 or 1 has no finite log-odds (NaN)."""
    out = []
    for b in base:
        n, k = b["n"], b["count"]
        if not n or k in (0, n):
            out.append({**b, **dict.fromkeys(BIAS_FIELDS[5:], float("nan"))})
            continue
        p = k / n
        bm, sm = math.log(p / (1 - p)), 1 / math.sqrt(n * p * (1 - p))
        lo, hi = _expit(bm - z * sm), _expit(bm + z * sm)
        out.append({**b, "logit": bm, "se": sm, "prob": p, "prob_low": lo, "prob_high": hi, "marginal": p,
                    "marginal_low": lo, "marginal_high": hi})
    return out


def _no_model_effect_lrt(base: list[dict[str, Any]]) -> dict[str, float]:
    """The likelihood-ratio test of ``~ 0 + model`` against ``~ 1`` for binomial counts:
    ``G² = 2 Σ_m [k_m log(p_m / p) + (n_m − k_m) log((1 − p_m) / (1 − p))]`` (``p_m = k_m / n_m``, ``p`` the
    pooled rate), χ² on ``M − 1`` df (R's ``anova(glm0, glm1, test = "Chisq")``); ``sd_item`` NaN (not fitted)."""
    from scipy.special import xlogy
    from scipy.stats import chi2

    used = [b for b in base if b["n"]]
    n = np.array([b["n"] for b in used], dtype=float)
    k = np.array([b["count"] for b in used], dtype=float)
    p, pm = k.sum() / n.sum(), k / n
    g2 = float(2 * (xlogy(k, pm) - xlogy(k, p) + xlogy(n - k, 1 - pm) - xlogy(n - k, 1 - p)).sum())
    df = len(used) - 1
    return {"chisq": g2, "df": df, "p": float(chi2.sf(g2, df)) if df > 0 else float("nan"), "sd_item": float("nan")}


def _expit(x: float) -> float:
    from scipy.special import expit

    return float(expit(x))


def _marginal(beta: float, sd: float, nodes: int = 40) -> float:
    """``E[plogis(β + sd·u)]``, ``u ~ N(0, 1)``, by Gauss–Hermite quadrature (``nodes`` points)."""
    from scipy.special import expit

    x, w = np.polynomial.hermite.hermgauss(nodes)
    return float((w * expit(beta + math.sqrt(2.0) * sd * x)).sum() / math.sqrt(math.pi))


@dataclass(frozen=True, repr=False)
class JudgePanel(Result):
    """Several judges against the humans (module docstring): ``correlation`` (judges × judges, their errors
    on the labelled rows), ``pairs`` (:data:`PAIR_FIELDS`, with bootstrap CIs), the mean error correlation
    ``mean_rho`` and the effective number of independent judges ``k_eff`` with their CIs, and ``per_judge``:
    each judge's own :class:`JudgeResult` (PPI means and agreement with the humans)."""

    judges: tuple
    combine: str
    correlation: pd.DataFrame = field(repr=False)
    pairs: pd.DataFrame = field(repr=False)
    per_judge: tuple = field(repr=False)
    n_labelled: int = 0
    mean_rho: float = float("nan")
    mean_rho_low: float = float("nan")
    mean_rho_high: float = float("nan")
    k_eff: float = float("nan")
    k_eff_low: float = float("nan")
    k_eff_high: float = float("nan")
    ties: int = 0
    bootstrap: int = 0
    seed: int | None = 0
    alpha: float = 0.05

    def to_frame(self) -> pd.DataFrame:
        return self.pairs.copy()

    def agreement_table(self, panel: AgreementResult | None = None, name: str = "panel") -> pd.DataFrame:
        """Each judge's agreement with the humans (and the panel's, when given) as one long table: ``judge`` and
        the :data:`~mrcstats.stats.agreement.AGREEMENT_FIELDS`."""
        parts = [(r.judge, r.agreement) for r in self.per_judge] + ([(name, panel)] if panel is not None else [])
        return pd.concat([a.table.assign(judge=j)[["judge", *a.table.columns]] for j, a in parts], ignore_index=True)

    def to_dict(self) -> dict[str, Any]:
        """``{"judges", "combine", "n_labelled", "mean_rho", "mean_rho_low", "mean_rho_high", "k_eff", "k_eff_low",
        "k_eff_high", "ties", "bootstrap", "seed", "correlation": [[...]], "pairs": [{judge_a, judge_b, r, ci_low,
        ci_high, n}], "per_judge": [JudgeResult.to_dict()]}`` (an infinite ``k_eff`` is "Inf")."""
        def v(x: float) -> float | None:
            return None if isinstance(x, float) and math.isnan(x) else x

        corr = [[v(float(x)) for x in row] for row in self.correlation.to_numpy()]
        return {"judges": list(self.judges), "combine": self.combine, "n_labelled": self.n_labelled,
                **{k: v(getattr(self, k)) for k in ("mean_rho", "mean_rho_low", "mean_rho_high", "k_eff",
                                                    "k_eff_low", "k_eff_high")},
                "ties": self.ties, "bootstrap": self.bootstrap, "seed": self.seed, "correlation": corr,
                "pairs": plain_records(self.pairs[list(PAIR_FIELDS)]),
                "per_judge": [r.to_dict() for r in self.per_judge]}

    def summary(self) -> str:
        conf = f"{100 * (1 - self.alpha):g}%"
        k = len(self.judges)
        lines = [(f"{k} judges ({', '.join(self.judges)}): errors (judge - human) on the {self.n_labelled} labelled "
                  f"rows, Pearson correlation with {conf} bootstrap CIs (B = {self.bootstrap}, seed = {self.seed})")]
        for r in self.pairs.itertuples(index=False):
            lines.append(f"  {r.judge_a} ~ {r.judge_b}: r = {_num(r.r)} [{_num(r.ci_low)}, {_num(r.ci_high)}]")
        lines.append(f"  mean error correlation {_num(self.mean_rho)} [{_num(self.mean_rho_low)}, "
                     f"{_num(self.mean_rho_high)}]; effective number of independent judges k / (1 + (k - 1) rho) = "
                     f"{_num(self.k_eff)} [{_num(self.k_eff_low)}, {_num(self.k_eff_high)}] of {k}")
        lines.append("  each judge vs the humans (Cohen's kappa, Krippendorff's alpha):")
        for r in self.per_judge:
            t = r.agreement.table
            bits = []
            for stat, w in (("cohen_kappa", "none"), ("krippendorff_alpha", None)):
                row = t[(t["statistic"] == stat) & ((t["weights"] == w) if w else True)]
                if len(row):
                    x = row.iloc[0]
                    bits.append(f"{stat} {_num(float(x.estimate))} [{_num(float(x.ci_low))}, {_num(float(x.ci_high))}]")
            lines.append(f"    {r.judge}: " + ("; ".join(bits) or "NA"))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


@dataclass(frozen=True, repr=False)
class JudgeResult(Result):
    """Judge vs humans: ``table`` (:data:`JUDGE_FIELDS`, one row per model) and ``agreement`` on the
    labelled rows."""

    table: pd.DataFrame = field(repr=False)
    agreement: AgreementResult = field(repr=False)
    human: str = "human"
    judge: str = "judge"
    alpha: float = 0.05
    target: str = "population"
    ppi: str = "crossfit"
    width: float | None = None
    notes: tuple = ()
    panel: JudgePanel | None = field(default=None, repr=False)
    bias: JudgeBias | None = field(default=None, repr=False)

    def to_frame(self) -> pd.DataFrame:
        return self.table.copy()

    def to_dict(self) -> dict[str, Any]:
        """``{"human", "judge", "alpha", "target", "ppi" (the rule for λ, :data:`PPI_METHODS`), "ppi_rule" (its
        name in words), "width", "models": [{model, n, n_labelled, judge_*, human_*, rectifier, ppi_*}],
        "agreement": AgreementResult.to_dict(), "notes"}``."""
        return {"human": self.human, "judge": self.judge, "alpha": self.alpha, "target": self.target,
                "ppi": self.ppi, "ppi_rule": PPI_RULES[self.ppi], "width": self.width,
                "models": plain_records(self.table[list(JUDGE_FIELDS)]), "agreement": self.agreement.to_dict(),
                "notes": list(self.notes), **({"panel": self.panel.to_dict()} if self.panel is not None else {}),
                **({"bias": self.bias.to_dict()} if self.bias is not None else {})}

    def summary(self) -> str:
        conf = f"{100 * (1 - self.alpha):g}%"

        def f(v: float) -> str:
            return f"{v:.4f}" if isinstance(v, float) and math.isfinite(v) else "NA"

        lines = [(f"Judge {self.judge!r} vs human {self.human!r}: per model, the judge-only, human-only and "
                  f"prediction-powered means with {conf} CIs (target: {self.target}; rule: "
                  f"{PPI_RULES[self.ppi]}; {HUMAN_CI_RULE})")]
        for r in self.table.itertuples(index=False):
            lines.append(f"  {r.model}: n = {r.n}, labelled {r.n_labelled}; judge {f(r.judge_mean)} "
                         f"[{f(r.judge_low)}, {f(r.judge_high)}]; human {f(r.human_mean)} [{f(r.human_low)}, "
                         f"{f(r.human_high)}]; {self.ppi} {f(r.ppi_mean)} [{f(r.ppi_low)}, {f(r.ppi_high)}] "
                         f"(rectifier human - judge {f(r.rectifier)}"
                         + (f", lambda {f(r.ppi_lambda)})" if self.ppi != "plain" else ")"))
            if self.width is not None:
                lines.append(f"    human labels for a CI {self.width:g} wide: {f(r.n_for_width_human)} human-only, "
                             f"{f(r.n_for_width_ppi)} with the judge (PPI)")
        lines += [f"  note: {n}" for n in self.notes]
        lines.append("Agreement of judge and human on the labelled rows:")
        lines += ["  " + ln for ln in self.agreement.summary().splitlines()]
        if self.bias is not None:
            lines += self.bias.summary().splitlines()
        if self.panel is not None:
            lines += self.panel.summary().splitlines()
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def _scores(data: pd.DataFrame, col: str, source: str) -> np.ndarray:
    v = pd.to_numeric(data[col], errors="coerce").to_numpy(dtype=float)
    raw = data[col]
    bad = np.isnan(v) & raw.notna().to_numpy() & (raw.astype(str).str.strip() != "").to_numpy()
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(f"{source}: data row {i + 1}, column {col!r} holds {raw.iloc[i]!r}; a score must be a "
                         "number (0/1 labels, or a graded score)")
    return v


def judge(data: pd.DataFrame, *, human: str, judge: str | Sequence[str], model: str | None = "model",
          level: str = "nominal", levels: Any = None, alpha: float = 0.05, target: str = "population",
          ppi: str = "crossfit", width: float | None = None, bootstrap: int = 1000, seed: int | None = 0,
          combine: str | None = None, item: str | None = None, source: str = "judge log") -> JudgeResult:
    """Judge vs humans per model (module docstring): judge-only, human-only and PPI means with CIs, and
    the agreement of the two on the rows both scored.

    Args:
        data: one row per response; ``judge`` scored every row, ``human`` a subset (empty cells elsewhere).
        human, judge: the score columns (numbers: 0/1 or graded); ``judge`` may name several columns (a panel).
        model: the column naming the model (``None``: all rows are one group).
        level, levels, bootstrap, seed: as :func:`mrcstats.stats.agreement.agreement` (agreement of the two);
            ``bootstrap`` and ``seed`` also give the CIs of the judges' error correlations; ``seed`` the folds of
            the cross-fitted PPI (one stream per model).
        alpha: 1 − the confidence level.
        target: "population" (the model's expected human score; Angelopoulos et al.) or "rows" (its mean
            human score over these rows; finite-population SEs for the PPI and human-only means).
        ppi: the rule for the PPI weight λ (:data:`PPI_METHODS`, module docstring): "crossfit" (default; PPI++
            with λ cross-fitted over 5 seeded folds of the labelled rows and a ``t_{n−1}`` interval), "tuned"
            (PPI++, λ fitted on the labelled rows themselves; under-covers at small n) or "plain" (λ = 1).
        width: a target full CI width: the human labels each model would need, human-only and PPI
            (``n_for_width_*``; NA without it).
        combine: several judges: the panel's score, "majority" (default at the nominal and ordinal levels) or
            "mean" (default at the interval and ratio levels).
        item: the column naming the item: the judge's bias per model (:class:`JudgeBias`, ``result.bias``), a
            GLMM of over-rating and of disagreement on the model with item random intercepts (None: not fitted).

    With several judges the result's ``table`` and ``agreement`` are the panel's, and ``panel``
    (:class:`JudgePanel`) holds the error correlations, the effective number of judges and each judge's own
    result.
    """
    from mrcstats.models._checks import check_alpha

    if target not in TARGETS:
        raise InputError(f"target must be one of {', '.join(TARGETS)}; got {target!r}")
    if not isinstance(data, pd.DataFrame):
        raise InputError(f"{source}: expected a table (pandas DataFrame), got {type(data).__name__}")
    judges = [judge] if isinstance(judge, str) else [str(j) for j in judge]
    if not judges:
        raise InputError("--judge: give the judge's score column (or several, separated by commas)")
    twice = [j for j in dict.fromkeys(judges) if judges.count(j) > 1]
    if twice:
        raise InputError(f"--judge: column {twice[0]!r} is named twice ({', '.join(judges)}); name each judge once")
    if combine is not None and combine not in COMBINE:
        raise InputError(f"combine must be one of {', '.join(COMBINE)}; got {combine!r}")
    cols = [str(c) for c in data.columns]
    for c, flag in ((human, "--human"), *((j, "--judge") for j in judges),
                    *(((model, "--model-col"),) if model else ()), *(((item, "--item-col"),) if item else ())):
        if c not in cols:
            raise InputError(f"{source}: no column {c!r} ({flag}); the columns are {', '.join(map(repr, cols[:20]))}")
    if human in judges:
        raise InputError(f"--human and --judge name the same column ({human!r}); give the human labels and the "
                         "judge's scores")
    y = _scores(data, human, source)
    fs = []
    for j in judges:
        f = _scores(data, j, source)
        missing_f = np.isnan(f)
        if missing_f.any():
            i = int(np.argmax(missing_f))
            raise InputError(f"{source}: data row {i + 1}, column {j!r} is empty; the judge must score every row "
                             f"({int(missing_f.sum())} empty) -- drop those rows first")
        fs.append(f)
    lab = ~np.isnan(y)
    if not lab.any():
        who = "judge" if len(judges) == 1 else "judges"
        raise InputError(f"{source}: column {human!r} has no score on any row: the human labels do not overlap the "
                         f"{who}' rows (label a subset of the rows the {who} scored)".replace("judge' ", "judge's "))
    a = check_alpha(alpha)
    w = None
    if width is not None:
        w = float(width) if isinstance(width, (int, float)) and not isinstance(width, bool) else float("nan")
        if not (math.isfinite(w) and w > 0):
            raise InputError(f"width (the target CI width) must be a number > 0, got {width!r}")
    groups = (data[model].astype(str).to_numpy() if model else np.full(len(data), "(all)", dtype=object))
    items = data[item].astype(str).to_numpy() if item else None
    if item and data[item].isna().any():
        i = int(np.argmax(data[item].isna().to_numpy()))
        raise InputError(f"{source}: data row {i + 1}, column {item!r} (--item-col) is empty; every row needs its item")
    _check_method(ppi)
    opts = {"level": level, "levels": levels, "alpha": a, "target": target, "ppi": ppi, "width": w,
            "bootstrap": bootstrap, "seed": seed, "source": source, "items": items, "item": item}
    if len(judges) == 1:
        return _one_judge(y, fs[0], lab, groups, human, judges[0], **opts)
    how = combine or ("majority" if level in ("nominal", "ordinal") else "mean")
    per = tuple(_one_judge(y, f, lab, groups, human, j, **opts) for j, f in zip(judges, fs))
    scores = np.column_stack(fs)
    pscore, ties = panel_scores(scores, how)
    res = _one_judge(y, pscore, lab, groups, human, f"{how} of {', '.join(judges)}", **opts)
    matrix, pairs, rho, keff = error_correlation(scores[lab] - y[lab][:, None], judges, bootstrap=bootstrap,
                                                 seed=seed, alpha=a)
    notes = list(res.notes)
    if ties:
        notes.append(f"{ties} row(s) with a tied majority: the first-listed judge's label among the tied ones")
    if not math.isfinite(rho[0]):
        notes.append("a judge's error does not vary on the labelled rows (e.g. it never errs): its error "
                     "correlation, the mean correlation and the effective number of judges are NA")
    panel = JudgePanel(judges=tuple(judges), combine=how, correlation=matrix, pairs=pairs, per_judge=per,
                       n_labelled=int(lab.sum()), mean_rho=rho[0], mean_rho_low=rho[1], mean_rho_high=rho[2],
                       k_eff=keff[0], k_eff_low=keff[1], k_eff_high=keff[2], ties=ties, bootstrap=int(bootstrap),
                       seed=seed, alpha=a)
    return replace(res, panel=panel, notes=tuple(notes))


def _one_judge(y: np.ndarray, f: np.ndarray, lab: np.ndarray, groups: np.ndarray, human: str, name: str, *,
               level: str, levels: Any, alpha: float, target: str, ppi: str, width: float | None, bootstrap: int,
               seed: int | None, source: str, items: np.ndarray | None = None, item: str | None = None
               ) -> JudgeResult:
    """:func:`judge` for one judge's scores ``f`` (checked) against the human scores ``y`` (labelled: ``lab``)."""
    z = normal_critical(alpha)
    rows, notes = [], []
    for g in pd.unique(groups):
        m = groups == g
        fa, lm = f[m], lab[m]
        fl, yl = fa[lm], y[m][lm]
        N, n = len(fa), int(lm.sum())
        jse = float(fa.std(ddof=1) / math.sqrt(N)) if N > 1 else float("nan")
        hmean = float(yl.mean()) if n else float("nan")
        fpc = (1 - n / N) if target == "rows" else 1.0
        hse = float(yl.std(ddof=1) * math.sqrt(fpc / n)) if n > 1 else float("nan")
        if n < 2:
            notes.append(f"model {g!r}: {n} labelled row(s); the PPI and human-only intervals need two")
            est, se, lam = (float(fa.mean() + (yl - fl).mean()) if n else float("nan")), float("nan"), 1.0
        else:
            est, se, lam, d = _ppi_fit(fa, fl, yl, target, ppi, PPI_FOLDS, seed, g)
        q = ppi_critical(ppi, n, alpha)
        need_h = need_p = float("nan")
        if width is not None and n >= 2:
            fixed = ppi_fixed_variance(fa, fl, d, lam)
            need_h = labels_needed(width, ppi, N, float(yl.var(ddof=1)), target=target, alpha=alpha)
            need_p = labels_needed(width, ppi, N, float(d.var(ddof=1)), fixed, target=target, alpha=alpha)
        rows.append({"model": g, "n": N, "n_labelled": n, "judge_mean": float(fa.mean()), "judge_se": jse,
                     "judge_low": fa.mean() - z * jse, "judge_high": fa.mean() + z * jse, "human_mean": hmean,
                     "human_se": hse, "human_low": hmean - q * hse, "human_high": hmean + q * hse,
                     "rectifier": float((yl - fl).mean()) if n else float("nan"), "ppi_lambda": lam,
                     "ppi_mean": est, "ppi_se": se,
                     "ppi_low": est - q * se, "ppi_high": est + q * se, "ppi_method": ppi, "n_for_width_human": need_h,
                     "n_for_width_ppi": need_p})
    jcol = name if name != human else f"{name} (judge)"
    both = pd.DataFrame({human: y[lab], jcol: f[lab]})
    agr = agreement(both, wide=[human, jcol], level=level, levels=levels, bootstrap=bootstrap, seed=seed,
                    alpha=alpha, source=f"{source} (rows with both scores)")
    bias = None
    if items is not None:
        fl, yl = f[lab], y[lab]
        discrete = level in ("nominal", "ordinal") or bool((fl == np.round(fl)).all() and (yl == np.round(yl)).all())
        bias = judge_bias(fl, yl, groups[lab], items[lab], item=str(item), alpha=alpha, discrete=discrete)
    return JudgeResult(table=pd.DataFrame(rows, columns=list(JUDGE_FIELDS)), agreement=agr, human=human,
                       judge=name, alpha=alpha, target=target, ppi=ppi, width=width, notes=tuple(notes), bias=bias)
