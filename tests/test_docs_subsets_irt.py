"""The examples of docs/subsets_irt.md run as written, in order, in an empty folder: python blocks are
executed, ``mrcstats`` lines run in-process and exit 0."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "subsets_irt.md"


def test_docs_subsets_irt_examples_run(tmp_path, monkeypatch, capsys):
    from mrcstats.cli import main

    monkeypatch.chdir(tmp_path)
    text = DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"```(bash|python)\n(.*?)```", text, re.DOTALL)
    assert len(blocks) >= 5
    outs = []
    for kind, body in blocks:
        if kind == "python":
            exec(compile(body, str(DOC), "exec"), {})  # noqa: S102 - the doc is ours
            continue
        for line in body.splitlines():
            if not line.strip() or line.startswith("#"):
                continue
            argv = shlex.split(line)
            assert argv[0] == "mrcstats"
            assert main(argv[1:]) == 0, line
            outs.append(capsys.readouterr().out)
    # what the text claims: the random k = 10 row is the same with and without the other options
    row = [re.search(r"^random\s+irt\s+.*$", o, re.MULTILINE).group(0).split() for o in outs[:2]]
    assert row[0][2] == row[1][3]                      # k = 10 is the only column, then the middle of 5, 10, 20
    assert '"stratify": "subject"' in outs[4]
    assert "caveat" in outs[5] and "caveat" in outs[6]
