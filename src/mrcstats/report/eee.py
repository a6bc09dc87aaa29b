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

The files are built in a hidden staging folder beside ``OUT`` that replaces it at the end, with the files
already in ``OUT`` moved in (:mod:`mrcstats._staging`): a failure leaves ``OUT`` as it was, and an earlier
export's files (other models, other evaluations) stay. ``OUT`` may not be, hold or lie inside a file the log
was read from (``attrs["sources"]``; :func:`mrcstats._files.input_clash`).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mrcstats.errors import InputError

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _segment(s: str) -> str:
    """A path segment of the datastore layout (no slash, never empty)."""
    return _SAFE.sub("_", s).strip("._") or "unknown"


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

    Args:
        log: a canonical log (or a :class:`~mrcstats.io.dataset.LogDataset`: loaded with ``to_log()``).
        out_dir: folder for ``<evaluation>/<developer>/<model>/<uuid>.json`` and ``<uuid>_samples.jsonl``.
        evaluation_name: the EEE ``evaluation_name`` of every row; default the log's ``task`` column when it
            has one, else ``"evaluation"``. A row's ``sample_id`` is its item without ``<evaluation_name>:``.
        source_organization_name, evaluator_relationship: ``source_metadata`` fields (``first_party``,
            ``third_party``, ``collaborative`` or ``other``).
        eval_library: ``(name, version)`` of the tool that ran the evaluation (e.g. ``("inspect_ai", "0.3.285")``).
        source_name: ``source_metadata.source_name`` (default: the log's source format).
        retrieved_timestamp: Unix time text of the export (default now); with the same value the same log
            gives the same files (file names are derived from the evaluation id).

    Raises:
        InputError: an invalid log, a bad option, a record the EEE schemas refuse, an unwritable folder.
    """
    from mrcstats._files import check_output_path, resolve_path
    from mrcstats._staging import Staging
    from mrcstats.io.eee import SCHEMA_VERSION, instance_record, stable_uuid, validate_eee
    from mrcstats.io.schema import validate_log
    from mrcstats.stats.accuracy import CI_METHODS, summarize_frame

    if hasattr(log, "to_log") and not isinstance(log, pd.DataFrame):
        log = log.to_log()
    attrs = dict(getattr(log, "attrs", {}) or {})
    log = validate_log(log)
    if evaluator_relationship not in ("first_party", "third_party", "collaborative", "other"):
        raise InputError(f"evaluator_relationship must be first_party, third_party, collaborative or other, got "
                         f"{evaluator_relationship!r}")
    if not (isinstance(eval_library, (tuple, list)) and len(eval_library) == 2):
        raise InputError(f"eval_library must be (name, version), got {eval_library!r}")
    if evaluation_name is not None and (not isinstance(evaluation_name, str) or not evaluation_name.strip()):
        raise InputError(f"evaluation_name must be a non-empty name, got {evaluation_name!r}")
    stamp = retrieved_timestamp or f"{time.time():.0f}"
    work = log.copy()
    if evaluation_name is not None:
        work["_evaluation"] = evaluation_name
    elif "task" in work.columns and work["task"].notna().all():
        work["_evaluation"] = work["task"].astype(str)
    else:
        work["_evaluation"] = "evaluation"
    summary = summarize_frame(work, ["_evaluation", "model", "condition"]).to_frame()
    sources = attrs.get("sources")
    # the files the log was read from (read_log records them) are inputs: the folder may not be, hold or lie
    # inside one; a link to a folder is followed, so the folder it names is the one merged into
    out = resolve_path(check_output_path(out_dir, what="write_eee", kind="folder",
                                         inputs=sources if isinstance(sources, (list, tuple)) else ()), "write_eee")
    if out.parent == out:
        raise InputError(f"write_eee {out_dir}: give a folder below {out}, not the root of the file system")
    plans: list[tuple[Path, bytes]] = []
    for (ev_name, model), part in work.groupby(["_evaluation", "model"], sort=True):
        ev_name, model = str(ev_name), str(model)
        evaluation_id = f"{ev_name}/{model}/{stamp}"
        uid = stable_uuid(evaluation_id)
        developer, _, short = model.rpartition("/")
        folder = f"{_segment(ev_name)}/{_segment(developer or 'unknown')}/{_segment(short or model)}"
        rid = {c: ("mean_score" if _graded(part[part["condition"] == c]) else "accuracy") + (f"[{c}]" if c else "")
               for c in part["condition"].unique()}
        lines = []
        for i, row in enumerate(part.to_dict("records")):
            rec = instance_record(row, evaluation_id=evaluation_id, evaluation_name=ev_name,
                                  evaluation_result_id=rid[row["condition"]])
            validate_eee(rec, "instance", f"{out / folder / (uid + '_samples.jsonl')}: line {i + 1}")
            lines.append(json.dumps(rec, ensure_ascii=False, allow_nan=False))
        samples = ("\n".join(lines) + "\n").encode("utf-8")
        results = []
        for cond in sorted(rid):
            rows = part[part["condition"] == cond]
            head = _headline_result(rows, ev_name, cond, rid[cond], summary, model)
            if head is not None:
                results.append(head)
                continue
            if _graded(rows):
                results.append(_mean_score_result(rows, ev_name, cond, rid[cond]))
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
            results.append({
                "evaluation_result_id": rid[cond],
                "evaluation_name": ev_name,
                "source_data": {"dataset_name": ev_name, "source_type": "other"},
                "metric_config": {"evaluation_description": "accuracy (invalid answers count as wrong; trials "
                                                            "pooled)" + (f"; condition {cond!r}" if cond else ""),
                                  "metric_id": "accuracy", "metric_name": "accuracy", "metric_kind": "accuracy",
                                  "metric_unit": "proportion", "lower_is_better": False,
                                  "score_type": "continuous", "min_score": 0.0, "max_score": 1.0},
                "score_details": {"score": float(r["accuracy"]), "uncertainty": unc,
                                  "details": {"invalid": str(int(r["invalid"])), "correct": str(int(r["correct"]))}},
            })
        aggregate = {
            "schema_version": SCHEMA_VERSION,
            "evaluation_id": evaluation_id,
            "retrieved_timestamp": stamp,
            "source_metadata": {"source_name": source_name or f"mrcstats export ({attrs.get('format') or 'canonical'} log)",
                                "source_type": "evaluation_run",
                                "source_organization_name": str(source_organization_name),
                                "evaluator_relationship": evaluator_relationship,
                                "additional_details": {"exported_by": _exported_by()}},
            "eval_library": {"name": str(eval_library[0]), "version": str(eval_library[1])},
            "model_info": {"name": short or model, "id": model,
                           **({"developer": developer} if developer else {}),
                           "additional_details": {"deployment_type": "unknown", "model_availability": "unknown"}},
            "evaluation_results": results,
            "detailed_evaluation_results": {"format": "jsonl",
                                            "file_path": f"data/{folder}/{uid}_samples.jsonl",
                                            "hash_algorithm": "sha256",
                                            "checksum": hashlib.sha256(samples).hexdigest(),
                                            "total_rows": len(lines)},
        }
        validate_eee(aggregate, "aggregate", str(out / folder / f"{uid}.json"))
        plans.append((out / folder / f"{uid}_samples.jsonl", samples))
        plans.append((out / folder / f"{uid}.json",
                      (json.dumps(aggregate, indent=2, ensure_ascii=False) + "\n").encode("utf-8")))
    # every file is built in a staging folder beside ``out`` that replaces it at the end, the files already in
    # ``out`` moved in (mrcstats._staging): a failure half-way leaves ``out`` as it was, never some models' files
    with Staging(out, {"out": (out, "dir", ())}) as st:
        root = st.path("out")
        try:
            root.mkdir()
            if out.is_dir():
                shutil.copymode(out, root)
            for path, data in plans:
                f = root / path.relative_to(out)
                f.parent.mkdir(parents=True, exist_ok=True)
                f.write_bytes(data)
        except OSError as exc:
            raise InputError(f"write_eee {out}: cannot write beside it ({exc.strerror or exc}); nothing was "
                             f"changed") from None
        st.commit()
    return [path for path, _ in plans]


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
    graded = _graded(rows)
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


def _graded(rows: pd.DataFrame) -> bool:
    """A graded group: some row has a score but no binary outcome (``correct`` <NA>)."""
    return "score" in rows.columns and bool((rows["correct"].isna() & rows["score"].notna()).any())


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
