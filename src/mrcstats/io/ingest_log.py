"""``mrcstats ingest --out LOG``: response logs to one canonical log file (:func:`ingest_log`), a large
CSV/TSV/JSON-lines file streamed in chunks (bounded memory) into the same file the whole-file read writes.

Layers: ingest_log -> stream (the chunked reading), reader; a sibling of :mod:`mrcstats.io.ingest` (neither
imports the other); nothing in ``io`` imports it (the CLI does).
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mrcstats.errors import InputError
from mrcstats.io.dataset import is_dataset
from mrcstats.io.stream import detect_large, file_size

#: rows per chunk of a file streamed into one log (:func:`ingest_log`; JSON lines: a fifth): 1.5x a 400 MB CSV
OUT_CHUNK_ROWS = 200_000


@dataclass(frozen=True)
class IngestedLog:
    """What :func:`ingest_log` wrote: the log file, its :func:`~mrcstats.io.schema.log_stats` and whether the
    input was streamed in chunks (bounded memory) or read whole."""

    path: Path
    stats: dict
    streamed: bool


def ingest_log(paths: str | os.PathLike | Sequence[str | os.PathLike], out: str | os.PathLike, *,
               format: str | None = None, mapping: Mapping[str, str] | None = None,
               model: str | Mapping[str, str] | None = None, on_duplicate: str = "error",
               threshold: float | None = None, stream_bytes: int | None = None,
               chunk_rows: int | None = None) -> IngestedLog:
    """Read response logs and write the canonical log ``out`` (``mrcstats ingest --out``): the same file as
    ``write_log(read_log(paths, ...), out)``, and its :func:`~mrcstats.io.schema.log_stats`.

    One CSV, TSV or JSON-lines file larger than ``stream_bytes`` (default
    :data:`mrcstats.io.stream.STREAM_BYTES`) read with ``on_duplicate="error"`` is streamed: read in
    chunks of at most ``chunk_rows`` rows (default :data:`OUT_CHUNK_ROWS`) (:func:`mrcstats.io.stream.typed_chunks`), each chunk given the
    column types of the whole file (:class:`mrcstats.io.stream.ColumnTypes`; when a later chunk changes
    them, the file is read a second time with the types known), coerced, checked and appended to
    ``out`` (Parquet row groups, or CSV lines), keys hashed to find duplicates: peak memory a chunk's,
    whatever the file size, and the same rows, columns, types and order as the whole-file read. The file is
    read whole as before when its columns' types cannot be promised chunk by chunk (mixed types in a
    column, booleans with missing cells, ...) and to word a duplicate key (the whole-file message). Any
    other input is read whole (:func:`mrcstats.io.read_log`).
    """
    from mrcstats._files import check_output_path
    from mrcstats.io.reader import LOG_SUFFIXES, check_read_args, read_log, write_log
    from mrcstats.io.schema import log_stats
    from mrcstats.io.stream import STREAM_BYTES

    given = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    target = check_output_path(out, suffixes=LOG_SUFFIXES, inputs=given)
    check_read_args(format, mapping, model, on_duplicate)
    limit = STREAM_BYTES if stream_bytes is None else stream_bytes
    plan = _stream_plan(given, format, on_duplicate, limit)
    if plan is not None:
        from mrcstats.io.reader import model_for

        f, fmt = plan
        stats = _stream_log(f, fmt, target, mapping=dict(mapping) if mapping else None, model=model_for(f, model),
                            threshold=threshold, chunk_rows=chunk_rows or OUT_CHUNK_ROWS)
        if stats is not None:
            return IngestedLog(target, stats, True)
    log = read_log(paths, format=format, mapping=mapping, model=model, on_duplicate=on_duplicate,
                   threshold=threshold)
    write_log(log, target)
    return IngestedLog(target, log_stats(log), False)


def _stream_plan(given: list, format: str | None, on_duplicate: str, limit: int) -> tuple[Path, str] | None:
    """(file, format) when the input is one CSV/TSV/JSON-lines file larger than ``limit`` bytes that can be
    streamed, else None."""
    from mrcstats.io.formats import EXTENSIONS
    from mrcstats.io.source import expand_paths
    from mrcstats.io.stream import STREAM_FORMATS, head_source

    if on_duplicate != "error" or len(given) != 1 or is_dataset(given[0]):
        return None
    files = expand_paths(given, EXTENSIONS)
    if len(files) != 1 or file_size(files[0]) <= limit or head_source(files[0]) is None:
        return None
    fmt = format or detect_large(files[0], limit)
    return (files[0], fmt) if fmt in STREAM_FORMATS else None


class _Restart(Exception):
    """A streamed pass cannot finish as the whole-file read would: ``targets`` None = read the file whole."""

    def __init__(self, targets: dict | None, graded: bool = False):
        super().__init__()
        self.targets, self.graded = targets, graded


def _stream_log(file: Path, fmt: str, target: Path, *, mapping, model, threshold, chunk_rows) -> dict | None:
    """Stream ``file`` into ``target`` (:func:`ingest_log`); its stats, or None when it must be read whole."""
    targets, graded = None, False
    for _ in range(3):   # again when a later chunk changed the column types (or the score rule) assumed before
        try:
            return _stream_pass(file, fmt, target, mapping, model, threshold, chunk_rows, targets, graded)
        except _Restart as r:
            if r.targets is None:
                return None
            targets, graded = r.targets, r.graded
    return None   # pragma: no cover - the third pass knows the whole file's types and score rule


def _stream_pass(file: Path, fmt: str, target: Path, mapping, model, threshold, chunk_rows,
                 known: dict | None, graded: bool) -> dict:
    """One pass of :func:`_stream_log`; ``known``: the whole file's column types (a second pass), ``graded``:
    a score-only file whose scores are not all 0/1 (its ``correct`` is <NA> throughout)."""
    from mrcstats._files import atomic_path
    from mrcstats.io.schema import LogStats, apply_threshold, coerce_log
    from mrcstats.io.stream import ColumnTypes, shift_rows, typed_chunks

    name = str(file)
    types = ColumnTypes()
    stats = LogStats()
    hashes: list[np.ndarray] = []
    assumed = known
    writing, wrote_binary, rows = True, False, 0
    attrs = {"skipped": {}, "format": fmt, "sources": [name],
             **({"threshold": float(threshold)} if threshold is not None else {})}
    with atomic_path(target) as tmp, _LogFileWriter(tmp, target, attrs) as out:
        for raw, lines, records in typed_chunks(file, fmt, mapping, chunk_rows):
            types.add(raw)
            if types.targets() is None:   # it stays None whatever the later chunks hold
                raise _Restart(None)
            if not writing:
                continue
            if assumed is None:
                assumed = types.targets()
            chunk = ColumnTypes.conform(raw, assumed) if assumed is not None else None
            if chunk is None:
                writing = False
                continue
            try:
                log = coerce_log(chunk, source=name, model=model)
                if "correct" not in chunk.columns:   # correct from score: <NA> throughout unless all are 0/1
                    s = log["score"].to_numpy(dtype=float, na_value=np.nan)
                    binary = bool(np.isin(s[~np.isnan(s)], (0.0, 1.0)).all())
                    if not binary and wrote_binary:
                        writing, graded = False, True
                        continue
                    graded = graded or not binary
                    wrote_binary = wrote_binary or (binary and not graded)   # written with correct = score == 1
                    if binary and graded:
                        log["correct"] = pd.array([pd.NA] * len(log), dtype="boolean")
                log = apply_threshold(log, threshold, name)
            except InputError as exc:
                raise shift_rows(exc, name, rows, lines, records) from None
            if not out.write(log):   # Arrow types other than the first chunk's: a later chunk typed the column
                if known is not None:   # pragma: no cover - the whole file's types give one schema
                    raise _Restart(None)
                writing = False
                continue
            hashes.append(_key_hash(log))
            stats.add(log)
            rows += len(log)
        if types.chunks == 0:
            raise InputError(f"{name}: has a header but no data rows" if fmt != "jsonl" else f"{name}: file is empty")
        final = types.targets()
        if final is None:
            raise _Restart(None)
        if not writing or list(final.items()) != list((assumed or {}).items()):
            raise _Restart(final, graded)
        h = np.concatenate(hashes)
        if len(np.unique(h)) != len(h):   # a repeated key (or a hash collision): the whole-file read words it
            raise _Restart(None)
    return stats.result({}, threshold)


def _key_hash(log: pd.DataFrame) -> np.ndarray:
    """A 64-bit hash of each row's key (:data:`~mrcstats.io.schema.KEY_COLUMNS`; -0.0 and 0.0 alike, as
    :func:`~mrcstats.io.schema.check_duplicates` compares them)."""
    from mrcstats.io.schema import KEY_COLUMNS

    key = log[list(KEY_COLUMNS)].copy(deep=False)
    key["masking_rate"] = key["masking_rate"] + 0.0
    return pd.util.hash_pandas_object(key, index=False).to_numpy()


class _LogFileWriter:
    """Chunks of a canonical log appended to ``tmp`` as :func:`mrcstats.io.write_log` writes the whole log to
    ``target`` (its ending chooses the format): Parquet row groups with the first chunk's schema and pandas
    metadata plus ``attrs`` (pandas' ``PANDAS_ATTRS``), or CSV/TSV lines (gzip for ``.gz``)."""

    def __init__(self, tmp: Path, target: Path, attrs: dict):
        name = target.name.lower()
        self.tmp, self.attrs = tmp, attrs
        self.csv = "\t" if ".tsv" in name else "," if name.endswith((".csv", ".csv.gz", ".tsv", ".tsv.gz")) else None
        self.gz = name.endswith(".gz")
        self.fh: Any = None
        self.pq: Any = None
        self.schema: Any = None

    def __enter__(self) -> _LogFileWriter:  # noqa: PYI034
        return self

    def __exit__(self, et, ev, tb) -> None:
        if self.pq is not None:
            self.pq.close()
        if self.fh is not None:
            self.fh.close()

    def write(self, log: pd.DataFrame) -> bool:
        """Append ``log``; False when its Arrow types differ from the first chunk's (then it is read whole)."""
        if self.csv is not None:
            if self.fh is None:
                import gzip

                self.fh = gzip.open(self.tmp, "wt", encoding="utf-8", newline="") if self.gz else \
                    open(self.tmp, "w", encoding="utf-8", newline="")  # noqa: SIM115 - closed in __exit__
                log.to_csv(self.fh, index=False, sep=self.csv)
            else:
                log.to_csv(self.fh, index=False, sep=self.csv, header=False)
            return True
        import json

        import pyarrow as pa
        import pyarrow.parquet as pq

        from mrcstats._jsonout import to_jsonable

        log.attrs = self.attrs   # pandas keeps them in its metadata ("attributes"), as to_parquet does
        table = pa.Table.from_pandas(log, preserve_index=False)
        if self.pq is None:
            meta = {**(table.schema.metadata or {}), b"PANDAS_ATTRS": json.dumps(to_jsonable(self.attrs)).encode()}
            self.schema = table.schema.with_metadata(meta)
            self.pq = pq.ParquetWriter(self.tmp, self.schema, compression="snappy")
        elif not table.schema.remove_metadata().equals(self.schema.remove_metadata()):
            return False
        self.pq.write_table(table.replace_schema_metadata(self.schema.metadata))
        return True

