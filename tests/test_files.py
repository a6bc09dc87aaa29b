"""The one output-path check every writer shares, and stale temporary files of killed writers."""
from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd
import pytest

from mrcstats._files import atomic_path, check_output_path, clean_stale_temps, write_text_atomic
from mrcstats.cli import main
from mrcstats.errors import InputError
from mrcstats.io import read_log, write_log

LOG = pd.DataFrame({"model": ["a", "b"], "item": ["1", "1"], "correct": [True, False]})


def test_folder_below_file_and_ending(tmp_path):
    (tmp_path / "f.csv").write_text("x")
    with pytest.raises(InputError, match="is a folder"):
        write_log(LOG, tmp_path)
    with pytest.raises(InputError, match="below .*which is a file"):
        write_log(LOG, tmp_path / "f.csv" / "x.parquet")
    for bad in ("x.txt", "x.xlsx", "x"):
        with pytest.raises(InputError, match="file ending decides"):
            write_log(LOG, tmp_path / bad)
    assert not any(p.name.startswith("x") for p in tmp_path.iterdir())
    write_log(LOG, tmp_path / "ok.csv.gz")


def test_unwritable_place_is_clear(tmp_path):
    with pytest.raises(InputError, match="cannot write"):
        write_text_atomic("/proc/mrcstats-test.txt", "x")
    if os.geteuid() != 0:  # root may write anywhere
        d = tmp_path / "ro"
        d.mkdir()
        d.chmod(0o500)
        with pytest.raises(InputError, match="permission denied"):
            write_log(LOG, d / "x.parquet")


def test_same_as_input(tmp_path):
    p = tmp_path / "in.csv"
    p.write_text("model,item,correct\na,1,1\n")
    with pytest.raises(InputError, match="is the input"):
        check_output_path(p, inputs=[str(p)])
    assert main(["ingest", str(p), "--out", str(p)]) == 2
    assert p.read_text() == "model,item,correct\na,1,1\n"


def test_cli_out_paths(tmp_path, capsys):
    p = tmp_path / "in.csv"
    p.write_text("model,item,correct\na,1,1\n")
    (tmp_path / "d").mkdir()
    for out in ("x.txt", "d", "in.csv/x.parquet"):
        assert main(["ingest", str(p), "--out", str(tmp_path / out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err and "error:" in err
    assert main(["report", str(p), "--out", str(tmp_path / "in.csv" / "r.pdf")]) == 2
    assert "which is a file" in capsys.readouterr().err
    assert main(["demo", "--outdir", str(p)]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err


def test_stale_temp_of_killed_writer_is_removed(tmp_path):
    target = tmp_path / "log.parquet"
    # a writer killed mid-write: its temp file stays, named with its (now dead) pid
    code = ("import os; from mrcstats._files import atomic_path\n"
            f"with atomic_path({str(target)!r}) as tmp:\n    tmp.write_text('half'); os._exit(9)")
    subprocess.run([sys.executable, "-c", code], check=False)
    stale = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert len(stale) == 1 and stale[0].name.startswith(".log.parquet.")
    write_log(LOG, target)
    assert [p.name for p in tmp_path.iterdir()] == ["log.parquet"]


def test_live_writer_temp_is_kept(tmp_path):
    target = tmp_path / "x.txt"
    live = tmp_path / f".x.txt.{os.getpid()}.abcd.tmp"
    live.write_text("mine")
    assert clean_stale_temps(target) == 0 and live.exists()
    with atomic_path(target) as tmp:
        tmp.write_text("ok")
    assert live.exists() and target.read_text() == "ok"


def _folder_of_inputs(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    (d / "a.csv").write_text("model,item,correct\nm,1,1\nm,1,0\n")
    (d / "b.csv").write_text("model,item,correct\nm,2,1\n")
    return d


def test_output_inside_an_input_folder_is_refused(tmp_path, capsys):
    """Issue 24 item 1 (exit 0 and a rewritten input before): an input found by folder expansion."""
    d = _folder_of_inputs(tmp_path)
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    assert main(["ingest", str(d), "--on-duplicate", "first", "--out", str(d / "a.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "inside the input folder" in err
    for out in (d / "new.parquet", d / "sub" / "x.csv"):    # a new file inside the folder read is refused too
        assert main(["ingest", str(d), "--on-duplicate", "first", "--out", str(out)]) == 2
    assert main(["ingest", str(d), "--on-duplicate", "first", "--dataset", str(d / "ds")]) == 2
    capsys.readouterr()
    assert {p.name: p.read_bytes() for p in d.iterdir()} == before


def test_write_log_never_overwrites_what_the_log_was_read_from(tmp_path):
    d = _folder_of_inputs(tmp_path)
    before = (d / "a.csv").read_bytes()
    log = read_log(d, on_duplicate="first")
    for target in (d / "a.csv", tmp_path / "link.csv"):
        if target.name == "link.csv":
            target.symlink_to(d / "a.csv")          # the same file by another name
        with pytest.raises(InputError, match=r"write_log .*is the input .*a\.csv"):
            write_log(log, target)
    (tmp_path / "e").symlink_to(d)
    with pytest.raises(InputError, match="is the input"):
        write_log(log, tmp_path / "e" / ".." / "d" / "a.csv")
    assert (d / "a.csv").read_bytes() == before
    write_log(log, tmp_path / "out.csv")          # anywhere else is fine


def test_output_folder_holding_an_input_is_refused(tmp_path):
    d = _folder_of_inputs(tmp_path)
    (tmp_path / "link").symlink_to(d)
    for out, why in ((tmp_path, "holds the input"), (d, "is the input folder"), (tmp_path / "link", "is the input")):
        with pytest.raises(InputError, match=why):
            check_output_path(out, inputs=[d / "a.csv"], kind="folder") if why == "holds the input" else \
                check_output_path(out, inputs=[d], kind="folder")
    from mrcstats.io.ingest import write_dataset

    with pytest.raises(InputError, match="dataset .*holds the input"):
        write_dataset(d / "b.csv", tmp_path)
    assert (d / "b.csv").exists()


def test_output_path_is_checked_text_that_writes_atomically(tmp_path):
    import copy
    import pickle

    from mrcstats._files import OutputPath

    with pytest.raises(InputError, match=r"--items-out .*the folder .*missing does not exist; create it first"):
        OutputPath(tmp_path / "missing" / "x.csv", what="--items-out")
    check_output_path(tmp_path / "missing" / "x.csv")           # the API still creates parent folders
    out = OutputPath(str(tmp_path / "t.csv"), inputs=[tmp_path / "in.csv"])
    assert out == str(tmp_path / "t.csv") and out.path == tmp_path / "t.csv"
    assert type(pickle.loads(pickle.dumps(out))) is str and type(copy.deepcopy(out)) is str
    out.write_table(LOG)
    assert pd.read_csv(out).shape == (2, 3) and sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]
    pq = OutputPath(tmp_path / "t.parquet")
    pq.write_table(LOG)
    assert pd.read_parquet(pq).shape == (2, 3)
