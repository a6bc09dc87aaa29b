"""Argument checks shared by the result class and the functions that take a result (confint, emmeans), and the
significance level and bootstrap resamples of the statistics (compare, agreement, judge)."""
from __future__ import annotations

from typing import Any

import numpy as np

from mrcstats.errors import InputError


def check_level(level: Any, who: str) -> float:
    """A confidence level as a float strictly between 0 and 1, or an InputError starting with ``who``."""
    try:
        level = float(level)
    except (TypeError, ValueError):
        raise InputError(f"{who} level must be a number in (0, 1), got {level!r}") from None
    if not 0 < level < 1:
        raise InputError(f"{who} level must be in (0, 1), got {level}")
    return level


def check_alpha(alpha: Any) -> float:
    """A significance level (1 − the confidence level) as a float strictly between 0 and 1, or an InputError."""
    number = isinstance(alpha, (int, float, np.integer, np.floating)) and not isinstance(alpha, bool)
    if not number or not 0 < float(alpha) < 1:
        raise InputError(f"alpha must be between 0 and 1 (e.g. 0.05), got {alpha!r}")
    return float(alpha)


def check_resamples(bootstrap: Any) -> int:
    """A number of bootstrap resamples as a whole number >= 0 (0 = none), or an InputError."""
    if isinstance(bootstrap, bool) or not isinstance(bootstrap, (int, np.integer)) or bootstrap < 0:
        raise InputError(f"bootstrap must be a whole number >= 0 (resamples; 0 = none), got {bootstrap!r}")
    return int(bootstrap)
