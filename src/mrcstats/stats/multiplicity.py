"""Adjusted p-values for a family of tests, as R's ``p.adjust``.

For m p-values sorted increasingly, ``p_(1) <= ... <= p_(m)``:

* ``holm`` (Holm 1979, the default): ``p~_(i) = max_{j <= i} min(1, (m - j + 1) p_(j))``;
* ``bonferroni``: ``min(1, m p)``;
* ``BH`` (Benjamini & Hochberg 1995): ``p~_(i) = min_{j >= i} min(1, m p_(j) / j)``;
* ``none``: unchanged.

Missing values (NaN) are kept as NaN and not counted in m (R's ``p.adjust(p, n = sum(!is.na(p)))``).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mrcstats.errors import InputError

METHODS = ("holm", "bonferroni", "BH", "none")
#: accepted spellings (case-insensitive; R's "fdr" is "BH")
_ALIASES = {"holm": "holm", "bonferroni": "bonferroni", "bh": "BH", "fdr": "BH", "none": "none"}


def check_method(method: str | None) -> str:
    """The canonical name of a p-value adjustment (``None`` = ``"none"``), or an InputError naming the choices."""
    key = "none" if method is None else str(method).lower()
    if key not in _ALIASES:
        raise InputError(f"unknown p-value adjustment method {method!r}; choose one of {', '.join(METHODS)}")
    return _ALIASES[key]


def p_adjust(p: Sequence[float] | np.ndarray, method: str = "holm") -> np.ndarray:
    """Adjusted p-values in the input order (R ``p.adjust(p, method)``)."""
    method = check_method(method)
    x = np.asarray(p, dtype=float)
    if x.ndim != 1:
        raise InputError("p_adjust: give a one-dimensional sequence of p-values")
    ok = ~np.isnan(x)
    if np.any((x[ok] < 0) | (x[ok] > 1)):
        raise InputError("p_adjust: p-values must lie in [0, 1]")
    out = x.copy()
    v = x[ok]
    m = len(v)
    if m == 0 or method == "none":
        return out
    if method == "bonferroni":
        adj = np.minimum(1.0, m * v)
    elif method == "holm":
        o = np.argsort(v, kind="mergesort")
        s = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * v[o]))
        adj = np.empty(m)
        adj[o] = s
    else:  # BH
        o = np.argsort(v, kind="mergesort")[::-1]
        i = np.arange(m, 0, -1)
        s = np.minimum(1.0, np.minimum.accumulate(m / i * v[o]))
        adj = np.empty(m)
        adj[o] = s
    out[ok] = adj
    return out
