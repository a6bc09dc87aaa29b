"""lm-evaluation-harness ``samples_<task>_<timestamp>.jsonl`` files (``--log_samples``).

Each line: ``doc_id``, ``doc``, ``target``, ``arguments``, ``resps``, ``filtered_resps``, ``filter``,
``metrics`` (the names of the per-sample metric fields, lm-eval >= 0.4.3) and the per-sample metric
fields (``acc``, ``exact_match``, ``f1``, ...). Checked against files lm-eval 0.4.13 wrote
(tests/conformance/harness, docs/harness.md).

* outcome: the first of ``acc`` / ``exact_match`` present is binary: ``correct`` and ``score``
  (1.0/0.0). A task with neither is graded: ``score`` = its first numeric metric (``f1``, a custom
  metric, ...) and ``correct`` stays empty unless a threshold is given (docs/scores.md). Every other
  numeric metric is kept as a column of its own name (``acc_norm``, ``f1``). ``--map score=acc_norm``
  analyses that metric instead (the reader is told, so ``correct`` follows it too: binary when its values
  are 0/1); the ``metric`` column, and ``summary``'s ``metric`` field, name the metric used. A generation whose filtered answer is the harness's ``"[invalid]"`` fallback (or empty)
  is an invalid answer (``correct`` and ``score`` <NA>; lm-eval scores it 0, as ``summary`` does by default);
* model: a ``model`` field if the records have one, else ``model`` (``--model NAME`` or
  ``--model PATH=NAME``), else the run's ``results_<timestamp>.json`` beside the samples file (the one
  with the samples file's timestamp when there are several; :func:`model_from_results`). A folder of
  several runs — one ``--output_path`` given to runs of several models — reads as one log of several models;
* ``task`` column: from the file name (``samples_gsm8k_2024-05-01T10-00-00.jsonl`` -> ``gsm8k``);
* item = ``<task>:<doc_id>``, cluster = item;
* condition = the ``filter`` name, always (``none`` for a task without a filter list, as lm-eval's
  ``acc,none`` keys), so every file follows one naming rule;
* ``num_fewshot``: the run's few-shot count for the task (``n-shot`` of the results file beside it), a run
  setting: when one read holds a model at several counts it joins the condition (``none, num_fewshot=2``;
  :func:`mrcstats.io.reader.settings_into_condition`);
* pred: the filtered answer (generation), or the index of the highest log-likelihood choice (multiple
  choice; lm-eval writes the log-likelihoods as text, ``[["-1.1", "False"], ...]``);
  gold: ``target``; the ``doc`` is kept as JSON text.
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


def _number(v: Any) -> float | None:
    """A log-likelihood as lm-eval writes it: a number, or its text (``"-1.1"``); None otherwise."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            f = float(v)
        except ValueError:
            return None
        return f if math.isfinite(f) or f == -math.inf else None
    return None


def _is_multiple_choice(filtered: Any) -> bool:
    """``[[loglik, is_greedy], ...]`` per choice, the log-likelihoods numbers or their text."""
    return isinstance(filtered, list) and len(filtered) > 1 and all(
        isinstance(x, list) and len(x) == 2 and _number(x[0]) is not None for x in filtered)


def _pred(filtered: Any) -> str | None:
    """The answer: the index of the highest log-likelihood (multiple choice, whatever the JSON type of the
    log-likelihoods), else the filtered generation."""
    v = filtered
    if _is_multiple_choice(v):
        lls = [_number(x[0]) for x in v]
        return str(max(range(len(lls)), key=lls.__getitem__))
    if isinstance(v, list) and len(v) > 1 and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                  for x in v):
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


#: the ``model_args`` keys lm-eval takes a run's ``model_name`` from, in its order
#: (``GeneralConfigTracker._get_model_name``); without one it writes a generated ``random_name_id()``
MODEL_ARG_KEYS: tuple[str, ...] = ("peft", "delta", "pretrained", "model", "path", "engine")


def _named_model(args: Any) -> str | None:
    """The model a ``model_args`` names, by lm-eval's own rule (first key of :data:`MODEL_ARG_KEYS`)."""
    if isinstance(args, dict):
        for k in MODEL_ARG_KEYS:
            if args.get(k):
                return str(args[k])
    elif isinstance(args, str):
        parts = dict(p.split("=", 1) for p in args.split(",") if "=" in p)
        for k in MODEL_ARG_KEYS:
            if parts.get(k, "").strip():
                return parts[k].strip()
    return None


def _args_text(args: Any) -> str:
    if isinstance(args, dict):
        return ",".join(f"{k}={v}" for k, v in args.items())
    return str(args or "").strip()


def model_from_results(results: dict) -> str | None:
    """The model a harness ``results_<ts>.json`` names.

    lm-eval's ``model_name`` is the model its ``model_args`` name (``pretrained=``, ``model=``,
    ``path=``, ...); when they name none, it is a generated id (``random_name_id()``, seeded: the same
    for every such run), so the identity is taken from ``config.model`` and ``config.model_args``
    instead: ``dummy``, ``pseudo_alpha``, ``pseudo(skill=0.3)``.
    """
    if not isinstance(results, dict):
        return None
    cfg = results.get("config") or {}
    cfg = cfg if isinstance(cfg, dict) else {}
    args = cfg.get("model_args")
    named = _named_model(args)
    if named:
        return named
    if cfg.get("model"):
        extra = _args_text(args)
        return f"{cfg['model']}({extra})" if extra else str(cfg["model"])
    if results.get("model_name"):
        return str(results["model_name"])
    return None


def _results_of(src: Source) -> dict[str, Any]:
    """The harness results file(s) beside a samples file, ``{file name: its JSON}``: the one with the samples
    file's timestamp when there is one, else all of them (empty when there is none)."""
    from mrcstats.io.source import load_source

    folder = src.path.parent
    files = sorted(f for f in folder.iterdir() if f.is_file() and f.name.startswith("results")
                   and f.name.removesuffix(".gz").endswith(".json"))
    m = _TASK_RE.match(src.stem)
    ts = m.group("ts") if m else None
    same = [f for f in files if ts and ts in f.name]
    return {f.name: load_source(f).json() for f in same or files}


def num_fewshot(results: dict[str, Any], task: str) -> int | None:
    """The few-shot count a harness run used for ``task``: ``n-shot[task]`` of its results file (lm-eval
    >= 0.4), else ``configs[task].num_fewshot``; None when the file does not say."""
    for v in ((results.get("n-shot") or {}).get(task), ((results.get("configs") or {}).get(task) or {}).get(
            "num_fewshot") if isinstance((results.get("configs") or {}).get(task), dict) else None):
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return None


def _results_model(src: Source) -> str | None:
    """The model named by the harness results file(s) beside a samples file (None when there is none)."""
    found = {}
    for fname, res in _results_of(src).items():
        name = model_from_results(res)
        if name:
            found[fname] = name
    models = sorted(set(found.values()))
    if len(models) > 1:
        raise InputError(f"{src.name}: the results files beside it name different models "
                         f"({', '.join(f'{k}: {v}' for k, v in found.items())}); keep one run per folder or pass "
                         f"--model NAME")
    return models[0] if models else None


def _metric_fields(first: dict) -> list[str]:
    """The per-sample metric fields of a record: its ``metrics`` list (lm-eval >= 0.4.3), else the
    known binary ones present."""
    names = first.get("metrics")
    if isinstance(names, list) and names and all(isinstance(n, str) for n in names):
        return [n for n in names if n in first]
    return [m for m in _METRICS if m in first]


def _numeric(v: Any) -> bool:
    return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) or isinstance(v, bool)


def read_harness(src: Source, model: str | None = None, metric: str | None = None) -> pd.DataFrame:
    """Read one harness samples file into rows with canonical field names (see module docstring).

    ``metric`` picks the per-sample metric analysed (``--map score=acc_norm`` passes it; default: the first of
    ``acc``/``exact_match``, else the first numeric one): binary when every value is 0/1 (``correct`` and
    ``score``), graded otherwise; the ``metric`` column names it."""
    recs = src.json() if src.data.lstrip()[:1] == b"[" else src.json_lines()
    if not recs:
        raise InputError(f"{src.name}: no samples")
    first = recs[0]
    if not isinstance(first, dict) or "doc_id" not in first:
        raise missing_columns_error(["doc_id"], list(first) if isinstance(first, dict) else [], src.name,
                                    "this does not look like lm-evaluation-harness samples; pass another --format")
    fields = _metric_fields(first)
    numeric = [m for m in fields if all(_numeric(r.get(m)) for r in recs if isinstance(r, dict))]
    if metric is not None:
        if metric not in numeric:
            found = ", ".join(repr(m) for m in numeric) or "none"
            raise InputError(f"{src.name}: --map score={metric} names no numeric per-sample metric of these "
                             f"harness samples (numeric metric fields: {found})")
        graded = not all(r.get(metric) in (0, 1, None) for r in recs if isinstance(r, dict))
    else:
        metric = next((m for m in _METRICS if m in first), None)
        graded = metric is None
        if graded:
            metric = numeric[0] if numeric else None
    if metric is None:
        found = ", ".join(repr(m) for m in fields) or "none"
        raise missing_columns_error(list(_METRICS), list(first), src.name,
                                    f"samples need a per-sample metric: 'acc' or 'exact_match' (0/1), or a "
                                    f"numeric one such as 'f1' (metric fields found: {found})")
    others = [m for m in fields if m != metric]
    task = task_from_name(src.stem)
    rows = []
    for i, r in enumerate(recs):
        if not isinstance(r, dict):
            raise InputError(f"{src.name}: line {i + 1} is not a JSON object")
        if metric not in r:
            raise InputError(f"{src.name}: line {i + 1} (doc_id {r.get('doc_id')!r}) has no {metric!r} field")
        filtered = r.get("filtered_resps")
        pred = _pred(filtered)
        value = r[metric]
        invalid = not _is_multiple_choice(filtered) and (pred is None or pred.strip() in INVALID_MARKERS)
        resp = _first(r.get("resps"))
        row = {
            "model": r.get("model"),
            "item": f"{task}:{r['doc_id']}",
            "condition": r.get("filter") or "none",
            "correct": None if (invalid or graded) else value,
            "score": None if invalid else value,
            "response": _text(resp) if not (isinstance(resp, list) and resp and _number(resp[0]) is not None)
            else None,
            "pred": pred,
            "gold": _text(r.get("target")),
            "task": task,
            "doc_id": r["doc_id"],
            "filter": r.get("filter"),
            "metric": metric,
            "doc": _text(r.get("doc")),
        }
        for m in others:
            v = r.get(m)
            row[m] = v if (m in numeric or v is None) else _text(v)
        rows.append(row)
    df = pd.DataFrame(rows)
    for m in others:
        if m in numeric:
            df[m] = pd.to_numeric(df[m], errors="coerce").astype("Float64")
    if df["model"].isna().all():
        if model is None:
            model = _results_model(src)
        if model is None:
            raise InputError(f"{src.name}: harness samples do not name the model and no results_*.json beside "
                             f"them does; pass --model NAME (or --model PATH=NAME for each run)")
        df["model"] = model
    elif model is not None:
        df["model"] = df["model"].fillna(model)
    shots = {num_fewshot(res, task) for res in _results_of(src).values() if isinstance(res, dict)} - {None}
    if len(shots) == 1:  # a run setting: the condition when one folder holds several (io.reader)
        df["num_fewshot"] = pd.array([shots.pop()] * len(df), dtype="Int64")
        df.attrs["run_settings"] = ("num_fewshot",)
    return df
