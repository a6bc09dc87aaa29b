"""Atomic file writes, the one output-path check every writer shares, and flushed append-only logs.

:func:`check_output_path` is called by every writer (through :func:`atomic_path`, and by
the commands with the inputs and the file endings they accept): a folder, a path below
a file, an unwritable place, an unknown ending (``--out x.txt`` for a Parquet log) and
an output equal to an input all stop with one :class:`~mrcstats.errors.InputError`
before anything is written. Temporary files are named ``.NAME.<pid>.XXXX.tmp``; one
left by a process that was killed mid-write is removed by the next write to ``NAME``.

On the command line the rule is applied once, for every option declared with
:func:`mrcstats.cli._common.add_output`, before the command runs: the handler receives an
:class:`OutputPath` (checked, with the parent folder required to exist) that writes atomically.
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
                      what: str = "--out", kind: str = "file", parents: bool = True) -> Path:
    """Check that ``path`` can be written as a new or replaced ``kind`` ("file" or "folder"); return it.

    Raises :class:`InputError` (one line: what, where, how to fix) when ``path`` is not a
    path, is an existing folder (for a file) or file (for a folder), lies below a file, lies
    in a folder that cannot be written, does not end in one of ``suffixes`` (case-insensitive,
    e.g. ``(".parquet", ".csv")``), or would touch one of ``inputs`` (:func:`input_clash`: is an
    input file, lies inside an input folder, or -- for a folder -- holds an input). With
    ``parents=False`` (the command line's rule, :class:`OutputPath`) the folder that holds
    ``path`` must exist already: a mistyped folder is an error, not a new folder tree.
    """
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, (str, os.PathLike)) or not str(path).strip():
        raise InputError(f"{what}: expected a {kind} name, got {type(path).__name__} {str(path)[:60]!r}")
    p = Path(path)
    resolve_path(p, what)               # a loop of symbolic links is one clear line
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
        if not parents and not p.parent.is_dir():
            raise InputError(f"{what} {p}: the folder {p.parent} does not exist; create it first "
                             f"(mkdir -p {p.parent}) or choose another place")
        if anc.exists() and not os.access(anc, os.W_OK | os.X_OK):
            raise InputError(f"{what} {p}: cannot write in {anc} (permission denied); choose another place")
        if kind == "file" and p.exists() and not os.access(p, os.W_OK) and not os.access(p.parent, os.W_OK):
            raise InputError(f"{what} {p}: the file cannot be replaced (permission denied)")
        clash = input_clash(p, inputs, kind=kind)
        if clash:
            raise InputError(f"{what} {p}: {clash}")
    except OSError as exc:
        raise InputError(f"{what} {p}: cannot be written ({_why(exc)})") from None
    return p


def _ancestors(p: Path) -> Iterator[Path]:
    """``p`` (when it exists) and each existing folder above it, nearest first."""
    q = p if p.is_absolute() else Path.cwd() / p
    if q.exists():
        yield q
    yield from (a for a in q.parents if a.exists())


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def input_clash(out: Any, inputs: Iterable[Any], *, kind: str = "file") -> str | None:
    """Why writing ``out`` would touch an input (one clause for a message), or None when it would not.

    The one output rule of every writer: an output must not be an input file, lie inside an input
    folder that is read (a folder input is read with everything in it), nor -- for an output folder,
    which replaces what is there -- contain an input. Paths are compared as the file system sees
    them (``os.path.samefile`` on the output and each existing folder above it): symlinks, ``..``,
    hard links and case folding on case-insensitive file systems (macOS, Windows) are followed, so
    ``D/A.csv`` is the input ``d/a.csv`` exactly where the file system says so.
    """
    p = Path(os.fsdecode(out)) if isinstance(out, (str, bytes, os.PathLike)) else None
    if p is None:
        return None
    for inp in inputs:
        if inp is None or not isinstance(inp, (str, bytes, os.PathLike)) or os.fsdecode(inp) == "":
            continue
        q = Path(os.fsdecode(inp))
        try:
            q_dir, q_exists = q.is_dir(), q.exists()
        except OSError:
            continue
        if not q_exists:   # (a loop of symbolic links among the inputs is one clear line: resolve_path)
            try:
                if resolve_path(q) == p.resolve():
                    return "is also an input; write the output to another file"
            except (OSError, RuntimeError):
                pass
            continue
        for anc in _ancestors(p):
            if _same(anc, q):
                if anc == p or (not q_dir):
                    return (f"is the input {q}; writing it would destroy the input, so give another output "
                            f"name") if not q_dir else (f"is the input folder {q}; write the output elsewhere")
                return (f"lies inside the input folder {q}, which is being read; write the output outside "
                        f"it (e.g. next to the folder)")
        if kind == "folder" and p.exists():
            for anc in _ancestors(q):
                if _same(anc, p):
                    return (f"holds the input {q}; writing the folder would replace it, so choose another "
                            f"output folder")
    return None


def pid_alive(pid: int) -> bool:
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
        if not pid_part.isdigit() or pid_alive(int(pid_part)):
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


def _probe_writable(p: Path, what: str) -> None:
    """Create and remove a temporary file where ``p`` goes (named as :func:`atomic_path`'s): the one sure test
    that the place can be written (``os.access`` says yes to root on a read-only file system or in /proc)."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.{os.getpid()}.", suffix=".tmp", dir=p.parent)
    except OSError as exc:
        raise InputError(f"{what} {p}: cannot write in {p.parent} ({_why(exc)}); choose another place") from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(tmp)


class OutputPath(str):
    """An output path that passed the one output rule (:func:`check_output_path` with the inputs of its call
    and ``parents=False``); write through its methods, which are atomic.

    The command line gives its handlers these instead of plain text (:func:`mrcstats.cli._common.add_output`):
    every option declared as an output is checked before the command runs -- not an input file, not inside
    an input folder (nor, for a folder, holding an input), the folder above it exists, not a folder (for a
    file) or a file (for a folder), writable -- so no handler can write an unchecked path. It is a ``str``
    (the text given, e.g. a trailing ``/``), so APIs that take a path take it as it is.
    """

    what: str
    kind: str

    def __new__(cls, text: Any, *, inputs: Iterable[Any] = (), what: str = "--out",  # noqa: PYI034
                kind: str = "file", suffixes: Iterable[str] | None = None) -> OutputPath:
        p = check_output_path(text, suffixes=suffixes, inputs=list(inputs), what=what, kind=kind, parents=False)
        _probe_writable(p, what)
        obj = super().__new__(cls, os.fsdecode(text))
        obj.what, obj.kind = what, kind
        return obj

    def __reduce__(self) -> tuple[Any, ...]:
        return (str, (str(self),))     # a copy (pickle, deepcopy) is the plain text, not checked again

    @property
    def path(self) -> Path:
        return Path(str(self))

    def atomic(self) -> contextlib.AbstractContextManager[Path]:
        """:func:`atomic_path` of this file: a temporary path beside it, renamed over it on success."""
        return atomic_path(self.path)

    def open(self, mode: str = "w", encoding: str | None = "utf-8") -> contextlib.AbstractContextManager[IO]:
        """:func:`atomic_open` of this file."""
        return atomic_open(self.path, mode, encoding)

    def write_table(self, df: Any) -> Path:
        """Write a data frame atomically: Parquet for a ``.parquet``/``.pq`` ending, else CSV (no index)."""
        if not self.lower().endswith((".parquet", ".pq")):
            return self.write_csv(df)
        with self.atomic() as tmp:
            df.to_parquet(tmp, index=False)
        return self.path

    def write_csv(self, df: Any) -> Path:
        """Write a data frame atomically as CSV (no index), whatever the ending."""
        with self.atomic() as tmp:
            df.to_csv(tmp, index=False)
        return self.path


def sha256_of(*paths: str | os.PathLike) -> str:
    """SHA-256 of the bytes of ``paths`` in order (a folder: its files, sorted by relative path) -- the
    provenance hash of the data a result came from."""
    import hashlib

    h = hashlib.sha256()
    files: list[Path] = []
    for p in map(Path, paths):
        files += sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
    for f in files:
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def append_line(fh: IO[str], line: str) -> None:
    """Append one record to an append-only log and flush it to the OS at once."""
    fh.write(line.rstrip("\n") + "\n")
    fh.flush()
    os.fsync(fh.fileno())


# ----------------------------------------------------------------------------- folders written by one process

#: the file inside a temporary folder that names the process writing it (``{"pid": ..., "host": ...}``)
OWNER_NAME = ".owner.json"


def write_owner(folder: Path) -> None:
    """Record this process (pid and host) in ``folder`` so a later writer can tell whether it still runs."""
    import json
    import socket

    (folder / OWNER_NAME).write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname()}),
                                     encoding="utf-8")


def owner_gone(folder: Path) -> bool:
    """True when the process recorded in ``folder`` (:func:`write_owner`) no longer runs on this host.

    A folder without a readable record is treated as left behind (a writer records itself first
    thing, under the lock of :func:`writer_lock`); one written on another host is kept (its process
    cannot be checked from here).
    """
    import json
    import socket

    try:
        rec = json.loads((folder / OWNER_NAME).read_text(encoding="utf-8"))
        pid, host = int(rec["pid"]), str(rec["host"])
    except (OSError, ValueError, KeyError, TypeError):
        return True
    return host == socket.gethostname() and not pid_alive(pid)


class writer_lock:
    """An exclusive lock on writing ``target`` (a file ``.NAME.lock`` beside it), for one process at a time.

    ``fcntl.flock`` where it exists (released by the kernel when the process dies, so a killed
    writer never leaves a lock behind); elsewhere the file is created exclusively and a file whose
    recorded process is gone is taken over. A second writer gets :class:`InputError` at once
    ("... is being written by another mrcstats process (pid P on HOST)"), never a wait and never
    a silent last-one-wins. The lock file is removed on release.
    """

    def __init__(self, target: str | os.PathLike, what: str = "dataset") -> None:
        self.target = Path(target)
        self.path = self.target.parent / f".{self.target.name}.lock"
        self.what = what
        self.fd: int | None = None

    def _busy(self) -> InputError:
        import json

        try:
            rec = json.loads(self.path.read_text(encoding="utf-8"))
            who = f" (pid {int(rec['pid'])} on {rec['host']})"
        except (OSError, ValueError, KeyError, TypeError):
            who = ""
        return InputError(f"{self.target}: the {self.what} is being written by another mrcstats process{who}; "
                          f"wait for it to finish, or write to another place")

    def acquire(self) -> writer_lock:
        import json
        import socket

        record = json.dumps({"pid": os.getpid(), "host": socket.gethostname()}).encode()
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            fcntl = None
        for _ in range(100):
            try:
                if fcntl is None:  # pragma: no cover - Windows
                    try:
                        fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
                    except FileExistsError:
                        if owner_gone_file(self.path):
                            with contextlib.suppress(OSError):
                                os.unlink(self.path)
                            continue
                        raise self._busy() from None
                else:
                    fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except OSError:
                        os.close(fd)
                        raise self._busy() from None
                    try:   # the file may have been removed (released) between open and flock: take a fresh one
                        same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
                    except FileNotFoundError:
                        same = False
                    if not same:
                        os.close(fd)
                        continue
                    os.ftruncate(fd, 0)
                os.write(fd, record)
                self.fd = fd
                return self
            except OSError as exc:
                raise InputError(f"{self.target}: cannot lock the {self.what} for writing ({_why(exc)} in "
                                 f"{self.path.parent}); choose another place") from None
        raise self._busy()  # pragma: no cover - a lock file replaced a hundred times in a row

    def release(self) -> None:
        if self.fd is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        with contextlib.suppress(OSError):
            os.close(self.fd)
        self.fd = None

    def __enter__(self) -> writer_lock:  # noqa: PYI034
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def owner_gone_file(path: Path) -> bool:  # pragma: no cover - the Windows lock
    """:func:`owner_gone` for a lock file holding the record itself."""
    import json
    import socket

    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
        return str(rec["host"]) == socket.gethostname() and not pid_alive(int(rec["pid"]))
    except (OSError, ValueError, KeyError, TypeError):
        return False
