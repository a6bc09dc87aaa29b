"""One value per row in the key and outcome fields (issue 24, items 8 and 9).

* a JSON object in the correctness field (``{"value": true}``, ``{}``) was flattened away and left the row
  invalid without a word; it is refused like ``2``, ``"maybe"`` and ``[1]`` (file, row, column, fix);
* a Parquet float ``trial`` holding NaN (not null) read as trial 0; it is refused (file, row, column), while a
  null trial stays an empty cell (trial 0), in memory and on the way into a dataset.
"""
from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tests.fuzz._gen import run_cli

from mrcstats import read_log
from mrcstats.errors import SchemaError


def _jsonl(tmp_path, value: str, first: bool) -> str:
    rows = ['{"model": "a", "item": "1", "correct": ' + value + "}", '{"model": "a", "item": "2", "correct": 1}']
    p = tmp_path / "o.jsonl"
    p.write_text("\n".join(rows if first else rows[::-1]) + "\n")
    return str(p)


@pytest.mark.parametrize("value", ['{"value": true}', "{}", '{"a": {"b": 1}}', "[1]", "[]", "2", '"maybe"'])
@pytest.mark.parametrize("first", [True, False])
def test_json_object_in_correct_refused_like_other_bad_values(tmp_path, value: str, first: bool) -> None:
    p = _jsonl(tmp_path, value, first)
    row = 1 if first else 2
    with pytest.raises(SchemaError, match=rf"o.jsonl, row {row}, column 'correct': correctness must be 0/1 or "
                                          r"true/false, got .*--map correct=COLUMN"):
        read_log(p)
    for argv in (["ingest", p, "--json"], ["ingest", p, "--dataset", str(tmp_path / "ds")], ["summary", p]):
        r = run_cli(argv)
        assert r.code == 2 and r.out == "" and f"row {row}, column 'correct'" in r.err, (argv, r.err)
    assert not (tmp_path / "ds").exists()


def test_json_array_of_records_and_mapped_nested_field(tmp_path) -> None:
    p = tmp_path / "o.json"
    p.write_text(json.dumps([{"model": "a", "item": "1", "correct": {"value": True}}]))
    with pytest.raises(SchemaError, match=r"row 1, column 'correct'.*--map correct=correct.value"):
        read_log(p)
    assert read_log(p, mapping={"correct": "correct.value"})["correct"].tolist() == [True]
    p.write_text(json.dumps([{"model": {"name": "a"}, "item": "1", "correct": 1}]))
    with pytest.raises(SchemaError, match=r"row 1, column 'model': model must be one value per row"):
        read_log(p)
    p.write_text(json.dumps([{"model": "a", "item": "1", "r": {"v": 1}}]))  # a mapped source key is checked too
    with pytest.raises(SchemaError, match=r"column 'r': correctness must be"):
        read_log(p, mapping={"correct": "r"})
    p.write_text(json.dumps([{"model": "a", "item": "1", "correct": 1, "meta": {"k": 1}}]))  # other fields flatten
    assert "meta.k" in read_log(p).columns


def _parquet(path, trial) -> str:
    n = len(trial)
    pq.write_table(pa.table({"model": ["a"] * n, "item": [str(i) for i in range(n)], "correct": [True] * n,
                             "trial": pa.array(trial, type=pa.float64())}), path)
    return str(path)


def test_parquet_nan_trial_refused_null_is_empty(tmp_path) -> None:
    from mrcstats.io.ingest import write_dataset

    nan = _parquet(tmp_path / "nan.parquet", [0.0, 1.0, 0.0, 1.0, float("nan"), 0.0])
    null = _parquet(tmp_path / "null.parquet", [0.0, None, 1.0])
    msg = r"nan.parquet, row 5, column 'trial': trial must be an integer, got NaN"
    with pytest.raises(SchemaError, match=msg):
        read_log(nan)
    for chunk in (2, 100):  # streamed in record batches: the row number counts across batches
        with pytest.raises(SchemaError, match=msg):
            write_dataset(nan, tmp_path / f"ds{chunk}", chunk_rows=chunk)
        assert not (tmp_path / f"ds{chunk}").exists()
    r = run_cli(["ingest", nan, "--dataset", str(tmp_path / "ds")])
    assert r.code == 2 and "row 5, column 'trial'" in r.err
    assert read_log(null)["trial"].tolist() == [0, 0, 1]
    assert sorted(write_dataset(null, tmp_path / "dsnull").to_log()["trial"].tolist()) == [0, 0, 1]
    # a mapped trial column, and a NaN elsewhere (masking_rate) stays a missing value as before
    pq.write_table(pa.table({"model": ["a"], "item": ["1"], "correct": [True], "rep": [float("nan")],
                             "masking_rate": [float("nan")]}), tmp_path / "m.parquet")
    with pytest.raises(SchemaError, match="column 'rep': trial must be an integer"):
        read_log(tmp_path / "m.parquet", mapping={"trial": "rep"})
    assert read_log(tmp_path / "m.parquet")["masking_rate"].isna().all()


def test_categorical_trial_column() -> None:
    """Fuzz finding: a hand-built frame with a categorical ``trial`` holding an empty string was a ValueError
    traceback from validate_log; a categorical column is read as its values."""
    import pandas as pd

    from mrcstats import validate_log

    df = pd.DataFrame({"model": ["a", "a", "a"], "item": ["1", "2", "3"], "correct": [1, 0, 1],
                       "trial": pd.Series(["", "1", "x"], dtype="category")})
    with pytest.raises(SchemaError, match=r"row 3, column 'trial': trial must be an integer, got 'x'"):
        validate_log(df)
    assert validate_log(df.iloc[:2])["trial"].tolist() == [0, 1]


def test_parquet_with_damaged_pandas_metadata_is_one_clear_error(tmp_path):
    """A Parquet file whose pandas metadata (JSON in the footer) is damaged: one InputError, not a
    JSONDecodeError traceback (found by the fuzz suite's corrupted-bytes cases)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import mrcstats
    from mrcstats.errors import InputError

    t = pa.table({"model": ["a"], "item": ["1"], "correct": [True]})
    t = t.replace_schema_metadata({b"pandas": b'{"index_columns": [] x'})
    p = tmp_path / "bad.parquet"
    pq.write_table(t, p)
    with pytest.raises(InputError, match="bad.parquet: cannot read Parquet"):
        mrcstats.read_log(p)
