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
