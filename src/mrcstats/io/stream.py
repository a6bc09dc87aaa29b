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
from typing import IO

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
                chunk_rows: int) -> Iterator[tuple[pd.DataFrame, int, int]]:
    from mrcstats.io.detect import header_columns
    from mrcstats.io.tabular import check_unique_columns

    sep = "," if fmt == "csv" else "\t"
    head = head_source(p)
    if head is None:
        raise InputError(f"{p}: cannot be read in chunks (not UTF-8 text); re-save it as UTF-8")
    cols = header_columns(head, sep)
    if not cols or not any(c.strip() for c in cols):
        raise InputError(f"{p}: no header line; the first line must name the columns")
    check_unique_columns(cols, str(p))
    numeric = {(mapping or {}).get(f, f) for f in ("trial", "masking_rate", "correct")}
    dtype = {c: "string" for c in cols if c not in numeric}   # everything else as text (see the module docstring)
    what = "TSV" if sep == "\t" else "CSV"
    done = 0
    with _open(p) as fh:
        try:
            reader = pd.read_csv(fh, sep=sep, dtype=dtype, engine="c", keep_default_na=False, na_values=[""],
                                 chunksize=chunk_rows, encoding="utf-8")
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
                  chunk_rows: int) -> Iterator[tuple[pd.DataFrame, int, int]]:
    from mrcstats.io.schema import CANONICAL_COLUMNS
    from mrcstats.io.tabular import read_table

    keep = set(CANONICAL_COLUMNS) | {(mapping or {}).get(f, f) for f in ("trial", "masking_rate", "correct")}
    keep |= set((mapping or {}).values())

    def chunk(batch: list[bytes], lines: int, records: int) -> tuple[pd.DataFrame, int, int]:
        try:   # blank lines stay in the batch: the reader counts them in its line numbers
            df = read_table(Source(p, b"".join(batch)), "jsonl", mapping)
        except InputError as exc:
            raise shift_rows(exc, str(p), 0, lines, records) from None
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


def _text(s: pd.Series) -> pd.Series:
    """Values as text (``str``), missing values kept missing."""
    def one(v: object) -> object:
        if isinstance(v, str) or (not isinstance(v, (list, dict)) and pd.isna(v)):
            return v
        return str(v)

    return s.astype(object).map(one).astype("string")


__all__ = ["STREAM_BYTES", "STREAM_CHUNK_ROWS", "STREAM_FORMATS", "head_source", "shift_rows", "stream_chunks"]
