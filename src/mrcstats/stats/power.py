"""Power analysis for a paired comparison of two models (Miller 2024, §5, Eq. 9-10).

Normal approximation of a two-sided paired z-test at level ``α`` with power ``1 - β``,
``z_α = Φ⁻¹(1 - α/2)``, ``z_β = Φ⁻¹(power)``, ``sd_d`` the standard deviation of the
per-item score differences ``d_i = s_{a,i} - s_{b,i}`` (Miller's ``ω² + σ_A²/K_A +
σ_B²/K_B`` is ``sd_d²``) and ``deff`` the cluster design effect (the ratio of the clustered
to the unclustered variance of the mean difference; 1 for independent items)::

    minimum detectable difference   MDE = (z_α + z_β) · sd_d · sqrt(deff / n)         (Eq. 10)
    items needed for a difference δ   n = ceil( (z_α + z_β)² · sd_d² · deff / δ² )    (Eq. 9)

Miller's worked example: ``sd_d² = 1/9``, ``δ = 0.03``, α = 0.05, power 0.8 → n = 969.
From a :class:`~mrcstats.stats.compare.CompareResult`, every pair supplies its own
``sd_d = se · sqrt(n)`` (the plain paired SE) and, when the comparison was clustered,
``deff = (se_cluster / se)²``.
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

__all__ = ["POWER_FIELDS", "PowerResult", "power"]

#: the per-row fields of ``power(...).to_dict()["results"]``
POWER_FIELDS: tuple[str, ...] = ("model_a", "model_b", "sd_diff", "design_effect", "n_items", "mde", "effect",
                                 "n_required")


@dataclass(frozen=True, repr=False)
class PowerResult(Result):
    """Minimum detectable differences or items needed (see the module docstring).

    ``table`` has :data:`POWER_FIELDS`: ``mde`` for the given ``n_items`` (null when an
    ``effect`` was asked), ``n_required`` for the given ``effect`` (null otherwise).
    """

    table: pd.DataFrame = field(repr=False)
    alpha: float = 0.05
    power: float = 0.8
    #: the outcome of the comparison the SDs came from ("correct" or "score"); None for a given --sd-diff
    outcome: str | None = None

    @property
    def z_alpha(self) -> float:
        from mrcstats._dist import norm_ppf

        return float(norm_ppf(1 - self.alpha / 2))

    @property
    def z_beta(self) -> float:
        from mrcstats._dist import norm_ppf

        return float(norm_ppf(self.power))

    def to_frame(self) -> pd.DataFrame:
        return self.table.copy()

    def to_dict(self) -> dict[str, Any]:
        """``{"alpha", "power", "z_alpha", "z_beta", "results": [{model_a, model_b, sd_diff, design_effect,
        n_items, mde, effect, n_required}]}``."""
        rows = plain_records(self.table[list(POWER_FIELDS)])
        return {"alpha": self.alpha, "power": self.power, "z_alpha": self.z_alpha, "z_beta": self.z_beta,
                "outcome": self.outcome, "results": rows}

    def summary(self) -> str:
        lines = [(f"Paired comparison power (normal approximation, Miller 2024 Eq. 9-10): alpha = {self.alpha:g} "
                 f"two-sided, power = {self.power:g}")]
        if self.outcome is not None:
            what = "score (differences of mean graded scores)" if self.outcome == "score" else "correct (accuracy)"
            lines.append(f"  outcome: {what}")
        for r in self.table.itertuples(index=False):
            who = f"{r.model_a} vs {r.model_b}: " if r.model_a is not None else ""
            base = f"sd_diff = {r.sd_diff:.4g}, design effect = {r.design_effect:.4g}"
            if r.effect is None or (isinstance(r.effect, float) and math.isnan(r.effect)):
                lines.append(f"  {who}{base}: with {int(r.n_items)} items the minimum detectable difference is "
                             f"{r.mde:.4g}")
            else:
                need = "NA" if pd.isna(r.n_required) else str(int(r.n_required))
                lines.append(f"  {who}{base}: detecting a difference of {r.effect:.4g} needs {need} items")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def _positive(name: str, v: Any, integer: bool = False) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a number, got {v!r}") from None
    if not math.isfinite(f) or f <= 0 or (integer and f != int(f)):
        kind = "a whole number > 0" if integer else "a number > 0"
        raise InputError(f"{name} must be {kind}, got {v!r}")
    return f


def power(sd_diff: Any, n_items: int | None = None, effect: float | None = None, alpha: float = 0.05,
          power: float = 0.8, design_effect: float = 1.0) -> PowerResult:
    """Minimum detectable difference for ``n_items``, or the items needed to detect ``effect``.

    Args:
        sd_diff: the SD of the per-item score differences (a number), or a
            :class:`~mrcstats.stats.compare.CompareResult` (then one row per pair, each with its
            observed paired SD, design effect and — unless ``n_items`` is given — its item count).
        n_items: items in the comparison (for the MDE).
        effect: the difference to detect (for the items needed); give this or ``n_items``.
        alpha: two-sided significance level.
        power: the probability of detecting a true difference of the MDE / ``effect``.
        design_effect: variance inflation from clustering (1 = independent items); ignored
            for a comparison result (each pair has its own).

    Formula: the module docstring (Miller 2024, arXiv:2411.00640, Eq. 9-10).
    """
    from mrcstats._dist import norm_ppf
    from mrcstats.stats.compare import CompareResult

    a = _positive("alpha", alpha)
    pw = _positive("power", power)
    if not a < 1:
        raise InputError(f"alpha must be below 1, got {alpha!r}")
    if not pw < 1:
        raise InputError(f"power must be below 1, got {power!r}")
    if effect is not None:
        eff = abs(float(effect)) if isinstance(effect, (int, float)) else _positive("effect", effect)
        if not eff > 0 or not math.isfinite(eff):
            raise InputError(f"effect must be a non-zero difference, got {effect!r}")
    else:
        eff = None
    n_given = None if n_items is None else int(_positive("n_items", n_items, integer=True))
    zsum = float(norm_ppf(1 - a / 2) + norm_ppf(pw))
    if isinstance(sd_diff, CompareResult):
        pr = sd_diff.pairs
        n = pr["n_items"].to_numpy(dtype=float)
        sd = pr["se"].to_numpy(dtype=float) * np.sqrt(n)
        if sd_diff.cluster:
            deff = (pr["se_cluster"].to_numpy(dtype=float) / pr["se"].to_numpy(dtype=float)) ** 2
        else:
            deff = np.ones(len(pr))
        rows = pd.DataFrame({"model_a": pr["model_a"].astype(object), "model_b": pr["model_b"].astype(object),
                             "sd_diff": sd, "design_effect": deff,
                             "n_items": np.full(len(pr), n_given) if n_given else n.astype(np.int64)})
    else:
        sd0 = float(sd_diff) if isinstance(sd_diff, (int, float, np.floating)) else None
        if sd0 is None or not math.isfinite(sd0) or sd0 < 0:
            raise InputError(f"sd_diff must be a number >= 0 (the SD of per-item differences) or a compare result, "
                             f"got {sd_diff!r}")
        de = _positive("design_effect", design_effect)
        if eff is None and n_given is None:
            raise InputError("give n_items (for the minimum detectable difference) or effect (for the items "
                             "needed)")
        rows = pd.DataFrame({"model_a": [None], "model_b": [None], "sd_diff": [sd0], "design_effect": [de],
                             "n_items": [n_given]})
    sd = rows["sd_diff"].to_numpy(dtype=float)
    deff = rows["design_effect"].to_numpy(dtype=float)
    if eff is None:
        nn = rows["n_items"].to_numpy(dtype=float)
        rows["mde"] = zsum * sd * np.sqrt(deff / nn)
        rows["effect"] = np.nan
        rows["n_required"] = pd.array([None] * len(rows), dtype="Int64")
    else:
        need = np.ceil(zsum ** 2 * sd ** 2 * deff / eff ** 2 - 1e-9)
        rows["mde"] = np.nan
        rows["effect"] = eff
        rows["n_required"] = pd.array([int(max(v, 1)) if np.isfinite(v) else None for v in need], dtype="Int64")
        if n_given is None and not isinstance(sd_diff, CompareResult):
            rows["n_items"] = pd.array([None], dtype="Int64")
    return PowerResult(table=rows[list(POWER_FIELDS)], alpha=a, power=pw,
                       outcome=sd_diff.outcome if isinstance(sd_diff, CompareResult) else None)
