"""Coercion of ingest inputs to the canonical log's stored types: what :mod:`mrcstats.io.ingest` writes.

Two routes give the same dataset. The pandas route coerces with :func:`mrcstats.io.schema.coerce_log` and stores
a frame with :func:`arrow_schema_of` / :func:`frame_to_table` (a later streamed chunk is brought to the first
chunks' columns by :func:`conform_chunk`). The DuckDB route takes Parquet files whose columns already have
canonical names and types (:func:`fast_unit` decides, :func:`fast_schema` is the schema the pandas route would
give them) and checks and fills them in SQL generated from :data:`mrcstats.io.schema.DEFAULTS` and
:data:`~mrcstats.io.schema.RANGES` (:func:`fast_checks`, :func:`fast_select`), so the defaults and ranges are
written once, in :mod:`mrcstats.io.schema`.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from mrcstats.errors import InputError
from mrcstats.io.dataset import PARTITION, hive_model


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


def frame_to_table(frame: pd.DataFrame, schema) -> Any:
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


class NullableTypes(dict):
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


NULLABLE_TYPES = NullableTypes()


def conform_chunk(chunk: pd.DataFrame, schema, source: str, before: int) -> pd.DataFrame:
    """A later chunk of a streamed file with the columns of the dataset: a column of the first chunks it
    lacks is added as missing (a whole-file read gives such rows a missing value too); a column the first
    chunks lacked is refused with the row where it starts."""
    if schema is None:
        return chunk
    names = list(schema.names)
    new = [c for c in chunk.columns if c not in names]
    if new:
        raise InputError(f"{source}: column {new[0]!r} first appears after data row {before:,}, but the "
                         f"dataset's columns were set by the rows before (a streamed file is read in chunks); "
                         f"give every row the field (empty when it has no value), or ingest the file on its own")
    lack = [c for c in names if c not in chunk.columns]
    if not lack:
        return chunk if list(chunk.columns) == names else chunk[names]
    out = chunk.copy(deep=False)
    for c in lack:
        t = str(schema.field(c).type)
        out[c] = pd.Series(pd.array([None] * len(out), dtype="string" if t == "string" else
                                    "boolean" if t == "bool" else "Float64" if t == "double" else "Int64"),
                           index=out.index)
    return out[names]



#: Arrow integer types the fast path stores as int64
FAST_INT_TYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32")

#: pandas dtypes of an integer column that :func:`arrow_schema_of` stores as int64
PANDAS_INT64 = ("int64", "int32", "int16", "int8", "uint8", "uint16", "uint32", "Int64", "Int32")


@dataclass(frozen=True)
class FastUnit:
    """A Parquet unit DuckDB can ingest without pandas: its columns are canonical names and types."""

    unit: tuple[str, str, str]
    file: str
    rows: int
    columns: tuple[str, ...]
    model: str | None          # from the partition folder (a first-layout fragment: no model column)
    key: tuple                 # units with the same key share one DuckDB scan
    extra: dict = field(default_factory=dict)   # other columns -> Arrow type name
    verbatim: str | None = None   # the model of a fragment stored exactly as the pandas path stores it
                                  # (copied when nothing is filled)


def fast_unit(unit: tuple[str, str, str], *, mapping, model, on_duplicate, chunk_rows=None) -> FastUnit | None:
    """The fast-path plan of ``unit``, or None when the pandas path must read it.

    Eligible: a Parquet file or dataset fragment with rows, no ``mapping``/``model`` override, only
    canonical column names (a pandas index column stored by ``to_parquet`` is ignored, as pandas
    does), ``item`` and ``correct`` present, ``model`` present or given by the partition folder, and
    types that need no coercion: text columns string, ``trial`` an integer type up to uint32,
    ``masking_rate`` double, ``correct`` boolean. Anything else (words for correctness, text trials,
    ...) goes through :func:`mrcstats.io.schema.coerce_log` as before.
    """
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
        fmodel = hive_model(f, extra)
        if fmodel is None:
            return None
    for n in names:
        t = schema.field(n).type
        if n in STRING_COLUMNS:
            ok = pa.types.is_string(t) or pa.types.is_large_string(t)
        elif n == "trial":
            ok = str(t) in FAST_INT_TYPES
        elif n in ("masking_rate", "score"):
            ok = pa.types.is_float64(t)
        elif n == "correct":
            ok = pa.types.is_boolean(t)
        else:   # another column is kept as is: text, booleans, doubles and integers (checked: no NaN / null)
            ok = pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_boolean(t) \
                or pa.types.is_float64(t) or (str(t) in FAST_INT_TYPES and pandas_types.get(n, "int64")
                                              in PANDAS_INT64)
        if not ok:
            return None
    # a fragment of a current-layout dataset stored exactly as the pandas path would store it (one model,
    # by its statistics) can be copied byte for byte once checked
    vmodel = one_model(md, names) if kind == "fragment" and fmodel is None else None
    verbatim = vmodel if (vmodel is not None and not (schema.metadata or {}) and list(names) == schema.names
                          and schema.equals(pa.schema([*fast_schema(names, {})]
                                                      + [schema.field(n) for n in names
                                                         if n not in CANONICAL_COLUMNS]))
                          and all(str(schema.field(n).type) in ("string", "bool", "double", "int64")
                                  for n in names if n not in CANONICAL_COLUMNS)) else None
    key = (kind, fmodel is None, verbatim is not None, tuple((n, str(schema.field(n).type)) for n in schema.names))
    extra_types = {n: ("string" if pa.types.is_string(schema.field(n).type)
                       or pa.types.is_large_string(schema.field(n).type) else str(schema.field(n).type))
                   for n in names if n not in CANONICAL_COLUMNS}
    return FastUnit(unit, str(f), int(md.num_rows), tuple(names), fmodel, key, extra_types, verbatim)


def one_model(md: Any, names: Sequence[str]) -> str | None:
    """The one model of a Parquet file whose ``model`` statistics are equal in every row group, else None."""
    if PARTITION not in names:
        return None
    j = list(md.schema.names).index(PARTITION)
    seen = set()
    for i in range(md.num_row_groups):
        st = md.row_group(i).column(j).statistics
        if st is None or not st.has_min_max or st.null_count:
            return None
        seen |= {st.min, st.max}
    return next(iter(seen)) if len(seen) == 1 else None


def fast_schema(columns: Sequence[str], extra: Mapping[str, str]):
    """The Arrow schema the pandas path gives a file with these ``columns`` (``extra``: the others' types)."""
    import pyarrow as pa

    from mrcstats.io.schema import CORE_COLUMNS, TEXT_COLUMNS

    types = {"trial": pa.int64(), "masking_rate": pa.float64(), "correct": pa.bool_(), "score": pa.float64()}
    for c, t in extra.items():
        types[c] = pa.string() if t == "string" else pa.bool_() if t == "bool" else \
            pa.float64() if t == "double" else pa.int64()
    core = list(CORE_COLUMNS)
    core.insert(core.index("correct") + 1, "score")     # every log has a score (derived from correct)
    cols = [*core, *(c for c in TEXT_COLUMNS if c in columns), *(c for c in columns if c in extra)]
    return pa.schema([pa.field(c, types.get(c, pa.string()), nullable=True) for c in cols])


def sql_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def sql_string(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def fast_source(units: list[FastUnit]) -> str:
    files = "[" + ", ".join(sql_string(u.file) for u in units) + "]"
    return f"read_parquet({files}, filename = true, hive_partitioning = false) AS r"


def fast_col(cols: Sequence[str], c: str, default: str) -> str:
    return f"r.{sql_ident(c)}" if c in cols else default


def fast_checks(con, batch: list[FastUnit]) -> tuple[bool, list[tuple]]:
    """The SQL checks of :func:`_write_fast`: (all passed, per (file, model): n, null keys, bad values,
    rows with a default filled in)."""
    from mrcstats.io.schema import DEFAULTS, RANGES, sql_filled, sql_out_of_range

    cols, extra = batch[0].columns, batch[0].extra
    by_path = batch[0].model is not None
    bad = [sql_out_of_range(c) for c in RANGES if c in cols]     # the schema's ranges, generated
    if "score" in cols:
        bad.append("isnan(r.score) OR isinf(r.score)")
    bad += [f"r.{sql_ident(c)} IS NULL" if t in FAST_INT_TYPES else f"isnan(r.{sql_ident(c)})"
            for c, t in extra.items() if t not in ("string", "bool")]
    filled = " OR ".join(f"r.{c} IS NULL" for c in DEFAULTS if c in cols) or "false"
    null_key = "r.item IS NULL" if by_path else "r.model IS NULL OR r.item IS NULL"
    checks = con.execute(
        f"SELECT r.filename, {'NULL' if by_path else 'r.model'} AS model, count(*) AS n, "
        f"count(*) FILTER (WHERE {null_key}) AS null_key, "
        f"count(*) FILTER (WHERE {' OR '.join(bad) or 'false'}) AS bad, "
        f"count(*) FILTER (WHERE {filled}) AS filled FROM {fast_source(batch)} GROUP BY ALL").fetchall()
    if sum(r[2] for r in checks) != sum(u.rows for u in batch) or any(r[3] or r[4] for r in checks):
        return False, checks
    key = ", ".join(["r.filename", *([] if by_path else ["r.model"]), "r.item",
                     sql_filled("trial", cols), sql_filled("condition", cols),
                     "r.masking_rate + 0.0" if "masking_rate" in cols else "NULL"])   # -0.0 + 0.0 = 0.0
    dup = con.execute(f"SELECT count(*) FROM (SELECT hash({key}) AS h FROM {fast_source(batch)} GROUP BY h "
                      f"HAVING count(*) > 1)").fetchall()[0][0]
    return dup == 0, checks



def fast_select(cols: Sequence[str], extra: Mapping[str, str], schema: Any, by_path: bool) -> str:
    """The SELECT list that writes a fast unit's rows in ``schema``: the defaults of
    :data:`~mrcstats.io.schema.DEFAULTS` filled in (:func:`~mrcstats.io.schema.sql_filled`), missing columns as
    typed nulls, integer extra columns as BIGINT; ``by_path``: the model comes from the partition folder
    (``fm.model``)."""
    from mrcstats.io.schema import sql_filled

    select = {   # the schema's defaults (DEFAULTS), generated
        "model": "fm.model" if by_path else "r.model", "item": "r.item",
        "cluster": sql_filled("cluster", cols), "trial": sql_filled("trial", cols, cast="BIGINT"),
        "condition": sql_filled("condition", cols),
        "masking_rate": fast_col(cols, "masking_rate", "CAST(NULL AS DOUBLE)"), "correct": "r.correct",
        "score": "r.score" if "score" in cols else "CAST(r.correct AS DOUBLE)",
    }
    for c in schema.names:
        select.setdefault(c, fast_col(cols, c, "CAST(NULL AS VARCHAR)") if c not in extra else
                          f"CAST(r.{sql_ident(c)} AS BIGINT)" if extra[c] in FAST_INT_TYPES else f"r.{sql_ident(c)}")
    return ", ".join(f"{v} AS {sql_ident(c)}" for c, v in select.items())
