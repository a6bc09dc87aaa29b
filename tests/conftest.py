"""Shared fixtures: paths to the optional shared data and R availability; R parity that cannot skip in CI.

With ``MRCSTATS_REQUIRE_R=1`` (set by ``.ci/run``, where ``make test`` installs R) a skipped R-parity test
fails instead: a test marked ``r``, one using the ``rscript`` fixture (also through another fixture), or any
skip whose reason names R (``Rscript``, ``rpy2``, ``lme4``, an R package: :data:`R_SKIP`) -- every path
that skips for want of R (this file's ``rscript``, ``tests/models/_r.py``'s ``skip_without_rpy2``, the
glmmTMB/emmeans/jsonlite/sandwich checks) gives such a reason. Locally, without R, they still skip.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: set (to anything but "" or "0") where R is installed: an R-parity skip is then a failure
REQUIRE_R = os.environ.get("MRCSTATS_REQUIRE_R", "") not in ("", "0")
#: a skip reason that says R (or an R package, or rpy2) is missing
R_SKIP = re.compile(r"\bR\b|Rscript|rpy2|lme4|glmmTMB|emmeans|\bordinal\b|jsonlite|sandwich|\bcar\b")


def is_r_parity(item: pytest.Item) -> bool:
    """A test that compares with R: marked ``r``, or using the ``rscript`` fixture."""
    return item.get_closest_marker("r") is not None or "rscript" in getattr(item, "fixturenames", ())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):  # type: ignore[no-untyped-def]
    """With ``MRCSTATS_REQUIRE_R=1``, an R-parity skip (setup or call) is reported as a failure."""
    outcome = yield
    rep = outcome.get_result()
    if not REQUIRE_R or not rep.skipped or hasattr(rep, "wasxfail"):
        return
    reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
    if reason.startswith(("Skipped: shared data not found", "shared data not found")):
        return   # the real data is optional (a test on it skips cleanly without it); R is not
    if is_r_parity(item) or R_SKIP.search(reason):
        rep.outcome = "failed"
        rep.longrepr = f"R parity skipped with MRCSTATS_REQUIRE_R=1 (R must run here, so it is a failure): {reason}"


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
                           check=False, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as exc:  # pragma: no cover
        return f"Rscript failed: {exc}"
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["(no message)"])[-1]
        return f"R packages lme4/car missing: {last}"
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


@pytest.fixture(scope="session")
def glmm_data():
    """Factory of small seeded binomial GLMM data (models tests).

    ``make(seed, groups, per, factor="f", levels=("a", "b", "c"))`` returns columns ``g``
    (group labels ``g0``...), the factor, numeric ``x`` and ``z``, 0/1 ``y`` (random
    intercepts with SD 0.8) and integer weights ``w`` in 1..3.
    """
    import numpy as np
    import pandas as pd

    def make(seed: int = 1, groups: int = 40, per: int = 6, factor: str = "f",
             levels: tuple[str, ...] = ("a", "b", "c")) -> pd.DataFrame:
        rng = np.random.default_rng(seed)
        n = groups * per
        g = np.repeat(np.arange(groups), per)
        f = rng.choice(np.array(levels), n)
        x = rng.normal(size=n)
        eta = 0.3 + 0.5 * x + 0.7 * (f == levels[1]) - 0.4 * (f == levels[-1]) + rng.normal(0, 0.8, groups)[g]
        y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(int)
        return pd.DataFrame({"g": [f"g{i}" for i in g], factor: f, "x": x, "z": rng.normal(size=n), "y": y,
                             "w": rng.integers(1, 4, n)})

    return make


@pytest.fixture(scope="session")
def two_pl_log():
    """Factory of seeded 2PL response logs (IRT and subset tests).

    ``make(seed, models, items, slope_sd=0.4, b_mean=0.0, b_sd=1.0, item_fmt="i{:03d}", model_fmt="m{:02d}")``
    draws abilities ``theta ~ N(0, 1)`` (one per model), ``a = exp(N(0, slope_sd))`` (all 1 when ``slope_sd``
    is None), ``b ~ N(b_mean, b_sd)`` and ``correct ~ Bernoulli(logistic(a (theta - b)))``, in that order from
    one ``default_rng(seed)``; returns the long frame ``model, item, correct`` (boolean).
    """
    import numpy as np
    import pandas as pd

    def make(seed: int, models: int, items: int, *, slope_sd: float | None = 0.4, b_mean: float = 0.0,
             b_sd: float = 1.0, item_fmt: str = "i{:03d}", model_fmt: str = "m{:02d}") -> pd.DataFrame:
        rng = np.random.default_rng(seed)
        th = rng.normal(size=models)
        a = np.exp(rng.normal(0, slope_sd, items)) if slope_sd is not None else np.ones(items)
        b = rng.normal(b_mean, b_sd, items)
        y = rng.random((models, items)) < 1 / (1 + np.exp(-a * (th[:, None] - b)))
        return pd.DataFrame({"model": np.repeat([model_fmt.format(j) for j in range(models)], items),
                             "item": np.tile([item_fmt.format(i) for i in range(items)], models),
                             "correct": pd.array(y.ravel(), dtype="boolean")})

    return make
