"""Where the noise comes from: variance components of a crossed model, signal-to-noise and rank stability.

**Model.** ``y`` is the outcome of one answer (0/1 correctness, or the graded score; invalid answers count
as 0, not correct). With ``i`` the item, ``m`` the model (``by``) and ``r`` the repetition (``over``: a
seed, an Inspect epoch ``trial``, a prompt template, a checkpoint, a ``condition``), a linear mixed model
(lme4's ``lmer``, REML, fitted by :func:`mrcstats.models.lmm.fit_lmm`) ::

    y_imr = μ + a_i + b_m + c_r + d_mr + g_im + e_imr
    lmer(y ~ 1 + (1|item) + (1|model) + (1|rep) + (1|model:rep) + (1|item:model))

with independent normal effects of variances ``σ²_item, σ²_model, σ²_rep, σ²_model:rep, σ²_item:model`` and
the residual ``σ²_e`` (``item_model=False`` leaves ``g_im`` out; it is then part of the residual). This is
the linear (probability) model of the outcome AI2's "Signal and Noise" decomposition uses (Heineman et al.
2025, arXiv:2508.13144); on 0/1 outcomes the components are variances of the probability scale, not of a
latent logit. Each share is the component over their sum.

**What moves between runs.** A model's mean over the ``I`` items in one run ``r`` is
``μ + ā + b_m + c_r + d_mr + ḡ_m + ē_mr``. Over the repetitions of the *same* items, ``b_m + ḡ_m`` stays
(the model's true score on these items) and ``c_r`` moves every model alike (it changes no ordering), so the
noise that changes a model's standing is ::

    V₁ = σ²_model:rep + σ²_e / I                    (one run; R runs averaged: V₁ / R)
    S² = σ²_model + σ²_item:model / I               (the signal: the spread of the models' true scores)

and the signal-to-noise ratio is ``SNR = S / sqrt(V₁)`` (AI2: the dispersion of the models' scores over the
standard deviation of a model's score between runs; here both from the fitted components). ``σ²_rep`` is
reported, not counted as noise.

**Two runs ordering two models the same way.** For two models drawn from the population and scored in two
independent runs, the observed differences ``D₁ = δ + ε₁``, ``D₂ = δ + ε₂`` (``δ ~ N(0, 2S²)``, ``ε ~ N(0,
2V₁)``) are bivariate normal with correlation ``ρ = S² / (S² + V₁)``; by Sheppard's formula ::

    P(same order) = P(D₁ D₂ > 0) = 1/2 + arcsin(ρ) / π.

For a named pair with observed difference ``d`` (taken as true), ``z = |d| / sqrt(2V₁)`` and two fresh runs agree
with probability ``Φ(z)² + Φ(−z)²``.

**Items and repetitions needed.** A target agreement ``p`` is the target ``SNR = sqrt(ρ / (1 − ρ))`` with
``ρ = sin(π (p − 1/2))``. Repetitions averaged per model at the current ``I``: ``R = ⌈t² V₁ / S²⌉``. Items at
one run: ``S²(I) ≥ t² V₁(I)`` gives ``I = ⌈(t² σ²_e − σ²_item:model) / (σ²_model − t² σ²_model:rep)⌉`` when
``σ²_model > t² σ²_model:rep`` (else no number of items reaches the target: the model-by-repetition noise is a
floor, and more repetitions are needed).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from mrcstats._dist import norm_sf
from mrcstats._repr import Result
from mrcstats.errors import InputError

__all__ = ["COMPONENTS", "VarianceResult", "agreement_probability", "check_over_by", "snr_for_agreement", "variance"]

#: the variance components, in the order of the result's table (``residual`` last)
COMPONENTS: tuple[str, ...] = ("item", "model", "rep", "model:rep", "item:model", "residual")


def agreement_probability(snr: float) -> float:
    """``1/2 + arcsin(ρ)/π`` with ``ρ = SNR² / (1 + SNR²)``: the probability that two independent runs order two
    models from the population the same way (module docstring; Sheppard's formula for the bivariate normal)."""
    if not math.isfinite(snr):
        return 1.0
    rho = snr * snr / (1.0 + snr * snr)
    return 0.5 + math.asin(rho) / math.pi


def snr_for_agreement(p: float) -> float:
    """The SNR at which :func:`agreement_probability` equals ``p`` (``0.5 ≤ p < 1``)."""
    if not 0.5 <= p < 1:
        raise InputError(f"the target agreement must be at least 0.5 and below 1 (e.g. 0.95), got {p!r}")
    rho = math.sin(math.pi * (p - 0.5))
    return math.sqrt(rho / (1.0 - rho))


@dataclass(frozen=True, repr=False)
class VarianceResult(Result):
    """Variance components, SNR and rank stability of a log (:func:`variance`; formulas: module docstring).

    ``components``: one row per component (``component, variance, sd, share``); ``models``: one row per model
    (``model, mean, n``: the mean outcome over all its answers); ``pairs``: one row per pair of models
    (``model_a, model_b, diff, p_same_order``). ``signal_var`` is ``S²``, ``noise_var`` ``V₁`` (one run);
    ``snr`` = ``S / sqrt(V₁)``; ``agreement`` the probability two runs order two models the same way.
    ``items_needed``/``reps_needed``: for ``target_snr`` (None when unreachable or not asked).
    """

    components: pd.DataFrame = field(repr=False)
    models: pd.DataFrame = field(repr=False)
    pairs: pd.DataFrame = field(repr=False)
    by: str = "model"
    over: str = "trial"
    n_items: int = 0
    n_reps: int = 0
    nobs: int = 0
    signal_var: float = float("nan")
    noise_var: float = float("nan")
    snr: float = float("nan")
    agreement: float = float("nan")
    target_snr: float | None = None
    target_agreement: float | None = None
    items_needed: int | None = None
    reps_needed: int | None = None
    formula: str = ""
    singular: bool = False
    outcome: str = "correct"
    notes: tuple[str, ...] = ()

    def component(self, name: str) -> float:
        """The variance of one component (:data:`COMPONENTS`)."""
        row = self.components.loc[self.components["component"] == name, "variance"]
        if row.empty:
            raise InputError(f"no component {name!r}; components: {', '.join(self.components['component'])}")
        return float(row.iloc[0])

    def to_frame(self) -> pd.DataFrame:
        """The components table."""
        return self.components.copy()

    def to_dict(self) -> dict[str, Any]:
        """The ``mrcstats variance --json`` object."""
        return {
            "by": self.by, "over": self.over, "outcome": self.outcome, "formula": self.formula,
            "n_items": self.n_items, "n_reps": self.n_reps, "nobs": self.nobs,
            "components": [{"component": str(r.component), "variance": float(r.variance), "sd": float(r.sd),
                            "share": float(r.share)} for r in self.components.itertuples()],
            "signal_var": self.signal_var, "noise_var": self.noise_var, "snr": _num(self.snr),
            "agreement": self.agreement,
            "target": {"snr": self.target_snr, "agreement": self.target_agreement,
                       "items_needed": self.items_needed, "reps_needed": self.reps_needed},
            "models": [{"model": str(r.model), "mean": float(r.mean), "n": int(r.n)} for r in self.models.itertuples()],
            "pairs": [{"model_a": str(r.model_a), "model_b": str(r.model_b), "diff": float(r.diff),
                       "p_same_order": float(r.p_same_order)} for r in self.pairs.itertuples()],
            "singular": self.singular, "notes": list(self.notes),
        }

    def summary(self) -> str:
        what = "mean score" if self.outcome == "score" else "correctness"
        lines = [(f"Variance components of {what} (lmer, REML): {self.nobs} answers, {len(self.models)} "
                  f"{self.by} levels x {self.n_items} items x {self.n_reps} {self.over} levels"),
                 f"formula: {self.formula}", ""]
        words = {"model": self.by, "rep": self.over}
        tab = self.components.assign(component=self.components["component"].map(
            lambda c: ":".join(words.get(w, w) for w in c.split(":"))))
        lines.append(tab.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
        lines += ["", f"signal  S = sd of the {self.by}s' true scores     = {math.sqrt(self.signal_var):.4g}",
                  (f"noise   sd of a {self.by}'s score between {self.over}s = {math.sqrt(self.noise_var):.4g} "
                   f"(one {self.over}, {self.n_items} items)"),
                  (f"SNR = {self.snr:.3g}; two {self.over}s order two {self.by}s the same way with probability "
                   f"{self.agreement:.3f}")]
        if self.target_snr is not None:
            goal = (f"agreement {self.target_agreement:g} (SNR {self.target_snr:.3g})" if self.target_agreement
                    is not None else f"SNR {self.target_snr:g}")
            items = ("unreachable by items alone (the " + f"{self.by}:{self.over} noise is a floor)"
                     if self.items_needed is None else f"{self.items_needed} items at one {self.over}")
            lines.append(f"for {goal}: {items}; {self.reps_needed} {self.over}s averaged at {self.n_items} items")
        if len(self.pairs):
            lines += ["", f"pairs (P two {self.over}s order them the same way, the difference taken as true):"]
            lines.append(self.pairs.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def _num(v: float) -> float | None:
    return None if not math.isfinite(v) else float(v)


def _check_target(name: str, v: Any, lo: float, hi: float | None) -> None:
    if v is None:
        return
    if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) or not math.isfinite(v) \
            or v <= lo or (hi is not None and v >= hi):
        bound = f"between {lo:g} and {hi:g}" if hi is not None else f"above {lo:g}"
        raise InputError(f"{name} must be a number {bound}, got {v!r}")


def check_over_by(log: pd.DataFrame, over: Any, by: Any, where: str) -> None:
    """The repetition (``over``) and unit (``by``) columns of a log: each a column that is neither an outcome nor
    ``item``, the two different, and no empty cell in either (one InputError naming the row otherwise)."""
    from mrcstats.io.schema import OUTCOME_COLUMNS

    for name, col in (("over", over), ("by", by)):
        if not isinstance(col, str) or col not in log.columns or col in OUTCOME_COLUMNS or col == "item":
            cols = ", ".join(str(c) for c in log.columns if c not in OUTCOME_COLUMNS and c != "item")
            raise InputError(f"{where}: {name}={col!r} is not a column of the log to group by; columns: {cols} "
                             f"(--{name} COLUMN; a seed, prompt or checkpoint column of the source keeps its name in the log)")
    if over == by:
        raise InputError(f"{where}: over and by are both {over!r}; name the repetition column with --over")
    for col in (over, by):
        miss = log[col].isna().to_numpy()
        if miss.any():
            r = int(np.flatnonzero(miss)[0])
            raise InputError(f"{where}: row {r + 1} has no {col!r} (column {col!r} is empty there); every answer "
                             f"needs its {col}: fill the column or drop those rows before the analysis")


def variance(log: pd.DataFrame, over: str = "trial", *, by: str = "model", outcome: str = "auto",
             item_model: bool = True, target_snr: float | None = None,
             target_agreement: float | None = None) -> VarianceResult:
    """Where the noise comes from: the variance components of items, models (``by``), repetitions (``over``),
    model x repetition (and item x model), the signal-to-noise ratio, the probability that two runs order two
    models the same way, and the items or repetitions needed for a target.

    Args:
        log: a canonical log (or a log dataset). Every answer is one observation; invalid answers count as 0.
        over: the repetition column: ``"trial"`` (Inspect epochs, repeated samples), ``"condition"``, or any
            other column of the log (``"seed"``, ``"prompt"``, ``"checkpoint"``). Each model needs two of them.
        by: the column of the compared units (``"model"``).
        outcome: ``"auto"``, ``"correct"`` or ``"score"`` (:func:`mrcstats.io.schema.resolve_outcome`).
        item_model: also fit ``(1|item:model)`` (default), so that what a model does on an item in every run
            is signal, not noise; False fits ``y ~ 1 + (1|item) + (1|model) + (1|rep) + (1|model:rep)``.
        target_snr: the SNR to reach (items and repetitions needed).
        target_agreement: instead, the probability that two runs order two models the same way (0.5 ... 1).

    Returns:
        :class:`VarianceResult`. Formulas: the module docstring (Heineman et al. 2025; Sheppard's formula).

    Raises:
        InputError: a missing column, an empty cell in ``over``, fewer than two models or repetitions, a model
            seen in one repetition only, several conditions when ``over`` is not ``condition``, a bad target.
    """
    from mrcstats.backends import dataset_pass
    from mrcstats.io.schema import outcome_values, require_log, resolve_outcome

    dp = dataset_pass(log)
    if dp is not None:       # a log dataset: its rows (variance components need every row)
        log = dp.to_frame()
    log = require_log(log, "variance")
    check_over_by(log, over, by, "variance")
    _check_target("target_snr", target_snr, 0.0, None)
    if target_snr is not None and target_agreement is not None:
        raise InputError("variance: give target_snr or target_agreement, not both")
    if target_agreement is not None:
        _check_target("target_agreement", target_agreement, 0.5, 1.0)
        target_snr = snr_for_agreement(float(target_agreement))
    if len(log) == 0:
        raise InputError("variance: the log has no rows")
    if over != "condition" and by != "condition":
        conds = pd.unique(log["condition"].astype(str))
        if len(conds) > 1:
            shown = ", ".join(repr(c) for c in sorted(conds)[:10])
            raise InputError(f"variance: the log holds {len(conds)} conditions ({shown}); keep one (--condition C) "
                             f"or decompose over them (--over condition)")
    used = resolve_outcome(log, outcome, "variance")
    val = outcome_values(log, used)
    invalid = int(val.isna().sum())
    data = pd.DataFrame({"y": val.to_numpy(dtype=float, na_value=0.0),
                         "item": log["item"].astype(str).to_numpy(),
                         "model": log[by].astype(str).to_numpy(),
                         "rep": log[over].astype(str).to_numpy()})
    models = sorted(pd.unique(data["model"]))
    reps = pd.unique(data["rep"])
    if len(models) < 2:
        raise InputError(f"variance: {by!r} has {len(models)} level(s) ({', '.join(map(repr, models))}); the "
                         f"spread between models needs at least two")
    if len(reps) < 2:
        raise InputError(f"variance: {over!r} has one level ({reps[0]!r}); the noise between repetitions needs at "
                         f"least two (several seeds, epochs, prompts, checkpoints or conditions per model)")
    per = data.groupby("model")["rep"].nunique()
    one = per[per < 2]
    if len(one):
        raise InputError(f"variance: {by} {one.index[0]!r} has one {over} ({data.loc[data.model == one.index[0], 'rep'].iloc[0]!r}); "
                         f"each {by} needs at least two to measure its noise between repetitions (leave it out or "
                         f"add its runs)")
    n_items = int(data["item"].nunique())
    terms = ["(1 | item)", "(1 | model)", "(1 | rep)", "(1 | model:rep)"]
    if item_model:
        terms.insert(0, "(1 | item:model)")
    formula = "y ~ 1 + " + " + ".join(terms)
    fit = _fit(formula, data)
    vc = fit.varcorr
    comp = {str(g): float(v) for g, v in zip(vc["group"], vc["variance"])}
    comp["residual"] = float(fit.sigma) ** 2
    names = [c for c in COMPONENTS if c in comp]
    var = np.array([comp[c] for c in names])
    total = float(var.sum())
    components = pd.DataFrame({"component": names, "variance": var, "sd": np.sqrt(var),
                               "share": var / total if total > 0 else np.full(len(var), np.nan)})
    s_mr, s_e = comp["model:rep"], comp["residual"]
    s_m, s_im = comp["model"], comp.get("item:model", 0.0)
    signal = s_m + s_im / n_items
    noise = s_mr + s_e / n_items
    snr = math.sqrt(signal / noise) if noise > 0 else math.inf
    agree = agreement_probability(snr)
    means = data.groupby("model")["y"].agg(["mean", "size"]).reset_index()
    means.columns = ["model", "mean", "n"]
    means = means.sort_values(["mean", "model"], ascending=[False, True]).reset_index(drop=True)
    rows = []
    mv = dict(zip(means["model"], means["mean"]))
    order = list(means["model"])
    for a in range(len(order)):
        for b in range(a + 1, len(order)):
            d = mv[order[a]] - mv[order[b]]
            z = abs(d) / math.sqrt(2 * noise) if noise > 0 else math.inf
            tail = float(norm_sf(z)) if math.isfinite(z) else 0.0     # Φ(−z)
            rows.append({"model_a": order[a], "model_b": order[b], "diff": d,
                         "p_same_order": (1 - tail) ** 2 + tail ** 2})
    pairs = pd.DataFrame(rows, columns=["model_a", "model_b", "diff", "p_same_order"])
    items_needed = reps_needed = None
    if target_snr is not None:
        t2 = float(target_snr) ** 2
        den = s_m - t2 * s_mr
        if den > 0:
            items_needed = max(1, math.ceil((t2 * s_e - s_im) / den))
        if signal > 0:
            reps_needed = max(1, math.ceil(t2 * noise / signal))
    notes = []
    if invalid:
        notes.append(f"{invalid} invalid answer(s) count as 0 (not correct)")
    if fit.singular:
        notes.append("boundary (singular) fit: at least one component is estimated as 0")
    if not fit.converged:
        notes.append("the fit may not have converged; treat the components with care")
    counts = data.groupby(["model", "rep"]).size()
    if counts.nunique() > 1:
        notes.append(f"unbalanced: the answers per {by} and {over} range from {int(counts.min())} to "
                     f"{int(counts.max())}; V₁ uses the {n_items} items of the whole log")
    if used == "correct":
        notes.append("components of a 0/1 outcome are on the probability scale (a linear model, as AI2's)")
    return VarianceResult(components=components, models=means, pairs=pairs, by=by, over=over, n_items=n_items,
                          n_reps=len(reps), nobs=len(data), signal_var=signal, noise_var=noise, snr=snr,
                          agreement=agree, target_snr=None if target_snr is None else float(target_snr),
                          target_agreement=None if target_agreement is None else float(target_agreement),
                          items_needed=items_needed, reps_needed=reps_needed, formula=formula,
                          singular=bool(fit.singular), outcome=used, notes=tuple(notes))


def _fit(formula: str, data: pd.DataFrame):
    """REML fit of ``formula`` (lme4's ``lmer``) without the Satterthwaite tests (only the components are used)."""
    from mrcstats.models.design import build_design
    from mrcstats.models.family import GAUSSIAN
    from mrcstats.models.formula import parse_formula
    from mrcstats.models.lmm import fit_lmm

    design = build_design(parse_formula(formula).with_family(GAUSSIAN), data)
    return fit_lmm(design, reml=True, satterthwaite=False)
