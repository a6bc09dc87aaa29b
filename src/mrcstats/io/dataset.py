"""Partitioned Parquet datasets: canonical logs larger than memory.

A *log dataset* is a folder of Parquet files, hive-partitioned by model
(``DIR/model=<name>/part-*.parquet``, the name URI-encoded) with a small
``DIR/_mrcstats.json`` (row count, columns, skipped rows, sources). Every file
holds canonical-log rows (:mod:`mrcstats.io.schema`) validated chunk by chunk
while it was written by :func:`write_dataset` (``mrcstats ingest --dataset DIR``)
or by the leaderboard generator (``mrcstats demo --models M --items N --out DIR``).

:func:`open_dataset` returns a :class:`LogDataset`, a lazy handle: nothing is read
until a query runs. Aggregations run as DuckDB SQL over the files
(:mod:`mrcstats.stats._sql`), streamed in bounded memory; :meth:`LogDataset.to_log`
loads it as an ordinary canonical frame when it fits in memory (so
``read_log(DIR)`` still works for small data).

Parquet inputs whose columns already have canonical names and types are ingested by DuckDB
(:func:`_write_fast`: the schema rules as SQL aggregates, then ``COPY ... PARTITION_BY (model)``);
everything else, and any batch whose checks fail, by pandas -- the same dataset and the same errors.

Bad input: files whose Arrow schema differs from the dataset's, or whose Parquet
footer cannot be read, raise :class:`~mrcstats.errors.InputError` naming the file;
writing goes to a temporary folder beside the target that is renamed at the end,
so a failed ingest leaves nothing half-written.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
import urllib.parse
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mrcstats.errors import InputError

META_NAME = "_mrcstats.json"
PARTITION = "model"
DATASET_VERSION = 1
#: rows per chunk when streaming a Parquet source into a dataset
CHUNK_ROWS = 1_000_000


# ----------------------------------------------------------------------------- detection


def is_dataset(path: str | os.PathLike) -> bool:
    """True for a folder written as a log dataset (``_mrcstats.json`` or ``model=...`` sub-folders)."""
    p = Path(path)
    try:  # a name too long for the file system (ENAMETOOLONG) is "not a dataset"; the reader says what is wrong
        if not p.is_dir():
            return False
        if (p / META_NAME).is_file():
            return True
        return any(c.is_dir() and c.name.startswith(PARTITION + "=") for c in p.iterdir())
    except OSError:
        return False


# ----------------------------------------------------------------------------- Arrow schema


def arrow_schema_of(frame: pd.DataFrame):
    """The Arrow schema a canonical frame is stored with (strings as ``string``, no pandas index)."""
    import pyarrow as pa

    fields = []
    for c in frame.columns:
        dt = frame[c].dtype
        if isinstance(dt, pd.StringDtype) or dt == object:
            t = pa.string()
        elif isinstance(dt, pd.BooleanDtype) or dt == bool:
            t = pa.bool_()
        elif str(dt) in ("Float64", "float64", "float32", "Float32"):
            t = pa.float64()
        elif str(dt) in ("Int64", "int64", "int32", "Int32", "int16", "int8", "uint8", "uint16", "uint32"):
            t = pa.int64()
        else:
            t = pa.Array.from_pandas(frame[c].iloc[:0]).type
        fields.append(pa.field(str(c), t, nullable=True))
    return pa.schema(fields)


def _frame_to_table(frame: pd.DataFrame, schema) -> Any:
    import pyarrow as pa

    arrays = []
    for f in schema:
        s = frame[f.name]
        if pa.types.is_string(f.type):
            arr = pa.array(s.astype(object).where(s.notna(), None).to_numpy(), type=pa.string()) \
                if not isinstance(s.dtype, pd.StringDtype) else pa.array(s.array, type=pa.string())
        else:
            arr = pa.array(s.array if hasattr(s, "array") else s, type=f.type, from_pandas=True)
        arrays.append(arr)
    return pa.Table.from_arrays(arrays, schema=schema)


def _schema_diff(want, got) -> str:
    wn, gn = set(want.names), set(got.names)
    parts = []
    if wn - gn:
        parts.append("missing column(s) " + ", ".join(repr(c) for c in sorted(wn - gn)))
    if gn - wn:
        parts.append("extra column(s) " + ", ".join(repr(c) for c in sorted(gn - wn)))
    for f in want:
        if f.name in gn and not got.field(f.name).type.equals(f.type):
            parts.append(f"column {f.name!r} is {got.field(f.name).type}, expected {f.type}")
    return "; ".join(parts) or "column order differs"


# ----------------------------------------------------------------------------- the lazy handle


@dataclass(frozen=True)
class LogDataset:
    """A lazy handle on a log dataset folder (see the module docstring).

    ``schema`` is the full Arrow schema (partition column ``model`` first), ``files`` the
    Parquet files, ``meta`` the contents of ``_mrcstats.json``. Nothing is read until
    :meth:`sql`, :meth:`arrow`, :meth:`to_log` or :meth:`to_dask` is called.
    """

    path: Path
    files: tuple[str, ...]
    schema: Any = field(repr=False)
    meta: dict[str, Any] = field(default_factory=dict, repr=False)
    where: tuple[tuple[str, Any], ...] = ()
    _state: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def filter(self, **equals: Any) -> LogDataset:
        """A handle on the rows where every ``column == value`` (``None``: the column is null); lazy."""
        for c in equals:
            if c not in self.schema.names:
                raise InputError(f"no column {c!r} in the dataset {self.path} to filter on; columns: "
                                 f"{', '.join(self.schema.names)}")
        meta = {k: v for k, v in self.meta.items() if k != "rows"}
        return LogDataset(self.path, self.files, self.schema, meta, self.where + tuple(equals.items()))

    def _where_sql(self) -> str:
        if not self.where:
            return ""
        parts = []
        for c, v in self.where:
            col = '"' + c.replace('"', '""') + '"'
            if v is None or (isinstance(v, float) and np.isnan(v)):
                parts.append(f"{col} IS NULL")
            elif isinstance(v, (bool, np.bool_)):
                parts.append(f"{col} = {'TRUE' if v else 'FALSE'}")
            elif isinstance(v, (int, float, np.integer, np.floating)):
                parts.append(f"{col} = {float(v)!r}")
            else:
                parts.append(f"{col} = '" + str(v).replace("'", "''") + "'")
        return " WHERE " + " AND ".join(parts)

    @property
    def columns(self) -> list[str]:
        return list(self.schema.names)

    @property
    def skipped(self) -> dict[str, int]:
        return dict(self.meta.get("skipped") or {})

    @property
    def attrs(self) -> dict[str, Any]:
        """The ``attrs`` a frame read from the dataset would carry (``skipped``, ``sources``, ``truth``)."""
        return {k: v for k, v in self.meta.items() if k in ("skipped", "sources", "truth", "format")}

    def __len__(self) -> int:
        n = self.meta.get("rows")
        if n is None:
            n = int(self.sql("SELECT count(*) AS n FROM log")["n"].iloc[0])
        return int(n)

    def arrow(self):
        """The ``pyarrow.dataset.Dataset`` (hive partitioning on ``model``, string-typed)."""
        ds = self._state.get("arrow")
        if ds is None:
            import pyarrow as pa
            import pyarrow.dataset as pads

            part = pads.partitioning(pa.schema([pa.field(PARTITION, pa.string())]), flavor="hive")
            file_schema = pa.schema([f for f in self.schema if f.name != PARTITION])
            ds = pads.dataset(list(self.files), schema=pa.schema([*self.schema]), format="parquet",
                              partitioning=part, partition_base_dir=str(self.path))
            del file_schema
            self._state["arrow"] = ds
        return ds

    def connection(self):
        """A DuckDB connection (one per thread) with the dataset as the view ``log``."""
        key = f"con-{threading.get_ident()}"
        con = self._state.get(key)
        if con is None:
            import duckdb

            con = duckdb.connect(config=_duckdb_config())
            con.execute("PRAGMA disable_progress_bar")   # it prints on stdout, which --json keeps for its object
            # DuckDB's own Parquet reader (faster than scanning the Arrow dataset); it decodes the
            # URI-encoded hive values as pyarrow wrote them, and the model stays text
            glob = str(self.path / f"{PARTITION}=*" / "*.parquet").replace("'", "''")
            con.execute(f"CREATE VIEW log AS SELECT * FROM read_parquet('{glob}', hive_partitioning = true, "
                        f"hive_types = {{'{PARTITION}': 'VARCHAR'}}){self._where_sql()}")
            self._state[key] = con
        return con

    @contextlib.contextmanager
    def _scanning(self):
        """DuckDB / Arrow errors while scanning the files become one InputError naming the dataset."""
        try:
            yield
        except Exception as exc:
            if isinstance(exc, InputError):
                raise
            import duckdb

            if isinstance(exc, (duckdb.Error, OSError)) or type(exc).__module__.startswith("pyarrow"):
                raise InputError(f"{self.path}: cannot read the dataset ({_first_line(exc)}); "
                                 f"check the file named there or re-run mrcstats ingest") from None
            raise

    def sql(self, query: str, params: Sequence[Any] | None = None) -> pd.DataFrame:
        """Run ``query`` (it names the dataset ``log``) and return the (small) result as a frame."""
        with self._scanning():
            return self.connection().execute(query, list(params) if params else None).fetch_df()

    def stream(self, query: str, batch_rows: int = 1 << 20,
               tables: Mapping[str, pd.DataFrame] | None = None) -> Iterator[Any]:
        """Run ``query`` (over ``log`` and the small frames ``tables``, registered under their names) and
        yield its result as Arrow record batches (bounded memory; a cursor of its own)."""
        cur = self.connection().cursor()
        try:
            with self._scanning():
                for name, frame in (tables or {}).items():
                    cur.register(name, frame)
                yield from cur.sql(query).to_arrow_reader(batch_rows)
        finally:
            cur.close()

    def batches(self, columns: Sequence[str], batch_rows: int = 1 << 20) -> Iterator[Any]:
        """Stream ``columns`` as Arrow record batches (bounded memory)."""
        try:
            yield from self.arrow().to_batches(columns=list(columns), batch_size=batch_rows)
        except OSError as exc:
            raise InputError(f"{self.path}: cannot read the dataset ({_first_line(exc)})") from None

    def to_log(self) -> pd.DataFrame:
        """Load the whole dataset as a canonical log (only for data that fits in memory)."""
        from mrcstats.io.schema import validate_log

        try:
            if self.where:
                table = self.connection().execute("SELECT * FROM log").fetch_arrow_table()
                table = table.select([c for c in self.schema.names])
            else:
                table = self.arrow().to_table()
        except OSError as exc:
            raise InputError(f"{self.path}: cannot read the dataset ({_first_line(exc)})") from None
        df = table.to_pandas(types_mapper={__import__("pyarrow").string(): pd.StringDtype()}.get)
        order = [c for c in self.meta.get("columns", []) if c in df.columns]
        df = df[order + [c for c in df.columns if c not in order]]
        log = validate_log(df, source=str(self.path))
        log.attrs.update(self.attrs)
        log.attrs["skipped"] = self.skipped
        log.attrs["sources"] = [str(self.path)]
        log.attrs["format"] = "dataset"
        return log

    def to_dask(self, columns: Sequence[str] | None = None):
        """A ``dask.dataframe`` over the files (one partition per file; needs the ``dask`` extra)."""
        try:
            import dask.dataframe as dd
        except ImportError:  # pragma: no cover - dask is an extra
            raise InputError("engine='dask' needs dask: pip install 'mrcstats[dask]'") from None
        cols = list(columns) if columns is not None else self.columns
        meta = pd.DataFrame({c: pd.Series([], dtype=_pandas_dtype(self.schema.field(c).type)) for c in cols})
        return dd.from_map(_read_fragment, list(self.files), path=str(self.path), cols=cols, meta=meta,
                           enforce_metadata=False)


def _pandas_dtype(t) -> Any:
    import pyarrow as pa

    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_floating(t):
        return "Float64"
    if pa.types.is_integer(t):
        return "int64"
    return object


def _read_fragment(file: str, path: str, cols: list[str]) -> pd.DataFrame:
    """One dataset file as a frame with the partition column filled in (a Dask partition)."""
    import urllib.parse

    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = cols
    cols = [c for c in columns if c != PARTITION]
    t = pq.read_table(file, columns=cols)
    df = t.to_pandas(types_mapper={pa.bool_(): pd.BooleanDtype(), pa.float64(): pd.Float64Dtype()}.get)
    if PARTITION in columns:
        seg = [s for s in Path(file).relative_to(path).parts if s.startswith(PARTITION + "=")]
        val = urllib.parse.unquote(seg[0].split("=", 1)[1]) if seg else None
        df.insert(0, PARTITION, pd.Series([val] * len(df), dtype=object))
    return df[list(columns)]


def _first_line(exc: BaseException) -> str:
    s = str(exc).strip()
    return s.splitlines()[0] if s else type(exc).__name__


def _duckdb_config() -> dict[str, Any]:
    """DuckDB settings: threads from ``MRCSTATS_DUCKDB_THREADS`` (default: DuckDB's), a memory limit
    (``MRCSTATS_DUCKDB_MEMORY``, default 2GB) so large aggregations spill instead of growing."""
    cfg: dict[str, Any] = {"memory_limit": os.environ.get("MRCSTATS_DUCKDB_MEMORY", "2GB")}
    th = os.environ.get("MRCSTATS_DUCKDB_THREADS")
    if th:
        cfg["threads"] = int(th)
    return cfg


def open_dataset(path: str | os.PathLike, *, check: bool = True) -> LogDataset:
    """Open a log dataset folder lazily.

    With ``check`` (default) every file's Parquet footer is read and its schema compared
    with the dataset's: a file that cannot be read or that differs raises
    :class:`InputError` naming the file (footers only: fast even for thousands of files).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = Path(path)
    if not root.is_dir():
        raise InputError(f"{root}: not a folder; a log dataset is a folder written by mrcstats ingest --dataset")
    meta: dict[str, Any] = {}
    mp = root / META_NAME
    if mp.is_file():
        try:
            meta = json.loads(mp.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InputError(f"{mp}: cannot read the dataset description ({exc}); re-run mrcstats ingest") \
                from None
    files = sorted(str(p) for p in root.rglob("*.parquet") if not any(s.startswith((".", "_"))
                                                                       for s in p.relative_to(root).parts))
    if not files:
        raise InputError(f"{root}: no Parquet files in the dataset folder")
    want = None
    if meta.get("schema"):
        want = pa.schema([pa.field(n, _type_from_name(t)) for n, t in meta["schema"]])
    file_want = None
    first = None
    if check or want is None:
        for f in files if check else files[:1]:
            try:
                got = pq.read_schema(f)
            except Exception as exc:  # noqa: BLE001 - arrow raises several types for a bad footer
                raise InputError(f"{f}: cannot read this Parquet file of the dataset ({_first_line(exc)}); "
                                 f"remove it or re-run mrcstats ingest") from None
            got = pa.schema([pa.field(x.name, x.type) for x in got])
            if file_want is None:
                file_want = pa.schema([x for x in want if x.name != PARTITION]) if want is not None else got
                first = f
            if not got.equals(file_want):
                ref = "the dataset description" if want is not None else first
                raise InputError(f"{f}: its schema differs from {ref} ({_schema_diff(file_want, got)}); every "
                                 f"file of a dataset must have the same columns and types; re-run mrcstats "
                                 f"ingest on the sources")
    if want is None:
        want = pa.schema([pa.field(PARTITION, pa.string()), *file_want])
    from mrcstats.io.schema import check_case_distinct

    check_case_distinct(want.names, str(root))
    return LogDataset(root, tuple(files), want, meta)


_TYPES = {"string": "string", "large_string": "large_string", "bool": "bool_", "double": "float64",
          "float": "float32", "halffloat": "float16",
          **{f"{s}int{b}": f"{s}int{b}" for s in ("", "u") for b in (8, 16, 32, 64)}}


def _type_from_name(name: str):
    import pyarrow as pa

    attr = _TYPES.get(name)
    if attr is None:
        raise InputError(f"unknown column type {name!r} in a dataset description; re-run mrcstats ingest")
    return getattr(pa, attr)()


# ----------------------------------------------------------------------------- writing


class DatasetWriter:
    """Write canonical chunks into a hive-partitioned dataset, atomically.

    Chunks are validated with :func:`mrcstats.io.schema.validate_log`, must all have
    the schema of the first, and go to a temporary folder beside ``out`` that
    :meth:`close` renames to ``out`` (replacing an older dataset there). On an error
    (or :meth:`abort`) the temporary folder is removed: nothing is half-written.
    """

    def __init__(self, out: str | os.PathLike, *, validate: bool = True, tmp: Path | None = None,
                 prefix: str = ""):
        self.out = Path(out)
        self.prefix = prefix
        if tmp is not None:   # a part writer (another process) adding files to the owner's temporary folder
            self.tmp = Path(tmp)
        else:
            if self.out.exists() and not (self.out.is_dir() and (is_dataset(self.out)
                                                                  or not any(self.out.iterdir()))):
                raise InputError(f"{self.out}: exists and is not a log dataset; choose another --dataset folder")
            self.out.parent.mkdir(parents=True, exist_ok=True)
            self.tmp = self.out.parent / f".{self.out.name}.tmp-{uuid.uuid4().hex[:8]}"
            self.tmp.mkdir()
        self.validate = validate
        self.schema = None
        self.first: str | None = None
        self.rows = 0
        self.skipped: dict[str, int] = {}
        self.sources: list[str] = []
        self.extra_meta: dict[str, Any] = {}
        self._k = 0
        self._counts: dict[str, int] = {}

    def __enter__(self) -> DatasetWriter:  # noqa: PYI034
        return self

    def __exit__(self, et, ev, tb) -> None:
        if et is not None:
            self.abort()
        elif self.tmp.exists():
            self.close()

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
        self._write_table(_frame_to_table(frame, self.schema), frame)
        self.rows += len(frame)
        return len(frame)

    def check_schema(self, schema, source: str | None) -> None:
        """The first chunk's schema is the dataset's; every later chunk must have the same."""
        if self.schema is None:
            from mrcstats.io.schema import check_case_distinct

            check_case_distinct(schema.names, source)
            self.schema, self.first = schema, source
        elif not schema.equals(self.schema):
            raise InputError(f"{source or 'a chunk'}: its columns differ from {self.first or 'the first chunk'} "
                             f"({_schema_diff(self.schema, schema)}); all inputs of one dataset need the same "
                             f"columns (ingest them into separate datasets, or map them to the same fields)")

    def _write_table(self, table, frame: pd.DataFrame) -> None:
        import urllib.parse

        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        models = table.column(PARTITION)
        rest = table.drop_columns([PARTITION])
        codes, uniq = pd.factorize(frame[PARTITION].astype(object), sort=True)
        if len(uniq) == 1:
            groups = [(uniq[0], None)]
        else:
            order = np.argsort(codes, kind="stable")
            bounds = np.flatnonzero(np.diff(codes[order])) + 1
            groups = [(uniq[codes[idx[0]]], idx) for idx in np.split(order, bounds)]
        del models, pc
        for name, idx in groups:
            part = rest if idx is None else rest.take(idx)
            d = self.tmp / f"{PARTITION}={urllib.parse.quote(str(name), safe='')}"
            d.mkdir(exist_ok=True)
            k = self._counts.get(name, 0)
            self._counts[name] = k + 1
            pq.write_table(part, d / f"part-{self.prefix}{self._k:06d}-{k:04d}.parquet", compression="snappy")
        self._k += 1

    def state(self) -> dict[str, Any]:
        """What a part writer wrote (for :meth:`merge` in the owner)."""
        return {"schema": self.schema, "first": self.first, "rows": self.rows, "skipped": self.skipped,
                "counts": self._counts}

    def merge(self, st: dict[str, Any]) -> None:
        """Add a part writer's :meth:`state`; its schema must equal this dataset's."""
        from mrcstats.io.schema import merge_skipped

        if st["schema"] is not None:
            if self.schema is None:
                self.schema, self.first = st["schema"], st["first"]
            elif not st["schema"].equals(self.schema):
                raise InputError(f"{st['first'] or 'a chunk'}: its columns differ from {self.first or 'the first chunk'} "
                                 f"({_schema_diff(self.schema, st['schema'])}); all inputs of one dataset need the "
                                 f"same columns (ingest them into separate datasets, or map them to the same fields)")
        self.rows += st["rows"]
        self.skipped = merge_skipped(self.skipped, st["skipped"])
        for m, c in st["counts"].items():
            self._counts[m] = self._counts.get(m, 0) + c

    def close(self, *, check_keys: bool = True) -> LogDataset:
        """Write ``_mrcstats.json``, check keys across chunks, rename into place; returns the handle."""
        if self.schema is None:
            self.abort()
            raise InputError("no rows to write: every input was empty or skipped")
        meta = {"version": DATASET_VERSION, "partitioning": [PARTITION], "rows": self.rows,
                "columns": list(self.schema.names),
                "schema": [[PARTITION, "string"]] + [[f.name, str(f.type)] for f in self.schema
                                                      if f.name != PARTITION],
                "skipped": self.skipped, "sources": self.sources, **self.extra_meta}
        try:
            (self.tmp / META_NAME).write_text(json.dumps(meta, indent=1, default=str), encoding="utf-8")
            # one key per row: within a chunk validate_log checked it; across chunks only models written
            # by more than one chunk can repeat a key (model is part of the key)
            multi = sorted(m for m, c in self._counts.items() if c > 1)
            if check_keys and multi:
                _check_keys(open_dataset(self.tmp, check=False), multi)
            _replace_dir(self.tmp, self.out)
        except BaseException:
            self.abort()
            raise
        return open_dataset(self.out, check=False)

    def abort(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


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
        raise InputError(f"duplicate (model, item, trial, condition) rows across input files/chunks: "
                         f"model={r['model']!r} item={r['item']!r} trial={r['trial']} "
                         f"condition={r['condition']!r} occurs {int(r['n'])} times; remove the overlap between "
                         f"the inputs (--on-duplicate applies within one file)")


def write_dataset(paths: str | os.PathLike | Sequence[str | os.PathLike], out: str | os.PathLike, *,
                  format: str | None = None, mapping: Mapping[str, str] | None = None,
                  model: str | None = None, on_duplicate: str = "error",
                  chunk_rows: int = CHUNK_ROWS, jobs: int = 1, fast: bool = True) -> LogDataset:
    """Ingest any number of response-log files into a dataset folder, streamed and atomic.

    Parquet sources are read in chunks of ``chunk_rows`` rows (Arrow record batches); other
    formats one file at a time with their reader (:func:`mrcstats.io.reader.read_source`); a
    dataset folder file by file. Each chunk is validated with the canonical schema; all chunks
    must share one schema. ``jobs > 1`` reads the inputs in that many processes (they write into
    the same temporary folder; the result is the same dataset). Parquet inputs whose columns already
    have canonical names and types are checked and written by DuckDB in batches (``fast=False``: every
    input through pandas; same dataset, same errors -- see :func:`_write_fast`). Returns the
    :class:`LogDataset` written (``skipped`` counts dropped rows by reason).
    """
    from mrcstats._progress import progress
    from mrcstats.io.detect import FORMATS, detect_format, expand_paths, load_source
    from mrcstats.io.schema import merge_skipped

    if format is not None and format not in FORMATS:
        raise InputError(f"unknown format {format!r}; choose one of {', '.join(FORMATS)}")
    if not isinstance(jobs, int) or jobs < 1:
        raise InputError(f"jobs must be a whole number >= 1, got {jobs!r}")
    given = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    from mrcstats._files import resolve_path

    if any(resolve_path(p) == resolve_path(out) for p in given):
        raise InputError(f"{out}: the dataset to write is also an input; write to another folder")
    units: list[tuple[str, str, str]] = []    # (kind, path, format or dataset root)
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
            pairs = [(f, format or _detect_cheap(f) or detect_format(load_source(f))) for f in expand_paths(p)]
        for f, fmt in pairs:
            if fmt0 is not None and fmt != fmt0:
                raise InputError(f"mixed formats in one call: {given[0]} is {fmt0} but {f} is {fmt}; "
                                 f"read one format at a time (or pass --format)")
            fmt0 = fmt
            if not is_dataset(f):
                sources.append(str(f))
                units.append(("parquet" if fmt == "parquet" and not str(f).lower().endswith(".gz") else "other",
                              str(f), fmt))
    opts = {"mapping": dict(mapping) if mapping else None, "model": model, "on_duplicate": on_duplicate,
            "chunk_rows": chunk_rows}
    # Parquet inputs already in canonical names and types are ingested by DuckDB (_write_fast), the rest
    # (and any batch whose checks fail) by the pandas path; the dataset written is the same
    plans = [_fast_unit(u, **opts) for u in units] if fast else [None] * len(units)
    steps = _plan_steps(units, plans, FAST_BATCH_ROWS)
    with DatasetWriter(out) as w:
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
                _write_unit(w, x, **opts)
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
                chunk_rows) -> None:
    from mrcstats.io.detect import load_source
    from mrcstats.io.reader import read_source
    from mrcstats.io.schema import coerce_log
    from mrcstats.io.tabular import apply_mapping, check_trial_finite, derive_correct

    kind, f, extra = unit
    if kind == "fragment":
        df = _read_fragment_nullable(f, extra)
        check_trial_finite(df.attrs.pop("nonfinite", None) or {}, mapping, f)
        df = derive_correct(apply_mapping(df, mapping, f), f)
        w.write(coerce_log(df, source=f, model=model), f, on_duplicate=on_duplicate)
    elif kind == "parquet":
        for chunk in _parquet_chunks(Path(f), mapping, model, chunk_rows):
            w.write(chunk, f, on_duplicate=on_duplicate)
    else:
        w.write(read_source(load_source(f), extra, mapping, model), f, on_duplicate=on_duplicate)


def _read_fragment_nullable(file: str, root: str) -> pd.DataFrame:
    """A dataset file with nullable dtypes and its ``model`` from the partition folder name."""
    import urllib.parse

    import pyarrow.parquet as pq

    try:
        t = pq.read_table(file)
    except Exception as exc:  # noqa: BLE001
        raise InputError(f"{file}: cannot read this Parquet file of the dataset ({_first_line(exc)})") from None
    df = t.to_pandas(types_mapper=_NULLABLE.get)
    from mrcstats.io.tabular import nan_cells

    df.attrs["nonfinite"] = nan_cells(t)
    seg = [x for x in Path(file).relative_to(root).parts if x.startswith(PARTITION + "=")]
    if PARTITION not in df.columns:
        val = urllib.parse.unquote(seg[0].split("=", 1)[1]) if seg else None
        df.insert(0, PARTITION, pd.Series(pd.array([val] * len(df), dtype="string")))
    return df


class _Nullable(dict):
    """Arrow -> pandas dtypes keeping nulls without object columns (bool, string, float, int)."""

    def get(self, t, default=None):
        import pyarrow as pa

        if pa.types.is_boolean(t):
            return pd.BooleanDtype()
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return pd.StringDtype("pyarrow")
        if pa.types.is_floating(t):
            return pd.Float64Dtype()
        return default


_NULLABLE = _Nullable()


def _detect_cheap(path: Path) -> str | None:
    """``parquet`` by magic bytes without loading the file (large sources); else None."""
    try:
        with open(path, "rb") as fh:
            return "parquet" if fh.read(4) == b"PAR1" else None
    except OSError:
        return None


def _parquet_chunks(path: Path, mapping: Mapping[str, str] | None, model: str | None,
                    chunk_rows: int) -> Iterable[pd.DataFrame]:
    import pyarrow.parquet as pq

    from mrcstats.io.schema import coerce_log
    from mrcstats.io.tabular import apply_mapping, check_trial_finite, derive_correct, nan_cells

    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # noqa: BLE001
        raise InputError(f"{path}: cannot read Parquet ({_first_line(exc)})") from None
    if pf.metadata.num_rows == 0:
        raise InputError(f"{path}: Parquet file has no rows")
    try:
        offset = 0
        for batch in pf.iter_batches(batch_size=chunk_rows):
            check_trial_finite(nan_cells(batch), mapping, str(path), offset)
            offset += batch.num_rows
            df = batch.to_pandas(types_mapper=_NULLABLE.get)
            df.columns = [str(c) for c in df.columns]
            df = derive_correct(apply_mapping(df, mapping, str(path)), str(path))
            yield coerce_log(df, source=str(path), model=model)
    except OSError as exc:
        raise InputError(f"{path}: cannot read Parquet ({_first_line(exc)})") from None


def dataset_stats(ds: LogDataset) -> dict[str, Any]:
    """The ``ingest`` summary (as :func:`mrcstats.io.schema.log_stats`) computed in DuckDB."""
    per = ds.sql("SELECT model, count(*) AS n, count(*) FILTER (WHERE correct) AS c, "
                 "count(*) FILTER (WHERE correct IS NULL) AS i FROM log GROUP BY model ORDER BY model")
    one = ds.sql("SELECT count(DISTINCT item) AS items, count(DISTINCT cluster) AS clusters FROM log")
    conds = ds.sql("SELECT DISTINCT condition FROM log ORDER BY condition")["condition"]
    return {
        "rows": int(per["n"].sum()),
        "models": [str(m) for m in per["model"]],
        "items": int(one["items"].iloc[0]),
        "clusters": int(one["clusters"].iloc[0]),
        "conditions": sorted(str(c) for c in conds),
        "accuracy": {str(m): float(c) / float(n) for m, c, n in zip(per["model"], per["c"], per["n"])},
        "invalid": {str(m): int(i) for m, i in zip(per["model"], per["i"])},
        "skipped": ds.skipped,
    }


# ----------------------------------------------------------------------------- the DuckDB fast path

#: rows per DuckDB batch of the fast path (consecutive files are grouped until this many rows)
FAST_BATCH_ROWS = 4_000_000
_FAST_INT_TYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32")
#: pandas dtypes of an integer column that :func:`arrow_schema_of` stores as int64
_PANDAS_INT64 = ("int64", "int32", "int16", "int8", "uint8", "uint16", "uint32", "Int64", "Int32")


@dataclass(frozen=True)
class _FastUnit:
    """A Parquet unit DuckDB can ingest without pandas: its columns are canonical names and types."""

    unit: tuple[str, str, str]
    file: str
    rows: int
    columns: tuple[str, ...]
    model: str | None          # from the partition folder (a fragment without a model column)
    key: tuple                 # units with the same key share one DuckDB scan
    extra: dict = field(default_factory=dict)   # other columns -> Arrow type name
    verbatim: bool = False     # stored exactly as the pandas path stores it (copied when nothing is filled)


def _fast_unit(unit: tuple[str, str, str], *, mapping, model, on_duplicate, chunk_rows=None) -> _FastUnit | None:
    """The fast-path plan of ``unit``, or None when the pandas path must read it.

    Eligible: a Parquet file or dataset fragment with rows, no ``mapping``/``model`` override, only
    canonical column names (a pandas index column stored by ``to_parquet`` is ignored, as pandas
    does), ``item`` and ``correct`` present, ``model`` present or given by the partition folder, and
    types that need no coercion: text columns string, ``trial`` an integer type up to uint32,
    ``masking_rate`` double, ``correct`` boolean. Anything else (words for correctness, text trials,
    ...) goes through :func:`mrcstats.io.schema.coerce_log` as before.
    """
    import urllib.parse

    import pyarrow as pa
    import pyarrow.parquet as pq

    from mrcstats.io.schema import CANONICAL_COLUMNS, DUPLICATE_POLICIES, STRING_COLUMNS

    kind, f, extra = unit
    if kind not in ("fragment", "parquet") or mapping or model is not None or on_duplicate not in DUPLICATE_POLICIES:
        return None
    try:
        md = pq.read_metadata(f)
        schema = md.schema.to_arrow_schema()
        pmeta = schema.pandas_metadata or {}
    except Exception:  # noqa: BLE001 - the pandas path reports an unreadable file
        return None
    if md.num_rows == 0:
        return None
    index = {c for c in pmeta.get("index_columns", []) if isinstance(c, str)}
    # pandas restores its own dtype of a column from this metadata (e.g. Int8, which stays int8 on the
    # pandas path): such integer columns go through pandas
    pandas_types = {str(c.get("name")): str(c.get("numpy_type")) for c in pmeta.get("columns", [])
                    if isinstance(c, dict)}
    names = [n for n in schema.names if n not in index]
    if len({n.casefold() for n in names}) != len(names) or not {"item", "correct"} <= set(names) \
            or {"filename", "_file"} & set(names):
        return None
    fmodel = None
    if PARTITION not in names:
        if kind != "fragment":
            return None
        seg = [x for x in Path(f).relative_to(extra).parts if x.startswith(PARTITION + "=")]
        if not seg:
            return None
        fmodel = urllib.parse.unquote(seg[0].split("=", 1)[1])
    for n in names:
        t = schema.field(n).type
        if n in STRING_COLUMNS:
            ok = pa.types.is_string(t) or pa.types.is_large_string(t)
        elif n == "trial":
            ok = str(t) in _FAST_INT_TYPES
        elif n == "masking_rate":
            ok = pa.types.is_float64(t)
        elif n == "correct":
            ok = pa.types.is_boolean(t)
        else:   # another column is kept as is: text, booleans, doubles and integers (checked: no NaN / null)
            ok = pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_boolean(t) \
                or pa.types.is_float64(t) or (str(t) in _FAST_INT_TYPES and pandas_types.get(n, "int64")
                                              in _PANDAS_INT64)
        if not ok:
            return None
    # a fragment stored exactly as the pandas path would store it can be copied byte for byte once checked
    verbatim = (fmodel is not None and not (schema.metadata or {}) and list(names) == schema.names
                and schema.equals(pa.schema([x for x in _fast_schema(names, {}) if x.name != PARTITION]
                                            + [schema.field(n) for n in names if n not in CANONICAL_COLUMNS]))
                and all(str(schema.field(n).type) in ("string", "bool", "double", "int64")
                        for n in names if n not in CANONICAL_COLUMNS))
    key = (kind, fmodel is None, verbatim, tuple((n, str(schema.field(n).type)) for n in schema.names))
    extra_types = {n: ("string" if pa.types.is_string(schema.field(n).type)
                       or pa.types.is_large_string(schema.field(n).type) else str(schema.field(n).type))
                   for n in names if n not in CANONICAL_COLUMNS}
    return _FastUnit(unit, str(f), int(md.num_rows), tuple(names), fmodel, key, extra_types, verbatim)


def _fast_schema(columns: Sequence[str], extra: Mapping[str, str]):
    """The Arrow schema the pandas path gives a file with these ``columns`` (``extra``: the others' types)."""
    import pyarrow as pa

    from mrcstats.io.schema import CORE_COLUMNS, TEXT_COLUMNS

    types = {"trial": pa.int64(), "masking_rate": pa.float64(), "correct": pa.bool_()}
    for c, t in extra.items():
        types[c] = pa.string() if t == "string" else pa.bool_() if t == "bool" else \
            pa.float64() if t == "double" else pa.int64()
    cols = [*CORE_COLUMNS, *(c for c in TEXT_COLUMNS if c in columns), *(c for c in columns if c in extra)]
    return pa.schema([pa.field(c, types.get(c, pa.string()), nullable=True) for c in cols])


def _plan_steps(units: list, plans: list, batch_rows: int) -> list[tuple[str, Any]]:
    """Units in order as steps: ``("fast", [_FastUnit, ...])`` batches of consecutive fast units with one
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


def _qi(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _fast_connection():
    import duckdb

    # a partitioned COPY does not keep the input order across threads anyway: the rows of a model may come
    # in another order than on the pandas path (the dataset is a set of rows; its queries do not depend on it)
    con = duckdb.connect(config={**_duckdb_config(), "preserve_insertion_order": False})
    con.execute("PRAGMA disable_progress_bar")
    con.execute("SET partitioned_write_max_open_files = 1000")   # one file per model and batch
    return con


def _write_fast(w: DatasetWriter, batch: list[_FastUnit], con, *, opts: dict) -> None:
    """Ingest a batch of fast units with DuckDB, or, when any check fails, each unit with the pandas path.

    Checks (SQL aggregates per file, with the defaults of :func:`~mrcstats.io.schema.coerce_log`:
    trial null -> 0, condition null -> "", cluster null -> item) are what the pandas path checks for
    these types: model and item not null, trial in ``0..MAX_TRIAL``, masking rate in 0-100 (no
    NaN/inf), integer extra columns without nulls and double ones without NaN (pandas would turn
    them into float / null), and one row per key within a file (``check_duplicates``: a
    ``GROUP BY hash(file, model, item, trial, condition, masking_rate)``; a hash collision only sends
    the batch to pandas; keys repeated across files are found by :meth:`DatasetWriter.close` as
    before). If anything fails, the batch is handed to the pandas path unit by unit, so the error
    (file, row, column, fix) or the ``on_duplicate`` result is exactly its. Otherwise the batch is
    written into the writer's temporary folder: fragments already stored as the pandas path stores
    them (same columns, order and types, nothing filled in) are copied; the rest by one
    ``COPY ... PARTITION_BY (model)`` (DuckDB names the folders ``model=<URL-quoted name>`` exactly
    as :meth:`DatasetWriter._write_table`).
    """
    import duckdb
    import pyarrow as pa

    cols = batch[0].columns
    extra = batch[0].extra
    schema = _fast_schema(cols, extra)
    by_path = batch[0].model is not None       # fragments: the model is the partition folder's
    try:
        ok, checks = _fast_checks(con, batch)
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
    k = w._k
    w._k += 1
    rest = []
    for u in batch:
        if by_path:
            models_of[u.file] = {u.model}
        if u.verbatim and u.file not in needs_fill:
            d = w.tmp / f"{PARTITION}={urllib.parse.quote(u.model, safe='')}"
            d.mkdir(exist_ok=True)
            shutil.copyfile(u.file, d / f"part-{w.prefix}{k:06d}-{_next_index(d, w.prefix, k)}.parquet")
        else:
            rest.append(u)
    if rest:
        select = {
            "model": "fm.model" if by_path else "r.model", "item": "r.item",
            "cluster": "coalesce(r.cluster, r.item)" if "cluster" in cols else "r.item",
            "trial": "coalesce(CAST(r.trial AS BIGINT), 0)" if "trial" in cols else "CAST(0 AS BIGINT)",
            "condition": "coalesce(r.condition, '')" if "condition" in cols else "''",
            "masking_rate": _fast_col(cols, "masking_rate", "CAST(NULL AS DOUBLE)"), "correct": "r.correct",
        }
        for c in schema.names:
            select.setdefault(c, _fast_col(cols, c, "CAST(NULL AS VARCHAR)") if c not in extra else
                              f"CAST(r.{_qi(c)} AS BIGINT)" if extra[c] in _FAST_INT_TYPES else f"r.{_qi(c)}")
        body = ", ".join(f"{v} AS {_qi(c)}" for c, v in select.items())
        src = _fast_source(rest)
        if by_path:
            con.register("_fast_models", pa.table({"filename": [u.file for u in rest],
                                                   "model": [u.model for u in rest]}))
            src += " JOIN _fast_models AS fm ON r.filename = fm.filename"
        pattern = f"part-{w.prefix}{w._k:06d}-{{i}}"   # its own number: never the name of a copied file
        w._k += 1
        try:
            con.execute(f"COPY (SELECT {body} FROM {src}) TO {_sql_str(str(w.tmp))} (FORMAT parquet, "
                        f"PARTITION_BY (model), FILENAME_PATTERN {_sql_str(pattern)}, OVERWRITE_OR_IGNORE, "
                        f"COMPRESSION snappy)")
        finally:
            if by_path:
                con.unregister("_fast_models")
    for u in batch:
        for m in models_of.get(u.file, ()):
            w._counts[m] = w._counts.get(m, 0) + 1
    w.rows += sum(u.rows for u in batch)


def _fast_source(units: list[_FastUnit]) -> str:
    files = "[" + ", ".join(_sql_str(u.file) for u in units) + "]"
    return f"read_parquet({files}, filename = true, hive_partitioning = false) AS r"


def _fast_col(cols: Sequence[str], c: str, default: str) -> str:
    return f"r.{_qi(c)}" if c in cols else default


def _fast_checks(con, batch: list[_FastUnit]) -> tuple[bool, list[tuple]]:
    """The SQL checks of :func:`_write_fast`: (all passed, per (file, model): n, null keys, bad values,
    rows with a default filled in)."""
    from mrcstats.io.schema import MAX_TRIAL

    cols, extra = batch[0].columns, batch[0].extra
    by_path = batch[0].model is not None
    bad = []
    if "trial" in cols:
        bad.append(f"r.trial < 0 OR r.trial > {MAX_TRIAL}")
    if "masking_rate" in cols:
        bad.append("isnan(r.masking_rate) OR isinf(r.masking_rate) OR r.masking_rate < 0 OR r.masking_rate > 100")
    bad += [f"r.{_qi(c)} IS NULL" if t in _FAST_INT_TYPES else f"isnan(r.{_qi(c)})"
            for c, t in extra.items() if t not in ("string", "bool")]
    filled = " OR ".join(f"r.{c} IS NULL" for c in ("cluster", "trial", "condition") if c in cols) or "false"
    null_key = "r.item IS NULL" if by_path else "r.model IS NULL OR r.item IS NULL"
    checks = con.execute(
        f"SELECT r.filename, {'NULL' if by_path else 'r.model'} AS model, count(*) AS n, "
        f"count(*) FILTER (WHERE {null_key}) AS null_key, "
        f"count(*) FILTER (WHERE {' OR '.join(bad) or 'false'}) AS bad, "
        f"count(*) FILTER (WHERE {filled}) AS filled FROM {_fast_source(batch)} GROUP BY ALL").fetchall()
    if sum(r[2] for r in checks) != sum(u.rows for u in batch) or any(r[3] or r[4] for r in checks):
        return False, checks
    key = ", ".join(["r.filename", *([] if by_path else ["r.model"]), "r.item",
                     "coalesce(r.trial, 0)" if "trial" in cols else "0",
                     "coalesce(r.condition, '')" if "condition" in cols else "''",
                     "r.masking_rate + 0.0" if "masking_rate" in cols else "NULL"])   # -0.0 + 0.0 = 0.0
    dup = con.execute(f"SELECT count(*) FROM (SELECT hash({key}) AS h FROM {_fast_source(batch)} GROUP BY h "
                      f"HAVING count(*) > 1)").fetchall()[0][0]
    return dup == 0, checks


def _next_index(d: Path, prefix: str, k: int) -> int:
    """The next free ``{i}`` of ``part-<prefix><k>-{i}.parquet`` in ``d`` (two fragments of one model in a batch)."""
    i = 0
    while (d / f"part-{prefix}{k:06d}-{i}.parquet").exists():
        i += 1
    return i
