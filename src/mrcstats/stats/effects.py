"""Effect sizes with confidence intervals for the contingency tables of a report.

* :func:`proportion_difference`: ``p1 - p2`` with the Wald interval
  ``(p1 - p2) ± z sqrt(p1 (1 - p1) / n1 + p2 (1 - p2) / n2)``, clipped to [-1, 1] — R's
  ``prop.test(c(k1, k2), c(n1, n2), correct = FALSE)$conf.int`` (an accuracy difference between
  two conditions).
* :func:`cramers_v`: ``V = sqrt(X2 / (n (min(r, c) - 1)))`` (uncorrected Pearson X2) with the
  interval from inverting the noncentral chi-square distribution (Steiger 2004; the method of R's
  ``effectsize::cramers_v(adjust = FALSE, alternative = "two.sided")``): the bounds of the
  noncentrality λ solve ``pchisq(X2, df, λ) = 1 - α/2`` and ``= α/2`` (λ = 0 when no solution),
  and ``V = sqrt(λ / (n (min(r, c) - 1)))``, capped at 1.

References: Newcombe (1998), Stat. Med. 17, 873-890 (the Wald interval, method 1); Steiger (2004),
Psychol. Methods 9(2), 164-182.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from mrcstats._repr import Result
from mrcstats.errors import InputError


@dataclass(frozen=True, repr=False)
class EffectSize(Result):
    """An effect size with its confidence interval."""

    name: str
    estimate: float
    ci_low: float
    ci_high: float
    level: float = 0.95

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "estimate": self.estimate, "ci_low": self.ci_low, "ci_high": self.ci_high,
                "level": self.level}

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame([self.to_dict()])

    def summary(self) -> str:
        return f"{self.name} = {self.estimate:.4g}, {self.level:.0%} CI [{self.ci_low:.4g}, {self.ci_high:.4g}]"


def proportion_difference(k1: int, n1: int, k2: int, n2: int, level: float = 0.95) -> EffectSize:
    """``k1/n1 - k2/n2`` with R's ``prop.test(..., correct = FALSE)`` interval (module docstring)."""
    from mrcstats._dist import norm_ppf

    if min(n1, n2) <= 0 or not (0 <= k1 <= n1 and 0 <= k2 <= n2):
        raise InputError(f"proportion_difference: need 0 <= k <= n and n > 0, got {k1}/{n1} and {k2}/{n2}")
    p1, p2 = k1 / n1, k2 / n2
    z = float(norm_ppf(0.5 + level / 2))
    half = z * math.sqrt(p1 * (1 - p1) / n1 + p2 * (1 - p2) / n2)
    d = p1 - p2
    return EffectSize("difference in proportions", d, max(-1.0, d - half), min(1.0, d + half), level)


def cramers_v(counts: Any, level: float = 0.95) -> EffectSize:
    """Cramér's V of an r × c table of counts with the noncentral-χ² interval (module docstring)."""
    from scipy.optimize import brentq
    from scipy.stats import chi2, ncx2

    x = np.asarray(counts, dtype=float)
    x = x[x.sum(axis=1) > 0][:, x.sum(axis=0) > 0]
    if x.ndim != 2 or min(x.shape) < 2:
        raise InputError("cramers_v: the table needs at least 2 non-empty rows and columns")
    n = x.sum()
    e = np.outer(x.sum(axis=1), x.sum(axis=0)) / n
    stat = float(np.sum((x - e) ** 2 / e))
    df = (x.shape[0] - 1) * (x.shape[1] - 1)
    k = min(x.shape) - 1
    alpha = 1 - level

    def cdf(lam: float) -> float:
        return float(chi2.cdf(stat, df)) if lam <= 0 else float(ncx2.cdf(stat, df, lam))

    def bound(target: float) -> float:
        if cdf(0.0) < target:       # even λ = 0 puts the statistic below the quantile: bound at 0
            return 0.0
        hi = max(stat, 1.0)
        while cdf(hi) > target:
            hi *= 2.0
        return float(brentq(lambda lam: cdf(lam) - target, 0.0, hi, xtol=1e-10))

    lo, up = bound(1 - alpha / 2), bound(alpha / 2)
    v = math.sqrt(stat / (n * k))
    return EffectSize("Cramér's V", v, min(1.0, math.sqrt(lo / (n * k))), min(1.0, math.sqrt(up / (n * k))), level)
