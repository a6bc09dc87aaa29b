"""The canonical log's defaults and ranges are data (``io.schema.DEFAULTS`` / ``RANGES``): the pandas coercion
and the DuckDB ingest SQL are both generated from them, so they agree cell for cell (issue 37)."""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcstats.errors import SchemaError
from mrcstats.io.schema import DEFAULTS, RANGES, coerce_log, coerce_masking_rate, sql_filled, sql_out_of_range

duckdb = pytest.importorskip("duckdb")

SRC = Path(__file__).resolve().parents[2] / "src" / "mrcstats"

maybe_text = st.one_of(st.none(), st.text("abc'", min_size=0, max_size=3))
rows = st.lists(st.tuples(st.text("xyz", min_size=1, max_size=3), maybe_text, st.one_of(st.none(), st.integers(0, 5)),
                          maybe_text), min_size=1, max_size=8)


@settings(max_examples=40, deadline=None)
@given(rows, st.sets(st.sampled_from(["cluster", "trial", "condition"])))
def test_the_sql_fills_the_defaults_as_coerce_log(data, present):
    """``coalesce(r.cluster, r.item)``, trial 0, condition '' -- generated -- equal coerce_log's fill, with each
    optional column present (some cells empty) or absent."""
    frame = pd.DataFrame(data, columns=["item", "cluster", "trial", "condition"])
    frame = frame[["item", *sorted(present)]].assign(model="m", correct=True)
    frame["item"] = frame["item"].astype("string")
    for c in ("cluster", "condition"):
        if c in frame:
            frame[c] = frame[c].astype("string")
    if "trial" in frame:
        frame["trial"] = frame["trial"].astype("Int64")
    want = coerce_log(frame)
    con = duckdb.connect()
    con.register("r", frame)
    cols = list(frame.columns)
    got = con.execute(f"SELECT {sql_filled('cluster', cols)} AS cluster, {sql_filled('trial', cols, cast='BIGINT')} "
                      f"AS trial, {sql_filled('condition', cols)} AS condition FROM r").df()
    assert got["cluster"].tolist() == want["cluster"].astype(str).tolist()
    assert got["trial"].tolist() == want["trial"].tolist()
    assert got["condition"].tolist() == want["condition"].astype(str).tolist()


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.floats(-1e3, 1e3), st.sampled_from([0.0, 100.0, -0.0, math.inf, -math.inf, 100.0001])))
def test_the_sql_range_is_the_pandas_range_of_masking_rates(x):
    con = duckdb.connect()
    flagged = con.execute(f"SELECT {sql_out_of_range('masking_rate')} FROM (SELECT ?::DOUBLE AS masking_rate) r",
                          [x]).fetchone()[0]
    try:
        coerce_masking_rate(pd.Series([x]))
        refused = False
    except SchemaError:
        refused = True
    assert flagged == refused


@pytest.mark.parametrize("t", [-1, 0, 3, RANGES["trial"].high, RANGES["trial"].high + 1])
def test_the_sql_range_is_the_pandas_range_of_trials(t):
    con = duckdb.connect()
    flagged = con.execute(f"SELECT {sql_out_of_range('trial')} FROM (SELECT ?::HUGEINT AS trial) r", [t]).fetchone()[0]
    frame = pd.DataFrame({"model": ["m"], "item": ["i"], "correct": [True], "trial": pd.Series([t], dtype=object)})
    try:
        coerce_log(frame)
        refused = False
    except SchemaError:
        refused = True
    assert flagged == refused


def test_ingest_writes_no_default_or_range_of_its_own():
    """io/ingest.py generates its SQL from the schema's data: no literal default or bound of the schema in it,
    and it no longer reaches into the dataset writer's counters from outside."""
    text = (SRC / "io" / "ingest.py").read_text()
    for literal in ("coalesce(", "r.trial < 0", "masking_rate > 100", "MAX_TRIAL", "w._k", "w._counts"):
        assert literal not in text, literal
    assert set(DEFAULTS) == {"cluster", "trial", "condition"} and set(RANGES) == {"trial", "masking_rate"}
