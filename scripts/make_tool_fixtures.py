"""Regenerate the conformance fixtures (tests/conformance/<tool>/) with the real eval tools, offline.

Usage::

    python scripts/make_tool_fixtures.py                      # every tool
    python scripts/make_tool_fixtures.py inspect harness      # some of them
    python scripts/make_tool_fixtures.py lighteval --lighteval-python /path/to/venv/bin/python

Each tool has its own generator in ``scripts/tool_fixtures/<tool>_fixtures.py`` (runnable on its own, with
``main(out_dir)``); this script runs them one after another, each in its own process, into
``tests/conformance/<tool>/``. The generators install the tool into a scratch venv (Inspect AI, lm-eval), or
run the tool's own converters (Every Eval Ever: a Python >= 3.12 with ``every-eval-ever``), or copy a run a
tool wrote from its public repository (HELM), and write ``manifest.json`` with the tool's version and its own
headline numbers beside the files. lighteval must run inside a Python that has lighteval installed
(``--lighteval-python``). Installing the tools needs the package index; the tests that read the fixtures need
nothing.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HERE = REPO / "scripts" / "tool_fixtures"
#: tool -> generator script (scripts/tool_fixtures/) -- the order they run in
TOOLS = {"inspect": "inspect_fixtures.py", "harness": "harness_fixtures.py", "eee": "eee_fixtures.py",
         "helm": "helm_fixtures.py", "lighteval": "lighteval_fixtures.py"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tools", nargs="*", metavar="TOOL",
                    help=f"which tools (default: all): {', '.join(TOOLS)}")
    ap.add_argument("--lighteval-python", help="a Python with lighteval installed (lighteval is skipped without it)")
    ap.add_argument("--eee-python", default="python3.12", help="a Python >= 3.12 for every-eval-ever")
    a = ap.parse_args(argv)
    unknown = [t for t in a.tools if t not in TOOLS]
    if unknown:
        ap.error(f"unknown tool {unknown[0]!r}; choose from {', '.join(TOOLS)}")
    failed = []
    for tool in a.tools or list(TOOLS):
        out = REPO / "tests" / "conformance" / tool
        cmd = [sys.executable, str(HERE / TOOLS[tool]), str(out)]
        if tool == "eee":
            cmd += ["--python", a.eee_python]
        if tool == "lighteval":
            if not a.lighteval_python:
                print("make_tool_fixtures: lighteval skipped (pass --lighteval-python)", file=sys.stderr)
                continue
            cmd[0] = a.lighteval_python
        print(f"make_tool_fixtures: {tool} -> {out}", file=sys.stderr)
        if subprocess.run(cmd, check=False).returncode != 0:
            failed.append(tool)
    if failed:
        print(f"make_tool_fixtures: failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
