"""The one reader of fenced code blocks in the README and the docs pages, shared by every test that runs
documentation examples (tests/test_readme.py and the pages with tests of their own)."""
from __future__ import annotations

import re
import textwrap
from pathlib import Path

_FENCE = re.compile(r"^[ \t]*```(\w+)\n(.*?)^[ \t]*```", re.DOTALL | re.MULTILINE)


def blocks(page: Path) -> list[tuple[int, str, str]]:
    """``(line, language, body)`` of every fenced block of ``page`` whose info string is one word
    (```` ```python exec="1" ```` blocks are run by the docs build, not here); bodies dedented."""
    text = page.read_text(encoding="utf-8")
    return [(text[: m.start()].count("\n") + 1, m.group(1), textwrap.dedent(m.group(2)))
            for m in _FENCE.finditer(text)]


def cli_lines(body: str) -> list[str]:
    """The commands of a bash block: comments and blank lines dropped, ``\\`` continuations joined."""
    out: list[str] = []
    cur = ""
    for raw in body.splitlines():
        line = raw.rstrip()
        if cur:
            cur += " " + line.strip().rstrip("\\").strip()
        elif line.strip() and not line.strip().startswith("#"):
            cur = line.strip().rstrip("\\").strip()
        else:
            continue
        if not line.endswith("\\"):
            out.append(cur)
            cur = ""
    return out


def run_page(page: Path, skip: tuple[str, ...] = ()) -> int:
    """Run every example of ``page`` in order, in the current folder: Python blocks executed, the CLI lines of
    bash blocks run in-process (each must exit 0; lines containing one of ``skip`` are left out). Returns
    how many blocks and lines ran."""
    import shlex

    from mrcstats.cli import main

    ran = 0
    for _, lang, body in blocks(page):
        if lang == "python":
            exec(compile(body, str(page), "exec"), {})  # noqa: S102 - the docs are ours
            ran += 1
        elif lang == "bash":
            for line in cli_lines(body):
                if any(s in line for s in skip):
                    continue
                argv = shlex.split(line, comments=True)
                assert argv[0] == "mrcstats", line
                assert main(argv[1:]) == 0, line
                ran += 1
    return ran
