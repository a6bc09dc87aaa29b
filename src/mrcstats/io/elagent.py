"""ELAGENT result files (repo wafflly/LLM-Task-Challenge): Task 5/6 and Task 1/2.

* Task 5/6 files: ``{accuracy, invalid, data: [{prompt, output, result, gold_choice,
  out_choice, gold_label, gold_evidence, out_evidence}]}``; ``result`` is
  ``right``/``wrong``/``invalid`` -> ``correct`` True/False/<NA>.
* Task 1/2 files nest ``{accuracy, invalid, data: [[prompt, gold, pred, response], ...]}``
  one or two levels deep under operator keys (``{"+": {"*": {...}}}``), sometimes
  beside ``overall_accuracy``/``overall_invalid`` strings. ``pred`` of ``"Invalid"``
  (or any non-answer) is invalid; numbers compare exactly (the files store the
  gold rounded with Python's ``round(x, 1)`` and score ``pred == gold``); letters
  compare case-insensitively.

The model is not in the files: pass ``model`` (``--model gpt-4-1106-preview``).
``condition`` is the file name without ``acc_`` (``acc_neg.json`` -> ``neg``,
``acc_baseline_3_1_cot1.json`` -> ``baseline_3_1_cot1``); a ``task`` column holds the nearest
enclosing folder named ``task ...`` (``task 5``) when there is one.

``item`` names one question across the files that ask it, and only that question:
``<task>/<operators>_<digits>/<operator path>/<position>`` for Task 1/2 (``task 1/3_2/+/*/3``: the
operator count and operand digits come from the file name ``acc_<setting>_<operators>_<digits>[_cot1]``,
since each digit length asks other expressions, while the precedence moves and CoT1 ask the same ones),
``<task>/<position>`` for Task 5/6 (the variants and predicate types rephrase the same records). Parts that
are unknown (no ``task ...`` folder, a file name without the operator and digit counts) are left out.
"""
from __future__ import annotations

import math
import re
from typing import Any

import pandas as pd

from mrcstats.errors import InputError, SchemaError
from mrcstats.io.answers import parse_number
from mrcstats.io.source import Source

_RESULT = {"right": True, "wrong": False, "invalid": None}
#: ``acc_<setting>_<operators>_<digits>[_cot1]``: the Task 1/2 file names (``acc_baseline_3_2_cot1``)
_LENGTH = re.compile(r"^acc_.+?_(\d+)_(\d+)(?:_cot\d+)?$")


def item_prefix(task: str | None, stem: str, arithmetic: bool) -> str:
    """The part of an ELAGENT item id before the operator path: the task folder and, for a Task 1/2 file, its
    ``<operators>_<digits>`` (``task 1/3_2``); empty parts left out."""
    m = _LENGTH.match(stem) if arithmetic else None
    return "/".join(x for x in (task, f"{m.group(1)}_{m.group(2)}" if m else None) if x)


def _is_block(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("data"), list)


def _blocks(obj: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], dict]]:
    if _is_block(obj):
        return [(path, obj)]
    out = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(v, dict):
                out.extend(_blocks(v, path + (str(k),)))
    return out


def looks_like_elagent(obj: Any) -> bool:
    """True for a Task 5/6 file (records with ``result``) or an operator-nested Task 1/2 file."""
    blocks = _blocks(obj)
    if not blocks:
        return False
    _, b = blocks[0]
    first = b["data"][0] if b["data"] else None
    if isinstance(first, dict):
        return "result" in first and "prompt" in first
    return isinstance(first, list) and len(first) == 4 and "accuracy" in b


def condition_from_name(stem: str) -> str:
    """``acc_neg`` -> ``neg``; ``acc_baseline_3_1_cot1`` -> ``baseline_3_1_cot1``."""
    return stem.removeprefix("acc_")


def _pred_text(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, float):
        if math.isnan(v):
            return None
        return str(int(v)) if v.is_integer() else repr(v)
    return str(v)


def _score_task12(gold: Any, pred: Any) -> bool | None:
    if pred is None:
        return None
    g, p = parse_number(gold), parse_number(pred)
    if g is not None:
        if p is None:
            return None  # "Invalid" or a non-number
        return p == g
    ps = str(pred).strip()
    if not ps or ps.lower() == "invalid":
        return None
    return ps.upper() == str(gold).strip().upper()


def read_elagent(src: Source, model: str | None = None) -> pd.DataFrame:
    """Read one ELAGENT result file into rows with canonical field names (see module docstring)."""
    obj = src.json()
    blocks = _blocks(obj)
    if not blocks or not looks_like_elagent(obj):
        raise InputError(f"{src.name}: not an ELAGENT result file (expected {{accuracy, invalid, data: [...]}}, "
                         f"possibly nested under operator keys); pass another --format")
    if model is None:
        raise InputError(f"{src.name}: ELAGENT files do not name the model; pass --model NAME "
                         f"(e.g. --model gpt-4-1106-preview)")
    cond = condition_from_name(src.stem)
    task = next((d.name for d in src.path.parents if d.name.lower().startswith("task")), None)
    rows: list[dict[str, Any]] = []
    first = blocks[0][1]["data"][0] if blocks[0][1]["data"] else None
    qualify = item_prefix(task, src.stem, isinstance(first, list))
    for path, block in blocks:
        prefix = "/".join(path)
        for i, rec in enumerate(block["data"]):
            item = "/".join(x for x in (qualify, prefix, str(i)) if x)
            if isinstance(rec, dict):
                res = rec.get("result")
                if res not in _RESULT:
                    raise SchemaError(f"{src.name}, record {item}, field 'result': expected right/wrong/invalid, "
                                      f"got {res!r}")
                rows.append({"item": item, "correct": _RESULT[res], "response": rec.get("output"),
                             "gold": rec.get("gold_choice"), "pred": rec.get("out_choice"),
                             "prompt": rec.get("prompt"), "gold_label": rec.get("gold_label"),
                             "gold_evidence": _join(rec.get("gold_evidence")),
                             "out_evidence": _join(rec.get("out_evidence"))})
            elif isinstance(rec, list) and len(rec) == 4:
                prompt, gold, pred, response = rec
                rows.append({"item": item, "correct": _score_task12(gold, pred), "response": response,
                             "gold": _pred_text(gold), "pred": _pred_text(pred), "prompt": prompt,
                             "operators": prefix or None})
            else:
                raise SchemaError(f"{src.name}, record {item}: expected an object or a "
                                  f"[prompt, gold, pred, response] list, got {type(rec).__name__}")
    df = pd.DataFrame(rows)
    df["correct"] = pd.array(df["correct"].tolist(), dtype="boolean")
    df["model"] = model
    df["condition"] = cond
    if task:
        df["task"] = task
    return df


def _join(v: Any) -> Any:
    if isinstance(v, list):
        return " ".join(str(x) for x in v)
    return v
