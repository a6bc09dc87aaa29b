"""The README's "Comparing models" examples run as written (Python block, then every shell command)."""
from __future__ import annotations

import json
import re
import runpy
import shlex
from pathlib import Path

from mrcstats.cli import main

README = Path(__file__).resolve().parents[2] / "README.md"


def _section() -> str:
    text = README.read_text()
    m = re.search(r"<!-- section:compare -->(.*?)<!-- /section:compare -->", text, re.DOTALL)
    assert m, "README has a 'Comparing models' section"
    return m.group(1)


def test_readme_compare_examples_run(tmp_path, monkeypatch, capsys):
    sec = _section()
    py = re.search(r"```python\n(.*?)```", sec, re.DOTALL).group(1)
    sh = re.search(r"```bash\n(.*?)```", sec, re.DOTALL).group(1)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "example.py").write_text(py)
    runpy.run_path(str(tmp_path / "example.py"), run_name="readme_example")
    out = capsys.readouterr().out
    assert "Models ranked by accuracy" in out and "969 items" in out
    assert (tmp_path / "compare_demo.parquet").exists()
    for line in [ln for ln in sh.splitlines() if ln.strip().startswith("mrcstats ")]:
        argv = shlex.split(line.split("#")[0])[1:]
        code = main(argv)
        out, err = capsys.readouterr()
        assert code == 0, (line, err)
        if "--json" in argv:
            json.loads(out)
