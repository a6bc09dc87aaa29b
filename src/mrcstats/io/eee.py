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

Writing: :func:`eee_records` turns a canonical log into aggregates and instance records and
:func:`validate_eee` checks them against the bundled schemas; :func:`mrcstats.report.eee.write_eee`
(``mrcstats export --format eee``) writes them with mrcstats' accuracy and cluster-robust SE.
"""
from __future__ import annotations

import hashlib
import json
import uuid
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
