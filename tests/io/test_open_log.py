"""``io.open_log`` is the one place that decides how a log is opened (issue 37): a lazy dataset, the pandas-free
Columns of one plain table, a data table or a log; the command line asks it, never ``is_dataset`` itself."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from mrcstats.errors import InputError
from mrcstats.io import open_log
from mrcstats.io.columns import Columns
from mrcstats.io.dataset import LogDataset
from mrcstats.io.ingest import write_dataset

CLI = Path(__file__).resolve().parents[2] / "src" / "mrcstats" / "cli"


@pytest.fixture
def files(tmp_path):
    csv = tmp_path / "log.csv"
    pd.DataFrame({"model": ["a", "a", "b", "b"], "item": ["1", "2", "1", "2"], "correct": [1, 0, 1, 1],
                  "x": [0.5, 1.5, 2.5, 3.5]}).to_csv(csv, index=False)
    write_dataset(csv, tmp_path / "ds")
    return csv, tmp_path / "ds"


def test_a_dataset_folder_opens_lazily_unless_its_rows_must_be_read_again(files):
    _, ds = files
    assert isinstance(open_log(ds), LogDataset)
    assert isinstance(open_log([ds]), LogDataset)
    for kw in ({"lazy": False}, {"threshold": 0.5}):
        got = open_log(ds, **kw)
        assert isinstance(got, pd.DataFrame) and len(got) == 4, kw
    # mapping= and model= cannot apply to a dataset (canonical already): refused with the option named, not ignored
    for kw, name in (({"model": "m"}, "model="), ({"mapping": {"item": "item"}}, "mapping=")):
        with pytest.raises(InputError, match=name):
            open_log(ds, **kw)


def test_a_plain_table_is_read_without_pandas_only_when_the_caller_names_its_columns(files):
    csv, _ = files
    cols = open_log(csv, table=True, columns=["correct", "x", "model"])
    assert isinstance(cols, Columns) and cols.nrows == 4
    frame = open_log(csv, table=True)
    assert isinstance(frame, pd.DataFrame) and list(frame["x"]) == [0.5, 1.5, 2.5, 3.5]
    assert isinstance(open_log(csv, table=True, columns=["x"], format="csv"), pd.DataFrame)   # asked: read_data
    assert isinstance(open_log(csv), pd.DataFrame) and "score" in open_log(csv).columns       # a log


def test_no_command_decides_for_itself_whether_a_path_is_a_dataset():
    """The CLI opens logs through read_log_args / read_data_args (io.open_log): no handler tests is_dataset."""
    for p in CLI.glob("*.py"):
        text = p.read_text()
        assert "is_dataset(" not in text and "open_dataset(" not in text, p.name


def test_a_threshold_cuts_a_dataset_as_it_cuts_the_files_it_came_from(tmp_path):
    """``read_log``/``open_log`` of a dataset folder with ``threshold`` binarise the scores as the in-memory
    reader does (the dataset path returned the rows with ``correct`` <NA>: the threshold was dropped)."""
    from mrcstats.io import read_log

    csv = tmp_path / "g.csv"
    pd.DataFrame({"model": ["a", "a", "b", "b"], "item": ["1", "2", "1", "2"],
                  "score": [0.2, 0.7, 0.5, 0.9]}).to_csv(csv, index=False)
    write_dataset(csv, tmp_path / "ds")
    want = read_log(csv, threshold=0.5)
    for got in (read_log(tmp_path / "ds", threshold=0.5), open_log(tmp_path / "ds", threshold=0.5)):
        key = ["model", "item"]
        a, b = (f.sort_values(key).reset_index(drop=True) for f in (want, got))
        assert a["correct"].tolist() == b["correct"].tolist() == [False, True, True, True]
        assert got.attrs["threshold"] == 0.5


def test_a_dataset_folder_is_never_read_as_a_folder_of_files(files):
    """The dataset check happens where a folder is opened (``io.source.expand_paths``), whatever ``format=`` says:
    ``format=`` on a dataset folder is refused as ``mapping=``/``model=`` are (it is canonical Parquet already,
    docs/datasets.md); ``read_data`` reads it as the dataset it is; a dataset among other paths, or given to a
    reader of files, is refused naming it (it was read as plain files: '_mrcstats.json: cannot read Parquet')."""
    from mrcstats.io import read_data, read_log
    from mrcstats.io.source import expand_paths

    csv, ds = files
    for fmt in ("parquet", "csv"):
        for call, kw in ((read_log, {}), (read_data, {}), (open_log, {}), (open_log, {"table": True})):
            with pytest.raises(InputError, match=r"format=.*dataset folder") as e:
                call(ds, format=fmt, **kw)
            assert "_mrcstats.json: cannot read" not in str(e.value)
    want = read_log(ds)
    got = read_data(ds)
    assert len(got) == len(want) == 4 and got.attrs["format"] == "dataset"
    assert isinstance(open_log(ds, table=True, lazy=False), pd.DataFrame)
    for call in (lambda: read_log([ds, csv]), lambda: read_data([csv, ds]), lambda: expand_paths(ds, (".parquet",))):
        with pytest.raises(InputError, match=rf"{ds.name}.*dataset folder"):
            call()
