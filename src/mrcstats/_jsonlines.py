"""JSON Lines parsing shared by the task files, query logs and ELAGENT result readers (no layer imports)."""
from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from mrcstats.errors import InputError


def json_lines(text: str, where: str, hint: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line number, object)`` for each non-blank line of JSONL ``text``; a line that is
    not a JSON object raises :class:`InputError` naming ``where``, the line and ``hint``."""
    # split on "\n" only: str.splitlines() would also split inside strings at U+0085, U+2028, ...
    for lineno, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}, line {lineno}: not JSON ({exc.msg}); {hint}") from None
        if not isinstance(obj, dict):
            raise InputError(f"{where}, line {lineno}: expected a JSON object, got {type(obj).__name__}; {hint}")
        yield lineno, obj
