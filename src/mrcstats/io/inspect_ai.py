"""Inspect AI evaluation logs: JSON (``--log-format json``) or the zipped ``.eval`` format.

``{"eval": {"task", "model", ...}, "samples": [{"id", "epoch", "input", "target",
"output": {"choices": [{"message": {"content"}}]}, "scores": {scorer: {"value",
"answer", ...}}}]}``. Score values ``C``/``I`` (correct/incorrect), booleans or 0/1
give ``correct``; ``N`` (no answer) is invalid (<NA>); partial credit (``P``, 0.5)
is not binary and is rejected. The first scorer is used (its name is in the
``scorer`` column).

model = ``eval.model`` (or ``--model``); item = ``<task>:<sample id>`` with task =
``eval.task`` (the file name when the log names none), as the harness reader's
``<task>:<doc_id>``, so two tasks that both number their samples from 1 stay apart;
cluster = item; trial = ``epoch - 1`` (Inspect counts epochs from 1, trials count
from 0 everywhere else); ``task`` and ``sample_id`` columns keep the originals;
gold = ``target``; pred = the scorer's ``answer``; response = the first output
choice's text.

A log whose ``status`` is not ``success`` (``cancelled``, ``error``, ``started``)
holds only the samples that ran: they are read, the samples that never ran are
counted in ``attrs["skipped"]`` (``"not run: Inspect log status 'cancelled'"``), and
a warning names the status and the counts.
"""
from __future__ import annotations

import json
from typing import Any

import pandas as pd

from mrcstats.errors import InputError
from mrcstats.io.source import Source

_VALUE = {"C": True, "I": False, "N": None, "CORRECT": True, "INCORRECT": False}


def _content(msg: Any) -> str | None:
    if msg is None:
        return None
    if isinstance(msg, str):
        return msg
    if isinstance(msg, list):  # content parts
        parts = [p.get("text", "") if isinstance(p, dict) else str(p) for p in msg]
        return "".join(parts)
    return str(msg)


def _score_value(v: Any) -> Any:
    if isinstance(v, str):
        key = v.strip().upper()
        if key in _VALUE:
            return _VALUE[key]
        return v  # left for the schema check (e.g. "P" -> error naming the row)
    return v


def _text(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, list):
        if all(isinstance(x, str) for x in v):
            return ", ".join(v)
        if all(isinstance(x, dict) for x in v):  # chat messages
            return "\n".join(_content(x.get("content")) or "" for x in v)
        return json.dumps(v, ensure_ascii=False)
    return str(v)


def _eval_archive(src: Source) -> dict[str, Any]:
    """An Inspect ``.eval`` zip (``header.json`` + ``samples/<id>_epoch_<n>.json``) as one JSON-log dict."""
    import io
    import zipfile

    try:
        zf = zipfile.ZipFile(io.BytesIO(src.data))
        header = json.loads(zf.read("header.json")) if "header.json" in zf.namelist() else {}
        names = sorted(n for n in zf.namelist() if n.startswith("samples/") and n.endswith(".json"))
        samples = [json.loads(zf.read(n)) for n in names]
    except (zipfile.BadZipFile, KeyError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{src.name}: cannot read the Inspect .eval archive ({exc})") from None
    return {**header, "samples": samples}


def read_inspect(src: Source, model: str | None = None) -> pd.DataFrame:
    """Read one Inspect AI log (JSON, or a ``.eval`` archive) into rows with canonical field names."""
    obj = _eval_archive(src) if src.binary else src.json()
    if not isinstance(obj, dict) or not isinstance(obj.get("samples"), list):
        raise InputError(f"{src.name}: not an Inspect AI log (no 'samples' list)")
    ev = obj.get("eval") or {}
    samples = obj["samples"]
    if not samples:
        raise InputError(f"{src.name}: Inspect log has no samples (status {obj.get('status')!r})")
    task = str(ev.get("task") or src.stem)
    rows = []
    for i, s in enumerate(samples):
        scores = s.get("scores") or {}
        if not scores:
            raise InputError(f"{src.name}: sample {i + 1} (id {s.get('id')!r}) has no scores; score the log with "
                             f"`inspect score` first")
        scorer, sc = next(iter(scores.items()))
        value = sc.get("value") if isinstance(sc, dict) else sc
        if isinstance(value, dict):
            raise InputError(f"{src.name}: sample {i + 1}: scorer {scorer!r} gives several values "
                             f"({', '.join(value)}); only single-value scorers are read")
        out = s.get("output") or {}
        choices = out.get("choices") or []
        resp = _content((choices[0].get("message") or {}).get("content")) if choices else None
        epoch = s.get("epoch", 1)
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 1:
            raise InputError(f"{src.name}: sample {i + 1} (id {s.get('id')!r}) has epoch {epoch!r}; Inspect "
                             f"epochs are whole numbers from 1")
        sid = str(s.get("id", i + 1))
        rows.append({
            "item": f"{task}:{sid}",
            "trial": epoch - 1,
            "correct": _score_value(value),
            "response": resp,
            "pred": sc.get("answer") if isinstance(sc, dict) else None,
            "gold": _text(s.get("target")),
            "question": _text(s.get("input")),
            "scorer": scorer,
            "task": task,
            "sample_id": sid,
        })
    df = pd.DataFrame(rows)
    df["model"] = ev.get("model") or model
    if df["model"].isna().all():
        raise InputError(f"{src.name}: the log names no model; pass --model NAME")
    status = obj.get("status")
    if status not in (None, "success"):
        expected = _expected_samples(ev)
        missing = max(expected - len(df), 0) if expected is not None else None
        reason = f"not run: Inspect log status {status!r}"
        if missing:
            df.attrs["skipped"] = {reason: missing}
        import warnings

        shown = f"{len(df)} of {expected}" if expected is not None else f"{len(df)}"
        warnings.warn(f"{src.name}: the Inspect run ended with status {status!r}; read the {shown} sample(s) "
                      f"it holds" + (f", {missing} never ran (counted as skipped)" if missing else ""),
                      stacklevel=2)
    return df


def _expected_samples(ev: dict[str, Any]) -> int | None:
    """Samples x epochs the run was set up for (``eval.dataset`` and ``eval.config``), when the log says."""
    ds = ev.get("dataset") or {}
    cfg = ev.get("config") or {}
    n = len(ds["sample_ids"]) if isinstance(ds.get("sample_ids"), list) else ds.get("samples")
    if not isinstance(n, int) or isinstance(n, bool):
        return None
    limit = cfg.get("limit")
    if isinstance(limit, int) and not isinstance(limit, bool):
        n = min(n, limit)
    epochs = cfg.get("epochs") or 1
    return n * epochs if isinstance(epochs, int) and not isinstance(epochs, bool) else n
