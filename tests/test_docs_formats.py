"""Every example in docs/formats.md runs as written (from the repository root, on the committed fixtures):
CLI lines in-process, Python blocks executed. Only the fixture regeneration commands are not run here
(they install the tools and need the network)."""
from __future__ import annotations

import contextlib
import io
import shlex
from pathlib import Path

import pytest

from ._docblocks import blocks, cli_lines

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "formats.md"
SKIP = (("scripts/tool_fixtures/", "regenerates fixtures: installs eval tools and needs the network"),)


def _cases() -> list:
    out = []
    for line, lang, body in blocks(DOC):
        if lang == "bash":
            for cmd in cli_lines(body):
                why = next((w for p, w in SKIP if p in cmd), None)
                out.append(pytest.param("bash", cmd, id=f"L{line}:{cmd[:50]}",
                                        marks=[pytest.mark.skip(reason=why)] if why else []))
        elif lang == "python":
            out.append(pytest.param("python", body, id=f"L{line}:python"))
    return out


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """One folder for the whole page (later examples read what earlier ones wrote), with the fixtures."""
    d = tmp_path_factory.mktemp("docs")
    (d / "tests").mkdir()
    (d / "tests" / "conformance").symlink_to(ROOT / "tests" / "conformance")
    return d


@pytest.mark.parametrize("lang,code", _cases())
def test_docs_formats_example_runs(lang, code, workdir, monkeypatch):
    monkeypatch.chdir(workdir)
    if lang == "python":
        exec(compile(code, str(DOC), "exec"), {})  # noqa: S102 - the page is ours
        return
    from mrcstats.cli import main

    words = shlex.split(code, comments=True)
    assert words[0] == "mrcstats"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            code_ = main(words[1:])
        except SystemExit as exc:   # --help
            code_ = exc.code
    assert code_ == 0, code
