"""Every example of docs/datasets.md runs as written (in order, in a temporary folder).

``mrcstats demo --outdir DIR`` is replaced by writing the demo's simulated log (the report itself is
tested in tests/report/test_demo.py); other shell lines run in bash; an ``mrcstats`` line runs
in-process and must exit 0, or the code its ``# exit N`` comment names.
"""
from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

from mrcstats.cli import main

DOC = Path(__file__).resolve().parents[1] / "docs" / "datasets.md"


def test_docs_datasets_examples_run(tmp_path, monkeypatch, capsys):
    from mrcstats.io import write_log
    from mrcstats.tasks.simulate import simulate_log

    monkeypatch.chdir(tmp_path)
    blocks = re.findall(r"```(\w+)\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    assert len(blocks) >= 5
    for lang, body in blocks:
        if lang == "python":
            exec(compile(body, str(DOC), "exec"), {})  # noqa: S102 - the page is ours
            continue
        for line in body.splitlines():
            if not line.strip() or line.startswith("#"):
                continue
            want = int(m.group(1)) if (m := re.search(r"#\s*exit (\d+)", line)) else 0
            cmd = line.split("#", 1)[0].strip()
            if cmd.startswith("mrcstats demo"):
                out = Path(shlex.split(cmd)[-1])
                out.mkdir()
                write_log(simulate_log(seed=0).log, out / "demo_log.parquet")
            elif cmd.startswith("mrcstats "):
                assert main(shlex.split(cmd)[1:]) == want, cmd
            else:
                assert subprocess.run(["bash", "-c", cmd], check=False).returncode == want, cmd
    capsys.readouterr()
