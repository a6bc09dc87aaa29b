"""Loading raw input files once: gzip, BOMs, encodings, Git LFS pointers, JSON with its pitfalls.

:func:`load_source` reads a file once: it decompresses gzip (by magic bytes, not
name), strips a UTF-8 BOM, converts UTF-16 text (with a BOM) to UTF-8, refuses a
Git LFS pointer (the data was never fetched) and checks that text is valid UTF-8,
reporting the byte offset and line of the first bad byte. :class:`Source` parses
JSON lazily and refuses a repeated key in one object (``{"correct": 1, "correct": 0}``
would otherwise keep the last value without a word); the non-standard constants
``NaN``/``Infinity`` are kept as floats and where they occur is recorded
(:attr:`Source.nonfinite`), so the schema can refuse them in key columns.

This module is the bottom of :mod:`mrcstats.io`: it imports no reader and not the format registry (the
folder listing, :func:`expand_paths`, is given the file endings to pick up), so the format detection
(:mod:`mrcstats.io.detect`) and every reader import it without a cycle.
"""
from __future__ import annotations

import errno
import gzip
import json
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mrcstats.errors import InputError

ZIP_MAGIC = b"PK\x03\x04"
#: the first line of a Git LFS pointer file (https://github.com/git-lfs/git-lfs/blob/main/docs/spec.md)
LFS_MAGIC = b"version https://git-lfs.github.com/spec/"
_UNSET = object()


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    d = dict(pairs)
    if len(d) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise _DuplicateKey(k)
            seen.add(k)
    return d


@dataclass
class Source:
    """One input file, read once: decompressed bytes (UTF-8 for text) and a lazily parsed JSON value."""

    path: Path
    data: bytes
    binary: bool = False
    _json: Any = field(default=_UNSET, repr=False)
    #: True once a parse met ``NaN``/``Infinity``/``-Infinity`` (not JSON, but Python writes them)
    nonfinite: bool = field(default=False, repr=False)

    @property
    def name(self) -> str:
        return str(self.path)

    @property
    def stem(self) -> str:
        """File name without ``.gz`` and the format extension."""
        n = self.path.name
        if n.lower().endswith(".gz"):
            n = n[:-3]
        return n.rsplit(".", 1)[0] if "." in n else n

    def text(self) -> str:
        return self.data.decode("utf-8")

    def _constant(self, name: str) -> float:
        self.nonfinite = True
        return float(name.replace("Infinity", "inf"))

    def loads(self, data: bytes | str, where: str) -> Any:
        """Parse one JSON document; a repeated key raises :class:`InputError` naming ``where``."""
        try:
            return json.loads(data, object_pairs_hook=_pairs_hook, parse_constant=self._constant)
        except UnicodeDecodeError as exc:
            raise InputError(f"{self.name}: {where}: not text in one encoding ({exc.encoding} guessed: {exc.reason} "
                             f"at byte {exc.start}); save the file as UTF-8") from None
        except _DuplicateKey as exc:
            raise InputError(f"{self.name}: {where}: key {exc.key!r} appears twice in one JSON object; only one "
                             f"value can be kept, so fix the file (remove or rename one of them)") from None

    def json(self) -> Any:
        """The whole file parsed as one JSON document (errors name the line and column)."""
        if self._json is _UNSET:
            try:
                self._json = self.loads(self.data, "JSON document")
            except json.JSONDecodeError as exc:
                raise InputError(f"{self.name}: not valid JSON at line {exc.lineno}, column {exc.colno}: "
                                 f"{exc.msg}") from None
        return self._json

    def json_lines(self) -> list[Any]:
        """The file parsed as JSON lines (blank lines ignored; errors name the line)."""
        out = []
        for i, line in enumerate(self.data.splitlines(), 1):
            if not line.strip():
                continue
            try:
                out.append(self.loads(line, f"line {i}"))
            except json.JSONDecodeError as exc:
                raise InputError(f"{self.name}: line {i} is not valid JSON ({exc.msg} at column {exc.colno}); "
                                 f"expected one JSON object per line") from None
        return out


def check_path_arg(path: Any, what: str = "path") -> Path:
    """``path`` as a :class:`Path`; anything but ``str``/``os.PathLike`` raises :class:`InputError`."""
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, (str, os.PathLike)):
        raise InputError(f"{what} must be a file or folder name (str or pathlib.Path), got {type(path).__name__}"
                         + (" (None)" if path is None else f" {path!r}"[:80]))
    p = Path(path)
    if not str(p).strip() or str(path) == "":
        raise InputError(f"{what} is empty; give a file or folder name")
    return p


def load_source(path: str | Path) -> Source:
    """Read ``path`` (gzip transparently) and return a checked :class:`Source`.

    Raises :class:`InputError` for a missing or empty file, a Git LFS pointer, and for
    text that is not UTF-8 (naming the byte offset and line of the first undecodable byte).
    """
    p = check_path_arg(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{p}: is a folder; pass the folder itself to read every file in it") from None
    except OSError as exc:
        _check_link(p)
        raise InputError(f"{p}: cannot read ({exc.strerror or exc})") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise InputError(f"{p}: corrupt gzip data ({exc})") from None
    if raw[:4] in (b"PAR1", ZIP_MAGIC):
        return Source(p, raw, binary=True)
    if raw[:3] == b"\xef\xbb\xbf":
        raw = raw[3:]
    elif raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        try:
            raw = raw.decode("utf-16").encode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"{p}: bad UTF-16 text at byte {exc.start}; re-save the file as UTF-8") from None
    if raw.startswith(LFS_MAGIC):
        raise InputError(f"{p}: is a Git LFS pointer, not the data (the file was cloned without its LFS "
                         f"content); run `git lfs pull` in its repository, then read it again")
    if not raw.strip():
        raise InputError(f"{p}: file is empty")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        bad = raw[exc.start:exc.end]
        raise InputError(f"{p}: not UTF-8 text: undecodable byte(s) {bad!r} at byte offset {exc.start} "
                         f"(line {line}); re-save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8)") from None
    return Source(p, raw)


def expand_paths(paths: Any, extensions: tuple[str, ...]) -> list[Path]:
    """Expand files and folders into a list of files: a folder's files (recursively, sorted) whose name ends
    with one of ``extensions`` (lower case with the dot, e.g. :data:`mrcstats.io.formats.EXTENSIONS`),
    optionally followed by ``.gz``. A log dataset folder (:func:`mrcstats.io.dataset.is_dataset`) is refused
    here, where folders are opened, whatever the caller reads: it is opened as a dataset, never as its files."""
    if isinstance(paths, (str, os.PathLike, bytes)):
        paths = [paths]
    elif paths is None or isinstance(paths, dict) or not isinstance(paths, (list, tuple)):
        try:
            if paths is None or isinstance(paths, dict):
                raise TypeError
            paths = list(paths)
        except TypeError:
            raise InputError(f"paths must be a file or folder name or a list of them, got "
                             f"{type(paths).__name__}") from None
    out: list[Path] = []
    for item in paths:
        p = check_path_arg(item)
        try:
            is_dir, exists = p.is_dir(), p.exists()
        except OSError as exc:  # e.g. a name too long
            raise InputError(f"{p}: cannot open ({exc.strerror or exc})") from None
        if is_dir:
            from mrcstats.io.dataset import is_dataset

            if is_dataset(p):   # its files are a dataset's parts (and _mrcstats.json), not a folder of logs
                raise InputError(f"{p}: is a log dataset folder (mrcstats ingest --dataset), not a folder of files; "
                                 f"give it alone to read it as the dataset (read_log/open_log, any command), "
                                 f"without format=/mapping=/model= (--format/--map/--model)")
            found = sorted(f for f in p.rglob("*") if not f.name.startswith(".") and _known_ext(f.name, extensions)
                           and _data_file(f))
            if not found:
                raise InputError(f"{p}: folder has no data files (looked for "
                                 f"{', '.join(extensions)}, optionally .gz)")
            out.extend(select_run_files(found))
        elif exists:
            out.append(p)
        else:
            _check_link(p)
            raise InputError(f"{p}: no such file or folder")
    if not out:
        raise InputError("no input files given")
    return out


def _check_link(p: Path) -> None:
    """Raise the clear error for a symbolic link that leads nowhere: a loop (``a -> b -> a``) or a link to a
    missing file (a plain missing path returns)."""
    from mrcstats._files import link_loop_error

    try:
        os.stat(p)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise link_loop_error(p) from None
        if os.path.islink(p):
            raise InputError(f"{p}: a symbolic link to {os.readlink(p)}, which does not exist; point the link at "
                             f"the data file or remove it") from None


def _data_file(f: Path) -> bool:
    """A folder entry with a data file's name is read when it is a file; one that is a broken symbolic link
    (or a loop of them) is refused rather than skipped without a word."""
    if f.is_file():
        return True
    if f.is_symlink():
        _check_link(f)
    return False


def _bare(name: str) -> str:
    return name.lower().removesuffix(".gz")


def select_run_files(files: list[Path]) -> list[Path]:
    """The data files of a folder listing that holds eval-tool run folders.

    * HELM runs (``per_instance_stats.json`` beside ``scenario_state.json``, ``run_spec.json``, ...): only the
      ``per_instance_stats.json`` files (the reader opens the others beside each);
    * Every Eval Ever (``<uuid>.json`` beside ``<uuid>_samples.jsonl``): the aggregate only (the reader opens
      its samples file);
    * lm-evaluation-harness outputs (``samples_<task>_<ts>.jsonl`` beside ``results_<ts>.json``): the samples
      files only (the reader takes the model name from the results file beside each);
    * lighteval outputs (``details_<task>_<date>.parquet`` with ``results_<date>.json``): the details files only
      (the reader takes the model name from the run's results file).
    """
    helm = [f for f in files if _bare(f.name) == "per_instance_stats.json"]
    if helm:
        return helm
    # Every Eval Ever: <uuid>.json beside <uuid>_samples.jsonl -- the aggregate is read with its samples file
    aggregates = {(f.parent, _bare(f.name)[:-5]) for f in files if _bare(f.name).endswith(".json")}
    files = [f for f in files if not (_bare(f.name).endswith("_samples.jsonl")
                                      and (f.parent, _bare(f.name)[:-len("_samples.jsonl")]) in aggregates)]
    samples = any(_bare(f.name).startswith("samples_") and _bare(f.name).endswith(".jsonl") for f in files)
    details = any(_bare(f.name).startswith("details_") and _bare(f.name).endswith(".parquet") for f in files)
    if samples or details:
        return [f for f in files if not (_bare(f.name).startswith("results") and _bare(f.name).endswith(".json"))]
    return files


def _known_ext(name: str, extensions: tuple[str, ...]) -> bool:
    return name.lower().removesuffix(".gz").endswith(tuple(extensions))
