"""Read a TASKFILE: JSONL, one object per line with ``item``, ``prompt`` (or ``messages``),
optional ``gold``, ``cluster``, ``condition``, ``scorer`` and any other fields (kept in the log)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mrcstats._jsonlines import json_lines
from mrcstats.errors import InputError

#: keys the query log writes itself; a task's own fields of these names are refused
RESERVED = frozenset({"model", "trial", "response", "pred", "correct", "status", "attempts", "error",
                      "temperature", "top_p", "seed", "max_tokens", "started_at", "finished_at", "latency_s",
                      "prompt_tokens", "completion_tokens", "total_tokens", "finish_reason", "response_model"})


@dataclass(frozen=True)
class TaskItem:
    """One prompt to send: ``messages`` in chat-completions form plus what the log records."""

    item: str
    messages: tuple[dict, ...]
    prompt: str
    gold: str | None = None
    cluster: str | None = None
    condition: str = ""
    scorer: str = "auto"
    extra: dict[str, Any] = field(default_factory=dict)


def read_taskfile(path: str | os.PathLike) -> list[TaskItem]:
    """Read and validate ``path``; raises :class:`InputError` naming the line and field on bad input."""
    from mrcstats.io.files import read_text

    p = Path(path)
    try:
        text = read_text(p, "task file")
    except InputError as exc:
        if "file is empty" in str(exc):
            text = ""  # reported below as "no tasks"
        else:
            raise
    items: list[TaskItem] = []
    seen: dict[tuple[str, str], int] = {}
    for lineno, obj in json_lines(text, f"task file {p}", "write one JSON object per line"):
        task = _task(obj, p, lineno)
        key = (task.item, task.condition)
        if key in seen:
            raise InputError(f"task file {p}, line {lineno}: item {task.item!r} (condition {task.condition!r}) "
                             f"already on line {seen[key]}; item ids must be unique per condition")
        seen[key] = lineno
        items.append(task)
    if not items:
        raise InputError(f"task file {p}: no tasks (expected JSONL with 'item' and 'prompt' per line)")
    return items


def _task(obj: dict, p: Path, lineno: int) -> TaskItem:
    where = f"task file {p}, line {lineno}"
    if "item" not in obj or obj["item"] is None or isinstance(obj["item"], (dict, list)):
        raise InputError(f"{where}: missing 'item' (a string or number identifying the prompt)")
    item = str(obj["item"])
    if "messages" in obj:
        msgs = obj["messages"]
        if not (isinstance(msgs, list) and msgs and all(
                isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                for m in msgs)):
            raise InputError(f"{where}: 'messages' must be a non-empty list of {{'role': ..., 'content': ...}}")
        messages = tuple(dict(m) for m in msgs)
        users = [m["content"] for m in msgs if m["role"] == "user"]
        prompt = obj.get("prompt") if isinstance(obj.get("prompt"), str) else (users[-1] if users else "")
    elif isinstance(obj.get("prompt"), str) and obj["prompt"].strip():
        prompt = obj["prompt"]
        messages = ({"role": "user", "content": prompt},)
    else:
        raise InputError(f"{where}: needs a non-empty 'prompt' string or a 'messages' list")
    clash = sorted(RESERVED & obj.keys())
    if clash:
        raise InputError(f"{where}: field(s) {clash} are written by the query log itself; rename them")
    scorer = obj.get("scorer", "auto")
    from mrcstats.tasks.elagent.scoring import SCORERS

    if scorer not in SCORERS:
        raise InputError(f"{where}: scorer {scorer!r} unknown; use one of {', '.join(SCORERS)}")
    gold = obj.get("gold")
    if scorer == "numeric" and gold is not None:
        from mrcstats.tasks.elagent.scoring import parse_number

        if parse_number(gold) is None:
            raise InputError(f"{where}: gold {gold!r} is not a number but the scorer is 'numeric'; fix the gold "
                             f"or use scorer 'exact'")
    extra = {k: v for k, v in obj.items()
             if k not in {"item", "prompt", "messages", "gold", "cluster", "condition", "scorer"}}
    return TaskItem(item=item, messages=messages, prompt=prompt,
                    gold=None if gold is None else str(gold),
                    cluster=None if obj.get("cluster") is None else str(obj["cluster"]),
                    condition="" if obj.get("condition") is None else str(obj["condition"]),
                    scorer=scorer, extra=extra)
