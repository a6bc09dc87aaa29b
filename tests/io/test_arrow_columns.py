"""The Arrow CSV/TSV reader gives pandas' frame exactly: same columns, dtypes, values and missing cells.

``mrcstats.io.tabular.read_delimited`` reads through Arrow (:func:`_delimited_arrow`) and falls back to
pandas' C parser (:func:`_delimited_pandas`, the reference) when Arrow cannot promise pandas' result. The
property test writes tables from awkward cells (numbers pandas and Arrow might read apart, words, empty
and quoted cells, embedded delimiters and newlines, ragged rows) and compares the two readers.
"""
from __future__ import annotations

import csv
import io

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcstats.errors import InputError
from mrcstats.io import arrow_columns, tabular
from mrcstats.io.formats.content import header_columns
from mrcstats.io.source import Source

CELLS = ["0", "1", "-1", "+1", "007", " 1", "1 ", "2.5", "1e5", "1.0", "-0", "0.1", "3.14159265358979323846",
         "9223372036854775807", "9223372036854775808", "18446744073709551616", "", "NA", "nan", "NaN", "inf",
         "-inf", "Infinity", "True", "true", "TRUE", "False", "false", "yes", "t", "2024-01-01",
         "2024-01-01T10:00:00", "12:30", "a,b", 'say "hi"', "two\nlines", "x", "é", "1,000", "0x10", "None",
         "-1.25e-3", "1.5E+10", "12345.678901234567", "0.30000000000000004", "2.", ".5", "1e-400", "1e400"]
#: cells of the tables Arrow converts itself (plain integers, true/false words, text)
SIMPLE = ["0", "1", "", "007", "-3", "True", "false", "x", "NA"]
NAMES = ["model", "item", "correct", "score", "trial", "masking_rate", "response", "extra", "n", "flag"]


def _frames(data: bytes, delimiter: str, missing=("",)):
    src = Source("t.csv", data)
    cols = header_columns(src, delimiter)
    text = arrow_columns.text_fields(cols, None)
    try:
        ref = tabular._delimited_pandas(src, delimiter, text, missing)
    except InputError as exc:
        ref = exc
    try:
        got = tabular.read_delimited(src, delimiter, None, missing)
    except InputError as exc:
        got = exc
    return got, ref


def _same(got, ref) -> None:
    if isinstance(ref, Exception):
        assert isinstance(got, Exception) and str(got) == str(ref)
        return
    assert not isinstance(got, Exception), got
    pd.testing.assert_frame_equal(got, ref, check_exact=True)
    assert got.dtypes.to_dict() == ref.dtypes.to_dict()


@settings(max_examples=300, deadline=None)
@given(names=st.lists(st.sampled_from(NAMES), min_size=1, max_size=5, unique=True),
       rows=st.lists(st.lists(st.sampled_from(CELLS) | st.sampled_from(SIMPLE), min_size=1, max_size=6),
                     min_size=0, max_size=8),
       tsv=st.booleans(), na=st.booleans(), ragged=st.booleans())
def test_arrow_reader_equals_pandas(names, rows, tsv, na, ragged):
    delimiter = "\t" if tsv else ","
    buf = io.StringIO()
    w = csv.writer(buf, delimiter=delimiter, lineterminator="\n")
    w.writerow(names)
    for r in rows:
        w.writerow(r if ragged else (r + [""] * len(names))[:len(names)])
    got, ref = _frames(buf.getvalue().encode(), delimiter, ("", "NA") if na else ("",))
    _same(got, ref)


@pytest.mark.parametrize("text", [
    "model,item,correct\nm,1,1\nm,2,0\n",
    "model,item,correct,score\nm,1,True,0.5\nm,2,False,\n",
    "model,item,correct\nm,1,1\n\nm,2,0\n",                    # a blank line
    "model,item,correct\nm,1,1,9\n",                           # a row too long: pandas' error
    "model,item,correct\nm,1\n",                               # a row too short: pandas fills it
    'model,item,response,correct\nm,1,"a\nb, c",1\n',          # a newline and a comma inside quotes
    "model,item,correct\n",                                    # no data rows: pandas' message
    'model,item,correct,extra\nm,"NA",1,"NA"\nm,2,0,\n',       # quoted NA
    "model,item,correct,n\nm,1,1,0x10\nm,2,0,12\n",            # hex: an integer to Arrow, text to pandas
    "model,item,correct,n\nm,1,1,1234567890123456\nm,2,0,\n",  # 16 digits with a missing cell: pandas
])
@pytest.mark.parametrize("na", [False, True])
def test_cases(text, na):
    _same(*_frames(text.encode(), ",", ("", "NA") if na else ("",)))


def test_large_log_text_columns_are_arrow_strings():
    rows = "".join(f"m{i % 3},{i:05d},{i % 2}\n" for i in range(5000))
    got, ref = _frames(("model,item,correct\n" + rows).encode(), ",")
    _same(got, ref)
    assert str(got["item"].dtype) == "string" and got["item"].iloc[0] == "00000"


def _columns_match(data: bytes, delimiter: str, missing) -> None:
    """The pandas-free reader's columns equal the pandas reader's, column by column; its ``rest`` columns are
    exactly those it cannot promise (it leaves them out)."""
    src = Source("t.csv", data)
    try:
        ref = tabular.read_delimited(src, delimiter, None, missing)
    except InputError:
        ref = None
    got = arrow_columns.read_delimited_columns(src, delimiter, missing)
    if got is None:                     # Arrow cannot read it: the pandas reader reads it (or words the error)
        return
    cols, rest = got
    assert ref is not None
    assert list(cols.names) + list(rest) == sorted(ref.columns, key=lambda c: (c in rest, list(ref.columns).index(c)))
    for name in cols.names:
        mine, theirs = cols[name].to_pandas(), ref[name]
        if cols[name].kind == "text" and cols[name].dtype == "str":        # words: pandas' str column
            assert str(theirs.dtype) in ("str", "object"), (name, theirs.dtype)
            assert mine.astype(object).where(mine.notna(), None).tolist() == \
                theirs.astype(object).where(theirs.notna(), None).tolist()
            continue
        pd.testing.assert_series_equal(mine, theirs, check_names=False, check_exact=True)


@settings(max_examples=300, deadline=None)
@given(names=st.lists(st.sampled_from(NAMES), min_size=1, max_size=5, unique=True),
       rows=st.lists(st.lists(st.sampled_from(CELLS) | st.sampled_from(SIMPLE), min_size=1, max_size=6),
                     min_size=1, max_size=8),
       tsv=st.booleans(), na=st.booleans())
def test_pandas_free_reader_equals_pandas(names, rows, tsv, na):
    delimiter = "\t" if tsv else ","
    buf = io.StringIO()
    w = csv.writer(buf, delimiter=delimiter, lineterminator="\n")
    w.writerow(names)
    for r in rows:
        w.writerow((r + [""] * len(names))[:len(names)])
    _columns_match(buf.getvalue().encode(), delimiter, ("", "NA") if na else ("",))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=64), min_size=1, max_size=40))
def test_float_cells_parse_to_the_same_bits(values):
    """Decimals written by repr() (17 significant digits at most) read to the same double through Arrow and
    through pandas' parser: the ``float`` kind is converted by Arrow in both readers."""
    text = "x\n" + "".join(f"{v!r}\n" for v in values)
    src = Source("t.csv", text.encode())
    ref = tabular._delimited_pandas(src, ",", [], ("",))
    got = tabular.read_delimited(src, ",", None, ("",))
    pd.testing.assert_frame_equal(got, ref, check_exact=True)
    assert (got["x"].to_numpy() == [float(v) for v in values]).all()
