"""Writing log datasets: ``mrcstats ingest --dataset DIR`` (:func:`write_dataset`) and :class:`DatasetWriter`.

The layout is :mod:`mrcstats.io.dataset`'s (one folder per model named by
:func:`~mrcstats.io.dataset.partition_folder`, the real names and row counts per model in
``_mrcstats.json``). Every input is validated chunk by chunk with the canonical schema
(:mod:`mrcstats.io.schema`) and written into a temporary folder beside the target that is
renamed into place at the end, so a failed or killed ingest leaves the old dataset whole.

* Parquet inputs whose columns already have canonical names and types are ingested by DuckDB
  (:func:`_write_fast`: the schema rules as SQL aggregates, then one ``COPY``); everything else,
  and any batch whose checks fail, by pandas -- the same dataset and the same errors. What either route
  stores (types, defaults, ranges) is :mod:`mrcstats.io.conform`'s, generated from :mod:`mrcstats.io.schema`.
* ``mrcstats ingest --out LOG`` (one log file) is :mod:`mrcstats.io.ingest_log`.
* Large CSV/TSV/JSONL inputs are streamed (:mod:`mrcstats.io.stream`): bounded memory
  whatever the file size, the same checks and messages.
* Re-ingesting into an existing dataset replaces it whole; a dataset folder that holds anything a writer
  did not write (:func:`foreign_entries`) is refused, so nothing a person put there is ever deleted.
* One writer per dataset at a time (:class:`mrcstats._files.writer_lock`); temporary folders
  of killed writers are removed by the next one (:func:`clean_stale_dirs`).
* No input is ever overwritten: the target may not be, hold or lie inside an input
  (:func:`mrcstats._files.input_clash`).

Layers: ingest -> conform, reader -> dataset (this module imports them; they never import it).
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mrcstats.errors import InputError
from mrcstats.io.conform import (
    NULLABLE_TYPES,
    FastUnit,
    arrow_schema_of,
    conform_chunk,
    fast_checks,
    fast_schema,
    fast_select,
    fast_source,
    fast_unit,
    frame_to_table,
    sql_string,
)
from mrcstats.io.dataset import (
    DATASET_VERSION,
    META_NAME,
    PARTITION,
    LogDataset,
    duckdb_config,
    first_error_line,
    hive_model,
    is_dataset,
    open_dataset,
    partition_folder,
    schema_diff,
)
from mrcstats.io.stream import detect_large, file_size

#: rows per chunk when streaming a Parquet source into a dataset
CHUNK_ROWS = 1_000_000


# ----------------------------------------------------------------------------- writing


class DatasetWriter:
    """Write canonical chunks into a partitioned dataset (one folder per model), atomically.

    Chunks are validated with :func:`mrcstats.io.schema.validate_log`, must all have
    the schema of the first, and go to a temporary folder beside ``out`` that
    :meth:`close` renames to ``out`` (replacing an older dataset there). On an error
    (or :meth:`abort`) the temporary folder is removed: nothing is half-written.

    One writer at a time: the writer holds :class:`mrcstats._files.writer_lock` on ``out``
    from the start to :meth:`close`/:meth:`abort` (a second one fails at once with one
    line). The temporary folder records its process (:func:`mrcstats._files.write_owner`);
    temporary and moved-aside folders of ``out`` left by killed writers are removed when
    the next writer starts (:func:`clean_stale_dirs`).
    """

    def __init__(self, out: str | os.PathLike, *, validate: bool = True, tmp: Path | None = None,
                 prefix: str = "", inputs: Sequence[Any] = ()):
        from mrcstats._files import check_output_path, write_owner, writer_lock

        self.out = Path(out)
        self.prefix = prefix
        self.lock = None
        if tmp is not None:   # a part writer (another process) adding files to the owner's temporary folder
            self.tmp = Path(tmp)
        else:
            check_output_path(self.out, inputs=inputs, what="dataset", kind="folder")
            if self.out.exists() and not (self.out.is_dir() and (is_dataset(self.out)
                                                                  or not any(self.out.iterdir()))):
                raise InputError(f"{self.out}: exists and is not a log dataset; choose another --dataset folder")
            foreign = foreign_entries(self.out)
            if foreign:
                shown = ", ".join(str(f) for f in foreign[:3]) + (f" and {len(foreign) - 3} more"
                                                                   if len(foreign) > 3 else "")
                raise InputError(f"{self.out}: holds {len(foreign)} file(s) or folder(s) mrcstats did not write "
                                 f"({shown}); writing the dataset replaces the folder, so move them out of it "
                                 f"first, or choose another --dataset folder")
            try:
                self.out.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise InputError(f"{self.out}: cannot create its folder ({exc.strerror or exc})") from None
            self.lock = writer_lock(self.out).acquire()
            try:
                clean_stale_dirs(self.out)
                self.tmp = self.out.parent / f".{self.out.name}.tmp-{uuid.uuid4().hex[:8]}"
                self.tmp.mkdir()
                write_owner(self.tmp)
            except BaseException as exc:
                self.lock.release()
                if isinstance(exc, OSError):
                    raise InputError(f"{self.out}: cannot write beside it ({exc.strerror or exc})") from None
                raise
        self.validate = validate
        self.schema = None
        self.first: str | None = None
        self.rows = 0
        self.skipped: dict[str, int] = {}
        self.sources: list[str] = []
        self.notes: list[str] = []   # each file's reader notes, naming the file (io.reader.file_notes)
        self.extra_meta: dict[str, Any] = {}
        self._k = 0
        self._counts: dict[str, int] = {}
        self._folders: dict[str, str] = {}   # folder -> model

    def __enter__(self) -> DatasetWriter:  # noqa: PYI034
        return self

    def __exit__(self, et, ev, tb) -> None:
        if et is not None:
            self.abort()
        elif self.tmp.exists():
            self.close()

    def folder(self, model: str) -> Path:
        """The folder of ``model``'s files in the temporary folder (created; see :func:`partition_folder`)."""
        name = partition_folder(model)
        known = self._folders.setdefault(name, model)
        if known != model:   # pragma: no cover - 64 bits of SHA-256 colliding
            raise InputError(f"models {known!r} and {model!r} get the same folder name {name!r}; rename one")
        d = self.tmp / name
        d.mkdir(exist_ok=True)
        return d

    def write(self, frame: pd.DataFrame, source: str | None = None, *, on_duplicate: str = "error") -> int:
        """Validate and append one chunk; returns the rows written."""
        from mrcstats.io.schema import check_duplicates, coerce_log, is_canonical, merge_skipped

        # validate_log = coerce_log + check_duplicates; a chunk already coerced by a reader is not coerced twice
        attrs = dict(frame.attrs)
        if not is_canonical(frame):
            frame = coerce_log(frame, source=source)
        skipped = dict(attrs.get("skipped", {}) or {})
        if self.validate:
            frame = check_duplicates(frame, on_duplicate, source, skipped)
        self.skipped = merge_skipped(self.skipped, skipped)
        if len(frame) == 0:
            return 0
        self.check_schema(arrow_schema_of(frame), source)
        self._write_table(frame_to_table(frame, self.schema), frame)
        self.rows += len(frame)
        return len(frame)

    def next_batch(self) -> int:
        """The number of the next batch of files (``part-<prefix><batch>-<i>.parquet``), taken."""
        k = self._k
        self._k += 1
        return k

    def count_file(self, model: str) -> None:
        """Record one more file written into ``model``'s folder (by a writer other than :meth:`write`, e.g.
        the DuckDB ingest)."""
        self._counts[model] = self._counts.get(model, 0) + 1

    def check_schema(self, schema, source: str | None) -> None:
        """The first chunk's schema is the dataset's; every later chunk must have the same."""
        if self.schema is None:
            from mrcstats.io.schema import check_case_distinct

            check_case_distinct(schema.names, source)
            self.schema, self.first = schema, source
        elif not schema.equals(self.schema):
            raise InputError(f"{source or 'a chunk'}: its columns differ from {self.first or 'the first chunk'} "
                             f"({schema_diff(self.schema, schema)}); all inputs of one dataset need the same "
                             f"columns (ingest them into separate datasets, or map them to the same fields)")

    def _write_table(self, table, frame: pd.DataFrame) -> None:
        import pyarrow.parquet as pq

        codes, uniq = pd.factorize(frame[PARTITION].astype(object), sort=True)
        if len(uniq) == 1:
            groups = [(uniq[0], None)]
        else:
            order = np.argsort(codes, kind="stable")
            bounds = np.flatnonzero(np.diff(codes[order])) + 1
            groups = [(uniq[codes[idx[0]]], idx) for idx in np.split(order, bounds)]
        for name, idx in groups:
            part = table if idx is None else table.take(idx)
            d = self.folder(str(name))
            k = self._counts.get(name, 0)
            self._counts[name] = k + 1
            pq.write_table(part, d / f"part-{self.prefix}{self._k:06d}-{k:04d}.parquet", compression="snappy")
        self._k += 1

    def state(self) -> dict[str, Any]:
        """What a part writer wrote (for :meth:`merge` in the owner)."""
        return {"schema": self.schema, "first": self.first, "rows": self.rows, "skipped": self.skipped,
                "notes": self.notes, "counts": self._counts, "folders": self._folders}

    def merge(self, st: dict[str, Any]) -> None:
        """Add a part writer's :meth:`state`; its schema must equal this dataset's."""
        from mrcstats.io.schema import merge_skipped

        if st["schema"] is not None:
            if self.schema is None:
                self.schema, self.first = st["schema"], st["first"]
            elif not st["schema"].equals(self.schema):
                raise InputError(f"{st['first'] or 'a chunk'}: its columns differ from {self.first or 'the first chunk'} "
                                 f"({schema_diff(self.schema, st['schema'])}); all inputs of one dataset need the "
                                 f"same columns (ingest them into separate datasets, or map them to the same fields)")
        self.rows += st["rows"]
        self.skipped = merge_skipped(self.skipped, st["skipped"])
        self.notes += [n for n in st.get("notes", ()) if n not in self.notes]
        for m, c in st["counts"].items():
            self._counts[m] = self._counts.get(m, 0) + c
        self._folders.update(st.get("folders", {}))

    def _partitions(self) -> list[dict[str, Any]]:
        """Per model: its folder and the rows its files hold (read from the footers written)."""
        import pyarrow.parquet as pq

        out = []
        for name, model in sorted(self._folders.items(), key=lambda x: x[1]):
            n = sum(pq.read_metadata(f).num_rows for f in (self.tmp / name).glob("*.parquet"))
            out.append({"model": model, "folder": name, "rows": int(n)})
        return out

    def close(self, *, check_keys: bool = True) -> LogDataset:
        """Write ``_mrcstats.json``, check keys across chunks, rename into place; returns the handle."""
        from mrcstats._files import OWNER_NAME

        if self.schema is None:
            self.abort()
            raise InputError("no rows to write: every input was empty or skipped")
        try:
            parts = self._partitions()
            meta = {"version": DATASET_VERSION, "partitioning": [PARTITION], "rows": self.rows,
                    "columns": list(self.schema.names),
                    "schema": [[PARTITION, "string"]] + [[f.name, str(f.type)] for f in self.schema
                                                          if f.name != PARTITION],
                    "partitions": parts, "skipped": self.skipped, "sources": self.sources,
                    **({"notes": self.notes} if self.notes else {}), **self.extra_meta}
            if sum(p["rows"] for p in parts) != self.rows:   # pragma: no cover - a writer bug, never the data
                raise InputError(f"{self.out}: {sum(p['rows'] for p in parts)} rows written but {self.rows} "
                                 f"counted; nothing was replaced")
            (self.tmp / META_NAME).write_text(json.dumps(meta, indent=1, default=str), encoding="utf-8")
            # one key per row: within a chunk validate_log checked it; across chunks only models written
            # by more than one chunk can repeat a key (model is part of the key)
            multi = sorted(m for m, c in self._counts.items() if c > 1)
            if check_keys and multi:
                _check_keys(open_dataset(self.tmp, check=False), multi)
            (self.tmp / OWNER_NAME).unlink(missing_ok=True)
            _replace_dir(self.tmp, self.out)
        except BaseException:
            self.abort()
            raise
        self._release()
        return open_dataset(self.out, check=False)

    def abort(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)
        self._release()

    def _release(self) -> None:
        if self.lock is not None:
            self.lock.release()
            self.lock = None


#: a model folder's name as :func:`~mrcstats.io.dataset.partition_folder` makes it (slug, 16 hex digits)
_PART_FOLDER = re.compile(r"[a-z0-9._-]*-[0-9a-f]{16}")


def foreign_entries(out: Path) -> list[Path]:
    """The entries of the dataset folder ``out`` that no dataset writer writes (a notes file, a plot, a
    sub-folder a person put there): anything but ``_mrcstats.json`` and the model folders
    (:func:`~mrcstats.io.dataset.partition_folder`, or ``model=...`` of the first layout) of ``part-*.parquet``
    files. Replacing the dataset would delete them, so :class:`DatasetWriter` refuses."""
    if not out.is_dir():
        return []
    found: list[Path] = []
    for e in sorted(out.iterdir()):
        if e.name == META_NAME and e.is_file() and not e.is_symlink():
            continue
        if (e.name.startswith(PARTITION + "=") or _PART_FOLDER.fullmatch(e.name)) and e.is_dir() \
                and not e.is_symlink():
            found += [f for f in sorted(e.iterdir()) if not (f.name.startswith("part-") and f.name.endswith(".parquet")
                                                             and f.is_file() and not f.is_symlink())]
            continue
        found.append(e)
    return found


def clean_stale_dirs(out: Path) -> int:
    """Remove the temporary folders (``.NAME.tmp-*``) of ``out`` whose writer no longer runs.

    Called by a writer holding ``out``'s lock. A folder moved aside while a dataset was replaced
    (``.NAME.old-*``) is removed when ``out`` exists, and renamed back to ``out`` when a writer was
    killed between the two renames (so the previous dataset is never lost). Returns the folders removed.
    """
    from mrcstats._files import owner_gone

    n = 0
    try:
        entries = sorted(out.parent.iterdir())
    except OSError:
        return 0
    for e in entries:
        if e.name.startswith(f".{out.name}.tmp-") and e.is_dir() and owner_gone(e):
            shutil.rmtree(e, ignore_errors=True)
            n += 1
        elif e.name.startswith(f".{out.name}.old-") and e.is_dir():
            if not out.exists():
                with contextlib.suppress(OSError):
                    os.replace(e, out)
                    continue
            shutil.rmtree(e, ignore_errors=True)
            n += 1
    return n


def _replace_dir(tmp: Path, out: Path) -> None:
    """Rename ``tmp`` to ``out``; an existing dataset at ``out`` is moved aside first, then removed."""
    old = None
    if out.exists():
        old = out.parent / f".{out.name}.old-{uuid.uuid4().hex[:8]}"
        os.replace(out, old)
    os.replace(tmp, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _check_keys(ds: LogDataset, models: list[str]) -> None:
    """One row per (model, item, trial, condition, masking_rate) for ``models`` (DuckDB, spills)."""
    from mrcstats.io.schema import KEY_COLUMNS

    keys = ", ".join(KEY_COLUMNS)
    dup = ds.sql(f"SELECT {keys}, count(*) AS n FROM log WHERE list_contains(?, model) GROUP BY ALL "
                 f"HAVING count(*) > 1 ORDER BY ALL LIMIT 1", [models])   # the smallest key: one message
    if len(dup):
        r = dup.iloc[0]
        from mrcstats.io.reader import RUN_SETTINGS

        why = ""
        for s in (s for s in RUN_SETTINGS if s in ds.columns):
            vals = ds.sql(f'SELECT DISTINCT "{s}" AS v FROM log WHERE model = ? AND item = ? ORDER BY 1',
                          [str(r["model"]), str(r["item"])])["v"].tolist()
            if len(vals) > 1:
                why = (f"; the copies differ in the run setting {s!r} ({', '.join(map(str, vals))}): a streamed "
                       f"dataset cannot make it part of the condition, so ingest to one file (--out LOG.parquet, "
                       f"which does) or each setting into its own dataset")
                break
        raise InputError(f"duplicate (model, item, trial, condition) rows across input files/chunks: "
                         f"model={r['model']!r} item={r['item']!r} trial={r['trial']} "
                         f"condition={r['condition']!r} occurs {int(r['n'])} times" + (why or
                         "; remove the overlap between the inputs (--on-duplicate first|last applies within one "
                         "file, which it then reads whole)"))


def write_dataset(paths: str | os.PathLike | Sequence[str | os.PathLike], out: str | os.PathLike, *,
                  format: str | None = None, mapping: Mapping[str, str] | None = None,
                  model: str | None = None, on_duplicate: str = "error",
                  chunk_rows: int = CHUNK_ROWS, jobs: int = 1, fast: bool = True,
                  stream_bytes: int | None = None) -> LogDataset:
    """Ingest any number of response-log files into a dataset folder, streamed and atomic.

    Parquet sources are read in chunks of ``chunk_rows`` rows (Arrow record batches); other
    formats one file at a time with their reader (:func:`mrcstats.io.reader.read_source`); a
    dataset folder file by file. Each chunk is validated with the canonical schema; all chunks
    must share one schema. ``jobs > 1`` reads the inputs in that many processes (they write into
    the same temporary folder; the result is the same dataset). Parquet inputs whose columns already
    have canonical names and types are checked and written by DuckDB in batches (``fast=False``: every
    input through pandas; same dataset, same errors -- see :func:`_write_fast`). When a CSV, TSV or
    JSON-lines input is larger than ``stream_bytes`` (default :data:`mrcstats.io.stream.STREAM_BYTES`)
    and ``on_duplicate`` is ``"error"``, every input of those formats is streamed in chunks of at most
    ``min(chunk_rows, STREAM_CHUNK_ROWS)`` rows (:func:`mrcstats.io.stream.stream_chunks`: bounded
    memory whatever the size; other columns kept as text). ``first``/``last`` need a whole file to
    choose from, so they read files whole. Returns the :class:`LogDataset` written (``skipped``
    counts dropped rows by reason).
    """
    from mrcstats._progress import progress
    from mrcstats.io.formats import EXTENSIONS, FORMATS
    from mrcstats.io.schema import merge_skipped
    from mrcstats.io.source import expand_paths
    from mrcstats.io.stream import STREAM_BYTES, STREAM_FORMATS, head_source

    if format is not None and format not in FORMATS:
        raise InputError(f"unknown format {format!r}; choose one of {', '.join(FORMATS)}")
    if not isinstance(jobs, int) or jobs < 1:
        raise InputError(f"jobs must be a whole number >= 1, got {jobs!r}")
    given = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    from mrcstats._files import check_output_path

    # the one output rule, before anything is read: not an input, not inside an input folder, holding no input
    check_output_path(out, inputs=given, what="dataset", kind="folder")
    limit = STREAM_BYTES if stream_bytes is None else stream_bytes
    units: list[tuple[str, str, str]] = []    # (kind, path, format or dataset root)
    loaded = _Loaded()   # files loaded whole to detect their format, kept for their reading (jobs=1)
    sources: list[str] = []
    skipped: dict[str, int] = {}
    fmt0 = None
    for p in given:
        if is_dataset(p):   # a dataset folder: each of its files is a unit (model from the path)
            src = open_dataset(p)
            fmt = "parquet"
            units += [("fragment", f, str(src.path)) for f in src.files]
            skipped = merge_skipped(skipped, src.skipped)
            sources.append(str(p))
            pairs = [(Path(p), fmt)]
        else:
            pairs = [(f, format or _detect_cheap(f) or detect_large(f, limit)
                      or _detect_loaded(f, loaded if jobs == 1 else None, limit)) for f in expand_paths(p, EXTENSIONS)]
        for f, fmt in pairs:
            if fmt0 is not None and fmt != fmt0:
                raise InputError(f"mixed formats in one call: {given[0]} is {fmt0} but {f} is {fmt}; "
                                 f"read one format at a time (or pass --format)")
            fmt0 = fmt
            if not is_dataset(f):
                sources.append(str(f))
                units.append(("parquet" if fmt == "parquet" and not str(f).lower().endswith(".gz") else "other",
                              str(f), fmt))
    if on_duplicate == "error" and any(k == "other" and fmt in STREAM_FORMATS and file_size(f) > limit
                                       for k, f, fmt in units):   # all of them: one schema for the dataset
        units = [("stream" if k == "other" and fmt in STREAM_FORMATS and head_source(f) is not None else k, f, fmt)
                 for k, f, fmt in units]   # (UTF-16 text is read whole: it is converted first)
    opts = {"mapping": dict(mapping) if mapping else None, "model": model, "on_duplicate": on_duplicate,
            "chunk_rows": chunk_rows}
    # Parquet inputs already in canonical names and types are ingested by DuckDB (_write_fast), the rest
    # (and any batch whose checks fail) by the pandas path; the dataset written is the same
    plans = [fast_unit(u, **opts) for u in units] if fast else [None] * len(units)
    steps = _plan_steps(units, plans, FAST_BATCH_ROWS)
    with DatasetWriter(out, inputs=given) as w:
        w.sources = sources
        w.skipped = skipped
        con = _fast_connection() if any(k == "fast" for k, _ in steps) else None
        slow = [x for k, x in steps if k == "pandas"]
        bar = progress(total=len(units), desc="ingest", unit="file", disable=None if len(units) > 1 else True)
        for k, x in steps:   # with jobs > 1 the pandas units go to the processes below
            if k == "fast":
                _write_fast(w, x, con, opts=opts)
                bar.update(len(x))
            elif jobs == 1 or len(slow) == 1:
                _write_unit(w, x, **opts, loaded=loaded)
                bar.update(1)
        bar.close()
        if con is not None:
            con.close()
        units = slow
        if len(units) > 1 and jobs > 1:
            import concurrent.futures as cf
            import multiprocessing as mp

            groups = [units[i::jobs] for i in range(jobs)]
            with cf.ProcessPoolExecutor(jobs, mp_context=mp.get_context("fork")) as ex:
                futs = [ex.submit(_ingest_part, str(w.tmp), f"j{i:02d}-", g, opts) for i, g in enumerate(groups)]
                states = [f.result() for f in futs]
            for st in states:
                for one in st:
                    w.merge(one)
        w.extra_meta["format"] = fmt0
        return w.close()


def _ingest_part(tmp: str, prefix: str, units: list, opts: dict) -> list[dict[str, Any]]:
    """One process's share of :func:`write_dataset`: the states of its units, in order (first schema kept)."""
    out = []
    for i, u in enumerate(units):
        w = DatasetWriter(Path(tmp).parent / "unused", tmp=Path(tmp), prefix=f"{prefix}{i:06d}-")
        _write_unit(w, u, **opts)
        out.append(w.state())
    return out


def _write_unit(w: DatasetWriter, unit: tuple[str, str, str], *, mapping, model, on_duplicate,
                chunk_rows, loaded: dict[str, Any] | None = None) -> None:
    """Validate and write one unit (a dataset fragment, a Parquet file, a streamed file or a file read
    whole); ``loaded``: files already loaded to detect their format (:func:`_detect_loaded`), read from
    memory rather than a second time."""
    from mrcstats.io.reader import file_notes, model_for, read_source
    from mrcstats.io.schema import coerce_log
    from mrcstats.io.source import load_source
    from mrcstats.io.tabular import apply_mapping, check_trial_finite, derive_correct

    kind, f, extra = unit
    model = model_for(f, model)     # one name, or {path: name} (--model PATH=NAME)
    if kind == "fragment":
        df = _read_fragment_nullable(f, extra)
        check_trial_finite(df.attrs.pop("nonfinite", None) or {}, mapping, f)
        df = derive_correct(apply_mapping(df, mapping, f), f)
        w.write(coerce_log(df, source=f, model=model), f, on_duplicate=on_duplicate)
    elif kind == "parquet":
        for chunk in _parquet_chunks(Path(f), mapping, model, chunk_rows):
            w.write(chunk, f, on_duplicate=on_duplicate)
    elif kind == "stream":
        from mrcstats.io.stream import STREAM_CHUNK_ROWS, shift_rows, stream_chunks

        for chunk, before in stream_chunks(f, extra, mapping, model, min(chunk_rows, STREAM_CHUNK_ROWS)):
            try:
                w.write(conform_chunk(chunk, w.schema, f, before), f, on_duplicate=on_duplicate)
            except InputError as exc:
                raise shift_rows(exc, f, before) from None
    else:
        src = loaded.pop(f, None) if loaded is not None else None
        src = load_source(f) if src is None else src
        df = read_source(src, extra, mapping, model)
        w.notes += file_notes([f], [df])     # the reader's notes reach the dataset's description (and its logs)
        w.write(df, f, on_duplicate=on_duplicate)


def _read_fragment_nullable(file: str, root: str) -> pd.DataFrame:
    """A dataset file with nullable dtypes (its ``model`` from the folder name in the first layout)."""
    import pyarrow.parquet as pq

    try:
        t = pq.read_table(file)
    except Exception as exc:  # noqa: BLE001
        raise InputError(f"{file}: cannot read this Parquet file of the dataset ({first_error_line(exc)})") from None
    df = t.to_pandas(types_mapper=NULLABLE_TYPES.get)
    from mrcstats.io.tabular import nan_cells

    df.attrs["nonfinite"] = nan_cells(t)
    if PARTITION not in df.columns:
        val = hive_model(file, root)
        df.insert(0, PARTITION, pd.Series(pd.array([val] * len(df), dtype="string")))
    return df


class _Loaded(dict):
    """Loaded sources by path, with their total size in bytes."""

    nbytes = 0


def _detect_loaded(path: Path, loaded: _Loaded | None, limit: int) -> str:
    """The format of a file that had to be loaded whole to be detected; the loaded file is kept in
    ``loaded`` (by path) for :func:`_write_unit`, so it is not read twice, while the files kept stay
    within ``limit`` bytes in all (the memory a streamed input may take); beyond that a file is loaded
    again when it is written."""
    from mrcstats.io.detect import detect_format, load_source

    src = load_source(path)
    fmt = detect_format(src)
    if loaded is not None and loaded.nbytes + len(src.data) <= limit:
        loaded[str(path)] = src
        loaded.nbytes += len(src.data)
    return fmt


def _detect_cheap(path: Path) -> str | None:
    """A Parquet file's format (``parquet``, ``lighteval``) by its footer without loading the file (large
    sources); else None."""
    from mrcstats.io.formats import detect_parquet_file

    return detect_parquet_file(path)


def _parquet_chunks(path: Path, mapping: Mapping[str, str] | None, model: str | None,
                    chunk_rows: int) -> Iterable[pd.DataFrame]:
    import pyarrow.parquet as pq

    from mrcstats.io.schema import coerce_log
    from mrcstats.io.tabular import apply_mapping, check_trial_finite, derive_correct, nan_cells

    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # noqa: BLE001
        raise InputError(f"{path}: cannot read Parquet ({first_error_line(exc)})") from None
    if pf.metadata.num_rows == 0:
        raise InputError(f"{path}: Parquet file has no rows")
    try:
        offset = 0
        for batch in pf.iter_batches(batch_size=chunk_rows):
            check_trial_finite(nan_cells(batch), mapping, str(path), offset)
            offset += batch.num_rows
            df = batch.to_pandas(types_mapper=NULLABLE_TYPES.get)
            df.columns = [str(c) for c in df.columns]
            df = derive_correct(apply_mapping(df, mapping, str(path)), str(path))
            yield coerce_log(df, source=str(path), model=model)
    except OSError as exc:
        raise InputError(f"{path}: cannot read Parquet ({first_error_line(exc)})") from None

# ----------------------------------------------------------------------------- the DuckDB fast path

#: rows per DuckDB batch of the fast path (consecutive files are grouped until this many rows)
FAST_BATCH_ROWS = 4_000_000


def _plan_steps(units: list, plans: list, batch_rows: int) -> list[tuple[str, Any]]:
    """Units in order as steps: ``("fast", [FastUnit, ...])`` batches of consecutive fast units with one
    key (up to ``batch_rows`` rows), ``("pandas", unit)`` for the others."""
    steps: list[tuple[str, Any]] = []
    for u, p in zip(units, plans):
        if p is None:
            steps.append(("pandas", u))
            continue
        last = steps[-1] if steps else None
        if last is not None and last[0] == "fast" and last[1][0].key == p.key \
                and sum(x.rows for x in last[1]) + p.rows <= batch_rows:
            last[1].append(p)
        else:
            steps.append(("fast", [p]))
    return steps


def _fast_connection():
    import duckdb

    # a partitioned COPY does not keep the input order across threads anyway: the rows of a model may come
    # in another order than on the pandas path (the dataset is a set of rows; its queries do not depend on it)
    con = duckdb.connect(config={**duckdb_config(), "preserve_insertion_order": False})
    con.execute("PRAGMA disable_progress_bar")
    con.execute("SET partitioned_write_max_open_files = 1000")   # one file per model and batch
    return con


def _write_fast(w: DatasetWriter, batch: list[FastUnit], con, *, opts: dict) -> None:
    """Ingest a batch of fast units with DuckDB, or, when any check fails, each unit with the pandas path.

    Checks (SQL aggregates per file, with the defaults of :func:`~mrcstats.io.schema.coerce_log`, generated
    from :data:`~mrcstats.io.schema.DEFAULTS`: trial null -> 0, condition null -> "", cluster null -> item)
    are what the pandas path checks for these types: model and item not null, trial and masking rate within
    :data:`~mrcstats.io.schema.RANGES` (a masking rate not NaN/inf either), integer extra columns without nulls and double ones without NaN (pandas would turn
    them into float / null), and one row per key within a file (``check_duplicates``: a
    ``GROUP BY hash(file, model, item, trial, condition, masking_rate)``; a hash collision only sends
    the batch to pandas; keys repeated across files are found by :meth:`DatasetWriter.close` as
    before). If anything fails, the batch is handed to the pandas path unit by unit, so the error
    (file, row, column, fix) or the ``on_duplicate`` result is exactly its. Otherwise the batch is
    written into the writer's temporary folder: fragments already stored as the pandas path stores
    them (same columns, order and types, nothing filled in) are copied; the rest by one
    ``COPY ... PARTITION_BY`` the model's folder name (:func:`~mrcstats.io.dataset.partition_folder`,
    joined from a small table) into a staging folder, whose files are then moved into the model folders
    :meth:`DatasetWriter._write_table` uses (the ``model`` column stays in the files).
    """
    import duckdb
    import pyarrow as pa

    cols = batch[0].columns
    extra = batch[0].extra
    schema = fast_schema(cols, extra)
    by_path = batch[0].model is not None       # fragments: the model is the partition folder's
    try:
        ok, checks = fast_checks(con, batch)
    except duckdb.Error:   # a file DuckDB cannot read: the pandas path names it
        ok, checks = False, []
    if not ok:
        for u in batch:
            _write_unit(w, u.unit, **opts)
        return
    for u in batch:   # in unit order: the first file's schema is the dataset's, as on the pandas path
        w.check_schema(schema, u.file)
    models_of: dict[str, set[str]] = {}
    needs_fill = set()
    for f, m, _n, _k, _b, fill in checks:
        models_of.setdefault(f, set()).add(m)
        if fill:
            needs_fill.add(f)
    k = w.next_batch()
    rest = []
    for u in batch:
        if by_path:
            models_of[u.file] = {u.model}
        if u.verbatim is not None and u.file not in needs_fill:
            d = w.folder(u.verbatim)
            shutil.copyfile(u.file, d / f"part-{w.prefix}{k:06d}-{_next_index(d, w.prefix, k)}.parquet")
        else:
            rest.append(u)
    if rest:
        body = fast_select(cols, extra, schema, by_path)
        src = fast_source(rest)
        if by_path:
            con.register("_fast_models", pa.table({"filename": [u.file for u in rest],
                                                   "model": [u.model for u in rest]}))
            src += " JOIN _fast_models AS fm ON r.filename = fm.filename"
        models = sorted(set().union(*(models_of.get(u.file, set()) for u in rest)))
        folders = {m: w.folder(m).name for m in models}
        con.register("_fast_parts", pa.table({"model": list(folders), "_part": list(folders.values())}))
        src += f" JOIN _fast_parts AS fp ON {'fm' if by_path else 'r'}.model = fp.model"
        n = w.next_batch()
        pattern = f"part-{w.prefix}{n:06d}-{{i}}"   # its own number: never the name of a copied file
        stage = w.tmp / f".stage-{w.prefix}{n + 1:06d}"
        try:
            con.execute(f"COPY (SELECT {body}, fp._part AS _part FROM {src}) TO {sql_string(str(stage))} "
                        f"(FORMAT parquet, PARTITION_BY (_part), FILENAME_PATTERN {sql_string(pattern)}, "
                        f"OVERWRITE_OR_IGNORE, COMPRESSION snappy)")
            _unstage(stage, w.tmp, set(folders.values()))
        finally:
            con.unregister("_fast_parts")
            if by_path:
                con.unregister("_fast_models")
            shutil.rmtree(stage, ignore_errors=True)
    for u in batch:
        for m in models_of.get(u.file, ()):
            w.count_file(m)
    w.rows += sum(u.rows for u in batch)


def _unstage(stage: Path, tmp: Path, folders: set[str]) -> None:
    """Move the files DuckDB wrote to ``stage/_part=<folder>/`` into ``tmp/<folder>/``."""
    import urllib.parse

    for d in stage.iterdir():
        name = urllib.parse.unquote(d.name.split("=", 1)[1]) if "=" in d.name else ""
        if name not in folders:   # pragma: no cover - DuckDB naming folders otherwise
            raise InputError(f"{tmp}: unexpected folder {d.name!r} written by DuckDB; nothing was replaced")
        for f in d.iterdir():
            os.replace(f, tmp / name / f.name)


def _next_index(d: Path, prefix: str, k: int) -> int:
    """The next free ``{i}`` of ``part-<prefix><k>-{i}.parquet`` in ``d`` (two fragments of one model in a batch)."""
    i = 0
    while (d / f"part-{prefix}{k:06d}-{i}.parquet").exists():
        i += 1
    return i

