"""Argument checks shared by the result class and the functions that take a result (confint, emmeans), the
significance level and bootstrap resamples of the statistics (compare, agreement, judge), and the data table the
model fits take (glmer, lmer, the design)."""
from __future__ import annotations

from typing import Any

import numpy as np

from mrcstats.errors import InputError
from mrcstats.io.columns import in_memory


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


def require_table(data: Any, who: str) -> None:
    """The models' one check of a data table (:func:`mrcstats.io.columns.in_memory`: a pandas frame or a
    :class:`~mrcstats.io.columns.Columns` table), with one message starting with ``who`` (glmer, lmer, the
    design): what it must be, what it got and how to get one."""
    if not in_memory(data):
        raise InputError(f"{who}: data must be a table in memory, a pandas DataFrame or a mrcstats.io.columns.Columns "
                         f"table, got {type(data).__name__}; read a file with mrcstats.io.read_data(path) (a plain "
                         f"table) or mrcstats.read_log(path) (a response log)")
