"""Tables read by Arrow into :class:`~mrcstats.io.columns.Columns`, without pandas; the one place a
delimited file's cells become typed columns.

Both readers of a delimited table go through here (issue 28):

* :func:`mrcstats.io.tabular.read_delimited` (the pandas frame every command reads) converts the columns
  :func:`column_kind` classifies with Arrow and leaves only the rest to pandas' parser;
* :func:`read_delimited_columns` (the command line's ``glmer``, which imports no pandas) gives the same
  cells as :class:`~mrcstats.io.columns.Columns`.

Arrow reads every cell as text; :func:`column_kind` then decides each column's type by pandas' inference
rules, on the cases where Arrow's conversion gives exactly what pandas' C parser gives (with
``keep_default_na=False``, ``na_values`` = the missing words):

* ``text``: the log's id and text columns (:data:`~mrcstats.io.fields.STRING_COLUMNS`), read as text
  whatever they look like (ids keep leading zeros);
* ``bool``: no missing cell and every cell one of pandas' true/false words (``True``/``TRUE``/``true``, ...);
* ``int``: every cell plain digits with an optional minus, at most 15 (int64; float64 with NaN where a
  cell is missing: exact either way);
* ``float``: every cell a plain decimal number (digits on both sides of an optional point, an optional
  exponent of one or two digits) with at most 17 significant digits (leading zeros not counted): what
  ``repr`` writes of a double. Arrow's parser and pandas' agree on these to the bit (both round correctly
  there; ``tests/io/test_arrow_columns.py`` checks it on generated values);
* ``words``: every cell one that no number or true/false parser would read (pandas then keeps every cell
  of the column as text, ``str``; a column of words and numbers is ``rest``: pandas reads a missing cell
  there as NaN or as an empty text, depending on the numbers);
* ``rest``: anything else (``1e400``, ``inf``, `` 1``, ``+2``, 18 digits, an all-missing column, ...):
  pandas' parser decides (the pandas reader), or the column is not available without pandas.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from mrcstats.errors import InputError
from mrcstats.io.columns import Column, Columns, text_column
from mrcstats.io.fields import STRING_COLUMNS
from mrcstats.io.source import Source

#: what pandas' C parser reads as booleans (its ``_true_values``/``_false_values``)
TRUE_WORDS, FALSE_WORDS = ["True", "TRUE", "true"], ["False", "FALSE", "false"]
#: the same words as one pattern (a pattern, not a value set: building an Arrow array from Python values makes
#: pyarrow import pandas, which this reader exists to avoid)
_BOOL_WORDS = "^(" + "|".join(TRUE_WORDS + FALSE_WORDS) + ")$"
_TRUE = "^(" + "|".join(TRUE_WORDS) + ")$"
#: integers Arrow converts exactly as pandas does: plain digits with an optional minus, at most 15 of them
#: (exact as float64 too, which pandas gives a column with missing cells)
PLAIN_INT = r"^-?[0-9]{1,15}$"
#: decimals both parsers round alike: digits, an optional fraction, an optional short exponent
PLAIN_FLOAT = r"^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]{1,2})?$"
#: at most this many digits in a ``float`` cell (17 significant digits round-trip every double)
MAX_FLOAT_DIGITS = 17
#: a cell no number parser reads: a character other than digits, sign, point, exponent and blanks, and not
#: one of the words a float parser knows (nan, inf, infinity; any case, signed)
_NOT_A_NUMBER = r"[^0-9eE+\-. \t]"
_NUMBER_WORDS = r"^\s*[-+]?(nan|inf|infinity)\s*$"


def _kernel(name: str, *args: Any, options: Any = None) -> Any:
    """Arrow's compute kernel ``name`` on ``args`` (``pyarrow.compute.call_function``, public; its import builds
    Python wrappers for every kernel, measured in CHANGELOG 'Unreleased', and pandas imports it anyway)."""
    import pyarrow.compute as pc

    return pc.call_function(name, list(args), options)


def _options(kind: str, *args: Any, **kw: Any) -> Any:
    """A kernel's options object (``MatchSubstringOptions``, ...) from ``pyarrow.compute``."""
    import pyarrow.compute as pc

    return getattr(pc, kind)(*args, **kw)


def _matches(col: Any, pattern: str, ignore_case: bool = False) -> Any:
    return _kernel("match_substring_regex", col, options=_options("MatchSubstringOptions", pattern,
                                                                  ignore_case=ignore_case))


def _all(x: Any) -> bool:
    return bool(_kernel("all", x, options=_options("ScalarAggregateOptions")).as_py())


def _any(x: Any) -> bool:
    return bool(_kernel("any", x, options=_options("ScalarAggregateOptions")).as_py())


def _max(x: Any) -> Any:
    return _kernel("max", x, options=_options("ScalarAggregateOptions")).as_py()


def _cast(x: Any, target: Any) -> Any:
    return _kernel("cast", x, options=_options("CastOptions").safe(target))


def check_unique_columns(cols: list[str], source: str) -> None:
    """Refuse a table whose header names a column twice (which one would be the data?)."""
    seen: set[str] = set()
    dups = []
    for c in cols:
        if c in seen and c not in dups:
            dups.append(c)
        seen.add(c)
    if dups:
        pos = [i + 1 for i, c in enumerate(cols) if c == dups[0]]
        raise InputError(f"{source}: column {dups[0]!r} appears {len(pos)} times in the header (columns "
                         f"{', '.join(map(str, pos))})" + (f"; also {', '.join(map(repr, dups[1:]))}" if dups[1:]
                                                           else "")
                         + "; rename or remove the repeated columns so each name is used once")


def header(src: Source, delimiter: str) -> list[str]:
    """The header's column names, checked: present and each used once."""
    from mrcstats.io.formats.content import header_columns

    cols = header_columns(src, delimiter)
    if not cols or not any(c.strip() for c in cols):
        raise InputError(f"{src.name}: no header line; the first line must name the columns")
    check_unique_columns(cols, src.name)
    return cols


def text_fields(cols: Sequence[str], mapping: Any = None) -> list[str]:
    """The source columns read as text whatever they look like: the log's id and text fields, by their own
    name or mapped to one (``mapping``: ``{field: source column}``)."""
    mapped_fields = set((mapping or {}).keys())
    want = {c for c in cols if c in STRING_COLUMNS and c not in mapped_fields}
    want |= {col for fld, col in (mapping or {}).items() if fld in STRING_COLUMNS}
    return [c for c in cols if c in want]


def read_text_table(src: Source, delimiter: str, cols: list[str], missing: tuple[str, ...]) -> Any:
    """Every column as Arrow text (``large_string``; ``missing`` cells null), or None when Arrow cannot read
    the file as its header says (a ragged row, a header read differently, no data rows): the pandas reader
    then reads it and words the error."""
    import pyarrow as pa
    import pyarrow.csv as pv

    try:
        table = pv.read_csv(
            pa.py_buffer(src.data),
            parse_options=pv.ParseOptions(delimiter=delimiter, newlines_in_values=True),
            convert_options=pv.ConvertOptions(
                column_types={c: pa.large_string() for c in cols}, null_values=list(missing),
                strings_can_be_null=True, quoted_strings_can_be_null=True))
    except (pa.ArrowException, ValueError, OSError):
        return None
    if table.column_names != cols or table.num_rows == 0:
        return None
    return table


def column_kind(name: str, col: Any, text: Sequence[str]) -> str:
    """``text``, ``bool``, ``int``, ``float``, ``words`` or ``rest`` (see the module docstring) for one
    Arrow text column."""
    if name in text:
        return "text"
    if col.null_count == len(col):
        return "rest"
    # the first cell rules kinds out with one Python regex each (a column is of a kind only if every cell
    # is): only the kinds it allows are checked over the whole column
    first = col[0].as_py() if col.null_count == 0 else None

    def may(pattern: str, flags: int = 0) -> bool:
        return first is None or re.search(pattern, first, flags) is not None

    if col.null_count == 0 and may(_BOOL_WORDS) and _all(_matches(col, _BOOL_WORDS)):
        return "bool"
    if may(PLAIN_INT) and _all(_matches(col, PLAIN_INT)):
        return "int"
    if may(PLAIN_FLOAT) and _all(_matches(col, PLAIN_FLOAT)) and _max_digits(col) <= MAX_FLOAT_DIGITS:
        return "float"
    if not (may(_NOT_A_NUMBER) and (first is None or not re.search(_NUMBER_WORDS, first, re.IGNORECASE))
            and (first is None or not re.search(_BOOL_WORDS, first))):
        return "rest"
    odd = _kernel("and", _matches(col, _NOT_A_NUMBER),
                  _kernel("invert", _matches(col, _NUMBER_WORDS, ignore_case=True)))
    odd = _kernel("and", odd, _kernel("invert", _matches(col, _BOOL_WORDS)))
    return "words" if _all(odd) else "rest"


def _bits(buf: Any, offset: int, n: int) -> np.ndarray:
    """``n`` bits of an Arrow bitmap from bit ``offset``, as bools."""
    return np.unpackbits(np.frombuffer(buf, np.uint8), bitorder="little")[offset:offset + n].astype(bool)


def to_numpy(arr: Any, dtype: Any) -> tuple[np.ndarray, np.ndarray | None]:
    """The values (a copy) of a primitive Arrow array (bool, or fixed-width numbers of ``dtype``) and its
    validity (True = present; None when no cell is null), read from its buffers: pyarrow's own
    ``to_numpy`` imports pandas (to check for its types), which the pandas-free reader must not."""
    import pyarrow as pa

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    validity, data = arr.buffers()[:2]
    n, off = len(arr), arr.offset
    if dtype is bool:
        vals = _bits(data, off, n)
    else:
        size = np.dtype(dtype).itemsize
        vals = np.frombuffer(data, dtype=dtype, count=n, offset=off * size).copy()
    valid = _bits(validity, off, n) if arr.null_count and validity is not None else None
    return vals, valid


def _floats(arr: Any) -> np.ndarray:
    """A numeric Arrow array as float64, NaN where a cell is null."""
    import pyarrow as pa

    vals, valid = to_numpy(_cast(arr, pa.float64()), np.float64)
    if valid is not None:
        vals[~valid] = np.nan
    return vals


def _codes(indices: Any) -> np.ndarray:
    """Dictionary indices (any integer width) as int64 codes, -1 where a cell is null."""
    import pyarrow as pa

    t = indices.type
    vals, valid = to_numpy(indices, np.dtype(f"{'' if pa.types.is_signed_integer(t) else 'u'}int{t.bit_width}"))
    codes = vals.astype(np.int64)
    if valid is not None:
        codes[~valid] = -1
    return codes


def _max_digits(col: Any) -> int:
    """The most significant digits of a cell of a column of plain decimals (:data:`PLAIN_FLOAT`): digits of the
    mantissa after the sign, leading zeros and the point (string kernels, no regex count: it was 100 ms on
    70,000 cells)."""
    import pyarrow as pa

    if _max(_kernel("utf8_length", col)) <= MAX_FLOAT_DIGITS:      # no cell is longer than that
        return MAX_FLOAT_DIGITS
    mantissa = col
    if _any(_matches(col, "[eE]")):
        mantissa = _kernel("replace_substring_regex", col,
                           options=_options("ReplaceSubstringOptions", "[eE].*$", ""))
    trimmed = _kernel("ascii_ltrim", mantissa, options=_options("TrimOptions", "-0."))   # ASCII: PLAIN_FLOAT
    point = _kernel("match_substring", trimmed, options=_options("MatchSubstringOptions", "."))
    digits = _kernel("subtract", _kernel("utf8_length", trimmed), _cast(point, pa.int32()))
    return int(_max(digits) or 0)


def convert(kind: str, col: Any) -> np.ndarray:
    """The NumPy values of a ``bool``, ``int`` (float64, NaN missing) or ``float`` column."""
    import pyarrow as pa

    if kind == "bool":
        return to_numpy(_matches(col, _TRUE), bool)[0]
    return _floats(_cast(col, pa.int64()) if kind == "int" else col)


def _coded(col: Any, dtype: str) -> Column:
    """A text column as codes with code-point sorted levels (Arrow's dictionary encoding)."""
    import pyarrow as pa

    enc = _kernel("dictionary_encode", col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col)
    return text_column(_codes(enc.indices), enc.dictionary.to_pylist(), dtype=dtype)


def read_delimited_columns(src: Source, delimiter: str, missing: tuple[str, ...] = ("", "NA"),
                           mapping: Any = None) -> tuple[Columns, tuple[str, ...]] | None:
    """A CSV/TSV as :class:`~mrcstats.io.columns.Columns` without pandas, and the names of its ``rest``
    columns (left out: only pandas' parser can say what they hold). None when Arrow cannot read the file
    (the pandas reader then reads it and words the error). The cells are those the pandas reader gives:
    the same kinds, text ``string`` (id fields) or ``str`` (words)."""
    cols = header(src, delimiter)
    table = read_text_table(src, delimiter, cols, missing)
    if table is None:
        return None
    text = text_fields(cols, mapping)
    out: dict[str, Column] = {}
    rest = []
    for name, col in zip(cols, table.columns):
        kind = column_kind(name, col, text)
        if kind in ("text", "words"):
            out[name] = _coded(col, "string" if kind == "text" else "str")
        elif kind == "rest":
            rest.append(name)
        else:
            vals = convert(kind, col)
            out[name] = Column(kind, vals, dtype={"bool": "bool", "float": "float64"}.get(
                kind, "float64" if col.null_count else "int64"))
    names = tuple(c for c in cols if c in out)
    return Columns(names, table.num_rows, out), tuple(rest)


def read_parquet_columns(src: Source, needed: Sequence[str] | None = None) -> tuple[Columns, tuple[str, ...]] | None:
    """A Parquet file as :class:`~mrcstats.io.columns.Columns` without pandas, and its ``rest`` columns (types
    this reader leaves to pandas: timestamps, decimals, nested values, a bool column with nulls that no
    pandas metadata calls ``boolean``, ...). The cells are those :func:`mrcstats.io.tabular.read_parquet_table`
    gives (``Table.to_pandas()``): text as text (codes with levels sorted by code point), numbers as numbers
    (nulls NaN), bools, dictionary columns as categoricals in their dictionary's order. None when the pandas
    reader must read the file (no rows, an index stored in it, pandas metadata that does not parse, a file
    Arrow cannot read: the pandas reader words the error). ``ParquetFile.read`` and not ``pq.read_table``:
    the latter imports ``pyarrow.dataset`` and with it pandas.

    ``needed``: read only these columns (and ``correct`` unless it is Arrow ``bool``: the only column
    :func:`~mrcstats.io.reader.read_data` checks whatever the fit uses, and a bool one always passes); a
    canonical log's text columns (responses, judge outputs) are then never decoded. None: every column."""
    import io
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(io.BytesIO(src.data))
        schema = pf.schema_arrow
        check_unique_columns([str(c) for c in schema.names], src.name)
        if needed is None:
            table = pf.read()
        else:
            want = set(needed)
            table = pf.read(columns=[c for c in schema.names if c in want or (
                c == "correct" and not pa.types.is_boolean(schema.field(c).type))])
        meta = json.loads(table.schema.metadata[b"pandas"]) if b"pandas" in (table.schema.metadata or {}) else {}
    except InputError:
        raise
    except (pa.ArrowException, OSError, ValueError, KeyError, TypeError):
        return None
    index = meta.get("index_columns") or []
    if table.num_rows == 0 or any(not isinstance(i, dict) or i.get("kind") != "range" for i in index):
        return None
    types = {str(c.get("name")): str(c.get("numpy_type")) for c in meta.get("columns", []) if isinstance(c, dict)}
    out: dict[str, Column] = {}
    rest = []
    for name, col in zip(table.column_names, table.columns):
        name, t = str(name), col.type
        dtype = types.get(name, str(t))
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            out[name] = _coded(col, dtype if dtype in ("string", "str", "object") else "object")
        elif pa.types.is_dictionary(t) and (pa.types.is_string(t.value_type) or pa.types.is_large_string(t.value_type)):
            arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
            if isinstance(arr, pa.ChunkedArray):       # several dictionaries could not be unified
                rest.append(name)
                continue
            out[name] = Column("category", _codes(arr.indices), tuple(arr.dictionary.to_pylist()), dtype="category")
        elif pa.types.is_boolean(t):
            if col.null_count and dtype != "boolean":      # pandas: an object column of True/False/None
                rest.append(name)
                continue
            vals, valid = to_numpy(col, bool)
            if valid is not None:
                vals &= valid
            out[name] = Column("bool", vals, mask=None if valid is None else ~valid, dtype=dtype)
        elif pa.types.is_integer(t) or pa.types.is_floating(t):
            out[name] = Column("int" if pa.types.is_integer(t) else "float", _floats(col), dtype=dtype)
        else:
            rest.append(name)
    names = tuple(c for c in map(str, table.column_names) if c in out)
    return Columns(names, table.num_rows, out), tuple(rest)


def read_table_columns(src: Source, fmt: str, needed: Sequence[str]) -> Columns | None:
    """A plain CSV, TSV or Parquet table (a file :func:`~mrcstats.io.source.load_source` read) without pandas: the rows
    and cells of :func:`mrcstats.io.reader.read_data` for the columns in ``needed``, or None when this
    reader cannot promise them (the caller then gives the file to :func:`~mrcstats.io.reader.read_data`,
    ``loaded=[src]``, which words every error).

    None for: a file whose ``fmt`` is not ``csv``, ``tsv`` or ``parquet``, one
    Arrow cannot read, a ``needed`` column only pandas can type (``rest``), and a ``correct`` column that is
    not 0/1 or true/false in every row (words, missing cells: :func:`~mrcstats.io.schema.coerce_correct`
    and :func:`~mrcstats.io.schema.apply_invalid` decide those; a graded log's rows, a score without a
    correct, are among them; a Parquet file's ``correct`` of Arrow type bool is not read when ``needed`` does
    not name it, as in a graded log fitted by ``lmer``). A ``correct`` column of 0/1 or true/false becomes a
    bool column, as ``coerce_correct`` makes it. ``attrs`` are ``read_data``'s (format, sources, no skipped
    rows). A Parquet file gives only the ``needed`` columns (a CSV/TSV all it can type).

    ``fmt``: the file's format as :func:`~mrcstats.io.detect.detect_format` names it (the caller detects: this
    module sits below the format registry, which reads tables through it)."""
    if fmt in ("csv", "tsv"):
        got = read_delimited_columns(src, "," if fmt == "csv" else "\t", ("", "NA"))
    elif fmt == "parquet":
        got = read_parquet_columns(src, needed)
    else:
        return None
    if got is None:
        return None
    cols, rest = got
    if any(c in rest for c in needed) or "correct" in rest:
        return None
    data = dict(cols.cols)
    if "correct" in data:
        c = data["correct"]
        if c.kind == "bool" and (c.mask is None or not c.mask.any()):
            vals = c.values
        elif c.numeric and bool(np.all((c.values == 0.0) | (c.values == 1.0))):   # no NaN either
            vals = c.values == 1.0
        else:
            return None
        data["correct"] = Column("bool", vals, dtype="boolean")
    return Columns(cols.names, cols.nrows, data,
                   attrs={"skipped": {}, "format": fmt, "sources": [str(src.path)]})
