"""Masking robustness: accuracy-masking-rate curves and the NA / EA / KI indicators.

Reference: Sato & Matsuzaki, "Exploring the Limits of Large Language Models: A
Systematic Evaluation of Masked Text Processing Ability through MskQA and MskCal"
(seed ``000_c27602a462156830``), section 2.3 (metrics), section 4 (Acc curves,
10 trials, MR = 0..100 in steps of 5) and Appendix D (MR-weighted averages, Table 3).

Input is a canonical response log (one row per model x item x trial x condition)
with ``masking_rate`` (percent), ``condition`` (regular, partial, strict,
lenient, or any label) and ``trial``. ``correct`` is nullable: ``<NA>`` marks an
invalid or missing answer, which counts as *not correct* in ``Acc`` (the seed
divides by all questions) and is reported separately as the invalid rate.

Definitions (per model x condition x masking rate r):

* ``Acc_r``     = mean over trials t of  (#correct_t / #items_t)           (:func:`masking_accuracy`)
* ``NA_r``      = Acc_r / Acc_0, Acc_0 the mask-free accuracy (MR = 0 unless given)   (:func:`normalized_accuracy`)
* ``EA_r``      = Acc_0 * sqrt(NA_r * NA^U_r), U the background-knowledge baseline    (:func:`effective_accuracy`)
* ``KI_r``      = (NA^U_r - NA_r) / (1 - NA_r), undefined where NA_r >= 1             (:func:`knowledge_independence`)
* ``<X>``       = sum_r r * X_r / sum_r r over the r where X_r is defined             (:func:`mr_weighted_mean`)

With these, ``<Acc>`` of the shared RQA outputs (gpt-4o-mini) reproduces the
seed's Table 3 RQA row: strict 63.27, regular 64.67, partial 65.48, lenient
70.60 (percent), and ``<NA>`` of regular masking is 0.7198 with the table's
mask-free accuracy ``acc0 = 0.8984``.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from mrcstats._repr import Result
from mrcstats._words import plural
from mrcstats.errors import InputError
from mrcstats.stats.accuracy import finish_summary

__all__ = [
    "MaskingAccuracy",
    "MaskingIndicators",
    "effective_accuracy",
    "knowledge_independence",
    "masking_accuracy",
    "masking_indicators",
    "mr_key",
    "mr_plain_mean",
    "mr_weighted_mean",
    "normalized_accuracy",
]

_KEYS = ["model", "condition", "masking_rate"]


def mr_key(mr: float) -> str:
    """The JSON key of a masking rate: ``"5"`` for 5.0, ``"12.5"`` for 12.5."""
    x = float(mr)
    return str(int(x)) if x.is_integer() else repr(x)


# ----------------------------------------------------------------------------- indicators
def normalized_accuracy(acc: Any, acc0: float) -> np.ndarray:
    """Normalised accuracy ``NA_r = Acc_r / Acc_0`` (seed section 2.3).

    ``acc0`` is the mask-free accuracy, by default ``Acc`` at MR = 0. ``NA`` is
    undefined (NaN) when ``acc0`` is 0 or missing.
    """
    a = np.asarray(acc, dtype=float)
    if acc0 is None or not np.isfinite(acc0) or acc0 <= 0:
        return np.full_like(a, np.nan)
    return a / float(acc0)


def effective_accuracy(na: Any, na_baseline: Any, acc0: float) -> np.ndarray:
    """Effective accuracy ``EA_r = Acc_0 * sqrt(NA_r * NA^U_r)`` (seed section 2.3).

    The geometric mean of the data set's normalised accuracy and that of the
    background-knowledge baseline U (UQA in the seed), rescaled by the data set's
    own mask-free accuracy. When the data set is its own baseline,
    ``EA_r = Acc_0 * NA_r = Acc_r``. NaN where either NA is missing.
    """
    na = np.asarray(na, dtype=float)
    nu = np.asarray(na_baseline, dtype=float)
    with np.errstate(invalid="ignore"):
        return float(acc0) * np.sqrt(na * nu)


def knowledge_independence(na: Any, na_baseline: Any) -> np.ndarray:
    """Knowledge independence ``KI_r = (NA^U_r - NA_r) / (1 - NA_r)``, a normalised gain.

    The seed's printed formula (its Eq. 1) was lost in our copy; this is the
    definition mrcstats uses (issue 7): the share of the remaining accuracy loss
    ``1 - NA_r`` that the background-knowledge baseline U recovers. It is 0 when
    the data set is its own baseline and negative when ``NA_r > NA^U_r``.
    Undefined (NaN) where ``NA_r >= 1`` -- always at MR = 0 -- or where either
    value is missing; callers leave those MRs out of averages.
    """
    na = np.asarray(na, dtype=float)
    nu = np.asarray(na_baseline, dtype=float)
    ok = np.isfinite(na) & np.isfinite(nu) & (na < 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(ok, (nu - na) / np.where(ok, 1 - na, 1.0), np.nan)


def mr_weighted_mean(mr: Any, x: Any) -> float:
    """MR-weighted average ``<X> = sum_r r * X_r / sum_r r`` over the r where X_r is defined.

    Seed Appendix D (Table 3). MR = 0 has weight 0. NaN when no MR > 0 has a value.
    """
    r = np.asarray(mr, dtype=float)
    v = np.asarray(x, dtype=float)
    ok = np.isfinite(r) & np.isfinite(v)
    den = r[ok].sum()
    return float((r[ok] * v[ok]).sum() / den) if den > 0 else math.nan


def mr_plain_mean(mr: Any, x: Any) -> float:
    """Plain average of X over the masking rates where X is defined (MR = 0 included)."""
    r = np.asarray(mr, dtype=float)
    v = np.asarray(x, dtype=float)
    ok = np.isfinite(r) & np.isfinite(v)
    return float(v[ok].mean()) if ok.any() else math.nan


# ----------------------------------------------------------------------------- accuracy
def _check_log(log: pd.DataFrame, where: str, cluster: str | None = None) -> pd.DataFrame:
    """The columns this module uses, validated by the package's one validator (:mod:`mrcstats.io.schema`)."""
    from mrcstats.io.schema import require_binary, require_log

    require_binary(log, where)
    log = require_log(log, where, ("model", "masking_rate", "correct"))
    out = _keys(log, where)
    if cluster:
        out["_cl"] = log[cluster].to_numpy()
    out["correct"] = log["correct"]
    return out


def _cluster_column(log: Any, cluster: str | None) -> str | None:
    """The column the interval is clustered on: ``cluster`` when the log has it, else ``item`` (each item
    answered in several trials is a cluster), else None (Wilson over rows)."""
    cols = set(map(str, log.columns))
    if cluster and cluster in cols:
        return cluster
    if cluster and cluster != "cluster":
        raise InputError(f"masking: no column {cluster!r} to cluster the interval on; columns: "
                         f"{', '.join(sorted(cols))}")
    return "item" if "item" in cols else None


def _keys(frame: pd.DataFrame, where: str) -> pd.DataFrame:
    """model, condition ("" when absent), trial (numeric; 0 when absent), masking_rate (percent, float)."""
    from mrcstats.io.schema import coerce_masking_rate

    return pd.DataFrame({
        "model": frame["model"].astype("string").fillna(""),
        "condition": (frame["condition"].astype("string").fillna("") if "condition" in frame.columns
                      else pd.Series("", index=frame.index, dtype="string")),
        "trial": (pd.to_numeric(frame["trial"], errors="coerce") if "trial" in frame.columns
                  else pd.Series(0, index=frame.index)),
        "masking_rate": coerce_masking_rate(frame["masking_rate"], where).astype(float),
    }, index=frame.index)


def _counts(log: Any, where: str, cluster: str | None = None) -> pd.DataFrame:
    """Integer counts per (model, condition, masking_rate, trial[, cluster as ``_cl``]): ``n`` rows, ``k``
    correct, ``inv`` invalid. A :class:`~mrcstats.io.dataset.LogDataset` is counted by DuckDB on the raw key
    values (the keys are then coerced as in memory and the counts re-summed); a frame by pandas."""
    from mrcstats.backends import dataset_pass

    keys = [*_KEYS, "trial", *(["_cl"] if cluster else [])]
    rows = dataset_pass(log)
    if rows is not None:
        rows.check_columns(["model", "masking_rate", "correct"], "compute masking curves by")
        have = rows.columns()
        raw = rows.group_counts([c for c in [*keys[:4], *([cluster] if cluster else [])] if c in have])
        df = _keys(raw, str(rows.path))
        if cluster:
            df["_cl"] = raw[cluster].to_numpy()
        df[["n", "k", "inv"]] = raw[["n", "k", "inv"]]
    else:
        df = _check_log(log, where, cluster)
        corr = df.pop("correct")
        df["n"] = 1
        df["k"] = corr.fillna(False).to_numpy(dtype=np.int64)
        df["inv"] = corr.isna().to_numpy(dtype=np.int64)
    return df.groupby(keys, sort=False, dropna=False)[["n", "k", "inv"]].sum().reset_index()


@dataclass(frozen=True, repr=False)
class MaskingAccuracy(Result):
    """Acc(MR) per model x condition x masking rate.

    ``table`` columns: model, condition, masking_rate, n_trials, n (answers over
    all trials), n_correct, n_invalid, acc (mean over trials of the per-trial
    accuracy, invalid = not correct), sd (sample SD over trials, ddof = 1, as R
    ``sd``), se (sd / sqrt(n_trials)), ci_low, ci_high (the package's one accuracy interval,
    :func:`mrcstats.stats.accuracy.accuracy_interval`: clustered on ``cluster`` — by default the item,
    answered once per trial — so a curve and the accuracy table beside it draw the same interval),
    ci_method (its name), se_cluster (CR1), acc_valid (correct / valid answers, pooled over trials),
    invalid (invalid / all, pooled over trials). ``notes`` lists rows left out and why.
    """

    table: pd.DataFrame
    level: float = 0.95
    notes: tuple[str, ...] = ()
    ci_method: str = "wilson"
    cluster: str | None = None

    def ci_words(self) -> str:
        """The interval as a caption or legend names it (``"95% clustered Wilson interval (...)"``)."""
        from mrcstats.stats.accuracy import ci_words

        return ci_words(self.ci_method, self.level) + (f", clustered by {self.cluster}"
                                                        if self.ci_method == "clustered wilson" else "")

    def to_frame(self) -> pd.DataFrame:
        return self.table.copy()

    def _nested(self, col: str) -> dict[str, dict[str, dict[str, float]]]:
        out: dict[str, dict[str, dict[str, float]]] = {}
        for r in self.table.itertuples(index=False):
            out.setdefault(r.model, {}).setdefault(r.condition, {})[mr_key(r.masking_rate)] = getattr(r, col)
        return out

    def to_dict(self) -> dict[str, Any]:
        """``{"acc", "sd", "acc_valid", "invalid"}``, each ``{model: {condition: {MR: value}}}``."""
        return {k: self._nested(k) for k in ("acc", "sd", "acc_valid", "invalid")}

    def summary(self, notes: bool = True) -> str:
        """Text table; ``notes=False`` leaves out the notes (the CLI prints them on stderr)."""
        lines = [f"Acc(MR): mean over trials, invalid counted as not correct ({self.ci_words()})"]
        for (m, c), g in self.table.groupby(["model", "condition"], sort=False):
            lines.append(f"{m} | {c or '(no condition)'}")
            lines.append("    MR   trials     acc      sd        CI            acc_valid  invalid")
            for r in g.itertuples(index=False):
                ci = ("      -       " if pd.isna(r.ci_low)
                      else f"[{r.ci_low:.4f},{r.ci_high:.4f}]")
                lines.append(f"  {r.masking_rate:5g} {r.n_trials:6d}  {r.acc:.4f}  "
                             f"{_fmt(r.sd)}  {ci}  {_fmt(r.acc_valid)}  {r.invalid:.4f}")
        return summary_text(lines, self.notes if notes else ())


def fmt_or_na(x: Any, spec: str = ".4f", na: str = "   NA ", scale: float = 1.0, suffix: str = "") -> str:
    """A cell of the masking tables: ``scale * x`` formatted with ``spec`` and ``suffix``, ``na`` when missing
    (None, NaN, <NA>)."""
    return na if x is None or pd.isna(x) else f"{scale * x:{spec}}{suffix}"


def summary_text(lines: list[str], notes: Any = ()) -> str:
    """The text of a masking summary: its lines, then one ``note:`` line per note."""
    return "\n".join([*lines, *(f"note: {n}" for n in notes)])


def _fmt(x: float) -> str:
    return fmt_or_na(x)


def masking_accuracy(log: Any, *, level: float = 0.95, cluster: str | None = "cluster") -> MaskingAccuracy:
    """Accuracy-masking-rate curve Acc(MR) per model x condition (seed section 4, Fig. 2).

    Parameters
    ----------
    log : canonical response log with ``model``, ``masking_rate`` (percent),
        ``correct`` (nullable boolean; <NA> = invalid), and optionally
        ``condition`` and ``trial``; or a log dataset folder opened with
        :func:`mrcstats.open_dataset` (counted by DuckDB, larger than memory;
        the same table and notes as on ``dataset.to_log()``).
    level : confidence level of the interval.
    cluster : the column the interval is clustered on (default ``cluster``, else ``item`` when the log
        has no ``cluster`` column); None: no clustering (Wilson over rows).

    Returns
    -------
    MaskingAccuracy with one row per model x condition x MR.

    Notes
    -----
    Per trial t: ``acc_t = #(correct is True) / #rows`` (invalid answers count as
    not correct, the seed's Acc over all questions). ``acc`` is the mean of
    ``acc_t`` over trials, ``sd`` their sample SD (R ``sd``); the interval is the one accuracy interval
    of :mod:`mrcstats.stats.accuracy` over the pooled rows, clustered by item. ``acc_valid`` and
    ``invalid`` pool the trials. Rows without a masking rate are left out and
    counted in ``notes``. Computed from integer counts per (model, condition,
    MR, trial) by :func:`mrcstats.stats.accuracy.finish_summary`, the code of
    ``summarize(..., trials="mean")``.
    """
    if not 0 < level < 1:
        raise InputError(f"level must be between 0 and 1, got {level!r}")
    cl = _cluster_column(log, cluster)
    per = _counts(log, "masking_accuracy", cl)
    notes: list[str] = []
    no_mr = per["masking_rate"].isna()
    if no_mr.any():
        notes.append(f"{plural(int(per.loc[no_mr, 'n'].sum()), 'row')} without a masking_rate left out")
        per = per[~no_mr]
    if per.empty or int(per["n"].sum()) == 0:
        raise InputError("masking_accuracy: the log has no rows with a masking_rate; "
                         "read maskcode outputs with `mrcstats.read_log(..., format='mskqa')`")
    no_trial = per["trial"].isna()
    if no_trial.any():
        raise InputError(f"masking_accuracy: {int(per.loc[no_trial, 'n'].sum())} row(s) have no trial number; "
                         "fill the 'trial' column (integers)")
    per = per.reset_index(drop=True)
    if cl:
        from mrcstats.stats.accuracy import group_moments

        by_cl = per.groupby([*_KEYS, "_cl"], sort=False, dropna=False)[["n", "k", "inv"]].sum().reset_index()
        mom = group_moments(by_cl.rename(columns={"k": "s", "n": "m"}), _KEYS)
        tr = per.groupby([*_KEYS, "trial"], sort=False, dropna=False)[["n", "k", "inv"]].sum().reset_index()
        res = finish_summary(mom, _KEYS, level, cl, trial_counts=tr)
    else:
        res = finish_summary(None, _KEYS, level, None, trial_counts=per)
    acc = res.to_frame()
    rows = [{"model": r["model"], "condition": r["condition"], "masking_rate": float(r["masking_rate"]),
             "n_trials": int(r["trials"]), "n": int(r["n"]), "n_correct": int(r["correct"]),
             "n_invalid": int(r["invalid"]), "acc": r["accuracy"], "sd": r["sd"], "se": r["se_trials"],
             "ci_low": r["ci_low"], "ci_high": r["ci_high"], "ci_method": r["ci_method"],
             "se_cluster": r["se_cluster"], "acc_valid": r["accuracy_valid"],
             "invalid": r["invalid"] / r["n"]} for _, r in acc.iterrows()]
    table = pd.DataFrame(rows)
    table["model"] = table["model"].astype(str)
    table["condition"] = table["condition"].astype(str)
    return MaskingAccuracy(table=table, level=level, notes=(*notes, *res.notes), ci_method=res.ci_method,
                           cluster=cl)


# ----------------------------------------------------------------------------- indicators
@dataclass(frozen=True, repr=False)
class MaskingIndicators(Result):
    """NA, EA, KI per masking rate and their MR-weighted and plain averages.

    ``table``: model, condition, masking_rate, acc, acc0, na, acc_baseline,
    na_baseline, ea, ki (ea, ki null without a baseline).
    ``averages``: model, condition, kind (``weighted`` or ``plain``), acc, na, ea, ki.
    ``notes``: what was undefined or left out, and why.
    """

    table: pd.DataFrame
    averages: pd.DataFrame
    accuracy: MaskingAccuracy
    has_baseline: bool
    notes: tuple[str, ...] = field(default=())

    def to_frame(self) -> pd.DataFrame:
        return self.table.copy()

    def _avg(self, kind: str) -> dict[str, dict[str, dict[str, float]]]:
        out: dict[str, dict[str, dict[str, float]]] = {}
        for r in self.averages[self.averages["kind"] == kind].itertuples(index=False):
            out.setdefault(r.model, {})[r.condition] = {"acc": r.acc, "na": r.na, "ea": r.ea, "ki": r.ki}
        return out

    def to_dict(self) -> dict[str, Any]:
        """The ``mrcstats masking --json`` object: acc, sd, acc_valid, invalid, weighted."""
        d = self.accuracy.to_dict()
        d["weighted"] = self._avg("weighted")
        return d

    def summary(self, notes: bool = True) -> str:
        """Text tables; ``notes=False`` leaves out the notes (the CLI prints them on stderr)."""
        lines = [self.accuracy.summary(notes=False), "",
                 "Indicators, MR-weighted <X> = sum MR*X / sum MR (seed App. D) and plain mean over MR"]
        lines.append(f"{'model':<28} {'condition':<10} {'kind':<8} {'acc':>8} {'NA':>8} {'EA':>8} {'KI':>8}")
        for r in self.averages.itertuples(index=False):
            lines.append(f"{r.model[:28]:<28} {r.condition:<10} {r.kind:<8} {_fmt(r.acc):>8} "
                         f"{_fmt(r.na):>8} {_fmt(r.ea):>8} {_fmt(r.ki):>8}")
        if not self.has_baseline:
            lines.append("EA and KI need a baseline log (--baseline), e.g. UQA in the seed.")
        return summary_text(lines, self.notes if notes else ())


def _acc0_for(acc0: float | Mapping[str, float] | None, g: pd.DataFrame, model: str,
              condition: str, what: str) -> float:
    if isinstance(acc0, Mapping):
        for k in (condition, model, f"{model}/{condition}"):
            if k in acc0:
                return float(acc0[k])
        acc0 = None
    if acc0 is not None:
        return float(acc0)
    at0 = g.loc[g["masking_rate"] == 0, "acc"]
    if at0.empty:
        raise InputError(f"{what}: model {model!r}, condition {condition!r} has no MR = 0 rows, so the "
                         "mask-free accuracy Acc_0 is unknown; pass acc0 (--acc0, a fraction such as 0.8984)")
    return float(at0.iloc[0])


def masking_indicators(log: Any,
                       baseline: Any = None,
                       acc0: float | Mapping[str, float] | None = None,
                       *, baseline_acc0: float | None = None, cluster: str | None = "cluster") -> MaskingIndicators:
    """NA, EA and KI per masking rate, with MR-weighted and plain averages (seed 2.3, App. D).

    Parameters
    ----------
    log : canonical log, log dataset (:func:`mrcstats.open_dataset`, counted by DuckDB) or a
        :class:`MaskingAccuracy` of the data set (RQA in the seed).
    baseline : the background-knowledge baseline U (UQA in the seed), same form.
        Matched on model and condition (a baseline with a single model serves
        every model) and masking rate. Without it EA and KI are null.
    acc0 : mask-free accuracy Acc_0 as a fraction; default the MR = 0 accuracy
        of each model x condition. A mapping may give it per condition or model.
    baseline_acc0 : the same for the baseline (default its MR = 0 accuracy).
    cluster : the column the accuracy interval is clustered on (:func:`masking_accuracy`).

    Returns
    -------
    MaskingIndicators. ``<X>`` averages skip MRs where X is undefined (KI at
    NA >= 1, including MR = 0), and ``notes`` says how many were skipped.

    Examples
    --------
    >>> import pandas as pd
    >>> log = pd.DataFrame({"model": "m", "item": ["a", "b"] * 2, "masking_rate": [0, 0, 50, 50],
    ...                     "correct": pd.array([True, True, True, False], dtype="boolean")})
    >>> masking_indicators(log).averages.loc[0, ["acc", "na"]].tolist()
    [0.5, 0.5]
    """
    if acc0 is not None and not isinstance(acc0, Mapping):
        try:
            acc0 = float(acc0)
        except (TypeError, ValueError):
            raise InputError(f"acc0 must be a number (a fraction such as 0.8984), got {acc0!r}") from None
        if not 0 < acc0 <= 1:
            raise InputError(f"acc0 is a fraction in (0, 1] (0.8984 for 89.84 %), got {acc0!r}")
    acc = log if isinstance(log, MaskingAccuracy) else masking_accuracy(log, cluster=cluster)
    base = None
    if baseline is not None:
        base = baseline if isinstance(baseline, MaskingAccuracy) else masking_accuracy(baseline, cluster=cluster)
    notes: list[str] = list(acc.notes)
    rows = []
    for (model, cond), g in acc.table.groupby(["model", "condition"], sort=False):
        g = g.sort_values("masking_rate")
        a0 = _acc0_for(acc0, g, model, cond, "masking_indicators")
        na = normalized_accuracy(g["acc"], a0)
        part = pd.DataFrame({"model": model, "condition": cond, "masking_rate": g["masking_rate"].to_numpy(),
                             "acc": g["acc"].to_numpy(), "acc0": a0, "na": na,
                             "acc_baseline": np.nan, "na_baseline": np.nan, "ea": np.nan, "ki": np.nan})
        if base is not None:
            bt = base.table
            bm = bt[bt["model"] == model]
            if bm.empty and bt["model"].nunique() == 1:
                bm = bt
            bg = bm[bm["condition"] == cond]
            if bg.empty:
                notes.append(f"baseline has no rows for model {model!r}, condition {cond!r}: EA and KI are null")
            else:
                bg = bg.sort_values("masking_rate")
                b0 = (baseline_acc0 if baseline_acc0 is not None
                      else _acc0_for(None, bg, model, cond, "masking_indicators (baseline)"))
                bmap = dict(zip(bg["masking_rate"], bg["acc"]))
                part["acc_baseline"] = [bmap.get(r, np.nan) for r in part["masking_rate"]]
                part["na_baseline"] = normalized_accuracy(part["acc_baseline"], b0)
                miss = int(part["acc_baseline"].isna().sum())
                if miss:
                    notes.append(f"{model} / {cond}: {plural(miss, 'masking rate')} missing in the baseline; "
                                 "EA and KI are null there")
                part["ea"] = effective_accuracy(part["na"], part["na_baseline"], a0)
                part["ki"] = knowledge_independence(part["na"], part["na_baseline"])
                undef = (part["na"] >= 1) & part["na_baseline"].notna()
                if undef.any():
                    mrs = ", ".join(mr_key(r) for r in part.loc[undef, "masking_rate"])
                    notes.append(f"{model} / {cond}: KI undefined where NA >= 1 (MR = {mrs}); "
                                 "left out of the averages")
        rows.append(part)
    table = pd.concat(rows, ignore_index=True)
    avgs = []
    for (model, cond), g in table.groupby(["model", "condition"], sort=False):
        for kind, f in (("weighted", mr_weighted_mean), ("plain", mr_plain_mean)):
            avgs.append({"model": model, "condition": cond, "kind": kind,
                         **{c: f(g["masking_rate"], g[c]) for c in ("acc", "na", "ea", "ki")}})
    averages = pd.DataFrame(avgs)
    for n in notes:
        warnings.warn(n, stacklevel=2)
    return MaskingIndicators(table=table, averages=averages, accuracy=acc,
                             has_baseline=base is not None, notes=tuple(notes))
