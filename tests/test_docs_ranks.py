"""Every example of docs/ranks.md runs: the Python block (it writes the log the CLI lines read), then the CLI
lines in-process, in a temporary folder. The MMLU-Pro recipe (download and benchmark on real data) is skipped."""
from __future__ import annotations

import shlex
from pathlib import Path

from mrcstats.cli import main

from ._docblocks import blocks, cli_lines

DOC = Path(__file__).resolve().parents[1] / "docs" / "ranks.md"
SKIP = ("git clone", "mkdir -p /tmp/mmlupro_json", "ranks_mmlu_pro.py")


def test_ranks_doc_examples_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    ran = 0
    for _, lang, body in blocks(DOC):
        if lang == "python":
            exec(compile(body, str(DOC), "exec"), {})  # noqa: S102 - the doc is ours
            ran += 1
        elif lang == "bash":
            for line in cli_lines(body):
                if any(s in line for s in SKIP):
                    continue
                argv = shlex.split(line, comments=True)
                assert argv[0] == "mrcstats", line
                assert main(argv[1:]) == 0, line
                ran += 1
    out = capsys.readouterr().out
    assert ran == 4 and "Rank confidence sets" in out and '"top_k"' in out


def test_doc_names_the_benchmarks():
    text = DOC.read_text(encoding="utf-8")
    assert "python benchmarks/bench_ranks.py" in text and "benchmarks/ranks_mmlu_pro.py" in text
