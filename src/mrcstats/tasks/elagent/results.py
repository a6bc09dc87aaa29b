"""Walk ELAGENT result files (``acc_*.json``) and yield their stored items.

Shapes found in the published files (see ``../shared/data/README.md``):

* Task 1/2: ``{accuracy, invalid, data: [[prompt, gold, pred, full_response], ...]}``
  nested one or two levels deep under operator keys (``{op: {...}}`` or
  ``{op: {op2: {...}}}``), sometimes beside ``overall_accuracy``/``overall_invalid``;
* Task 5/6: ``{accuracy, invalid, data: [{prompt, output, result, gold_label,
  gold_choice, out_choice, gold_evidence, out_evidence}, ...]}``.

This is a small walker for :mod:`~mrcstats.tasks.elagent.verify`; ingesting
the files as a canonical log is the job of :mod:`mrcstats.io`.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mrcstats._jsonlines import json_lines
from mrcstats.errors import InputError


@dataclass(frozen=True)
class StoredItem:
    """One stored item: where it is (file and key path), its prompt, stored gold and prediction."""

    file: str
    where: str
    prompt: str
    gold: Any
    pred: Any
    response: str | None


def load_json(path: str | os.PathLike) -> Any:
    """Read a JSON file, turning unreadable input into one clear :class:`InputError`."""
    from mrcstats.io.files import read_json

    try:
        return read_json(path)
    except InputError as exc:
        raise InputError(f"{exc}; pass an ELAGENT acc_*.json result file") from None


def iter_items(path: str | os.PathLike) -> Iterator[StoredItem]:
    """Yield every stored item of one ELAGENT result file, in file order.

    A ``.jsonl`` file (a task file of :mod:`~mrcstats.tasks.elagent.generate` or a query log)
    gives one item per line with ``prompt`` and ``gold``.
    """
    if str(path).endswith(".jsonl"):
        yield from _iter_jsonl(Path(path))
        return
    doc = load_json(path)
    found = False
    for where, rows in _walk(doc, ()):
        found = True
        for i, row in enumerate(rows):
            loc = f"{'/'.join(where) or '.'}[{i}]"
            if isinstance(row, list) and len(row) >= 2 and isinstance(row[0], str):
                yield StoredItem(str(path), loc, row[0], row[1], row[2] if len(row) > 2 else None,
                                 row[3] if len(row) > 3 else None)
            elif isinstance(row, dict) and isinstance(row.get("prompt"), str):
                gold = row.get("gold_choice", row.get("gold"))
                yield StoredItem(str(path), loc, row["prompt"], gold, row.get("out_choice", row.get("pred")),
                                 row.get("output"))
            else:
                raise InputError(f"{path}: item {loc} is neither [prompt, gold, pred, response] nor "
                                 f"{{prompt, gold_choice, ...}}; is this an ELAGENT result file?")
    if not found:
        raise InputError(f"{path}: no 'data' list found; expected an ELAGENT acc_*.json result file")


def _iter_jsonl(p: Path) -> Iterator[StoredItem]:
    from mrcstats.io.files import read_text

    text = read_text(p)

    for lineno, row in json_lines(text, str(p), "expected a task file or query log"):
        if not isinstance(row.get("prompt"), str):
            raise InputError(f"{p}, line {lineno}: no 'prompt' string; expected a task file or query log")
        yield StoredItem(str(p), f"line {lineno}", row["prompt"], row.get("gold"), row.get("pred"),
                         row.get("response"))


def _walk(node: Any, where: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], list]]:
    """Yield (key path, item list) for every item list: a ``data`` list, or a list of items
    directly under a key or at the top (the shape of the ``datasets/`` files)."""
    if isinstance(node, dict):
        for key, val in node.items():
            if _is_item_list(val):
                yield (where if key == "data" else where + (str(key),)), val
            elif isinstance(val, dict):
                yield from _walk(val, where + (str(key),))
    elif _is_item_list(node):
        yield where, node


def _is_item_list(val: Any) -> bool:
    return isinstance(val, list) and bool(val) and all(isinstance(r, (list, dict)) for r in val[:3]) and (
        (isinstance(val[0], list) and bool(val[0]) and isinstance(val[0][0], str))
        or (isinstance(val[0], dict) and "prompt" in val[0]))
