"""How numbers are printed: the one home for p-values, rounding per column kind, statistics and CIs.

Everything a person reads (PDF text, LaTeX, Markdown, HTML tables) formats its
numbers here; CSV and JSON keep the exact, unrounded values and never pass
through this module.

Conventions (APA 7th ed., sections 6.36 and 6.43-6.44; p-values as R's ``format.pval``):

* **p-values** print one way in every output, the terminal's included: R's
  ``format.pval`` with 4 significant digits and ``eps = .Machine$double.eps``
  (:func:`mrcstats._pformat.format_pval`: ``0.04231``, ``3.2e-07``, ``< 2.2e-16``;
  never a bare ``0``).
* **Monte Carlo p-values** (``p = (1 + #{T* ≥ T}) / (B + 1)``, R's
  ``fisher.test(simulate.p.value = TRUE)``/``chisq.test``) carry B and their Monte
  Carlo standard error ``sqrt(p (1 - p) / B)``: ``0.048 (MC SE 0.0048, B = 2000)``;
  at the floor ``1 / (B + 1)`` — no simulated table as extreme as the data — the
  p-value is only bounded: ``≤ 0.0004998 (MC, B = 2000)``.
* **One rounding rule per column kind** (:data:`KINDS`): a nonzero value that would
  round to zero is printed in scientific notation (``5.21e-17``) for unbounded
  kinds, and as a bound (``< 0.001``, ``> 0.999``) for bounded kinds (proportions,
  percentages, Cramér's V); exact zero prints as ``0``; magnitudes of 10⁹ and more
  (a diverged estimate) are printed in scientific notation too, counts excepted. A string of zeros
  (``0.0000``, ``0.00000000000000005210``) is never printed.
* A missing value (``None``, NaN, ``pd.NA``) prints as an en dash ``–``; ±∞ as
  ``∞``/``−∞``; a negative sign is the typographic minus ``−`` (U+2212), as the
  report tables print it (LaTeX export turns it into ``$-$``).
* Test statistics with their degrees of freedom: ``χ²(2) = 5.31``,
  ``χ²(2, N = 120) = 5.31``, ``z = 2.10``, ``t(18.4) = −2.10``, ``F(1, 20) = 4.20``.
* Effect sizes with confidence intervals: ``0.052 [0.011, 0.093]``.

:func:`parse_formatted` reads any of these strings back (the tests use it to
check that every printed number is its value within rounding).

References: American Psychological Association (2020), *Publication Manual*, 7th
ed., 6.36 (decimals, leading zeros) and 6.43-6.46 (statistics in text); R
``format.pval``; Davison & Hinkley (1997), *Bootstrap Methods*, eq. 4.11 (the
Monte Carlo p-value and its floor).
"""
from __future__ import annotations

import math
import numbers
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mrcstats._pformat import format_pval, format_signif
from mrcstats.errors import InputError

__all__ = ["KINDS", "MISSING", "Rule", "format_ci", "format_num", "format_p", "format_stat", "is_missing",
           "parse_formatted"]

#: what a missing value looks like
MISSING = "–"
#: typographic minus
MINUS = "−"


@dataclass(frozen=True)
class Rule:
    """How one kind of column is rounded.

    decimals : fixed decimals printed.
    lower, upper : the range a bounded quantity lives in (proportions [0, 1],
        percentages [0, 100]); a value strictly inside the range that would round
        to a bound prints as ``< lower + unit`` / ``> upper - unit``.
    integer_when_whole : print whole numbers without decimals (counts, df).
    thousands : group digits with commas (``1,045``).
    sig : significant digits of the scientific form used for tiny unbounded values.
    """

    decimals: int
    lower: float | None = None
    upper: float | None = None
    integer_when_whole: bool = False
    thousands: bool = False
    sig: int = 3


#: magnitude from which unbounded, non-count kinds switch to scientific notation
_HUGE = 1e9

#: the rounding rule of each column kind (``format_num(x, kind)``)
KINDS: dict[str, Rule] = {
    "estimate": Rule(3),                      # regression coefficients (log-odds), means
    "se": Rule(3),                            # standard errors
    "statistic": Rule(2),                     # z, t, χ², F, G²
    "proportion": Rule(3, lower=0.0, upper=1.0),
    "accuracy": Rule(3, lower=0.0, upper=1.0),
    "difference": Rule(3),                    # accuracy / proportion differences (signed)
    "percent": Rule(1, lower=0.0, upper=100.0),  # value in percent units: 17.5 means 17.5 %
    "count": Rule(0, integer_when_whole=True, thousands=True, sig=3),
    "df": Rule(2, integer_when_whole=True),
    "variance": Rule(3),
    "sd": Rule(3),
    "odds_ratio": Rule(2),
    "cramers_v": Rule(3, lower=0.0, upper=1.0),
    "correlation": Rule(2, lower=-1.0, upper=1.0),
    "ic": Rule(1),                            # AIC, BIC, logLik, deviance
}


def is_missing(x: Any) -> bool:
    """The one rule of what a report value prints as missing ("–"), for formatting and tables alike: ``None``,
    ``pd.NA``, ``NaT`` or a NaN (``float``, NumPy, ``Decimal``, or text that reads as one, ``"nan"``: what a
    number formatter would otherwise print as ``nan``). Other text, booleans and infinities are not missing."""
    if x is None:
        return True
    try:
        import pandas as pd

        if x is pd.NA or x is pd.NaT:
            return True
    except ImportError:  # pragma: no cover
        pass
    try:
        return math.isnan(float(x))
    except (TypeError, ValueError):
        return False


def _as_float(x: Any, what: str) -> float:
    if isinstance(x, bool):
        raise InputError(f"{what}: expected a number, got the boolean {x!r}")
    try:
        return float(x)
    except (TypeError, ValueError):
        raise InputError(f"{what}: expected a number, got {x!r} ({type(x).__name__})") from None


def typographic_minus(s: str) -> str:
    """A leading '-' as the typographic minus (``MINUS``)."""
    return MINUS + s[1:] if s.startswith("-") else s


def _sci(x: float, sig: int) -> str:
    """``5.21e-17`` (mantissa with ``sig`` significant digits; exponent as R prints it)."""
    return typographic_minus(f"{x:.{max(sig - 1, 0)}e}")


def _fixed(x: float, decimals: int, thousands: bool = False) -> str:
    s = f"{x:,.{decimals}f}" if thousands else f"{x:.{decimals}f}"
    if float(s.replace(",", "")) == 0.0:   # "-0.000" → the value rounds to zero
        s = s.lstrip("-")
    return typographic_minus(s)


def _check_kind(kind: str) -> Rule:
    try:
        return KINDS[kind]
    except KeyError:
        raise InputError(f"format_num: unknown kind {kind!r}; use one of {sorted(KINDS)}") from None


def format_num(x: Any, kind: str = "estimate") -> str:
    """``x`` rounded by the rule of its column kind (:data:`KINDS`).

    Examples: ``format_num(0.05213, "difference") == "0.052"``,
    ``format_num(5.21e-17, "variance") == "5.21e-17"``,
    ``format_num(0.0002, "accuracy") == "< 0.001"``, ``format_num(1045, "count") == "1,045"``,
    ``format_num(float("nan")) == "–"``.
    """
    rule = _check_kind(kind)
    if is_missing(x):
        return MISSING
    v = _as_float(x, f"format_num(kind={kind!r})")
    if math.isinf(v):
        return "∞" if v > 0 else MINUS + "∞"
    if v == 0:
        return "0"
    if rule.integer_when_whole and v.is_integer():
        return _fixed(v, 0, rule.thousands)
    if abs(v) >= _HUGE and not rule.thousands:   # 1e15 as 1.00e+15, not sixteen digits and decimals
        return _sci(v, rule.sig)
    dec = rule.decimals
    if rule.integer_when_whole and dec == 0:   # a non-whole count (weighted): two decimals
        dec = 2
    unit = 10.0 ** -dec
    s = _fixed(v, dec, rule.thousands)
    r = float(s.replace(",", "").replace(MINUS, "-"))
    if rule.lower is not None and rule.lower < v and r <= rule.lower:
        return "< " + _fixed(rule.lower + unit, dec)
    if rule.upper is not None and v < rule.upper and r >= rule.upper:
        return "> " + _fixed(rule.upper - unit, dec)
    if r == 0:   # nonzero but rounds to zero: scientific, never a string of zeros
        return _sci(v, rule.sig)
    return s


# --------------------------------------------------------------------------- p-values


def format_p(p: Any, *, mc_b: int | None = None, mc_se: float | None = None) -> str:
    """A p-value for the report tables and text: :func:`mrcstats._pformat.format_pval` (R's ``format.pval``,
    ``0.0423``, ``3.2e-07``, ``< 2.2e-16``), missing ``–``.

    With ``mc_b`` (the number of Monte Carlo replicates) the value is a Monte Carlo
    p-value ``(1 + #{T* ≥ T}) / (B + 1)``: at its floor ``1 / (B + 1)`` it prints as a
    bound, ``≤ 0.0004998 (MC, B = 2000)``; otherwise with its Monte Carlo standard error
    ``mc_se`` (default ``sqrt(p (1 - p) / B)``, two significant digits), ``0.048 (MC SE 0.0048, B = 2000)``.
    A p-value outside [0, 1] is an error, not a number to print.
    """
    if is_missing(p):
        return MISSING
    v = _as_float(p, "format_p")
    if not 0.0 <= v <= 1.0:
        raise InputError(f"format_p: a p-value must lie in [0, 1], got {v!r}")
    if mc_b is None:
        if mc_se is not None:
            raise InputError("format_p: mc_se needs mc_b (the number of Monte Carlo replicates)")
        return format_pval(v)
    if (isinstance(mc_b, bool) or not isinstance(mc_b, numbers.Real) or not math.isfinite(mc_b) or mc_b < 1
            or float(mc_b) != int(mc_b)):
        raise InputError(f"format_p: mc_b must be a positive whole number of replicates, got {mc_b!r}")
    b = int(mc_b)
    floor = 1.0 / (b + 1)
    btxt = f"B = {b:,}" if b >= 10000 else f"B = {b}"
    if v <= floor * (1 + 1e-9):
        return f"≤ {format_pval(floor)} (MC, {btxt})"
    se = math.sqrt(v * (1 - v) / b) if mc_se is None else _as_float(mc_se, "format_p(mc_se)")
    if is_missing(se) or se < 0:
        raise InputError(f"format_p: mc_se must be a non-negative number, got {mc_se!r}")
    return f"{format_pval(v)} (MC SE {format_signif(se, 2)}, {btxt})"


# --------------------------------------------------------------------------- statistics and intervals

_STAT_NAMES = {"chi2": "χ²", "chisq": "χ²", "x2": "χ²", "χ2": "χ²", "χ²": "χ²", "g2": "G²", "g²": "G²",
               "lrt": "χ²", "z": "z", "t": "t", "f": "F", "w": "W", "u": "U"}


def format_stat(name: str, value: Any, df: Any = None, *, n: int | None = None) -> str:
    """A test statistic with its degrees of freedom, APA-style.

    ``format_stat("chi2", 5.311, 2) == "χ²(2) = 5.31"``; ``format_stat("z", 2.1) == "z = 2.10"``;
    ``format_stat("F", 4.2, (1, 20)) == "F(1, 20) = 4.20"``; ``n`` adds the sample size
    as APA asks for χ²: ``χ²(2, N = 120) = 5.31``. ``chi2``/``chisq``/``lrt`` print as χ²,
    ``g2`` as G²; other names are printed as given.
    """
    if not isinstance(name, str) or not name:
        raise InputError(f"format_stat: the statistic needs a name such as 'z' or 'chi2', got {name!r}")
    sym = _STAT_NAMES.get(name.lower(), name)
    args = []
    if df is not None and not (isinstance(df, float) and math.isnan(df)):
        dfs = list(df) if (isinstance(df, Sequence) and not isinstance(df, str)) or getattr(df, "ndim", 0) > 0 \
            else [df]
        args = [format_num(d, "df") for d in dfs]
    if n is not None:
        args.append(f"N = {format_num(n, 'count')}")
    head = f"{sym}({', '.join(args)})" if args else sym
    return f"{head} = {format_num(value, 'statistic')}"


def format_ci(est: Any, lo: Any, hi: Any, kind: str = "estimate") -> str:
    """An estimate with its confidence interval in brackets: ``0.052 [0.011, 0.093]``.

    Each of the three numbers follows the rule of ``kind`` (``"odds_ratio"`` →
    ``1.85 [1.20, 2.85]``, ``"cramers_v"`` → ``0.213 [0.105, 0.320]``,
    ``"difference"`` for accuracy differences). Missing bounds print as ``–``; when
    both are missing only the estimate is printed.
    """
    e = format_num(est, kind)
    if is_missing(lo) and is_missing(hi):
        return e
    return f"{e} [{format_num(lo, kind)}, {format_num(hi, kind)}]"


# --------------------------------------------------------------------------- reading back

_NUM = re.compile(r"^[<>≤≥]?\s*([−-]?(?:\d[\d,]*)?(?:\.\d+)?(?:e[−+-]?\d+)?|[−-]?∞)$")


def parse_formatted(s: str) -> float:
    """The number a string from this module stands for (``"1,045"`` → 1045.0, ``"< .001"`` → 0.001,
    ``"−∞"`` → -inf, ``"–"`` → nan). A bound (``< .001``) reads as the bound; anything after
    the first space that follows the number (``(MC SE .005, B = 2000)``) is ignored, as is a
    leading ``name(df) =``. Raises :class:`InputError` when the text is not such a number.
    """
    t = str(s).strip()
    if t == MISSING:
        return math.nan
    t = t.split(" (", 1)[0].split(" [", 1)[0].strip()
    if " = " in t:
        t = t.rsplit(" = ", 1)[1]
    t = re.sub(r"^([<>≤≥])\s+", r"\1", t)
    m = _NUM.match(t)
    if not m or not m.group(1) or m.group(1) in ("−", "-"):
        raise InputError(f"parse_formatted: {s!r} is not a formatted number")
    body = m.group(1).replace(MINUS, "-").replace(",", "")
    if body.endswith("∞"):
        return -math.inf if body.startswith("-") else math.inf
    return float(body)
