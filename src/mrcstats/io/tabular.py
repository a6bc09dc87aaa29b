"""Readers for plain tables: CSV, TSV, JSON, JSON lines and Parquet.

A table becomes a log by naming its columns: canonical names are used as they
are, ``mapping`` (``--map FIELD=COLUMN``) renames source columns to canonical
fields. Without a ``correct`` column, correctness is derived from ``gold`` and
``pred`` (see :func:`mrcstats.io.answers.score_series`). Canonical logs written by
``mrcstats ingest`` (Parquet) read back losslessly: their dtypes are stored in
the file and kept.
"""
from __future__ import annotations

import io
from collections.abc import Collection, Mapping
from typing import Any

import numpy as np
import pandas as pd

from mrcstats.errors import InputError
from mrcstats.io.arrow_columns import (  # check_unique_columns: imported from its old home here too
    check_unique_columns,
    column_kind,
    convert,
    header,
    read_text_table,
    text_fields,
)
from mrcstats.io.schema import STRING_DTYPE, SchemaError
from mrcstats.io.source import Source


def apply_mapping(df: pd.DataFrame, mapping: Mapping[str, str] | None, source: str | None) -> pd.DataFrame:
    """Rename source columns to canonical fields: ``mapping`` is ``{field: source_column}``.

    Mapped source columns are renamed (not copied); a column that already carries the field's name
    and is not itself mapped is kept as ``<field>_original``.
    A mapped column missing from the source raises :class:`SchemaError` listing the
    columns found.
    """
    if not mapping:
        return df
    cols = [str(c) for c in df.columns]
    missing = [col for col in mapping.values() if col not in cols]
    if missing:
        shown = ", ".join(repr(c) for c in cols[:40]) + (" ..." if len(cols) > 40 else "")
        raise SchemaError(f"{source + ': ' if source else ''}--map names column(s) "
                          f"{', '.join(repr(m) for m in missing)} not in the file; columns found: {shown}")
    values = {fld: df[col] for fld, col in mapping.items() if fld != col}  # from the source, before renames
    used = {col for fld, col in mapping.items() if fld != col}
    out = df.drop(columns=[c for c in used if c not in mapping])
    clash = {fld: f"{fld}_original" for fld in values if fld in out.columns and fld not in used}
    out = out.rename(columns=clash)
    for fld, col in values.items():
        out[fld] = col
    return out


def read_delimited(src: Source, delimiter: str, mapping: Mapping[str, str] | None = None,
                   missing: tuple[str, ...] = ("",)) -> pd.DataFrame:
    """Read CSV/TSV; id and text columns (model, item, cluster, gold, ...) are read as strings.

    Only the cells in ``missing`` are missing values (for logs: only empty cells, so a
    response "N/A" or an item "NA" stays text)."""
    cols = header(src, delimiter)
    text = text_fields(cols, mapping)
    df = _delimited_arrow(src, delimiter, cols, text, missing)
    return df if df is not None else _delimited_pandas(src, delimiter, text, missing)


def _delimited_arrow(src: Source, delimiter: str, cols: list[str], text: list[str],
                     missing: tuple[str, ...]) -> pd.DataFrame | None:
    """CSV/TSV through Arrow's multithreaded reader, giving exactly :func:`_delimited_pandas`'s frame, or None
    when it cannot promise that (then the pandas reader reads the file and words any error).

    The cells are read and typed by :mod:`mrcstats.io.arrow_columns` (the same code as the pandas-free reader,
    :func:`~mrcstats.io.arrow_columns.read_delimited_columns`): the text columns become ``string`` columns
    without a Python object per cell (the bulk of a log: model, item, response, ...); the ``bool``, ``int``
    and ``float`` columns are converted by Arrow to what pandas infers (bool; int64, or float64 with NaN where
    missing; float64); any other column (words, unusual numbers, all missing) is converted by pandas' own
    parser from the same bytes (``usecols``), so its dtype and values are pandas'."""
    if STRING_DTYPE.storage != "pyarrow":   # pandas < 3 keeps text as Python objects: its own reader is as fast
        return None
    table = read_text_table(src, delimiter, cols, missing)
    if table is None:
        return None
    out: dict[str, Any] = {}
    rest = []
    for name, col in zip(cols, table.columns):
        kind = column_kind(name, col, text)
        if kind == "text":
            out[name] = pd.array(col, dtype=STRING_DTYPE)
        elif kind in ("words", "rest"):
            rest.append(name)
        elif kind == "int":
            out[name] = _int_values(col)
        else:
            out[name] = convert(kind, col)
    if not rest:
        return pd.DataFrame(out, columns=cols)
    try:
        df = _pandas_columns(src, delimiter, rest, missing)
    except (pd.errors.ParserError, ValueError):
        return None
    if len(df) != table.num_rows or list(df.columns) != rest:
        return None
    for name, values in out.items():
        df[name] = values
    return df[cols]


def _int_values(col: Any) -> np.ndarray:
    """An ``int`` column as pandas infers it: int64, or float64 with NaN where a cell is missing (the values
    :func:`~mrcstats.io.arrow_columns.convert` gives, at most 15 digits: exact in either type)."""
    vals = convert("int", col)
    return vals if col.null_count else vals.astype(np.int64)


def _pandas_columns(src: Source, delimiter: str, usecols: list[str], missing: tuple[str, ...]) -> pd.DataFrame:
    """Some columns of a CSV/TSV as pandas' parser infers them (the options of :func:`_delimited_pandas`)."""
    return pd.read_csv(io.BytesIO(src.data), sep=delimiter, usecols=usecols, engine="c", low_memory=False,
                       keep_default_na=False, na_values=list(missing))


def _delimited_pandas(src: Source, delimiter: str, text: list[str], missing: tuple[str, ...]) -> pd.DataFrame:
    """CSV/TSV through pandas' C parser: the reference reader, and every parse error's wording."""
    dtype: dict[str, Any] = {c: "string" for c in text}
    try:
        # only empty cells are missing: a response "N/A" or an item "NA" stays text
        df = pd.read_csv(io.BytesIO(src.data), sep=delimiter, dtype=dtype, engine="c", low_memory=False,
                         keep_default_na=False, na_values=list(missing))
    except pd.errors.EmptyDataError:
        raise InputError(f"{src.name}: file is empty") from None
    except pd.errors.ParserError as exc:
        msg = str(exc).strip().splitlines()[-1] if str(exc).strip() else "parse error"
        raise InputError(f"{src.name}: cannot parse as {'TSV' if delimiter == chr(9) else 'CSV'}: {msg}") \
            from None
    except UnicodeDecodeError as exc:  # pragma: no cover - load_source checks first
        raise InputError(f"{src.name}: not UTF-8 text at byte {exc.start}") from None
    if len(df) == 0:
        raise InputError(f"{src.name}: has a header but no data rows")
    return df


def _nonfinite_cells(records: list[Any]) -> dict[str, int]:
    """``{field: first record index}`` of NaN/Infinity values (only looked for when the parser met one)."""
    out: dict[str, int] = {}
    for i, r in enumerate(records):
        if isinstance(r, dict):
            for k, v in r.items():
                if isinstance(v, float) and not np.isfinite(v) and k not in out:
                    out[k] = i
    return out


def _exact_ids(df: pd.DataFrame, values: Any, text: Collection[str]) -> pd.DataFrame:
    """``df`` with each id/text column (``text``) that pandas made float64 rebuilt from the parsed JSON values
    (``values(column)``) by :func:`~mrcstats.io.schema.id_text`: a float64 column of JSON integers and
    non-integers (or missing values) holds ``9007199254740993`` as ``9007199254740992.0``, merging two items;
    rebuilt, every value keeps its digits and reads the same whatever its neighbours (a streamed chunk and
    the whole file agree). Other columns (int64, text, objects) are exact already."""
    from mrcstats.io.schema import id_text

    for c in text:
        if c in df.columns and pd.api.types.is_float_dtype(df[c].dtype):
            df[c] = pd.Series([str(v) if type(v) is int else id_text(v) for v in values(c)], index=df.index,
                              dtype=object)   # an int first: most ids of such a column
    return df


def _path_value(record: dict[str, Any], column: str) -> Any:
    """The value of a flattened column (``a.b``) in one JSON record: the key itself, else the nested path."""
    if column in record:
        return record[column]
    v: Any = record
    for part in column.split("."):
        if not isinstance(v, dict) or part not in v:
            return None
        v = v[part]
    return v


def _records_frame(records: Any, src: Source, scalar: Mapping[str, str] | None = None,
                   mapping: Mapping[str, str] | None = None, flatten: bool | None = None) -> pd.DataFrame:
    if isinstance(records, dict):
        # {"data": [...]}/{"records": [...]} or a dict of columns
        for key in ("data", "records", "rows", "samples", "results"):
            if isinstance(records.get(key), list):
                records = records[key]
                break
        else:
            if records and all(isinstance(v, list) for v in records.values()):
                lens = {len(v) for v in records.values()}
                if len(lens) == 1:
                    df = pd.DataFrame(records)
                    return _exact_ids(df, records.__getitem__, text_fields([str(c) for c in records], mapping))
            raise InputError(f"{src.name}: JSON object is not a table; expected a list of records, "
                             f"{{\"data\": [...]}} or a dict of equal-length columns (or pass --format)")
    if not isinstance(records, list):
        raise InputError(f"{src.name}: JSON value is a {type(records).__name__}, expected a list of records")
    if not records:
        raise InputError(f"{src.name}: JSON list is empty")
    bad = next((i for i, r in enumerate(records) if not isinstance(r, dict)), None)
    if bad is not None:
        raise InputError(f"{src.name}: record {bad + 1} is a {type(records[bad]).__name__}, expected a JSON "
                         f"object with named fields")
    if flatten is None:   # nested objects are flattened when the first record has one
        flatten = any(isinstance(v, dict) for v in records[0].values())
    if scalar and flatten:  # flattening would hide an object: look at the records themselves
        check_scalar_fields(records, scalar, src.name)
    df = pd.json_normalize(records, sep=".") if flatten else pd.DataFrame.from_records(records)
    df = _exact_ids(df, lambda c: (_path_value(r, c) for r in records), text_fields([str(c) for c in df.columns],
                                                                                      mapping))
    if scalar and not flatten:  # objects and arrays stay cells of object columns
        for f, k in scalar.items():
            if k in df.columns and df[k].dtype == object:
                bad = df[k].map(type).isin((dict, list)).to_numpy()
                if bad.any():
                    check_scalar_fields([records[int(np.flatnonzero(bad)[0])]], {f: k}, src.name,
                                        int(np.flatnonzero(bad)[0]))
    if src.nonfinite:
        df.attrs["nonfinite"] = _nonfinite_cells(records)
    return df


def read_json_table(src: Source, scalar: Mapping[str, str] | None = None,
                    mapping: Mapping[str, str] | None = None) -> pd.DataFrame:
    """A JSON list of records (nested objects flattened with ``.``; ``scalar``: see :func:`check_scalar_fields`;
    the id and text columns, by name or ``mapping``, keep integers exact: :func:`_exact_ids`)."""
    return _records_frame(src.json(), src, scalar, mapping)


def read_jsonl_table(src: Source, scalar: Mapping[str, str] | None = None,
                     mapping: Mapping[str, str] | None = None, flatten: bool | None = None) -> pd.DataFrame:
    """JSON lines, one record per line (as :func:`read_json_table`; ``flatten``: flatten nested objects or not;
    None: when the first record holds one -- a streamed file's later chunks are given its first record's choice)."""
    return _records_frame(src.json_lines(), src, scalar, mapping, flatten)


#: log fields that hold one value per row: a JSON object or array there is refused, never flattened away
SCALAR_FIELDS: tuple[str, ...] = ("model", "item", "cluster", "trial", "condition", "masking_rate", "correct")


def check_scalar_fields(records: list[Any], fields: Mapping[str, str], source: str, first_row: int = 0) -> None:
    """Refuse a JSON object or array in a field that holds one value per row (``fields``: ``{field: source
    key}``). Flattening ``{"correct": {"value": true}}`` would drop ``correct`` and leave the row invalid
    without a word; the message names the file, row and key, and how to map a nested value."""
    from mrcstats.io.schema import structured_value_error

    keys = {k: f for f, k in fields.items()}
    for i, r in enumerate(records):
        if not isinstance(r, dict):
            continue
        for k, f in keys.items():
            v = r.get(k)
            if isinstance(v, (dict, list)):
                raise structured_value_error(v, source, first_row + i, k, f)


def read_parquet_table(src: Source) -> pd.DataFrame:
    """A Parquet file (dtypes and ``attrs`` of canonical logs are kept)."""
    import pyarrow.parquet as pq
    from pyarrow.lib import ArrowException

    try:
        names = pq.ParquetFile(io.BytesIO(src.data)).schema_arrow.names
        check_unique_columns([str(c) for c in names], src.name)
        table = pq.read_table(io.BytesIO(src.data))
        df = table.to_pandas()      # reads the pandas metadata too (damaged JSON there: ValueError)
    except (ArrowException, OSError, ValueError) as exc:
        if isinstance(exc, InputError):
            raise
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"{src.name}: cannot read Parquet ({msg})") from None
    if len(df) == 0:
        raise InputError(f"{src.name}: Parquet file has no rows")
    nan = nan_cells(table)
    if nan:
        df.attrs["nonfinite"] = nan
    return df


def check_trial_finite(nonfinite: Mapping[str, int], mapping: Mapping[str, str] | None, source: str,
                       offset: int = 0) -> None:
    """Refuse a NaN/Infinity trial that the reader saw before pandas made it look like an empty cell (JSON
    ``NaN``, a Parquet float NaN; ``nonfinite``: ``{column: first row}``, rows counted from ``offset``)."""
    col = (mapping or {}).get("trial", "trial")
    if col in nonfinite:
        from mrcstats.io.schema import where_text

        raise SchemaError(f"{where_text(source, offset + nonfinite[col], col)}trial must be an integer, got NaN or "
                          f"Infinity (not an empty cell); trial is a 0-based repetition index (a whole number "
                          f"0, 1, 2, ...)")


def nan_cells(table: Any) -> dict[str, int]:
    """``{column: first row}`` of float NaN values (not nulls) in an Arrow table or record batch: ``to_pandas``
    makes both NaN, and a NaN trial would then read as an empty one (trial 0)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    out: dict[str, int] = {}
    for name, col in zip(table.column_names, table.columns):
        if pa.types.is_floating(col.type) and col.null_count < len(col):
            nan = pc.fill_null(pc.is_nan(col), False)
            if pc.any(nan).as_py():
                out[str(name)] = int(pc.index(nan, True).as_py())
    return out


def _read_frame(src: Source, fmt: str, mapping: Mapping[str, str] | None, scalar: Mapping[str, str] | None = None,
                flatten: bool | None = None, **delimited: Any) -> pd.DataFrame:
    """One table format read as it is, column names as strings (``delimited``: options of :func:`read_delimited`;
    ``scalar``: JSON keys that must hold one value, :func:`check_scalar_fields`)."""
    if fmt in ("csv", "tsv"):
        df = read_delimited(src, "," if fmt == "csv" else "\t", mapping, **delimited)
    elif fmt == "json":
        df = read_json_table(src, scalar, mapping)
    elif fmt == "jsonl":
        df = read_jsonl_table(src, scalar, mapping, flatten)
    elif fmt == "parquet":
        df = read_parquet_table(src)
    else:  # pragma: no cover - dispatcher guards
        raise InputError(f"{src.name}: {fmt!r} is not a table format")
    df.columns = [str(c) for c in df.columns]
    return df


def read_plain_table(src: Source, fmt: str, mapping: Mapping[str, str] | None = None) -> pd.DataFrame:
    """A plain table as it is (no log schema): for model data. ``NA`` and empty cells are missing (R)."""
    df = _read_frame(src, fmt, mapping, missing=("", "NA"))
    df.attrs.pop("nonfinite", None)
    return apply_mapping(df, mapping, src.name)


def read_table(src: Source, fmt: str, mapping: Mapping[str, str] | None = None,
               flatten: bool | None = None) -> pd.DataFrame:
    """Read a plain table and map its columns; returns a frame with canonical field names (``flatten``: see
    :func:`read_jsonl_table`)."""
    df = _read_frame(src, fmt, mapping, {f: (mapping or {}).get(f, f) for f in SCALAR_FIELDS}, flatten)
    check_trial_finite(df.attrs.pop("nonfinite", None) or {}, mapping, src.name)
    df = apply_mapping(df, mapping, src.name)
    return derive_correct(df, src.name)


def derive_correct(df: pd.DataFrame, source: str | None) -> pd.DataFrame:
    """Add ``correct`` from ``gold`` and ``pred`` when the table has no correctness column; when it has one
    (or a ``score``) and a ``pred`` column, a row without an extracted answer (``pred`` empty or
    ``[invalid]``, :func:`mrcstats.io.schema.unanswered`) is invalid whatever its ``correct`` says.

    A canonical log (a table with every core column, as ``write_log`` and ``ingest`` write it) is taken as
    written: its invalid answers were decided when it was made (an Inspect log's optional ``answer`` in its
    ``pred`` says nothing about validity).

    Without either, the frame is returned as is and the schema check reports every missing field.
    """
    from mrcstats.io.fields import CORE_COLUMNS

    canonical = all(c in df.columns for c in CORE_COLUMNS)
    if "pred" in df.columns and ("correct" in df.columns or "score" in df.columns) and not canonical:
        from mrcstats.io.schema import unanswered

        none = unanswered(df["pred"])
        if not none.any():
            return df
        out = df.copy(deep=False)
        for col in ("correct", "score"):
            if col in out.columns:
                out[col] = out[col].astype(object).mask(none, None)
        return out
    if "correct" in df.columns or not ("gold" in df.columns and "pred" in df.columns):
        return df
    from mrcstats.io.answers import score_series

    out = df.copy(deep=False)
    out["correct"] = score_series(out["pred"], out["gold"])
    return out
