"""Every example of docs/adaptive.md runs: the Python block (it writes the bank and logs the CLI lines read),
then the CLI lines in-process, in a temporary folder. Endpoint and MMLU-Pro lines are ``text`` blocks (not run)."""
from __future__ import annotations

from pathlib import Path

from ._docblocks import run_page

DOC = Path(__file__).resolve().parents[1] / "docs" / "adaptive.md"


def test_adaptive_doc_examples_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    ran = run_page(DOC)
    out = capsys.readouterr().out
    assert ran == 4 and "Adaptive run of m00" in out and '"predicted_accuracy_ci"' in out
    assert (tmp_path / "trace.csv").exists() and (tmp_path / "bank2.json").exists()


def test_doc_names_the_benchmark():
    assert "benchmarks/bench_cat_mmlu_pro.py" in DOC.read_text(encoding="utf-8")
