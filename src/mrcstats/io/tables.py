"""Reader for tables of counts (``fisher``/``chisq`` input): first row column labels, first column row labels.

The file is loaded like every other input (:func:`mrcstats.io.source.load_source`: gzip,
BOMs, UTF-16, Git LFS pointers, UTF-8 check); the delimiter is a comma, or a tab when the
header has more tabs than commas. Every cell must be a whole number in ``0..2**53``
(larger counts have no exact float and no exact test); anything else raises
:class:`~mrcstats.errors.InputError` naming the file, line, row and column.
"""
from __future__ import annotations

import io
import math
from typing import Any

import numpy as np
import pandas as pd

from mrcstats.errors import InputError

#: the largest count a cell may hold (every integer up to it is exact as a float)
MAX_COUNT = 2**53


def read_count_table(path: Any) -> pd.DataFrame:
    """Read a table of counts (see the module docstring) as an int64 DataFrame with string labels."""
    from mrcstats.io.formats.content import header_columns
    from mrcstats.io.source import load_source
    from mrcstats.io.tabular import check_unique_columns

    src = load_source(path)
    if src.binary:
        raise InputError(f"{src.name}: a binary file (Parquet or zip); expected a CSV table of counts")
    cols = header_columns(src)
    sep = "\t" if len(header_columns(src, "\t")) > len(cols) else ","
    cols = header_columns(src, sep)
    check_unique_columns(cols[1:], src.name)
    try:
        df = pd.read_csv(io.BytesIO(src.data), sep=sep, dtype=str, keep_default_na=False, index_col=0)
    except (ValueError, pd.errors.ParserError) as exc:
        msg = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        raise InputError(f"{src.name}: cannot read as CSV ({msg})") from None
    if df.shape[0] < 1 or df.shape[1] < 1:
        raise InputError(f"{src.name}: the table needs a header row of column labels, then one row per "
                         "category starting with its label")
    counts = np.zeros(df.shape, dtype=np.int64)
    for i, r in enumerate(df.index):
        for j, c in enumerate(df.columns):
            v = str(df.iat[i, j]).strip()
            try:
                f = float(v)
                ok = math.isfinite(f) and f >= 0 and f == math.floor(f)
            except ValueError:
                ok = False
            if not ok:
                raise InputError(f"{src.name}: line {i + 2}, row {str(r)!r}, column {str(c)!r} holds {v!r}; "
                                 "every cell must be a non-negative whole number (a count)")
            if f > MAX_COUNT:
                raise InputError(f"{src.name}: line {i + 2}, row {str(r)!r}, column {str(c)!r} holds {v}, more "
                                 f"than the largest exact count 2^53 = {MAX_COUNT}; check the table")
            counts[i, j] = int(f)
    return pd.DataFrame(counts, index=[str(x) for x in df.index], columns=[str(x) for x in df.columns])
