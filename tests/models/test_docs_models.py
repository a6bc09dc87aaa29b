"""Every example in docs/models.md runs, in order, in one temporary folder (Python blocks executed, CLI lines run
in-process; the first block writes the ``scores.csv`` the others read)."""
from __future__ import annotations

import json
import shlex
from pathlib import Path

from .._docblocks import blocks

DOC = Path(__file__).resolve().parents[2] / "docs" / "models.md"


def _blocks() -> list[tuple[str, str]]:
    return [(lang, body) for _, lang, body in blocks(DOC)]


def test_docs_models_examples_run(tmp_path, monkeypatch, capsys):
    from mrcstats.cli import main

    monkeypatch.chdir(tmp_path)
    blocks = _blocks()
    assert [lang for lang, _ in blocks].count("bash") == 3 and blocks[0][0] == "python"
    for lang, code in blocks:
        if lang == "python":
            exec(compile(code, str(DOC), "exec"), {})  # noqa: S102 - the docs are ours
            continue
        for line in (x.strip() for x in code.splitlines()):
            if not line or line.startswith("#"):
                continue
            argv = shlex.split(line)
            capsys.readouterr()
            assert main(argv[1:]) == 0, line
            obj = json.loads(capsys.readouterr().out)
            assert obj["fixef"] and obj["family"] in ("poisson", "gaussian", "betabinomial")
