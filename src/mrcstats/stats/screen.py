"""Screening a benchmark for broken items (mis-keyed, ill-posed): ranked suspects with evidence, a combined
score calibrated to an estimated false-discovery rate, and power measured by injecting key errors.

Seed 003 closes by asking for "metrics that could leverage the observed performance of relatively few LMs to
flag potential garbage data"; its P_d found nothing against 64 hand labels. This module measures the power of
the screen instead of guessing it.

**Abilities.** A 2PL (or 1PL) is fitted by marginal maximum likelihood (:func:`mrcstats.models.irt.fit_irt`);
the models' EAP abilities ``theta_j`` are then held fixed and every item (fitted or not: items all models got
right or wrong included) gets, by penalised logistic regression (:func:`mrcstats.models.logistic.fit_logistic`):

* ``accuracy`` ``p_i`` (share correct over models and trials; an invalid answer counts as not correct);
* ``r_pb``: the corrected item-total (rest score) correlation over models (:func:`mrcstats.stats.irt.point_biserial`);
* ``a``: the signed 2PL slope with the abilities fixed, ``logit P_ij = a_i theta_j + d_i`` with priors
  ``a ~ N(0, 3^2)``, ``d ~ N(0, 10^2)`` (the MML 2PL keeps ``a > 0``; a mis-keyed item has ``a < 0`` here);
* ``infit``/``outfit`` of the Rasch model with the common slope ``a0`` (the median MML slope):
  ``P_ij = expit(a0 theta_j + d_i)``, ``z_ij = (s_ij - n_ij P_ij) / sqrt(n_ij P_ij (1 - P_ij))``,
  ``outfit = mean_j z_ij^2``, ``infit = sum_j (s - nP)^2 / sum_j nP(1 - P)`` (Wright & Masters 1982, *Rating
  Scale Analysis*, ch. 5; R ``mirt::itemfit(fit_stats = "infit")`` for known abilities);
* with ``pred`` and ``gold``: the **key likelihood** of every option ``k`` an item offers. The choices of the
  models on the item are modelled as: the key is chosen with Rasch probability ``expit(a0 theta_j + d)``, the
  other options (as one wrong answer) with item-specific shares ``pi_o`` that do not depend on ability::

      l(k) = max_d sum_j [x_jk log P_j + (m_j - x_jk) log(1 - P_j)] + sum_{o != k} c_o log(c_o / (C - c_k))

  (``x_jk``: model ``j``'s choices of ``k``, ``m_j`` its non-empty answers, ``c_o`` the total choices of ``o``,
  ``C`` all choices). ``alt_loglik = max_{k != gold} l(k) - l(gold)`` is the log-likelihood change if the best
  other option were the key;
* with ``pred``: the **strong-model agreement**: each option's share of the models choosing it weighted by
  ``exp(2 theta_j)`` (the strongest models count most); ``agreement = max_{k != gold} share(k) - share(gold)``,
  ``strong_choice`` that option. ``suggested_key``: the likelihood's option when ``alt_loglik > 0``, else the
  strong models' choice when ``agreement > 0``, else null.

**Combined score.** The oriented signals (:data:`SIGNALS`: ``-logit p``, ``-r_pb``, ``-a``, ``log outfit``,
``log infit``, ``sign(alt_loglik) log(1 + |alt_loglik|)``, ``agreement``), standardised, enter two quadratic
logistic regressions (signals and their squares, ridge 0.01) that separate the log's items from copies of them
with the key moved - to an option some model chose, or (a fifth of the copies) to an option no model chose -
each copy's correctness recomputed from the models' ``pred``; the copies are weighted to 5% of the items so the
fit concentrates on the tail. The score is the log-likelihood ratio of the mixture of the two kinds of error,
``log(sum_t pi_t exp(s_t))`` with ``pi_unchosen`` the share of items no model answered right (0.01-0.5); higher
= more suspect. A log without ``pred``/``gold`` gets the mean robust z-score of the correctness signals.

**Calibration.** ``p_sim``: the share of null items scoring at least as high, the null items simulated from
the fitted model under no key errors: a template item of the log is simulated clean with the key its data favour
(the key likelihood's best option, the gold one unless ``alt_loglik > 0``), its ``(a, d)`` drawn from the fitted
items whose data favour their own key, correctness ``~ Binomial(n_ij, P_ij)``, each model's wrong answers on the
other options it chose on the template, in its own shares (templates taken as keyed copied the broken items'
pattern - strong models agreeing on a "distractor" - into the null, and nothing was flagged). That null assumes
clean items follow the 2PL; real clean items misfit it (several skills, guessing), score higher than the
simulated ones, and a false-discovery rate read from ``p_sim`` is then optimistic. ``p_value`` therefore
recentres it on the log's own items (Efron's empirical null, :func:`_empirical_null`: the probit of the
simulated p-values of the bulk of the items fixes a shift ``δ`` and a spread ``σ``, used when they make the test
more conservative; ``calibration="simulated"`` keeps ``p_sim``). ``q_value``: Benjamini-Hochberg (R
``p.adjust(p, "BH")``) of ``p_value`` - the estimated false-discovery rate of flagging every item scoring at
least as high; ``flag = q_value <= fdr``. On logs with injected key errors and a misfitting 2PL
(``tests/stats/test_screen_fdr.py``) the realised share of clean items among the flagged ones stays below
``fdr`` on average over seeds.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from mrcstats._repr import Result
from mrcstats._seeds import rng as seed_rng
from mrcstats._words import plural
from mrcstats.errors import InputError

__all__ = ["SIGNALS", "ScreenResult", "ScreenValidation", "inject_key_errors", "precision_at_k", "roc_auc",
           "roc_curve", "screen", "screen_validate"]

#: single signals, each oriented so that higher = more suspect, in the order reported
SIGNALS: tuple[str, ...] = ("accuracy", "point_biserial", "discrimination", "outfit", "infit", "alt_key",
                            "agreement")
_CHOICE_SIGNALS = ("alt_key", "agreement")
#: weight of model j in the strong-model agreement: exp(_AGREE * theta_j)
_AGREE = 2.0
_SLOPE_SD, _INTERCEPT_SD = 3.0, 10.0
_ALT_CLIP = 50.0
#: weight of the injected copies in the combined score's regression, as a share of the log's items: a small
#: prior focuses the fit on the tail where the flags are
_TRAIN_PRIOR = 0.05
_RIDGE = 1e-2
#: share of the training copies whose key is moved to an option no model chose
_UNCHOSEN = 0.2
#: simulated null scores above which the null's p-values come from an exponential tail fit
_TAIL = 250


def _design(Z: np.ndarray) -> np.ndarray:
    """The combined score's regressors: intercept, standardised signals and their squares."""
    return np.column_stack([np.ones(len(Z)), Z, Z * Z])


# --------------------------------------------------------------------------- ranking metrics

def roc_auc(score: np.ndarray | pd.Series, label: np.ndarray | pd.Series) -> float:
    """Area under the ROC curve: P(score of a positive > score of a negative) + 1/2 P(tie), the Mann-Whitney
    statistic ``(R_pos - n_pos (n_pos + 1) / 2) / (n_pos n_neg)`` with average ranks for ties; a missing score
    ranks lowest. NaN when one class is empty."""
    from scipy.stats import rankdata

    s = np.asarray(score, float)
    y = np.asarray(label, bool)
    s = np.where(np.isnan(s), -np.inf, s)
    npos, nneg = int(y.sum()), int((~y).sum())
    if npos == 0 or nneg == 0:
        return float("nan")
    r = rankdata(s)
    return float((r[y].sum() - npos * (npos + 1) / 2) / (npos * nneg))


def _order(score: np.ndarray) -> np.ndarray:
    s = np.where(np.isnan(score), -np.inf, score)
    return np.argsort(-s, kind="mergesort")


def precision_at_k(score: np.ndarray | pd.Series, label: np.ndarray | pd.Series, k: int | None = None) -> float:
    """Share of positives among the ``k`` highest scores (``k`` = the number of positives by default; ties in
    the order given)."""
    s = np.asarray(score, float)
    y = np.asarray(label, bool)
    k = int(y.sum()) if k is None else int(k)
    if k <= 0:
        return float("nan")
    return float(y[_order(s)[:k]].mean())


def roc_curve(score: np.ndarray | pd.Series, label: np.ndarray | pd.Series) -> pd.DataFrame:
    """``fpr, tpr`` at every distinct threshold (from the highest score down), starting at (0, 0)."""
    s = np.asarray(score, float)
    y = np.asarray(label, bool)
    o = _order(s)
    ss, yy = np.where(np.isnan(s), -np.inf, s)[o], y[o]
    tp, fp = np.cumsum(yy), np.cumsum(~yy)
    last = np.r_[ss[1:] != ss[:-1], True]
    npos, nneg = max(int(y.sum()), 1), max(int((~y).sum()), 1)
    return pd.DataFrame({"fpr": np.r_[0.0, fp[last] / nneg], "tpr": np.r_[0.0, tp[last] / npos]})


# --------------------------------------------------------------------------- data

@dataclass(frozen=True)
class _Choices:
    """Every (item, option) pair offered by the log: counts of each model choosing it (``P x J``)."""

    item: np.ndarray          # (P,) item position
    option: np.ndarray        # (P,) option label
    counts: np.ndarray        # (P, J)
    gold: np.ndarray          # (I,) pair index of each item's key
    answers: np.ndarray       # (I, J) non-empty answers per model and item


def _norm(s: pd.Series) -> pd.Series:
    return s.astype("string").str.strip()


def _choices(log: pd.DataFrame, items: tuple[str, ...], models: tuple[str, ...], model_col: str, item_col: str,
             notes: list[str]) -> _Choices | None:
    if "pred" not in log.columns or "gold" not in log.columns:
        return None
    gold = _norm(log["gold"])
    if gold.notna().sum() == 0 or log["pred"].notna().sum() == 0:
        return None
    I, J = len(items), len(models)
    ipos = pd.Index(items).get_indexer(log[item_col].astype(str))
    mpos = pd.Index(models).get_indexer(log[model_col].astype(str))
    keep = ipos >= 0
    g = pd.DataFrame({"i": ipos[keep], "gold": gold.to_numpy()[keep]}).dropna()
    cnt = g.groupby(["i", "gold"], sort=True).size().reset_index(name="n")
    multi = cnt.groupby("i")["gold"].nunique()
    if (multi > 1).any():
        notes.append(f"{plural(int((multi > 1).sum()), 'item')} have more than one gold answer across rows; the most "
                     "frequent is used as the key")
    key = cnt.sort_values(["i", "n", "gold"], ascending=[True, False, True]).drop_duplicates("i")
    gold_of = pd.Series(pd.NA, index=range(I), dtype="string")
    gold_of[key["i"].to_numpy()] = key["gold"].to_numpy()
    no_gold = int(gold_of.isna().sum())
    if no_gold:
        notes.append(f"{plural(no_gold, 'item')} have no gold answer: no key likelihood for them")
    pred = _norm(log["pred"]).to_numpy()[keep]
    ok = pd.notna(pred)
    rows = pd.DataFrame({"i": ipos[keep][ok], "j": mpos[keep][ok], "o": pred[ok]})
    pairs = pd.concat([rows[["i", "o"]], pd.DataFrame({"i": key["i"].to_numpy(), "o": key["gold"].to_numpy()})])
    pairs = pairs.drop_duplicates().sort_values(["i", "o"]).reset_index(drop=True)
    pidx = pd.MultiIndex.from_frame(pairs)
    pr = pidx.get_indexer(pd.MultiIndex.from_frame(rows[["i", "o"]]))
    P = len(pairs)
    counts = np.bincount(pr * J + rows["j"].to_numpy(), minlength=P * J).reshape(P, J).astype(float)
    gp = np.full(I, -1)
    gp[key["i"].to_numpy()] = pidx.get_indexer(pd.MultiIndex.from_frame(key[["i", "gold"]].rename(
        columns={"gold": "o"})))
    answers = np.zeros((I, J))
    np.add.at(answers, (rows["i"].to_numpy(), rows["j"].to_numpy()), 1.0)
    return _Choices(pairs["i"].to_numpy(), pairs["o"].to_numpy(dtype=object), counts, gp, answers)


# --------------------------------------------------------------------------- signals

def _rasch(x: np.ndarray, m: np.ndarray, theta: np.ndarray, a0: float):
    from mrcstats.models.logistic import fit_logistic

    off = np.broadcast_to(a0 * theta, x.shape)
    return fit_logistic(np.ones((len(theta), 1)), x, m, offset=off, ridge=1.0 / _INTERCEPT_SD ** 2)


def _correctness_signals(s: np.ndarray, n: np.ndarray, theta: np.ndarray, a0: float, rest: np.ndarray,
                         ) -> dict[str, np.ndarray]:
    """Per version (rows of ``s``, ``n``: ``V x J``): accuracy, r_pb, signed slope, Rasch infit/outfit."""
    from mrcstats.models.logistic import fit_logistic
    from mrcstats.stats.irt import corr_with_rest

    answered = n > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        p = s.sum(1) / n.sum(1)
        y = np.where(answered, s / np.where(answered, n, 1.0), 0.0)
    r_pb = corr_with_rest(y.T, answered.T, rest.T)
    X = np.column_stack([np.ones_like(theta), theta])
    two = fit_logistic(X, s, n, ridge=np.array([1.0 / _INTERCEPT_SD ** 2, 1.0 / _SLOPE_SD ** 2]))
    ra = _rasch(s, n, theta, a0)
    mu = ra.mu
    v = n * mu * (1 - mu)
    res2 = (s - n * mu) ** 2
    with np.errstate(invalid="ignore", divide="ignore"):
        z2 = np.where(answered, res2 / np.where(v > 0, v, np.nan), np.nan)
        outfit = np.nanmean(np.where(answered, z2, np.nan), axis=1)
        infit = res2.sum(1) / v.sum(1)
    return {"p": p, "r_pb": r_pb, "a": two.beta[:, 1], "d": two.beta[:, 0], "infit": infit, "outfit": outfit,
            "rasch_d": ra.beta[:, 0]}


def _key_loglik(counts: np.ndarray, answers: np.ndarray, theta: np.ndarray, a0: float) -> np.ndarray:
    """``l(k)`` of every (item, option) pair (module docstring); ``answers`` per pair (``P x J``)."""

    ra = _rasch(counts, answers, theta, a0)
    return ra.loglik


def _multinomial_part(c: np.ndarray, item: np.ndarray, n_items: int) -> np.ndarray:
    """``sum_{o != k} c_o log(c_o / (C - c_k))`` for every pair ``k`` (``c``: total choices per pair)."""
    from scipy.special import xlogy

    T = np.bincount(item, weights=xlogy(c, c), minlength=n_items)[item]
    C = np.bincount(item, weights=c, minlength=n_items)[item]
    return T - xlogy(c, c) - xlogy(C - c, C - c)


def _alt(ell: np.ndarray, item: np.ndarray, chosen: np.ndarray, key: np.ndarray, n_items: int,
         version_item: np.ndarray, key_value: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """For each version (item ``version_item[v]`` with key pair ``key[v]``): the best other chosen pair and
    ``l(best) - l(key)`` (``-Inf`` / -1 when no other option was chosen). ``key = -1`` with ``key_value``: a
    key no model chose (not a pair), whose ``l`` is ``key_value``."""
    P = len(ell)
    val = np.where(chosen, ell, -np.inf)
    o = np.lexsort((-val, item))
    first = np.full(n_items, -1)
    second = np.full(n_items, -1)
    start = np.r_[True, item[o][1:] != item[o][:-1]]
    pos = np.arange(P)
    grp_start = np.maximum.accumulate(np.where(start, pos, 0))
    rank = pos - grp_start
    first[item[o][rank == 0]] = o[rank == 0]
    second[item[o][rank == 1]] = o[rank == 1]
    f, s2 = first[version_item], second[version_item]
    best = np.where(f == key, s2, f)
    ok = best >= 0
    ok[ok] = np.isfinite(val[best[ok]])
    best = np.where(ok, best, -1)
    kv = ell[np.maximum(key, 0)] if key_value is None else np.where(key >= 0, ell[np.maximum(key, 0)], key_value)
    delta = np.where(ok, ell[np.maximum(best, 0)] - kv, -np.inf)
    return delta, best


def _features(sig: Mapping[str, np.ndarray], alt: np.ndarray | None, agree: np.ndarray | None) -> np.ndarray:
    """Oriented signals (higher = more suspect) as columns in :data:`SIGNALS` order (NaN without choices)."""
    n = len(sig["p"])
    m = np.full(n, np.nan) if alt is None else np.clip(alt, -_ALT_CLIP, _ALT_CLIP)   # -Inf: no other option chosen
    g = np.full(n, np.nan) if agree is None else np.where(np.isfinite(agree), agree, -1.0)
    p = np.clip(sig["p"], 0.5 / 1000, 1 - 0.5 / 1000)
    cols = [-np.log(p / (1 - p)), -sig["r_pb"], -sig["a"], np.log(sig["outfit"]), np.log(sig["infit"]),
            np.sign(m) * np.log1p(np.abs(m)), g]
    return np.column_stack(cols)


def _strong_share(counts: np.ndarray, answers: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """Per (item, option) pair: the ability-weighted share of the models choosing it, weights
    ``exp(2 theta_j)`` (the strongest models count most)."""
    w = np.exp(_AGREE * (theta - theta.max()))
    den = answers @ w
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (counts @ w) / den, 0.0)


# --------------------------------------------------------------------------- result

@dataclass(frozen=True, repr=False)
class ScreenResult(Result):
    """Screen of every item of a log (see the module docstring).

    ``items``: one row per item of the log, most suspect first: ``item, score, flag, p_value, q_value,
    suggested_key, gold, accuracy, r_pb, a, a_2pl, b_2pl, b_rasch, infit, outfit, alt_key, alt_loglik, agreement,
    strong_choice, strong_share, gold_strong_share, n_models`` (``score`` NaN for items answered by one model
    only). ``signals``: the oriented
    single signals per item (:data:`SIGNALS`, higher = more suspect) and ``combined``. ``weights``: the
    combined score's coefficients on the standardised signals.
    """

    items: pd.DataFrame
    signals: pd.DataFrame
    fdr: float
    weights: Mapping[str, float]
    combination: str
    irt_model: str
    a0: float
    n_null: int
    n_train: int
    abilities: pd.DataFrame
    skipped: Mapping[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    calibration: Mapping[str, Any] = field(default_factory=dict)

    @property
    def flagged(self) -> pd.DataFrame:
        return self.items[self.items["flag"]]

    def to_frame(self) -> pd.DataFrame:
        return self.items.copy()

    def to_dict(self) -> dict[str, Any]:
        """The ``mrcstats screen --json`` object: ``{"items": [{"item", "score", "flag", "suggested_key",
        "evidence"}], "notes", ...}`` with every item of the log."""
        ev_cols = [c for c in self.items.columns if c not in ("item", "score", "flag", "suggested_key")]
        out = []
        for r in self.items.to_dict(orient="records"):
            sk = r["suggested_key"]
            out.append({"item": r["item"], "score": r["score"], "flag": bool(r["flag"]),
                        "suggested_key": None if sk is None or (isinstance(sk, float) and math.isnan(sk))
                        or sk is pd.NA else sk,
                        "evidence": {c: r[c] for c in ev_cols}})
        return {"items": out, "notes": list(self.notes), "fdr": self.fdr, "n_flagged": int(self.items["flag"].sum()),
                "combination": self.combination, "weights": dict(self.weights), "irt_model": self.irt_model,
                "a0": self.a0, "n_null": self.n_null, "n_train": self.n_train, "skipped": dict(self.skipped),
                "calibration": dict(self.calibration)}

    def summary(self, n: int = 20) -> str:
        it = self.items
        k = int(it["flag"].sum())
        lines = [(f"Item screen: {len(it)} items, {k} flagged at estimated FDR <= {self.fdr:g} "
                 f"(combined score: {self.combination}; abilities from the {self.irt_model.upper()})")]
        cols = ["item", "score", "q_value", "flag", "accuracy", "r_pb", "a", "outfit", "gold", "suggested_key",
                "alt_loglik", "strong_share"]
        cols = [c for c in cols if c in it.columns]
        lines.append(it.head(n)[cols].to_string(index=False, float_format=lambda v: f"{v:.3g}"))
        lines += [f"note: {t}" for t in self.notes]
        lines += [f"skipped: {v} {k_}" for k_, v in self.skipped.items()]
        return "\n".join(lines)


# --------------------------------------------------------------------------- the screen

def _check(log: Any, model_col: str, item_col: str, correct_col: str, fdr: float) -> None:
    if not isinstance(log, pd.DataFrame):
        raise InputError(f"screen: expected a canonical log (pandas DataFrame), got {type(log).__name__}")
    if not (0 < fdr < 1):
        raise InputError(f"screen: fdr must lie strictly between 0 and 1, got {fdr!r}")


def screen(log: pd.DataFrame, *, fdr: float = 0.1, irt_model: str = "2pl", seed: int = 0,
           n_null: int | None = None, n_train: int | None = None, irt_tol: float = 1e-4,
           progress: bool | None = None, model_col: str = "model", item_col: str = "item",
           correct_col: str = "correct", calibration: str = "empirical") -> ScreenResult:
    """Rank every item of a canonical log by how likely it is broken (mis-keyed or ill-posed).

    ``fdr``: flag items whose estimated false-discovery rate (BH q-value against the simulated null) is at
    most this; ``irt_model``: ``"2pl"`` or ``"1pl"`` for the abilities; ``seed``: the injected training copies
    and the null simulation (deterministic given it); ``n_null`` / ``n_train``: simulated null items and
    injected copies (default: as many as items, between 2,000 and 20,000 / up to 5,000); ``calibration``:
    ``"empirical"`` (the simulated null's p-values recentred on the log's own items, see the module docstring)
    or ``"simulated"`` (the simulated null as it is: optimistic when the clean items misfit the 2PL).
    """
    from mrcstats._progress import progress as bar_of
    from mrcstats.models.irt import fit_irt, response_matrix
    from mrcstats.stats.irt import rest_scores

    _check(log, model_col, item_col, correct_col, fdr)
    if calibration not in ("empirical", "simulated"):
        raise InputError(f"screen: calibration must be 'empirical' or 'simulated', got {calibration!r}")
    if irt_model not in ("1pl", "2pl", "rasch"):
        raise InputError(f"screen: irt_model must be '1pl' or '2pl', got {irt_model!r}")
    disable = None if progress is None else not progress
    bar = bar_of(total=5, desc="screen", disable=disable, unit="step")
    rng = seed_rng(seed)
    notes: list[str] = []
    try:
        rm = response_matrix(log, model=model_col, item=item_col, correct=correct_col, where="screen")
        notes += list(rm.notes)
        fit = fit_irt(rm, irt_model, quadrature=11, tol=irt_tol, progress=False, quiet=True) if rm.fit_mask.sum() >= 2 else None
        if fit is None:
            raise InputError("screen: fewer than two items have both correct and wrong answers; nothing to "
                             "fit abilities on")
        bar.update(1)
        theta = fit.abilities["theta"].to_numpy()
        a_fit = fit.items["a"].to_numpy()
        a0 = float(np.median(a_fit))
        S, N = rm.s.T.copy(), rm.n.T.copy()       # items x models
        I = S.shape[0]
        _, _answered, rest = rest_scores(rm)
        rest = rest.T
        sig = _correctness_signals(S, N, theta, a0, rest)
        bar.update(1)
        ch = _choices(log, rm.items, rm.models, model_col, item_col, notes)
        alt_delta = alt_pair = agree = agree_pair = share = None
        if ch is not None:
            ell = _key_loglik(ch.counts, ch.answers[ch.item], theta, a0) \
                + _multinomial_part(ch.counts.sum(1), ch.item, I)
            share = _strong_share(ch.counts, ch.answers[ch.item], theta)
            chosen = ch.counts.sum(1) > 0
            has_key = ch.gold >= 0
            alt_delta, alt_pair = _alt(ell, ch.item, chosen, np.maximum(ch.gold, 0), I, np.arange(I))
            agree, agree_pair = _alt(share, ch.item, chosen, np.maximum(ch.gold, 0), I, np.arange(I))
            alt_delta = np.where(has_key, alt_delta, np.nan)
            agree = np.where(has_key, agree, np.nan)
            alt_pair = np.where(has_key, alt_pair, -1)
            agree_pair = np.where(has_key, agree_pair, -1)
        F = _features(sig, alt_delta, agree)
        # ---- combined score
        use = [k for k, nm in enumerate(SIGNALS) if nm not in _CHOICE_SIGNALS or ch is not None]
        Fo = F[:, use]
        med = np.nanmedian(Fo, axis=0)
        Fo = np.where(np.isnan(Fo), med, Fo)
        mu_f, sd_f = Fo.mean(0), Fo.std(0)
        sd_f = np.where(sd_f > 0, sd_f, 1.0)
        n_tr = 0
        if ch is not None:
            elig = np.flatnonzero(_eligible(ch, I))
            n_tr = min(len(elig), n_train if n_train is not None else 5000)
        if ch is not None and n_tr >= 20:
            pick = np.sort(rng.choice(elig, n_tr, replace=False))
            newkey = _pick_distractor(rng, ch, pick)
            # a fifth of the copies get a key no model chose (all answers wrong)
            newkey[rng.random(n_tr) < _UNCHOSEN] = -1
            Fi = _version_features(ch, pick, newkey, N, theta, a0, rest, ell, share, chosen, I)[:, use]
            Fi = np.where(np.isnan(Fi), med, Fi)
            from mrcstats.models.logistic import fit_logistic

            Zo = (Fo - mu_f) / sd_f
            # prior share of keys nobody chose among the errors: the share of items no model answered right
            pi_u = float(np.clip(np.mean(sig["p"] == 0), 0.01, 0.5))
            names = [SIGNALS[k] for k in use]
            betas, weights = [], {}
            # one regression per kind of copy (key moved to a chosen option / to an option nobody chose); the
            # score is the log of the mixture's likelihood ratio, sum_t pi_t exp(s_t)
            for kind, sel_k in (("chosen", newkey >= 0), ("unchosen", newkey < 0)):
                Zi = (Fi[sel_k] - mu_f) / sd_f
                if len(Zi) < 10:
                    continue
                X = _design(np.vstack([Zo, Zi]))
                lab = np.r_[np.zeros(len(Zo)), np.ones(len(Zi))]
                wt = np.r_[np.full(len(Zo), 1.0), np.full(len(Zi), _TRAIN_PRIOR * len(Zo) / len(Zi))]
                cl = fit_logistic(X, (lab * wt)[None, :], wt[None, :],
                                  ridge=np.r_[0.0, np.full(X.shape[1] - 1, _RIDGE)])
                betas.append((math.log(pi_u if kind == "unchosen" else 1.0 - pi_u), cl.beta[0]))
                weights |= {f"{kind}: {nm}": float(b) for nm, b in
                            zip([*names, *[f"{n}^2" for n in names]], cl.beta[0][1:], strict=False)}
            combination = (f"log-likelihood ratio of {I} items against {n_tr} copies with the key moved to an "
                           f"option some model chose ({int((newkey >= 0).sum())}) or none chose "
                           f"({int((newkey < 0).sum())}, mixture weight {pi_u:.3g}): quadratic logistic regressions")

            def combine(Fx: np.ndarray) -> np.ndarray:
                Fx = np.where(np.isnan(Fx), med, Fx)
                D = _design((Fx - mu_f) / sd_f)
                return np.logaddexp.reduce(np.stack([lw + D @ bt for lw, bt in betas]), axis=0)
        else:
            n_tr = 0
            cols = [k for k in use if SIGNALS[k] not in _CHOICE_SIGNALS]
            sel = [use.index(k) for k in cols]
            mad = np.nanmedian(np.abs(Fo[:, sel] - med[sel]), axis=0) * 1.4826
            mad = np.where(mad > 0, mad, sd_f[sel])

            def combine(Fx: np.ndarray) -> np.ndarray:
                Fx = np.where(np.isnan(Fx), med, Fx)[:, sel]
                return ((Fx - med[sel]) / mad).mean(1)
            weights = {SIGNALS[k]: 1.0 / len(cols) for k in cols}
            combination = "mean robust z-score of the correctness signals (no pred/gold to learn weights from)"
            if ch is not None:
                notes.append("too few items with a distractor chosen by some model to learn the combined "
                             "score's weights; the mean robust z-score is used")
        score = combine(Fo)
        bar.update(1)
        # ---- null reference
        n0 = n_null if n_null is not None else int(min(max(I, 2000), 20000))
        # the null under no key errors: each template item is simulated clean with the key its data favour
        # (the likelihood's best option), and its (a, d) come from items whose data favour their own key
        ml_key = consistent = None
        if ch is not None:
            flip = np.nan_to_num(alt_delta, nan=-np.inf) > 0
            ml_key = np.where(flip, alt_pair, ch.gold)
            consistent = ~flip
        F0 = _null_features(rng, n0, fit, rm, ch, N, theta, a0, rest, I, ml_key, consistent)
        s0 = np.sort(combine(F0[:, use]))
        bar.update(1)
        from mrcstats.stats.multiplicity import p_adjust

        p_sim = (1.0 + (len(s0) - np.searchsorted(s0, score, side="left"))) / (1.0 + len(s0))
        cal = {"method": calibration, "delta": 0.0, "sigma": 1.0}
        if calibration == "empirical":
            pval, cal = _empirical_null(s0, score)
        else:
            pval = p_sim
        qval = p_adjust(pval, "BH")
        flag = qval <= fdr
        # ---- table
        mml = fit.items.set_index("item")
        tab = pd.DataFrame({"item": list(rm.items), "score": score, "flag": flag, "p_value": pval, "q_value": qval,
                            "p_sim": p_sim})
        tab["suggested_key"] = pd.Series(pd.NA, index=tab.index, dtype="string")
        tab["gold"] = pd.Series(pd.NA, index=tab.index, dtype="string")
        tab["accuracy"] = sig["p"]
        tab["r_pb"] = sig["r_pb"]
        tab["a"] = sig["a"]
        tab["a_2pl"] = mml["a"].reindex(tab["item"]).to_numpy()
        tab["b_2pl"] = mml["b"].reindex(tab["item"]).to_numpy()
        tab["b_rasch"] = -sig["rasch_d"] / a0
        tab["infit"] = sig["infit"]
        tab["outfit"] = sig["outfit"]
        tab["alt_key"] = pd.Series(pd.NA, index=tab.index, dtype="string")
        tab["alt_loglik"] = np.nan if alt_delta is None else alt_delta
        tab["agreement"] = np.nan if agree is None else agree
        tab["strong_choice"] = pd.Series(pd.NA, index=tab.index, dtype="string")
        tab["strong_share"] = np.nan
        tab["gold_strong_share"] = np.nan
        if ch is not None:
            has = ch.gold >= 0
            tab.loc[has, "gold"] = ch.option[ch.gold[has]]
            ok = alt_pair >= 0
            tab.loc[ok, "alt_key"] = ch.option[alt_pair[ok]]
            ok2 = agree_pair >= 0
            tab.loc[ok2, "strong_choice"] = ch.option[agree_pair[ok2]]
            tab.loc[ok2, "strong_share"] = share[agree_pair[ok2]]
            tab.loc[has, "gold_strong_share"] = share[ch.gold[has]]
            # the likelihood's choice when it beats the key, else the strong models' choice when they prefer it
            sug2 = ok2 & (agree > 0)
            tab.loc[sug2, "suggested_key"] = ch.option[agree_pair[sug2]]
            sug = ok & (alt_delta > 0)
            tab.loc[sug, "suggested_key"] = ch.option[alt_pair[sug]]
        tab["n_models"] = (N > 0).sum(1)
        sigs = pd.DataFrame(F, columns=list(SIGNALS))
        if ch is None:
            sigs = sigs.drop(columns=list(_CHOICE_SIGNALS))
        sigs.insert(0, "item", list(rm.items))
        sigs["combined"] = score
        # items answered by one model only: listed, not scored
        all_items = pd.Index(pd.unique(log[item_col].astype(str)))
        missing = all_items.difference(pd.Index(rm.items))
        if len(missing):
            extra = pd.DataFrame({"item": list(missing), "score": np.nan, "flag": False, "p_value": np.nan,
                                  "q_value": np.nan, "p_sim": np.nan})
            tab = pd.concat([tab, extra], ignore_index=True)
            tab["flag"] = tab["flag"].astype(bool)
            notes.append(f"{plural(len(missing), 'item')} answered by one model only are listed without a score")
        tab = tab.iloc[_order(tab["score"].to_numpy(float))].reset_index(drop=True)
        bar.update(1)
    finally:
        bar.close()
    ab = fit.abilities[["model", "theta", "sd"]].copy()
    return ScreenResult(tab, sigs, float(fdr), weights, combination, fit.model, a0, len(s0), int(n_tr), ab,
                        dict(rm.skipped), tuple(notes), cal)


def _empirical_null(s0: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
    """p-values of ``score`` against the sorted simulated null ``s0``, recentred on the items' own scores.

    Each item's mid-p against the simulation, ``p_mid = (#{s0 > s} + #{s0 = s}/2 + 1/2) / (n0 + 1)`` (past
    the top ``_TAIL`` simulated scores: an exponential tail fitted to them), becomes
    ``z = Φ⁻¹(1 - p_mid)``; were the simulated null right, the clean items' ``z`` would be N(0, 1). Real clean items
    misfit the 2PL, so their ``z`` are shifted and wider: the empirical null N(δ, σ²) is read off the centre
    of the items' ``z`` (δ = median, σ = IQR / 1.349; the few broken items sit in the upper tail and can only
    move both up), and ``p = max(1 - Φ((z - δ') / σ'), p_mid)`` with ``δ' = max(δ, 0)``, ``σ' = max(σ, 1)`` -
    never less conservative than the simulation. Efron (2004), "Large-scale simultaneous hypothesis testing: the choice
    of a null hypothesis", JASA 99:96-104 (R ``locfdr``'s empirical null, here by quantiles).
    """
    from scipy.stats import norm

    n0 = len(s0)
    above = n0 - np.searchsorted(s0, score, side="right")
    ties = np.searchsorted(s0, score, side="right") - np.searchsorted(s0, score, side="left")
    pm = (above + 0.5 * ties + 0.5) / (n0 + 1.0)
    # beyond the simulation's top _TAIL values: an exponential tail fitted to their excesses (the GPD
    # approximation of permutation p-values with shape 0; Knijnenburg et al. 2009, Bioinformatics 25:i161),
    # so items scoring past every simulated one are not all tied at 1 / (n0 + 1)
    k = min(_TAIL, n0 // 10)
    if k >= 10:
        u = float(s0[n0 - k - 1])
        beta = float(np.mean(s0[n0 - k:] - u))
        if beta > 0:
            tail = score > u
            pm = np.where(tail, (k + 0.5) / (n0 + 1.0) * np.exp(-(score - u) / beta), pm)
    z = norm.isf(pm)
    ok = np.isfinite(z)
    q25, q50, q75 = np.quantile(z[ok], [0.25, 0.5, 0.75]) if ok.any() else (0.0, 0.0, 0.0)
    delta, sigma = float(q50), float((q75 - q25) / 1.3489795003921634)
    d, sd = max(delta, 0.0), max(sigma, 1.0)
    p = np.maximum(norm.sf((z - d) / sd), pm)
    return p, {"method": "empirical", "delta": delta, "sigma": sigma, "delta_used": d, "sigma_used": sd}


def _eligible(ch: _Choices, n_items: int) -> np.ndarray:
    """Items with a key and at least one other option chosen by some model."""
    chosen = ch.counts.sum(1) > 0
    other = chosen & (np.arange(len(ch.item)) != ch.gold[ch.item])
    out = np.bincount(ch.item, weights=other, minlength=n_items) > 0
    return out & (ch.gold >= 0)


def _pick_distractor(rng: np.random.Generator, ch: _Choices, items: np.ndarray) -> np.ndarray:
    """A pair index per item: one of its non-key options chosen by some model, uniformly."""
    chosen = ch.counts.sum(1) > 0
    out = np.empty(len(items), int)
    starts = np.searchsorted(ch.item, items, side="left")
    ends = np.searchsorted(ch.item, items, side="right")
    for k, (i, a, b) in enumerate(zip(items, starts, ends, strict=True)):
        cand = [p for p in range(a, b) if chosen[p] and p != ch.gold[i]]
        out[k] = cand[int(rng.integers(len(cand)))]
    return out


def _version_features(ch: _Choices, items: np.ndarray, key: np.ndarray, N: np.ndarray, theta: np.ndarray,
                      a0: float, rest: np.ndarray, ell: np.ndarray, share: np.ndarray, chosen: np.ndarray,
                      I: int) -> np.ndarray:
    """Signals of copies of ``items`` with the key moved to pair ``key`` (correctness from ``pred``)."""
    none = key < 0
    s = np.where(none[:, None], 0.0, ch.counts[np.maximum(key, 0)])
    sig = _correctness_signals(s, N[items], theta, a0, rest[items])
    # l of a key no model chose: the Rasch part of all-zero choices plus every chosen option as a distractor
    m = ch.answers[items]
    c = ch.counts.sum(1)
    from scipy.special import xlogy

    T = np.bincount(ch.item, weights=xlogy(c, c), minlength=I)[items]
    C = np.bincount(ch.item, weights=c, minlength=I)[items]
    ell0 = _rasch(np.zeros_like(m), m, theta, a0).loglik + T - xlogy(C, C)
    delta, _ = _alt(ell, ch.item, chosen, key, I, items, key_value=ell0)
    agree, _ = _alt(share, ch.item, chosen, key, I, items, key_value=np.zeros(len(items)))
    return _features(sig, delta, agree)


def _null_features(rng: np.random.Generator, n0: int, fit: Any, rm: Any, ch: _Choices | None, N: np.ndarray,
                   theta: np.ndarray, a0: float, rest: np.ndarray, I: int, ml_key: np.ndarray | None = None,
                   consistent: np.ndarray | None = None) -> np.ndarray:
    """Signals of ``n0`` items simulated from the fitted model (see the module docstring). ``ml_key``: per
    item, the option pair taken as the template's key (default the gold one); ``consistent``: the items whose
    fitted (a, d) the null may draw (default all fitted items)."""
    from scipy.special import expit

    fitted = np.flatnonzero(rm.fit_mask)
    rows = np.arange(len(fit.items))                      # fit.items rows follow the fitted items
    if consistent is not None and consistent[fitted].sum() >= 2:
        rows = rows[consistent[fitted]]
    par = rows[rng.integers(len(rows), size=n0)]
    a = fit.items["a"].to_numpy()[par]
    d = fit.items["d"].to_numpy()[par]
    base = fitted[rng.integers(len(fitted), size=n0)]     # shapes (answers per model, rest, distractors)
    P = expit(a[:, None] * theta[None, :] + d[:, None])
    if ch is None:
        n = N[base]
        s = rng.binomial(n.astype(np.int64), P).astype(float)
        sig = _correctness_signals(s, n, theta, a0, rest[base])
        return _features(sig, None, None)
    m = ch.answers[base]
    x = rng.binomial(m.astype(np.int64), P).astype(float)
    wrong = m - x
    # distractor shares of the base item (its non-key options chosen by some model)
    tot = ch.counts.sum(1)
    rows_i, rows_c = [], []
    J = len(theta)
    starts = np.searchsorted(ch.item, base, side="left")
    ends = np.searchsorted(ch.item, base, side="right")
    for v in range(n0):
        i = base[v]
        key_i = ch.gold[i] if ml_key is None else ml_key[i]
        ps = [p for p in range(starts[v], ends[v]) if p != key_i and tot[p] > 0]
        if not ps:
            c = np.zeros((1, J))
            c[0] = wrong[v]
        else:
            # each model's wrong answers fall on the distractors it chose on the base item (its own shares:
            # distractor choice may depend on ability as on real items), else in the item's shares
            own = ch.counts[ps].T                                    # J x K
            sh = np.where(own.sum(1, keepdims=True) > 0, own, tot[ps][None, :])
            cum = np.cumsum(sh / sh.sum(1, keepdims=True), axis=1)
            c = np.zeros((len(ps), J))
            w = wrong[v]
            for t_ in range(int(w.max()) if w.any() else 0):
                act = w > t_
                k = np.minimum((cum < rng.random(J)[:, None]).sum(1), len(ps) - 1)
                np.add.at(c, (k[act], np.flatnonzero(act)), 1.0)
        rows_c.append(c)
        rows_i.append(np.full(len(c), v))
    dist_counts = np.vstack(rows_c)
    dist_item = np.concatenate(rows_i)
    counts = np.vstack([x, dist_counts])
    item = np.r_[np.arange(n0), dist_item]
    o = np.argsort(item, kind="mergesort")
    counts, item = counts[o], item[o]
    key = np.searchsorted(item, np.arange(n0), side="left")   # the key pair is first of each version
    ell = _key_loglik(counts, m[item], theta, a0) + _multinomial_part(counts.sum(1), item, n0)
    chosen = counts.sum(1) > 0
    delta, _ = _alt(ell, item, chosen, key, n0, np.arange(n0))
    agree, _ = _alt(_strong_share(counts, m[item], theta), item, chosen, key, n0, np.arange(n0))
    # correctness: null preds count as not correct (as in the log)
    n = N[base]
    s = x
    sig = _correctness_signals(s, n, theta, a0, rest[base])
    return _features(sig, delta, agree)


# --------------------------------------------------------------------------- validation by injection

def inject_key_errors(log: pd.DataFrame, k: int, seed: int = 0, *, model_col: str = "model",
                      item_col: str = "item") -> tuple[pd.DataFrame, pd.DataFrame]:
    """Move the key of ``k`` random items to a distractor some model chose and recompute ``correct`` from
    each row's ``pred`` (an empty ``pred`` stays an invalid answer, <NA>).

    Returns the new log and the injected items ``item, old_key, new_key``. Only items with a key and an
    other option chosen by some model can be injected; asking for more is an error.
    """
    if "pred" not in log.columns or "gold" not in log.columns:
        raise InputError("validate: the log needs 'pred' and 'gold' columns to move keys (the models' extracted "
                         "answers and the gold answer); without them the screen cannot be validated by injection")
    if not isinstance(k, (int, np.integer)) or k < 1:
        raise InputError(f"validate: K must be a positive whole number of items, got {k!r}")
    from mrcstats.models.irt import response_matrix

    rm = response_matrix(log, model=model_col, item=item_col, where="validate")
    notes: list[str] = []
    ch = _choices(log, rm.items, rm.models, model_col, item_col, notes)
    if ch is None:
        raise InputError("validate: the log's 'pred' or 'gold' column is empty; cannot move keys")
    elig = np.flatnonzero(_eligible(ch, len(rm.items)))
    if k > len(elig):
        raise InputError(f"validate: K = {k} but only {plural(len(elig), 'item')} have an option other than the key "
                         "chosen by some model; choose a smaller K")
    rng = seed_rng(seed)
    pick = np.sort(rng.choice(elig, int(k), replace=False))
    new = _pick_distractor(rng, ch, pick)
    items = np.asarray(rm.items)[pick]
    inj = pd.DataFrame({"item": items, "old_key": ch.option[ch.gold[pick]], "new_key": ch.option[new]})
    out = log.copy()
    newkey = dict(zip(inj["item"], inj["new_key"], strict=True))
    it = out[item_col].astype(str)
    hit = it.isin(newkey).to_numpy()
    nk = it[hit].map(newkey).astype("string")
    pred = _norm(out.loc[hit, "pred"])
    corr = (pred == nk).astype("boolean")
    corr[pred.isna()] = pd.NA
    out.loc[hit, "gold"] = nk.to_numpy()
    out.loc[hit, "correct"] = corr.to_numpy()
    out["correct"] = out["correct"].astype("boolean")
    return out, inj


@dataclass(frozen=True, repr=False)
class ScreenValidation(Result):
    """Power of the screen on the user's own log: ``k`` keys moved (``injected``: item, old_key, new_key), the
    screen rerun, and per signal (``combined`` first) the ROC AUC and precision at ``k`` (``metrics``).
    ``curves``: ROC points per signal; ``result``: the screen of the injected log."""

    k: int
    seed: int
    metrics: pd.DataFrame
    curves: pd.DataFrame
    injected: pd.DataFrame
    result: ScreenResult
    notes: tuple[str, ...] = ()

    def to_frame(self) -> pd.DataFrame:
        return self.metrics.copy()

    def to_dict(self) -> dict[str, Any]:
        res = self.result
        flagged = res.items["flag"].to_numpy(bool)
        inj = res.items["item"].isin(set(self.injected["item"])).to_numpy()
        return {"k": self.k, "seed": self.seed,
                "metrics": self.metrics.to_dict(orient="records"),
                "flagged": int(flagged.sum()), "flagged_injected": int((flagged & inj).sum()),
                "injected": self.injected.to_dict(orient="records"), "fdr": res.fdr,
                "weights": dict(res.weights), "notes": list(self.notes)}

    def summary(self) -> str:
        d = self.to_dict()
        lines = [(f"Screen validation: {self.k} keys moved to a chosen distractor (seed {self.seed}); "
                 f"{d['flagged']} items flagged at estimated FDR <= {self.result.fdr:g}, "
                 f"{d['flagged_injected']} of them injected"),
                 self.metrics.to_string(index=False, float_format=lambda v: f"{v:.4f}")]
        lines += [f"note: {t}" for t in self.notes]
        return "\n".join(lines)


def screen_validate(log: pd.DataFrame, k: int, seed: int = 0, *, progress: bool | None = None,
                    model_col: str = "model", item_col: str = "item", **kwargs: Any) -> ScreenValidation:
    """Move ``k`` keys (:func:`inject_key_errors`), rerun :func:`screen` (``kwargs``) and measure how well each
    signal and the combined score rank the injected items first: ROC AUC (:func:`roc_auc`) and precision at
    ``k`` (:func:`precision_at_k`). Items that were already suspect count as negatives, so both are lower bounds.
    """
    bad, inj = inject_key_errors(log, k, seed, model_col=model_col, item_col=item_col)
    res = screen(bad, seed=seed + 1, progress=progress, model_col=model_col, item_col=item_col, **kwargs)
    sig = res.signals
    lab = sig["item"].isin(set(inj["item"])).to_numpy()
    rows, curves = [], []
    for name in ["combined", *[c for c in SIGNALS if c in sig.columns]]:
        v = sig[name].to_numpy(float)
        rows.append({"signal": name, "auc": roc_auc(v, lab), "precision_at_k": precision_at_k(v, lab, k)})
        c = roc_curve(v, lab)
        c.insert(0, "signal", name)
        curves.append(c)
    notes = list(res.notes)
    if lab.sum() < k:
        notes.append(f"{k - int(lab.sum())} injected item(s) were not scored")
    return ScreenValidation(int(k), int(seed), pd.DataFrame(rows), pd.concat(curves, ignore_index=True), inj, res,
                            tuple(notes))
