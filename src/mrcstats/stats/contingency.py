"""Contingency-table tests that agree with R: Fisher's exact test, Pearson's chi-square, McNemar.

* :func:`fisher` matches R's ``fisher.test``: for 2 x 2 tables the exact p-value
  (two-sided: tables with probability <= 1 + 1e-7 times the observed one), the
  conditional maximum-likelihood odds ratio and its confidence interval (found with
  a port of R's ``uniroot``/``zeroin`` so the digits agree); for r x c tables the
  exact p-value by a network algorithm (FEXACT's tie rule, relative 3.45254e-7 on the
  log scale) or the Monte Carlo p-value on Patefield random tables.
* :func:`chisq` matches R's ``chisq.test`` (Yates' correction only for 2 x 2).
* :func:`mcnemar` compares two models on the same items (R's ``binom.test`` on the
  discordant pairs and ``mcnemar.test``).

References: seed 003 (Fisher's exact test with a simulated p-value, 2,000
replicates, on wh-word tables); seed 004 (Fisher on Table 13, chi-square on Table 16).
"""
from __future__ import annotations

import math
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from mrcstats._pformat import p_clause
from mrcstats._repr import Result
from mrcstats._seeds import rng as seed_rng
from mrcstats._words import plural
from mrcstats.errors import InputError
from mrcstats.stats._rxc_exact import FEXACT_TOL, rxc_exact_pvalue

__all__ = [
    "CHISQ_WARNING",
    "ChisqResult",
    "FisherResult",
    "McNemarResult",
    "as_count_table",
    "chisq",
    "fisher",
    "mcnemar",
    "mcnemar_exact_p",
    "r2dtable",
    "read_count_table",
]

#: R's warning text when an expected count is below 5
CHISQ_WARNING = "Chi-squared approximation may be incorrect"
_DBL_EPS = float(np.finfo(float).eps)
_ALTERNATIVES = ("two-sided", "less", "greater")


# --------------------------------------------------------------------------- input

@dataclass(frozen=True, repr=False)
class CountTable(Result):
    """A validated table of counts with its labels and what was dropped."""

    counts: np.ndarray
    row_labels: tuple[str, ...]
    col_labels: tuple[str, ...]
    dropped_rows: tuple[str, ...] = ()
    dropped_cols: tuple[str, ...] = ()

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.counts, index=list(self.row_labels), columns=list(self.col_labels))

    def to_dict(self) -> dict[str, Any]:
        return {"counts": self.counts.tolist(), "row_labels": list(self.row_labels),
                "col_labels": list(self.col_labels), "dropped_rows": list(self.dropped_rows),
                "dropped_cols": list(self.dropped_cols)}

    def summary(self) -> str:
        lines = [self.to_frame().to_string()]
        if self.dropped_rows or self.dropped_cols:
            lines.append(f"dropped all-zero rows {list(self.dropped_rows)}, columns {list(self.dropped_cols)}")
        return "\n".join(lines)


def as_count_table(table: Any, *, drop_empty: bool = True, where: str = "table") -> CountTable:
    """Validate ``table`` (DataFrame, array, nested lists) as non-negative integer counts.

    All-zero rows and columns are removed when ``drop_empty`` and reported in the
    result (and by a warning naming them); nothing else is altered.
    """
    if isinstance(table, CountTable):
        table = table.to_frame()
    if isinstance(table, pd.DataFrame):
        rl = [str(v) for v in table.index]
        cl = [str(v) for v in table.columns]
        raw = table.to_numpy(dtype=object)
    else:
        raw = np.asarray(table, dtype=object)
        if raw.ndim != 2:
            raise InputError(f"{where}: expected a two-way table of counts, got {plural(raw.ndim, 'dimension')}")
        rl = [str(i + 1) for i in range(raw.shape[0])]
        cl = [str(j + 1) for j in range(raw.shape[1])]
    if raw.ndim != 2 or raw.shape[0] < 2 or raw.shape[1] < 2:
        # R: fisher.test stops with "'x' must have at least 2 rows and columns"
        raise InputError(f"{where}: the table is {raw.shape[0]} x {raw.shape[1]}; "
                         "give at least 2 rows and 2 columns of counts")
    counts = np.zeros(raw.shape, dtype=np.int64)
    for i in range(raw.shape[0]):
        for j in range(raw.shape[1]):
            v = raw[i, j]
            try:
                f = float(v)
            except (TypeError, ValueError):
                f = math.nan
            if not math.isfinite(f) or f < 0 or f != math.floor(f):
                raise InputError(
                    f"{where}: row {rl[i]!r}, column {cl[j]!r} holds {v!r}; "
                    "every cell must be a non-negative whole number (a count)")
            if f > 2**53:
                raise InputError(f"{where}: row {rl[i]!r}, column {cl[j]!r} holds {v!r}, more than the largest "
                                 f"exact count 2^53; check the table")
            counts[i, j] = int(f)
    dropped_r: tuple[str, ...] = ()
    dropped_c: tuple[str, ...] = ()
    if drop_empty:
        keep_r = counts.sum(axis=1) > 0
        keep_c = counts.sum(axis=0) > 0
        dropped_r = tuple(r for r, k in zip(rl, keep_r) if not k)
        dropped_c = tuple(c for c, k in zip(cl, keep_c) if not k)
        if dropped_r or dropped_c:
            parts = []
            if dropped_r:
                parts.append(f"{plural(len(dropped_r), 'all-zero row')} {list(dropped_r)}")
            if dropped_c:
                parts.append(f"{plural(len(dropped_c), 'all-zero column')} {list(dropped_c)}")
            warnings.warn(f"{where}: dropped " + " and ".join(parts) + " (they carry no information)",
                          stacklevel=3)
        counts = counts[keep_r][:, keep_c]
        rl = [r for r, k in zip(rl, keep_r) if k]
        cl = [c for c, k in zip(cl, keep_c) if k]
    return CountTable(counts, tuple(rl), tuple(cl), dropped_r, dropped_c)


def _check_alternative(alternative: str) -> str:
    alt = alternative.replace(".", "-").replace("_", "-")
    if alt not in _ALTERNATIVES:
        raise InputError(f"alternative must be one of {', '.join(_ALTERNATIVES)}; got {alternative!r}")
    return alt


# --------------------------------------------------------------------------- R's uniroot

def _zeroin(f: Callable[[float], float], ax: float, bx: float,
            tol: float = _DBL_EPS ** 0.25, maxit: int = 1000) -> float:
    """Port of R's ``R_zeroin2`` (Brent's root finder) as called by ``uniroot(f, c(ax, bx))``."""
    fa, fb = f(ax), f(bx)
    a, b = ax, bx
    c, fc = a, fa
    if fa == 0.0:
        return a
    if fb == 0.0:
        return b
    it = maxit + 1
    while it:
        it -= 1
        prev_step = b - a
        if abs(fc) < abs(fb):
            a, b, c = b, c, b
            fa, fb, fc = fb, fc, fb
        tol_act = 2 * _DBL_EPS * abs(b) + tol / 2
        new_step = (c - b) / 2
        if abs(new_step) <= tol_act or fb == 0.0:
            return b
        if abs(prev_step) >= tol_act and abs(fa) > abs(fb):
            cb = c - b
            if a == c:
                t1 = fb / fa
                p = cb * t1
                q = 1.0 - t1
            else:
                q = fa / fc
                t1 = fb / fc
                t2 = fb / fa
                p = t2 * (cb * q * (q - t1) - (b - a) * (t1 - 1.0))
                q = (q - 1.0) * (t1 - 1.0) * (t2 - 1.0)
            if p > 0:
                q = -q
            else:
                p = -p
            if p < (0.75 * cb * q - abs(tol_act * q) / 2) and p < abs(prev_step * q / 2):
                new_step = p / q
        if abs(new_step) < tol_act:
            new_step = tol_act if new_step > 0 else -tol_act
        a, fa = b, fb
        b += new_step
        fb = f(b)
        if (fb > 0 and fc > 0) or (fb < 0 and fc < 0):
            c, fc = a, fa
    return b


# --------------------------------------------------------------------------- Fisher

@dataclass(frozen=True, repr=False)
class FisherResult(Result):
    """Fisher's exact test (R ``fisher.test``).

    ``odds_ratio`` and ``conf_int`` are set for 2 x 2 tables only (the conditional
    MLE and its exact interval); ``method`` is ``"exact"`` or ``"monte-carlo"``.
    """

    p: float
    odds_ratio: float | None
    conf_int: tuple[float, float] | None
    alternative: str
    method: str
    table: CountTable
    B: int | None = None
    seed: int | None = None
    statistic: float | None = None
    conf_level: float = 0.95

    def to_dict(self) -> dict[str, Any]:
        """The ``mrcstats fisher --json`` shape: ``{"p", "odds_ratio", "conf_int"}``, and ``"method"``, ``"B"``
        and ``"seed"`` for a Monte Carlo p-value."""
        out = {"p": self.p, "odds_ratio": self.odds_ratio,
               "conf_int": list(self.conf_int) if self.conf_int is not None else None}
        if self.method == "monte-carlo":
            out.update(method=self.method, B=self.B, seed=self.seed)
        return out

    def to_frame(self) -> pd.DataFrame:
        lo, hi = self.conf_int if self.conf_int is not None else (None, None)
        return pd.DataFrame([{"p": self.p, "odds_ratio": self.odds_ratio, "ci_low": lo, "ci_high": hi,
                              "alternative": self.alternative, "method": self.method, "B": self.B,
                              "rows": len(self.table.row_labels), "cols": len(self.table.col_labels),
                              "n": int(self.table.counts.sum())}])

    def summary(self) -> str:
        lines = [f"Fisher's exact test ({self.method}"
                 + (f", B = {self.B}, seed {self.seed if self.seed is not None else 'none (not reproducible)'}" if self.B else "") + f"), alternative: {self.alternative}",
                 (f"  table {self.table.counts.shape[0]} x {self.table.counts.shape[1]}, "
                  f"n = {int(self.table.counts.sum())}"),
                 f"  {p_clause(self.p, 'p-value')}"]
        if self.odds_ratio is not None and self.conf_int is not None:
            lines.append(f"  odds ratio = {self.odds_ratio:.6g}, {int(self.conf_level * 100)}% CI "
                         f"[{self.conf_int[0]:.6g}, {self.conf_int[1]:.6g}]")
        if self.table.dropped_rows or self.table.dropped_cols:
            lines.append(f"  dropped all-zero rows {list(self.table.dropped_rows)}, "
                         f"columns {list(self.table.dropped_cols)}")
        return "\n".join(lines)


class _NcHyper:
    """Fisher's noncentral hypergeometric distribution of x[0, 0] given the margins (R's dnhyper...)."""

    def __init__(self, x: np.ndarray):
        from scipy.stats import hypergeom

        self.m = int(x[:, 0].sum())
        self.n = int(x[:, 1].sum())
        self.k = int(x[0, :].sum())
        self.x = int(x[0, 0])
        self.lo = max(0, self.k - self.n)
        self.hi = min(self.k, self.m)
        self.support = np.arange(self.lo, self.hi + 1)
        self.logdc = hypergeom.logpmf(self.support, self.m + self.n, self.m, self.k)
        self._hg = hypergeom(self.m + self.n, self.m, self.k)

    def d(self, ncp: float) -> np.ndarray:
        d = self.logdc + math.log(ncp) * self.support
        d = np.exp(d - d.max())
        return d / d.sum()

    def mean(self, ncp: float) -> float:
        if ncp == 0:
            return float(self.lo)
        if math.isinf(ncp):
            return float(self.hi)
        return float(np.sum(self.support * self.d(ncp)))

    def p(self, q: int, ncp: float, upper: bool = False) -> float:
        if ncp == 1:
            return float(self._hg.sf(self.x - 1) if upper else self._hg.cdf(self.x))
        if ncp == 0:
            return float(q <= self.lo if upper else q >= self.lo)
        if math.isinf(ncp):
            return float(q <= self.hi if upper else q >= self.hi)
        d = self.d(ncp)
        return float(d[self.support >= q].sum() if upper else d[self.support <= q].sum())


def _fisher_2x2(x: np.ndarray, alternative: str, conf_level: float, or_: float = 1.0):
    """R's ``fisher.test`` 2 x 2 branch: p-value, conditional MLE and confidence interval."""
    h = _NcHyper(x)
    xx, lo, hi = h.x, h.lo, h.hi
    if alternative == "less":
        pval = h.p(xx, or_)
    elif alternative == "greater":
        pval = h.p(xx, or_, upper=True)
    else:
        d = h.d(or_)
        pval = float(d[d <= d[xx - lo] * (1 + 1e-7)].sum())

    def mle() -> float:
        if xx == lo:
            return 0.0
        if xx == hi:
            return math.inf
        mu = h.mean(1.0)
        if mu > xx:
            return _zeroin(lambda t: h.mean(t) - xx, 0.0, 1.0)
        if mu < xx:
            return 1.0 / _zeroin(lambda t: h.mean(1.0 / t) - xx, _DBL_EPS, 1.0)
        return 1.0

    def ncp_u(alpha: float) -> float:
        if xx == hi:
            return math.inf
        p = h.p(xx, 1.0)
        if p < alpha:
            return _zeroin(lambda t: h.p(xx, t) - alpha, 0.0, 1.0)
        if p > alpha:
            return 1.0 / _zeroin(lambda t: h.p(xx, 1.0 / t) - alpha, _DBL_EPS, 1.0)
        return 1.0

    def ncp_l(alpha: float) -> float:
        if xx == lo:
            return 0.0
        p = h.p(xx, 1.0, upper=True)
        if p > alpha:
            return _zeroin(lambda t: h.p(xx, t, upper=True) - alpha, 0.0, 1.0)
        if p < alpha:
            return 1.0 / _zeroin(lambda t: h.p(xx, 1.0 / t, upper=True) - alpha, _DBL_EPS, 1.0)
        return 1.0

    if alternative == "less":
        ci = (0.0, ncp_u(1 - conf_level))
    elif alternative == "greater":
        ci = (ncp_l(1 - conf_level), math.inf)
    else:
        a = (1 - conf_level) / 2
        ci = (ncp_l(a), ncp_u(a))
    return min(1.0, pval), mle(), ci


def r2dtable(B: int, row_sums: Sequence[int], col_sums: Sequence[int],
             rng: np.random.Generator | int | None = None) -> np.ndarray:
    """``B`` random tables with the given margins, shape ``(B, r, c)`` (R's ``r2dtable``).

    Patefield's (1981, AS 159) algorithm: the cells are drawn in order, each from its
    conditional distribution given the margins and the cells already drawn, which is
    hypergeometric: ``x_ij ~ Hyper(c'_j, sum_{l>j} c'_l, r_i - sum_{l<j} x_il)`` with
    ``c'`` the column totals still unfilled. Vectorised over the ``B`` tables.
    The random stream differs from R's, so tables agree in distribution, not one by one.
    """
    rng = seed_rng(rng, "rng")
    rows = np.asarray(row_sums, dtype=np.int64)
    cols = np.asarray(col_sums, dtype=np.int64)
    if rows.sum() != cols.sum():
        raise InputError("r2dtable: the row sums and column sums have different totals")
    if int(rows.sum()) >= 10**9:  # numpy's hypergeometric sampler takes fewer than 1e9 items
        raise InputError(f"the Monte Carlo p-value draws tables of fewer than 1,000,000,000 counts and this one "
                         f"has {int(rows.sum()):,}; for counts this large use the chi-square test (chisq), "
                         f"which is accurate here")
    r, c = len(rows), len(cols)
    out = np.zeros((B, r, c), dtype=np.int64)
    rem = np.tile(cols, (B, 1))
    for i in range(r - 1):
        need = np.full(B, rows[i], dtype=np.int64)
        left = rem.sum(axis=1)
        for j in range(c - 1):
            left = left - rem[:, j]
            xij = _hypergeometric(rng, rem[:, j], left, need)
            out[:, i, j] = xij
            need -= xij
            rem[:, j] -= xij
        out[:, i, c - 1] = need
        rem[:, c - 1] -= need
    out[:, r - 1, :] = rem
    return out


def _hypergeometric(rng: np.random.Generator, good: np.ndarray, bad: np.ndarray, nsample: np.ndarray):
    """numpy's hypergeometric, with the degenerate draws (nothing to draw or no good items) done directly."""
    res = np.zeros(len(good), dtype=np.int64)
    ok = (nsample > 0) & (good > 0)
    full = ok & (bad == 0)
    res[full] = nsample[full]
    ok &= bad > 0
    if ok.any():
        res[ok] = rng.hypergeometric(good[ok], bad[ok], nsample[ok])
    return res


def _log_fact(x: np.ndarray) -> np.ndarray:
    from scipy.special import gammaln

    return gammaln(np.asarray(x, dtype=float) + 1.0)


def fisher(table: Any, simulate: bool = False, B: int = 2000, seed: int | None = None,
           alternative: str = "two-sided", conf_level: float = 0.95, *,
           max_nodes: int = 2_000_000, max_entries: int = 20_000_000) -> FisherResult:
    """Fisher's exact test on a table of counts, as R's ``fisher.test``.

    Parameters
    ----------
    table : DataFrame (index = row labels, columns = column labels), array or nested lists.
    simulate : Monte Carlo p-value on ``B`` Patefield random tables (R's
        ``simulate.p.value = TRUE``). As in R it applies to tables larger than
        2 x 2 only; a 2 x 2 table always gets the exact test.
    seed : seed of the numpy ``Generator`` (the same seed gives the same p-value).
    alternative : ``"two-sided"``, ``"less"`` or ``"greater"`` (one-sided only for 2 x 2).

    Notes
    -----
    2 x 2 (R's branch): with ``x = x[0, 0]`` and its conditional distribution given the
    margins (noncentral hypergeometric with odds ratio psi), the two-sided p-value is
    ``sum d_1(y) over d_1(y) <= d_1(x) (1 + 1e-7)``; the estimate is the conditional MLE
    (``E_psi[X] = x``) and the interval inverts the one-sided tests, both solved with
    R's ``uniroot`` (ported, same tolerance ``eps^0.25``) so the digits agree with R.

    r x c: ``p = sum P(T)`` over tables with ``P(T) <= P(obs) exp(3.45254e-7)``
    (FEXACT), computed by the network algorithm in :mod:`mrcstats.stats._rxc_exact`.

    Monte Carlo: statistic ``S = -sum log x_ij!``; ``p = (1 + #{S_sim <= S_obs / (1 + 64 eps)}) / (B + 1)``.

    All-zero rows and columns are dropped with a warning (they do not change the
    exact p-value); a table left with fewer than two rows or columns has p = 1.
    Tables too large for the exact network raise
    :class:`mrcstats.stats._rxc_exact.ExactTooLarge` (an ``InputError``) suggesting
    ``simulate=True``, as R's ``FEXACT error 7`` does.

    Examples
    --------
    >>> round(fisher([[11, 0], [8, 9]]).p, 4)   # seed 004 Table 13
    0.0039
    >>> round(fisher([[3, 5, 2, 6], [4, 8, 1, 5], [7, 2, 9, 8]]).p, 6)
    0.06603
    """
    alt = _check_alternative(alternative)
    if not 0 < conf_level < 1:
        raise InputError(f"conf_level must lie strictly between 0 and 1, got {conf_level}")
    raw = as_count_table(table, drop_empty=False)
    is_2x2 = raw.counts.shape == (2, 2)
    if alt != "two-sided" and not is_2x2:
        raise InputError(f"alternative={alternative!r} needs a 2 x 2 table; this one is "
                         f"{raw.counts.shape[0]} x {raw.counts.shape[1]} (use two-sided)")
    ct = as_count_table(table, drop_empty=True) if not is_2x2 else raw
    x = ct.counts
    if x.sum() == 0:
        raise InputError("fisher: every cell of the table is zero; there is nothing to test")
    if simulate and not is_2x2:
        if int(B) < 1:
            raise InputError(f"B (the number of Monte Carlo replicates) must be at least 1, got {B}")
        rows, cols = x.sum(axis=1), x.sum(axis=0)
        stat = -float(_log_fact(x).sum())
        sims = r2dtable(int(B), rows, cols, seed_rng(seed))
        sim_stat = -_log_fact(sims).sum(axis=(1, 2))
        almost1 = 1 + 64 * _DBL_EPS
        p = (1 + int(np.sum(sim_stat <= stat / almost1))) / (int(B) + 1)
        return FisherResult(p, None, None, alt, "monte-carlo", ct, int(B), seed, stat, conf_level)
    if is_2x2:
        p, odds, ci = _fisher_2x2(x, alt, conf_level)
        return FisherResult(p, odds, ci, alt, "exact", ct, None, None, None, conf_level)
    p = rxc_exact_pvalue(x, tol=FEXACT_TOL, max_nodes=max_nodes, max_entries=max_entries)
    return FisherResult(p, None, None, alt, "exact", ct, None, None, None, conf_level)


# --------------------------------------------------------------------------- chi-square

@dataclass(frozen=True, repr=False)
class ChisqResult(Result):
    """Pearson's chi-square test of independence (R ``chisq.test``).

    ``residuals`` are Pearson residuals ``(O - E) / sqrt(E)``; ``stdres`` are R's
    standardised residuals ``(O - E) / sqrt(V)``, ``V = E (1 - r_i/n)(1 - c_j/n)``.
    ``cramers_v = sqrt(X2 / (n (min(r, c) - 1)))`` uses the uncorrected statistic.
    """

    statistic: float
    df: int
    p: float
    expected: np.ndarray
    residuals: np.ndarray
    stdres: np.ndarray
    cramers_v: float
    correct: bool
    table: CountTable
    warning: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``mrcstats chisq --json`` shape: statistic, df, p, expected, cramers_v, and ``warning`` (R's text,
        null when every expected count is at least 5) with ``note`` (:attr:`note`)."""
        return {"statistic": self.statistic, "df": self.df, "p": self.p,
                "expected": self.expected.tolist(), "cramers_v": self.cramers_v, "warning": self.warning,
                "note": self.note}

    @property
    def note(self) -> str | None:
        """The small-expected-count caveat as a sentence for a report or a log (None without one): R's warning,
        how many of the expected counts are below 5 and the smallest (Cochran's rule: the chi-square
        approximation needs expected counts of at least 5; Fisher's exact test does not)."""
        if not self.warning:
            return None
        e = np.asarray(self.expected, dtype=float)
        k = int((e < 5).sum())
        return (f"{self.warning}: {k} of {e.size} expected counts are below 5 (smallest {e.min():.3g}); "
                f"Fisher's exact test does not rely on that approximation")

    def to_frame(self) -> pd.DataFrame:
        """One row per cell: observed, expected, Pearson and standardised residuals."""
        recs = []
        for i, r in enumerate(self.table.row_labels):
            for j, c in enumerate(self.table.col_labels):
                recs.append({"row": r, "col": c, "observed": int(self.table.counts[i, j]),
                             "expected": float(self.expected[i, j]),
                             "residual": float(self.residuals[i, j]), "stdres": float(self.stdres[i, j])})
        return pd.DataFrame(recs)

    def summary(self) -> str:
        name = "Pearson's Chi-squared test" + (" with Yates' continuity correction" if self.correct else "")
        lines = [name, f"  X-squared = {self.statistic:.6g}, df = {self.df}, {p_clause(self.p, 'p-value')}",
                 f"  Cramer's V = {self.cramers_v:.4g}"]
        if self.warning:
            lines.append(f"  warning: {self.note}")
        return "\n".join(lines)


def chisq(table: Any, correct: bool = True) -> ChisqResult:
    """Pearson's chi-square test of independence, as R's ``chisq.test(x, correct=)``.

    ``E = r c^T / n``; ``X2 = sum (|O - E| - Y)^2 / E`` with Yates' ``Y = min(0.5, min |O - E|)``
    only for 2 x 2 tables when ``correct`` (else 0); ``df = (r - 1)(c - 1)``; p from the
    upper chi-square tail. When any expected count is below 5 the result carries R's warning text
    (``warning``) and a note saying how many (``note``); no Python warning is raised.
    All-zero rows/columns are dropped with a warning (R would return NaN).
    """
    from scipy.stats import chi2

    ct = as_count_table(table, drop_empty=True)
    x = ct.counts.astype(float)
    nr, nc = x.shape
    if nr < 2 or nc < 2:
        raise InputError(f"chisq: after dropping all-zero rows/columns the table is {nr} x {nc}; "
                         "a test of independence needs at least 2 rows and 2 columns with counts")
    n = x.sum()
    sr, sc = x.sum(axis=1), x.sum(axis=0)
    e = np.outer(sr, sc) / n
    v = np.outer(sr, sc) * np.outer(n - sr, n - sc) / n**3
    yates = 0.0
    applied = False
    if correct and nr == 2 and nc == 2:
        yates = float(min(0.5, np.abs(x - e).min()))
        applied = yates > 0
    stat = float(np.sum((np.abs(x - e) - yates) ** 2 / e))
    df = (nr - 1) * (nc - 1)
    p = float(chi2.sf(stat, df))
    uncorrected = float(np.sum((x - e) ** 2 / e))
    v_cramer = math.sqrt(uncorrected / (n * (min(nr, nc) - 1)))
    warn = CHISQ_WARNING if np.any(e < 5) else None     # a note on the result (``warning``, ``note``), not a
    #                                                   Python warning: the caller prints it where it reports
    return ChisqResult(stat, df, p, e, (x - e) / np.sqrt(e), (x - e) / np.sqrt(v), v_cramer, applied, ct, warn)


# --------------------------------------------------------------------------- McNemar

@dataclass(frozen=True, repr=False)
class McNemarResult(Result):
    """Paired comparison of two models on the same items.

    ``a_only`` = items model A got right and B wrong, ``b_only`` the reverse;
    ``p_exact`` is the two-sided exact binomial test of ``a_only`` out of the
    discordant pairs with probability 1/2 (R ``binom.test``); ``statistic`` and
    ``p_asymptotic`` are R's ``mcnemar.test`` with continuity correction.
    """

    model_a: str
    model_b: str
    n_items: int
    both: int
    a_only: int
    b_only: int
    neither: int
    p_exact: float
    statistic: float | None
    p_asymptotic: float | None
    n_invalid: int = 0
    n_unpaired: int = 0

    @property
    def better(self) -> str | None:
        """The model right on more discordant items (None on a tie)."""
        if self.a_only > self.b_only:
            return self.model_a
        if self.b_only > self.a_only:
            return self.model_b
        return None

    def to_dict(self) -> dict[str, Any]:
        """The ``mrcstats mcnemar --json`` shape."""
        return {"n_items": self.n_items, "a_only": self.a_only, "b_only": self.b_only,
                "p_exact": self.p_exact, "statistic": self.statistic, "p_asymptotic": self.p_asymptotic}

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame([{"model_a": self.model_a, "model_b": self.model_b, "n_items": self.n_items,
                              "both": self.both, "a_only": self.a_only, "b_only": self.b_only,
                              "neither": self.neither, "p_exact": self.p_exact,
                              "statistic": self.statistic, "p_asymptotic": self.p_asymptotic,
                              "better": self.better}])

    def summary(self) -> str:
        stat = "NA" if self.statistic is None else f"{self.statistic:.6g}"
        verdict = (f"{self.better} is right more often on the discordant items" if self.better
                   else "neither model is right more often on the discordant items")
        return (f"McNemar: {self.model_a} vs {self.model_b} on {self.n_items} paired items\n"
                f"  both right {self.both}, only {self.model_a} {self.a_only}, "
                f"only {self.model_b} {self.b_only}, neither {self.neither}\n"
                f"  exact binomial {p_clause(self.p_exact)}; McNemar chi-squared = {stat}, {p_clause(self.p_asymptotic)}\n"
                f"  {verdict}")


def _as_bool_array(s: Any, name: str) -> tuple[np.ndarray, int]:
    """Correctness as bool (missing/invalid -> False) and the number of missing values."""
    ser = pd.Series(s)
    miss = int(ser.isna().sum())
    try:
        vals = ser.astype("boolean").fillna(False).to_numpy(dtype=bool)
    except (TypeError, ValueError):
        raise InputError(f"mcnemar: {name} must hold true/false correctness values") from None
    return vals, miss


def mcnemar_exact_p(a_only: Any, b_only: Any) -> Any:
    """Exact McNemar p-value: two-sided exact binomial test of ``a_only`` among ``a_only + b_only`` discordant pairs.

    R's ``binom.test(a_only, a_only + b_only, 0.5)$p.value``: with ``p = 1/2`` the binomial is
    symmetric, so ``p = min(1, 2 P(X <= min(a_only, b_only)))``, ``X ~ Bin(a_only + b_only, 1/2)``;
    1 when there are no discordant pairs, and when ``|a_only - b_only| <= 1`` (then ``P(X <= min) >= 1/2``
    exactly: the two sides hold all the mass). Vectorised over arrays of counts. The binomial CDF is the
    regularized incomplete beta function, ``P(X <= k) = I_{1/2}(n - k, k + 1)`` (Abramowitz & Stegun 26.5.24),
    ``scipy.special.betainc`` -- public, and no ``scipy.stats`` import (about a second). It equals the
    kernel of ``scipy.stats.binom.cdf`` to the bit for every ``k < (n - 1)/2`` with ``n <= 20000`` (scipy
    1.17, checked over 14.3 million pairs, tests/stats/test_contingency.py); at ``k >= (n - 1)/2`` the two
    differ by up to 56 ulps around 1/2 and the p-value is set to its exact value 1.
    """
    from scipy.special import betainc

    a = np.asarray(a_only, dtype=float)
    b = np.asarray(b_only, dtype=float)
    n = a + b
    with np.errstate(invalid="ignore"):
        k, m = np.minimum(a, b), np.maximum(n, 1)
        p = np.where((n > 0) & (2 * k < n - 1), np.minimum(1.0, 2.0 * betainc(m - k, k + 1, 0.5)), 1.0)
    return float(p) if p.ndim == 0 else p


def mcnemar(log: Any, models: Sequence[str] | None = None, *, b: Any = None,
            model: str = "model", item: str = "item", correct: str = "correct",
            keys: Sequence[str] | None = None) -> McNemarResult:
    """Is model A better than model B on the same items? McNemar's test on the paired outcomes.

    Call either ``mcnemar(log, models=("A", "B"))`` with a canonical log (rows are
    paired on ``item``, ``trial``, ``condition`` and ``masking_rate`` when present: the key of the
    canonical log without the model; ``keys=`` names other columns), or
    ``mcnemar(a_series, b=b_series)`` with two aligned boolean series.
    Invalid answers (<NA>) count as not correct and are counted in ``n_invalid``;
    rows of one model without a partner are counted in ``n_unpaired``.

    Exact: ``p = binom.test(a_only, a_only + b_only, 0.5)$p.value`` (R); asymptotic:
    ``X2 = (|a_only - b_only| - 1)^2 / (a_only + b_only)`` on 1 df (R ``mcnemar.test``,
    continuity correction applied only when ``a_only != b_only``).
    """
    from scipy.stats import chi2

    n_unpaired = 0
    if b is not None:
        name_a, name_b = (tuple(models) if models else ("A", "B"))
        sa, sb = pd.Series(log).reset_index(drop=True), pd.Series(b).reset_index(drop=True)
        if len(sa) != len(sb):
            raise InputError(f"mcnemar: the two series have different lengths ({len(sa)} and {len(sb)})")
        xa, ma = _as_bool_array(sa, name_a)
        xb, mb = _as_bool_array(sb, name_b)
    else:
        if not isinstance(log, pd.DataFrame):
            raise InputError("mcnemar: give a canonical log (DataFrame) with models=(A, B), "
                             "or two boolean series (mcnemar(a, b=b))")
        if not models or isinstance(models, str) or len(models) != 2:
            raise InputError("mcnemar: models must name exactly two models, e.g. models=('gpt-4', 'llama')")
        name_a, name_b = str(models[0]), str(models[1])
        from mrcstats.io.schema import require_binary, require_log

        require_binary(log, "mcnemar", correct)
        log = require_log(log, "mcnemar", (model, item, correct), correct=correct)
        present = set(log[model].astype(str).unique())
        for nm in (name_a, name_b):
            if nm not in present:
                raise InputError(f"mcnemar: model {nm!r} is not in the log (models: {sorted(present)[:20]})")
        # the log's key without the model (mrcstats.io.schema.KEY_COLUMNS): a row of A pairs with the row of B
        # for the same item, trial, condition and masking rate
        key = list(keys) if keys else [c for c in (item, "trial", "condition", "masking_rate") if c in log.columns]
        for c in key:
            if c not in log.columns:
                raise InputError(f"mcnemar: cannot pair on {c!r}: the log has no such column")
        sub_a = log[log[model].astype(str) == name_a]
        sub_b = log[log[model].astype(str) == name_b]
        for nm, sub in ((name_a, sub_a), (name_b, sub_b)):
            dup = sub.duplicated(key)
            if dup.any():
                raise InputError(f"mcnemar: model {nm!r} has {int(dup.sum())} repeated rows for the same "
                                 f"{'/'.join(key)}; say which columns pair the rows with keys= (CLI: --pair-on "
                                 f"COL,COL), or read the log with --on-duplicate first|last")
        merged = sub_a[key + [correct]].merge(sub_b[key + [correct]], on=key, how="outer",
                                              suffixes=("_a", "_b"), indicator=True)
        both_mask = merged["_merge"] == "both"
        n_unpaired = int((~both_mask).sum())
        if n_unpaired:
            print(f"mcnemar: {plural(n_unpaired, 'row')} have no partner in the other model and are left out",
                  file=sys.stderr)
        merged = merged[both_mask]
        xa, ma = _as_bool_array(merged[f"{correct}_a"], name_a)
        xb, mb = _as_bool_array(merged[f"{correct}_b"], name_b)
    if len(xa) == 0:
        raise InputError(f"mcnemar: models {name_a!r} and {name_b!r} share no items")
    both = int(np.sum(xa & xb))
    a_only = int(np.sum(xa & ~xb))
    b_only = int(np.sum(~xa & xb))
    neither = int(np.sum(~xa & ~xb))
    disc = a_only + b_only
    p_exact = float(mcnemar_exact_p(a_only, b_only))
    if disc > 0:
        d = abs(a_only - b_only)
        stat = float(((d - 1) ** 2 if d != 0 else 0.0) / disc)
        p_asym: float | None = float(chi2.sf(stat, 1))
    else:
        stat, p_asym = None, None
    return McNemarResult(name_a, name_b, len(xa), both, a_only, b_only, neither, p_exact, stat, p_asym,
                         ma + mb, n_unpaired)


def read_count_table(path: Any) -> pd.DataFrame:
    """Read a table of counts from CSV (first row column labels, first column row labels).

    The reader lives in :mod:`mrcstats.io.tables` (every file is read in ``io``); this is its
    historical name here.
    """
    from mrcstats.io.tables import read_count_table as _read

    return _read(path)
