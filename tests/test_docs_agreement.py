"""Every example of docs/agreement.md runs: the Python block is executed (it writes ratings.csv and judged.csv),
then the CLI lines run in-process, in a temporary folder, in order. Lines that run the benchmark on the real
JUDGE-BENCH data are skipped (the benchmark reads data that is not in the repository)."""
from __future__ import annotations

import json
import shlex
from pathlib import Path

from mrcstats.cli import main

from ._docblocks import blocks, cli_lines

DOC = Path(__file__).resolve().parents[1] / "docs" / "agreement.md"


def test_agreement_doc_examples_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    ran = 0
    for _, lang, body in blocks(DOC):
        if lang == "python":
            exec(compile(body, str(DOC), "exec"), {})  # noqa: S102 - the doc is ours
            ran += 1
        elif lang == "bash":
            for line in cli_lines(body):
                argv = shlex.split(line, comments=True)
                assert argv[0] == "mrcstats", line
                assert main(argv[1:]) == 0, line
                ran += 1
    out = capsys.readouterr().out
    assert ran == 5 and "Agreement of 3 raters on 60 items" in out and "prediction-powered" in out
    last = json.loads(out[out.rindex('{"human"'):])     # the last line ran with --json: one object
    assert last["target"] == "rows" and last["tune"] is True and len(last["models"]) == 2


def test_doc_names_the_benchmark_and_its_numbers():
    text = DOC.read_text(encoding="utf-8")
    assert "benchmarks/bench_judge_agreement.py" in text and "dmg-illc/JUDGE-BENCH" in text
    assert (Path(__file__).resolve().parents[1] / "benchmarks" / "bench_judge_agreement.py").is_file()
