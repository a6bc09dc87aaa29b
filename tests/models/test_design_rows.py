"""A bad cell in a model's response is named by its row and column, the same through pandas and without it.

A text cell in a numeric response column (a count model's, an LMM's) made the whole column text: the message said
"it is category" and nothing about where. It now names the first offending cell: the file, the 1-based data row as
the file counts it (after the header) and the column, and says how to fix it, whichever way the table was read:
a pandas frame (:func:`mrcstats.io.read_data`) or the pandas-free :class:`~mrcstats.io.columns.Columns` the command
line reads (:func:`mrcstats.io.open_log` with ``columns``). Rows left out by ``na.omit`` before do not shift it.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcstats.errors import InputError
from mrcstats.io import open_log, read_data
from mrcstats.io.columns import Columns
from mrcstats.models import glmer, lmer

#: the bad cell: data row 7 (file line 8), column "score"
BAD_ROW, BAD_VALUE = 7, "n/a?"


def _csv(tmp_path, missing_before: bool = False) -> str:
    rng = np.random.default_rng(5)
    lines = ["model,item,score,x"]
    for m in range(4):
        for i in range(10):
            lines.append(f"m{m},i{i},{rng.poisson(3)},{rng.random():.3f}")
    model, item, _, x = lines[BAD_ROW].split(",")
    lines[BAD_ROW] = f"{model},{item},{BAD_VALUE},{x}"
    if missing_before:                   # a missing score earlier: na.omit drops that row first
        model, item, _, x = lines[3].split(",")
        lines[3] = f"{model},{item},,{x}"
    p = tmp_path / "scores.csv"
    p.write_text("\n".join(lines) + "\n")
    return str(p)


def _read(path: str, how: str):
    """The table through pandas (the CSV: a column of numbers and text is one only pandas types, so the command
    line reads it this way too), or as Columns without pandas (the same rows as Parquet, ``score`` a text column,
    as the command line reads a Parquet file)."""
    if how == "columns":
        import pyarrow as pa
        import pyarrow.parquet as pq

        d = read_data(path)
        pq_path = path.replace(".csv", ".parquet")
        text = ("model", "item", "score")
        pq.write_table(pa.table({c: pa.array([None if pd.isna(v) else str(v) if c in text else v for v in d[c]],
                                             type=pa.string() if c in text else pa.float64())
                                 for c in d.columns}), pq_path)
        data = open_log(pq_path, table=True, columns=["model", "item", "score", "x"])
        assert isinstance(data, Columns)
        return data
    return read_data(path)


FITS = {"lmer": lambda d: lmer("score ~ x + (1 | model)", d),
        "glmer-poisson": lambda d: glmer("score ~ x + (1 | model)", d, family="poisson")}


@pytest.mark.parametrize("missing_before", [False, True], ids=["complete", "na-omit-before"])
@pytest.mark.parametrize("how", ["pandas", "columns"])
@pytest.mark.parametrize("fit", list(FITS))
def test_a_text_cell_in_a_numeric_response_is_named_by_row_and_column(tmp_path, fit, how, missing_before):
    path = _csv(tmp_path, missing_before)
    with pytest.raises(InputError) as e:
        FITS[fit](_read(path, how))
    msg = str(e.value)
    assert f"data row {BAD_ROW}" in msg and "'score'" in msg and repr(BAD_VALUE) in msg, msg
    assert ("scores.parquet" if how == "columns" else "scores.csv") in msg, msg
    assert "number" in msg and "empty" in msg, msg          # how to fix it


def test_a_pandas_frame_with_its_own_index_is_named_by_its_label():
    d = pd.DataFrame({"g": list("aabbccdd") * 3, "x": np.arange(24.0),
                      "score": [1.0] * 5 + ["oops"] + [2.0] * 18},
                     index=[f"r{i}" for i in range(24)])
    with pytest.raises(InputError, match=r"row 'r5'.*'score'.*'oops'"):
        lmer("score ~ x + (1 | g)", d)


def test_a_categorical_of_numbers_is_told_to_become_numbers():
    d = pd.DataFrame({"g": list("aabbccdd") * 3, "x": np.arange(24.0),
                      "score": pd.Categorical(["1", "2"] * 12)})
    with pytest.raises(InputError, match=r"'score'.*category.*convert"):
        lmer("score ~ x + (1 | g)", d)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(8, 40), data=st.data())
def test_the_named_row_is_the_bad_cells_row_whatever_was_dropped_before(n, data):
    """Property: with missing cells anywhere before it (left out by na.omit), the message names the bad cell's own
    1-based row, through pandas and through Columns alike."""
    bad = data.draw(st.integers(0, n - 1), label="bad row (0-based)")
    missing = data.draw(st.sets(st.integers(0, n - 1)), label="missing cells") - {bad}
    score = [None if i in missing else ("oops" if i == bad else str(i % 5)) for i in range(n)]
    d = pd.DataFrame({"g": [f"g{i % 3}" for i in range(n)], "x": np.arange(n, dtype=float),
                      "score": pd.array(score, dtype="string")})
    for table in (d, Columns.from_pandas(d).select(["g", "x", "score"])):
        with pytest.raises(InputError, match=rf"data row {bad + 1}, column 'score', has 'oops'"):
            lmer("score ~ x + (1 | g)", table)
