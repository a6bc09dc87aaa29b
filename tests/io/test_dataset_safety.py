"""Datasets lose no model, whatever the names, and survive concurrent and killed writers (issue 24).

Defects covered (each test failed on da0790c, before the fix):
* item 2: ``GPT-4o``/``gpt-4o`` were folders ``model=GPT-4o`` and ``model=gpt-4o`` -- one folder on a
  case-insensitive file system, where one model's rows vanished and ``open_log`` did not notice;
* item 4: a 28-character CJK model name crashed ``ingest --dataset`` (``OSError: File name too long``);
* item 10: ``.ds.tmp-*`` folders of a killed ingest stayed forever;
* item 11: two concurrent ingests into one dataset both exited 0, the last silently winning.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import unicodedata
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcstats.cli import main
from mrcstats.errors import InputError
from mrcstats.io import open_log, read_log
from mrcstats.io.dataset import open_dataset, partition_folder
from mrcstats.io.ingest import DatasetWriter, write_dataset
from mrcstats.stats.accuracy import summarize

V1 = Path(__file__).parent / "data" / "dataset_v1"
CJK = "東京大学大規模言語モデル評価用長い名前のモデル第二十八"   # 28 characters, 84 bytes in UTF-8
NAMES = ["GPT-4o", "gpt-4o", "caf\u00e9", "cafe\u0301", CJK, "a/b: c?*", "x" * 300]
SRC = str(Path(__file__).resolve().parents[2] / "src")


def _csv(path: Path, models: list[str], items: int = 20) -> Path:
    rows = [(m, f"q{i:02d}", int((i * 7 + k * 3) % 5 < 1 + k % 4)) for k, m in enumerate(models) for i in range(items)]
    pd.DataFrame(rows, columns=["model", "item", "correct"]).to_csv(path, index=False)
    return path


def _acc(log) -> dict[str, float]:
    f = summarize(log, by=["model"]).to_frame()
    return dict(zip(f["model"], f["accuracy"], strict=True))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=80), min_size=1, max_size=8, unique=True))
def test_partition_folders_unique_and_bounded(names):
    folders = [partition_folder(n) for n in names]
    for f in folders:
        assert f.isascii() and f == f.lower() == f.casefold() == unicodedata.normalize("NFC", f)
        assert len(f.encode()) <= 57 and not f.startswith((".", "_")) and "/" not in f and "=" not in f
    assert len({f.casefold() for f in folders}) == len(names)


def test_case_unicode_and_long_names_each_keep_their_rows(tmp_path, capsys):
    src = _csv(tmp_path / "in.csv", NAMES)
    assert main(["ingest", str(src), "--dataset", str(tmp_path / "ds")]) == 0   # was exit 1 (File name too long)
    capsys.readouterr()
    ds = open_log(tmp_path / "ds")
    folders = [p.name for p in (tmp_path / "ds").iterdir() if p.is_dir()]
    assert len(folders) == len(NAMES) == len({f.casefold() for f in folders})
    assert max(len(f.encode()) for f in folders) <= 57
    assert _acc(ds) == pytest.approx(_acc(read_log(src)), abs=0, rel=1e-15)
    meta = json.loads((tmp_path / "ds" / "_mrcstats.json").read_text(encoding="utf-8"))
    assert {p["model"] for p in meta["partitions"]} == set(NAMES)
    assert all(p["rows"] == 20 for p in meta["partitions"])
    assert set(ds.to_log()["model"].unique()) == set(NAMES)


def test_lost_or_merged_model_files_are_refused(tmp_path, capsys):
    write_dataset(_csv(tmp_path / "in.csv", ["GPT-4o", "gpt-4o"]), tmp_path / "ds")
    upper, lower = (tmp_path / "ds" / partition_folder(m) for m in ("GPT-4o", "gpt-4o"))
    base = tmp_path / "base"
    shutil.copytree(tmp_path / "ds", base)
    # a case-insensitive copy merging the two models' files into one folder
    for f in upper.iterdir():
        f.rename(lower / ("x" + f.name))
    upper.rmdir()
    with pytest.raises(InputError, match=r"the files of model 'GPT-4o' are missing"):
        open_log(tmp_path / "ds")
    # one model's file copied into the other's folder
    shutil.rmtree(tmp_path / "ds")
    shutil.copytree(base, tmp_path / "ds")
    shutil.copy(min(upper.glob("*.parquet")), lower / "x.parquet")
    with pytest.raises(InputError, match=r"x.parquet: holds rows of model 'GPT-4o' in the folder of model 'gpt-4o'"):
        open_log(tmp_path / "ds")
    # one model's file overwritten by the other's (same file name in one folder): row counts disagree
    shutil.rmtree(tmp_path / "ds")
    shutil.copytree(base, tmp_path / "ds")
    f = min(lower.glob("*.parquet"))
    t = pq.read_table(f)
    pq.write_table(t.slice(0, t.num_rows - 2), f)
    with pytest.raises(InputError, match=r"model 'gpt-4o' has 18 rows in its files but 20 in _mrcstats.json"):
        open_log(tmp_path / "ds")
    assert main(["summary", str(tmp_path / "ds")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "re-run mrcstats ingest" in err


def test_first_layout_still_opens_and_a_collision_in_it_is_refused(tmp_path):
    ds = open_log(V1)
    assert ds.hive and len(ds) == 60
    assert _acc(ds) == pytest.approx({"GPT-4o": 0.4, "llama-3": 0.6, "模型 a/b": 0.8})   # the old tool's numbers
    assert _acc(ds.to_log()) == pytest.approx(_acc(ds))
    # re-ingest: the current layout, the same numbers
    new = write_dataset(V1, tmp_path / "new")
    assert not new.hive and new.meta["version"] == 2 and _acc(new) == pytest.approx(_acc(ds))
    assert not any(p.name.startswith("model=") for p in new.path.iterdir())
    # what a case-insensitive file system makes of two models' folders: one file written over the other
    old = tmp_path / "old"
    shutil.copytree(V1, old)
    (old / "model=GPT-4o" / "part-000000-0000.parquet").replace(old / "model=llama-3" / "part-000000-0000.parquet")
    (old / "model=GPT-4o").rmdir()
    with pytest.raises(InputError, match=r"the files hold 40 rows but _mrcstats.json says 60"):
        open_log(old)


def _hold_writer(out: Path, then: str) -> subprocess.Popen:
    """A process that opens a DatasetWriter on ``out``, writes one chunk, says 'ready' and then ``then``."""
    code = (f"import os, sys, pandas as pd\nfrom mrcstats.io.ingest import DatasetWriter\n"
            f"w = DatasetWriter({str(out)!r})\n"
            f"w.write(pd.DataFrame({{'model': ['m'], 'item': ['1'], 'correct': [True]}}))\n"
            f"print('ready', flush=True)\n{then}\n")
    env = {**os.environ, "PYTHONPATH": SRC}
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                         text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


def test_second_writer_fails_while_the_first_runs(tmp_path, capsys):
    src = _csv(tmp_path / "in.csv", ["a", "b"])
    out = tmp_path / "ds"
    p = _hold_writer(out, "sys.stdin.readline(); w.close()")
    try:
        assert main(["ingest", str(src), "--dataset", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"pid {p.pid} on {socket.gethostname()}" in err
        assert "being written by another mrcstats process" in err
        with pytest.raises(InputError, match="being written by another"):
            write_dataset(src, out)
    finally:
        p.communicate("go\n", timeout=120)
    assert p.returncode == 0 and len(open_dataset(out)) == 1      # the first writer's dataset, whole
    assert main(["ingest", str(src), "--dataset", str(out)]) == 0   # the lock is gone with it
    assert len(open_dataset(out)) == 40
    assert sorted(x.name for x in tmp_path.iterdir()) == ["ds", "in.csv"]


def test_killed_writer_leaves_no_lock_and_its_temporary_folder_is_removed(tmp_path):
    src = _csv(tmp_path / "in.csv", ["a"])
    out = tmp_path / "ds"
    write_dataset(src, out)
    p = _hold_writer(out, "os._exit(9)")    # killed mid-ingest, like kill -9
    p.wait(timeout=120)
    stale = [x for x in tmp_path.iterdir() if x.name.startswith(".ds.tmp-")]
    assert len(stale) == 1 and json.loads((stale[0] / ".owner.json").read_text())["pid"] == p.pid
    assert len(open_dataset(out)) == 20          # the old dataset is whole
    # a live writer's temporary folder (this process) is kept; the dead one's is removed by the next write
    live = tmp_path / ".ds.tmp-live"
    live.mkdir()
    (live / ".owner.json").write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname()}))
    write_dataset(src, out)
    assert sorted(x.name for x in tmp_path.iterdir()) == [".ds.tmp-live", "ds", "in.csv"]


def test_writer_killed_between_the_renames_gets_the_old_dataset_back(tmp_path):
    src = _csv(tmp_path / "in.csv", ["a"])
    write_dataset(src, tmp_path / "ds")
    (tmp_path / "ds").rename(tmp_path / ".ds.old-12345678")   # moved aside, new one never renamed in
    with DatasetWriter(tmp_path / "ds") as w:
        assert len(open_dataset(tmp_path / "ds")) == 20        # put back before anything else happens
        w.abort()
    assert sorted(x.name for x in tmp_path.iterdir()) == ["ds", "in.csv"]


def test_reingest_never_deletes_files_it_did_not_write(tmp_path, capsys):
    """Issue 35: re-ingesting into a dataset replaced the folder whole, deleting a notes file put inside it."""
    src = _csv(tmp_path / "log.csv", ["a", "b"])
    ds = tmp_path / "ds"
    assert main(["ingest", str(src), "--dataset", str(ds)]) == 0
    assert main(["ingest", str(src), "--dataset", str(ds)]) == 0      # a dataset of its own files: replaced
    for extra in (ds / "notes.txt", ds / "plots", ds / f"{partition_folder('a')}" / "README"):
        if extra.name == "plots":
            extra.mkdir()
        else:
            extra.write_text("mine\n")
        before = sorted(str(p.relative_to(ds)) for p in ds.rglob("*"))
        capsys.readouterr()
        assert main(["ingest", str(src), "--dataset", str(ds)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "did not write" in err and extra.name in err
        assert sorted(str(p.relative_to(ds)) for p in ds.rglob("*")) == before
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".ds.")]   # no temporary folder left
        extra.rmdir() if extra.is_dir() else extra.unlink()
    with pytest.raises(InputError, match="did not write"):
        (ds / "notes.txt").write_text("x")
        DatasetWriter(ds)
