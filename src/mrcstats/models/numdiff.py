"""Numerical derivatives as R's numDeriv (``jacobian``, ``hessian`` with ``method = "Richardson"``): the first
steps |d·x| + eps·(|x| < zero.tol), halved ``r`` times by the factor ``v``, extrapolated by Richardson. The lmer fit
(:mod:`.lmm`: Satterthwaite's Jacobians, the variance parameters' Hessian) and the Laplace fit (:mod:`.laplace`:
the Hessian behind the SEs) both differentiate here.

Reference: Gilbert & Varadhan, numDeriv (R package) ``genD``/``hessian``; Linfield & Penny (1989), Microcomputers
in Numerical Analysis.
"""
from __future__ import annotations

import math

import numpy as np

_ZERO_TOL = math.sqrt(np.finfo(float).eps / 7e-7)


def _steps(x: np.ndarray, d: float, eps: float = 1e-4) -> np.ndarray:
    """numDeriv's first steps: |d·x| + eps·(|x| < zero.tol)."""
    return np.abs(d * x) + eps * (np.abs(x) < _ZERO_TOL)


def _richardson(a: list, r: int):
    """numDeriv's extrapolation: a_k <- (4^m a_{k+1} - a_k) / (4^m - 1) for m = 1..r-1."""
    for m in range(1, r):
        a = [(a[k + 1] * 4 ** m - a[k]) / (4 ** m - 1) for k in range(len(a) - 1)]
    return a[0]


def richardson_jacobian(f, x: np.ndarray, r: int = 4, v: float = 2.0, d: float = 1e-4) -> np.ndarray:
    """∂f/∂x (f vector-valued) as numDeriv's ``jacobian(method = "Richardson")``: central differences with
    steps h = |d·x| + 1e-4·(|x| < zero.tol), halved r - 1 times, and Richardson extrapolation."""
    x = np.asarray(x, float)
    n = len(x)
    cols = []
    for i in range(n):
        h = _steps(x, d)
        ests = []
        for _k in range(r):
            e = np.zeros(n)
            e[i] = h[i]
            ests.append((np.asarray(f(x + e), float) - np.asarray(f(x - e), float)) / (2 * h[i]))
            h = h / v
        cols.append(_richardson(ests, r))
    return np.column_stack(cols)


def forward_jacobian(f, x: np.ndarray, f0: np.ndarray, rel: float, floor: float = 1.0,
                     cols: np.ndarray | list[int] | None = None) -> np.ndarray:
    """∂f/∂x by forward differences, one evaluation per column: steps rel·max(floor, |x_i|), each column divided
    by the step as represented in x + h (``f0`` = f(x)); only the columns ``cols`` (default all, in that order).
    For an exact gradient f, len(x) evaluations instead of :func:`richardson_jacobian`'s 2·r·len(x), accurate to
    about ``rel`` relative. The one forward-difference Jacobian of the package: Satterthwaite's θθ Hessian on large
    one-term LMMs, the lmer Newton polish, the GLMM Newton phase's θ columns (``optimize``)."""
    x = np.asarray(x, float)
    f0 = np.asarray(f0, float)
    idx = range(len(x)) if cols is None else cols
    out = np.empty((len(f0), len(idx)))
    for c, i in enumerate(idx):
        t = x.copy()
        t[i] += rel * max(floor, abs(x[i]))
        out[:, c] = (np.asarray(f(t), float) - f0) / (t[i] - x[i])
    return out


def richardson_hessian(f, x: np.ndarray, r: int = 4, v: float = 2.0, d: float = 0.1) -> np.ndarray:
    """The Hessian of a scalar f as numDeriv's ``hessian`` (``genD``): steps h = |d·x| + 1e-4·(|x| < zero.tol)
    (d = 0.1), halved r - 1 times; diagonal (f(x+h) - 2f(x) + f(x-h))/h², off-diagonal
    (f(x+hᵢ+hⱼ) - 2f(x) + f(x-hᵢ-hⱼ) - Hᵢᵢhᵢ² - Hⱼⱼhⱼ²)/(2hᵢhⱼ), each Richardson-extrapolated."""
    x = np.asarray(x, float)
    n = len(x)
    f0 = f(x)
    H = np.empty((n, n))
    h0 = _steps(x, d)
    for i in range(n):
        h = h0.copy()
        ests = []
        for _k in range(r):
            e = np.zeros(n)
            e[i] = h[i]
            ests.append((f(x + e) - 2 * f0 + f(x - e)) / h[i] ** 2)
            h = h / v
        H[i, i] = _richardson(ests, r)
    for i in range(n):
        for j in range(i):
            h = h0.copy()
            ests = []
            for _k in range(r):
                e = np.zeros(n)
                e[i], e[j] = h[i], h[j]
                ests.append((f(x + e) - 2 * f0 + f(x - e) - H[i, i] * h[i] ** 2 - H[j, j] * h[j] ** 2)
                            / (2 * h[i] * h[j]))
                h = h / v
            H[i, j] = H[j, i] = _richardson(ests, r)
    return H
