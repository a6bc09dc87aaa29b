"""The one home of printed p-values: R's ``format.pval`` for every reader (terminal, tables, PDF, HTML).

Every p-value a person reads -- the ``summary()`` text of each result, the CLI, the report
tables of the PDF, HTML and Markdown output -- is printed by :func:`format_pval`, which is R's
``format.pval(p, digits, eps = .Machine$double.eps)`` for one value:

* a p-value below ``eps`` (the double-precision machine epsilon, 2.220446e-16) -- it underflowed,
  or was computed as ``1 - F(x)`` and lost everything below double precision, or is a genuine
  2.28e-318 -- prints as the bound ``< 2.2e-16`` (``format(eps, digits = digits - 2)``; with
  ``digits - 2 == 1`` R writes it without the space, ``<2e-16``). A p-value is never a bare ``0``;
* any other value prints as R's ``format(p, digits)``: ``digits`` significant digits with trailing
  zeros dropped, in fixed notation unless scientific is narrower (``0.0423``, ``1e-05``, ``3.2e-07``,
  ``0.000123``; R's ``formatReal`` with ``scipen = 0``);
* missing (None, NaN, ``pd.NA``) prints ``NA`` (``na`` to change it: the report tables print ``–``).

``digits`` defaults to 4, what R itself prints p-values with: ``print.htest`` (``digits - 3`` of the
default 7) and ``printCoefmat`` (``dig.tst``) both call ``format.pval`` with 4 digits. The JSON and
CSV outputs keep the unrounded number and never pass through here.

References: R Core Team, ``?format.pval`` and ``?format`` (``formatReal`` in ``src/main/format.c``).
"""
from __future__ import annotations

import math
import sys
from typing import Any

__all__ = ["DIGITS", "EPS", "P_FLOOR_TEXT", "format_pval", "format_pval_columns", "format_signif", "p_clause"]

#: R's ``.Machine$double.eps``: p-values below it print as a bound
EPS = sys.float_info.epsilon
#: significant digits of a printed p-value (R's ``print.htest`` and ``printCoefmat``)
DIGITS = 4


def _missing(p: Any) -> bool:
    if p is None:
        return True
    try:
        return math.isnan(float(p))
    except (TypeError, ValueError):
        return True


def format_signif(x: float, digits: int) -> str:
    """One finite number as R's ``format(x, digits = digits)`` prints it (``scipen = 0``).

    The value is rounded to ``digits`` significant digits, trailing zeros dropped (``nsig`` digits
    left); fixed notation needs ``neg + max(kpower + 1, 1) + rgt + (rgt > 0)`` characters with
    ``rgt = max(nsig - kpower - 1, 0)``, scientific ``neg + nsig + (nsig > 1) + 3 + e`` (``e`` = 1, or 2
    for a three-digit exponent); fixed is used when it is not wider (R's ``formatReal``).
    """
    v = float(x)
    if v == 0.0:
        return "0"
    if not math.isfinite(v):
        return ("-Inf" if v < 0 else "Inf") if math.isinf(v) else "NaN"
    d = max(1, min(int(digits), 22))
    mant, _, ex = f"{abs(v):.{d - 1}e}".partition("e")
    kpower = int(ex)
    nsig = len(mant.replace(".", "").rstrip("0")) or 1
    neg = 1 if v < 0 else 0
    rgt = max(nsig - kpower - 1, 0)
    w_fixed = neg + max(kpower + 1, 1) + rgt + (rgt > 0)
    e = 2 if abs(kpower) >= 100 else 1
    w_sci = neg + nsig + (nsig > 1) + 3 + e
    if w_fixed <= w_sci:
        return f"{v:.{rgt}f}"
    return f"{v:.{nsig - 1}e}"


def format_pval(p: Any, digits: int = DIGITS, eps: float = EPS, na: str = "NA") -> str:
    """A p-value as R's ``format.pval(p, digits, eps)``: ``< 2.2e-16`` below ``eps``, else ``format(p, digits)``.

    ``format_pval(1e-300) == "< 2.2e-16"``, ``format_pval(0.04231) == "0.04231"``,
    ``format_pval(3.2e-7) == "3.2e-07"``, ``format_pval(None) == "NA"``.
    """
    if _missing(p):
        return na
    v = float(p)
    if v < eps:
        d = max(1, int(digits) - 2)
        return ("<" if d == 1 else "< ") + format_signif(eps, d)
    return format_signif(v, digits)


#: what a p-value below machine epsilon prints as (at the default digits)
P_FLOOR_TEXT = format_pval(0.0)


def p_clause(p: Any, name: str = "p", digits: int = DIGITS) -> str:
    """``"p = 0.04231"``, or ``"p < 2.2e-16"`` for a bound: R's ``print.htest`` (``p-value < 2.2e-16``, never
    ``= <``)."""
    s = format_pval(p, digits)
    return f"{name} {s}" if s.startswith("<") else f"{name} = {s}"


def format_pval_columns(frame: Any, columns: Any, digits: int = DIGITS, na: str = "NA") -> Any:
    """A copy of a DataFrame whose p-value ``columns`` (those present) are :func:`format_pval` strings.

    For results whose ``summary()`` prints a pandas table (``to_string``): the p columns go
    through the one formatter, the other columns keep their own format.
    """
    out = frame.copy()
    for c in columns:
        if c in out.columns:
            out[c] = [format_pval(v, digits, na=na) for v in out[c]]
    return out
