"""Normal and Student t quantiles and tails from ``scipy.special``, without importing ``scipy.stats``.

``import scipy.stats`` costs about a second (it builds every distribution and parses their docstrings);
the commands that need two of its functions call these instead. Each is the very expression
``scipy.stats`` evaluates (scipy 1.17 ``_continuous_distns``: ``_norm_ppf``, ``_norm_sf``, ``t._ppf``,
``t._sf``), so the numbers are the same to the bit (tests/stats/test_dist.py):

* ``norm_ppf(q)`` = Φ⁻¹(q) = ``ndtri(q)`` (R ``qnorm``), ``scipy.stats.norm.ppf``;
* ``norm_sf(x)`` = 1 − Φ(x) = Φ(−x) = ``ndtr(-x)`` (R ``pnorm(x, lower.tail = FALSE)``), ``norm.sf``;
* ``t_ppf(q, df)`` = ``stdtrit(df, q)`` (R ``qt``), ``scipy.stats.t.ppf``;
* ``t_sf(x, df)`` = ``stdtr(df, -x)`` (R ``pt(x, df, lower.tail = FALSE)``), ``scipy.stats.t.sf``.

The ends of the support and invalid arguments are handled as ``rv_continuous.ppf``/``sf`` handle them.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from scipy import special


def norm_ppf(q: Any) -> Any:
    """The standard normal quantile Φ⁻¹(q) (``scipy.stats.norm.ppf``, R ``qnorm``)."""
    return special.ndtri(q)


def norm_sf(x: Any) -> Any:
    """The standard normal upper tail Φ(−x) (``scipy.stats.norm.sf``, R ``pnorm(lower.tail = FALSE)``)."""
    return special.ndtr(np.negative(x))


def t_ppf(q: Any, df: Any) -> Any:
    """Student t quantile with ``df`` degrees of freedom (``scipy.stats.t.ppf``, R ``qt``): ``stdtrit(df, q)``
    inside (0, 1); −∞ at q = 0 and +∞ at q = 1 (the support's ends, as ``rv_continuous.ppf`` places them);
    NaN for ``df <= 0`` or ``q`` outside [0, 1]."""
    q, df = np.asarray(q, dtype=float), np.asarray(df, dtype=float)
    v = special.stdtrit(df, q)
    v = np.where(q == 0, -np.inf, np.where(q == 1, np.inf, v))
    return np.where((df > 0) & (q >= 0) & (q <= 1), v, np.nan)[()]


def t_sf(x: Any, df: Any) -> Any:
    """Student t upper tail (``scipy.stats.t.sf``, R ``pt(lower.tail = FALSE)``): ``stdtr(df, -x)``, 1 at
    x = −∞ and 0 at +∞ (as ``rv_continuous.sf``); NaN for ``df <= 0`` or x NaN."""
    x, df = np.asarray(x, dtype=float), np.asarray(df, dtype=float)
    v = special.stdtr(df, -x)
    v = np.where(x == -np.inf, 1.0, np.where(x == np.inf, 0.0, v))
    return np.where((df > 0) & ~np.isnan(x), v, np.nan)[()]
