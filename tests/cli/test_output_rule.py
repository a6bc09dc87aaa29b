"""The one output rule of the command line, for every option that writes a path, found from the parsers.

Every argument of every command (nested ones too: ``elagent generate``, ``models download``) is walked from
:func:`mrcstats.cli.build_parser`. One that looks like a path (a positional without choices, or an option
whose name or metavar says file, folder, log, CSV, ...) must be declared with ``add_input`` or ``add_output``
(:mod:`mrcstats.cli._common`); so a new ``--something-out`` added with plain ``add_argument`` fails here. Each
declared output is then run against its own input file, a folder (for a file) or the folder holding the input
(for a folder), the input folder itself, a missing parent folder, a place below a regular file and (Linux) one
the kernel refuses (``/proc``, where ``os.access`` says yes to root): exit 2,
one line on stderr naming the option, no traceback, and every file of the test folder byte-for-byte as it was
(the input unchanged, no partial or temporary file left).
"""
from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

import pytest

from mrcstats.cli import COMMANDS, build_parser, main
from mrcstats.cli._common import PATH_ROLE

CLI_DIR = Path(__file__).resolve().parents[2] / "src" / "mrcstats" / "cli"

# an option whose name has one of these words (split on "-") names a path
PATH_WORDS = {"out", "outdir", "output", "dir", "dataset", "cache", "file", "files", "path", "save", "dest",
              "review", "export", "spec", "taskfile", "log", "table"}
# ... or whose metavar says it (FILE, DIR, CSV, LOG..., or a file ending)
PATH_METAVAR = re.compile(r"(^|[^A-Z])(FILE|DIR|PATH|CSV|TSV|LOG|TABLE|TEXT_OR_FILE)([^A-Z]|$)|\.[a-z]{2,8}\b")
# options that look like a path but are not one (with the reason)
NOT_PATHS = {
    "--model": "a model NAME, or PATH=NAME naming the model of input files already given",
}


def _walk(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()):
    """(command words, parser) of every command and sub-command."""
    for a in parser._actions:      # argparse has no public list of a parser's arguments
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                yield (*words, name), sub
                yield from _walk(sub, (*words, name))


def _commands():
    seen = {}
    for words, p in _walk(build_parser()):
        seen.setdefault(words, p)
    assert set(COMMANDS) <= {w[0] for w in seen}
    return seen


def _looks_like_path(a: argparse.Action) -> bool:
    if a.nargs == 0 or isinstance(a, (argparse._SubParsersAction, argparse._HelpAction)):
        return False
    if a.choices is not None or a.type in (int, float):
        return False
    if not a.option_strings:
        return True
    if any(o in NOT_PATHS for o in a.option_strings):
        return False
    words = {w for o in a.option_strings for w in o.lstrip("-").lower().split("-")}
    return bool(words & PATH_WORDS) or bool(PATH_METAVAR.search(str(a.metavar or "")))


def _declared(p: argparse.ArgumentParser, role: str) -> list[argparse.Action]:
    return [a for a in p._actions if getattr(a, PATH_ROLE, None) == role]


def test_every_path_argument_is_declared():
    undeclared = []
    for words, p in _commands().items():
        for a in p._actions:
            if _looks_like_path(a) and getattr(a, PATH_ROLE, None) not in ("input", "output"):
                undeclared.append(f"mrcstats {' '.join(words)} {'/'.join(a.option_strings) or a.dest}")
    assert not undeclared, ("arguments that look like paths but are declared with neither add_input nor "
                            f"add_output (mrcstats.cli._common): {undeclared}")


def _outputs():
    out = []
    for words, p in _commands().items():
        for a in _declared(p, "output"):
            out.append(pytest.param(words, a.option_strings[0], id=" ".join((*words, a.option_strings[0]))))
    return out


def test_the_outputs_found():
    """The enumeration finds the writers the issue names (and so would find a new one)."""
    found = {v.id for v in _outputs()}
    for want in ("irt --items-out", "screen --items-out", "dif --out", "subset-eval --predictions-out",
                 "export --out", "ingest --out", "ingest --dataset", "features --out", "report --out",
                 "demo --outdir", "query --out", "elagent generate --out"):
        assert want in found


def _argv(words, p: argparse.ArgumentParser, flag: str, value: str, log: str) -> list[str]:
    """A command line that parses: the output under test set to ``value``, every input given ``log``, every
    other required argument a placeholder (the output rule runs before the command, so it is never read)."""
    argv = list(words)
    for a in p._actions:
        if isinstance(a, (argparse._SubParsersAction, argparse._HelpAction)) or flag in a.option_strings:
            continue
        if a.option_strings and not a.required:
            continue
        v = (log if getattr(a, PATH_ROLE, None) == "input" else str(a.choices and next(iter(a.choices)) or
             ("1" if a.type in (int, float) else "x")))
        argv += [a.option_strings[0], v] if a.option_strings else [v]
    return [*argv, flag, value]


def _tree(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize(("words", "flag"), _outputs())
def test_every_output_follows_the_rule(words, flag, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    p = _commands()[words]
    act = next(a for a in p._actions if flag in a.option_strings)
    kind = next(k for d, f, k, _ in p.get_default("_outputs") if f == flag)
    sfx = next(iter(next(s for d, f, _, s in p.get_default("_outputs") if f == flag) or [".csv"]))
    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / "log.csv"
    log.write_text("model,item,correct\nm1,i1,1\nm2,i1,0\n")
    (tmp_path / "a folder").mkdir()
    has_inputs = bool(_declared(p, "input"))
    cases = {"missing parent": tmp_path / "missing" / f"x{sfx}", "below a file": log / f"x{sfx}"}
    if Path("/proc/self").is_dir():     # Linux: writable by os.access for root, refused by the kernel
        cases["an unwritable place"] = Path("/proc") / f"mrcstats-x{sfx}"
    if kind != "folder":
        cases["a folder"] = tmp_path / "a folder"
    if has_inputs:
        cases["its input file"] = log
        cases["inside the input folder"] = logs / f"new{sfx}"
        if kind == "folder":
            cases["the folder holding the input"] = logs
    before = _tree(tmp_path)
    for case, value in cases.items():
        argv = _argv(words, p, flag, str(value), str(logs if case == "inside the input folder" else log))
        code = main(argv)
        err = capsys.readouterr().err
        what = f"{' '.join(argv)} ({case})"
        assert code == 2, f"{what}: exit {code}: {err}"
        assert err.count("\n") == 1 and "Traceback" not in err, f"{what}: {err}"
        assert err.startswith(f"mrcstats {words[0]}: error: {flag} "), f"{what}: {err}"
        assert _tree(tmp_path) == before, f"{what}: the files changed"
    assert act.dest    # (declared on the parser the command runs)


def test_cli_modules_write_only_through_the_rule():
    """No handler writes a file itself (``to_csv``, ``to_parquet``, ``open(..., "w")``, ``write_text``): it
    writes through its checked :class:`mrcstats._files.OutputPath` or an API that writes atomically."""
    bad = []
    for f in sorted(CLI_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                    "to_csv", "to_parquet", "to_json", "write_text", "write_bytes", "mkdir", "savefig"):
                bad.append(f"{f.name}:{node.lineno} .{node.func.attr}(")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open":
                bad.append(f"{f.name}:{node.lineno} open(")
    assert not bad, bad


def test_a_new_output_option_is_checked_without_more_code(tmp_path, capsys):
    """An option declared with add_output is checked by main (here: a parser built like a command module's)."""
    from mrcstats._files import OutputPath
    from mrcstats.cli._common import add_input, add_output, check_outputs

    p = argparse.ArgumentParser()
    add_input(p, "log", nargs="+")
    add_output(p, "--relabel-out", metavar="CSV")
    log = tmp_path / "log.csv"
    log.write_text("x\n")
    args = p.parse_args([str(log), "--relabel-out", str(tmp_path / "ok.csv")])
    check_outputs(args)
    assert isinstance(args.relabel_out, OutputPath)
    import pandas as pd

    args.relabel_out.write_csv(pd.DataFrame({"a": [1]}))
    assert (tmp_path / "ok.csv").read_text() == "a\n1\n"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["log.csv", "ok.csv"]   # no temporary file left
    from mrcstats.errors import InputError

    with pytest.raises(InputError, match="--relabel-out .*is the input"):
        check_outputs(p.parse_args([str(log), "--relabel-out", str(log)]))
