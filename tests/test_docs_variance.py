"""Every example of docs/variance.md runs: the Python block (it writes the log the CLI lines read), then the CLI
lines in-process, in a temporary folder."""
from __future__ import annotations

from pathlib import Path

from ._docblocks import run_page

DOC = Path(__file__).resolve().parents[1] / "docs" / "variance.md"


def test_variance_doc_examples_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    ran = run_page(DOC, ())
    out = capsys.readouterr().out
    assert ran == 4 and "Variance components" in out and '"reps_needed"' in out
