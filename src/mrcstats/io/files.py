"""Reading the other inputs (item tables, task files, texts, JSON documents) the way logs are read.

Every file mrcstats reads goes through :mod:`mrcstats.io`: these helpers load a file with
:func:`mrcstats.io.source.load_source` (gzip, BOMs, UTF-16, Git LFS pointers, UTF-8
check with the byte offset, one :class:`~mrcstats.errors.InputError` per problem) and
hand back text, a JSON value (a repeated key is refused) or a table of strings (a
repeated column name is refused), so the features, query, task and MskCal code never
opens files itself.
"""
from __future__ import annotations

import io
import os
from typing import Any

import pandas as pd

from mrcstats.errors import InputError
from mrcstats.io.source import Source, load_source


def read_text(path: str | os.PathLike, what: str = "") -> str:
    """A UTF-8 text file (gzip, BOM and UTF-16 handled) as one string."""
    src = _load(path, what)
    if src.binary:
        raise InputError(f"{_name(src, what)}: a binary file (Parquet or zip), expected text")
    return src.text()


def read_json(path: str | os.PathLike, what: str = "") -> Any:
    """One JSON document; errors name the line and column, a repeated key in an object is refused."""
    src = _load(path, what)
    if src.binary:
        raise InputError(f"{_name(src, what)}: a binary file (Parquet or zip), expected JSON")
    return src.json()


def read_string_table(path: str | os.PathLike, what: str = "", missing: tuple[str, ...] = ()) -> pd.DataFrame:
    """A CSV/TSV (delimiter by content) or Parquet table with every CSV cell as text.

    Only the cells in ``missing`` become missing values (none by default: an empty cell is ``""``).
    """
    from mrcstats.io.formats.content import first_line, header_columns
    from mrcstats.io.tabular import check_unique_columns, read_parquet_table

    src = _load(path, what)
    if src.binary:
        if src.data[:4] != b"PAR1":
            raise InputError(f"{_name(src, what)}: a zip archive, expected a CSV/TSV or Parquet table")
        return read_parquet_table(src)
    line = first_line(src.data)
    sep = "\t" if line.count("\t") > line.count(",") else ","
    cols = header_columns(src, sep)
    check_unique_columns(cols, src.name)
    try:
        return pd.read_csv(io.BytesIO(src.data), sep=sep, dtype=str, keep_default_na=False,
                           na_values=list(missing) or None)
    except pd.errors.EmptyDataError:
        raise InputError(f"{_name(src, what)}: file is empty") from None
    except (pd.errors.ParserError, ValueError) as exc:
        msg = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        raise InputError(f"{_name(src, what)}: cannot parse as {'TSV' if sep == chr(9) else 'CSV'}: {msg}") \
            from None


def _load(path: Any, what: str) -> Source:
    try:
        return load_source(path)
    except InputError as exc:
        if what:
            raise InputError(f"{what} {exc}") from None
        raise


def _name(src: Source, what: str) -> str:
    return f"{what} {src.name}" if what else src.name
