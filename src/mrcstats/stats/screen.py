"""Screening a benchmark for broken items (wrong keys, several or no correct options): every item's posterior
probability of being broken and of each kind of error, flags at a Bayesian false-discovery rate, the evidence a
person needs to check it, and power measured by moving keys.

The screen was first tuned on keys moved by simulation, and on benchmark items whose errors human experts found
(MMLU-Redux) it lost to a plain vote of the strong models. It is now the posterior of one model of the answers
(:mod:`mrcstats.models.answer_mixture`), checked on those expert verdicts (``benchmarks/bench_screen_redux.py``;
``docs/screening.md`` gives the figures).

**Abilities.** A 2PL (or 1PL) fitted by marginal maximum likelihood (:func:`mrcstats.models.irt.fit_irt`) gives
the models' EAP abilities ``theta_j``, held fixed afterwards.

**The answer model.** Each item is ``clean``, has a ``wrong_key``, ``multiple_correct`` options or
``no_correct`` option; the options the models chose are modelled under each (2PL choice of the correct set with
the item's slope and difficulty integrated over a prior learned from the log, Dirichlet-multinomial wrong answers,
kinds' prior shares per cluster shrunk to the log's): see :func:`mrcstats.models.answer_mixture.fit_answer_mixture`.
Per item: ``score = P(wrong_key | answers)``, the ranking and the flags; ``p_broken = 1 - P(clean | answers)``,
``p_multiple_correct``, ``p_no_correct`` beside it; ``error_type`` the most probable of the three kinds of error;
``suggested_key`` the most probable correct option under ``wrong_key`` (``also_correct``: the second correct
option under ``multiple_correct``). The score is the wrong key's posterior, not ``p_broken``: the
``multiple_correct`` and ``no_correct`` components also take in clean items the 2PL fits badly (their fitted
shares on MMLU are 5-25 times the experts'), so ``p_broken`` over-flags; on expert verdicts ``P(wrong_key)`` ranks
both wrong keys and errors of any kind first (``docs/screening.md``).

The option set of an item: the options some model chose, its key, and every label used as a key anywhere in the
log (``A``-``D`` on MMLU) when there are at most 26 of them. Answers without an extracted option (empty ``pred``)
carry no choice and are left out of the answer model (counted in ``notes``). Without ``pred``/``gold`` the wrong
answers are pooled as one option: ``wrong_key`` then means "the models' wrong answers are the right ones".

**Flags.** ``q_value`` of an item: the mean ``1 - P(wrong_key)`` of all items at least as suspect - the Bayesian
FDR of flagging them (Müller, Parmigiani & Rice 2006; Efron's local fdr is ``P(clean)``); ``flag = q_value <= fdr``.
Its realised precision on expert verdicts is in ``docs/screening.md``.

**Evidence** (single signals, higher = more suspect in :data:`SIGNALS` order, in ``signals``): ``accuracy``
``p_i``; ``r_pb``, the rest-score point-biserial (:func:`mrcstats.stats.irt.point_biserial`); ``a``, the signed 2PL
slope with the abilities fixed (priors ``a ~ N(0, 3^2)``, ``d ~ N(0, 10^2)``); ``infit``/``outfit`` of the Rasch
model with the common slope ``a0`` (Wright & Masters 1982, ch. 5; R ``mirt::itemfit``); with ``pred``: the
**strong-model agreement**, each option's share of the models choosing it weighted by ``exp(2 theta_j)``,
``agreement = max_{k != gold} share(k) - share(gold)`` (the ability-weighted vote the screen must beat).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from mrcstats._repr import Result
from mrcstats._seeds import rng as seed_rng
from mrcstats._words import plural
from mrcstats.errors import InputError
from mrcstats.io.relabel import option_pairs, rekey
from mrcstats.models.answer_mixture import HYPOTHESES

__all__ = ["ERROR_TYPES", "REVIEW_COLUMNS", "SIGNALS", "ScreenResult", "ScreenValidation", "inject_key_errors",
           "precision_at_k", "review_table", "roc_auc", "roc_curve", "screen", "screen_validate"]

#: single signals, each oriented so that higher = more suspect, in the order reported
SIGNALS: tuple[str, ...] = ("accuracy", "point_biserial", "discrimination", "outfit", "infit", "agreement")
#: the kinds of error the screen tells apart (``error_type``)
ERROR_TYPES: tuple[str, ...] = ("wrong_key", "multiple_correct", "no_correct")
#: the columns a reviewer fills in the review file (``mrcstats screen --review``; read by ``mrcstats relabel``)
REVIEW_COLUMNS: tuple[str, ...] = ("verdict", "new_key", "reviewer", "date", "reason")
#: weight of model j in the strong-model agreement: exp(_AGREE * theta_j)
_AGREE = 2.0
_SLOPE_SD, _INTERCEPT_SD = 3.0, 10.0


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

    item: np.ndarray          # (P,) item position (sorted)
    option: np.ndarray        # (P,) option label: every option of the item (chosen by some model, the key, or a
                              # label used as a key elsewhere)
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
    empty = int((~ok).sum())
    if empty:
        notes.append(f"{plural(empty, 'answer')} without an extracted option (empty pred) carry no choice: left out of "
                     "the answer model (counted as not correct in the correctness signals)")
    pairs = option_pairs(rows["i"], rows["o"], key["i"], key["gold"], np.arange(I))
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


def _alt(ell: np.ndarray, item: np.ndarray, chosen: np.ndarray, key: np.ndarray, n_items: int,
         ) -> tuple[np.ndarray, np.ndarray]:
    """For each item (key pair ``key[i]``): the chosen pair other than the key with the largest ``ell`` and
    ``ell(best) - ell(key)`` (``-Inf`` / -1 when no other option was chosen)."""
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
    f, s2 = first, second
    best = np.where(f == key, s2, f)
    ok = best >= 0
    ok[ok] = np.isfinite(val[best[ok]])
    best = np.where(ok, best, -1)
    delta = np.where(ok, ell[np.maximum(best, 0)] - ell[np.maximum(key, 0)], -np.inf)
    return delta, best


def _strong_share(counts: np.ndarray, answers: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """Per (item, option) pair: the ability-weighted share of the models choosing it, weights
    ``exp(2 theta_j)`` (the strongest models count most)."""
    w = np.exp(_AGREE * (theta - theta.max()))
    den = answers @ w
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (counts @ w) / den, 0.0)


def _slots(ch: _Choices, n_items: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The item x model x option-slot answer counts of the answer model: ``(X, key slot, offered, pair index
    of every slot (-1: none))``; slots follow the pairs' order within each item."""
    start = np.searchsorted(ch.item, np.arange(n_items), side="left")
    slot = np.arange(len(ch.item)) - start[ch.item]
    K = int(slot.max()) + 1 if len(slot) else 1
    J = ch.counts.shape[1]
    X = np.zeros((n_items, J, K))
    X[ch.item, :, slot] = ch.counts
    pair = np.full((n_items, K), -1)
    pair[ch.item, slot] = np.arange(len(ch.item))
    key = np.where(ch.gold >= 0, slot[np.maximum(ch.gold, 0)], 0)
    return X, key, pair >= 0, pair


def _bayes_fdr(p_clean: np.ndarray) -> np.ndarray:
    """``q_i`` = mean ``P(clean)`` over every item at least as suspect as ``i`` (NaN stays NaN): the Bayesian
    FDR of flagging them (Müller, Parmigiani & Rice 2006), monotone in ``P(clean)``."""
    q = np.full(len(p_clean), np.nan)
    ok = np.flatnonzero(np.isfinite(p_clean))
    o = ok[np.argsort(p_clean[ok], kind="mergesort")]
    cm = np.cumsum(p_clean[o]) / np.arange(1, len(o) + 1)
    # ties share the q-value of the whole tied block
    v = p_clean[o]
    last = np.r_[v[1:] != v[:-1], True]
    blk = np.cumsum(np.r_[True, last[:-1]]) - 1
    q[o] = cm[last][blk]
    return q


def _item_clusters(log: pd.DataFrame, items: tuple[str, ...], item_col: str, notes: list[str]) -> np.ndarray | None:
    """Each item's cluster (its most frequent), or None when the clusters cannot carry a prior (fewer than two,
    or most items alone in theirs, as when the cluster defaulted to the item)."""
    if "cluster" not in log.columns:
        return None
    c = log[[item_col, "cluster"]].dropna().astype(str)
    c = c.groupby(item_col)["cluster"].agg(lambda s: s.value_counts().index[0])
    lab = c.reindex(list(items)).fillna("").to_numpy(dtype=object)
    n = len(pd.unique(lab))
    if n < 2 or n > len(items) / 2:
        notes.append("one prior for all items: the log's clusters " + ("are one" if n < 2 else
                     f"are {n} for {len(items)} items") + " (a benchmark's subjects give each its own error rate)")
        return None
    return lab


@dataclass(frozen=True, repr=False)
class ScreenResult(Result):
    """Screen of every item of a log (see the module docstring).

    ``items``: one row per item of the log, most suspect first: ``item, score, flag, q_value, p_broken,
    p_multiple_correct, p_no_correct, error_type, suggested_key, also_correct, gold, choices, cluster, n_models,
    accuracy, r_pb, a, a_2pl, b_2pl, b_rasch, infit, outfit, strong_choice, strong_share, gold_strong_share,
    agreement`` (``score`` NaN for items answered by one model only; ``choices``: the answers per option, the key
    marked ``*``). ``signals``: the oriented single signals per item (:data:`SIGNALS`) and ``score``.
    ``model``: the answer model's fitted prior shares, concentrations and convergence.
    """

    items: pd.DataFrame
    signals: pd.DataFrame
    fdr: float
    irt_model: str
    a0: float
    abilities: pd.DataFrame
    model: Mapping[str, Any] = field(default_factory=dict)
    skipped: Mapping[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def flagged(self) -> pd.DataFrame:
        return self.items[self.items["flag"]]

    def to_frame(self) -> pd.DataFrame:
        return self.items.copy()

    def to_dict(self) -> dict[str, Any]:
        """The ``mrcstats screen --json`` object: ``{"items": [{"item", "score", "flag", "error_type",
        "suggested_key", "evidence"}], "notes", ...}`` with every item of the log."""
        from mrcstats._jsonout import to_jsonable as json_value

        head = ("item", "score", "flag", "error_type", "suggested_key")
        ev_cols = [c for c in self.items.columns if c not in head]
        out = []
        for r in self.items.to_dict(orient="records"):
            d = {c: json_value(r[c]) for c in head}
            d["flag"] = bool(r["flag"])
            d["evidence"] = {c: json_value(r[c]) for c in ev_cols}
            out.append(d)
        return {"items": out, "notes": list(self.notes), "fdr": self.fdr, "n_flagged": int(self.items["flag"].sum()),
                "flag_rule": "q_value <= fdr; q_value = mean (1 - P(wrong key)) over the items at least as suspect "
                             "(Bayesian FDR)",
                "irt_model": self.irt_model, "a0": self.a0, "model": dict(self.model), "skipped": dict(self.skipped)}

    def summary(self, n: int = 20) -> str:
        it = self.items
        k = int(it["flag"].sum())
        types = it.loc[it["flag"], "error_type"].value_counts()
        lines = [(f"Item screen: {len(it)} items, {k} flagged at Bayesian FDR <= {self.fdr:g}"
                  + (f" ({', '.join(f'{v} {t}' for t, v in types.items())})" if k else "")
                  + f"; score = P(wrong key | answers), abilities from the {self.irt_model.upper()}")]
        cols = ["item", "score", "q_value", "flag", "error_type", "gold", "suggested_key", "choices", "accuracy"]
        cols = [c for c in cols if c in it.columns]
        lines.append(it.head(n)[cols].to_string(index=False, float_format=lambda v: f"{v:.3g}"))
        lines += [f"note: {t}" for t in self.notes]
        lines += [f"skipped: {v} {k_}" for k_, v in self.skipped.items()]
        return "\n".join(lines)


# --------------------------------------------------------------------------- the screen

def _check(log: Any, fdr: float, irt_model: str) -> None:
    if not isinstance(log, pd.DataFrame):
        raise InputError(f"screen: expected a canonical log (pandas DataFrame), got {type(log).__name__}")
    if not (isinstance(fdr, (int, float)) and 0 < fdr < 1):
        raise InputError(f"screen: fdr must lie strictly between 0 and 1, got {fdr!r}")
    if irt_model not in ("1pl", "2pl", "rasch"):
        raise InputError(f"screen: irt_model must be '1pl' or '2pl', got {irt_model!r}")


def _abilities(log: pd.DataFrame, irt_model: str, irt_tol: float, model_col: str, item_col: str, correct_col: str):
    """Stage 1: the response matrix and the IRT fit whose abilities the rest holds fixed."""
    from mrcstats.models.irt import fit_irt, response_matrix

    rm = response_matrix(log, model=model_col, item=item_col, correct=correct_col, where="screen")
    if rm.fit_mask.sum() < 2:
        raise InputError("screen: fewer than two items have both correct and wrong answers; nothing to fit "
                         "abilities on")
    return rm, fit_irt(rm, irt_model, quadrature=11, tol=irt_tol, progress=False, quiet=True)


def _evidence(rm: Any, theta: np.ndarray, a0: float, ch: _Choices | None) -> tuple[dict[str, np.ndarray], dict]:
    """Stage 2: the single signals (module docstring) and the strong models' choice."""
    from mrcstats.stats.irt import rest_scores

    S, N = rm.s.T.copy(), rm.n.T.copy()
    _, _answered, rest = rest_scores(rm)
    sig = _correctness_signals(S, N, theta, a0, rest.T)
    I = S.shape[0]
    strong = {"agree": np.full(I, np.nan), "pair": np.full(I, -1), "share": None}
    if ch is not None:
        share = _strong_share(ch.counts, ch.answers[ch.item], theta)
        chosen = ch.counts.sum(1) > 0
        agree, pair = _alt(share, ch.item, chosen, np.maximum(ch.gold, 0), I)
        has = ch.gold >= 0
        strong = {"agree": np.where(has, agree, np.nan), "pair": np.where(has, pair, -1), "share": share}
    return sig, strong


def _answer_model(rm: Any, ch: _Choices | None, theta: np.ndarray, clusters: np.ndarray | None, shrinkage: float):
    """Stage 3: the answer mixture's posteriors; without choices the wrong answers are one pooled option."""
    from mrcstats.models.answer_mixture import fit_answer_mixture

    if ch is not None:
        X, key, offered, pair = _slots(ch, len(rm.items))
    else:
        S, N = rm.s.T, rm.n.T
        X = np.stack([S, N - S], axis=2)
        key, offered, pair = np.zeros(len(S), int), np.ones((len(S), 2), bool), None
    fit = fit_answer_mixture(X, key, theta, offered=offered, cluster=clusters, shrinkage=shrinkage)
    return fit, X, key, pair


def _choice_text(X: np.ndarray, key: np.ndarray, pair: np.ndarray | None, ch: _Choices | None) -> list[str]:
    """``A:0* B:14 C:0 D:0``: answers per option (all models and trials), the key starred."""
    tot = X.sum(1)
    out = []
    for i in range(len(tot)):
        if pair is None:
            out.append(f"right:{tot[i, 0]:g} wrong:{tot[i, 1]:g}")
            continue
        parts = [f"{ch.option[p]}:{tot[i, k]:g}{'*' if k == key[i] else ''}" for k, p in enumerate(pair[i]) if p >= 0]
        out.append(" ".join(parts))
    return out


def screen(log: pd.DataFrame, *, fdr: float = 0.1, irt_model: str = "2pl", shrinkage: float = 30.0,
           irt_tol: float = 1e-4, progress: bool | None = None, model_col: str = "model", item_col: str = "item",
           correct_col: str = "correct") -> ScreenResult:
    """Rank every item of a canonical log by the posterior probability that it is broken, and say how.

    ``fdr``: flag the items whose Bayesian FDR (``q_value``) is at most this; ``irt_model``: ``"2pl"`` or
    ``"1pl"`` for the abilities; ``shrinkage``: the weight, in items, of the log's overall error rates in each
    cluster's (0: every cluster on its own; large: one rate for all). Deterministic (no simulation).

    Stages: the arguments checked (:func:`_check`), 1 the abilities (:func:`_abilities`), 2 the single signals
    and the strong models' choice (:func:`_evidence`), 3 the answer mixture (:func:`_answer_model`), 4 the item
    table (:func:`_table`, :func:`_signal_frame`, :func:`_add_unscored`), 5 the result (:func:`_result`).
    """
    from mrcstats._progress import progress as bar_of

    _check(log, fdr, irt_model)
    if not (isinstance(shrinkage, (int, float)) and shrinkage >= 0):
        raise InputError(f"screen: shrinkage must be a number >= 0, got {shrinkage!r}")
    bar = bar_of(total=4, desc="screen", disable=None if progress is None else not progress, unit="step")
    notes: list[str] = []
    try:
        rm, fit = _abilities(log, irt_model, irt_tol, model_col, item_col, correct_col)
        notes += list(rm.notes)
        bar.update(1)
        theta = fit.abilities["theta"].to_numpy()
        a0 = float(np.median(fit.items["a"].to_numpy()))
        ch = _choices(log, rm.items, rm.models, model_col, item_col, notes)
        if ch is None:
            notes.append("no pred/gold: the wrong answers are pooled as one option (no error types, no suggested key)")
        sig, strong = _evidence(rm, theta, a0, ch)
        bar.update(1)
        clusters = _item_clusters(log, rm.items, item_col, notes)
        mix, X, key, pair = _answer_model(rm, ch, theta, clusters, shrinkage)
        if not mix.converged:
            notes.append(f"the answer model stopped after {mix.iterations} cycles before its convergence criterion")
        bar.update(1)
        tab = _table(rm, fit, sig, strong, ch, mix, X, key, pair, clusters, a0, fdr)
        sigs = _signal_frame(sig, strong, rm.items, tab["score"].to_numpy(), with_choices=ch is not None)
        tab, sigs = _add_unscored(tab, sigs, log, rm.items, item_col, notes)
        bar.update(1)
    finally:
        bar.close()
    return _result(tab, sigs, fdr, rm, fit, a0, mix, clusters, shrinkage, notes)


def _signal_frame(sig: Mapping[str, np.ndarray], strong: Mapping[str, Any], items: tuple[str, ...],
                  score: np.ndarray, with_choices: bool) -> pd.DataFrame:
    """The single signals per item, oriented higher = more suspect (:data:`SIGNALS`), beside the score; without
    choices no ``agreement``."""
    sigs = pd.DataFrame(_oriented(sig, strong["agree"]), columns=list(SIGNALS))
    if not with_choices:
        sigs = sigs.drop(columns=["agreement"])
    sigs.insert(0, "item", list(items))
    sigs["score"] = score
    return sigs


def _result(tab: pd.DataFrame, sigs: pd.DataFrame, fdr: float, rm: Any, fit: Any, a0: float, mix: Any,
            clusters: np.ndarray | None, shrinkage: float, notes: list[str]) -> ScreenResult:
    """Stage 5: the result - the answer model's parameters, the abilities, what was left out and the notes."""
    model = {"hypotheses": list(HYPOTHESES), "prior": dict(zip(HYPOTHESES, map(float, mix.prior), strict=True)),
             "alpha": mix.alpha, "beta": mix.beta, "shrinkage": float(shrinkage),
             "clusters": len(mix.clusters) if clusters is not None else 1, "loglik": mix.loglik,
             "iterations": mix.iterations, "converged": mix.converged}
    ab = fit.abilities[["model", "theta", "sd"]].copy()
    # items the 2PL leaves out because every model (or none) answered them right are screened all the same: a note,
    # not a skip
    skipped = {k: v for k, v in rm.skipped.items() if "not fitted" not in k}
    notes = [*notes, *(f"{plural(v, 'item')}: {k.split(' (')[0].removeprefix('items ')} - screened; no 2PL slope "
                       "(a_2pl, b_2pl empty)" for k, v in rm.skipped.items() if "not fitted" in k and v)]
    return ScreenResult(tab, sigs, float(fdr), fit.model, a0, ab, model, skipped, tuple(notes))


def _oriented(sig: Mapping[str, np.ndarray], agree: np.ndarray) -> np.ndarray:
    """The single signals as columns in :data:`SIGNALS` order, higher = more suspect."""
    p = np.clip(sig["p"], 0.5 / 1000, 1 - 0.5 / 1000)
    return np.column_stack([-np.log(p / (1 - p)), -sig["r_pb"], -sig["a"], np.log(sig["outfit"]),
                            np.log(sig["infit"]), np.where(np.isfinite(agree), agree, -1.0)])


def _table(rm, fit, sig, strong, ch, mix, X, key, pair, clusters, a0, fdr) -> pd.DataFrame:
    """Stage 4: the item table - posteriors, flags, error types, suggested keys and the evidence."""
    post = mix.posterior
    score = post[:, 1]
    q = _bayes_fdr(1.0 - score)
    err = post[:, 1:]
    etype = np.asarray(ERROR_TYPES, dtype=object)[np.argmax(err, axis=1)]
    I = len(rm.items)
    tab = pd.DataFrame({"item": list(rm.items), "score": score, "flag": q <= fdr, "q_value": q,
                        "p_broken": 1.0 - post[:, 0], "p_multiple_correct": post[:, 2], "p_no_correct": post[:, 3]})
    na = pd.Series(pd.NA, index=tab.index, dtype="string")
    tab["error_type"] = pd.Series(etype, dtype="string") if ch is not None else na.copy()
    tab["suggested_key"] = na.copy()
    tab["also_correct"] = na.copy()
    tab["gold"] = na.copy()
    if ch is not None:
        has = ch.gold >= 0
        tab.loc[has, "gold"] = ch.option[ch.gold[has]]
        kb = np.argmax(mix.key_posterior, axis=1)
        pb = np.argmax(mix.pair_posterior, axis=1)
        kp, pp = pair[np.arange(I), kb], pair[np.arange(I), pb]
        ok = has & (kp >= 0) & (mix.key_posterior[np.arange(I), kb] > 0)
        tab.loc[ok, "suggested_key"] = ch.option[kp[ok]]
        ok = has & (pp >= 0) & (np.argmax(err, axis=1) == 1)
        tab.loc[ok, "also_correct"] = ch.option[pp[ok]]
    tab["choices"] = _choice_text(X, key, pair, ch)
    tab["cluster"] = pd.Series(clusters if clusters is not None else [pd.NA] * I, dtype="string")
    tab["n_models"] = (rm.n.T > 0).sum(1)
    mml = fit.items.set_index("item")
    tab["accuracy"] = sig["p"]
    tab["r_pb"] = sig["r_pb"]
    tab["a"] = sig["a"]
    tab["a_2pl"] = mml["a"].reindex(tab["item"]).to_numpy()
    tab["b_2pl"] = mml["b"].reindex(tab["item"]).to_numpy()
    tab["b_rasch"] = -sig["rasch_d"] / a0
    tab["infit"] = sig["infit"]
    tab["outfit"] = sig["outfit"]
    tab["strong_choice"] = na.copy()
    tab["strong_share"] = np.nan
    tab["gold_strong_share"] = np.nan
    tab["agreement"] = strong["agree"]
    if ch is not None:
        sp, share = strong["pair"], strong["share"]
        ok = sp >= 0
        tab.loc[ok, "strong_choice"] = ch.option[sp[ok]]
        tab.loc[ok, "strong_share"] = share[sp[ok]]
        has = ch.gold >= 0
        tab.loc[has, "gold_strong_share"] = share[ch.gold[has]]
    return tab


def _add_unscored(tab: pd.DataFrame, sigs: pd.DataFrame, log: pd.DataFrame, items: tuple[str, ...], item_col: str,
                  notes: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Items answered by one model only: listed without a score; the table sorted most suspect first."""
    all_items = pd.Index(pd.unique(log[item_col].astype(str)))
    missing = all_items.difference(pd.Index(items))
    if len(missing):
        extra = pd.DataFrame({"item": list(missing), "score": np.nan, "flag": False, "q_value": np.nan})
        tab = pd.concat([tab, extra], ignore_index=True)
        tab["flag"] = tab["flag"].astype(bool)
        notes.append(f"{plural(len(missing), 'item')} answered by one model only are listed without a score")
    o = np.lexsort((np.arange(len(tab)), -np.nan_to_num(tab["score"].to_numpy(float), nan=-np.inf)))
    return tab.iloc[o].reset_index(drop=True), sigs


def review_table(res: ScreenResult, log: pd.DataFrame, top: int = 0, item_col: str = "item") -> pd.DataFrame:
    """The flagged items (and the next ones up to ``top`` rows in all) for a person to judge: rank, item, score,
    q_value, error_type, gold, suggested_key, also_correct, choices, cluster, the item's ``question`` and
    ``options`` where the log has them, and the empty columns :data:`REVIEW_COLUMNS` (``verdict``: keep, rekey or
    drop; ``new_key`` for rekey; who, when, why), read back by :func:`mrcstats.io.relabel.apply_verdicts`."""
    it = res.items.reset_index(drop=True)
    n = max(int(it["flag"].sum()), int(top))
    head = it.head(n)
    cols = ["item", "score", "q_value", "flag", "error_type", "gold", "suggested_key", "also_correct", "choices",
            "p_broken", "cluster"]
    out = head[[c for c in cols if c in head.columns]].copy()
    out.insert(0, "rank", np.arange(1, len(out) + 1))
    for c in ("question", "options"):
        if c in log.columns:
            txt = log[[item_col, c]].dropna().drop_duplicates(item_col).set_index(item_col)[c].astype("string")
            out[c] = out["item"].map(txt)
    for c in REVIEW_COLUMNS:
        out[c] = ""
    return out.reset_index(drop=True)


# --------------------------------------------------------------------------- validation by moving keys

def inject_key_errors(log: pd.DataFrame, k: int, seed: int = 0, *, model_col: str = "model",
                      item_col: str = "item") -> tuple[pd.DataFrame, pd.DataFrame]:
    """Move the key of ``k`` random items to another of their options, uniformly, and recompute ``correct``
    from each row's ``pred`` (:func:`mrcstats.io.relabel.rekey`: an empty ``pred`` keeps the ``correct`` it had).

    An item's options are those of the answer model (module docstring): so the moved key is, as on real
    mis-keyed items, mostly an option the models do not choose, while the old key is the one the strong models
    converge on. Returns the new log and the injected items ``item, old_key, new_key``. Only items with a key
    and another option can be injected; asking for more is an error.
    """
    if "pred" not in log.columns or "gold" not in log.columns:
        raise InputError("validate: the log needs 'pred' and 'gold' columns to move keys (the models' extracted "
                         "answers and the gold answer); without them the screen cannot be validated by injection")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise InputError(f"validate: K must be a positive whole number of items, got {k!r}")
    from mrcstats.models.irt import response_matrix

    rm = response_matrix(log, model=model_col, item=item_col, where="validate")
    ch = _choices(log, rm.items, rm.models, model_col, item_col, [])
    if ch is None:
        raise InputError("validate: the log's 'pred' or 'gold' column is empty; cannot move keys")
    n_opt = np.bincount(ch.item, minlength=len(rm.items))
    elig = np.flatnonzero((ch.gold >= 0) & (n_opt >= 2))
    if k > len(elig):
        raise InputError(f"validate: K = {k} but only {plural(len(elig), 'item')} have a key and another option; "
                         "choose a smaller K")
    rng = seed_rng(seed)
    pick = np.sort(rng.choice(elig, int(k), replace=False))
    starts = np.searchsorted(ch.item, pick, side="left")
    new = np.empty(len(pick), int)
    for t, (i, a) in enumerate(zip(pick, starts, strict=True)):
        others = [p for p in range(a, a + n_opt[i]) if p != ch.gold[i]]
        new[t] = others[int(rng.integers(len(others)))]
    items = np.asarray(rm.items)[pick]
    inj = pd.DataFrame({"item": items, "old_key": ch.option[ch.gold[pick]], "new_key": ch.option[new]})
    out = rekey(log, dict(zip(inj["item"], inj["new_key"], strict=True)), item_col)
    return out, inj


@dataclass(frozen=True, repr=False)
class ScreenValidation(Result):
    """Power of the screen on the user's own log: ``k`` keys moved (``injected``: item, old_key, new_key), the
    screen rerun, and per signal (``score`` first) the ROC AUC and precision at ``k`` (``metrics``).
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
                "notes": list(self.notes)}

    def summary(self) -> str:
        d = self.to_dict()
        lines = [(f"Screen validation: {self.k} keys moved to another option (seed {self.seed}); "
                 f"{d['flagged']} items flagged at Bayesian FDR <= {self.result.fdr:g}, "
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
    res = screen(bad, progress=progress, model_col=model_col, item_col=item_col, **kwargs)
    sig = res.signals
    lab = sig["item"].isin(set(inj["item"])).to_numpy()
    rows, curves = [], []
    for name in ["score", *[c for c in SIGNALS if c in sig.columns]]:
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
