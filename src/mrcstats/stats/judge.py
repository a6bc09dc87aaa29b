"""An LLM judge against human labels: agreement, and prediction-powered estimates of each model's score.

Rows are responses (one model's answer to one item) with a judge's score ``f_i`` on every row and a
human score ``y_i`` on a labelled subset (the other human cells empty). Per model, with ``N`` rows, ``n``
of them labelled, and ``Δ_i = y_i − f_i`` on the labelled rows:

* judge-only: ``mean(f)`` over the ``N`` rows, SE ``s_f/√N`` -- the judge's scale, biased when the judge is;
* human-only: ``mean(y)`` over the ``n`` labelled rows, SE ``s_y/√n``;
* prediction-powered inference for a mean (Angelopoulos, Bates, Fannjiang, Jordan & Zrnic 2023, *Science*
  382:669, §"Mean estimation"): ``θ_PP = mean_N(f) + mean_n(Δ)`` -- the judge's mean corrected by its
  average error on the labelled rows (the rectifier) -- with
  ``var(θ_PP) = s²_f/N + s²_Δ/n + 2·cov(f, Δ)/N``; the last term because the labelled rows are among the
  ``N`` (it is zero in the paper's split into disjoint labelled and unlabelled sets; cov from the
  labelled rows). The CI is ``θ_PP ± z·SE``; it is valid when the labelled rows are a random subset of
  the rows and narrower than the human-only one when the judge predicts the human label well.
* power tuning (``tune=True``; PPI++, Angelopoulos, Duchi & Zrnic 2023, arXiv:2311.01453, §2 "mean
  estimation"): ``θ_λ = λ·mean_N(f) + mean_n(y − λf)`` with ``λ = cov(y, f)/s²_f`` on the labelled rows,
  variance ``λ²s²_f/N + s²_{y−λf}/n + 2λ·cov(f, y − λf)/N``. At that λ the variance is
  ``s²_y/n − (1/n − 1/N)·cov(y, f)²/s²_f``, never above the human-only one; ``λ = 1`` is plain PPI. (For the
  rows target it is the regression estimator, Cochran 1977 §7.1.)
* ``target="rows"``: the same ``θ_PP`` read as the mean human score over these ``N`` rows (a finite
  population: the benchmark's own items), of which the labelled rows are a simple random sample. Then
  ``θ_PP − mean_N(y) = mean_n(Δ) − mean_N(Δ)`` and ``var = (1 − n/N)·s²_Δ/n`` -- the difference estimator of
  survey sampling (Cochran 1977, *Sampling Techniques*, 3rd ed., §6.1; Särndal, Swensson & Wretman 1992,
  §6.3); the human-only SE gets the same finite-population factor ``(1 − n/N)``. The default
  ``"population"`` target (the paper's) also counts the sampling of the rows themselves.

Human labels needed for a CI of full width ``W`` (``width=W``; ``v = (W/2z)²``), from the variance components
of the labelled rows: human-only ``n = s²_y/v`` (rows target: ``1/(v/s²_y + 1/N)``); PPI with the same λ
``n = s²_{y−λf} / (v − (λ²s²_f + 2λ·cov(f, y − λf))/N)`` (rows target: ``1/(v/s²_{y−λf} + 1/N)``), NA when
no number of labels reaches ``W`` (the judge's own sampling error already exceeds it).

The agreement of judge and human on the labelled rows is :func:`mrcstats.stats.agreement.agreement`
(two raters: Cohen's κ, α, AC1, ...).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from mrcstats._jsonout import plain_records
from mrcstats._repr import Result
from mrcstats.errors import InputError
from mrcstats.stats.agreement import AgreementResult, agreement

__all__ = ["JUDGE_FIELDS", "TARGETS", "JudgeResult", "judge", "labels_needed", "ppi_mean"]

#: the columns of ``judge(...).table``
JUDGE_FIELDS = ("model", "n", "n_labelled", "judge_mean", "judge_se", "judge_low", "judge_high", "human_mean",
                "human_se", "human_low", "human_high", "rectifier", "ppi_lambda", "ppi_mean", "ppi_se", "ppi_low",
                "ppi_high", "n_for_width_human", "n_for_width_ppi")


TARGETS = ("population", "rows")


def labels_needed(width: float, z: float, N: int, s2: float, fixed: float = 0.0, target: str = "population"
                  ) -> float:
    """Labelled rows for a CI of full ``width`` (module docstring): ``s2`` the variance of the labelled term
    (``y``, or ``y − λf``), ``fixed`` the variance that does not shrink with labels (``(λ²s²_f + 2λ·cov)/N``,
    population target only); NaN when unreachable."""
    v = (width / (2 * z)) ** 2
    if not (math.isfinite(s2) and s2 >= 0) or N < 1:
        return float("nan")
    if s2 == 0:
        return 2.0
    if target == "rows":
        return float(min(N, math.ceil(1 / (v / s2 + 1 / N))))
    room = v - fixed
    return float(math.ceil(s2 / room)) if room > 0 else float("nan")


def ppi_mean(f_all: np.ndarray, f_lab: np.ndarray, y_lab: np.ndarray, target: str = "population",
             tune: bool = False) -> tuple[float, float, float]:
    """``(θ, SE, λ)`` of the prediction-powered mean (module docstring) from the judge's scores on all rows
    (``f_all``) and the judge's and humans' scores on the labelled rows (a subset of them); ``target``
    "population" (Angelopoulos et al. 2023) or "rows" (the mean over these rows; Cochran's difference
    estimator); ``tune``: PPI++'s power-tuned λ (else λ = 1)."""
    if target not in TARGETS:
        raise InputError(f"target must be one of {', '.join(TARGETS)}; got {target!r}")
    f_all, f_lab, y_lab = (np.asarray(v, dtype=float) for v in (f_all, f_lab, y_lab))
    N, n = len(f_all), len(y_lab)
    lam = 1.0
    if tune and n >= 2 and f_lab.var(ddof=1) > 0:
        lam = float(np.cov(y_lab, f_lab, ddof=1)[0, 1] / f_lab.var(ddof=1))
    d = y_lab - lam * f_lab
    est = float(lam * f_all.mean() + d.mean())
    if n < 2 or N < 2:
        return est, float("nan"), lam
    if target == "rows":
        var = (1 - n / N) * d.var(ddof=1) / n
    else:
        cov = float(np.cov(f_lab, d, ddof=1)[0, 1])
        var = lam * lam * f_all.var(ddof=1) / N + d.var(ddof=1) / n + 2 * lam * cov / N
    return est, float(math.sqrt(max(var, 0.0))), lam


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
    tune: bool = False
    width: float | None = None
    notes: tuple = ()

    def to_frame(self) -> pd.DataFrame:
        return self.table.copy()

    def to_dict(self) -> dict[str, Any]:
        """``{"human", "judge", "alpha", "models": [{model, n, n_labelled, judge_*, human_*, rectifier,
        ppi_*}], "agreement": AgreementResult.to_dict(), "notes"}``."""
        return {"human": self.human, "judge": self.judge, "alpha": self.alpha, "target": self.target, "tune": self.tune, "width": self.width,
                "models": plain_records(self.table[list(JUDGE_FIELDS)]), "agreement": self.agreement.to_dict(),
                "notes": list(self.notes)}

    def summary(self) -> str:
        conf = f"{100 * (1 - self.alpha):g}%"

        def f(v: float) -> str:
            return f"{v:.4f}" if isinstance(v, float) and math.isfinite(v) else "NA"

        lines = [(f"Judge {self.judge!r} vs human {self.human!r}: per model, the judge-only, human-only and "
                  f"prediction-powered (PPI, Angelopoulos et al. 2023) means with {conf} CIs (target: "
                  f"{self.target})")]
        for r in self.table.itertuples(index=False):
            lines.append(f"  {r.model}: n = {r.n}, labelled {r.n_labelled}; judge {f(r.judge_mean)} "
                         f"[{f(r.judge_low)}, {f(r.judge_high)}]; human {f(r.human_mean)} [{f(r.human_low)}, "
                         f"{f(r.human_high)}]; PPI {f(r.ppi_mean)} [{f(r.ppi_low)}, {f(r.ppi_high)}] "
                         f"(rectifier human - judge {f(r.rectifier)}"
                         + (f", lambda {f(r.ppi_lambda)})" if self.tune else ")"))
            if self.width is not None:
                lines.append(f"    human labels for a CI {self.width:g} wide: {f(r.n_for_width_human)} human-only, "
                             f"{f(r.n_for_width_ppi)} with the judge (PPI)")
        lines += [f"  note: {n}" for n in self.notes]
        lines.append("Agreement of judge and human on the labelled rows:")
        lines += ["  " + ln for ln in self.agreement.summary().splitlines()]
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


def judge(data: pd.DataFrame, *, human: str, judge: str, model: str | None = "model", level: str = "nominal",
          levels: Any = None, alpha: float = 0.05, target: str = "population", tune: bool = False,
          width: float | None = None, bootstrap: int = 1000, seed: int | None = 0,
          source: str = "judge log") -> JudgeResult:
    """Judge vs humans per model (module docstring): judge-only, human-only and PPI means with CIs, and
    the agreement of the two on the rows both scored.

    Args:
        data: one row per response; ``judge`` scored every row, ``human`` a subset (empty cells elsewhere).
        human, judge: the score columns (numbers: 0/1 or graded).
        model: the column naming the model (``None``: all rows are one group).
        level, levels, bootstrap, seed: as :func:`mrcstats.stats.agreement.agreement` (agreement of the two).
        alpha: 1 − the confidence level.
        target: "population" (the model's expected human score; Angelopoulos et al.) or "rows" (its mean
            human score over these rows; finite-population SEs for the PPI and human-only means).
        tune: PPI++'s power-tuned λ (never wider than human-only, asymptotically); default plain PPI (λ = 1).
        width: a target full CI width: the human labels each model would need, human-only and PPI
            (``n_for_width_*``; NA without it).
    """
    from mrcstats._dist import norm_ppf
    from mrcstats.models._checks import check_alpha

    if target not in TARGETS:
        raise InputError(f"target must be one of {', '.join(TARGETS)}; got {target!r}")
    if not isinstance(data, pd.DataFrame):
        raise InputError(f"{source}: expected a table (pandas DataFrame), got {type(data).__name__}")
    cols = [str(c) for c in data.columns]
    for c, flag in ((human, "--human"), (judge, "--judge"), *(((model, "--model-col"),) if model else ())):
        if c not in cols:
            raise InputError(f"{source}: no column {c!r} ({flag}); the columns are {', '.join(map(repr, cols[:20]))}")
    if human == judge:
        raise InputError(f"--human and --judge name the same column ({human!r}); give the human labels and the "
                         "judge's scores")
    y, f = _scores(data, human, source), _scores(data, judge, source)
    missing_f = np.isnan(f)
    if missing_f.any():
        i = int(np.argmax(missing_f))
        raise InputError(f"{source}: data row {i + 1}, column {judge!r} is empty; the judge must score every row "
                         f"({int(missing_f.sum())} empty) -- drop those rows first")
    lab = ~np.isnan(y)
    if not lab.any():
        raise InputError(f"{source}: column {human!r} has no score on any row: the human labels do not overlap the "
                         "judge's rows (label a subset of the rows the judge scored)")
    a = check_alpha(alpha)
    if width is not None:
        w = float(width) if isinstance(width, (int, float)) and not isinstance(width, bool) else float("nan")
        if not (math.isfinite(w) and w > 0):
            raise InputError(f"width (the target CI width) must be a number > 0, got {width!r}")
    z = float(norm_ppf(1 - a / 2))
    groups = (data[model].astype(str).to_numpy() if model else np.full(len(data), "(all)", dtype=object))
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
            est, se, lam = ppi_mean(fa, fl, yl, target=target, tune=tune)
        need_h = need_p = float("nan")
        if width is not None and n >= 2:
            d = yl - lam * fl
            fixed = (lam * lam * fa.var(ddof=1) + 2 * lam * float(np.cov(fl, d, ddof=1)[0, 1])) / N
            need_h = labels_needed(w, z, N, float(yl.var(ddof=1)), target=target)
            need_p = labels_needed(w, z, N, float(d.var(ddof=1)), fixed, target=target)
        rows.append({"model": g, "n": N, "n_labelled": n, "judge_mean": float(fa.mean()), "judge_se": jse,
                     "judge_low": fa.mean() - z * jse, "judge_high": fa.mean() + z * jse, "human_mean": hmean,
                     "human_se": hse, "human_low": hmean - z * hse, "human_high": hmean + z * hse,
                     "rectifier": float((yl - fl).mean()) if n else float("nan"), "ppi_lambda": lam,
                     "ppi_mean": est, "ppi_se": se,
                     "ppi_low": est - z * se, "ppi_high": est + z * se, "n_for_width_human": need_h,
                     "n_for_width_ppi": need_p})
    both = pd.DataFrame({human: y[lab], judge: f[lab]})
    agr = agreement(both, wide=[human, judge], level=level, levels=levels, bootstrap=bootstrap, seed=seed,
                    alpha=a, source=f"{source} (rows with both scores)")
    return JudgeResult(table=pd.DataFrame(rows, columns=list(JUDGE_FIELDS)), agreement=agr, human=human,
                       judge=judge, alpha=a, target=target, tune=bool(tune),
                       width=None if width is None else w, notes=tuple(notes))
