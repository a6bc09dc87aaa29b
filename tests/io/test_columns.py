"""mrcstats.io.columns: the design's one column view of a table (issue 28).

A pandas frame's columns convert to the kinds the design reads (float, int, bool, text, category), text
levels sorted by code point as R sorts under LC_COLLATE=C; codes map back to the values; rows taken keep
their labels for messages; Columns read without pandas convert back to the pandas reader's columns.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcstats.io.columns import Column, Columns, as_columns, column_from_series, text_column


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(max_size=4)), min_size=1, max_size=30))
def test_text_codes_map_back_to_the_values_with_sorted_levels(values):
    col = column_from_series(pd.Series(values, dtype=object))
    assert col.kind == "text"
    assert list(col.levels) == sorted({v for v in values if v is not None})
    back = [None if c < 0 else col.levels[c] for c in col.values]
    assert back == values


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(-1, 5), min_size=1, max_size=30), st.lists(st.text(max_size=3), min_size=6,
                                                                        max_size=6, unique=True))
def test_text_column_drops_unused_dictionary_values(idx, dictionary):
    col = text_column(np.array(idx), dictionary)
    back = [None if c < 0 else col.levels[c] for c in col.values]
    assert back == [None if i < 0 else dictionary[i] for i in idx]
    assert list(col.levels) == sorted({dictionary[i] for i in idx if i >= 0})


def test_kinds_of_pandas_columns():
    df = pd.DataFrame({"f": [1.5, np.nan, 2.0], "i": [1, 2, 3], "I": pd.array([1, None, 3], dtype="Int64"),
                       "b": [True, False, True], "B": pd.array([True, None, False], dtype="boolean"),
                       "s": pd.array(["b", "a", None], dtype="string"),
                       "c": pd.Categorical(["x", "y", "x"], categories=["y", "x", "z"])})
    cols = Columns.from_pandas(df)
    assert [cols[n].kind for n in df.columns] == ["float", "int", "int", "bool", "bool", "text", "category"]
    assert np.isnan(cols["I"].values[1]) and cols["I"].missing().tolist() == [False, True, False]
    assert cols["B"].missing().tolist() == [False, True, False]
    assert cols["s"].levels == ("a", "b") and cols["s"].values.tolist() == [1, 0, -1]
    assert cols["c"].levels == ("y", "x", "z") and cols["c"].values.tolist() == [1, 0, 1]
    assert cols.to_pandas() is df
    assert as_columns(df).names == tuple(df.columns) and as_columns(cols) is cols
    with pytest.raises(TypeError):
        as_columns([1, 2])


def test_rows_taken_keep_their_labels():
    df = pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0]}, index=[10, 11, 12, 13])
    view = Columns.from_pandas(df).take(np.array([False, True, False, True]))
    assert len(view) == 2 and view.label(1) == 13
    plain = Columns(("x",), 4, {"x": Column("float", np.arange(4.0))}).take(np.array([0, 2]))
    assert plain.label(1) == 2 and type(plain.label(1)) is int


def test_columns_read_without_pandas_convert_back_to_the_pandas_columns():
    cols = Columns(("t", "n", "k", "b"), 3, {
        "t": text_column(np.array([1, 0, -1]), ["a", "b"]),
        "n": Column("float", np.array([0.5, np.nan, 2.0]), dtype="float64"),
        "k": Column("int", np.array([1.0, 2.0, 3.0]), dtype="int64"),
        "b": Column("bool", np.array([True, False, True]), dtype="bool")})
    df = cols.to_pandas()
    assert str(df["t"].dtype) == "string" and df["t"].tolist()[:2] == ["b", "a"] and df["t"].isna().tolist()[2]
    assert df["k"].dtype == np.int64 and df["b"].dtype == bool and np.isnan(df["n"].iloc[1])
    assert Columns.from_pandas(df)["t"].levels == cols["t"].levels
