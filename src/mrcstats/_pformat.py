"""p-values for the terminal (``summary()`` text of every result), below report/ so the stats layer can use it.

The printed reports (PDF, HTML, Markdown) use APA style through :func:`mrcstats.report.format.format_p`
(``< .001``); the terminal shows the value itself, as R's ``format.pval`` does, so a reader can tell
``1e-5`` from ``1e-45``:

* ``digits`` significant digits (``0.0423``, ``2.3e-45``), never a bare ``0``;
* a p-value that is exactly 0 -- it underflowed, or was computed as ``1 - F(x)`` and lost
  everything below double precision -- prints as a bound, ``< 1e-16`` (R's ``format.pval``
  prints ``< 2.2e-16``, its ``eps = .Machine$double.eps``; the bound here is the same
  order, true for either way of losing the value);
* missing (None, NaN) prints ``NA``.
"""
from __future__ import annotations

import math
from typing import Any

__all__ = ["P_FLOOR_TEXT", "format_pval"]

#: what a p-value of exactly zero prints as
P_FLOOR_TEXT = "< 1e-16"


def format_pval(p: Any, digits: int = 3) -> str:
    """A p-value for the terminal: ``digits`` significant digits, ``< 1e-16`` for 0, ``NA`` when missing."""
    if p is None:
        return "NA"
    try:
        v = float(p)
    except (TypeError, ValueError):
        return "NA"
    if math.isnan(v):
        return "NA"
    if v <= 0.0:
        return P_FLOOR_TEXT
    return f"{v:.{int(digits)}g}"
