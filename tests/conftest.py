"""Shared fixtures: paths to the optional shared data and R availability."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path:
    """``$MRCSTATS_SHARED_DATA`` or ``../shared/data`` beside the repository."""
    env = os.environ.get("MRCSTATS_SHARED_DATA")
    return Path(env) if env else REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real public data folder; tests using it skip cleanly when it is absent."""
    d = shared_data_dir()
    if not d.is_dir():
        pytest.skip(f"shared data not found at {d} (set MRCSTATS_SHARED_DATA)")
    return d


def _r_status() -> str | None:
    """None when Rscript with lme4 and car is usable, else the reason it is not."""
    rscript = shutil.which("Rscript")
    if not rscript:
        return "Rscript not installed (apt-get install r-base-core r-cran-lme4 r-cran-car)"
    try:
        r = subprocess.run([rscript, "-e", "suppressMessages({library(lme4); library(car)})"],
                           capture_output=True, text=True, timeout=120)
    except Exception as exc:  # pragma: no cover
        return f"Rscript failed: {exc}"
    if r.returncode != 0:
        return "R packages lme4/car missing: " + r.stderr.strip().splitlines()[-1:][0] if r.stderr else "?"
    return None


_R_REASON: list[str | None] = []


@pytest.fixture(scope="session")
def rscript() -> str:
    """Path to Rscript with lme4 and car; skips the test with a reason when absent."""
    if not _R_REASON:
        _R_REASON.append(_r_status())
    if _R_REASON[0] is not None:
        pytest.skip(_R_REASON[0])
    return shutil.which("Rscript")  # type: ignore[return-value]
