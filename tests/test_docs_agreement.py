"""Every example of docs/agreement.md runs: the Python block is executed (it writes ratings.csv and judged.csv),
then the CLI lines run in-process, in a temporary folder, in order. Lines that run the benchmark on the real
JUDGE-BENCH data are skipped (the benchmark reads data that is not in the repository)."""
from __future__ import annotations

import json
from pathlib import Path

from ._docblocks import run_page

DOC = Path(__file__).resolve().parents[1] / "docs" / "agreement.md"


def test_agreement_doc_examples_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    ran = run_page(DOC)
    out = capsys.readouterr().out
    assert ran == 10 and "Agreement of 3 raters on 60 items" in out and "prediction-powered" in out
    objs = [json.loads(ln) for ln in out.splitlines() if ln.startswith('{"human"')]   # each --json line: one object
    assert len(objs) == 2
    one = objs[0]
    assert one["target"] == "rows" and one["ppi"] == "plain" and len(one["models"]) == 2
    assert "PPI++ cross-fit (lambda from 5 folds" in out          # the default rule, named in the summaries
    panel = objs[1]["panel"]
    assert panel["judges"] == ["gpt", "claude", "llama"] and panel["k_eff"] < 3
    assert (tmp_path / "judge.pdf").is_file() and (tmp_path / "judge_figures" / "a0_judge_correlation.pdf").is_file()
    assert "over-rating (judge > human): no model effect, LRT chi2" in out


def test_doc_names_the_benchmark_and_its_numbers():
    text = DOC.read_text(encoding="utf-8")
    assert "benchmarks/bench_judge_agreement.py" in text and "dmg-illc/JUDGE-BENCH" in text
    assert (Path(__file__).resolve().parents[1] / "benchmarks" / "bench_judge_agreement.py").is_file()
