"""Argument checks shared by the result class and the functions that take a result (confint, emmeans)."""
from __future__ import annotations

from typing import Any

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
