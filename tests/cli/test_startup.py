"""The command line starts light: ``--help`` and ``--version`` import neither numpy, pandas nor scipy, and
the common commands do not import ``scipy.stats`` (its import alone takes about a second). No wall-clock
assertion: what is imported is checked, in a fresh interpreter (``python -X importtime``)."""
from __future__ import annotations

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
                 ["glmer", str(log), "--formula", "correct ~ 1 + (1 | item)"]):
        mods = _imported(*argv, cwd=tmp_path)
        assert "mrcstats.cli" in mods
        assert "scipy.stats" not in mods, f"mrcstats {argv[0]} imported scipy.stats"
        assert not any(m.startswith("tqdm") for m in mods), f"mrcstats {argv[0]} imported tqdm (no bar shown)"


def test_family_table_names_the_families():
    """The CLI's numpy-free table (--family choices and help) and the families' records agree."""
    from mrcstats.models.family import FAMILIES
    from mrcstats.models.family_table import FAMILY_TABLE

    assert list(FAMILY_TABLE) == list(FAMILIES)
    assert FAMILY_TABLE == {name: (f.link, f.response) for name, f in FAMILIES.items()}
