"""Inter-rater agreement: Cohen's κ, Fleiss' κ, Krippendorff's α, Gwet's AC1/AC2, ICC, rank correlations.

Ratings are an item × rater matrix ``x_{ur}`` (missing allowed) over ``q`` categories ``c_1 < … < c_q``
(numbers, or labels in the declared order); ``n_{uc}`` counts the ratings of item ``u`` in category
``c``, ``m_u = Σ_c n_{uc}``. Every coefficient is chance-corrected agreement ``(p_a − p_e)/(1 − p_e)``
(or ``1 − D_o/D_e``) with agreement weights ``w_{ck} ∈ [0, 1]`` (1 on the diagonal):

* **Cohen's κ** (two raters, items both rated; Cohen 1960, weighted: Cohen 1968) from the joint
  proportions ``p_{ck}``: ``p_o = Σ w_{ck} p_{ck}``, ``p_e = Σ w_{ck} p_{c·} p_{·k}``; weights none
  (``w = I``), linear ``1 − |i − j|/(q − 1)`` or quadratic ``1 − (i − j)²/(q − 1)²`` on the category
  ranks ``i, j`` (as R ``psych::cohen.kappa``). SE: the large-sample variance of Fleiss, Cohen & Everitt
  (1969, Psychol. Bull. 72:323, eq. 9 and 13); 95% CI ``κ ± z·SE`` clipped to [−1, 1] (as psych).
* **Fleiss' κ** (Fleiss 1971) and **Gwet's AC1/AC2** (Gwet 2008, Br. J. Math. Stat. Psychol. 61:29),
  in Gwet's form for missing ratings (Gwet 2014, *Handbook of Inter-Rater Reliability*, 4th ed., ch. 5):
  ``p_a = mean over items with m_u ≥ 2 of Σ_c n_{uc}(n*_{uc} − 1)/(m_u(m_u − 1))`` with
  ``n*_{uc} = Σ_k w_{ck} n_{uk}``, ``π_c = mean_u n_{uc}/m_u``; Fleiss ``p_e = Σ w_{ck} π_c π_k``, AC
  ``p_e = Σ_{ck} w_{ck} · Σ_c π_c(1 − π_c) / (q(q − 1))``. SE: Gwet's linearised variance over items
  (conditional on the raters), CI ``est ± t_{n−1}·SE`` clipped to [−1, 1] (as the ``irrCAC`` package).
  AC2 weights by level: ordinal (Gwet's ordinal weights on ranks), interval (quadratic on the values),
  ratio (``1 − ((c − k)/(c + k))² / ((max − min)/(max + min))²``).
* **Krippendorff's α** (Krippendorff 2011, "Computing Krippendorff's alpha-reliability"): the
  coincidences ``o_{ck} = Σ_u Σ_{r≠s} [x_{ur}=c][x_{us}=k]/(m_u − 1)`` over items with ``m_u ≥ 2``,
  ``n_c = Σ_k o_{ck}``, ``n = Σ n_c``, ``α = 1 − (n − 1) Σ o_{ck} δ²_{ck} / Σ n_c n_k δ²_{ck}`` with
  the metric of the level: nominal ``[c ≠ k]``, ordinal ``(Σ_{g=c}^{k} n_g − (n_c + n_k)/2)²``, interval
  ``(c − k)²``, ratio ``((c − k)/(c + k))²``. For the nominal, interval and ratio metrics α is Gwet's
  weighted α with ``w = 1 − δ²/max δ²`` and has Gwet's (2014) linearised SE (t CI, as ``irrCAC``); the
  ordinal metric depends on the marginal counts, so its SE and CI come from a bootstrap over items.
* **ICC**, the six forms of Shrout & Fleiss (1979, Psychol. Bull. 86:420) from the two-way ANOVA of the
  items rated by every rater (``MSR`` items, ``MSC`` raters, ``MSE`` residual, ``MSW = (SSC + SSE)/(n(k − 1))``):
  ICC1 ``(MSR − MSW)/(MSR + (k − 1)MSW)``, ICC2 ``(MSR − MSE)/(MSR + (k − 1)MSE + k(MSC − MSE)/n)``,
  ICC3 ``(MSR − MSE)/(MSR + (k − 1)MSE)``, and the averages ICC1k ``(MSR − MSW)/MSR``, ICC2k
  ``(MSR − MSE)/(MSR + (MSC − MSE)/n)``, ICC3k ``(MSR − MSE)/MSR``; CIs from the F distribution
  (McGraw & Wong 1996, Psychol. Methods 1:30, table 7), exactly as R ``psych::ICC(x, lmer = FALSE)``;
  SE: bootstrap over items.
* **Spearman's ρ and Kendall's τ_b** (ordinal and numeric ratings): for two raters on the items both
  rated, the CI from Fisher's z with ``var(z) = (1 + ρ²/2)/(n − 3)`` (Spearman) and ``0.437/(n − 4)``
  (Kendall) (Bonett & Wright 2000, Psychometrika 65:23), SE ``(1 − r²)·sqrt(var(z))``; for more raters
  the mean over rater pairs with a bootstrap over items.

Beside κ: the prevalence and bias indices of Byrt, Bland & Carlin (1993, J. Clin. Epidemiol. 46:423)
generalised to q categories and r raters: the observed agreement, prevalence index ``|π_1 − π_2|``
(two categories; pooled shares), bias index ``½ Σ_c |p_{ac} − p_{bc}|`` averaged over rater pairs
(for two raters and two categories ``|b − c|/n``), and PABAK ``(q·p_o − 1)/(q − 1)``.
Bootstrap: ``B`` resamples of the items with the seed's own stream per statistic
(:func:`mrcstats._seeds.stream`), percentile interval; the method of each row is named in ``method``.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from mrcstats._jsonout import plain_records
from mrcstats._repr import Result
from mrcstats.errors import InputError

__all__ = ["AGREEMENT_FIELDS", "LEVELS", "AgreementResult", "RatingMatrix", "agreement", "rating_matrix"]

#: the levels of measurement (Krippendorff's metrics)
LEVELS = ("nominal", "ordinal", "interval", "ratio")
#: the columns of ``agreement(...).table``
AGREEMENT_FIELDS = ("statistic", "weights", "estimate", "se", "ci_low", "ci_high", "method", "n_items",
                    "n_raters")
#: categorical coefficients (κ, AC) are computed for interval/ratio ratings only up to this many distinct values
MAX_CATEGORIES = 30


# --------------------------------------------------------------------------------------------- input
@dataclass(frozen=True)
class RatingMatrix:
    """Ratings as an item × rater matrix of category indices (``-1`` = missing).

    ``codes[u, r]`` indexes ``categories``; ``values`` are the numbers of the categories (their ranks
    when the categories are labels); ``items`` and ``raters`` name the rows and columns.
    """

    codes: np.ndarray
    categories: tuple
    values: np.ndarray
    items: tuple
    raters: tuple
    level: str
    n_missing: int

    @property
    def observed(self) -> np.ndarray:
        return self.codes >= 0

    def counts(self) -> np.ndarray:
        """``n_{uc}``: items × categories."""
        q = len(self.categories)
        out = np.zeros((self.codes.shape[0], q))
        for r in range(self.codes.shape[1]):
            c = self.codes[:, r]
            ok = c >= 0
            np.add.at(out, (np.nonzero(ok)[0], c[ok]), 1.0)
        return out

    def numeric(self) -> np.ndarray:
        """The ratings as numbers (NaN = missing)."""
        out = np.full(self.codes.shape, np.nan)
        ok = self.observed
        out[ok] = self.values[self.codes[ok]]
        return out


def _key(v: Any) -> str | None:
    """A rating's identity: numbers by value (``1``, ``1.0`` and ``"1"`` are one rating), text stripped."""
    if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA or v is pd.NaT:
        return None
    if isinstance(v, (bool, np.bool_)):
        return str(int(v))
    if isinstance(v, (int, float, np.integer, np.floating)):
        f = float(v)
        if not math.isfinite(f):
            return None if math.isnan(f) else repr(f)
        return str(int(f)) if f == int(f) and abs(f) < 2**53 else repr(f)
    s = str(v).strip()
    if s == "" or s.upper() in ("NA", "NAN"):
        return None
    try:
        return _key(float(s))
    except ValueError:
        return s


def _as_number(k: str) -> float | None:
    try:
        f = float(k)
    except ValueError:
        return None
    return f if math.isfinite(f) else None


def rating_matrix(data: pd.DataFrame, *, item: str | None = None, rater: str | None = None,
                  rating: str | None = None, wide: Sequence[str] | None = None, level: str = "nominal",
                  levels: Sequence[Any] | None = None, source: str = "ratings") -> RatingMatrix:
    """Check and reshape ratings (see :func:`agreement` for the arguments) into a :class:`RatingMatrix`.

    Every problem is an :class:`~mrcstats.errors.InputError` naming the row (1-based data row) and
    column: a missing column, an (item, rater) rated twice, fewer than two raters, an item nobody rated,
    a rating outside ``levels``, a non-number at the interval/ratio level, a negative ratio rating.
    """
    if level not in LEVELS:
        raise InputError(f"level must be one of {', '.join(LEVELS)}; got {level!r}")
    if not isinstance(data, pd.DataFrame):
        raise InputError(f"{source}: expected a table (pandas DataFrame), got {type(data).__name__}")
    cols = [str(c) for c in data.columns]

    def need(c: str, flag: str) -> None:
        if c not in cols:
            raise InputError(f"{source}: no column {c!r} ({flag}); the columns are {', '.join(map(repr, cols[:20]))}")

    if wide is not None:
        if rater is not None or rating is not None:
            raise InputError("give either wide (one column per rater) or rater and rating (the long form), not both")
        wide = [str(c) for c in wide]
        if len(set(wide)) != len(wide):
            raise InputError(f"wide: a rater column is named twice ({', '.join(wide)})")
        for c in wide:
            need(c, "--wide")
        if item is not None:
            need(item, "--item")
        if len(wide) < 2:
            raise InputError(f"{source}: agreement needs at least two raters; wide names one column ({wide[0]!r}) "
                             "-- give two or more rater columns" if wide else f"{source}: wide names no column")
        items = (tuple(data[item].astype(str)) if item is not None
                 else tuple(str(i + 1) for i in range(len(data))))
        if item is not None:
            dup = pd.Series(items).duplicated(keep=False)
            if dup.any():
                rows = np.nonzero(dup.to_numpy())[0][:2] + 1
                raise InputError(f"{source}: item {items[rows[0] - 1]!r} appears on data rows {rows[0]} and "
                                 f"{rows[1]} (column {item!r}); the wide form has one row per item")
        cells = [[_key(v) for v in data[c].tolist()] for c in wide]
        raters = tuple(wide)
        where = [[(i + 1, c) for i in range(len(data))] for c in wide]
    else:
        for c, flag in ((item, "item"), (rater, "rater"), (rating, "rating")):
            if c is None:
                raise InputError(f"the long form needs item, rater and rating columns ({flag} is missing); or "
                                 "give wide=[one column per rater]")
            need(c, f"--{flag}")
        it = data[item]
        rt = data[rater]
        for c, s in ((item, it), (rater, rt)):
            bad = s.isna().to_numpy()
            if bad.any():
                raise InputError(f"{source}: data row {int(np.argmax(bad)) + 1}, column {c!r} is empty; every "
                                 "rating needs its item and its rater")
        it_s, rt_s = it.astype(str).to_numpy(), rt.astype(str).to_numpy()
        pairs = pd.DataFrame({"i": it_s, "r": rt_s})
        dup = pairs.duplicated(keep=False).to_numpy()
        if dup.any():
            first = int(np.argmax(dup))
            other = [j for j in np.nonzero(dup)[0] if j != first and it_s[j] == it_s[first] and rt_s[j] == rt_s[first]]
            raise InputError(f"{source}: rater {rt_s[first]!r} rated item {it_s[first]!r} twice (data rows "
                             f"{first + 1} and {other[0] + 1}, columns {item!r}, {rater!r}); keep one rating per "
                             "rater and item")
        raters = tuple(pd.unique(rt_s))
        if len(raters) < 2:
            shown = repr(raters[0]) if raters else "none"
            raise InputError(f"{source}: column {rater!r} names one rater ({shown}); agreement needs at least two "
                             "raters")
        items = tuple(pd.unique(it_s))
        ipos = {v: i for i, v in enumerate(items)}
        rpos = {v: i for i, v in enumerate(raters)}
        keys = [_key(v) for v in data[rating].tolist()]
        cells = [[None] * len(items) for _ in raters]
        where = [[None] * len(items) for _ in raters]
        for j, (a, b, k) in enumerate(zip(it_s, rt_s, keys)):
            cells[rpos[b]][ipos[a]] = k
            where[rpos[b]][ipos[a]] = (j + 1, rating)
    # categories
    flat = [(k, w) for col, wcol in zip(cells, where) for k, w in zip(col, wcol) if k is not None]
    seen = list(dict.fromkeys(k for k, _ in flat))
    if levels is not None:
        declared = [_key(v) for v in levels]
        if any(k is None for k in declared) or not declared:
            raise InputError(f"levels: give the allowed ratings (no empty one); got {list(levels)!r}")
        if len(set(declared)) != len(declared):
            raise InputError(f"levels: a level is named twice ({', '.join(declared)})")
        allowed = set(declared)
        for k, (row, col) in flat:
            if k not in allowed:
                raise InputError(f"{source}: data row {row}, column {col!r}: rating {k!r} is not one of the declared "
                                 f"levels ({', '.join(declared[:20])}); fix the rating or add it to the levels")
        cats = declared
    else:
        cats = seen
    nums = [_as_number(k) for k in cats]
    numeric = all(v is not None for v in nums)
    if level in ("interval", "ratio") and not numeric:
        bad = next(k for k, v in zip(cats, nums) if v is None)
        row, col = next(w for k, w in flat if k == bad) if bad in seen else (None, "levels")
        at = f"data row {row}, column {col!r}" if row else "levels"
        raise InputError(f"{source}: {at}: rating {bad!r} is not a number; the {level} level needs numeric ratings "
                         "(or use --level nominal/ordinal)")
    if level == "ratio" and any(v < 0 for v in nums):
        bad = next(k for k, v in zip(cats, nums) if v < 0)
        row, col = next(w for k, w in flat if k == bad) if bad in seen else (None, "levels")
        at = f"data row {row}, column {col!r}" if row else "levels"
        raise InputError(f"{source}: {at}: rating {bad!r} is negative; the ratio level needs ratings >= 0 with a "
                         "true zero (or use --level interval)")
    if level == "ordinal" and not numeric and levels is None:
        raise InputError(f"{source}: ordinal ratings that are not numbers ({', '.join(map(repr, cats[:5]))}) need "
                         "their order: give levels (--levels a,b,c)")
    if numeric and levels is None:
        order = sorted(range(len(cats)), key=lambda i: nums[i])
        cats = [cats[i] for i in order]
        nums = [nums[i] for i in order]
    values = np.array(nums, dtype=float) if numeric else np.arange(1, len(cats) + 1, dtype=float)
    cpos = {k: i for i, k in enumerate(cats)}
    codes = np.array([[cpos[k] if k is not None else -1 for k in col] for col in cells], dtype=np.int64).T
    codes = codes.reshape(len(items), len(raters))
    nobody = ~(codes >= 0).any(axis=1)
    if nobody.any():
        u = int(np.argmax(nobody))
        rows = [w[u][0] for w in where if w[u] is not None]
        at = f"data row {rows[0]}" if wide is not None else f"data rows {', '.join(map(str, rows[:5]))}"
        raise InputError(f"{source}: item {items[u]!r} ({at}) is rated by nobody (every rating empty); "
                         f"{int(nobody.sum())} such item(s) -- drop them or fill in their ratings")
    out_cats = tuple(_as_number(k) if numeric else k for k in cats)
    out_cats = tuple(int(v) if numeric and float(v).is_integer() else v for v in out_cats)
    n_missing = int((codes < 0).sum())
    return RatingMatrix(codes=codes, categories=out_cats, values=values, items=items, raters=raters,
                        level=level, n_missing=n_missing)


# ------------------------------------------------------------------------------------------ weights
def _rank_weights(q: int, power: int) -> np.ndarray:
    """``1 − |i − j|^p/(q − 1)^p`` on ranks (psych::cohen.kappa's linear p=1 and quadratic p=2)."""
    i = np.arange(q)
    if q < 2:
        return np.ones((q, q))
    return 1.0 - np.abs(i[:, None] - i[None, :]) ** power / (q - 1) ** power


def _ac2_weights(rm: RatingMatrix) -> tuple[str, np.ndarray]:
    """Gwet's AC2 weights of the level (as irrCAC's ``Weights``): identity, ordinal, quadratic, ratio."""
    q = len(rm.categories)
    v = rm.values
    if rm.level == "nominal" or q < 2:
        return "identity", np.eye(q)
    if rm.level == "ordinal":
        i = np.arange(q)
        nk = np.abs(i[:, None] - i[None, :]) + 1
        w = nk * (nk - 1) / 2.0
        return "ordinal", 1.0 - w / w.max()
    if rm.level == "interval":
        return "quadratic", 1.0 - ((v[:, None] - v[None, :]) / (v.max() - v.min())) ** 2
    s = v[:, None] + v[None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        d = np.where(s > 0, ((v[:, None] - v[None, :]) / np.where(s > 0, s, 1)) ** 2, 0.0)
    top = ((v.max() - v.min()) / (v.max() + v.min())) ** 2 if v.max() + v.min() > 0 else 1.0
    return "ratio", 1.0 - d / top


# ----------------------------------------------------------------------------------- coefficients
def _clip(x: float) -> float:
    return float(min(1.0, max(-1.0, x))) if math.isfinite(x) else x


def cohen_kappa(x1: np.ndarray, x2: np.ndarray, q: int, weights: np.ndarray) -> tuple[float, float, float, float]:
    """Cohen's (weighted) κ of two code vectors (complete pairs) and its Fleiss-Cohen-Everitt (1969) SE.

    Returns ``(kappa, se, p_o, p_e)`` (see the module docstring)."""
    n = len(x1)
    p = np.zeros((q, q))
    np.add.at(p, (x1, x2), 1.0)
    p /= n
    rs, cs = p.sum(axis=1), p.sum(axis=0)
    w = weights
    po = float((w * p).sum())
    pe = float((w * np.outer(rs, cs)).sum())
    if not pe < 1:
        return float("nan"), float("nan"), po, pe
    kappa = (po - pe) / (1 - pe)
    wi = w @ cs          # w̄_i. = Σ_j w_ij p_.j
    wj = rs @ w          # w̄_.j = Σ_i p_i. w_ij
    var = (((p * (w * (1 - pe) - (wi[:, None] + wj[None, :]) * (1 - po)) ** 2).sum()
            - (po * pe - 2 * pe + po) ** 2) / (n * (1 - pe) ** 4))
    return float(kappa), float(math.sqrt(max(var, 0.0))), po, pe


def _gwet_parts(counts: np.ndarray, w: np.ndarray):
    ri = counts.sum(axis=1)
    keep = ri >= 1
    counts, ri = counts[keep], ri[keep]
    n = len(ri)
    cw = counts @ w.T
    sum_q = (counts * (cw - 1)).sum(axis=1)
    two = ri >= 2
    n2 = int(two.sum())
    den = ri * (ri - 1)
    pa_i = np.where(two, sum_q / np.where(two, den, 1), 0.0)
    pa = float(pa_i[two].sum() / n2) if n2 else float("nan")
    pi = (counts / ri[:, None]).mean(axis=0)
    return counts, ri, n, two, n2, pa, pa_i, pi


def _gwet_finish(est: float, pe: float, pa_i: np.ndarray, pe_i: np.ndarray, two: np.ndarray, n: int,
                 n2: int) -> float:
    """Gwet's (2014) linearised SE of a chance-corrected coefficient over items."""
    k_i = (n / n2) * (pa_i - pe * two) / (1 - pe)
    k_ix = k_i - 2 * (1 - est) * (pe_i - pe) / (1 - pe)
    var = float(((k_ix - est) ** 2).sum() / (n * (n - 1))) if n > 1 else float("nan")
    return math.sqrt(max(var, 0.0))


def fleiss_kappa(counts: np.ndarray, w: np.ndarray | None = None) -> tuple[float, float, int, float, float]:
    """Fleiss' κ with missing ratings and Gwet's SE (as ``irrCAC.raw.CAC.fleiss``): ``(kappa, se, n, p_a, p_e)``."""
    w = np.eye(counts.shape[1]) if w is None else w
    counts, ri, n, two, n2, pa, pa_i, pi = _gwet_parts(counts, w)
    pe = float((w * np.outer(pi, pi)).sum())
    if not pe < 1 or n2 == 0:
        return float("nan"), float("nan"), n, pa, pe
    est = (pa - pe) / (1 - pe)
    piw = (w @ pi + w.T @ pi) / 2
    pe_i = counts @ piw / ri
    return est, _gwet_finish(est, pe, pa_i, pe_i, two, n, n2), n, pa, pe


def gwet_ac(counts: np.ndarray, w: np.ndarray) -> tuple[float, float, int, float, float]:
    """Gwet's AC1 (identity weights) / AC2 and its SE (as ``irrCAC.raw.CAC.gwet``): ``(ac, se, n, p_a, p_e)``."""
    q = counts.shape[1]
    counts, ri, n, two, n2, pa, pa_i, pi = _gwet_parts(counts, w)
    if q < 2 or n2 == 0:
        return float("nan"), float("nan"), n, pa, float("nan")
    tw = float(w.sum())
    pe = tw * float((pi * (1 - pi)).sum()) / (q * (q - 1))
    est = (pa - pe) / (1 - pe)
    pe_i = (tw / (q * (q - 1))) * (counts @ (1 - pi)) / ri
    return est, _gwet_finish(est, pe, pa_i, pe_i, two, n, n2), n, pa, pe


def alpha_gwet(counts: np.ndarray, w: np.ndarray) -> tuple[float, float, int]:
    """Krippendorff's α with fixed agreement weights ``w`` and Gwet's (2014, ch. 5) linearised SE over items
    (as ``irrCAC.raw.CAC.krippendorff``): ``(alpha, se, n_items with two or more ratings)``. With
    ``w = 1 − δ²/max δ²`` it is Krippendorff's nominal, interval or ratio α."""
    ri = counts.sum(axis=1)
    keep = ri >= 2
    counts, ri = counts[keep], ri[keep]
    n = len(ri)
    if n == 0:
        return float("nan"), float("nan"), 0
    rbar = ri.mean()
    eps = 1 / ri.sum()
    sum_q = (counts * (counts @ w.T - 1)).sum(axis=1)
    pa_p = float((sum_q / (rbar * (ri - 1))).sum() / n)
    pa = (1 - eps) * pa_p + eps
    pi = (counts / rbar).mean(axis=0)
    pe = float((w * np.outer(pi, pi)).sum())
    if not pe < 1:
        return float("nan"), float("nan"), n
    est = (pa - pe) / (1 - pe)
    est_p = (pa_p - pe) / (1 - pe)
    pa_i = sum_q / (rbar * (ri - 1)) - pa * (ri - rbar) / rbar
    k_i = (pa_i - pe) / (1 - pe)
    piw = (w @ pi + w.T @ pi) / 2
    pe_i = counts @ piw / rbar - pe * (ri - rbar) / rbar
    k_ix = k_i - 2 * (1 - est_p) * (pe_i - pe) / (1 - pe)
    var = float(((k_ix - est_p) ** 2).sum() / (n * (n - 1))) if n > 1 else float("nan")
    return float(est), math.sqrt(max(var, 0.0)), n


def _delta(level: str, values: np.ndarray, nc: np.ndarray) -> np.ndarray:
    """Krippendorff's squared difference ``δ²_{ck}`` of the level (``nc``: the pairable value counts)."""
    v = values
    if level == "nominal":
        return 1.0 - np.eye(len(v))
    if level == "interval":
        return (v[:, None] - v[None, :]) ** 2
    if level == "ratio":
        s = v[:, None] + v[None, :]
        return np.where(s > 0, ((v[:, None] - v[None, :]) / np.where(s > 0, s, 1.0)) ** 2, 0.0)
    cum = np.concatenate([[0.0], np.cumsum(nc)])
    lo = np.minimum(np.arange(len(v))[:, None], np.arange(len(v))[None, :])
    hi = np.maximum(np.arange(len(v))[:, None], np.arange(len(v))[None, :])
    return (cum[hi + 1] - cum[lo] - (nc[:, None] + nc[None, :]) / 2) ** 2


class _OrdinalAlpha:
    """Krippendorff's ordinal α for item weights (1 = the data; bootstrap counts = a resample)."""

    def __init__(self, rm: RatingMatrix):
        from scipy import sparse

        counts = rm.counts()
        m = counts.sum(axis=1)
        keep = m >= 2
        self.counts, self.m, self.values = counts[keep], m[keep], rm.values
        q = self.q = counts.shape[1]
        # per item: o_u = (n_u n_uᵀ − diag(n_u)) / (m_u − 1), flattened (sparse: an item has few categories)
        rows, cols, vals = [np.zeros(0, int)], [np.zeros(0, int)], [np.zeros(0)]
        for u in range(len(self.m)):
            nz = np.nonzero(self.counts[u])[0]
            nu = self.counts[u, nz]
            a, b = np.meshgrid(nz, nz, indexing="ij")
            rows.append(np.full(a.size, u))
            cols.append((a * q + b).ravel())
            vals.append(((np.outer(nu, nu) - np.diag(nu)) / (self.m[u] - 1)).ravel())
        self.o = sparse.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                                   shape=(len(self.m), q * q))

    @property
    def n_items(self) -> int:
        return len(self.m)

    def __call__(self, wts: np.ndarray) -> np.ndarray:
        """α for each row of ``wts`` (resamples × items)."""
        wts = np.atleast_2d(wts)
        nc = wts @ self.counts                 # pairable values per category
        n = nc.sum(axis=1)
        out = np.full(len(wts), np.nan)
        for b in range(len(wts)):
            d = _delta("ordinal", self.values, nc[b])
            ob = np.asarray(self.o.T @ wts[b]).ravel()
            den = nc[b] @ d @ nc[b]
            if den > 0:
                out[b] = 1 - (n[b] - 1) * (ob @ d.ravel()) / den
        return out


def _icc_table(x: np.ndarray, alpha: float = 0.05) -> pd.DataFrame:
    """The six Shrout–Fleiss ICCs and their F-based CIs (``psych::ICC(x, lmer = FALSE)``) of a complete
    items × raters matrix: columns type, ICC, F, df1, df2, lower, upper."""
    from scipy import special

    n, k = x.shape
    g = x.mean()
    ssr = k * ((x.mean(axis=1) - g) ** 2).sum()
    ssc = n * ((x.mean(axis=0) - g) ** 2).sum()
    sst = ((x - g) ** 2).sum()
    sse = sst - ssr - ssc
    msr, msc = ssr / (n - 1), ssc / (k - 1)
    mse = sse / ((n - 1) * (k - 1))
    msw = (ssc + sse) / (n * (k - 1))
    with np.errstate(invalid="ignore", divide="ignore"):
        icc1 = (msr - msw) / (msr + (k - 1) * msw)
        icc2 = (msr - mse) / (msr + (k - 1) * mse + k * (msc - mse) / n)
        icc3 = (msr - mse) / (msr + (k - 1) * mse)
        icc1k = (msr - msw) / msr
        icc2k = (msr - mse) / (msr + (msc - mse) / n)
        icc3k = (msr - mse) / msr
        f11, f21 = msr / msw, msr / mse
    d11n, d11d, d21n, d21d = n - 1, n * (k - 1), n - 1, (n - 1) * (k - 1)
    a2 = 1 - alpha / 2

    def qf(p: float, d1: float, d2: float) -> float:
        return float(special.fdtri(d1, d2, p))

    with np.errstate(invalid="ignore", divide="ignore"):
        f1l, f1u = f11 / qf(a2, d11n, d11d), f11 * qf(a2, d11d, d11n)
        f3l, f3u = f21 / qf(a2, d21n, d21d), f21 * qf(a2, d21d, d21n)
        fj = msc / mse
        vn = (k - 1) * (n - 1) * (k * icc2 * fj + n * (1 + (k - 1) * icc2) - k * icc2) ** 2
        vd = (n - 1) * k ** 2 * icc2 ** 2 * fj ** 2 + (n * (1 + (k - 1) * icc2) - k * icc2) ** 2
        v = vn / vd
        fu2, fl2 = qf(a2, n - 1, v), qf(a2, v, n - 1)
        l2 = n * (msr - fu2 * mse) / (fu2 * (k * msc + (k * n - k - n) * mse) + n * msr)
        u2 = n * (fl2 * msr - mse) / (k * msc + (k * n - k - n) * mse + n * fl2 * msr)
        rows = [
            ("ICC1", icc1, f11, d11n, d11d, (f1l - 1) / (f1l + k - 1), (f1u - 1) / (f1u + k - 1)),
            ("ICC2", icc2, f21, d21n, d21d, l2, u2),
            ("ICC3", icc3, f21, d21n, d21d, (f3l - 1) / (f3l + k - 1), (f3u - 1) / (f3u + k - 1)),
            ("ICC1k", icc1k, f11, d11n, d11d, 1 - 1 / f1l, 1 - 1 / f1u),
            ("ICC2k", icc2k, f21, d21n, d21d, l2 * k / (1 + l2 * (k - 1)), u2 * k / (1 + u2 * (k - 1))),
            ("ICC3k", icc3k, f21, d21n, d21d, 1 - 1 / f3l, 1 - 1 / f3u),
        ]
    return pd.DataFrame(rows, columns=["type", "ICC", "F", "df1", "df2", "lower", "upper"])


def _icc_boot(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """The six ICCs of each bootstrap resample (rows of ``idx`` index the items): resamples × 6."""
    xb = x[idx]                                  # B × n × k
    _, n, k = xb.shape
    g = xb.mean(axis=(1, 2))
    rm, cm = xb.mean(axis=2), xb.mean(axis=1)
    ssr = k * ((rm - g[:, None]) ** 2).sum(axis=1)
    ssc = n * ((cm - g[:, None]) ** 2).sum(axis=1)
    sse = ((xb - g[:, None, None]) ** 2).sum(axis=(1, 2)) - ssr - ssc
    msr, msc, mse = ssr / (n - 1), ssc / (k - 1), sse / ((n - 1) * (k - 1))
    msw = (ssc + sse) / (n * (k - 1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.column_stack([
            (msr - msw) / (msr + (k - 1) * msw), (msr - mse) / (msr + (k - 1) * mse + k * (msc - mse) / n),
            (msr - mse) / (msr + (k - 1) * mse), (msr - msw) / msr, (msr - mse) / (msr + (msc - mse) / n),
            (msr - mse) / msr])


def _rank_corr(a: np.ndarray, b: np.ndarray, kind: str) -> float:
    from scipy import stats

    if len(a) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    r = stats.spearmanr(a, b)[0] if kind == "spearman" else stats.kendalltau(a, b)[0]
    return float(r)


def _rank_corr_rows(a: np.ndarray, b: np.ndarray, kind: str) -> np.ndarray:
    """Spearman's ρ (Pearson's r of average ranks) or Kendall's τ_b of each row pair of ``a``, ``b``
    (resamples × items, NaN = missing; a pair uses the items both have), as ``scipy.stats.spearmanr`` /
    ``kendalltau``, vectorised over the rows."""
    from scipy import stats

    ok = np.isfinite(a) & np.isfinite(b)
    a, b = np.where(ok, a, np.nan), np.where(ok, b, np.nan)
    m = ok.sum(axis=1)
    out = np.full(len(a), np.nan)
    if kind == "spearman":
        ra = stats.rankdata(a, axis=1, nan_policy="omit")
        rb = stats.rankdata(b, axis=1, nan_policy="omit")
        with np.errstate(invalid="ignore", divide="ignore"):
            da = np.where(ok, ra - np.nanmean(ra, axis=1, keepdims=True), 0.0)
            db = np.where(ok, rb - np.nanmean(rb, axis=1, keepdims=True), 0.0)
            out = (da * db).sum(axis=1) / np.sqrt((da * da).sum(axis=1) * (db * db).sum(axis=1))
    else:
        n = a.shape[1]
        if n <= 400:      # τ_b = Σ sgn(Δa) sgn(Δb) / sqrt(Σ sgn(Δa)² Σ sgn(Δb)²) over the item pairs
            step = max(1, int(2e7 // max(n * n, 1)))
            for s0 in range(0, len(a), step):
                aa, bb = np.nan_to_num(a[s0:s0 + step]), np.nan_to_num(b[s0:s0 + step])
                v = ok[s0:s0 + step]
                both = v[:, :, None] & v[:, None, :]
                sa = np.sign(aa[:, :, None] - aa[:, None, :]) * both
                sb = np.sign(bb[:, :, None] - bb[:, None, :]) * both
                with np.errstate(invalid="ignore", divide="ignore"):
                    out[s0:s0 + step] = (sa * sb).sum(axis=(1, 2)) / np.sqrt(
                        (sa * sa).sum(axis=(1, 2)) * (sb * sb).sum(axis=(1, 2)))
        else:
            for r in range(len(a)):
                if m[r] >= 2:
                    out[r] = stats.kendalltau(a[r, ok[r]], b[r, ok[r]])[0]
    out[m < 3] = np.nan
    return out


def _mean_pairwise(x: np.ndarray, idx: np.ndarray, kind: str) -> np.ndarray:
    """The mean over rater pairs of the rank correlation, for each resample (rows of ``idx`` index the items)."""
    vals = []
    for i in range(x.shape[1]):
        for j in range(i + 1, x.shape[1]):
            vals.append(_rank_corr_rows(x[idx, i], x[idx, j], kind))
    v = np.column_stack(vals)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)     # (a resample with every pair undefined: NaN)
        return np.nanmean(v, axis=1)


# ------------------------------------------------------------------------------------------ result
@dataclass(frozen=True, repr=False)
class AgreementResult(Result):
    """Agreement coefficients with SEs and CIs (see :mod:`mrcstats.stats.agreement`).

    ``table`` has :data:`AGREEMENT_FIELDS` (``method`` names how the SE and CI were obtained);
    ``marginals`` the share of each category per rater (and pooled); ``indices`` the observed
    agreement, prevalence index, bias index and PABAK; ``notes`` what was not computed and why.
    """

    table: pd.DataFrame = field(repr=False)
    marginals: pd.DataFrame = field(repr=False)
    indices: dict = field(repr=False)
    level: str = "nominal"
    categories: tuple = ()
    raters: tuple = ()
    n_items: int = 0
    n_missing: int = 0
    bootstrap: int = 0
    seed: int | None = None
    alpha: float = 0.05
    notes: tuple = ()

    def to_frame(self) -> pd.DataFrame:
        return self.table.copy()

    def estimate(self, statistic: str, weights: str | None = None) -> float:
        """The estimate of one row (``weights`` picks among Cohen's κ rows)."""
        t = self.table[self.table["statistic"] == statistic]
        if weights is not None:
            t = t[t["weights"] == weights]
        if t.empty:
            raise InputError(f"no {statistic!r} in this result; it has {', '.join(self.table['statistic'].unique())}")
        return float(t["estimate"].iloc[0])

    def to_dict(self) -> dict[str, Any]:
        """``{"level", "categories", "raters", "n_items", "n_missing", "bootstrap", "seed", "alpha",
        "statistics": [{statistic, weights, estimate, se, ci_low, ci_high, method, n_items, n_raters}],
        "indices": {...}, "marginals": [{rater, <category>: share, n}], "notes": [...]}``."""
        return {"level": self.level, "categories": list(self.categories), "raters": list(self.raters),
                "n_items": self.n_items, "n_missing": self.n_missing, "bootstrap": self.bootstrap,
                "seed": self.seed, "alpha": self.alpha,
                "statistics": plain_records(self.table[list(AGREEMENT_FIELDS)]),
                "indices": {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                            for k, v in self.indices.items()},
                "marginals": plain_records(self.marginals.reset_index()), "notes": list(self.notes)}

    def summary(self) -> str:
        conf = f"{100 * (1 - self.alpha):g}%"
        lines = [(f"Agreement of {len(self.raters)} raters on {self.n_items} items ({self.level} level, "
                  f"{len(self.categories)} categories, {self.n_missing} missing ratings)"),
                 f"  {'statistic':<20} {'weights':<10} {'estimate':>9} {'SE':>8}  {conf + ' CI':<19} {'items':>6}  method"]

        def f(v: float, w: int = 8) -> str:
            return f"{v:>{w}.4f}" if isinstance(v, float) and math.isfinite(v) else f"{'NA':>{w}}"

        for r in self.table.itertuples(index=False):
            ci = f"[{f(r.ci_low, 7)}, {f(r.ci_high, 7)}]"
            lines.append(f"  {r.statistic:<20} {r.weights:<10} {f(r.estimate, 9)} {f(r.se)}  {ci:<19} "
                         f"{int(r.n_items):>6}  {r.method}")
        ind = ", ".join(f"{k} = {v:.4f}" for k, v in self.indices.items()
                        if isinstance(v, float) and math.isfinite(v))
        if ind:
            lines.append(f"  indices (Byrt, Bland & Carlin 1993): {ind}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


# -------------------------------------------------------------------------------------------- API
def percentile_interval(boot: np.ndarray, alpha: float) -> tuple[float, float, float]:
    b = boot[np.isfinite(boot)]
    if len(b) < 2:
        return float("nan"), float("nan"), float("nan")
    lo, hi = np.quantile(b, [alpha / 2, 1 - alpha / 2])
    return float(np.std(b, ddof=1)), float(lo), float(hi)


def agreement(data: pd.DataFrame | RatingMatrix, *, item: str | None = None, rater: str | None = None,
              rating: str | None = None, wide: Sequence[str] | None = None, level: str = "nominal",
              levels: Sequence[Any] | None = None, bootstrap: int = 1000, seed: int | None = 0,
              alpha: float = 0.05, source: str = "ratings") -> AgreementResult:
    """Inter-rater agreement of ratings in long form (``item``, ``rater``, ``rating``) or wide form
    (``wide``: one column per rater, one row per item; ``item`` optional).

    Args:
        level: nominal, ordinal, interval or ratio (Krippendorff's levels of measurement); picks the
            α metric, the AC2 weights and whether ICC and rank correlations are computed.
        levels: the allowed ratings (in order, for ordinal labels); a rating outside them is an error.
        bootstrap: resamples of the items for the statistics without an analytic SE (α, ICC SE, rank
            correlations of more than two raters); 0 = none (their SE and CI are NA).
        seed: the bootstrap seed (``None`` = fresh entropy, not reproducible).
        alpha: 1 − the confidence level.
        source: how errors name the data (the file name).

    Formulas and references: the module docstring. Missing ratings are allowed; each row of the
    result says on how many items it rests (Cohen's κ, ICC and two-rater correlations use the items
    every rater rated; α the items with two or more ratings).
    """
    from mrcstats._dist import norm_ppf, t_ppf
    from mrcstats._seeds import stream
    from mrcstats.models._checks import check_alpha, check_resamples

    a = check_alpha(alpha)
    B = check_resamples(bootstrap)
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
        raise InputError(f"seed must be a whole number >= 0, got {seed!r}")
    rm = data if isinstance(data, RatingMatrix) else rating_matrix(
        data, item=item, rater=rater, rating=rating, wide=wide, level=level, levels=levels, source=source)
    n_items, k = rm.codes.shape
    q = len(rm.categories)
    z = float(norm_ppf(1 - a / 2))
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    boot_name = f"bootstrap over items (B = {B}, seed = {seed}, percentile)"
    counts = rm.counts()

    def add(stat: str, weights: str, est: float, se: float, lo: float, hi: float, method: str, n: int,
            raters: int = k) -> None:
        rows.append({"statistic": stat, "weights": weights, "estimate": float(est), "se": float(se),
                     "ci_low": float(lo), "ci_high": float(hi), "method": method, "n_items": int(n),
                     "n_raters": int(raters)})

    def boot_idx(label: str, n: int) -> np.ndarray:
        return stream(seed, "agreement", label).integers(0, n, size=(B, n))

    categorical = rm.level in ("nominal", "ordinal") or q <= MAX_CATEGORIES
    if q < 2:
        notes.append(f"every rating is {rm.categories[0]!r}: chance-corrected coefficients are undefined (NA)")
    # Cohen's kappa: two raters
    if k == 2 and categorical:
        both = (rm.codes >= 0).all(axis=1)
        x1, x2 = rm.codes[both, 0], rm.codes[both, 1]
        kinds = [("none", np.eye(q))]
        if rm.level != "nominal":
            kinds += [("linear", _rank_weights(q, 1)), ("quadratic", _rank_weights(q, 2))]
        for name, w in kinds:
            if len(x1) < 2:
                add("cohen_kappa", name, float("nan"), float("nan"), float("nan"), float("nan"),
                    "too few items rated by both raters", len(x1))
                continue
            kap, se, _, _ = cohen_kappa(x1, x2, q, w)
            add("cohen_kappa", name, kap, se, _clip(kap - z * se), _clip(kap + z * se),
                "analytic (Fleiss, Cohen & Everitt 1969), normal CI clipped to [-1, 1]", len(x1))
    elif k == 2:
        notes.append(f"{q} distinct ratings (> {MAX_CATEGORIES}): the categorical coefficients (kappa, AC) are left "
                     "out; see alpha, ICC and the rank correlations")
    if categorical:
        tmeth = "analytic (Gwet 2014 variance over items), t CI clipped to [-1, 1]"
        est, se, n, _, _ = fleiss_kappa(counts)
        tq = float(t_ppf(1 - a / 2, n - 1)) if n > 1 else float("nan")
        add("fleiss_kappa", "none", est, se, _clip(est - tq * se), _clip(est + tq * se), tmeth, n)
        est, se, n, _, _ = gwet_ac(counts, np.eye(q))
        add("gwet_ac1", "identity", est, se, _clip(est - tq * se), _clip(est + tq * se), tmeth, n)
        if rm.level != "nominal":
            wname, w = _ac2_weights(rm)
            est, se, n, _, _ = gwet_ac(counts, w)
            add("gwet_ac2", wname, est, se, _clip(est - tq * se), _clip(est + tq * se), tmeth, n)
    elif k > 2:
        notes.append(f"{q} distinct ratings (> {MAX_CATEGORIES}): Fleiss' kappa and AC1/AC2 are left out")
    # Krippendorff's alpha: Gwet's analytic SE for a fixed metric, a bootstrap for the ordinal one
    if not (counts.sum(axis=1) >= 2).any():
        notes.append("no item has two ratings: Krippendorff's alpha is undefined")
    elif rm.level != "ordinal":
        d = _delta(rm.level, rm.values, np.zeros(q))
        est, se, n = alpha_gwet(counts, 1.0 - d / d.max() if q > 1 and d.max() > 0 else np.eye(q))
        tq = float(t_ppf(1 - a / 2, n - 1)) if n > 1 else float("nan")
        add("krippendorff_alpha", rm.level, est, se, _clip(est - tq * se), _clip(est + tq * se),
            "analytic (Gwet 2014 variance over items), t CI clipped to [-1, 1]", n)
    else:
        al = _OrdinalAlpha(rm)
        est = float(al(np.ones(al.n_items))[0])
        se = lo = hi = float("nan")
        if B:
            idx = boot_idx("alpha", al.n_items)
            wts = np.zeros((B, al.n_items))
            np.add.at(wts, (np.repeat(np.arange(B), al.n_items), idx.ravel()), 1.0)
            se, lo, hi = percentile_interval(al(wts), a)
        add("krippendorff_alpha", rm.level, est, se, lo, hi, boot_name if B else "no bootstrap (B = 0)",
            al.n_items)
    num = rm.numeric()
    complete = np.isfinite(num).all(axis=1)
    xc = num[complete]
    # ICC: interval and ratio (and numeric ordinal) ratings on items every rater rated
    if rm.level in ("interval", "ratio", "ordinal"):
        if len(xc) < 3:
            notes.append(f"ICC needs three items rated by every rater; {len(xc)} are")
        else:
            tab = _icc_table(xc, a)
            boot = _icc_boot(xc, boot_idx("icc", len(xc))) if B else None
            if (~complete).any():
                notes.append(f"ICC uses the {len(xc)} items every rater rated ({int((~complete).sum())} left out)")
            for j, r in enumerate(tab.itertuples(index=False)):
                se = percentile_interval(boot[:, j], a)[0] if boot is not None else float("nan")
                add(r.type, "none", r.ICC, se, r.lower, r.upper,
                    f"F-based CI (McGraw & Wong 1996; psych::ICC lmer = FALSE), SE {boot_name if B else 'NA'}",
                    len(xc))
        # rank correlations
        for kind in ("spearman", "kendall"):
            if k == 2:
                both = np.isfinite(num).all(axis=1)
                aa, bb = num[both, 0], num[both, 1]
                r = _rank_corr(aa, bb, kind)
                n = len(aa)
                if n < 5 or not math.isfinite(r) or abs(r) >= 1:
                    add(kind, "none", r, float("nan"), float("nan"), float("nan"),
                        "Fisher z (Bonett & Wright 2000): undefined here", n)
                    continue
                sz = math.sqrt((1 + r * r / 2) / (n - 3) if kind == "spearman" else 0.437 / (n - 4))
                zr = math.atanh(r)
                add(kind, "none", r, (1 - r * r) * sz, math.tanh(zr - z * sz), math.tanh(zr + z * sz),
                    "Fisher z with the Bonett & Wright (2000) variance", n)
            else:
                r = float(_mean_pairwise(num, np.arange(n_items)[None, :], kind)[0])
                se = lo = hi = float("nan")
                if B:
                    idx = boot_idx(kind, n_items)
                    se, lo, hi = percentile_interval(_mean_pairwise(num, idx, kind), a)
                add(f"{kind}_mean_pairwise", "none", r, se, lo, hi, boot_name if B else "no bootstrap (B = 0)",
                    n_items)
    table = pd.DataFrame(rows, columns=list(AGREEMENT_FIELDS))
    marg, ind = _diagnostics(rm, counts)
    return AgreementResult(table=table, marginals=marg, indices=ind, level=rm.level, categories=rm.categories,
                           raters=rm.raters, n_items=n_items, n_missing=rm.n_missing, bootstrap=B, seed=seed,
                           alpha=a, notes=tuple(notes))


def _diagnostics(rm: RatingMatrix, counts: np.ndarray) -> tuple[pd.DataFrame, dict[str, float]]:
    """Per-rater category shares and the prevalence/bias indices (Byrt, Bland & Carlin 1993)."""
    q, k = len(rm.categories), len(rm.raters)
    shares = np.zeros((k, q))
    nr = np.zeros(k, dtype=np.int64)
    for r in range(k):
        c = rm.codes[:, r]
        c = c[c >= 0]
        nr[r] = len(c)
        if len(c):
            shares[r] = np.bincount(c, minlength=q) / len(c)
    pooled = counts.sum(axis=0) / max(counts.sum(), 1)
    names = [str(c) for c in rm.categories]
    marg = pd.DataFrame(np.vstack([shares, pooled]), columns=names,
                        index=pd.Index([*map(str, rm.raters), "(pooled)"], name="rater"))
    marg["n"] = [*nr.tolist(), int(counts.sum())]
    _, _, _, _, _, pa, _, _ = _gwet_parts(counts, np.eye(q))
    bias = [0.5 * float(np.abs(shares[i] - shares[j]).sum()) for i in range(k) for j in range(i + 1, k)
            if nr[i] and nr[j]]
    ind = {"observed_agreement": float(pa),
           "prevalence_index": float(abs(pooled[0] - pooled[1])) if q == 2 else float("nan"),
           "max_prevalence": float(pooled.max()) if q else float("nan"),
           "bias_index": float(np.mean(bias)) if bias else float("nan"),
           "pabak": float((q * pa - 1) / (q - 1)) if q >= 2 else float("nan")}
    return marg, ind
