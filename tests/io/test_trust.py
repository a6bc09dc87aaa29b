"""Issue 14 reproducers at the io layer: each silent wrong result is now a clear error or the right result."""
from __future__ import annotations

import json
import warnings

import pandas as pd
import pytest

from mrcstats.errors import InputError, SchemaError
from mrcstats.io import read_log, write_log
from mrcstats.io.detect import detect_format
from mrcstats.io.source import load_source


def _inspect(task, ids, status="success", epochs=1, dataset_n=None):
    return {"version": 2, "status": status,
            "eval": {"task": task, "model": "m", "dataset": {"samples": dataset_n or len(ids)},
                     "config": {"epochs": epochs}},
            "samples": [{"id": i, "epoch": e, "input": "Q?", "target": "A",
                         "scores": {"match": {"value": "C", "answer": "A"}}}
                        for i in ids for e in range(1, epochs + 1)]}


def test_inspect_items_are_task_qualified_and_trials_zero_based(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(_inspect("mmlu", [1, 2], epochs=2)))
    b.write_text(json.dumps(_inspect("popularity", [1, 3])))
    log = read_log([a, b])
    assert sorted(log["item"].unique()) == ["mmlu:1", "mmlu:2", "popularity:1", "popularity:3"]
    assert log["item"].nunique() == 4
    assert sorted(log["trial"].unique()) == [0, 1]
    assert set(log["sample_id"]) == {"1", "2", "3"}


def test_inspect_cancelled_run_is_counted(tmp_path):
    p = tmp_path / "c.json"
    p.write_text(json.dumps(_inspect("t", [1, 2, 3], status="cancelled", dataset_n=100)))
    with pytest.warns(UserWarning, match="status 'cancelled'.*3 of 100.*97 never ran"):
        log = read_log(p)
    assert len(log) == 3
    assert log.attrs["skipped"] == {"not run: Inspect log status 'cancelled'": 97}


def test_csv_duplicate_header_refused(tmp_path):
    p = tmp_path / "d.csv"
    p.write_text("model,item,correct,correct\na,1,1,0\n")
    with pytest.raises(InputError, match="column 'correct' appears 2 times in the header"):
        read_log(p)


def test_jsonl_duplicate_key_refused(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_text('{"model":"a","item":"1","correct":1,"correct":0}\n')
    with pytest.raises(InputError, match="line 1: key 'correct' appears twice"):
        read_log(p)


def test_parquet_duplicate_column_refused(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = tmp_path / "d.parquet"
    pq.write_table(pa.table([pa.array(["a"]), pa.array(["1"]), pa.array([1]), pa.array([0])],
                            names=["model", "item", "correct", "correct"]), p)
    with pytest.raises(InputError, match="appears 2 times"):
        read_log(p)


@pytest.mark.parametrize("cell", ["inf", "1e20", "9223372036854775808", "-1", "1.5", "NaN", "x"])
def test_trial_out_of_range_refused(tmp_path, cell):
    p = tmp_path / "t.csv"
    p.write_text(f"model,item,correct,trial\na,1,1,{cell}\n")
    with pytest.raises(SchemaError, match="row 1, column 'trial'"):
        read_log(p)


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e20", "-3"])
def test_jsonl_trial_nonfinite_refused(tmp_path, value):
    p = tmp_path / "t.jsonl"
    p.write_text(f'{{"model":"a","item":"1","correct":1,"trial":{value}}}\n')
    with pytest.raises(SchemaError, match="trial"):
        read_log(p)


def test_trial_int64_extremes_refused():
    from mrcstats.io import validate_log

    df = pd.DataFrame({"model": ["a"], "item": ["1"], "correct": [True], "trial": [2**62]})
    with pytest.raises(SchemaError, match="out of range"):
        validate_log(df)
    df["trial"] = [3]
    assert validate_log(df)["trial"].tolist() == [3]


def test_git_lfs_pointer_refused(tmp_path):
    p = tmp_path / "big.csv"
    p.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:4d7a\nsize 12345\n")
    with pytest.raises(InputError, match="Git LFS pointer.*git lfs pull"):
        read_log(p)


@pytest.mark.parametrize("text", ["model,item,correct\ra,1,1\n", "model,item,correct\ra,1,1\rb,2,0\r",
                                  "model\titem\tcorrect\ra\t1\t1\n", "model,item,correct\r\ra,1,1\n"])
def test_bare_cr_header_reads(tmp_path, text):
    p = tmp_path / "cr.csv"
    p.write_bytes(text.encode())
    log = read_log(p)
    assert list(log["model"])[:1] == ["a"]


def test_bare_cr_in_quoted_header_is_clear(tmp_path):
    p = tmp_path / "q.csv"
    p.write_bytes(b'"model,item,correct\r\na,1,1\n')
    with pytest.raises(InputError):
        read_log(p)


@pytest.mark.parametrize("bad", [None, 123, 1.5, {"a": 1}])
def test_read_log_path_types(bad):
    with pytest.raises(InputError, match="must be a file or folder name|paths must be"):
        read_log(bad)


def test_read_log_mapping_type(tmp_path):
    p = tmp_path / "x.csv"
    p.write_text("model,q,correct\na,1,1\n")
    with pytest.raises(InputError, match="mapping must be a dict"):
        read_log(p, mapping="item=q")
    assert len(read_log(p, mapping={"item": "q"})) == 1


def test_format_detection_not_cyclic():
    import subprocess
    import sys

    code = ("import sys, mrcstats.io.elagent, mrcstats.io.harness, mrcstats.io.inspect_ai, mrcstats.io.tabular; "
            "print('mrcstats.io.detect' in sys.modules and 'mrcstats.io.tabular' not in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    code = "import sys, mrcstats.io.elagent; print('mrcstats.io.detect' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"  # the readers sit below detection: no import cycle


def test_detect_still_works(tmp_path):
    p = tmp_path / "x.csv"
    p.write_text("model,item,correct\na,1,1\n")
    assert detect_format(load_source(p)) == "csv"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        write_log(read_log(p), tmp_path / "x.parquet")
