"""Large CSV/TSV/JSONL inputs read in chunks of rows: bounded memory whatever the file size.

``mrcstats ingest --dataset`` reads a CSV, TSV or JSON-lines file larger than
:data:`STREAM_BYTES` with :func:`stream_chunks` instead of loading it whole: pandas' C
parser in chunks (``read_csv(chunksize=...)``, quoted line breaks handled) for
delimited text, and batches of lines for JSON lines (each batch read by the very
reader of small files, :func:`mrcstats.io.tabular.read_table`). Each chunk is mapped,
scored and coerced exactly as a whole file is (:func:`mrcstats.io.schema.coerce_log`):
the same rules and the same messages, with the row, line and record numbers counted
from the top of the file (:func:`shift_rows`). Keys repeated within a chunk are found
there, keys repeated across chunks when the dataset is closed
(:meth:`mrcstats.io.ingest.DatasetWriter.close`).

Differences, by design: columns other than the canonical ones are kept as text in a
streamed file (a chunk cannot know that a later one holds a word in a column of numbers,
and all chunks of a dataset share one schema); ``trial``, ``masking_rate`` and
``correct`` are read as in a whole file. A file with several bad rows may be refused for
an earlier one than a whole-file read names (a whole file is checked column by column,
a stream chunk by chunk), and a bad value may be shown as its chunk's parser typed it
(``2`` rather than ``'2'``). gzip is decompressed on the fly; a UTF-16 file is read
whole (see :func:`head_source`).
"""
from __future__ import annotations

import gzip
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import pandas as pd

from mrcstats.errors import InputError
from mrcstats.io.source import LFS_MAGIC, Source

#: files larger than this (bytes on disk) are streamed by ``ingest --dataset``
STREAM_BYTES = 256 << 20
#: the formats that can be streamed
STREAM_FORMATS = ("csv", "tsv", "jsonl")
#: the most rows one streamed chunk holds (a JSON-lines chunk: a fifth, its records are Python dicts first)
STREAM_CHUNK_ROWS = 500_000
_HEAD = 1 << 20


def _open(path: Path) -> IO[bytes]:
    fh = open(path, "rb")  # noqa: SIM115 - returned open
    if fh.read(2) == b"\x1f\x8b":
        fh.close()
        fh = gzip.open(path, "rb")  # noqa: SIM115 - returned open
    else:
        fh.seek(0)
    if fh.read(3) != b"\xef\xbb\xbf":   # a UTF-8 BOM is skipped, as load_source does
        fh.seek(0)
    return fh


def head_source(path: str | os.PathLike) -> Source | None:
    """The first MiB of a file (gunzipped, BOM removed, cut after its last complete line) as a
    :class:`Source` for format detection; None when the file is not UTF-8 text that can be streamed
    (UTF-16, binary, a Git LFS pointer, empty, or a first line longer than a MiB)."""
    p = Path(path)
    try:
        with _open(p) as fh:
            head = fh.read(_HEAD + 1)
    except (OSError, EOFError):
        return None
    if not head.strip() or head[:2] in (b"\xff\xfe", b"\xfe\xff") or head[:4] in (b"PAR1", b"PK\x03\x04") \
            or head.startswith(LFS_MAGIC):
        return None
    if len(head) > _HEAD:
        cut = head.rfind(b"\n", 0, _HEAD)
        if cut < 0:
            return None
        head = head[: cut + 1]
    try:
        head.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return Source(p, head)


def file_size(path: str | os.PathLike) -> int:
    """The size of ``path`` in bytes (0 when it cannot be read)."""
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def detect_large(path: Path, limit: int) -> str | None:
    """The format of a file larger than ``limit`` judged by its first MiB when that says CSV, TSV or JSON
    lines (so a large file is never loaded whole to be detected); else None (detect it whole)."""
    from mrcstats.io.detect import detect_format

    if file_size(path) <= limit:
        return None
    head = head_source(path)
    if head is None:
        return None
    try:
        fmt = detect_format(head)
    except InputError:
        return None
    return fmt if fmt in STREAM_FORMATS else None


def shift_rows(exc: InputError, source: str, rows: int = 0, lines: int = 0, records: int = 0) -> InputError:
    """``exc`` with the row (``rows``), line and record numbers of a chunk's message counted from the top
    of the file (a chunk starts after ``rows`` data rows, ``lines`` lines and ``records`` records)."""
    msg = str(exc)
    src = re.escape(str(source))
    msg = re.sub(rf"^({src}, row )(\d+)", lambda m: f"{m.group(1)}{int(m.group(2)) + rows}", msg)
    msg = re.sub(r"( at rows )(\d+)( and )(\d+)(; )",
                 lambda m: f"{m.group(1)}{int(m.group(2)) + rows}{m.group(3)}{int(m.group(4)) + rows}{m.group(5)}",
                 msg)
    msg = re.sub(rf"^({src}: line )(\d+)", lambda m: f"{m.group(1)}{int(m.group(2)) + lines}", msg)
    msg = re.sub(rf"^({src}: record )(\d+)", lambda m: f"{m.group(1)}{int(m.group(2)) + records}", msg)
    if msg == str(exc):
        return exc
    return type(exc)(msg)


def stream_chunks(path: str | os.PathLike, fmt: str, mapping: Mapping[str, str] | None = None,
                  model: str | None = None, chunk_rows: int = STREAM_CHUNK_ROWS) -> Iterator[tuple[pd.DataFrame, int]]:
    """Yield ``(canonical chunk, data rows before it)`` for a CSV/TSV/JSONL file, at most ``chunk_rows`` rows each.

    Errors are those of a whole-file read (:class:`~mrcstats.errors.InputError` naming the file and
    the row, line or record counted from the top).
    """
    from mrcstats.io.schema import coerce_log
    from mrcstats.io.tabular import apply_mapping, derive_correct

    p = Path(path)
    name = str(p)
    chunks = _csv_chunks(p, fmt, mapping, chunk_rows) if fmt in ("csv", "tsv") else \
        _jsonl_chunks(p, mapping, max(1, min(chunk_rows, STREAM_CHUNK_ROWS // 5)))
    rows = 0
    for df, lines, records in chunks:
        try:
            if fmt in ("csv", "tsv"):
                df = derive_correct(apply_mapping(df, mapping, name), name)
            out = coerce_log(df, source=name, model=model)
        except InputError as exc:
            raise shift_rows(exc, name, rows, lines, records) from None
        out.attrs = dict(df.attrs)
        yield out, rows
        rows += len(out)
    if rows == 0:
        raise InputError(f"{name}: has a header but no data rows" if fmt != "jsonl" else f"{name}: file is empty")


def _csv_chunks(p: Path, fmt: str, mapping: Mapping[str, str] | None,
                chunk_rows: int, typed: bool = False) -> Iterator[tuple[pd.DataFrame, int, int]]:
    from mrcstats.io.arrow_columns import text_fields
    from mrcstats.io.formats.content import header_columns
    from mrcstats.io.tabular import check_unique_columns

    sep = "," if fmt == "csv" else "\t"
    head = head_source(p)
    if head is None:
        raise InputError(f"{p}: cannot be read in chunks (not UTF-8 text); re-save it as UTF-8")
    cols = header_columns(head, sep)
    if not cols or not any(c.strip() for c in cols):
        raise InputError(f"{p}: no header line; the first line must name the columns")
    check_unique_columns(cols, str(p))
    if typed:   # the whole-file reader's types (read_delimited): text fields as text, the rest inferred
        dtype = {c: "string" for c in text_fields(cols, mapping)}
    else:       # everything else as text (see the module docstring)
        numeric = {(mapping or {}).get(f, f) for f in ("trial", "masking_rate", "correct")}
        dtype = {c: "string" for c in cols if c not in numeric}
    what = "TSV" if sep == "\t" else "CSV"
    done = 0
    with _open(p) as fh:
        try:
            reader = pd.read_csv(fh, sep=sep, dtype=dtype, engine="c", keep_default_na=False, na_values=[""],
                                 chunksize=chunk_rows, encoding="utf-8", low_memory=not typed)
            for df in reader:
                df.columns = [str(c) for c in df.columns]
                yield df, 0, 0
                done += len(df)
        except pd.errors.EmptyDataError:
            raise InputError(f"{p}: file is empty") from None
        except pd.errors.ParserError as exc:
            msg = str(exc).strip().splitlines()[-1] if str(exc).strip() else "parse error"
            raise InputError(f"{p}: cannot parse as {what}: {msg}") from None
        except UnicodeDecodeError:
            raise InputError(f"{p}: not UTF-8 text (an undecodable byte after data row {done}); re-save the "
                             f"file as UTF-8 (e.g. iconv -f latin1 -t utf-8)") from None
        except (OSError, EOFError) as exc:
            raise InputError(f"{p}: cannot read ({exc})") from None


def _jsonl_chunks(p: Path, mapping: Mapping[str, str] | None,
                  chunk_rows: int, typed: bool = False) -> Iterator[tuple[pd.DataFrame, int, int]]:
    from mrcstats.io.schema import CANONICAL_COLUMNS
    from mrcstats.io.tabular import read_table

    keep = set(CANONICAL_COLUMNS) | {(mapping or {}).get(f, f) for f in ("trial", "masking_rate", "correct")}
    keep |= set((mapping or {}).values())
    flatten: list[bool] = []   # the first record's choice (flatten nested objects or not), for every chunk

    def chunk(batch: list[bytes], lines: int, records: int) -> tuple[pd.DataFrame, int, int]:
        src = Source(p, b"".join(batch))
        try:   # blank lines stay in the batch: the reader counts them in its line numbers
            if not flatten:
                first = next(line for line in batch if line.strip())
                rec = Source(p, first).json_lines()[0]
                flatten.append(isinstance(rec, dict) and any(isinstance(v, dict) for v in rec.values()))
            df = read_table(src, "jsonl", mapping, flatten=flatten[0])
        except InputError as exc:
            raise shift_rows(exc, str(p), 0, lines, records) from None
        if not typed:
            for c in df.columns:   # other columns as text, as in a streamed CSV
                if str(c) not in keep:
                    df[c] = _text(df[c])
        return df, lines, records

    lines = records = n = 0
    batch: list[bytes] = []
    with _open(p) as fh:
        try:
            for line in iter(fh.readline, b""):
                batch.append(line)
                n += bool(line.strip())
                if n >= chunk_rows:
                    yield chunk(batch, lines, records)
                    lines, records, n, batch = lines + len(batch), records + n, 0, []
        except (OSError, EOFError) as exc:
            raise InputError(f"{p}: cannot read ({exc})") from None
    if n:
        yield chunk(batch, lines, records)


def typed_chunks(path: str | os.PathLike, fmt: str, mapping: Mapping[str, str] | None = None,
                 chunk_rows: int = STREAM_CHUNK_ROWS) -> Iterator[tuple[pd.DataFrame, int, int]]:
    """Yield ``(frame, lines before it, records before it)`` for a CSV/TSV/JSONL file, at most ``chunk_rows`` rows
    each: the frame the whole-file reader (:func:`mrcstats.io.tabular.read_table`) gives for the chunk's rows
    alone (columns mapped, ``correct`` derived from gold and pred), not yet coerced. Its column types are
    the chunk's own; :class:`ColumnTypes` says which types the whole file would have."""
    from mrcstats.io.tabular import apply_mapping, derive_correct

    p = Path(path)
    name = str(p)
    if fmt in ("csv", "tsv"):
        rows = 0
        for df, _lines, _records in _csv_chunks(p, fmt, mapping, chunk_rows, typed=True):
            try:
                df = derive_correct(apply_mapping(df, mapping, name), name)
            except InputError as exc:
                raise shift_rows(exc, name, rows) from None
            yield df, 0, 0
            rows += len(df)
    else:
        yield from _jsonl_chunks(p, mapping, max(1, min(chunk_rows, STREAM_CHUNK_ROWS // 5)), typed=True)


#: canonical columns :func:`mrcstats.io.schema.coerce_log` reads as numbers or booleans, row by row whatever
#: their type (an int chunk and a text chunk give the same values)
_ROWWISE = ("trial", "masking_rate", "correct", "score")
_BIG = 2.0 ** 53


class ColumnTypes:
    """The column types a whole-file read gives, gathered from a streamed file's chunks (:func:`typed_chunks`).

    A reader infers each column's type from the rows it sees, so a chunk can type a column otherwise than
    the whole file (ints in one chunk, ints and empty cells in another: int64 and float64; the whole file:
    float64). :meth:`add` records each chunk's types (its columns in order of first appearance); :meth:`targets`
    gives, per column, the type every chunk is to be cast to (:meth:`conform`) so that the chunk's rows are
    exactly the whole file's, or None when that cannot be promised (then the file is read whole):

    * ``model``, ``item`` and the other text fields: any types, except floats that are not all whole numbers
      below 2**53 in every chunk (:func:`~mrcstats.io.schema.coerce_log` writes a column of whole floats
      without ``.0``: a whole-file decision);
    * ``trial``, ``masking_rate``, ``correct``, ``score``: any types (coerced value by value);
    * other columns: one type in every chunk that has a value, or ints and floats (float64), or ints with a
      chunk without values (float64, as pandas types ints with missing cells); a chunk without a value takes
      the column's type (missing); JSON objects or arrays in every chunk (JSON text); JSON nulls only (an
      object column; float64 when a record lacks the key). Booleans with missing cells, mixed types, other objects: not promised.

    """

    def __init__(self) -> None:
        self.columns: dict[str, dict[str, Any]] = {}
        self.chunks = 0

    def add(self, df: pd.DataFrame) -> None:
        """Record one chunk's column types."""
        import numpy as np

        for c in df.columns:
            info = self.columns.setdefault(str(c), {"kinds": set(), "dtypes": set(), "null_dtypes": set(),
                                                    "null": self.chunks > 0, "empty": self.chunks > 0,
                                                    "absent": self.chunks > 0, "wholes": True, "nested": True})
            s = df[c]
            dt = s.dtype
            nul = s.isna().to_numpy()
            if nul.any():
                info["null"] = True
            if nul.all():
                info["empty"] = True
                info["null_dtypes"].add(str(dt))
                continue
            if str(dt) == "bool":
                kind = "bool"
            elif str(dt) == "int64":
                kind = "int"
                info["wholes"] = info["wholes"] and bool((np.abs(s.to_numpy()) < _BIG).all())
            elif str(dt) == "float64":
                kind = "float"
                vals = s.to_numpy()[~nul]
                info["wholes"] = info["wholes"] and bool(((vals == np.round(vals)) & (np.abs(vals) < _BIG)).all())
            elif isinstance(dt, pd.StringDtype):
                kind = "str"
            else:
                kind = "other"
                info["nested"] = info["nested"] and bool(s.map(lambda v: isinstance(v, (dict, list))).any())
            info["kinds"].add(kind)
            info["dtypes"].add(str(dt))
        for c, info in self.columns.items():
            if c not in df.columns:
                info["null"] = info["empty"] = info["absent"] = True
        self.chunks += 1

    def targets(self) -> dict[str, str | None] | None:
        """``{column: dtype to cast to (None: as read)}`` in the whole file's column order, or None when a chunk's
        rows could differ from the whole file's (see the class docstring)."""
        from mrcstats.io.schema import STRING_COLUMNS

        out: dict[str, str | None] = {}
        for c, info in self.columns.items():
            kinds: set[str] = info["kinds"]
            dtypes: set[str] = info["dtypes"]
            if c in _ROWWISE:
                out[c] = None
            elif c in STRING_COLUMNS:   # floats (or ints with missing cells: floats in the whole file)
                if ("float" in kinds or ("int" in kinds and info["null"])) and not info["wholes"]:
                    return None
                out[c] = None
            elif not kinds:   # never a value: float64 (NaN), or objects when every JSON record holds a null
                nd = info["null_dtypes"]
                if nd == {"object"} and not info["absent"]:
                    out[c] = "object"
                elif nd <= {"object", "float64"}:
                    out[c] = "float64"
                else:
                    return None
            elif kinds == {"int"}:
                out[c] = "float64" if info["null"] else "int64"
            elif kinds <= {"int", "float"}:
                out[c] = "float64"
            elif kinds == {"bool"} and not info["null"]:
                out[c] = "bool"
            elif kinds == {"str"} and len(dtypes) == 1:
                out[c] = next(iter(dtypes))
            elif kinds == {"other"} and info["nested"] and not info["empty"]:
                out[c] = None   # objects and arrays in every chunk: JSON text (coerce_log), value by value
            else:
                return None
        return out

    @staticmethod
    def conform(df: pd.DataFrame, targets: Mapping[str, str | None]) -> pd.DataFrame | None:
        """``df`` with the whole file's columns (in its order, a column the chunk lacks as missing) and types,
        or None when a column of the chunk is not among ``targets``."""
        import numpy as np

        if any(str(c) not in targets for c in df.columns):
            return None
        out = {}
        n = len(df)
        for c, t in targets.items():
            if c not in df.columns:   # missing in the whole file too (a target of int64 or bool has none)
                out[c] = pd.Series(np.full(n, None, dtype=object), index=df.index) if t == "object" else \
                    pd.Series(np.full(n, np.nan), index=df.index).astype(t or "float64")
            elif t is not None and str(df[c].dtype) != t:
                try:
                    out[c] = df[c].astype(t)
                except (TypeError, ValueError):
                    return None
            else:
                out[c] = df[c]
        res = pd.DataFrame(out, index=df.index)
        res.attrs = dict(df.attrs)
        return res


def _text(s: pd.Series) -> pd.Series:
    """Values as text (``str``), missing values kept missing."""
    def one(v: object) -> object:
        if isinstance(v, str) or (not isinstance(v, (list, dict)) and pd.isna(v)):
            return v
        return str(v)

    return s.astype(object).map(one).astype("string")


__all__ = ["STREAM_BYTES", "STREAM_CHUNK_ROWS", "STREAM_FORMATS", "ColumnTypes", "head_source", "shift_rows",
           "stream_chunks", "typed_chunks"]
