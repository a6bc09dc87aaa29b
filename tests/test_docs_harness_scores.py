"""The commands of docs/harness.md and docs/scores.md run as written (from the repository root, on the
committed lm-eval fixtures): every ``bash`` line exits 0 and every ``python`` block runs."""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from ._docblocks import blocks, cli_lines

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "docs" / "harness.md", ROOT / "docs" / "scores.md"]


def _blocks():
    out = []
    for doc in DOCS:
        for line, lang, body in blocks(doc):
            if lang == "python":
                out.append(pytest.param("python", body, id=f"{doc.name}:{line}"))
            elif lang == "bash":
                for cmd in cli_lines(body):
                    out.append(pytest.param("bash", cmd, id=f"{doc.name}:{line}:{cmd.split()[1]}"))
    return out


@pytest.mark.parametrize(("kind", "body"), _blocks())
def test_doc_example_runs(kind, body):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    if kind == "python":
        r = subprocess.run([sys.executable, "-c", body], cwd=ROOT, env=env, capture_output=True, text=True, check=False,
                           timeout=300)
    else:
        argv = shlex.split(body)
        assert argv[0] == "mrcstats"
        r = subprocess.run([sys.executable, "-m", "mrcstats", *argv[1:]], cwd=ROOT, env=env, capture_output=True,
                           text=True, check=False, timeout=300)
    assert r.returncode == 0, r.stderr
