"""The query log: append-only JSONL, one flushed line per (model, item, condition, trial).

* on start a torn last line (a write cut by a kill) is cut off;
* a key with several rows (a ``--retry-failed`` run killed before its final
  rewrite) counts by its *last* row; :func:`compact` rewrites the file
  atomically with that row in place of the first one.
"""
from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mrcstats._files import atomic_open
from mrcstats._jsonlines import json_lines
from mrcstats.errors import InputError

Key = tuple[str, str, str, int]  # model, item, condition, trial


def row_key(row: dict[str, Any]) -> Key:
    """The identity of a log row."""
    return (str(row.get("model")), str(row.get("item")), str(row.get("condition") or ""), int(row.get("trial", 0)))


@dataclass
class LogState:
    """What an existing log holds: its rows in file order and the last row per key."""

    path: Path
    rows: list[dict[str, Any]] = field(default_factory=list)
    last: dict[Key, dict[str, Any]] = field(default_factory=dict)
    torn_bytes: int = 0

    @property
    def superseded(self) -> int:
        """Rows replaced by a later row of the same key."""
        return len(self.rows) - len(self.last)


def load_log(path: str | os.PathLike, repair: bool = True) -> LogState:
    """Read the log at ``path`` (missing = empty), cutting off a torn last line when ``repair``."""
    p = Path(path)
    state = LogState(p)
    if not p.exists():
        return state
    data = p.read_bytes()
    if data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        tail = data[cut:]
        try:
            json.loads(tail.decode("utf-8"))
            complete = True
        except (UnicodeDecodeError, json.JSONDecodeError):
            complete = False
        if repair:
            if complete:  # the newline alone was lost
                with open(p, "ab") as fh:
                    fh.write(b"\n")
                data += b"\n"
            else:
                with open(p, "r+b") as fh:
                    fh.truncate(cut)
                state.torn_bytes = len(tail)
                data = data[:cut]
    for lineno, row in json_lines(data.decode("utf-8", errors="replace"), f"log {p}",
                                  "only the last line can be torn, so remove or fix this line by hand"):
        if "item" not in row or "model" not in row:
            raise InputError(f"log {p}, line {lineno}: not a query-log row (needs 'model' and 'item'); "
                             f"is --out pointing at another file?")
        state.rows.append(row)
        state.last[row_key(row)] = row
    return state


@contextlib.contextmanager
def log_lock(path: str | os.PathLike) -> Iterator[None]:
    """Hold an exclusive lock on ``LOG.lock`` beside the log for a whole run, so two runs cannot
    append to one log at once. The lock (``fcntl.flock``) dies with the process, even on SIGKILL;
    the empty lock file is left in place (removing it would race with a starting run)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no lock
        yield
        return
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with open(p.with_name(p.name + ".lock"), "a") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise InputError(f"another mrcstats query is writing {p} (lock {fh.name}); wait for it to finish or "
                             f"use another --out") from None
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def compact(path: str | os.PathLike, rows: list[dict[str, Any]]) -> int:
    """Rewrite the log atomically with one row per key: the last row, at the first row's position.

    Returns the number of rows written.
    """
    first: dict[Key, int] = {}
    last: dict[Key, dict[str, Any]] = {}
    for i, row in enumerate(rows):
        k = row_key(row)
        first.setdefault(k, i)
        last[k] = row
    with atomic_open(path, "w") as fh:
        for k in sorted(first, key=first.__getitem__):
            fh.write(dumps_row(last[k]) + "\n")
    return len(first)


def dumps_row(row: dict[str, Any]) -> str:
    """One log line: compact JSON, non-ASCII kept as is."""
    return json.dumps(row, ensure_ascii=False, separators=(", ", ": "), allow_nan=False)
