"""A table as NumPy columns, without pandas: what the model design reads (issue 28).

:class:`Columns` is the one column view of a table that :func:`mrcstats.models.design.build_design` works
on. It comes from two places:

* :func:`mrcstats.io.arrow_columns.read_table_columns`: a CSV/TSV or Parquet table read by Arrow straight into
  NumPy arrays and text codes (the command line's ``glmer`` reads its data this way, with no pandas import);
* :meth:`Columns.from_pandas`: a pandas frame (the Python API), each column converted when it is first
  used, by :func:`column_from_series`, the one adapter from a pandas dtype to a column kind.

A :class:`Column` has one of five kinds, each with the meaning the design gives it (R's ``model.frame``):

| kind | ``values`` | as pandas had it |
| --- | --- | --- |
| float | float64, NaN missing | a float column |
| int | float64, NaN missing (whole numbers, < 2**53) | int64 (float64 when a cell is missing) |
| bool | bool (missing cells False, see ``mask``) | bool / nullable boolean |
| text | int64 codes into ``levels`` (sorted by code point, R under ``LC_COLLATE=C``), -1 missing | text (object, ``string``, ``str``) |
| category | int64 codes into ``levels`` (the categorical's own order), -1 missing | a pandas categorical |

``dtype`` keeps the pandas dtype's name (``string``, ``float64``, ...) so that messages read alike
whichever way the table came in.
"""
from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True, eq=False)
class Column:
    """One column: ``kind`` (see the module docstring), ``values``, ``levels`` of a text or category column,
    ``mask`` (True = missing) of a bool column, and the pandas ``dtype`` name for messages."""

    kind: str
    values: np.ndarray
    levels: tuple[str, ...] = ()
    mask: np.ndarray | None = None
    dtype: str = ""

    @property
    def numeric(self) -> bool:
        """A number column (int or float; bool is not numeric, as in the design's rules)."""
        return self.kind in ("float", "int")

    @property
    def coded(self) -> bool:
        """Integer codes into ``levels`` (text or category)."""
        return self.kind in ("text", "category")

    def missing(self) -> np.ndarray:
        """True where the cell is missing (NaN, an empty or ``NA`` cell, pandas' NA)."""
        if self.numeric:
            return np.isnan(self.values)
        if self.coded:
            return self.values < 0
        return np.zeros(len(self.values), bool) if self.mask is None else self.mask

    def floats(self) -> np.ndarray:
        """The values as float64 (numbers and bools; NaN where missing)."""
        if self.kind == "bool":
            out = self.values.astype(float)
            if self.mask is not None and self.mask.any():
                out[self.mask] = np.nan
            return out
        return self.values if self.values.dtype == np.float64 else self.values.astype(float)

    def take(self, rows: np.ndarray) -> Column:
        """The column at ``rows`` (a boolean mask or positions); levels are kept."""
        return Column(self.kind, self.values[rows], self.levels,
                      None if self.mask is None else self.mask[rows], self.dtype)

    def to_pandas(self, index: Any = None) -> Any:
        """The column as the pandas reader gives it (``string`` text, int64 or float64, bool, categorical)."""
        import pandas as pd

        if self.kind == "float":
            return pd.Series(self.values, index=index, dtype="float64")
        if self.kind == "int":
            miss = np.isnan(self.values)
            return pd.Series(self.values if miss.any() else self.values.astype(np.int64), index=index)
        if self.kind == "bool":
            if self.mask is not None and self.mask.any():
                arr = pd.array(self.values, dtype="boolean")
                arr[self.mask] = pd.NA
                return pd.Series(arr, index=index)
            return pd.Series(self.values, index=index, dtype=bool)
        cat = pd.Categorical.from_codes(self.values, categories=pd.Index(list(self.levels), dtype=object))
        if self.kind == "category":
            return pd.Series(cat, index=index)
        from mrcstats.io.schema import STRING_DTYPE

        return pd.Series(np.asarray(cat, dtype=object), index=index, dtype=STRING_DTYPE)


def text_column(indices: np.ndarray, dictionary: Sequence[str], dtype: str = "string") -> Column:
    """A text column from dictionary codes (-1 missing) and the dictionary's values, its levels re-ordered by
    code point (R's sort under ``LC_COLLATE=C``, Python's ``sorted``); unused dictionary values dropped."""
    labels = list(dictionary)
    codes = np.asarray(indices, dtype=np.int64)
    used = np.bincount(codes[codes >= 0], minlength=len(labels)) > 0 if len(labels) else np.zeros(0, bool)
    keep = [i for i in sorted(range(len(labels)), key=labels.__getitem__) if used[i]]
    rank = np.full(len(labels) + 1, -1, dtype=np.int64)   # the last slot maps a missing cell (-1) to -1
    rank[keep] = np.arange(len(keep))
    return Column("text", rank[codes], tuple(labels[i] for i in keep), dtype=dtype)


def column_from_series(s: Any) -> Column:
    """The one adapter from a pandas Series to a :class:`Column` (the kinds of the module docstring).

    Text (object, ``string``, ``str``) is coded with levels sorted by code point; an object column of
    non-text values (numbers and words mixed) is coded on ``str()`` of its values, as the design always did."""
    import pandas as pd

    dt = s.dtype
    name = str(dt)
    if pd.api.types.is_bool_dtype(dt):
        miss = np.asarray(s.isna(), dtype=bool)
        vals = np.asarray(s.fillna(False) if miss.any() else s, dtype=bool)
        return Column("bool", vals, mask=miss if miss.any() else None, dtype=name)
    if isinstance(dt, pd.CategoricalDtype):
        cats = s.cat.categories
        text = pd.api.types.infer_dtype(cats, skipna=False) == "string"     # (one pass in C, no Python loop)
        lv = tuple(cats.to_numpy(dtype=object).tolist() if text else (str(c) for c in cats))
        return Column("category", np.asarray(s.cat.codes, dtype=np.int64), lv, dtype=name)
    if pd.api.types.is_numeric_dtype(dt):
        kind = "int" if pd.api.types.is_integer_dtype(dt) else "float"
        vals = s.to_numpy(dtype=np.float64, na_value=np.nan) if s.dtype != np.float64 else s.to_numpy()
        return Column(kind, np.asarray(vals, dtype=np.float64), dtype=name)
    if dt == object and pd.api.types.infer_dtype(s, skipna=True) not in ("string", "empty"):
        miss = np.asarray(s.isna(), dtype=bool)
        s = s.astype(str)
        codes, uniq = pd.factorize(s, sort=False)
        codes = np.where(miss, -1, codes)
    else:
        codes, uniq = pd.factorize(s, sort=False)
    labels = np.asarray(uniq, dtype=object).tolist()
    if not all(type(x) is str for x in labels):
        labels = [str(x) for x in labels]
    return text_column(codes, labels, dtype=name)


@dataclass(frozen=True, eq=False)
class Columns:
    """A table as :class:`Column` objects: ``names`` in order, ``nrows`` rows, ``index`` the row labels that
    messages show (None: positions 0..n-1), ``attrs`` what the reader knows (format, sources, skipped rows).

    Made by :mod:`mrcstats.io.arrow_columns` (every column converted) or by :meth:`from_pandas` (each column
    converted when first used)."""

    names: tuple[str, ...]
    nrows: int
    cols: dict[str, Column] = field(default_factory=dict)
    index: Any = None
    attrs: Mapping[str, Any] = field(default_factory=dict)
    source: Any = field(default=None, repr=False)     # the pandas frame behind from_pandas

    @classmethod
    def from_pandas(cls, df: Any) -> Columns:
        """A view of a pandas frame; its index labels the rows in messages."""
        import pandas as pd

        plain = isinstance(df.index, pd.RangeIndex) and df.index.start == 0 and df.index.step == 1
        return cls(tuple(str(c) for c in df.columns), len(df), {}, None if plain else df.index, {}, df)

    @property
    def columns(self) -> tuple[str, ...]:
        return self.names

    def __len__(self) -> int:
        return self.nrows

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def __getitem__(self, name: str) -> Column:
        col = self.cols.get(name)
        if col is None:
            if self.source is None or name not in self.names:
                raise KeyError(name)
            col = self.cols[name] = column_from_series(self.source[name])
        return col

    def label(self, i: int) -> Any:
        """The label of row ``i`` as messages show it (the pandas index label, or the position)."""
        if self.index is None:
            return int(i)
        label = self.index[int(i)]
        return label.item() if isinstance(self.index, np.ndarray) else label

    def row_text(self, i: int) -> str:
        """Row ``i`` as a message names it: ``data row N`` for a table numbered by position (``index`` None, or
        the positions :meth:`take` keeps), 1-based as a file counts its rows after the header; ``row LABEL`` for
        a pandas frame with an index of its own."""
        if self.index is not None and not isinstance(self.index, np.ndarray):
            return f"row {self.label(i)!r}"
        return f"data row {(int(i) if self.index is None else int(self.index[int(i)])) + 1:,}"

    def select(self, names: Iterable[str]) -> Columns:
        """These columns only, in this order (converted now)."""
        names = tuple(names)
        return Columns(names, self.nrows, {n: self[n] for n in names}, self.index, self.attrs)

    def take(self, rows: np.ndarray) -> Columns:
        """The rows at a boolean mask (labels kept: row 7 of the table is still row 7 in messages)."""
        rows = np.asarray(rows)
        pos = np.flatnonzero(rows) if rows.dtype == bool else rows
        index = pos if self.index is None else self.index[pos]
        return Columns(self.names, len(pos), {n: self[n].take(pos) for n in self.names}, index, self.attrs)

    def to_pandas(self) -> Any:
        """The pandas frame of these columns (the one the pandas reader gives for the same file)."""
        import pandas as pd

        if self.source is not None:       # a view of a pandas frame: that frame
            return self.source
        index = None
        if self.index is not None:
            index = self.index if isinstance(self.index, pd.Index) else pd.Index(self.index)
        df = pd.DataFrame({n: self[n].to_pandas(index) for n in self.names}, columns=list(self.names),
                          index=index)
        df.attrs = dict(self.attrs)
        return df


def as_columns(data: Any) -> Columns:
    """``data`` as :class:`Columns`: itself, or a view of a pandas frame."""
    if isinstance(data, Columns):
        return data
    pd = sys.modules.get("pandas")
    if pd is not None and isinstance(data, pd.DataFrame):
        return Columns.from_pandas(data)
    raise TypeError(f"expected a pandas DataFrame or Columns, got {type(data).__name__}")


def as_frame(data: Any) -> Any:
    """``data`` as a pandas frame: Columns converted (:meth:`Columns.to_pandas`), anything else as it is. For
    what works on a fitted model's data with pandas (emmeans, predict, drop1) when the fit read Columns."""
    return data.to_pandas() if isinstance(data, Columns) else data


def is_columns(data: Any) -> bool:
    """True for :class:`Columns` (a table read without pandas), False for a pandas frame or anything else: the
    one place outside the backends where a caller learns which kind of in-memory table it holds."""
    return isinstance(data, Columns)


def in_memory(data: Any) -> bool:
    """A table in memory: a pandas frame, or :class:`Columns` read without pandas."""
    pd = sys.modules.get("pandas")      # no pandas loaded: no pandas frame exists
    return isinstance(data, Columns) or (pd is not None and isinstance(data, pd.DataFrame))

