"""Partitioned Parquet datasets: canonical logs larger than memory (opening and scanning them).

A *log dataset* is a folder of Parquet files, one sub-folder per model, with a small
``DIR/_mrcstats.json`` (row count, columns, skipped rows, sources, and per model its
folder and row count). The folder of a model is :func:`partition_folder` of its name: a
readable lower-case ASCII slug and 16 hex digits of the SHA-256 of the exact name
(``GPT-4o`` -> ``gpt-4o-1b2c...``), so folder names are unique under Unicode case folding
and NFC/NFD normalisation (macOS, Windows) and bounded in length whatever the name (a
28-character CJK name is 23 bytes of folder name, not 84); the files hold the ``model``
column, and the real names are in the description. The files are written by
:mod:`mrcstats.io.ingest` (``mrcstats ingest --dataset DIR``) or the leaderboard generator.

:func:`open_dataset` returns a :class:`LogDataset`, a lazy handle: nothing is read
until a query runs. Aggregations run as DuckDB SQL over the files
(:mod:`mrcstats.backends.sql`), streamed in bounded memory; :meth:`LogDataset.to_log`
loads it as an ordinary canonical frame when it fits in memory (so
``read_log(DIR)`` still works for small data).

Bad input: files whose Arrow schema differs from the dataset's, whose Parquet footer
cannot be read, or whose row counts per model differ from the description (a model's
files lost or merged into another's -- as two folders differing only by case do on a
case-insensitive file system) raise :class:`~mrcstats.errors.InputError` naming the file
or model. Datasets of the first layout (``DIR/model=<URL-quoted name>/``, hive
partitioning, description version 1) still open, checked by their total row count;
``mrcstats ingest OLD --dataset NEW`` rewrites one in the current layout.

This module only reads: writing is :mod:`mrcstats.io.ingest` (ingest -> reader -> dataset, no circle).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import threading
import unicodedata
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mrcstats.errors import InputError

if TYPE_CHECKING:        # pandas and numpy are imported where used: is_dataset is on the start-up path
    import pandas as pd

META_NAME = "_mrcstats.json"
PARTITION = "model"
#: the layout written today (2: one folder per model named by :func:`partition_folder`; 1: hive ``model=NAME``)
DATASET_VERSION = 2

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


# ----------------------------------------------------------------------------- partition folders

#: characters kept in the readable part of a partition folder name (everything else becomes ``_``)
_SLUG_BAD = re.compile(r"[^a-z0-9.-]+")
#: the longest readable part of a folder name (the hash follows: 40 + 1 + 16 bytes at most)
SLUG_CHARS = 40


def partition_folder(model: str) -> str:
    """The folder name of ``model``'s files: ``<slug>-<16 hex digits of SHA-256(model as UTF-8)>``.

    The slug is the name decomposed (NFKD), reduced to lower-case ASCII letters, digits and ``.-``
    (runs of anything else become ``_``), at most :data:`SLUG_CHARS` characters, ``model`` when
    nothing is left (a CJK name). The hash is of the exact name, so names differing only by case
    (``GPT-4o``/``gpt-4o``) or by Unicode normalisation get different folders, and a folder name is
    plain lower-case ASCII: unique under case folding and NFC, and at most 57 bytes.
    """
    digest = hashlib.sha256(str(model).encode("utf-8", "surrogatepass")).hexdigest()[:16]
    slug = unicodedata.normalize("NFKD", str(model)).encode("ascii", "ignore").decode("ascii").lower()
    slug = _SLUG_BAD.sub("_", slug).strip("._-")[:SLUG_CHARS].rstrip("._-")
    return f"{slug or 'model'}-{digest}"


def hive_model(file: str | os.PathLike, root: str | os.PathLike) -> str | None:
    """The model named by a ``model=<URL-quoted name>`` folder above ``file`` (the first layout), else None."""
    seg = [x for x in Path(file).relative_to(root).parts if x.startswith(PARTITION + "=")]
    return urllib.parse.unquote(seg[0].split("=", 1)[1]) if seg else None


def schema_diff(want, got) -> str:
    """What differs between two Arrow schemas (columns missing, added, of another type), in words."""
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
        import numpy as np

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
        """The ``attrs`` a frame read from the dataset would carry (``skipped``, ``sources``, ``truth``, ``notes``:
        the notes of the readers of its source files, each naming its file)."""
        return {k: v for k, v in self.meta.items() if k in ("skipped", "sources", "truth", "format", "notes")}

    def __len__(self) -> int:
        n = self.meta.get("rows")
        if n is None:
            n = int(self.sql("SELECT count(*) AS n FROM log")["n"].iloc[0])
        return int(n)

    @property
    def hive(self) -> bool:
        """True for the first layout (``model=NAME`` folders; the model is not in the files)."""
        return int(self.meta.get("version", 1) or 1) < 2

    def arrow(self):
        """The ``pyarrow.dataset.Dataset`` (the model column string-typed; from the folders in the first layout)."""
        ds = self._state.get("arrow")
        if ds is None:
            import pyarrow as pa
            import pyarrow.dataset as pads

            if self.hive:
                part = pads.partitioning(pa.schema([pa.field(PARTITION, pa.string())]), flavor="hive")
                ds = pads.dataset(list(self.files), schema=pa.schema([*self.schema]), format="parquet",
                                  partitioning=part, partition_base_dir=str(self.path))
            else:
                ds = pads.dataset(list(self.files), schema=pa.schema([*self.schema]), format="parquet")
            self._state["arrow"] = ds
        return ds

    def connection(self):
        """A DuckDB connection (one per thread) with the dataset as the view ``log``."""
        key = f"con-{threading.get_ident()}"
        con = self._state.get(key)
        if con is None:
            import duckdb

            con = duckdb.connect(config=duckdb_config())
            con.execute("PRAGMA disable_progress_bar")   # it prints on stdout, which --json keeps for its object
            # DuckDB's own Parquet reader (faster than scanning the Arrow dataset) over the checked files;
            # in the first layout it decodes the URI-encoded hive values, and the model stays text
            if self.hive:
                glob = str(self.path / f"{PARTITION}=*" / "*.parquet").replace("'", "''")
                src = f"read_parquet('{glob}', hive_partitioning = true, hive_types = {{'{PARTITION}': 'VARCHAR'}})"
            else:
                files = ", ".join("'" + f.replace("'", "''") + "'" for f in self.files)
                src = f"read_parquet([{files}], hive_partitioning = false)"
            con.execute(f"CREATE VIEW log AS SELECT * FROM {src}{self._where_sql()}")
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
                raise InputError(f"{self.path}: cannot read the dataset ({first_error_line(exc)}); "
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
            raise InputError(f"{self.path}: cannot read the dataset ({first_error_line(exc)})") from None

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
            raise InputError(f"{self.path}: cannot read the dataset ({first_error_line(exc)})") from None
        import pandas as pd

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
        import pandas as pd

        cols = list(columns) if columns is not None else self.columns
        meta = pd.DataFrame({c: pd.Series([], dtype=_pandas_dtype(self.schema.field(c).type)) for c in cols})
        return dd.from_map(_read_fragment, list(self.files), path=str(self.path) if self.hive else None,
                           cols=cols, meta=meta, enforce_metadata=False)


def _pandas_dtype(t) -> Any:
    import pyarrow as pa

    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_floating(t):
        return "Float64"
    if pa.types.is_integer(t):
        return "int64"
    return object


def _read_fragment(file: str, path: str | None, cols: list[str]) -> pd.DataFrame:
    """One dataset file as a frame (a Dask partition); ``path``: the root of a first-layout dataset,
    whose model is filled in from the folder name."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = cols
    cols = [c for c in columns if c != PARTITION or path is None]
    t = pq.read_table(file, columns=cols)
    df = t.to_pandas(types_mapper={pa.bool_(): pd.BooleanDtype(), pa.float64(): pd.Float64Dtype()}.get)
    if PARTITION in columns and path is not None:
        df.insert(0, PARTITION, pd.Series([hive_model(file, path)] * len(df), dtype=object))
    elif PARTITION in columns:
        df[PARTITION] = df[PARTITION].astype(object)
    return df[list(columns)]


def first_error_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type's name when it has none), for one-line errors."""
    s = str(exc).strip()
    return s.splitlines()[0] if s else type(exc).__name__


def duckdb_config() -> dict[str, Any]:
    """DuckDB settings: threads from ``MRCSTATS_DUCKDB_THREADS`` (default: DuckDB's), a memory limit
    (``MRCSTATS_DUCKDB_MEMORY``, default 2GB) so large aggregations spill instead of growing."""
    cfg: dict[str, Any] = {"memory_limit": os.environ.get("MRCSTATS_DUCKDB_MEMORY", "2GB")}
    th = os.environ.get("MRCSTATS_DUCKDB_THREADS")
    if th:
        cfg["threads"] = int(th)
    return cfg


def open_dataset(path: str | os.PathLike, *, check: bool = True) -> LogDataset:
    """Open a log dataset folder lazily.

    Always: the folders must be those the description lists (a Parquet file in a folder it does not
    name, or a listed model whose folder is gone, raises :class:`InputError`). With ``check``
    (default) every file's Parquet footer is read as well: its schema must equal the dataset's, its
    ``model`` column (statistics) must hold only its folder's model, and the rows per model must
    equal the description's -- so a model whose files were lost or merged into another folder (two
    folders of the first layout differing only by case on a case-insensitive file system) is refused
    instead of silently missing. Footers only: fast even for thousands of files. A first-layout
    dataset is checked by its total row count.
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
            if not isinstance(meta, dict):
                raise ValueError("not a JSON object")  # noqa: TRY004 - caught just below
        except (OSError, ValueError) as exc:
            raise InputError(f"{mp}: cannot read the dataset description ({exc}); re-run mrcstats ingest") \
                from None
    version = meta.get("version", 1)
    if not isinstance(version, int) or version > DATASET_VERSION:
        raise InputError(f"{root}: dataset layout version {version!r} is newer than this mrcstats reads "
                         f"({DATASET_VERSION}); upgrade mrcstats or re-run mrcstats ingest with this version")
    files = sorted(str(p) for p in root.rglob("*.parquet") if not any(s.startswith((".", "_"))
                                                                       for s in p.relative_to(root).parts))
    if not files:
        raise InputError(f"{root}: no Parquet files in the dataset folder")
    parts = _partitions(root, meta, files) if version >= 2 else None
    want = None
    if meta.get("schema"):
        want = pa.schema([pa.field(n, _type_from_name(t)) for n, t in meta["schema"]])
    file_want = None
    first = None
    rows: dict[str, int] = {}
    if check or want is None:
        for f in files if check else files[:1]:
            try:
                md = pq.read_metadata(f)
                got = md.schema.to_arrow_schema()
            except Exception as exc:  # noqa: BLE001 - arrow raises several types for a bad footer
                raise InputError(f"{f}: cannot read this Parquet file of the dataset ({first_error_line(exc)}); "
                                 f"remove it or re-run mrcstats ingest") from None
            got = pa.schema([pa.field(x.name, x.type) for x in got])
            if file_want is None:
                file_want = pa.schema([x for x in want if x.name != PARTITION or parts is not None]) \
                    if want is not None else got
                first = f
            if not got.equals(file_want):
                ref = "the dataset description" if want is not None else first
                raise InputError(f"{f}: its schema differs from {ref} ({schema_diff(file_want, got)}); every "
                                 f"file of a dataset must have the same columns and types; re-run mrcstats "
                                 f"ingest on the sources")
            folder = Path(f).relative_to(root).parts[0]
            rows[folder] = rows.get(folder, 0) + md.num_rows
            if parts is not None and check:
                _check_model_stats(md, f, parts[folder][0])
    if check:
        _check_rows(root, meta, parts, rows)
    if want is None:
        want = pa.schema([pa.field(PARTITION, pa.string()), *file_want]) if parts is None else file_want
    from mrcstats.io.schema import check_case_distinct

    check_case_distinct(want.names, str(root))
    return LogDataset(root, tuple(files), want, meta)


def _partitions(root: Path, meta: Mapping[str, Any], files: Sequence[str]) -> dict[str, tuple[str, int]]:
    """``{folder: (model, rows)}`` of a current-layout description; its folders must be the files' folders."""
    listed = meta.get("partitions")
    try:
        parts = {str(p["folder"]): (str(p["model"]), int(p["rows"])) for p in listed}
        if len(parts) != len(listed) or len({m for m, _ in parts.values()}) != len(listed):
            raise ValueError("a folder or model listed twice")
    except (TypeError, KeyError, ValueError) as exc:
        raise InputError(f"{root / META_NAME}: the dataset description has no valid 'partitions' list "
                         f"({exc}); re-run mrcstats ingest") from None
    folders = {Path(f).relative_to(root).parts[0] for f in files}
    stray = sorted(folders - set(parts))
    if stray:
        bad = next(f for f in files if Path(f).relative_to(root).parts[0] == stray[0])
        raise InputError(f"{bad}: this file is not part of the dataset {root} (its folder {stray[0]!r} is not in "
                         f"{META_NAME}); remove it, or re-run mrcstats ingest")
    gone = sorted(m for d, (m, n) in parts.items() if n > 0 and d not in folders)
    if gone:
        raise InputError(f"{root}: the files of model {gone[0]!r} are missing (its folder "
                         f"{next(d for d, (m, _) in parts.items() if m == gone[0])!r} holds no Parquet file"
                         f"{f'; {len(gone) - 1} more model(s) too' if len(gone) > 1 else ''}); the dataset was "
                         f"changed after it was written; re-run mrcstats ingest")
    return parts


def _check_model_stats(md: Any, f: str, model: str) -> None:
    """Every row group's ``model`` statistics (min, max) must be the folder's model."""
    names = md.schema.names
    if PARTITION not in names:
        return
    j = names.index(PARTITION)
    for i in range(md.num_row_groups):
        st = md.row_group(i).column(j).statistics
        if st is None or not st.has_min_max:
            continue
        if st.min != model or st.max != model:
            other = st.min if st.min != model else st.max
            raise InputError(f"{f}: holds rows of model {other!r} in the folder of model {model!r}; files of "
                             f"different models were merged (e.g. copied onto a case-insensitive file system); "
                             f"re-run mrcstats ingest")


def _check_rows(root: Path, meta: Mapping[str, Any], parts: Mapping[str, tuple[str, int]] | None,
                rows: Mapping[str, int]) -> None:
    """The row counts of the files (per model; in the first layout the total) equal the description's."""
    fix = ("files were lost, merged or changed after the dataset was written (two models whose names differ "
           "only by case collide on a case-insensitive file system in the first dataset layout); re-run "
           "mrcstats ingest, which writes one folder per model that cannot collide")
    if parts is not None:
        for d, (m, n) in sorted(parts.items(), key=lambda x: x[1][0]):
            if rows.get(d, 0) != n:
                raise InputError(f"{root}: model {m!r} has {rows.get(d, 0):,} rows in its files but {n:,} in "
                                 f"{META_NAME}; {fix}")
    total = meta.get("rows")
    if isinstance(total, int) and sum(rows.values()) != total:
        raise InputError(f"{root}: the files hold {sum(rows.values()):,} rows but {META_NAME} says {total:,}; {fix}")


_TYPES = {"string": "string", "large_string": "large_string", "bool": "bool_", "double": "float64",
          "float": "float32", "halffloat": "float16",
          **{f"{s}int{b}": f"{s}int{b}" for s in ("", "u") for b in (8, 16, 32, 64)}}


def _type_from_name(name: str):
    import pyarrow as pa

    attr = _TYPES.get(name)
    if attr is None:
        raise InputError(f"unknown column type {name!r} in a dataset description; re-run mrcstats ingest")
    return getattr(pa, attr)()

def dataset_graded(ds: LogDataset) -> bool:
    """True when a dataset folder holds graded scores (a score that is not its row's 0/1 correctness): the
    dataset's :func:`~mrcstats.io.schema.resolve_outcome` ``"auto"``, asked in DuckDB."""
    if "score" not in ds.columns:
        return False
    n = ds.sql("SELECT count(*) AS n FROM log WHERE score IS NOT NULL AND "
               "(correct IS NULL OR score <> CAST(correct AS DOUBLE))")["n"].iloc[0]
    return int(n) > 0


def dataset_stats(ds: LogDataset) -> dict[str, Any]:
    """The ``ingest`` summary (as :func:`mrcstats.io.schema.log_stats`) computed in DuckDB; a graded dataset
    (:func:`dataset_graded`) is summarised in memory by :func:`~mrcstats.io.schema.log_stats`, as ``summary``
    does, so both give the same mean scores."""
    if dataset_graded(ds):
        from mrcstats.io.schema import log_stats

        return {**log_stats(ds.to_log()), "skipped": ds.skipped}
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
