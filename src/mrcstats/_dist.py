"""Normal, Student t and chi-square quantiles and tails without importing ``scipy.stats``.

``import scipy.stats`` costs about a second and ``import scipy.special`` a third of one; the p-values of
every coefficient table (``2 Φ(−|z|)``) and the normal quantiles of every Wald interval are computed here
from the standard library's ``math.erf``/``math.erfc`` (no scipy import), the t and chi-square functions
from ``scipy.special``, imported when they are first called.

* ``norm_sf(x)`` = 1 − Φ(x) = Φ(−x) = ½ erfc(x/√2) (R ``pnorm(x, lower.tail = FALSE)``,
  ``scipy.stats.norm.sf``). The argument x/√2 is formed with its rounding error kept
  (Dekker's exact product) and erfc corrected by it to first order, so the tail is as accurate as
  ``erfc`` itself, also where x/√2 rounded would cost x² ulp (x = 37: ~1000 ulp; scipy's ``ndtr`` pays
  that, which is the tail's condition number: an x known to ½ ulp gives Φ(−x) to about x²/2 ulp).
* ``norm_ppf(q)`` = Φ⁻¹(q) (R ``qnorm``, ``scipy.stats.norm.ppf``): Acklam's rational approximation
  (relative error < 1.2e-9; P. J. Acklam, "An algorithm for computing the inverse normal cumulative
  distribution function", 2003) refined by one Halley step on Φ(x) − q, Φ from the compensated erf/erfc
  above (the residual formed as ½ erf(x/√2) − (q − ½) in the middle, where q − ½ is exact, and on the
  lower tail after the reflection Φ⁻¹(q) = −Φ⁻¹(1 − q), exact for q ≥ ½); below q = 1e-290, where Φ
  nears the subnormals, two Newton steps on log Φ(x) = log q with log Φ from its asymptotic series.
* ``t_ppf(q, df)`` = ``stdtrit(df, q)`` (R ``qt``), ``t_sf(x, df)`` = ``stdtr(df, -x)`` (R ``pt(lower.tail =
  FALSE)``), ``chi2_ppf(q, df)`` = 2 ``gammaincinv(df/2, q)`` (R ``qchisq``): the very expressions
  ``scipy.stats`` evaluates (scipy 1.17 ``_continuous_distns``: ``t._ppf``, ``t._sf``, ``chi2._ppf``), so
  these three equal ``scipy.stats.t.ppf``/``t.sf``/``chi2.ppf`` to the bit.

The normal pair is therefore not scipy's bits: tests/stats/test_dist.py checks them against 40-digit
values (mpmath) to 4e-16 relative and against ``scipy.stats`` (hypothesis) to 4e-16 times the condition
number (max(1, x²) for the tail, max(1, q/(x φ(x))) for the quantile), with 0, 1, ±∞, NaN and arguments
outside [0, 1] handled exactly as ``rv_continuous.ppf``/``sf`` handle them. The ends of the support and
invalid arguments of the t and chi-square functions likewise. The normal pair loops in Python over the
elements: meant for coefficient tables and a few quantiles, not for arrays of millions.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

_SQRT1_2_HI = 0.7071067811865476           # 1/√2 = _HI + _LO to ~107 bits
_SQRT1_2_LO = -4.833646656726457e-17
_TWO_OVER_SQRTPI = 1.1283791670955126      # 2/√π
_LOG_SQRT_2PI = 0.9189385332046728          # log √(2π)
_SPLIT = 134217729.0                        # 2^27 + 1 (Veltkamp's split of a double)

# Acklam (2003): Φ⁻¹ on (0, 0.02425) ∪ [0.02425, 0.97575] ∪ (0.97575, 1), relative error < 1.15e-9
_A = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02,
      -3.066479806614716e+01, 2.506628277459239e+00)
_B = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01,
      -1.328068155288572e+01)
_C = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00,
      4.374664141464968e+00, 2.938163982698783e+00)
_D = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00)
_P_LOW = 0.02425


def _scaled(x: float) -> tuple[float, float]:
    """(t, e) with t + e = x/√2 to about 2⁻¹⁰⁶ relative: t the rounded product, e its error (Dekker's
    two-product with Veltkamp's split, then the low half of 1/√2)."""
    t = x * _SQRT1_2_HI
    if not math.isfinite(t) or abs(x) > 1e300:
        return t, 0.0
    c = _SPLIT * x
    xh = c - (c - x)
    xl = x - xh
    c = _SPLIT * _SQRT1_2_HI
    yh = c - (c - _SQRT1_2_HI)
    yl = _SQRT1_2_HI - yh
    e = ((xh * yh - t) + xh * yl + xl * yh) + xl * yl
    return t, e + x * _SQRT1_2_LO


def _erfc_scaled(x: float) -> float:
    """erfc(x/√2) for x ≥ 0, corrected to first order for the rounding of x/√2."""
    t, e = _scaled(x)
    y = math.erfc(t)
    if e and y > 0:
        y -= _TWO_OVER_SQRTPI * math.exp(-t * t) * e
    return y


def _erf_scaled(x: float) -> float:
    """erf(x/√2), corrected to first order for the rounding of x/√2."""
    t, e = _scaled(x)
    return math.erf(t) + _TWO_OVER_SQRTPI * math.exp(-t * t) * e


def _norm_sf1(x: float) -> float:
    if math.isnan(x):
        return math.nan
    if abs(x) < 1.0:
        return 0.5 - 0.5 * _erf_scaled(x)
    if x > 0:
        return 0.5 * _erfc_scaled(x)
    return 1.0 - 0.5 * _erfc_scaled(-x)


def _acklam(p: float) -> float:
    """Acklam's approximation of Φ⁻¹(p), 0 < p < 1."""
    if p < _P_LOW:
        q = math.sqrt(-2.0 * math.log(p))
        c, d = _C, _D
        return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / \
            ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0)
    q = p - 0.5
    r = q * q
    a, b = _A, _B
    return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q / \
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0)


def _norm_ppf1(p: float) -> float:
    if not 0.0 <= p <= 1.0:                 # NaN too
        return math.nan
    if p == 0.0:
        return -math.inf
    if p == 1.0:
        return math.inf
    if p > 0.75:                            # 1 - p exact (Sterbenz); the lower tail is the accurate side
        return -_norm_ppf1(1.0 - p)
    x = _acklam(p)
    if p >= 0.25:                           # p - 0.5 exact: the residual from erf, no cancellation
        r = 0.5 * _erf_scaled(x) - (p - 0.5)
        u = r * math.exp(0.5 * x * x + _LOG_SQRT_2PI)
    elif p >= 1e-290:
        r = 0.5 * _erfc_scaled(-x) - p
        u = r * math.exp(0.5 * x * x + _LOG_SQRT_2PI)
    else:                                   # Φ(x) near or below the subnormals: Newton on log Φ(x) = log p
        logp = math.log(p)
        for _ in range(2):
            lphi = -0.5 * x * x - _LOG_SQRT_2PI
            lcdf = _log_ndtr_far(x)
            x -= (lcdf - logp) / math.exp(lphi - lcdf)
        return x
    return x - u / (1.0 + 0.5 * x * u)      # Halley's step


def _log_ndtr_far(x: float) -> float:
    """log Φ(x) for x ≤ −30 from the asymptotic series Φ(x) = φ(x)/|x| Σ_k (−1)^k (2k−1)!!/x^{2k}
    (Abramowitz & Stegun 26.2.12; at |x| ≥ 30 ten terms leave < 1e-25)."""
    x2 = x * x
    s, term = 1.0, 1.0
    for k in range(1, 11):
        term *= -(2 * k - 1) / x2
        s += term
    return -0.5 * x2 - _LOG_SQRT_2PI - math.log(-x) + math.log(s)


def _elementwise(f, v: Any) -> Any:
    a = np.asarray(v, dtype=float)
    out = np.fromiter((f(float(e)) for e in a.ravel()), dtype=float, count=a.size).reshape(a.shape)
    return out[()]


def norm_ppf(q: Any) -> Any:
    """The standard normal quantile Φ⁻¹(q) (``scipy.stats.norm.ppf``, R ``qnorm``): −∞ at 0, +∞ at 1,
    NaN outside [0, 1]."""
    return _elementwise(_norm_ppf1, q)


def norm_sf(x: Any) -> Any:
    """The standard normal upper tail Φ(−x) = ½ erfc(x/√2) (``scipy.stats.norm.sf``, R ``pnorm(lower.tail =
    FALSE)``): 1 at −∞, 0 at +∞, NaN at NaN."""
    return _elementwise(_norm_sf1, x)


def t_ppf(q: Any, df: Any) -> Any:
    """Student t quantile with ``df`` degrees of freedom (``scipy.stats.t.ppf``, R ``qt``): ``stdtrit(df, q)``
    inside (0, 1); −∞ at q = 0 and +∞ at q = 1 (the support's ends, as ``rv_continuous.ppf`` places them);
    NaN for ``df <= 0`` or ``q`` outside [0, 1]."""
    from scipy import special

    q, df = np.asarray(q, dtype=float), np.asarray(df, dtype=float)
    v = special.stdtrit(df, q)
    v = np.where(q == 0, -np.inf, np.where(q == 1, np.inf, v))
    return np.where((df > 0) & (q >= 0) & (q <= 1), v, np.nan)[()]


def t_sf(x: Any, df: Any) -> Any:
    """Student t upper tail (``scipy.stats.t.sf``, R ``pt(lower.tail = FALSE)``): ``stdtr(df, -x)``, 1 at
    x = −∞ and 0 at +∞ (as ``rv_continuous.sf``); NaN for ``df <= 0`` or x NaN."""
    from scipy import special

    x, df = np.asarray(x, dtype=float), np.asarray(df, dtype=float)
    v = special.stdtr(df, -x)
    v = np.where(x == -np.inf, 1.0, np.where(x == np.inf, 0.0, v))
    return np.where((df > 0) & ~np.isnan(x), v, np.nan)[()]


def chi2_ppf(q: Any, df: Any) -> Any:
    """Chi-square quantile with ``df`` degrees of freedom (``scipy.stats.chi2.ppf``, R ``qchisq``):
    2 ``gammaincinv(df/2, q)`` inside (0, 1); 0 at q = 0 and +∞ at q = 1 (the support's ends); NaN for
    ``df <= 0`` or ``q`` outside [0, 1]."""
    from scipy import special

    q, df = np.asarray(q, dtype=float), np.asarray(df, dtype=float)
    v = 2 * special.gammaincinv(df / 2, q)
    v = np.where(q == 0, 0.0, np.where(q == 1, np.inf, v))
    return np.where((df > 0) & (q >= 0) & (q <= 1), v, np.nan)[()]
