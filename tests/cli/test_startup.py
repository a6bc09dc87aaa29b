"""The command line starts light: ``--help`` and ``--version`` import neither numpy, pandas nor scipy, the
common commands do not import ``scipy.stats`` (its import alone takes about a second), and the in-memory
``glmer`` fit (read a table, fit, print) imports scipy only from the optimizer (models/native.py,
models/optimize.py). No wall-clock assertion: what is imported, and by whom, is checked in a fresh
interpreter (``python -X importtime``; an ``__import__`` hook that records the importer)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[2] / "src")
HEAVY = ("numpy", "pandas", "scipy", "pyarrow", "duckdb", "tqdm")


def _imported(*argv: str, cwd: Path | None = None) -> set[str]:
    """Modules a fresh ``python -X importtime -m mrcstats ARGV`` imported (from its stderr)."""
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "mrcstats", *argv], check=False,
                       capture_output=True, text=True, env=env, cwd=cwd, timeout=300)
    mods = {line.rsplit("|", 1)[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}
    assert mods, r.stderr[-2000:]
    return mods


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["glmer", "--help"], ["summary", "--help"]])
def test_help_and_version_import_no_heavy_library(argv):
    mods = _imported(*argv)
    heavy = sorted(m for m in mods if m.split(".")[0] in HEAVY)
    assert not heavy, f"mrcstats {' '.join(argv)} imported {heavy[:8]}"


def test_building_the_parser_imports_no_heavy_library():
    code = ("import sys; from mrcstats.cli import build_parser; build_parser(); "
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))")
    r = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": SRC})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_common_commands_do_not_import_scipy_stats(tmp_path):
    log = tmp_path / "log.csv"
    log.write_text("model,item,correct\n" + "".join(f"m{m},i{i},{(m + i) % 2}\n" for m in range(3)
                                                    for i in range(8)))
    for argv in (["summary", str(log)], ["ingest", str(log), "--out", str(tmp_path / "log.parquet")],
                 ["summary", str(log), "--trials", "mean"],
                 ["glmer", str(log), "--formula", "correct ~ 1 + (1 | item)"],
                 ["compare", str(log), "--json"]):
        mods = _imported(*argv, cwd=tmp_path)
        assert "mrcstats.cli" in mods
        # `from scipy import stats` shows as scipy.stats' submodules only (scipy.stats._stats_py, ...)
        stats = sorted(m for m in mods if m == "scipy.stats" or m.startswith("scipy.stats."))
        assert not stats, f"mrcstats {argv[0]} imported {stats[:4]}"
        assert not any(m.startswith("tqdm") for m in mods), f"mrcstats {argv[0]} imported tqdm (no bar shown)"


def _crossed_log(tmp_path: Path) -> Path:
    log = tmp_path / "crossed.csv"
    log.write_text("model,item,correct\n" + "".join(f"m{m},i{i},{int((7 * m + 3 * i) % 5 < 2)}\n"
                                                    for m in range(4) for i in range(12)))
    return log


GLMER = ["--formula", "correct ~ 1 + (1 | item) + (1 | model)"]
# the modules of models that only other commands need (lmer, intervals, the out-of-core grid)
NOT_ON_THE_GLMER_PATH = ("mrcstats.models.lmm", "mrcstats.models.confint", "mrcstats.models.grid",
                         "mrcstats.models.outofcore", "mrcstats.backends")

# Runs ``python -m mrcstats ARGV`` with builtins.__import__ wrapped: every import statement of mrcstats'
# own code that names scipy (or a scipy submodule), also one already loaded, is recorded with the module
# that asked for it (scipy's and third parties' own imports are not: the importtime tree shows those).
_HOOK = """
import atexit, builtins, json, runpy, sys
_import, seen = builtins.__import__, set()
def _hook(name, globals=None, locals=None, fromlist=(), level=0):
    if level == 0 and (name == "scipy" or name.startswith("scipy.")):
        who = (globals or {}).get("__name__", "?")
        if who.split(".")[0] == "mrcstats":
            seen.update((who, m) for m in [name, *(f"{name}.{f}" for f in fromlist or ())])
    return _import(name, globals, locals, fromlist, level)
builtins.__import__ = _hook
atexit.register(lambda: sys.stderr.write("\\nSCIPY-IMPORTS " + json.dumps(sorted(seen)) + "\\n"))
sys.argv = ["mrcstats", *sys.argv[1:]]
runpy.run_module("mrcstats", run_name="__main__", alter_sys=True)
"""


def _scipy_importers(*argv: str, cwd: Path) -> list[tuple[str, str]]:
    """(mrcstats module, scipy module) of every scipy import mrcstats' code made in ``mrcstats ARGV``."""
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    r = subprocess.run([sys.executable, "-c", _HOOK, *argv], check=False, capture_output=True, text=True,
                       env=env, cwd=cwd, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["fixef"], r.stdout[:500]
    line = [ln for ln in r.stderr.splitlines() if ln.startswith("SCIPY-IMPORTS ")][-1]
    return [tuple(p) for p in json.loads(line.split(" ", 1)[1])]


def test_glmer_in_memory_imports_neither_scipy_stats_nor_other_commands_models(tmp_path):
    mods = _imported("glmer", str(_crossed_log(tmp_path)), *GLMER, "--json", cwd=tmp_path)
    assert "mrcstats.models.native" in mods
    stats = sorted(m for m in mods if m == "scipy.stats" or m.startswith("scipy.stats."))
    assert not stats, f"mrcstats glmer imported {stats[:4]}"
    other = sorted(m for m in mods if m.startswith(NOT_ON_THE_GLMER_PATH))
    assert not other, f"mrcstats glmer imported {other}"


def test_glmer_in_memory_imports_no_scipy(tmp_path):
    """The in-memory Laplace fit of a crossed binomial model on a small log (Schur complement up to order 64)
    imports no scipy at all (issue 28): the optimizer is Newton steps in numpy (models/optimize.py),
    p-values and quantiles come from mrcstats._dist, the Cholesky solves from numpy; scipy is loaded where
    a path needs it (L-BFGS-B as the Newton phase's fallback, nAGQ != 1, large Schur complements)."""
    mods = _imported("glmer", str(_crossed_log(tmp_path)), *GLMER, "--json", cwd=tmp_path)
    scipy = sorted(m for m in mods if m.split(".")[0] == "scipy")
    assert not scipy, f"mrcstats glmer imported {scipy[:8]}"
    who = _scipy_importers("glmer", str(_crossed_log(tmp_path)), *GLMER, "--json", cwd=tmp_path)
    assert not who, f"mrcstats glmer: scipy imported by {sorted(who)[:8]}"


def test_family_table_names_the_families():
    """The CLI's numpy-free table (--family choices and help) and the families' records agree."""
    from mrcstats.models.family import FAMILIES
    from mrcstats.models.family_table import FAMILY_TABLE

    assert list(FAMILY_TABLE) == list(FAMILIES)
    assert FAMILY_TABLE == {name: (f.link, f.response) for name, f in FAMILIES.items()}


def test_glmer_on_a_plain_csv_imports_no_pandas(tmp_path):
    """``mrcstats glmer TABLE.csv --json`` reads the table with Arrow into NumPy columns
    (:mod:`mrcstats.io.arrow_columns`) and builds the design, fits and prints without pandas (issue 28: pandas'
    import was most of a small fit's wall time). Also with a factor, a numeric column and --ranef."""
    table = tmp_path / "t.csv"
    table.write_text("g,x,f,correct\n" + "".join(f"g{i % 9},{(i * 37 % 101) / 10!r},{'abc'[i % 3]},"
                                                 f"{int((i * 7 + i // 9) % 5 < 2)}\n" for i in range(180)))
    for argv in (["glmer", str(_crossed_log(tmp_path)), *GLMER, "--json"],
                 ["glmer", str(table), "--formula", "correct ~ x * f + (1 | g)", "--json", "--ranef"]):
        mods = _imported(*argv, cwd=tmp_path)
        assert "mrcstats.models.native" in mods
        pandas = sorted(m for m in mods if m.split(".")[0] == "pandas")
        assert not pandas, f"mrcstats {' '.join(argv[:2])} imported {pandas[:6]}"


def test_keep_freed_memory_sets_glibc_and_leaves_a_users_setting():
    """The fit commands keep freed arrays for reuse (glibc's mallopt, :func:`mrcstats._blas.keep_freed_memory`);
    a user's own MALLOC_ variable wins (nothing set)."""
    code = "from mrcstats._blas import keep_freed_memory as k; print(k())"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    for extra, want in (({}, sys.platform.startswith("linux")), ({"MALLOC_ARENA_MAX": "2"}, False)):
        r = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120,
                           env={**env, **extra, "PYTHONPATH": SRC})
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == str(want)


def test_command_table_names_every_command_with_its_module():
    """``mrcstats COMMAND ...`` builds only COMMAND's module's parser (cli.COMMANDS); the table must list
    every command each module registers, and nothing else."""
    import argparse
    import importlib

    from mrcstats.cli import COMMAND_MODULES, COMMANDS, _Parser

    found = {}
    for name in COMMAND_MODULES:
        p = _Parser(prog="mrcstats")
        sub = p.add_subparsers(dest="command", parser_class=_Parser)
        importlib.import_module(f"mrcstats.cli.{name}").register(sub)
        found.update({cmd: name for cmd in sub.choices})
    assert COMMANDS == found
    assert isinstance(importlib.import_module("mrcstats.cli").build_parser("glmer"), argparse.ArgumentParser)
