"""Every example of docs/ranks.md runs: the Python block (it writes the log the CLI lines read), then the CLI
lines in-process, in a temporary folder. The MMLU-Pro recipe (download and benchmark on real data) is skipped."""
from __future__ import annotations

from pathlib import Path

from ._docblocks import run_page

DOC = Path(__file__).resolve().parents[1] / "docs" / "ranks.md"
SKIP = ("git clone", "mkdir -p /tmp/mmlupro_json", "ranks_mmlu_pro.py")


def test_ranks_doc_examples_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    ran = run_page(DOC, SKIP)
    out = capsys.readouterr().out
    assert ran == 4 and "Rank confidence sets" in out and '"top_k"' in out


def test_doc_names_the_benchmarks():
    text = DOC.read_text(encoding="utf-8")
    assert "python benchmarks/bench_ranks.py" in text and "benchmarks/ranks_mmlu_pro.py" in text
