"""Share a canonical log as Every Eval Ever files (aggregate ``<uuid>.json`` + ``<uuid>_samples.jsonl``).

:func:`write_eee` writes, for each (evaluation, model) of the log, the aggregate and its instance-level
samples file in the EEE datastore layout (``OUT/<evaluation>/<developer>/<model>/<uuid>.json``; copy
``OUT``'s contents into the datastore's ``data/``), each record validated against the bundled EEE 0.3.0
schemas before anything is written. The record mapping is :mod:`mrcstats.io.eee`'s
(:func:`~mrcstats.io.eee.instance_record`); the aggregate's ``score_details`` per condition are, for a log
read from Inspect (it declares an epoch reducer), the tool's own headline -- epochs reduced per sample, then
the mean, with Inspect's stderr, as ``results.scores`` and EEE's own Inspect converter give it -- and
otherwise mrcstats'
accuracy (:func:`mrcstats.stats.accuracy.summarize_frame`: invalid answers count as wrong, trials pooled)
with the cluster-robust standard error (Miller 2024, "Adding error bars to evals", arXiv:2411.00640),
its Wilson interval and the number of rows; a graded group (rows with a ``score`` but no binary ``correct``)
gets the mean score. Reading the files back with ``mrcstats.read_log`` gives the
same rows.

The files, their layout and the staging are :func:`mrcstats.io.eee.write_eee_files`' (an io writer); this module
gives it the aggregate results (the statistics). The files are built in a hidden staging folder beside ``OUT``
that replaces it at the end, with the files
already in ``OUT`` moved in (:mod:`mrcstats._staging`): a failure leaves ``OUT`` as it was, and an earlier
export's files (other models, other evaluations) stay. ``OUT`` may not be, hold or lie inside a file the log
was read from (``attrs["sources"]``; :func:`mrcstats._files.input_clash`).
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mrcstats.io.eee import is_graded


def _finite(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if np.isfinite(f) else None


def write_eee(log: Any, out_dir: str | os.PathLike, *, evaluation_name: str | None = None,
              source_organization_name: str = "unknown", evaluator_relationship: str = "third_party",
              eval_library: tuple[str, str] = ("unknown", "unknown"), source_name: str | None = None,
              retrieved_timestamp: str | None = None) -> list[Path]:
    """Write ``log`` as Every Eval Ever aggregate + samples files under ``out_dir``; returns the paths written.

    The files are :func:`mrcstats.io.eee.write_eee_files`'s (its arguments, the same here); each aggregate
    result is the tool's headline (:func:`_headline_result`), a graded group's mean score or mrcstats' accuracy
    with its cluster-robust SE and interval (:func:`_eee_results`).

    Raises:
        InputError: an invalid log, a bad option, a record the EEE schemas refuse, an unwritable folder.
    """
    from mrcstats.io.eee import write_eee_files

    return write_eee_files(log, out_dir, _eee_results, evaluation_name=evaluation_name,
                           source_organization_name=source_organization_name,
                           evaluator_relationship=evaluator_relationship, eval_library=eval_library,
                           source_name=source_name, retrieved_timestamp=retrieved_timestamp,
                           exported_by=_exported_by())


def _eee_results(work: pd.DataFrame, rids: Mapping[tuple[str, str, str], str]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """The ``evaluation_results`` entry of each (evaluation, model, condition) of ``work`` (the log with its
    ``_evaluation`` column), by the result ids :func:`~mrcstats.io.eee.write_eee_files` gives."""
    from mrcstats.stats.accuracy import CI_METHODS, summarize_frame

    summary = summarize_frame(work, ["_evaluation", "model", "condition"]).to_frame()
    out = {}
    for (ev_name, model, cond), rows in work.groupby(["_evaluation", "model", "condition"], sort=True):
        ev_name, model = str(ev_name), str(model)
        key = (ev_name, model, cond)
        head = _headline_result(rows, ev_name, cond, rids[key], summary, model)
        if head is not None:
            out[key] = head
            continue
        if is_graded(rows):
            out[key] = _mean_score_result(rows, ev_name, cond, rids[key])
            continue
        r = summary[(summary["_evaluation"] == ev_name) & (summary["model"] == model)
                    & (summary["condition"] == cond)].iloc[0]
        unc: dict[str, Any] = {"num_samples": int(r["n"])}
        se = _finite(r["se_cluster"])
        if se is not None:
            unc["standard_error"] = {"value": se, "method": "cluster-robust (mrcstats; Miller 2024)"}
        lo, hi = _finite(r["ci_low"]), _finite(r["ci_high"])
        if lo is not None and hi is not None:
            unc["confidence_interval"] = {"lower": lo, "upper": hi, "confidence_level": 0.95,
                                          "method": CI_METHODS.get(str(r["ci_method"]), str(r["ci_method"]))}
        out[key] = {
            "evaluation_result_id": rids[key],
            "evaluation_name": ev_name,
            "source_data": {"dataset_name": ev_name, "source_type": "other"},
            "metric_config": {"evaluation_description": "accuracy (invalid answers count as wrong; trials "
                                                        "pooled)" + (f"; condition {cond!r}" if cond else ""),
                              "metric_id": "accuracy", "metric_name": "accuracy", "metric_kind": "accuracy",
                              "metric_unit": "proportion", "lower_is_better": False,
                              "score_type": "continuous", "min_score": 0.0, "max_score": 1.0},
            "score_details": {"score": float(r["accuracy"]), "uncertainty": unc,
                              "details": {"invalid": str(int(r["invalid"])), "correct": str(int(r["correct"]))}},
        }
    return out


def _headline_result(rows: pd.DataFrame, ev_name: str, cond: str, rid: str, summary: pd.DataFrame,
                     model: str) -> dict[str, Any] | None:
    """The aggregate of a group read from an Inspect log (it declares an epoch reducer): the tool's own headline,
    as Inspect's ``results.scores`` and the EEE converter (``every_eval_ever convert inspect``: ``score`` =
    the metric value, ``standard_error`` = Inspect's ``stderr``) give it -- each sample's epochs reduced by the
    first declared reducer, then the mean over samples (:func:`mrcstats.stats.headline.inspect_headline`) --
    with the trial-pooled accuracy and the other reducers in ``details``. None for a log without a reducer, or
    a group holding several tasks or scorers (no one headline; the pooled accuracy is written then)."""
    from mrcstats.stats.headline import has_headline, inspect_headline

    if not has_headline(rows):
        return None
    h = inspect_headline(rows).to_frame()
    keys = [c for c in ("model", "condition", "task", "scorer") if c in h.columns]
    if h.empty or len(h[keys].drop_duplicates()) != 1:
        return None
    first = h.iloc[0]
    graded = is_graded(rows)
    details: dict[str, str] = {"reducer": str(first["reducer"]), "samples": str(int(first["samples"])),
                               "trials": str(int(first["trials"]))}
    for _, r in h.iloc[1:].iterrows():
        details[f"reducer {r['reducer']}"] = repr(float(r["value"]))
    pooled = summary[(summary["_evaluation"] == ev_name) & (summary["model"] == model)
                     & (summary["condition"] == cond)]
    if not graded and len(pooled):
        r = pooled.iloc[0]
        details.update({"trial_pooled_accuracy": repr(float(r["accuracy"])), "invalid": str(int(r["invalid"])),
                        "correct": str(int(r["correct"]))})
    unc: dict[str, Any] = {"num_samples": int(first["samples"])}
    se = _finite(first["stderr"])
    if se is not None:
        unc["standard_error"] = {"value": se, "method": f"Inspect stderr() over samples after the {first['reducer']} "
                                                        f"epoch reducer"}
    kind = ("mean_score", "mean score", "score") if graded else ("accuracy", "accuracy", "accuracy")
    sc = rows["score"].dropna().to_numpy(dtype=float) if "score" in rows.columns else np.array([])
    return {"evaluation_result_id": rid, "evaluation_name": ev_name,
            "source_data": {"dataset_name": ev_name, "source_type": "other"},
            "metric_config": {"evaluation_description": f"Inspect's headline ({kind[1]}): each sample's epochs reduced "
                                                        f"by {first['reducer']}, then the mean over samples, as "
                                                        f"results.scores" + (f"; condition {cond!r}" if cond else ""),
                              "metric_id": kind[0], "metric_name": kind[1], "metric_kind": kind[2],
                              **({} if graded else {"metric_unit": "proportion"}),
                              "lower_is_better": False, "score_type": "continuous",
                              "min_score": min(0.0, float(sc.min())) if len(sc) else 0.0,
                              "max_score": max(1.0, float(sc.max())) if len(sc) else 1.0},
            "score_details": {"score": float(first["value"]), "uncertainty": unc, "details": details}}


def _mean_score_result(rows: pd.DataFrame, ev_name: str, cond: str, rid: str) -> dict[str, Any]:
    """The aggregate of a graded group: the mean ``score`` over the rows that have one (no SE here: the
    graded-score summary is :mod:`mrcstats.stats`' to give)."""
    sc = rows["score"].dropna().to_numpy(dtype=float)
    return {"evaluation_result_id": rid, "evaluation_name": ev_name,
            "source_data": {"dataset_name": ev_name, "source_type": "other"},
            "metric_config": {"evaluation_description": "mean graded score" + (f"; condition {cond!r}" if cond else ""),
                              "metric_id": "mean_score", "metric_name": "mean score", "metric_kind": "score",
                              "lower_is_better": False, "score_type": "continuous",
                              "min_score": min(0.0, float(sc.min())) if len(sc) else 0.0,
                              "max_score": max(1.0, float(sc.max())) if len(sc) else 1.0},
            "score_details": {"score": float(sc.mean()) if len(sc) else 0.0,
                              "uncertainty": {"num_samples": len(sc)}}}


def _exported_by() -> str:
    from mrcstats import __version__

    return f"mrcstats {__version__}"
