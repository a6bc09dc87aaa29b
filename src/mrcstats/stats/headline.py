"""The eval tool's own headline figure: epochs reduced within each sample, then the mean and Inspect's stderr.

A canonical log keeps every epoch of a sample as a trial (the **trial level**, what ``mrcstats summary``
pools). Inspect AI reports something else (``results.scores`` of a log, inspect_ai ``_eval/task/results.py``
``reduce_scores`` + ``compute_eval_scores``): for each sample it first applies the task's epoch reducer to
the sample's epoch scores, then the metrics to the reduced scores, one per sample:

* reducers (``inspect_ai.scorer._reducer``), on the epoch values ``v_1..v_m`` of one sample mapped through
  Inspect's ``value_to_float`` (the ``score`` column; ``mode`` counts the raw values, the ``value`` column):
  ``mean`` = mean(v); ``median`` = median(v); ``mode`` = the most common raw value (first seen wins a tie);
  ``max`` = max(v); ``at_least_k`` = 1 if #{v_j >= 1} >= k else 0; ``pass_at_k`` (Chen et al. 2021, the
  unbiased pass@k) = 1 - prod_{i = m - c + 1}^{m} (1 - k / i) with c = #{v_j >= 1} (1 when m - c < k,
  undefined when m < k); ``pass_k_k`` = C(c, k) / C(m, k);
* metrics on the ``n`` reduced values ``r_s``: ``accuracy()``/``mean()`` = mean(r);
  ``stderr()`` = sd(r) / sqrt(n) with the ``n - 1`` denominator (0 when n < 2) — which equals the
  package's CR1 ``se_cluster`` of the trial level (Miller 2024, Eq. 4, with G / (G - 1)) when each sample is
  one cluster and the reducer is the mean.

Errored and never-run sample-epochs are not in the log (the reader counts them as skipped), so they are
left out as Inspect leaves them out. Samples flagged by ``invalidate_samples`` are kept in ``value`` and
``stderr`` — Inspect's own ``results.scores`` still counts them (``invalidate_samples`` does not recompute
the metrics; an ``eval_set`` retry re-runs them) — and ``value_valid``/``stderr_valid`` give the figure
without them.
"""
from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from mrcstats._jsonout import plain_records
from mrcstats._repr import Result
from mrcstats._words import plural
from mrcstats.errors import InputError
from mrcstats.io.inspect_ai import INSPECT_VALUES, NOANSWER, value_to_float

#: the reducers reproduced (``at_least_<k>``, ``pass_at_<k>`` and ``pass_k_<k>`` take their k from the name)
REDUCERS: tuple[str, ...] = ("mean", "median", "mode", "max", "at_least_k", "pass_at_k", "pass_k_k")
#: columns of :attr:`Headline.table` after the grouping columns
FIELDS: tuple[str, ...] = ("reducer", "samples", "trials", "value", "stderr", "invalidated", "value_valid",
                           "stderr_valid")
_GROUP = ("model", "condition", "task", "scorer")


def _as_key(raw: Any, f: float) -> Any:
    """The value Inspect's ``mode`` counts: the raw letter, else the number (1 == 1.0 == True in Python)."""
    return raw if isinstance(raw, str) and raw in INSPECT_VALUES else f


def reduce_epochs(reducer: str, values: Sequence[float], raw: Sequence[Any] | None = None) -> float:
    """One sample's epoch ``values`` (floats, epoch order) reduced as Inspect's ``reducer`` does (see above)."""
    v = [float(x) for x in values if not (isinstance(x, float) and math.isnan(x))]
    if not v:
        return math.nan
    name, k = _parse(reducer)
    if name == "mean":
        return float(statistics.mean(v))
    if name == "median":
        return float(statistics.median(v))
    if name == "max":
        return max(v)
    if name == "mode":
        keys = [_as_key(r, f) for r, f in zip(raw if raw is not None else v, values)]
        top = Counter(keys).most_common(1)[0][0]
        return INSPECT_VALUES[top] if isinstance(top, str) else float(top)
    c = sum(1 for x in v if x >= 1.0)
    m = len(v)
    if name == "at_least":
        return 1.0 if c >= k else 0.0
    if name == "pass_at":
        if m < k:
            return math.nan
        if m - c < k:
            return 1.0
        return 1.0 - float(np.prod(1.0 - k / np.arange(m - c + 1, m + 1)))
    if name == "pass_k":
        return math.nan if m < k else math.comb(c, k) / math.comb(m, k)
    raise AssertionError(name)  # _parse refused it


def _parse(reducer: str) -> tuple[str, int]:
    r = str(reducer).strip()
    if r in ("mean", "median", "mode", "max"):
        return r, 0
    for name in ("at_least", "pass_at", "pass_k"):
        if r.startswith(name + "_") and r[len(name) + 1:].isdigit():
            return name, int(r[len(name) + 1:])
    raise InputError(f"epoch reducer {reducer!r} is not one mrcstats reproduces ({', '.join(REDUCERS)}); the "
                     f"trial-level figures do not depend on it")


def _mean_stderr(r: np.ndarray) -> tuple[float, float]:
    """Inspect's ``accuracy()``/``mean()`` and ``stderr()`` of the reduced values (sd with n - 1 over sqrt n)."""
    n = len(r)
    if n == 0:
        return math.nan, math.nan
    mean = float(np.mean(r))
    return mean, (float(np.std(r, ddof=1) / math.sqrt(n)) if n >= 2 else 0.0)


@dataclass(frozen=True, repr=False)
class Headline(Result):
    """The tool's headline per (model, condition, task, scorer, reducer); see the module docstring.

    ``table`` columns: the grouping columns present in the log, then ``reducer``, ``samples`` (reduced
    samples), ``trials`` (sample-epochs used), ``value`` and ``stderr`` (Inspect's ``results.scores``),
    ``invalidated`` (samples with an invalidated epoch), ``value_valid`` and ``stderr_valid`` (without them).
    """

    by: tuple[str, ...]
    table: pd.DataFrame = field(repr=False)
    tool: str = "inspect"
    notes: tuple[str, ...] = ()

    def to_frame(self) -> pd.DataFrame:
        return self.table.copy()

    def to_dict(self) -> dict[str, Any]:
        return {"figure": "tool headline: the declared epoch reducer within each sample, then the mean over "
                          "samples and Inspect's stderr (sd/sqrt(n))",
                "tool": self.tool, "groups": plain_records(self.table), "notes": list(self.notes)}

    def summary(self) -> str:
        head = ("Inspect headline (the tool's figure: epochs reduced within each sample by the declared "
                "reducer, then mean and stderr over samples, as results.scores):")
        lines = [head]
        for _, r in self.table.iterrows():
            who = " ".join(str(r[b]) for b in self.by if str(r[b]) != "")
            line = (f"  {who}  reducer {r['reducer']}: {r['value']:.4f} (stderr {r['stderr']:.4f}) over "
                    f"{int(r['samples'])} samples ({int(r['trials'])} sample-epochs)")
            if r["invalidated"]:
                line += (f"; without the {int(r['invalidated'])} invalidated sample(s): {r['value_valid']:.4f} "
                         f"(stderr {r['stderr_valid']:.4f})")
            lines.append(line)
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


#: the columns the headline reads
_NEEDED = ("model", "condition", "task", "scorer", "item", "trial", "correct", "score", "value", "invalidated",
           "reducer")


def has_headline(log: Any) -> bool:
    """True for a log (a frame or a dataset folder) that declares an epoch reducer (an Inspect log: column
    ``reducer``)."""
    cols = log.columns if isinstance(log, pd.DataFrame) else getattr(log, "columns", ())
    return "reducer" in list(cols) and len(log) > 0


def inspect_headline(log: Any) -> Headline:
    """Inspect's headline of a canonical log read from Inspect logs (columns ``reducer``, ``score``, ``value``,
    ``invalidated``): per (model, condition, task, scorer) and declared reducer, the reduced value of each
    sample (item), then their mean and Inspect's stderr. Equals ``results.scores`` of the log (accuracy or
    mean, and stderr)."""
    if not has_headline(log):
        raise InputError("the log declares no epoch reducer (no 'reducer' column): only Inspect logs have the "
                         "tool's headline")
    from mrcstats.backends import dataset_pass

    rows = dataset_pass(log)
    if rows is not None:  # a dataset folder: only the columns needed, through its row pass (DuckDB)
        log = rows.select([c for c in _NEEDED if c in rows.columns()])
    score = log["score"].astype("Float64") if "score" in log.columns else log["correct"].astype("Float64")
    values = score.to_numpy(dtype=float, na_value=np.nan)
    if "value" in log.columns:  # Inspect's N (no answer) is invalid in the log, 0 in Inspect's value_to_float
        none = log["value"].astype("string").str.strip().str.upper().eq(NOANSWER).to_numpy(dtype=bool,
                                                                                               na_value=False)
        values[none & np.isnan(values)] = value_to_float(NOANSWER)
    work = pd.DataFrame({"item": log["item"].astype(str), "trial": log["trial"],
                         "score": values,
                         "raw": log["value"] if "value" in log.columns else score,
                         "invalidated": (log["invalidated"].fillna(False).astype(bool) if "invalidated" in log.columns
                                         else False),
                         "reducer": log["reducer"].astype(str)})
    by = tuple(c for c in _GROUP if c in log.columns)
    for b in by:
        work[b] = log[b].astype(str)
    notes: list[str] = []
    n_null = int(np.isnan(work["score"]).sum())
    if n_null:
        notes.append(f"{plural(n_null, 'row')} without a score left out")
        work = work[~np.isnan(work["score"])]
    rows = []
    for key, g in work.groupby([*by, "reducer"], sort=True):
        key = key if isinstance(key, tuple) else (key,)
        for red in str(key[-1]).split(","):
            try:
                _parse(red)
            except InputError as exc:
                notes.append(str(exc))
                continue
            reduced, invalid = [], []
            for _, s in g.sort_values("trial", kind="stable").groupby("item", sort=False):
                reduced.append(reduce_epochs(red, s["score"].tolist(), s["raw"].tolist()))
                invalid.append(bool(s["invalidated"].any()))
            r = np.asarray(reduced, dtype=float)
            inv = np.asarray(invalid, dtype=bool)
            value, se = _mean_stderr(r)
            value_v, se_v = _mean_stderr(r[~inv]) if inv.any() else (value, se)
            rows.append({**dict(zip(by, key[:-1])), "reducer": red, "samples": len(r), "trials": len(g),
                         "value": value, "stderr": se, "invalidated": int(inv.sum()), "value_valid": value_v,
                         "stderr_valid": se_v})
    return Headline(by=by, table=pd.DataFrame(rows, columns=[*by, *FIELDS]), notes=tuple(notes))
