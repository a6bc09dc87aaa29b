"""MkDocs hooks of the documentation site (mkdocs.yml: ``hooks: [scripts/docs_hooks.py]``).

- The CLI reference: ``<!-- cli-reference -->`` in a page is replaced by one section per subcommand,
  generated from ``mrcstats.cli.build_parser()`` (usage, description, every option with its help), so the
  reference cannot drift from the parser.
- The changelog page: ``<!-- changelog -->`` is replaced by ``CHANGELOG.md`` (one source).
- Executed tutorials (markdown-exec) run in a fresh temporary folder, with this checkout's ``src`` first on
  ``PYTHONPATH`` and the running interpreter's ``bin`` first on ``PATH`` (so ``mrcstats`` in a shell block is
  the package being documented); the folder is removed after the build. No network is used: the data are
  made by ``mrcstats demo`` and ``mrcstats.tasks.simulate``.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARKER = "<!-- cli-reference -->"
CHANGELOG = "<!-- changelog -->"
_state: dict[str, str] = {}


def on_startup(command: str, dirty: bool) -> None:
    src = str(ROOT / "src")
    if src not in sys.path:
        sys.path.insert(0, src)
    os.environ["PYTHONPATH"] = os.pathsep.join([src, *filter(None, [os.environ.get("PYTHONPATH")])])
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    os.environ.setdefault("MPLBACKEND", "Agg")
    os.environ.setdefault("COLUMNS", "100")


def on_pre_build(config) -> None:
    _state["cwd"] = os.getcwd()
    _state["tmp"] = tempfile.mkdtemp(prefix="mrcstats-docs-")
    os.chdir(_state["tmp"])


def on_post_build(config) -> None:
    tmp = Path(_state.get("tmp", ""))
    if config is not None and (tmp / "report.html").is_file():  # the getting-started page's report, linked there
        target = Path(config["site_dir"]) / "getting-started" / "report.html"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(tmp / "report.html", target)
    os.chdir(_state.pop("cwd", str(ROOT)))
    shutil.rmtree(_state.pop("tmp", ""), ignore_errors=True)


def on_build_error(error) -> None:
    on_post_build(None)


def _options(p: argparse.ArgumentParser) -> list[str]:
    rows = ["| option | meaning |", "| --- | --- |"]
    for a in p._actions:
        if isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        name = ", ".join(a.option_strings) or a.dest
        if a.option_strings and a.nargs != 0:
            name += f" {a.metavar or a.dest.upper()}"
        if a.choices and not isinstance(a.choices, dict):
            name += " {" + ",".join(map(str, a.choices)) + "}"
        text = (a.help or "").replace("%(default)s", str(a.default)).replace("|", "\\|").replace("\n", " ")
        name = name.replace("|", "\\|")
        rows.append(f"| `{name}` | {text} |")
    return rows


def cli_reference() -> str:
    from mrcstats.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out = [(f"`mrcstats --version` prints the version; `mrcstats COMMAND --help` prints what is below. "
            f"{len(sub.choices)} commands, generated from `mrcstats.cli.build_parser()` at build time."), ""]
    helps = {a.dest: a.help for a in sub._choices_actions}
    out += ["| command | what it does |", "| --- | --- |"]
    out += [f"| [`{name}`](#{name}) | {helps.get(name, '') or ''} |" for name in sub.choices]
    for name, p in sub.choices.items():
        usage = p.format_usage().replace("usage: ", "").strip()
        out += ["", f"## {name} {{#{name}}}", "", "```text", usage, "```", ""]
        if p.description:
            out += [p.description, ""]
        out += _options(p)
    return "\n".join(out) + "\n"


def on_page_markdown(markdown: str, page, config, files) -> str:
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, cli_reference())
    if CHANGELOG in markdown:
        markdown = markdown.replace(CHANGELOG, (ROOT / "CHANGELOG.md").read_text(encoding="utf-8"))
    return markdown
