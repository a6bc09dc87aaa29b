"""Computerised adaptive testing (CAT) from a calibrated item bank.

**Item bank** (:func:`calibrate`, :class:`ItemBank`): the 2PL (or 1PL) of
:func:`mrcstats.models.irt.fit_irt` on a multi-model log, with the models as respondents and
``theta ~ N(0, 1)`` over them (the ability scale). Every item of the log is in the bank:
fitted items with ``a_i, d_i`` and their standard errors; items without variation on the
calibration models (every / no model correct) with their constant share correct ``p_i``. Items
the screen flags (:func:`mrcstats.stats.screen.screen`: wrong keys) are left out, with a note.
The **test characteristic curve** maps ability to expected full-benchmark accuracy::

    TCC(theta) = (1 / N) sum_i P_i(theta),   P_i(theta) = 1 / (1 + exp(-(a_i theta + d_i)))

(``P_i = p_i`` for the unfitted items; Lord 1980, *Applications of IRT to Practical Testing
Problems*, ch. 4).

**Adaptive run** (:func:`run_cat`): after each answer the ability is the EAP under the
``N(0, 1)`` prior on a fixed grid of :data:`GRID` points on ``[-6, 6]`` (Bock & Mislevy 1982),
``ability_se`` its posterior SD. The next item maximises the Fisher information
``I_i(theta) = a_i^2 P_i (1 - P_i)`` at the current EAP (Lord 1980, ch. 10; Fluid Benchmarking,
Hofmann et al. 2025), with

* content balancing (Kingsbury & Zara 1989): the next item comes from the content group (the
  bank's ``content`` column, e.g. the subject) furthest below its share of the bank,
  ``argmax_c  share_c (t + 1) - asked_c``;
* exposure control by the randomesque rule (Kingsbury & Zara 1989): one of the ``topk`` most
  informative items of that group, uniformly, drawn from :func:`mrcstats._seeds.stream`
  ``(seed, "cat", "select", t)`` -- so a run is a function of the seed and the answers, and a
  resumed run asks the same items as an uninterrupted one.

It stops when the SE of the predicted accuracy (with the model-misfit variance below, when the bank has it)
is at most ``target_se`` or after ``max_items``.

**Predicted full accuracy** (:func:`predict_accuracy`; p-IRT, Polo et al. 2024, eq. 4): the
answers of the asked items plus the expected answers of the others,
``A = (sum_{asked} y_i + sum_{not asked} P_i(theta)) / N``, as the posterior mean over theta.
Its interval propagates the calibration error by simulation: in each of ``draws`` draws the
item parameters are drawn from their sampling distribution (``log a_i ~ N(log a_hat_i,
(se_a_i / a_hat_i)^2)``, ``d_i ~ N(d_hat_i, se_d_i^2)``, independent: the SEs are the item
blocks of the observed information), the ability from its posterior under those parameters
(on the grid), and the not-asked items' answers from their Bernoulli sum (normal approximation
``N(sum P_i, sum P_i (1 - P_i))``); the interval is the ``(1 - level) / 2`` quantiles of ``A``
(a parametric-bootstrap / posterior-predictive interval). ``se`` is the SD of the draws.

**Model misfit** (:func:`kfold_misfit`): a new model is not a draw from the one-dimensional
bank; its accuracy on the items not asked can differ from what its answers to the asked items
predict by more than the finite-item noise (it is relatively stronger on some subjects or on
hard items). The bank measures that **out of sample** by a K-fold refit over its calibration
models (:data:`MISFIT_FOLDS` folds by default): the models are split at random (``seed``) into
``K`` folds; for each fold the bank is refitted without it, and each held-out model ``j`` gets an
adaptive run (:func:`run_cat`'s selection) on its own answers under that refit. After ``n`` items
(:data:`MISFIT_N`) the residual ``r_j(n) = A_j - A_hat_j(n)`` (actual accuracy over ``j``'s answered
items minus the prediction) and the nominal predictive variance ``v_j(n)`` (:func:`predict_accuracy`'s
``se^2``: ability, calibration error, not-asked answers) are recorded. The misfit variance is the
excess (a method-of-moments variance component, floored at 0; the residuals' mean square about 0,
so a common bias counts as misfit too)::

    tau^2(n) = max(0, (1 / m) sum_j r_j(n)^2 - (1 / m) sum_j v_j(n)),   df = m

(``m`` held-out calibration models with at least ``n`` answered items). In the interval each draw
adds ``N(0, tau^2(n))`` for the ``n`` items asked, ``tau^2`` interpolated linearly in ``log n``
between the stored counts and constant beyond them (the rule :data:`MISFIT_RULE`); the point
prediction is unchanged. A model being predicted never enters its own estimate: the calibration
models are held out from the refits, and a new model is not in the bank at all.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mrcstats._repr import Result
from mrcstats._seeds import check_seed, stream
from mrcstats._words import plural
from mrcstats.errors import InputError

__all__ = ["BANK_FORMAT", "GRID", "INTERVAL_METHOD", "MISFIT_FOLDS", "MISFIT_N", "MISFIT_RULE", "CatResult",
           "ItemBank", "Prediction", "calibrate", "fisher_information", "kfold_misfit", "load_bank", "next_item",
           "predict_accuracy", "replay", "run_cat"]

#: the ``format`` field of a bank file
BANK_FORMAT = "mrcstats-item-bank"
_BANK_VERSION = 1
#: grid of abilities for the EAP and the posterior draws
GRID: np.ndarray = np.linspace(-6.0, 6.0, 241)
INTERVAL_METHOD = ("simulation: item parameters drawn from N(estimate, SE) (log a, d), ability from its posterior "
                   "under each draw, not-asked answers from their Bernoulli sum (normal approximation)")
#: item counts at which the bank estimates the model-misfit variance (:func:`kfold_misfit`)
MISFIT_N: tuple[int, ...] = (25, 50, 100, 200)
#: default number of folds of the out-of-sample misfit estimate (0 in :func:`calibrate`: none)
MISFIT_FOLDS = 5
#: how ``tau^2`` between and beyond the stored counts is found (named in the interval method)
MISFIT_RULE = "linear in log n between the stored item counts, constant beyond them"
_MISFIT_METHOD = ("model misfit N(0, tau^2(n)) added: tau^2 = out-of-sample excess of the calibration models' "
                  "prediction residuals over their nominal variance ({folds}-fold refit), " + MISFIT_RULE)

_COLS = ("item", "a", "d", "se_a", "se_d", "p", "fitted", "content")


def _expit(x: np.ndarray) -> np.ndarray:
    from scipy.special import expit

    return expit(x)


# --------------------------------------------------------------------------- the bank

@dataclass(frozen=True, repr=False)
class ItemBank(Result):
    """A calibrated item bank (see the module docstring).

    ``items``: one row per item, ``item, a, d, se_a, se_d, p, fitted, content`` and, where known, ``prompt``
    (the item text), ``options`` (a JSON list) and ``gold``; unfitted items have ``a = 0`` and
    ``d = logit(p)`` clipped (a constant ``P = p``). ``abilities``: the calibration models' EAP abilities
    (the scale: ``theta ~ N(0, 1)`` over them). ``excluded``: items left out (``item, reason``).
    ``provenance``: data hash, mrcstats version, date, IRT model and fit details.
    """

    items: pd.DataFrame
    abilities: pd.DataFrame
    irt_model: str
    excluded: pd.DataFrame
    provenance: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    #: the out-of-sample model-misfit variance (:func:`kfold_misfit`): ``{"n": [...], "var": [...], "df": [...],
    #: "folds": K, ...}``; empty for a bank without it (then no misfit term)
    misfit: Mapping[str, Any] = field(default_factory=dict)

    @property
    def n_items(self) -> int:
        return len(self.items)

    @property
    def has_texts(self) -> bool:
        return "prompt" in self.items.columns and bool(self.items["prompt"].notna().any())

    def params(self) -> tuple[np.ndarray, np.ndarray]:
        """``(a, d)`` of every item (unfitted: ``a = 0``, ``d = logit(p)``)."""
        return self.items["a"].to_numpy(float), self.items["d"].to_numpy(float)

    def variances(self) -> tuple[np.ndarray, np.ndarray]:
        """``(se_a^2, se_d^2)`` of every item: the calibration error of the expected response functions."""
        return self.items["se_a"].to_numpy(float) ** 2, self.items["se_d"].to_numpy(float) ** 2

    def misfit_var(self, n: int) -> float:
        """``tau^2(n)``: the model-misfit variance of the predicted accuracy after ``n`` items (0 without an
        estimate); linear in ``log n`` between the estimated counts, the end values outside."""
        if not self.misfit or not self.misfit.get("n"):
            return 0.0
        ns = np.log(np.asarray(self.misfit["n"], float))
        vs = np.asarray(self.misfit["var"], float)
        return float(np.interp(math.log(max(int(n), 1)), ns, vs))

    def tcc(self, theta: Sequence[float] | np.ndarray | float) -> np.ndarray:
        """The test characteristic curve: expected full accuracy ``mean_i P_i(theta)`` at each ``theta``."""
        th = np.atleast_1d(np.asarray(theta, float))
        a, d = self.params()
        return _expit(th[:, None] * a[None, :] + d[None, :]).mean(axis=1)

    def to_frame(self) -> pd.DataFrame:
        return self.items.copy()

    def to_dict(self) -> dict[str, Any]:
        from mrcstats._jsonout import to_jsonable

        items = [{k: to_jsonable(v) for k, v in r.items()} for r in self.items.to_dict(orient="records")]
        grid = np.linspace(-4, 4, 33)
        return {"format": BANK_FORMAT, "format_version": _BANK_VERSION, "irt_model": self.irt_model,
                "ability_scale": "theta ~ N(0, 1) over the calibration models (EAP abilities below)",
                "n_items": self.n_items, "items": items,
                "abilities": [{k: to_jsonable(v) for k, v in r.items()}
                              for r in self.abilities.to_dict(orient="records")],
                "tcc": {"theta": [float(x) for x in grid], "accuracy": [float(x) for x in self.tcc(grid)],
                        "definition": "mean over the bank's items of P(correct | theta)"},
                "excluded": self.excluded.to_dict(orient="records"),
                "misfit": {k: to_jsonable(v) for k, v in self.misfit.items()},
                "provenance": dict(self.provenance), "notes": list(self.notes)}

    def save(self, path: str | os.PathLike) -> None:
        """Write the bank as one JSON file (atomically)."""
        from mrcstats._files import write_text_atomic

        write_text_atomic(path, json.dumps(self.to_dict(), ensure_ascii=False, allow_nan=False, indent=1) + "\n")

    def summary(self) -> str:
        it = self.items
        fitted = int(it["fitted"].sum())
        pv = self.provenance
        lines = [(f"Item bank: {self.n_items} items ({fitted} fitted by the {self.irt_model.upper()}, "
                 f"{self.n_items - fitted} without variation at a constant share correct) from "
                 f"{plural(len(self.abilities), 'model')}; {len(self.excluded)} excluded"),
                 (f"  data {pv.get('data_sha256', '?')[:16]}, mrcstats {pv.get('mrcstats_version')}, "
                 f"{pv.get('created')}")]
        if fitted:
            f = it[it["fitted"]]
            lines.append(f"  a: median {f['a'].median():.3f}; b = -d/a: median {(-f['d'] / f['a']).median():.3f}")
        th = np.array([-2.0, -1.0, 0.0, 1.0, 2.0])
        lines.append("  expected accuracy at theta -2..2: " + ", ".join(f"{x:.3f}" for x in self.tcc(th)))
        n_content = it["content"].nunique()
        lines.append(f"  content groups: {n_content}" + ("" if n_content > 1 else " (no content balancing)"))
        if self.misfit:
            lines.append("  model misfit SD of the predicted accuracy at n = "
                         + ", ".join(f"{n}: {math.sqrt(v):.4f}" for n, v in zip(self.misfit["n"], self.misfit["var"]))
                         + f" ({self.misfit.get('folds')}-fold out of sample, {self.misfit.get('models')} "
                           "calibration models)")
        lines.append("  texts: " + ("yes" if self.has_texts else "no (an endpoint run needs --tasks TASKFILE)"))
        lines.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(lines)


def _log_hash(log: pd.DataFrame, cols: Sequence[str]) -> str:
    h = hashlib.sha256()
    h.update(pd.util.hash_pandas_object(log[list(cols)].astype(str), index=False).to_numpy().tobytes())
    return h.hexdigest()


def calibrate(log: pd.DataFrame, *, irt_model: str = "auto", content: str | None = None, screen: bool = True,
              screen_fdr: float = 0.1, texts: Mapping[str, Mapping[str, Any]] | None = None,
              quadrature: int = 11, tol: float = 1e-4, data_sha256: str | None = None,
              progress: bool | None = None, model_col: str = "model", item_col: str = "item",
              correct_col: str = "correct", folds: int = MISFIT_FOLDS, seed: int = 0) -> ItemBank:
    """Calibrate an item bank on a multi-model canonical log (see the module docstring).

    ``irt_model``: ``"2pl"``, ``"1pl"`` (Rasch) or ``"auto"``: the 2PL with at least
    :data:`mrcstats.stats.irt.IRT_MIN_RESPONDENTS` calibration models, else the 1PL (with fewer respondents the
    slopes are poorly determined and maximum-information selection capitalises on their errors: van der
    Linden & Glas 2000, *Applied Measurement in Education* 13: 35-53).
    ``content``: an item-level column to balance over (default: ``category``, else ``cluster`` when it
    groups items; none when every item is its own group). ``screen``: leave out the items the screen
    flags at ``screen_fdr``. ``texts``: per item ``{"prompt", "options", "gold"}`` (else the log's
    ``prompt``/``options``/``gold`` columns when present). ``data_sha256``: the hash of the data files
    (the CLI passes it; by default a hash of the log's model, item and correctness columns).
    ``folds``: the K of the out-of-sample model-misfit estimate (:func:`kfold_misfit`, ``seed``: its fold split
    and adaptive runs); 0: none (faster; the bank's intervals then leave out how a new model differs from it).
    """
    if not (isinstance(folds, (int, np.integer)) and not isinstance(folds, bool) and (folds == 0 or folds >= 2)):
        raise InputError(f"cat calibrate: --folds must be 0 (no model-misfit term) or a whole number >= 2, "
                         f"got {folds!r}")
    seed = check_seed(seed, "cat calibrate seed")
    from mrcstats import __version__
    from mrcstats.models.irt import fit_irt, response_matrix

    rm = response_matrix(log, model=model_col, item=item_col, correct=correct_col, where="cat calibrate")
    notes = list(rm.notes)
    excluded: list[dict[str, str]] = []
    for why, k in rm.skipped.items():
        if "left out" in why:
            notes.append(f"{k} {why}")
    flagged: set[str] = set()
    if screen:
        from mrcstats.stats.screen import screen as run_screen

        try:
            sc = run_screen(log, fdr=screen_fdr, progress=progress, model_col=model_col, item_col=item_col,
                            correct_col=correct_col)
        except InputError as exc:
            notes.append(f"screen not run ({exc}); no items excluded")
        else:
            flagged = set(sc.flagged["item"].astype(str))
            excluded += [{"item": i, "reason": f"flagged by the screen (wrong key; q <= {screen_fdr:g})"}
                         for i in sorted(flagged)]
            if flagged:
                notes.append(f"{len(flagged)} item(s) flagged by the screen (wrong keys, FDR {screen_fdr:g}) "
                             "excluded: they are never asked and not part of the predicted accuracy")
    if flagged:
        keep = np.array([i not in flagged for i in rm.items])
        from mrcstats.models.irt import ResponseMatrix

        rm = ResponseMatrix(rm.models, tuple(np.asarray(rm.items)[keep]), rm.s[:, keep], rm.n[:, keep],
                            rm.fit_mask[keep], dict(rm.skipped), rm.notes)
    key = str(irt_model).lower()
    if key == "auto":
        from mrcstats.stats.irt import IRT_MIN_RESPONDENTS

        key = "2pl" if len(rm.models) >= IRT_MIN_RESPONDENTS else "1pl"
        if key == "1pl":
            notes.append(f"1PL (Rasch) chosen: {len(rm.models)} calibration models, fewer than {IRT_MIN_RESPONDENTS} "
                         "for reliable 2PL slopes (give irt_model='2pl' to force it)")
    fit = fit_irt(rm, key, quadrature=quadrature, tol=tol, progress=progress, quiet=True)
    par = fit.items.set_index("item")
    items = pd.DataFrame({"item": list(rm.items), "p": rm.p})
    items["fitted"] = items["item"].isin(par.index)
    items = items.join(par[["a", "d", "se_a", "se_d"]], on="item")
    nf = ~items["fitted"]
    pc = items.loc[nf, "p"].clip(1e-4, 1 - 1e-4)
    items.loc[nf, "a"] = 0.0
    items.loc[nf, "d"] = np.log(pc / (1 - pc))
    items.loc[nf, ["se_a", "se_d"]] = 0.0
    bad = items["fitted"] & ~(np.isfinite(items["se_a"]) & np.isfinite(items["se_d"]))
    if bad.any():
        notes.append(f"{int(bad.sum())} fitted item(s) without a finite SE: their calibration error is taken as 0")
        items.loc[bad, ["se_a", "se_d"]] = items.loc[bad, ["se_a", "se_d"]].fillna(0.0)
    # per-item attributes: content group, texts
    first = log.drop_duplicates(item_col).set_index(log.drop_duplicates(item_col)[item_col].astype(str))
    if content is None:
        for cand in ("category", "cluster"):
            if cand in log.columns and 1 < log[cand].nunique() < len(rm.items):
                content = cand
                break
    if content is not None:
        if content not in log.columns:
            raise InputError(f"cat calibrate: the log has no column {content!r} for the content groups "
                             f"(columns: {', '.join(map(str, log.columns[:15]))})")
        per_item = log.groupby(log[item_col].astype(str))[content].nunique(dropna=False)
        if (per_item > 1).any():
            ex = per_item[per_item > 1].index[0]
            raise InputError(f"cat calibrate: content column {content!r} is not constant per item (item {ex!r} has "
                             f"{int(per_item[ex])} values); give an item-level column such as the subject")
        items["content"] = first[content].reindex(items["item"]).astype(str).to_numpy()
    else:
        items["content"] = "all"
    for col in ("prompt", "options", "gold"):
        if texts is not None:
            vals = [texts.get(i, {}).get(col) for i in items["item"]]
        elif col in log.columns:
            vals = list(first[col].reindex(items["item"]))
        else:
            continue
        vals = [None if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA else
                (json.dumps(list(v), ensure_ascii=False) if col == "options" and not isinstance(v, str) else str(v))
                for v in vals]
        if any(v is not None for v in vals):
            items[col] = vals
    items = items[[*_COLS, *[c for c in ("prompt", "options", "gold") if c in items.columns]]]
    prov = {"data_sha256": data_sha256 or _log_hash(log, (model_col, item_col, correct_col)),
            "mrcstats_version": __version__,
            "created": _dt.datetime.now(_dt.UTC).date().isoformat(),
            "irt": {"model": fit.model, "quadrature": fit.quadrature, "prior_sd": fit.prior_sd,
                    "converged": fit.converged, "iterations": fit.iterations, "se_method": fit.se_method,
                    "loglik": fit.loglik},
            "models": list(rm.models), "content": content, "screen": bool(screen),
            "screen_fdr": screen_fdr if screen else None}
    abil = fit.abilities[["model", "theta", "sd"]].reset_index(drop=True)
    bank = ItemBank(items.reset_index(drop=True), abil, fit.model, pd.DataFrame(excluded, columns=["item", "reason"]),
                    prov, tuple(notes))
    if folds:
        mf = kfold_misfit(log, bank, folds=folds, seed=seed, progress=progress, model_col=model_col,
                          item_col=item_col, correct_col=correct_col)
        if not mf:
            why = (f"no model-misfit term: {len(abil)} calibration model(s), the K-fold estimate needs at least 4 "
                   "(intervals: finite items and calibration error only)")
            bank = replace(bank, notes=(*bank.notes, why))
        bank = replace(bank, misfit=mf)
    else:
        why = ("no model-misfit term (folds = 0): intervals cover the finite items and the calibration error only, "
               "not how a new model differs from the bank")
        bank = replace(bank, notes=(*bank.notes, why))
    return bank


def kfold_misfit(log: pd.DataFrame, bank: ItemBank, *, folds: int = MISFIT_FOLDS, seed: int = 0,
                 counts: Sequence[int] = MISFIT_N, topk: int = 5, draws: int = 200, progress: bool | None = None,
                 model_col: str = "model", item_col: str = "item", correct_col: str = "correct") -> dict[str, Any]:
    """The out-of-sample model-misfit variance ``tau^2(n)`` of the predicted accuracy (module docstring).

    ``log``: the calibration log ``bank`` was fitted on (its rows of the bank's items and calibration models
    are used). The calibration models are split into ``folds`` folds (a permutation from
    :func:`mrcstats._seeds.stream` ``(seed, "cat", "misfit", "folds")``; leave one out when there are fewer
    models than folds); for each fold the bank is refitted on the other models (:func:`calibrate` with the
    bank's IRT model and content column, no screen: the bank's exclusions stay out) and each held-out model
    ``j`` is run adaptively on its own answers (:func:`run_cat`'s selection with ``seed`` and ``topk``, over the
    items ``j`` answered; answer = share correct >= 0.5, as in the calibration). After each ``n`` in ``counts``
    the residual ``r_j(n)`` = ``j``'s accuracy over its answered items minus the prediction, and the nominal
    variance ``v_j(n)`` = :func:`predict_accuracy`'s ``se^2`` (``draws`` draws, no misfit term).
    ``tau^2(n) = max(0, mean_j r_j(n)^2 - mean_j v_j(n))`` with ``df = m`` residuals (a count needs 3).

    Returns ``{"n", "var", "df", "residual_mean", "residual_rms", "nominal_sd", "models", "folds", "seed",
    "method", "residuals"}`` (``residuals``: per model and count, ``[model, n, r, sqrt(v)]``), or ``{}`` with
    fewer than 4 calibration models.
    """
    from mrcstats._progress import progress as bar
    from mrcstats.models.irt import response_matrix

    if not (isinstance(folds, (int, np.integer)) and not isinstance(folds, bool) and folds >= 2):
        raise InputError(f"cat calibrate: folds must be a whole number >= 2 (0 in calibrate: no misfit term), "
                         f"got {folds!r}")
    seed = check_seed(seed, "cat calibrate seed")
    if seed is None:
        raise InputError("cat calibrate: the model-misfit folds need a seed (the estimate must be reproducible); "
                         "give e.g. 0")
    counts = sorted({int(c) for c in counts if int(c) >= 1})
    models = [str(m) for m in bank.abilities["model"]]
    M = len(models)
    if M < 4:
        return {}
    bank_items = bank.items["item"].astype(str)
    content = bank.provenance.get("content")
    keep = [model_col, item_col, correct_col] + ([content] if content and content in log.columns else [])
    sub_log = log.loc[log[model_col].astype(str).isin(models) & log[item_col].astype(str).isin(set(bank_items)),
                      keep]
    rm = response_matrix(sub_log, model=model_col, item=item_col, correct=correct_col, where="cat misfit")
    row_of = {str(m): i for i, m in enumerate(rm.models)}
    col_of = {str(it): i for i, it in enumerate(rm.items)}
    K = min(int(folds), M)
    perm = stream(seed, "cat", "misfit", "folds").permutation(M)
    fold_of = np.empty(M, int)
    fold_of[perm] = np.arange(M) % K
    res_r: dict[int, list[float]] = {c: [] for c in counts}
    res_v: dict[int, list[float]] = {c: [] for c in counts}
    per_model: list[list[Any]] = []
    pb = bar(total=K + M, desc="cat calibrate: misfit folds", unit="step",
             disable=None if progress is None else not progress)
    try:
        for k in range(K):
            held = [m for m, f in zip(models, fold_of) if f == k]
            train = sub_log[~sub_log[model_col].astype(str).isin(held)]
            fb = calibrate(train, irt_model=bank.irt_model, content=content if content in keep else None,
                           screen=False, folds=0, progress=False, data_sha256="misfit-fold", model_col=model_col,
                           item_col=item_col, correct_col=correct_col)
            pb.update(1)
            fitems = fb.items["item"].astype(str).to_numpy()
            for m in held:
                i = row_of.get(m)
                cols = np.array([col_of.get(it, -1) for it in fitems])
                seen = cols >= 0
                if i is not None:
                    seen &= rm.n[i, np.where(seen, cols, 0)] > 0
                if i is None or seen.sum() < 2:
                    pb.update(1)
                    continue
                share = rm.s[i, cols[seen]] / rm.n[i, cols[seen]]
                it = fb.items[seen].reset_index(drop=True)
                sub = replace(fb, items=it, misfit={})
                ys = (share >= 0.5).astype(float)
                ans = dict(zip(it["item"].astype(str), ys.astype(bool)))
                run = run_cat(sub, ans.__getitem__, model=m, max_items=min(max(counts), len(it) - 1), seed=seed,
                              topk=topk, draws=50, misfit=False)
                pos = {x: j for j, x in enumerate(it["item"].astype(str))}
                asked = np.array([pos[x] for x in run.trace["item"].astype(str)], int)
                truth = float(share.mean())
                for c in counts:
                    if c > len(asked):
                        continue
                    pr = predict_accuracy(sub, asked[:c], ys[asked[:c]], draws=draws, seed=seed, misfit=False)
                    res_r[c].append(truth - pr.accuracy)
                    res_v[c].append(pr.se ** 2)
                    per_model.append([m, c, truth - pr.accuracy, pr.se])
                pb.update(1)
    finally:
        pb.close()
    out: dict[str, Any] = {"n": [], "var": [], "df": [], "residual_mean": [], "residual_rms": [], "nominal_sd": []}
    for c in counts:
        r, v = np.asarray(res_r[c]), np.asarray(res_v[c])
        if len(r) < 3:
            continue
        out["n"].append(c)
        out["var"].append(max(0.0, float(np.mean(r ** 2) - np.mean(v))))
        out["df"].append(len(r))
        out["residual_mean"].append(float(r.mean()))
        out["residual_rms"].append(float(np.sqrt(np.mean(r ** 2))))
        out["nominal_sd"].append(float(np.sqrt(np.mean(v))))
    if not out["n"]:
        return {}
    return out | {"models": M, "folds": K, "seed": seed, "draws": int(draws), "topk": int(topk),
                  "method": _MISFIT_METHOD.format(folds=K), "residuals": per_model}


def load_bank(path: str | os.PathLike) -> ItemBank:
    """Read and validate a bank file written by :meth:`ItemBank.save`."""
    p = Path(path)
    from mrcstats.io.files import read_text

    text = read_text(p, "item bank")
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"item bank {p}: not JSON ({exc.msg} at line {exc.lineno}); give a file written by "
                         "`mrcstats cat calibrate --out`") from None
    if not isinstance(obj, dict) or obj.get("format") != BANK_FORMAT:
        raise InputError(f"item bank {p}: not an mrcstats item bank (no \"format\": \"{BANK_FORMAT}\"); give a file "
                         "written by `mrcstats cat calibrate --out`")
    if obj.get("format_version") != _BANK_VERSION:
        raise InputError(f"item bank {p}: format version {obj.get('format_version')!r}, this mrcstats reads "
                         f"{_BANK_VERSION}; recalibrate with this version")
    rows = obj.get("items")
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        raise InputError(f"item bank {p}: \"items\" must be a non-empty list of objects")
    for k, r in enumerate(rows):
        miss = [c for c in _COLS if c not in r]
        if miss:
            raise InputError(f"item bank {p}, items[{k}] (item {r.get('item')!r}): missing {', '.join(miss)}")
        for c in ("a", "d", "se_a", "se_d", "p"):
            v = r[c]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise InputError(f"item bank {p}, items[{k}] (item {r['item']!r}): {c} = {v!r} is not a finite "
                                 "number; the file is damaged: recalibrate")
        if r["a"] < 0 or r["se_a"] < 0 or r["se_d"] < 0 or not 0 <= r["p"] <= 1:
            raise InputError(f"item bank {p}, items[{k}] (item {r['item']!r}): a, se_a, se_d must be >= 0 and p in "
                             "[0, 1]; the file is damaged: recalibrate")
    items = pd.DataFrame(rows)
    items["item"] = items["item"].astype(str)
    dup = items["item"].duplicated()
    if dup.any():
        raise InputError(f"item bank {p}: item {items.loc[dup, 'item'].iloc[0]!r} appears twice")
    items["fitted"] = items["fitted"].astype(bool)
    items["content"] = items["content"].astype(str)
    abil = pd.DataFrame(obj.get("abilities") or [], columns=["model", "theta", "sd"])
    exc = pd.DataFrame(obj.get("excluded") or [], columns=["item", "reason"])
    mf = obj.get("misfit") or {}
    if mf:
        ns, vs = mf.get("n"), mf.get("var")
        ok = (isinstance(ns, list) and isinstance(vs, list) and len(ns) == len(vs) and len(ns) > 0
              and all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in ns)
              and all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0
                      for x in vs) and list(ns) == sorted(set(ns))
              and (mf.get("df") is None or (isinstance(mf["df"], list) and len(mf["df"]) == len(ns)
                                            and all(isinstance(k, int) and k >= 1 for k in mf["df"]))))
        if not ok:
            raise InputError(f"item bank {p}: \"misfit\" must hold increasing item counts \"n\" (whole numbers "
                             ">= 1) and as many variances \"var\" (finite, >= 0) and degrees of freedom \"df\" "
                             "(whole numbers >= 1); the file is damaged: recalibrate")
    notes = tuple(obj.get("notes") or ())
    if "misfit" not in obj:
        old = ("the bank has no model-misfit term (written before mrcstats had it): intervals cover the finite "
               "items and the calibration error only; recalibrate with `mrcstats cat calibrate` to add it")
        notes += (old,)
    return ItemBank(items, abil, str(obj.get("irt_model", "2pl")), exc, dict(obj.get("provenance") or {}),
                    notes, dict(mf))


# --------------------------------------------------------------------------- ability and selection

def _kappa(theta: np.ndarray | float, va: np.ndarray | None, vd: np.ndarray | None) -> np.ndarray | float:
    """The expected response function's shrinkage ``1 / sqrt(1 + pi v / 8)``, ``v = theta^2 var(a) + var(d)``
    (the logistic-normal approximation, MacKay 1992; 1 without parameter variances)."""
    if va is None:
        return 1.0
    return 1.0 / np.sqrt(1.0 + (math.pi / 8.0) * (np.asarray(theta) ** 2 * va + vd))


def fisher_information(a: np.ndarray, d: np.ndarray, theta: float, va: np.ndarray | None = None,
                       vd: np.ndarray | None = None) -> np.ndarray:
    """``I_i(theta) = a_i^2 P_i(theta) (1 - P_i(theta))`` (Lord 1980, eq. 5-5 for the 2PL); with the
    parameter variances ``va, vd`` that of the expected response function, ``a_i`` times its ``kappa``."""
    k = _kappa(theta, va, vd)
    ae = a * k
    p = _expit(ae * theta + d * k)
    return ae * ae * p * (1.0 - p)


def _grid_eta(a: np.ndarray, d: np.ndarray, va: np.ndarray | None = None, vd: np.ndarray | None = None) -> np.ndarray:
    """``eta`` (expected response function's when ``va, vd``) on :data:`GRID`: ``(G, K)`` or ``(M, G, K)``."""
    if a.ndim == 1:
        eta = GRID[:, None] * a[None, :] + d[None, :]                      # (G, K)
        if va is not None:
            eta = eta * _kappa(GRID[:, None], va[None, :], vd[None, :])
        return eta
    return GRID[None, :, None] * a[:, None, :] + d[:, None, :]             # (M, G, K)


def _log_post(a: np.ndarray, d: np.ndarray, y: np.ndarray, va: np.ndarray | None = None,
              vd: np.ndarray | None = None) -> np.ndarray:
    """Log posterior of theta on :data:`GRID` (N(0, 1) prior) given answers ``y`` to items ``(a, d)``;
    ``a, d`` may be ``(K,)`` or ``(M, K)`` (one row per parameter draw) -> ``(G,)`` or ``(M, G)``."""
    eta = _grid_eta(a, d, va, vd)
    ll = (y * eta - np.logaddexp(0.0, eta)).sum(axis=-1)
    return ll - 0.5 * GRID ** 2


def _normalise(lp: np.ndarray) -> np.ndarray:
    w = np.exp(lp - lp.max(axis=-1, keepdims=True))
    return w / w.sum(axis=-1, keepdims=True)


def _eap(a: np.ndarray, d: np.ndarray, y: np.ndarray, va: np.ndarray | None = None,
         vd: np.ndarray | None = None) -> tuple[float, float, np.ndarray]:
    w = _normalise(_log_post(a, d, y, va, vd))
    m = float(w @ GRID)
    return m, float(math.sqrt(max(w @ GRID ** 2 - m * m, 0.0))), w


def next_item(a: np.ndarray, d: np.ndarray, theta: float, available: np.ndarray, content: np.ndarray,
              shares: np.ndarray, asked_per_group: np.ndarray, t: int, rng: np.random.Generator,
              topk: int = 5, va: np.ndarray | None = None, vd: np.ndarray | None = None) -> int:
    """The position of the next item (see the module docstring): the group ``c`` (codes in ``content``)
    furthest below its share, ``argmax share_c (t + 1) - asked_c`` among groups with available items (ties:
    the larger share, then the lower code), then one of its ``topk`` most informative available items
    at ``theta``, uniformly from ``rng``."""
    has = np.bincount(content[available], minlength=len(shares)) > 0
    if not has.any():
        raise InputError("cat: no item left to ask")
    deficit = np.where(has, shares * (t + 1) - asked_per_group, -np.inf)
    best = np.flatnonzero(deficit >= deficit.max() - 1e-12)
    g = best[np.argmax(shares[best])] if len(best) > 1 else best[0]
    cand = np.flatnonzero(available & (content == g))
    info = fisher_information(a[cand], d[cand], theta, None if va is None else va[cand],
                              None if vd is None else vd[cand])
    order = np.lexsort((cand, -info))     # most informative first; ties by position
    top = cand[order[: max(1, int(topk))]]
    return int(top[rng.integers(len(top))]) if len(top) > 1 else int(top[0])


# --------------------------------------------------------------------------- prediction

@dataclass(frozen=True, repr=False)
class Prediction(Result):
    """Predicted full accuracy after ``n_asked`` items: point (posterior mean), ``se`` and interval."""

    n_asked: int
    ability: float
    ability_se: float
    accuracy: float
    se: float
    ci: tuple[float, float]
    level: float
    method: str = INTERVAL_METHOD

    def to_dict(self) -> dict[str, Any]:
        return {"items_asked": self.n_asked, "ability": self.ability, "ability_se": self.ability_se,
                "predicted_accuracy": self.accuracy, "predicted_accuracy_se": self.se,
                "predicted_accuracy_ci": list(self.ci), "level": self.level, "interval_method": self.method}

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame([self.to_dict()])

    def summary(self) -> str:
        return (f"after {self.n_asked} items: ability {self.ability:.3f} (SE {self.ability_se:.3f}); predicted "
                f"accuracy {self.accuracy:.4f}, {self.level:.0%} interval [{self.ci[0]:.4f}, {self.ci[1]:.4f}]")


def _accuracy_se_quick(a: np.ndarray, d: np.ndarray, asked: np.ndarray, w: np.ndarray, va: np.ndarray | None = None,
                       vd: np.ndarray | None = None) -> tuple[float, float]:
    """Posterior mean and SD of ``sum_{not asked} P_i(theta) / N`` on the grid (item parameters fixed),
    with the Bernoulli variance of the not-asked answers added: the stopping rule's SE."""
    rest = ~asked
    P = _expit(_grid_eta(a[rest], d[rest], None if va is None else va[rest], None if vd is None else vd[rest]))
    s = P.sum(axis=1)
    v = (P * (1 - P)).sum(axis=1)
    m = float(w @ s)
    var = float(w @ (s - m) ** 2 + w @ v)
    n = len(a)
    return m / n, math.sqrt(max(var, 0.0)) / n


def predict_accuracy(bank: ItemBank, asked: Sequence[int] | np.ndarray, y: Sequence[float] | np.ndarray, *,
                     level: float = 0.95, draws: int = 400, seed: int | None = 0,
                     calibration_error: bool = True, misfit: bool = True) -> Prediction:
    """Predicted full-bank accuracy from answers ``y`` (1/0) to the items at positions ``asked``
    (see the module docstring). ``calibration_error=False`` keeps the item parameters at their estimates
    (only the ability and the not-asked answers vary); ``misfit=False`` leaves out the bank's model-misfit
    variance (:meth:`ItemBank.misfit_var`; none in a bank without it)."""
    if not 0 < level < 1:
        raise InputError(f"cat: level must be in (0, 1), got {level!r}")
    if not (isinstance(draws, (int, np.integer)) and draws >= 50):
        raise InputError(f"cat: draws must be a whole number >= 50, got {draws!r}")
    asked = np.asarray(asked, dtype=int)
    y = np.asarray(y, dtype=float)
    a, d = bank.params()
    N = len(a)
    mask = np.zeros(N, bool)
    mask[asked] = True
    va, vd = bank.variances() if calibration_error else (None, None)
    theta, theta_se, w = _eap(a[asked], d[asked], y, *((va[asked], vd[asked]) if va is not None else ()))
    m_rest, _ = _accuracy_se_quick(a, d, mask, w, va, vd)
    point = float(y.sum()) / N + m_rest
    rng = stream(check_seed(seed), "cat", "interval", len(asked))
    se_a = bank.items["se_a"].to_numpy(float)
    se_d = bank.items["se_d"].to_numpy(float)
    M = int(draws)
    out = np.empty(M)
    rest = ~mask
    for chunk in np.array_split(np.arange(M), max(1, M // 50)):
        k = len(chunk)
        if calibration_error:
            with np.errstate(divide="ignore", invalid="ignore"):
                sl = np.where(a > 0, se_a / np.where(a > 0, a, 1.0), 0.0)
            ad = a[None, :] * np.exp(rng.standard_normal((k, N)) * sl[None, :])
            dd = d[None, :] + rng.standard_normal((k, N)) * se_d[None, :]
        else:
            ad, dd = np.broadcast_to(a, (k, N)), np.broadcast_to(d, (k, N))
        if len(asked):
            wk = _normalise(_log_post(ad[:, asked], dd[:, asked], y))            # (k, G)
        else:
            wk = np.broadcast_to(_normalise(-0.5 * GRID ** 2), (k, len(GRID)))
        u = rng.random(k)
        cdf = np.cumsum(wk, axis=1)
        gi = np.minimum((cdf < u[:, None]).sum(axis=1), len(GRID) - 1)
        th = GRID[gi] + (rng.random(k) - 0.5) * (GRID[1] - GRID[0])
        P = _expit(th[:, None] * ad[:, rest] + dd[:, rest])
        s = P.sum(axis=1)
        v = (P * (1 - P)).sum(axis=1)
        out[chunk] = (y.sum() + s + np.sqrt(v) * rng.standard_normal(k)) / N
    tau2 = bank.misfit_var(len(asked)) if misfit and rest.any() else 0.0     # nothing left: nothing to misfit
    if tau2 > 0:     # its own stream: the other draws are the same with and without the misfit term
        out = out + math.sqrt(tau2) * stream(check_seed(seed), "cat", "misfit", len(asked)).standard_normal(M)
    out = np.clip(out, 0.0, 1.0)
    lo, hi = np.quantile(out, [(1 - level) / 2, (1 + level) / 2])
    method = INTERVAL_METHOD if calibration_error else "simulation with the item parameters fixed at their estimates"
    if misfit and bank.misfit:
        method += (f"; {_MISFIT_METHOD.format(folds=bank.misfit.get('folds', '?'))} "
                   f"(tau = {math.sqrt(tau2):.4f} at n = {len(asked)})")
    return Prediction(len(asked), theta, theta_se, point, float(out.std(ddof=1)), (float(lo), float(hi)), level,
                      method)


# --------------------------------------------------------------------------- the run

@dataclass(frozen=True, repr=False)
class CatResult(Result):
    """An adaptive run: the items asked in order with the answer and the ability after it (``trace``),
    the final :class:`Prediction`, why it stopped, and the settings."""

    model: str
    trace: pd.DataFrame
    prediction: Prediction
    stop_reason: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def items_asked(self) -> int:
        return len(self.trace)

    def to_frame(self) -> pd.DataFrame:
        return self.trace.copy()

    def to_dict(self) -> dict[str, Any]:
        """The ``mrcstats cat run --json`` object (the contract of issue 40 plus the settings)."""
        from mrcstats._jsonout import to_jsonable

        pr = self.prediction
        return {"model": self.model, "items_asked": self.items_asked, "ability": pr.ability,
                "ability_se": pr.ability_se, "predicted_accuracy": pr.accuracy,
                "predicted_accuracy_ci": list(pr.ci),
                "items": [{k: to_jsonable(v) for k, v in r.items()} for r in self.trace.to_dict(orient="records")],
                "predicted_accuracy_se": pr.se, "level": pr.level, "interval_method": pr.method,
                "stop_reason": self.stop_reason, "settings": dict(self.settings), "notes": list(self.notes)}

    def summary(self) -> str:
        pr = self.prediction
        lines = [f"Adaptive run of {self.model}: {self.items_asked} items asked ({self.stop_reason})",
                 f"  ability {pr.ability:.3f} (SE {pr.ability_se:.3f})",
                 (f"  predicted full accuracy {pr.accuracy:.4f}, {pr.level:.0%} interval "
                 f"[{pr.ci[0]:.4f}, {pr.ci[1]:.4f}] (SE {pr.se:.4f})"),
                 f"  interval: {pr.method}"]
        lines.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(lines)


def _check_run(max_items: Any, target_se: Any, topk: Any) -> None:
    if not (isinstance(max_items, (int, np.integer)) and not isinstance(max_items, bool) and max_items >= 1):
        raise InputError(f"cat run: --max-items must be a whole number >= 1, got {max_items!r}")
    if target_se is not None and not (isinstance(target_se, (int, float)) and 0 < target_se < 0.5):
        raise InputError(f"cat run: --target-se is the SE of the predicted accuracy (a share), in (0, 0.5); got "
                         f"{target_se!r} (for +-1.5 points at 95% give 0.0075)")
    if not (isinstance(topk, (int, np.integer)) and topk >= 1):
        raise InputError(f"cat run: --topk must be a whole number >= 1, got {topk!r}")


def run_cat(bank: ItemBank, answer: Callable[[str], Any], *, model: str = "model", max_items: int = 100,
            target_se: float | None = None, seed: int = 0, topk: int = 5, level: float = 0.95,
            draws: int = 400, available: Sequence[str] | None = None, balance: bool = True,
            calibration_error: bool = True, misfit: bool = True, notes: Sequence[str] = ()) -> CatResult:
    """Run an adaptive test (see the module docstring).

    ``answer(item_id)`` returns whether the answer was correct (``True``/``False``; ``None`` = invalid,
    counted as not correct, as in the calibration); it may raise :class:`InputError` (the run stops).
    ``available``: the items that can be asked (default: all); the prediction still covers the whole bank.
    ``misfit``: include the bank's model-misfit variance in the interval (:func:`predict_accuracy`) and in the
    stopping rule's SE (``sqrt(se^2 + tau^2(n))``).
    """
    _check_run(max_items, target_se, topk)
    seed = check_seed(seed, "cat run seed")
    if seed is None:
        raise InputError("cat run: a seed is needed (the selection must be reproducible to resume); give e.g. 0")
    a, d = bank.params()
    va, vd = bank.variances() if calibration_error else (None, None)
    N = len(a)
    items = bank.items["item"].to_numpy(str)
    codes, groups = pd.factorize(bank.items["content"], sort=True)
    codes = np.asarray(codes)
    if not balance:
        codes = np.zeros(N, int)
        groups = pd.Index(["all"])
    avail = np.ones(N, bool)
    if available is not None:
        avail = np.isin(items, np.asarray(list(available), dtype=str))
        if not avail.any():
            raise InputError("cat run: none of the bank's items can be asked (no item with a text or an answer)")
    shares = np.bincount(codes, minlength=len(groups)) / N        # the benchmark's composition
    asked_per_group = np.zeros(len(groups))
    asked: list[int] = []
    ys: list[float] = []
    trace = []
    theta, theta_se = 0.0, 1.0
    stop = f"max items ({max_items})"
    w = _normalise(-0.5 * GRID ** 2)
    for t in range(int(max_items)):
        if not avail.any():
            stop = "no item left to ask"
            break
        rng = stream(seed, "cat", "select", t)
        j = next_item(a, d, theta, avail, codes, shares, asked_per_group, t, rng, topk, va, vd)
        resp = answer(items[j])
        yv = 1.0 if (resp is True or (resp is not None and resp is not pd.NA and float(resp) >= 0.5)) else 0.0
        avail[j] = False
        asked.append(j)
        ys.append(yv)
        asked_per_group[codes[j]] += 1
        theta, theta_se, w = _eap(a[asked], d[asked], np.asarray(ys),
                                  *((va[asked], vd[asked]) if va is not None else ()))
        row = {"step": t + 1, "item": items[j], "content": str(groups[codes[j]]), "correct": bool(yv),
               "information": float(fisher_information(a[j:j + 1], d[j:j + 1], trace[-1]["ability"] if trace
                                                       else 0.0, *((va[j:j + 1], vd[j:j + 1]) if va is not None
                                                                   else ()))[0]),
               "ability": theta, "ability_se": theta_se}
        if target_se is not None:
            mask = np.zeros(N, bool)
            mask[asked] = True
            _, acc_se = _accuracy_se_quick(a, d, mask, w, va, vd)
            if misfit:      # the stopping rule's SE includes the bank's model-misfit variance at this count
                acc_se = math.sqrt(acc_se ** 2 + bank.misfit_var(len(asked)))
            row["accuracy_se"] = acc_se
            trace.append(row)
            if acc_se <= target_se:
                stop = f"target SE {target_se:g} reached"
                break
        else:
            trace.append(row)
    pred = predict_accuracy(bank, asked, ys, level=level, draws=draws, seed=seed,
                            calibration_error=calibration_error, misfit=misfit)
    settings = {"max_items": int(max_items), "target_se": target_se, "target_se_scale": "predicted accuracy",
                "seed": seed, "topk": int(topk), "content_balancing": bool(balance and len(groups) > 1),
                "content_groups": len(groups), "selection": "maximum Fisher information at the EAP ability",
                "ability": "EAP, N(0, 1) prior", "model_misfit": bool(misfit and bank.misfit), "bank_items": N,
                "bank_data_sha256":
                bank.provenance.get("data_sha256")}
    n_left = N - int(avail.sum()) - len(asked)
    extra = list(notes)
    if misfit and not bank.misfit:
        extra.append("the bank has no model-misfit term (an older bank, or calibrated with --folds 0): the interval "
                     "covers the finite items and the calibration error only")
    if available is not None and n_left:
        extra.append(f"{n_left} bank item(s) could not be asked (no text or no answer); they count in the prediction "
                     "by their expected answers")
    return CatResult(model, pd.DataFrame(trace), pred, stop, settings, tuple(extra))


def replay(bank: ItemBank, log: pd.DataFrame, model: str | None = None, *, model_col: str = "model",
           item_col: str = "item", correct_col: str = "correct", **kw: Any) -> CatResult:
    """:func:`run_cat` answered from an existing log: what an adaptive run of ``model`` would have asked and
    predicted. Only items the log answers can be asked (the first trial's answer; invalid = not correct).
    ``kw``: :func:`run_cat`'s settings."""
    for col in (model_col, item_col, correct_col):
        if col not in log.columns:
            raise InputError(f"cat run --replay: the log has no column {col!r} "
                             f"(columns: {', '.join(map(str, log.columns[:15]))})")
    names = sorted(log[model_col].astype(str).unique())
    if model is None:
        if len(names) != 1:
            raise InputError(f"cat run --replay: the log has {len(names)} models ({', '.join(names[:5])}"
                             f"{', ...' if len(names) > 5 else ''}); choose one with --model NAME")
        model = names[0]
    rows = log[log[model_col].astype(str) == str(model)]
    if rows.empty:
        raise InputError(f"cat run --replay: model {model!r} is not in the log (models: {', '.join(names[:8])})")
    if "trial" in rows.columns:
        rows = rows.sort_values("trial", kind="stable")
    first = rows.drop_duplicates(item_col)
    ans = dict(zip(first[item_col].astype(str), first[correct_col].astype("boolean").fillna(False).astype(bool)))
    shared = [i for i in bank.items["item"] if i in ans]
    if not shared:
        raise InputError(f"cat run --replay: the log's items share none with the bank (log items e.g. "
                         f"{', '.join(map(repr, list(ans)[:3]))}; bank items e.g. "
                         f"{', '.join(map(repr, list(bank.items['item'][:3])))}): the bank comes from another "
                         "benchmark")
    notes = list(kw.pop("notes", ()))
    if model in set(bank.provenance.get("models") or ()):
        notes.append(f"{model} was one of the bank's calibration models: the prediction is not out of sample")
    return run_cat(bank, ans.__getitem__, model=str(model), available=shared, notes=notes, **kw)
