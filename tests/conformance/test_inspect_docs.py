"""Every example in docs/inspect.md runs as written on real Inspect logs (tests/conformance/inspect/).

``logs/run.eval`` is the fixture ``epochs_at_least_2.eval`` and ``logs/killed.eval`` is ``sigkill.eval``;
``bash`` blocks run in-process through the CLI entry point, in order, in one temporary folder, and must exit
0; ``python`` blocks are executed there. ``text`` blocks are output shown, not run.
"""
from __future__ import annotations

import shlex
import shutil
import warnings
from pathlib import Path

import pytest

from mrcstats.cli import main

from .._docblocks import blocks

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "inspect.md"
FIX = Path(__file__).resolve().parent / "inspect"


def _blocks() -> list[tuple[str, str]]:
    return [(lang, body) for _, lang, body in blocks(DOC)]


@pytest.fixture()
def workdir(tmp_path, monkeypatch):
    (tmp_path / "logs").mkdir()
    shutil.copy(FIX / "epochs_at_least_2.eval", tmp_path / "logs" / "run.eval")
    shutil.copy(FIX / "sigkill.eval", tmp_path / "logs" / "killed.eval")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_doc_examples_run(workdir, capsys):
    blocks = _blocks()
    assert any(k == "bash" for k, _ in blocks) and any(k == "python" for k, _ in blocks)
    ran = 0
    for kind, body in blocks:
        if kind == "bash":
            for line in body.strip().splitlines():
                argv = shlex.split(line, comments=True)
                if not argv:
                    continue
                assert argv[0] == "mrcstats", line
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    code = main(argv[1:])
                out, err = capsys.readouterr()
                assert code == 0, f"{line}: exit {code}: {err}"
                ran += 1
                if "summary logs/run.eval" in line:
                    assert "trial level" in out and "Inspect headline" in out and "reducer at_least_2" in out
                if "killed.eval" in line:
                    assert "not run: Inspect run killed (no header.json)" in err
        elif kind == "python":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                exec(compile(body, str(DOC), "exec"), {})  # noqa: S102 - the page is ours
            capsys.readouterr()
            ran += 1
    assert ran >= 7


def test_doc_shows_the_real_headline(workdir, capsys):
    """The output shown in the page is what `mrcstats summary logs/run.eval` prints."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["summary", "logs/run.eval"]) == 0
    out = capsys.readouterr().out
    shown = next(b for k, b in _blocks() if k == "text" and "Inspect headline" in b)
    for line in shown.splitlines():
        if line.strip().startswith("mockllm/model tiny_qa"):
            assert line.strip() in out
