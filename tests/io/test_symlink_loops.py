"""A loop of symbolic links given to any command is one clear InputError, exit 2 (issue 24, item 7: it was a
RuntimeError from Path.resolve, exit 1); inside a folder a loop or a broken link is refused, not skipped."""
from __future__ import annotations

import os

import pytest
from tests.fuzz._gen import run_cli

from mrcstats.errors import InputError

LOG = "model,item,correct\na,1,1\nb,1,0\n"


@pytest.fixture
def loop(tmp_path):
    try:
        os.symlink("b", tmp_path / "a")
        os.symlink("a", tmp_path / "b")
    except (OSError, NotImplementedError):  # pragma: no cover - no symlinks here
        pytest.skip("symbolic links not available")
    (tmp_path / "l.csv").write_text(LOG)
    return tmp_path


@pytest.mark.parametrize("argv", [
    ["ingest", "{a}"], ["ingest", "{a}", "--out", "{d}/x.parquet"], ["ingest", "{a}", "--dataset", "{d}/ds"],
    ["ingest", "{d}/l.csv", "--dataset", "{a}"], ["summary", "{a}"], ["summary", "{a}", "--json"],
    ["report", "{a}", "--out", "{d}/r.pdf"], ["compare", "{a}"], ["glmer", "{a}", "--formula", "correct ~ 1 + (1|item)"],
])
def test_loop_is_one_clear_error(loop, argv) -> None:
    argv = [x.replace("{a}", str(loop / "a")).replace("{d}", str(loop)) for x in argv]
    r = run_cli(argv)
    assert r.code == 2, (argv, r.code, r.err)
    assert "Traceback" not in r.err and r.out == ""
    assert "loop of symbolic links" in r.err and f"{loop / 'a'}" in r.err, r.err
    assert (loop / "l.csv").read_text() == LOG


def test_loop_and_broken_link_inside_a_folder_are_refused(loop) -> None:
    d = loop / "runs"
    d.mkdir()
    (d / "l.csv").write_text(LOG)
    os.symlink("y.csv", d / "x.csv")
    os.symlink("x.csv", d / "y.csv")
    r = run_cli(["ingest", str(d)])
    assert r.code == 2 and "loop of symbolic links" in r.err and "x.csv" in r.err
    for f in ("x.csv", "y.csv"):
        (d / f).unlink()
    os.symlink("gone.csv", d / "z.csv")
    r = run_cli(["ingest", str(d)])
    assert r.code == 2 and "z.csv: a symbolic link to gone.csv, which does not exist" in r.err


def test_api_raises_input_error(loop) -> None:
    from mrcstats import open_log, read_log
    from mrcstats._files import resolve_path

    for f in (read_log, open_log, resolve_path):
        with pytest.raises(InputError, match="loop of symbolic links"):
            f(loop / "a")
