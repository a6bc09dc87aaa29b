"""Fuzz finding: a log with columns that differ only in case (``model`` and ``Model``) crashed ``ingest
--dataset`` (KeyError) and ``summary DATASET --by Model`` grouped by ``model`` (wrong numbers, exit 0):
DuckDB ignores the case of column names. Such a dataset is refused with one message; in memory both
columns stay distinct."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tests.fuzz._gen import run_cli

from mrcstats.errors import InputError

CSV = "model,item,correct,Model\na,1,1,X\nb,1,0,Y\n"


def test_case_twins_refused_for_a_dataset_kept_in_memory(tmp_path) -> None:
    from mrcstats import read_log
    from mrcstats.stats.accuracy import summarize

    p = tmp_path / "l.csv"
    p.write_text(CSV)
    pq.write_table(pa.table({"model": ["a"], "item": ["1"], "correct": [True], "Model": ["X"]}),
                   tmp_path / "l.parquet")
    for src in (p, tmp_path / "l.parquet"):
        r = run_cli(["ingest", str(src), "--dataset", str(tmp_path / "ds")])
        assert r.code == 2 and "Traceback" not in r.err
        assert "columns 'model' and 'Model' differ only in upper/lower case" in r.err
        assert not (tmp_path / "ds").exists()
    groups = summarize(read_log(p), by="Model").to_frame()["Model"].tolist()
    assert groups == ["X", "Y"]


def test_open_dataset_refuses_case_twins(tmp_path) -> None:
    from mrcstats import open_log

    d = tmp_path / "ds" / "model=a"
    d.mkdir(parents=True)
    pq.write_table(pa.table({"item": ["1"], "correct": [True], "Model": ["X"]}), d / "part-0.parquet")
    with pytest.raises(InputError, match="differ only in upper/lower case"):
        open_log(tmp_path / "ds")
