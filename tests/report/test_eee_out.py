"""``export`` / :func:`mrcstats.write_eee` write their folder as one output (issue 35): built beside it and
moved into place, never into the folder read, and the files already there are kept."""
from __future__ import annotations

from pathlib import Path

import pytest

import mrcstats
from mrcstats.cli import main
from mrcstats.errors import InputError


def _log(path: Path, models=("m1", "m2", "m3")) -> Path:
    path.write_text("model,item,correct\n" + "".join(f"{m},i{i},{(i + k) % 2}\n" for k, m in enumerate(models)
                                                     for i in range(4)))
    return path


def _tree(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def test_export_keeps_what_is_there_and_adds(tmp_path, capsys):
    out = tmp_path / "data"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    assert main(["export", str(_log(tmp_path / "a.csv")), "--out", str(out), "--timestamp", "1"]) == 0
    first = _tree(out)
    assert main(["export", str(_log(tmp_path / "b.csv", ("m4",))), "--out", str(out), "--timestamp", "1"]) == 0
    second = _tree(out)
    assert {k: v for k, v in second.items() if k in first} == first      # nothing lost or changed
    assert len([k for k in second if k.endswith(".json")]) == 4          # m1..m4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "b.csv", "data"]   # no staging folder left
    capsys.readouterr()


def test_export_never_writes_into_the_folder_it_reads(tmp_path, capsys):
    d = tmp_path / "logs"
    d.mkdir()
    _log(d / "a.csv")
    before = _tree(tmp_path)
    for argv in (["export", str(d), "--out", str(d)], ["export", str(d), "--out", str(d / "eee")],
                 ["export", str(d / "a.csv"), "--out", str(d)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "input" in err and "Traceback" not in err
        assert _tree(tmp_path) == before
    with pytest.raises(InputError, match="write_eee .*holds the input"):   # the API: the files the log was read from
        mrcstats.write_eee(mrcstats.read_log(d), d)
    assert _tree(tmp_path) == before


def test_a_failure_half_way_leaves_the_folder_as_it_was(tmp_path, monkeypatch):
    out = tmp_path / "data"
    log = mrcstats.read_log(_log(tmp_path / "a.csv"))
    mrcstats.write_eee(log, out, retrieved_timestamp="1", evaluation_name="old")
    before = _tree(out)
    calls = []
    real = Path.write_bytes

    def failing(self, data):
        calls.append(self)
        if len(calls) == 3:        # the second model's first file
            raise OSError(28, "No space left on device")
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", failing)
    with pytest.raises(InputError, match="No space left on device.*nothing was changed"):
        mrcstats.write_eee(log, out, retrieved_timestamp="2", evaluation_name="new")
    monkeypatch.undo()
    assert _tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "data"]
