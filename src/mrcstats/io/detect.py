"""Loading raw files (gzip, BOMs, encodings) and detecting their format by content.

:func:`load_source` reads a file once: it decompresses gzip (by magic bytes, not
name), strips a UTF-8 BOM, converts UTF-16 text (with a BOM) to UTF-8, and checks
that text is valid UTF-8, reporting the byte offset and line of the first bad
byte. :func:`detect_format` then looks at the content:

* ``parquet``: the ``PAR1`` magic; ``inspect``: a zip archive with ``header.json`` (an Inspect ``.eval`` log);
* JSON documents: ``inspect`` (an Inspect AI log: ``eval`` + ``samples``), ``helm`` (a HELM
  ``per_instance_stats.json``: a list of ``instance_id`` + ``stats`` objects),
  ``elagent`` (``data`` lists of ``result`` records, or operator-nested
  ``{accuracy, invalid, data: [[prompt, gold, pred, response], ...]}``), else ``json``;
* JSON lines: ``harness`` (lm-evaluation-harness samples: ``doc_id`` and
  ``filtered_resps``/``resps``), else ``jsonl``;
* delimited text: ``mskqa`` (``answer_<model>_<MR>`` columns beside a gold
  ``answer``/``correct`` column), else ``tsv`` or ``csv`` by the header's delimiter.
"""
from __future__ import annotations

import csv
import gzip
import io
import json
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mrcstats.errors import InputError

#: every format name accepted by ``--format``
FORMATS: tuple[str, ...] = ("csv", "tsv", "json", "jsonl", "parquet", "mskqa", "elagent", "harness", "inspect",
                            "helm")
#: file name endings a folder listing picks up
EXTENSIONS: tuple[str, ...] = (".csv", ".tsv", ".txt", ".json", ".jsonl", ".ndjson", ".parquet", ".pq", ".eval")

ZIP_MAGIC = b"PK\x03\x04"
MSKQA_ANSWER_RE = re.compile(r"^answer_(.+)_(\d+(?:\.\d+)?)$")
_UNSET = object()


@dataclass
class Source:
    """One input file, read once: decompressed bytes (UTF-8 for text) and a lazily parsed JSON value."""

    path: Path
    data: bytes
    binary: bool = False
    _json: Any = field(default=_UNSET, repr=False)

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

    def json(self) -> Any:
        """The whole file parsed as one JSON document (errors name the line and column)."""
        if self._json is _UNSET:
            try:
                self._json = json.loads(self.data)
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
                out.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise InputError(f"{self.name}: line {i} is not valid JSON ({exc.msg} at column {exc.colno}); "
                                 f"expected one JSON object per line") from None
        return out


def load_source(path: str | Path) -> Source:
    """Read ``path`` (gzip transparently) and return a checked :class:`Source`.

    Raises :class:`InputError` for a missing or empty file and for text that is not
    UTF-8 (naming the byte offset and line of the first undecodable byte).
    """
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{p}: is a folder; pass the folder itself to read every file in it") from None
    except OSError as exc:
        raise InputError(f"{p}: cannot read ({exc.strerror})") from None
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


def expand_paths(paths: str | Path | list[str | Path] | tuple) -> list[Path]:
    """Expand files and folders (recursively, known extensions, sorted) into a list of files."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    out: list[Path] = []
    for item in paths:
        p = Path(item)
        if p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.is_file() and not f.name.startswith(".")
                           and _known_ext(f.name))
            if not found:
                raise InputError(f"{p}: folder has no data files (looked for "
                                 f"{', '.join(EXTENSIONS)}, optionally .gz)")
            out.extend(select_run_files(found))
        elif p.exists():
            out.append(p)
        else:
            raise InputError(f"{p}: no such file or folder")
    if not out:
        raise InputError("no input files given")
    return out


def _bare(name: str) -> str:
    return name.lower().removesuffix(".gz")


def select_run_files(files: list[Path]) -> list[Path]:
    """The data files of a folder listing that holds eval-tool run folders.

    * HELM runs (``per_instance_stats.json`` beside ``scenario_state.json``, ``run_spec.json``, ...): only the
      ``per_instance_stats.json`` files (the reader opens the others beside each);
    * lm-evaluation-harness outputs (``samples_<task>_<ts>.jsonl`` beside ``results_<ts>.json``): the samples
      files only (the reader takes the model name from the results file beside each).
    """
    helm = [f for f in files if _bare(f.name) == "per_instance_stats.json"]
    if helm:
        return helm
    samples = any(_bare(f.name).startswith("samples_") and _bare(f.name).endswith(".jsonl") for f in files)
    if samples:
        return [f for f in files if not (_bare(f.name).startswith("results") and _bare(f.name).endswith(".json"))]
    return files


def _known_ext(name: str) -> bool:
    n = name.lower()
    n = n.removesuffix(".gz")
    return n.endswith(EXTENSIONS)


def _first_line(data: bytes) -> str:
    end = data.find(b"\n")
    line = data[: end if end >= 0 else min(len(data), 1 << 20)]
    return line.decode("utf-8", errors="replace").rstrip("\r")


def header_columns(src: Source, delimiter: str | None = None) -> list[str]:
    """Column names of a delimited text file (its first line)."""
    line = _first_line(src.data)
    if delimiter is None:
        delimiter = "\t" if line.count("\t") > line.count(",") else ","
    return next(csv.reader(io.StringIO(line), delimiter=delimiter), [])


def is_mskqa_header(cols: list[str]) -> bool:
    """True for maskcode outputs: ``answer_<model>_<MR>`` columns and no canonical ``model`` column."""
    return any(MSKQA_ANSWER_RE.match(c) for c in cols) and "model" not in cols


def _json_kind(obj: Any) -> str:
    from mrcstats.io.helm import looks_like_helm

    if looks_like_helm(obj):
        return "helm"
    if isinstance(obj, dict):
        if "samples" in obj and "eval" in obj:
            return "inspect"
        from mrcstats.io.elagent import looks_like_elagent

        if looks_like_elagent(obj):
            return "elagent"
    return "json"


def detect_format(src: Source) -> str:
    """The format name of ``src`` judged by its content (see the module docstring)."""
    if src.binary:
        if src.data[:4] == ZIP_MAGIC:
            import zipfile

            try:
                names = zipfile.ZipFile(io.BytesIO(src.data)).namelist()
            except zipfile.BadZipFile as exc:
                raise InputError(f"{src.name}: corrupt zip archive ({exc})") from None
            if "header.json" in names or any(n.startswith("samples/") for n in names):
                return "inspect"
            raise InputError(f"{src.name}: a zip archive that is not an Inspect AI .eval log; unpack it and pass "
                             f"the files inside")
        return "parquet"
    head = src.data.lstrip()[:1]
    if head in (b"{", b"["):
        try:
            obj = src.json()
        except InputError:
            first = src.data.lstrip().split(b"\n", 1)[0]
            try:
                rec = json.loads(first)
            except json.JSONDecodeError:
                raise InputError(f"{src.name}: looks like JSON but neither the file nor its first line "
                                 f"parses; fix the JSON or pass --format") from None
            if isinstance(rec, dict) and "doc_id" in rec and ("filtered_resps" in rec or "resps" in rec):
                return "harness"
            return "jsonl"
        if isinstance(obj, dict) and "doc_id" in obj and ("filtered_resps" in obj or "resps" in obj):
            return "harness"  # a one-line samples file
        kind = _json_kind(obj)
        if kind == "json" and isinstance(obj, dict) and not any(isinstance(v, list) for v in obj.values()):
            return "jsonl"  # one flat record: a JSON-lines file with one line
        return kind
    cols = header_columns(src)
    if is_mskqa_header(cols):
        return "mskqa"
    line = _first_line(src.data)
    return "tsv" if line.count("\t") > line.count(",") else "csv"
