"""Every Eval Ever (EEE): the EvalEval coalition's shared schema for evaluation results, read and written.

An EEE evaluation is an aggregate ``<uuid>.json`` (``eval.schema.json``: ``evaluation_id``, ``model_info``,
``eval_library``, ``evaluation_results[]`` with each result's ``score_details.score``, and
``detailed_evaluation_results.file_path`` naming the instance-level file) beside its
``<uuid>_samples.jsonl`` (``instance_level_eval.schema.json``: one record per sample and aggregate
result: ``model_id``, ``evaluation_name``, ``evaluation_result_id``, ``sample_id``, ``input``, ``output``,
``answer_attribution``, ``evaluation: {score, is_correct}``, ``metadata``). Schema version 0.3.0 of the
``every-eval-ever`` package (https://github.com/evaleval/every_eval_ever); the two schema files ship with
mrcstats (``mrcstats/io/schemas/eee/``, MIT licence).

Reading (:func:`read_eee`, format ``eee``): an aggregate ``.json`` is read with its samples file (the
``file_path`` base name, else ``<stem>_samples.jsonl``, beside it); a samples file alone is read too.
One canonical row per instance record:

* model = ``model_id`` (else the aggregate's ``model_info.id``, else ``--model``);
* item = ``<evaluation_name>:<sample_id>`` (``metadata.item`` when mrcstats wrote one);
* trial = ``metadata.epoch`` - 1 (the Inspect converter's 1-based epoch; 0 without it);
* condition = ``metadata.condition`` when present, else the ``evaluation_result_id`` when one evaluation
  has several results per sample (several metrics or filters: the rows are kept apart, never merged),
  else ``""``; cluster = ``metadata.cluster`` when present (else the item);
* correct = ``evaluation.is_correct`` (<NA> when ``metadata.correct`` is ``"none"``: a row without a binary
  outcome that mrcstats wrote); ``score`` (Float64) = ``evaluation.score`` (<NA> when ``metadata.score`` is
  ``"none"``);
* response = the first ``output.raw``, pred = the terminal ``answer_attribution`` value, gold = the
  ``input.reference`` texts, question = ``input.raw``; ``task`` (= evaluation_name), ``sample_id`` and
  ``metric`` (= evaluation_result_id) columns are kept.

Records with an ``error`` are left out and counted in ``attrs["skipped"]`` (Inspect leaves errored samples
out of its metrics). ``attrs["eee"]`` keeps the aggregate's results (``evaluation_name``,
``evaluation_result_id``, ``score``) -- the tool's own headline numbers.

Writing: :func:`instance_record` turns a canonical row into an instance record, :func:`validate_eee` checks
records against the bundled schemas and :func:`write_eee_files` writes the datastore layout (files staged
beside the folder, validated before anything is written) with the aggregate results its caller computes;
:func:`mrcstats.report.eee.write_eee` (``mrcstats export --format eee``) gives them mrcstats' accuracy and
cluster-robust SE, or the tool's headline.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mrcstats.errors import InputError
from mrcstats.io.source import Source, load_source

#: the EEE schema version of the bundled schema files (every-eval-ever 0.3.0)
SCHEMA_VERSION = "0.3.0"
#: the bundled schema files, by kind
SCHEMA_FILES = {"aggregate": "eval.schema.json", "instance": "instance_level_eval.schema.json"}


def looks_like_eee(obj: Any) -> bool:
    """True for an EEE aggregate (``evaluation_results`` + ``model_info``) or instance-level record
    (``sample_id`` + ``evaluation``), each with ``schema_version`` and ``evaluation_id``."""
    if not isinstance(obj, dict) or "schema_version" not in obj or "evaluation_id" not in obj:
        return False
    return ("evaluation_results" in obj and "model_info" in obj) or ("sample_id" in obj and "evaluation" in obj)


def _is_aggregate(obj: Any) -> bool:
    return isinstance(obj, dict) and "evaluation_results" in obj


# ----------------------------------------------------------------------------- reading


def _sidecar(src: Source, agg: dict[str, Any]) -> Path | None:
    """The samples file of an aggregate: ``detailed_evaluation_results.file_path``'s base name beside it, else
    ``<stem>_samples.jsonl`` (each optionally ``.gz``)."""
    names = []
    det = agg.get("detailed_evaluation_results")
    if isinstance(det, dict) and isinstance(det.get("file_path"), str):
        names.append(det["file_path"].replace("\\", "/").rsplit("/", 1)[-1])
    names.append(f"{src.stem}_samples.jsonl")
    for n in names:
        for cand in (src.path.parent / n, src.path.parent / f"{n}.gz"):
            if cand.is_file():
                return cand
    return None


def aggregate_beside(samples: Path) -> Path | None:
    """The aggregate ``<uuid>.json`` beside a ``<uuid>_samples.jsonl`` (None when absent)."""
    name = samples.name.lower().removesuffix(".gz")
    if not name.endswith("_samples.jsonl"):
        return None
    stem = samples.name[: len(name) - len("_samples.jsonl")]
    for cand in (samples.parent / f"{stem}.json", samples.parent / f"{stem}.json.gz"):
        if cand.is_file():
            return cand
    return None


def _records(src: Source) -> list[Any]:
    doc = None
    try:
        doc = src.json()
    except InputError:
        pass
    return [doc] if isinstance(doc, dict) else src.json_lines()


def _where(src: Source, line: int) -> str:
    return f"{src.name}: line {line}"


def _epoch_trial(meta: dict[str, Any], src: Source, line: int) -> int:
    ep = meta.get("epoch")
    if ep is None or ep == "":
        return 0
    try:
        e = int(str(ep))
    except ValueError:
        e = 0
    if e < 1 or str(e) != str(ep).strip():
        raise InputError(f"{_where(src, line)}: metadata.epoch is {ep!r}; EEE epochs (Inspect's) are whole "
                         f"numbers from 1")
    return e - 1


def _terminal_value(attr: Any) -> str | None:
    if not isinstance(attr, list) or not attr:
        return None
    items = [a for a in attr if isinstance(a, dict)]
    term = [a for a in items if a.get("is_terminal")] or items
    v = term[-1].get("extracted_value") if term else None
    return None if v is None else str(v)


def read_eee(src: Source, model: str | None = None) -> pd.DataFrame:
    """Read an EEE aggregate ``.json`` with its samples file, or a samples ``.jsonl`` alone, into rows with
    canonical field names (see the module docstring for the mapping)."""
    recs = _records(src)
    agg: dict[str, Any] | None = None
    samples_src = src
    if len(recs) == 1 and _is_aggregate(recs[0]):
        agg = recs[0]
        path = _sidecar(src, agg)
        if path is None:
            n = len(agg.get("evaluation_results") or [])
            raise InputError(f"{src.name}: an Every Eval Ever aggregate ({n} evaluation result(s)) without its "
                             f"instance-level samples file (looked for {src.stem}_samples.jsonl and "
                             f"detailed_evaluation_results.file_path beside it); mrcstats analyses per-sample "
                             f"rows, so put the <uuid>_samples.jsonl beside it")
        samples_src = load_source(path)
        recs = _records(samples_src)
    else:
        beside = aggregate_beside(src.path)
        if beside is not None:
            a = load_source(beside).json()
            agg = a if _is_aggregate(a) else None
    rows: list[dict[str, Any]] = []
    skipped: dict[str, int] = {}
    agg_model = ((agg or {}).get("model_info") or {}).get("id")
    for line, r in enumerate(recs, 1):
        if not isinstance(r, dict) or "sample_id" not in r or not isinstance(r.get("evaluation"), dict):
            raise InputError(f"{_where(samples_src, line)}: not an Every Eval Ever instance record (needs sample_id "
                             f"and evaluation {{score, is_correct}}); is this the samples file of an aggregate?")
        if r.get("error"):
            first = str(r["error"]).strip().splitlines()[0][:120] if str(r["error"]).strip() else "error"
            reason = f"sample errored: {first}"
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        ev = r["evaluation"]
        meta = r.get("metadata") if isinstance(r.get("metadata"), dict) else {}
        name = str(r.get("evaluation_name") or "")
        sid = str(r["sample_id"])
        inp = r.get("input") if isinstance(r.get("input"), dict) else {}
        out = r.get("output") if isinstance(r.get("output"), dict) else {}
        raw = out.get("raw") if isinstance(out.get("raw"), list) else []
        ref = inp.get("reference")
        is_correct = ev.get("is_correct")
        if not isinstance(is_correct, bool):
            raise InputError(f"{_where(samples_src, line)}: evaluation.is_correct is {is_correct!r}; EEE requires "
                             f"true or false")
        score = ev.get("score")
        if isinstance(score, bool) or not isinstance(score, (int, float)):
            raise InputError(f"{_where(samples_src, line)}: evaluation.score is {score!r}; EEE requires a number")
        rows.append({
            "model": r.get("model_id") or agg_model or model,
            "item": meta.get("item") or f"{name}:{sid}",
            "trial": _epoch_trial(meta, samples_src, line),
            "condition": meta.get("condition"),
            "cluster": meta.get("cluster"),
            "masking_rate": float(meta["masking_rate"]) if meta.get("masking_rate") not in (None, "") else None,
            "correct": pd.NA if meta.get("correct") == "none" else is_correct,
            "score": None if meta.get("score") == "none" else float(score),
            "response": str(raw[0]) if raw else None,
            "gold": ", ".join(map(str, ref)) if isinstance(ref, list) and ref else None,
            "pred": _terminal_value(r.get("answer_attribution")),
            "question": inp.get("raw") or None,
            "task": name,
            "sample_id": sid,
            "metric": r.get("evaluation_result_id"),
        })
    if not rows:
        raise InputError(f"{samples_src.name}: no Every Eval Ever instance records to read"
                         + (f" ({sum(skipped.values())} errored)" if skipped else ""))
    df = pd.DataFrame(rows)
    _conditions(df)
    if df["model"].isna().all():
        raise InputError(f"{src.name}: the records name no model_id; pass --model NAME")
    df["score"] = df["score"].astype("Float64")
    df["masking_rate"] = df["masking_rate"].astype("Float64")
    df["correct"] = df["correct"].astype("boolean")
    if df["cluster"].isna().all():
        df = df.drop(columns="cluster")
    df.attrs["skipped"] = skipped
    if agg is not None:
        df.attrs["eee"] = {"evaluation_id": agg.get("evaluation_id"), "eval_library": agg.get("eval_library"),
                           "results": [{"evaluation_name": e.get("evaluation_name"),
                                        "evaluation_result_id": e.get("evaluation_result_id"),
                                        "score": (e.get("score_details") or {}).get("score")}
                                       for e in agg.get("evaluation_results") or [] if isinstance(e, dict)]}
    return df


def _conditions(df: pd.DataFrame) -> None:
    """``condition``: ``metadata.condition``, else the result id where an evaluation has several, else ``""``."""
    cond = df["condition"]
    if cond.notna().all():
        return
    several = df.groupby("task", sort=False)["metric"].transform(lambda s: s.nunique(dropna=False) > 1)
    fill = np.where(several.to_numpy(dtype=bool), df["metric"].fillna("").astype(str), "")
    df["condition"] = cond.where(cond.notna(), pd.Series(fill, index=df.index))


# ----------------------------------------------------------------------------- writing


@cache
def eee_schema(kind: str) -> dict[str, Any]:
    """The bundled EEE JSON schema: ``kind`` = ``"aggregate"`` or ``"instance"``."""
    from importlib.resources import files

    return json.loads(files("mrcstats.io").joinpath("schemas", "eee", SCHEMA_FILES[kind]).read_text("utf-8"))


def validate_eee(obj: Any, kind: str, where: str = "") -> None:
    """Validate one aggregate (``kind="aggregate"``) or instance record (``"instance"``) against the bundled
    EEE schema (jsonschema, draft 7); the first violation raises :class:`InputError` naming its path."""
    import jsonschema

    v = jsonschema.Draft7Validator(eee_schema(kind))
    err = next(iter(sorted(v.iter_errors(obj), key=lambda e: list(e.absolute_path))), None)
    if err is not None:
        at = "/".join(map(str, err.absolute_path)) or "(top)"
        raise InputError(f"{where or kind}: not valid Every Eval Ever {SCHEMA_VERSION} {kind} at {at}: "
                         f"{err.message[:200]}")


def stable_uuid(*parts: str) -> str:
    """A version-4-shaped UUID derived from ``parts`` (the same log gives the same file names)."""
    return str(uuid.UUID(bytes=hashlib.sha256("\x1f".join(parts).encode()).digest()[:16], version=4))


def _str(v: Any) -> str | None:
    return None if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)) else str(v)


def instance_record(row: dict[str, Any], *, evaluation_id: str, evaluation_name: str,
                    evaluation_result_id: str) -> dict[str, Any]:
    """One EEE instance record from one canonical-log row (a dict of its columns).

    ``sample_id`` is the item without its ``<evaluation_name>:`` prefix; the canonical fields EEE has no
    place for go in ``metadata`` (strings): ``epoch`` (trial + 1, as the Inspect converter writes it),
    ``condition`` (always, so a reader keeps ``""`` apart from named conditions), ``cluster`` (when it is
    not the item), ``masking_rate``, ``item`` (when it lacks the
    prefix), ``correct`` = ``"none"`` when the row has no binary outcome (an invalid answer, or a graded
    score only: EEE's ``is_correct`` is then written ``score >= 1``) and ``score`` = ``"none"`` when the row
    has no score (EEE's ``score`` is then written 0 for an invalid answer, else ``correct`` as 0/1).
    """
    item = str(row["item"])
    prefix = f"{evaluation_name}:"
    sid = item.removeprefix(prefix)
    correct = row.get("correct")
    no_outcome = correct is None or correct is pd.NA
    score = row.get("score")
    no_score = score is None or score is pd.NA or (isinstance(score, float) and np.isnan(score))
    value = (0.0 if no_outcome else float(bool(correct))) if no_score else float(score)
    meta: dict[str, str] = {"epoch": str(int(row.get("trial", 0) or 0) + 1)}
    meta["condition"] = _str(row.get("condition")) or ""
    cl = _str(row.get("cluster"))
    if cl is not None and cl != item:
        meta["cluster"] = cl
    mr = _str(row.get("masking_rate"))
    if mr is not None:
        meta["masking_rate"] = repr(float(mr))
    if not item.startswith(prefix):
        meta["item"] = item
    if no_outcome:
        meta["correct"] = "none"
    if no_score and "score" in row:
        meta["score"] = "none"
    gold, pred, resp = _str(row.get("gold")), _str(row.get("pred")), _str(row.get("response"))
    question = _str(row.get("question")) or ""
    rec: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "evaluation_id": evaluation_id,
        "model_id": str(row["model"]),
        "evaluation_name": evaluation_name,
        "evaluation_result_id": evaluation_result_id,
        "sample_id": sid,
        "sample_hash": hashlib.sha256((question + (gold or "")).encode()).hexdigest(),
        "interaction_type": "single_turn",
        "input": {"raw": question, "reference": [gold] if gold is not None else []},
        "output": {"raw": [resp] if resp is not None else []},
        "answer_attribution": ([{"turn_idx": 0, "source": "output.raw", "extracted_value": pred,
                                 "extraction_method": "mrcstats canonical log (pred)", "is_terminal": True}]
                               if pred is not None else []),
        "evaluation": {"score": value, "is_correct": value >= 1.0 if no_outcome else bool(correct)},
        "metadata": meta,
    }
    return rec


_SAFE = re.compile(r"[^A-Za-z0-9._-]+")

#: ``results(log, result_ids) -> {(evaluation, model, condition): evaluation_results entry}`` (:func:`write_eee_files`)
ResultsFn = Callable[[pd.DataFrame, Mapping[tuple[str, str, str], str]], Mapping[tuple[str, str, str], dict[str, Any]]]


def _segment(s: str) -> str:
    """A path segment of the datastore layout (no slash, never empty)."""
    return _SAFE.sub("_", s).strip("._") or "unknown"


def is_graded(rows: pd.DataFrame) -> bool:
    """A graded group: some row has a score but no binary outcome (``correct`` <NA>)."""
    return "score" in rows.columns and bool((rows["correct"].isna() & rows["score"].notna()).any())


def write_eee_files(log: Any, out_dir: str | os.PathLike, results: ResultsFn, *, evaluation_name: str | None = None,
              source_organization_name: str = "unknown", evaluator_relationship: str = "third_party",
              eval_library: tuple[str, str] = ("unknown", "unknown"), source_name: str | None = None,
              retrieved_timestamp: str | None = None, exported_by: str = "mrcstats") -> list[Path]:
    """Write ``log`` as Every Eval Ever aggregate + samples files under ``out_dir``; returns the paths written.

    The files, their layout, the instance records and the aggregate's envelope are this function's; the
    aggregate's ``evaluation_results`` entries are the caller's statistics (``mrcstats.write_eee`` gives
    mrcstats' accuracy or the tool's headline, :mod:`mrcstats.report.eee`).

    Args:
        log: a canonical log (or a :class:`~mrcstats.io.dataset.LogDataset`: loaded with ``to_log()``).
        out_dir: folder for ``<evaluation>/<developer>/<model>/<uuid>.json`` and ``<uuid>_samples.jsonl``.
        results: called once with the validated log (its EEE evaluation name in an ``_evaluation`` column) and
            the ``evaluation_result_id`` of each ``(evaluation, model, condition)`` (``accuracy[<condition>]``,
            ``mean_score[...]`` for a graded group: :func:`is_graded`); returns each group's
            ``evaluation_results`` entry by the same keys.
        evaluation_name: the EEE ``evaluation_name`` of every row; default the log's ``task`` column when it
            has one, else ``"evaluation"``. A row's ``sample_id`` is its item without ``<evaluation_name>:``.
        source_organization_name, evaluator_relationship: ``source_metadata`` fields (``first_party``,
            ``third_party``, ``collaborative`` or ``other``).
        eval_library: ``(name, version)`` of the tool that ran the evaluation (e.g. ``("inspect_ai", "0.3.285")``).
        source_name: ``source_metadata.source_name`` (default: the log's source format).
        retrieved_timestamp: Unix time text of the export (default now); with the same value the same log
            gives the same files (file names are derived from the evaluation id).
        exported_by: ``source_metadata.additional_details.exported_by``.

    Raises:
        InputError: an invalid log, a bad option, a record the EEE schemas refuse, an unwritable folder.
    """
    from mrcstats._files import check_output_path, resolve_path
    from mrcstats._staging import Staging
    from mrcstats.io.schema import validate_log

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
    rids = {(str(ev), str(model), c): ("mean_score" if is_graded(g) else "accuracy") + (f"[{c}]" if c else "")
            for (ev, model, c), g in work.groupby(["_evaluation", "model", "condition"], sort=True)}
    scores = results(work, rids)
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
        rid = {c: rids[ev_name, model, c] for c in part["condition"].unique()}
        lines = []
        for i, row in enumerate(part.to_dict("records")):
            rec = instance_record(row, evaluation_id=evaluation_id, evaluation_name=ev_name,
                                  evaluation_result_id=rid[row["condition"]])
            validate_eee(rec, "instance", f"{out / folder / (uid + '_samples.jsonl')}: line {i + 1}")
            lines.append(json.dumps(rec, ensure_ascii=False, allow_nan=False))
        samples = ("\n".join(lines) + "\n").encode("utf-8")
        evaluation_results = [scores[ev_name, model, cond] for cond in sorted(rid)]
        aggregate = {
            "schema_version": SCHEMA_VERSION,
            "evaluation_id": evaluation_id,
            "retrieved_timestamp": stamp,
            "source_metadata": {"source_name": source_name or f"mrcstats export ({attrs.get('format') or 'canonical'} log)",
                                "source_type": "evaluation_run",
                                "source_organization_name": str(source_organization_name),
                                "evaluator_relationship": evaluator_relationship,
                                "additional_details": {"exported_by": exported_by}},
            "eval_library": {"name": str(eval_library[0]), "version": str(eval_library[1])},
            "model_info": {"name": short or model, "id": model,
                           **({"developer": developer} if developer else {}),
                           "additional_details": {"deployment_type": "unknown", "model_availability": "unknown"}},
            "evaluation_results": evaluation_results,
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
