"""lm-evaluation-harness ``samples_<task>_<timestamp>.jsonl`` files (``--log_samples``).

Each line: ``doc_id``, ``doc``, ``target``, ``arguments``, ``resps``,
``filtered_resps``, ``filter`` and the per-sample metric fields (``acc``,
``exact_match``, ...). Correctness is the first of ``acc`` or ``exact_match`` present
(0/1); a generation whose filtered answer is the harness's ``"[invalid]"`` fallback
(or empty) is an invalid answer (``correct`` <NA>).

* model: a ``model`` field if the records have one, else ``model`` (``--model NAME``), else the model of
  the run's ``results_<timestamp>.json`` beside the samples file (``model_name``, else ``pretrained=`` of
  ``config.model_args``, else ``config.model``; the results file with the samples file's timestamp when
  there are several) — so a folder of harness output folders (``--output_path`` of several models,
  one ``<model>/`` folder each) reads as one log of several models;
* ``task`` column: from the file name (``samples_gsm8k_2024-05-01T10-00-00.jsonl`` -> ``gsm8k``);
* item = ``<task>:<doc_id>``, cluster = item;
* condition = the ``filter`` name when a file scores several filters
  (``strict-match``/``flexible-extract``), else ``""``;
* pred: the filtered answer (generation), or the index of the highest
  log-likelihood choice (multiple choice); gold: ``target``; the ``doc`` is kept as JSON text.
"""
from __future__ import annotations

import json
import math
import re
from typing import Any

import pandas as pd

from mrcstats.errors import InputError
from mrcstats.io.schema import missing_columns_error
from mrcstats.io.source import Source

_TASK_RE = re.compile(r"^samples_(?P<task>.+?)_(?P<ts>\d{4}-\d{2}-\d{2}T[0-9\-\.:]+)$")
_METRICS = ("acc", "exact_match")
INVALID_MARKERS = ("[invalid]", "")


def task_from_name(stem: str) -> str:
    """``samples_gsm8k_2024-05-01T10-00-00.123`` -> ``gsm8k``."""
    m = _TASK_RE.match(stem)
    if m:
        return m.group("task")
    return stem.removeprefix("samples_")


def _first(v: Any) -> Any:
    while isinstance(v, list) and len(v) == 1:
        v = v[0]
    return v


def _pred(filtered: Any) -> str | None:
    v = filtered
    if isinstance(v, list) and v and all(isinstance(x, list) and len(x) == 2 and isinstance(x[0], (int, float))
                                         for x in v):
        # multiple choice: [[loglik, is_greedy], ...] per choice
        lls = [x[0] for x in v]
        return str(max(range(len(lls)), key=lls.__getitem__))
    if isinstance(v, list) and v and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v) \
            and len(v) > 1:
        return str(max(range(len(v)), key=v.__getitem__))
    v = _first(v)
    if v is None:
        return None
    if isinstance(v, list):
        return json.dumps(v)
    return str(v)


def _text(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, (list, dict)):
        return json.dumps(v, ensure_ascii=False)
    return str(v)


def model_from_results(results: dict) -> str | None:
    """The model a harness ``results_<ts>.json`` names: ``model_name``, else ``pretrained=`` of
    ``config.model_args``, else ``config.model``."""
    if not isinstance(results, dict):
        return None
    if results.get("model_name"):
        return str(results["model_name"])
    cfg = results.get("config") or {}
    args = cfg.get("model_args") if isinstance(cfg, dict) else None
    if isinstance(args, str):
        for part in args.split(","):
            k, _, v = part.partition("=")
            if k.strip() in ("pretrained", "model", "model_name", "path") and v.strip():
                return v.strip()
    elif isinstance(args, dict):
        for k in ("pretrained", "model", "model_name", "path"):
            if args.get(k):
                return str(args[k])
    if isinstance(cfg, dict) and cfg.get("model"):
        return str(cfg["model"])
    return None


def _results_model(src: Source) -> str | None:
    """The model named by the harness results file(s) beside a samples file (None when there is none)."""
    from mrcstats.io.source import load_source

    folder = src.path.parent
    files = sorted(f for f in folder.iterdir() if f.is_file() and f.name.startswith("results")
                   and f.name.removesuffix(".gz").endswith(".json"))
    if not files:
        return None
    m = _TASK_RE.match(src.stem)
    ts = m.group("ts") if m else None
    same = [f for f in files if ts and ts in f.name]
    found = {}
    for f in same or files:
        name = model_from_results(load_source(f).json())
        if name:
            found[f.name] = name
    models = sorted(set(found.values()))
    if len(models) > 1:
        raise InputError(f"{src.name}: the results files beside it name different models "
                         f"({', '.join(f'{k}: {v}' for k, v in found.items())}); keep one run per folder or pass "
                         f"--model NAME")
    return models[0] if models else None


def read_harness(src: Source, model: str | None = None) -> pd.DataFrame:
    """Read one harness samples file into rows with canonical field names (see module docstring)."""
    recs = src.json() if src.data.lstrip()[:1] == b"[" else src.json_lines()
    if not recs:
        raise InputError(f"{src.name}: no samples")
    first = recs[0]
    if not isinstance(first, dict) or "doc_id" not in first:
        raise missing_columns_error(["doc_id"], list(first) if isinstance(first, dict) else [], src.name,
                                    "this does not look like lm-evaluation-harness samples; pass another --format")
    metric = next((m for m in _METRICS if m in first), None)
    if metric is None:
        raise missing_columns_error(list(_METRICS), list(first), src.name,
                                    "samples need an 'acc' or 'exact_match' field (0/1)")
    task = task_from_name(src.stem)
    filters = {r.get("filter") for r in recs if isinstance(r, dict)}
    by_filter = len(filters) > 1
    rows = []
    for i, r in enumerate(recs):
        if not isinstance(r, dict):
            raise InputError(f"{src.name}: line {i + 1} is not a JSON object")
        if metric not in r:
            raise InputError(f"{src.name}: line {i + 1} (doc_id {r.get('doc_id')!r}) has no {metric!r} field")
        pred = _pred(r.get("filtered_resps"))
        value = r[metric]
        invalid = metric == "exact_match" and (pred is None or pred.strip() in INVALID_MARKERS)
        resp = _first(r.get("resps"))
        rows.append({
            "model": r.get("model"),
            "item": f"{task}:{r['doc_id']}",
            "condition": (r.get("filter") or "") if by_filter else "",
            "correct": None if invalid else value,
            "response": _text(resp) if not (isinstance(resp, list) and resp and isinstance(resp[0], (int, float)))
            else None,
            "pred": pred,
            "gold": _text(r.get("target")),
            "task": task,
            "doc_id": r["doc_id"],
            "filter": r.get("filter"),
            "doc": _text(r.get("doc")),
        })
    df = pd.DataFrame(rows)
    if df["model"].isna().all():
        if model is None:
            model = _results_model(src)
        if model is None:
            raise InputError(f"{src.name}: harness samples do not name the model and no results_*.json beside "
                             f"them does; pass --model NAME")
        df["model"] = model
    elif model is not None:
        df["model"] = df["model"].fillna(model)
    return df
