"""Every example of docs/screening.md runs: Python blocks are executed, CLI lines are run in-process, in a
temporary folder, in order (the first Python block writes the generated log the others read). Lines that
download the public MMLU-Pro outputs or run the benchmark on them are skipped (the benchmark reads real data)."""
from __future__ import annotations

from pathlib import Path

import pytest

from ._docblocks import run_page

DOC = Path(__file__).resolve().parents[1] / "docs" / "screening.md"
SKIP = ("git clone", "mkdir -p /tmp/mmlupro_json", "bench_screen.py")


def test_screening_doc_examples_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    ran = run_page(DOC, SKIP)
    out = capsys.readouterr().out
    assert ran >= 7 and "Item screen" in out
    assert (tmp_path / "screen_items.csv").is_file() and (tmp_path / "review.csv").is_file()
    from mrcstats.io import read_log

    assert read_log(tmp_path / "fixed.parquet").attrs["relabel"][0]["changed"] == 1


def test_doc_exists_with_the_benchmark_command():
    text = DOC.read_text(encoding="utf-8")
    assert "python benchmarks/bench_screen.py" in text
    pytest.importorskip("yaml")
