"""A report replaces its PDF, tables and figures together (issue 24, item 10): a build that fails or is
killed (SIGKILL) half-way leaves the previous report whole, byte for byte; a staging folder left by a
killed build is removed at the next run, and a build killed while moving its outputs into place is
finished there (the outputs are then the new report, never a mix)."""
from __future__ import annotations

import hashlib
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

from mrcstats._staging import recover_stale
from mrcstats.report import build_report

SPEC = "title: {title}\nlogs:\n  - path: log.csv\nanalyses:\n  - type: summary\n    by: [model]\n  - type: compare\n"


def _make(d: Path, title: str, seed: int) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    rnd = random.Random(seed)
    rows = [{"model": m, "item": str(i), "correct": rnd.randint(0, 1)} for m in ("m1", "m2", "m3") for i in range(20)]
    pd.DataFrame(rows).to_csv(d / "log.csv", index=False)
    (d / "spec.yaml").write_text(SPEC.format(title=title))
    return d / "spec.yaml"


def _tree(d: Path) -> dict[str, str]:
    """Every file below ``d`` (hidden ones too) with its hash."""
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(d.rglob("*")) if p.is_file()}


def _visible(tree: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in tree.items() if not any(part.startswith(".") for part in Path(k).parts)}


@pytest.fixture(scope="module")
def refs(tmp_path_factory):
    """Report A and report B built normally, each in its own folder: the references."""
    root = tmp_path_factory.mktemp("refs")
    out = {}
    for name, seed in (("A", 1), ("B", 2)):
        spec = _make(root / name, f"Report {name}", seed)
        build_report(spec, root / name / "out" / "rep.pdf")
        out[name] = _visible(_tree(root / name / "out"))
    assert out["A"] != out["B"] and len(out["A"]) > 8
    return out


def _workdir(tmp_path: Path) -> tuple[Path, Path]:
    """A folder holding report A, and the spec of report B beside it."""
    spec_a = _make(tmp_path / "A", "Report A", 1)
    spec_b = _make(tmp_path / "B", "Report B", 2)
    build_report(spec_a, tmp_path / "out" / "rep.pdf")
    return spec_b, tmp_path / "out"


def test_failure_between_steps_leaves_old_report(tmp_path, refs, monkeypatch) -> None:
    from mrcstats.report import build as B

    spec_b, out = _workdir(tmp_path)
    assert _tree(out) == refs["A"]
    for step in ("save_figure", "pdf"):  # after the tables, after the figures
        if step == "save_figure":
            monkeypatch.setattr(B.F, "save_figure", _boom)
        else:
            monkeypatch.undo()
            monkeypatch.setattr(B.ReportDocument, "build", _boom)
        with pytest.raises(RuntimeError, match="boom"):
            build_report(spec_b, out / "rep.pdf")
        assert _tree(out) == refs["A"], step  # old report whole, no staging folder left
    monkeypatch.undo()
    build_report(spec_b, out / "rep.pdf")
    assert _tree(out) == refs["B"]


def _boom(*a, **k):
    raise RuntimeError("boom")


_KILLABLE = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    import mrcstats._staging as S
    from mrcstats.report import build as B
    marker, where = Path(sys.argv[3]), sys.argv[4]

    def pause():
        marker.write_text("ready")
        time.sleep(600)

    if where == "build":          # killed while writing: tables written, PDF not yet
        B.ReportDocument.build = lambda self, path: pause()
    else:                         # killed in the commit: folders moved into place, PDF not yet
        real = os.replace
        def replace(src, dst):
            if Path(src).parent.name == "new" and Path(dst).parent.name != "new":
                pause()
            return real(src, dst)
        S.os.replace = replace
    B.build_report(sys.argv[1], sys.argv[2])
""")


def _kill_during(spec: Path, out: Path, where: str, tmp_path: Path) -> None:
    marker = tmp_path / f"ready-{where}"
    proc = subprocess.Popen([sys.executable, "-c", _KILLABLE, str(spec), str(out / "rep.pdf"), str(marker), where],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        for _ in range(6000):  # up to 10 min on a loaded machine (a timeout, not a timing assertion)
            if marker.exists() or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert marker.exists(), proc.communicate(timeout=5)[1].decode()[-2000:]
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL (POSIX)")
def test_kill_during_build_leaves_old_report_and_next_run_cleans_up(tmp_path, refs) -> None:
    spec_b, out = _workdir(tmp_path)
    _kill_during(spec_b, out, "build", tmp_path)
    tree = _tree(out)
    assert _visible(tree) == refs["A"]                            # the old report, whole
    assert any(k.startswith(".rep.pdf.") for k in tree)            # the killed build's staging folder
    assert recover_stale(out, "rep.pdf") == 1
    assert _tree(out) == refs["A"]                                 # removed, nothing else touched
    _kill_during(spec_b, out, "build", tmp_path)
    build_report(spec_b, out / "rep.pdf")                          # the next run cleans up too
    assert _tree(out) == refs["B"]


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL (POSIX)")
def test_kill_during_commit_is_finished_by_the_next_run(tmp_path, refs) -> None:
    spec_b, out = _workdir(tmp_path)
    _kill_during(spec_b, out, "commit", tmp_path)
    assert _visible(_tree(out)) != refs["A"]  # killed between the renames: the folders are new, the PDF old
    assert recover_stale(out, "rep.pdf") == 1
    assert _tree(out) == refs["B"]            # rolled forward: the new report, whole
    _kill_during(_make(tmp_path / "A2", "Report A", 1), out, "commit", tmp_path)
    r = subprocess.run([sys.executable, "-m", "mrcstats", "report", str(tmp_path / "A2" / "nope.yaml"), "--out",
                        str(out / "rep.pdf")], check=False, capture_output=True, text=True)
    assert r.returncode == 2  # a run that fails early still leaves a consistent report (finished or old)
    assert _visible(_tree(out)) in (refs["A"], refs["B"])


def test_files_a_person_put_beside_the_report_are_kept(tmp_path, refs) -> None:
    spec_b, out = _workdir(tmp_path)
    (out / "rep_tables" / "notes.txt").write_text("mine")
    (out / "rep_figures" / "drafts").mkdir()
    (out / "rep_figures" / "drafts" / "old.pdf").write_bytes(b"%PDF mine")
    build_report(spec_b, out / "rep.pdf")
    tree = _tree(out)
    assert tree.pop("rep_tables/notes.txt") and tree.pop("rep_figures/drafts/old.pdf")
    assert tree == refs["B"]
