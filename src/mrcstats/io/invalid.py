"""The package's one rule for invalid answers (``correct`` <NA>) and its wording; without pandas.

A module of its own so that the command line's pandas-free ``glmer`` path (:class:`~mrcstats.io.columns.Columns`)
asks the same rule without importing pandas; :mod:`mrcstats.io.schema` re-exports both functions.
"""
from __future__ import annotations

import sys
from typing import Any

from mrcstats.errors import InputError
from mrcstats.io.fields import INVALID_WORDS

__all__ = ["apply_invalid", "invalid_sentence"]


def invalid_sentence(n: int, invalid: str = "wrong") -> str:
    """``"1 invalid answer counts as not correct"``, ``"6,931 invalid answers are left out"``."""
    one = n == 1
    verb = ("counts" if one else "count") + " as not correct" if invalid == "wrong" else \
        ("is" if one else "are") + " left out"
    return f"{n:,} invalid answer{'' if one else 's'} {verb}"


def apply_invalid(data: Any, invalid: str = "wrong", correct: str = "correct") -> tuple[Any, int]:
    """The package's one rule for invalid answers (``correct`` <NA>) in a model's data: ``"wrong"``
    (default, as :func:`mrcstats.stats.accuracy.summarize`, ``compare`` and the IRT) makes them not correct,
    ``"exclude"`` leaves their rows out. Returns the data and the number of invalid answers; a frame without
    ``correct`` comes back unchanged. Without this a GLMM drops them as R's ``na.omit`` and its denominator
    differs from the accuracy tables'.

    A log that is not a pandas frame comes back unchanged with 0: the pandas-free
    :class:`~mrcstats.io.columns.Columns` is only read when no answer is missing
    (:func:`~mrcstats.io.arrow_columns.read_table_columns`), and a lazy dataset's row pass applies the rule
    itself (:mod:`mrcstats.models.outofcore`)."""
    if invalid not in INVALID_WORDS:
        raise InputError(f"invalid must be 'wrong' (invalid = not correct) or 'exclude', got {invalid!r}")
    pd = sys.modules.get("pandas")     # no pandas imported: no pandas frame exists, nothing to do
    if pd is None or not isinstance(data, pd.DataFrame) or correct not in data.columns:
        return data, 0
    na = data[correct].isna()
    n = int(na.sum())
    if not n:
        return data, 0
    if invalid == "exclude":
        return data[~na.to_numpy()], n
    out = data.copy()
    col = out[correct]
    out[correct] = col.fillna(False) if str(col.dtype) == "boolean" else col.where(~na, 0)
    return out, n
