"""Atomic file writes, the one output-path check every writer shares, and flushed append-only logs.

:func:`check_output_path` is called by every writer (through :func:`atomic_path`, and by
the commands with the inputs and the file endings they accept): a folder, a path below
a file, an unwritable place, an unknown ending (``--out x.txt`` for a Parquet log) and
an output equal to an input all stop with one :class:`~mrcstats.errors.InputError`
before anything is written. Temporary files are named ``.NAME.<pid>.XXXX.tmp``; one
left by a process that was killed mid-write is removed by the next write to ``NAME``.
"""
from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from mrcstats.errors import InputError


def _why(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def _link_chain(p: Path, limit: int = 6) -> str:
    """``a -> b -> a``: a chain of symbolic links up to its first repeat, for messages."""
    chain, q = [str(p)], p
    for _ in range(limit):
        try:
            q = Path(os.path.normpath(q.parent / os.readlink(q)))
        except OSError:
            return " -> ".join(chain)
        chain.append(str(q))
        if chain.count(str(q)) > 1:
            return " -> ".join(chain)
    return " -> ".join(chain) + " -> ..."


def link_loop_error(path: Any, what: str = "") -> InputError:
    """The one message for a symbolic link loop (``a -> b -> a``): what, where and how to fix it."""
    p = Path(os.fsdecode(path))
    return InputError(f"{what + ' ' if what else ''}{p}: a loop of symbolic links ({_link_chain(p)}) that never "
                      f"reaches a file; point the link at a real file or folder, or remove it")


def resolve_path(path: Any, what: str = "") -> Path:
    """``Path(path).resolve()``; a symbolic link loop is one :class:`InputError` (:func:`link_loop_error`)
    instead of Python's ``RuntimeError`` (before 3.13) or ``OSError`` ELOOP."""
    p = Path(os.fsdecode(path))
    try:
        return p.resolve()
    except RuntimeError:
        raise link_loop_error(p, what) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise link_loop_error(p, what) from None
        raise


def check_output_path(path: Any, *, suffixes: Iterable[str] | None = None, inputs: Iterable[Any] = (),
                      what: str = "--out", kind: str = "file") -> Path:
    """Check that ``path`` can be written as a new or replaced ``kind`` ("file" or "folder"); return it.

    Raises :class:`InputError` (one line: what, where, how to fix) when ``path`` is not a
    path, is an existing folder (for a file) or file (for a folder), lies below a file, lies
    in a folder that cannot be written, does not end in one of ``suffixes`` (case-insensitive,
    e.g. ``(".parquet", ".csv")``), or is the same file as one of ``inputs``.
    """
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, (str, os.PathLike)) or not str(path).strip():
        raise InputError(f"{what}: expected a {kind} name, got {type(path).__name__} {str(path)[:60]!r}")
    p = Path(path)
    try:
        if kind == "file" and p.is_dir():
            raise InputError(f"{what} {p}: is a folder; give a file name inside it (e.g. {p / 'out'}"
                             f"{next(iter(suffixes)) if suffixes else ''})")
        if kind == "folder" and p.exists() and not p.is_dir():
            raise InputError(f"{what} {p}: is a file, not a folder; give a folder name")
        name = p.name.lower()
        if suffixes is not None and kind == "file":
            sfx = tuple(s.lower() for s in suffixes)
            if not name.endswith(sfx):
                raise InputError(f"{what} {p}: the file ending decides what is written; use one of "
                                 f"{', '.join(sfx)} (e.g. {p.stem or 'out'}{sfx[0]})")
        anc = p.parent if kind == "file" else p
        while not anc.exists() and anc != anc.parent:
            anc = anc.parent
        if anc.exists() and not anc.is_dir():
            raise InputError(f"{what} {p}: cannot write below {anc}, which is a file, not a folder")
        if anc.exists() and not os.access(anc, os.W_OK | os.X_OK):
            raise InputError(f"{what} {p}: cannot write in {anc} (permission denied); choose another place")
        if kind == "file" and p.exists() and not os.access(p, os.W_OK) and not os.access(p.parent, os.W_OK):
            raise InputError(f"{what} {p}: the file cannot be replaced (permission denied)")
        for inp in inputs:
            if inp is None or str(inp) == "":
                continue
            q = Path(os.fsdecode(inp)) if isinstance(inp, (str, bytes, os.PathLike)) else None
            if q is None or not p.exists() or not q.exists():
                if q is not None and resolve_path(q) == resolve_path(p, what):
                    raise InputError(f"{what} {p}: is also an input; write the output to another file")
                continue
            if os.path.samefile(p, q):
                raise InputError(f"{what} {p}: is the input {q}; writing it would destroy the input, so give "
                                 f"another output name")
    except OSError as exc:
        raise InputError(f"{what} {p}: cannot be written ({_why(exc)})") from None
    return p


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def clean_stale_temps(target: Path) -> int:
    """Remove ``.NAME.<pid>.XXXX.tmp`` files beside ``target`` left by processes that no longer run."""
    n = 0
    prefix = f".{target.name}."
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return 0
    for e in entries:
        if not (e.name.startswith(prefix) and e.name.endswith(".tmp")):
            continue
        pid_part = e.name[len(prefix):].split(".", 1)[0]
        if not pid_part.isdigit() or _pid_alive(int(pid_part)):
            continue
        with contextlib.suppress(OSError):
            os.unlink(e.path)
            n += 1
    return n


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it replaces ``path`` atomically.

    Use for writers that want a file name (``df.to_parquet(tmp)``). On error the
    temporary file is removed and ``path`` is left untouched. The path is checked first
    (:func:`check_output_path`); stale temporary files of killed writers are removed.
    """
    target = check_output_path(path, what="cannot write")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        clean_stale_temps(target)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.{os.getpid()}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise InputError(f"cannot write {target}: {_why(exc)} in {target.parent}") from None
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        # mkstemp creates 0600; give the file the mode a plain open() would (0666 & ~umask)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp_path, 0o666 & ~umask)
        try:
            os.replace(tmp_path, target)
        except OSError as exc:
            raise InputError(f"cannot write {target}: {_why(exc)}") from None
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
        raise


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """Open a temporary file beside ``path`` for writing; rename it over ``path`` on success."""
    if "b" in mode:
        encoding = None
    with atomic_path(path) as tmp, open(tmp, mode, encoding=encoding) as fh:
        yield fh
        fh.flush()
        os.fsync(fh.fileno())


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` atomically."""
    with atomic_open(path, "w") as fh:
        fh.write(text)


def append_line(fh: IO[str], line: str) -> None:
    """Append one record to an append-only log and flush it to the OS at once."""
    fh.write(line.rstrip("\n") + "\n")
    fh.flush()
    os.fsync(fh.fileno())
