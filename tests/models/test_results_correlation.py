"""lme4 leaves the fixed effects' correlation matrix out of ``summary()`` above 12 of them (issue 36):
``print.summary.merMod(correlation = NULL)`` shows it when ``p <= getOption("lme4.summary.cor.max")``."""
from __future__ import annotations

import subprocess

import pytest

import mrcstats
from mrcstats.cli import main
from mrcstats.models.results import COR_MAX

LEVELS = tuple(f"l{i:02d}" for i in range(13))     # intercept, 12 contrasts and x: 14 fixed effects


@pytest.fixture(scope="module")
def wide(glmm_data):
    return glmm_data(seed=3, groups=30, per=20, levels=LEVELS)


def test_correlation_follows_lme4_and_can_be_forced(wide):
    m = mrcstats.glmer("y ~ f + x + (1 | g)", wide)
    p = len(m.fixef_names)
    assert p == 14 > COR_MAX == 12
    text = m.summary()
    assert "Correlation of Fixed Effects" not in text
    assert f"Correlation matrix not shown by default, as p = {p} > 12." in text
    assert "Correlation of Fixed Effects" in m.summary(correlation=True)
    small = mrcstats.glmer("y ~ x + (1 | g)", wide)
    assert "Correlation of Fixed Effects" in small.summary() and "not shown" not in small.summary()
    assert "Correlation of Fixed Effects" not in small.summary(correlation=False)


def test_cli_correlation_option(wide, tmp_path, capsys):
    path = tmp_path / "wide.csv"
    wide.to_csv(path, index=False)
    assert main(["glmer", str(path), "--formula", "y ~ f + x + (1 | g)"]) == 0
    out = capsys.readouterr().out
    assert "Correlation of Fixed Effects" not in out and "as p = 14 > 12" in out
    assert main(["glmer", str(path), "--formula", "y ~ f + x + (1 | g)", "--correlation"]) == 0
    assert "Correlation of Fixed Effects" in capsys.readouterr().out


def test_r_leaves_it_out_too(wide, tmp_path, rscript):
    path = tmp_path / "wide.csv"
    wide.to_csv(path, index=False)
    code = (f"suppressMessages(library(lme4)); d <- read.csv('{path}'); "
            "print(summary(glmer(y ~ f + x + (1 | g), d, family = binomial)))")
    r = subprocess.run([rscript, "-e", code], capture_output=True, text=True, timeout=300, check=True)
    out = r.stdout + r.stderr      # lme4 writes the note with message()
    assert "Correlation matrix not shown by default, as p = 14 > 12." in out
    assert "Correlation of Fixed Effects" not in out
