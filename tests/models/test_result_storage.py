"""GlmerResult keeps arrays, names and records; its pandas attributes are built when read (issue 28).

``mrcstats glmer --json`` prints ``to_dict()``, ``ranef_dict()`` and ``summary()``: none of them may import pandas,
and on the path native fit -> result only the design (and the readers of mrcstats.io) import it. The pandas
attributes are the same objects as before the change (names, dtypes, values)."""
from __future__ import annotations

import builtins
import dataclasses
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import pandas.testing as pdt
import pytest

from mrcstats.models import glmer
from mrcstats.models.records import RanefTable, VarCorrRow

SRC = str(Path(__file__).resolve().parents[2] / "src")


@contextmanager
def _pandas_imports():
    """The modules that run an ``import pandas`` statement inside the block (also when pandas is loaded)."""
    real, seen = builtins.__import__, []

    def hook(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and name.split(".")[0] == "pandas":
            seen.append((globals or {}).get("__name__", "?"))
        return real(name, globals, locals, fromlist, level)

    builtins.__import__ = hook
    try:
        yield seen
    finally:
        builtins.__import__ = real


@pytest.fixture(scope="module")
def slope_fit():
    rng = np.random.default_rng(4)
    g = np.repeat(np.arange(12), 30)
    x = rng.normal(size=g.size)
    eta = 0.2 + 0.5 * x + rng.normal(0, 0.8, 12)[g] + rng.normal(0, 0.4, 12)[g] * x
    d = pd.DataFrame({"g": [f"g{i:02d}" for i in g], "x": x, "y": (rng.random(g.size) < 1 / (1 + np.exp(-eta))).astype(int)})
    return glmer("y ~ x + (1 + x | g)", d)


def test_the_fit_path_imports_pandas_only_in_the_design_and_the_readers():
    code = """
import builtins
real, who = builtins.__import__, set()
def hook(name, globals=None, locals=None, fromlist=(), level=0):
    if level == 0 and name.split(".")[0] == "pandas":
        who.add((globals or {}).get("__name__", "?"))
    return real(name, globals, locals, fromlist, level)
builtins.__import__ = hook
import mrcstats.models.native, mrcstats.models.results, mrcstats.models.laplace, mrcstats._repr
print(sorted(m for m in who if m.startswith("mrcstats") and m != "mrcstats.models.design"
             and not m.startswith("mrcstats.io")))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False,
                       env={**os.environ, "PYTHONPATH": SRC})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_output_needs_no_pandas(slope_fit):
    m = dataclasses.replace(slope_fit)             # a fresh instance: no pandas view built yet
    with _pandas_imports() as seen:
        d, re_, text = m.to_dict(), m.ranef_dict(), m.summary()
        repr(m), str(m), m.npar, m.messages
        rx = m.use_vcov("RX")
        rx.to_dict(), rx.summary()
    assert seen == []
    assert not {"fixef", "varcorr", "ranef", "vcov"} & set(m.__dict__)
    assert "Correlation of Fixed Effects:" in text and "Corr" in text
    assert list(re_["g"]["g00"]) == ["(Intercept)", "x", "condvar:(Intercept)", "condvar:x"]
    assert d["varcorr"][-1]["var2"] == "x" and d["varcorr"][0]["var2"] is None


def test_pandas_views_of_the_stored_figures(slope_fit):
    m = slope_fit
    names = list(m.fixef_names)
    pdt.assert_series_equal(m.fixef, pd.Series(m.fixef_values, index=names, name="Estimate"))
    se = np.sqrt(np.diag(m.vcov_values))
    pdt.assert_series_equal(m.se, pd.Series(se, index=names, name="Std. Error"))
    pdt.assert_series_equal(m.z, pd.Series(m.fixef_values / se, index=names, name="z value"))
    pdt.assert_frame_equal(m.vcov, pd.DataFrame(m.vcov_values, index=names, columns=names))
    pdt.assert_frame_equal(m.corr, pd.DataFrame(m.vcov_values / np.outer(se, se), index=names, columns=names))
    assert list(m.theta.index) == list(m.theta_names) == ["g.(Intercept)", "g.x.(Intercept)", "g.x"]
    assert list(m.varcorr.columns) == ["group", "name", "var2", "variance", "sd"]
    assert m.varcorr["var2"].isna().tolist() == [True, True, False]
    assert m.ranef["g"].index.name == "g" and m.ranef["g"].index.dtype == object
    assert m.fixef is m.fixef                      # built once
    rx = m.use_vcov("RX")
    pdt.assert_frame_equal(rx.vcov, m.vcov_other)
    pdt.assert_frame_equal(rx.vcov_other, m.vcov)
    np.testing.assert_allclose(rx.se ** 2, np.diag(m.vcov_other_values), rtol=1e-14)


def test_frames_from_other_engines_keep_their_index():
    df = pd.DataFrame({"mode": [0.5, -0.5], "condvar": [0.1, 0.2]}, index=pd.Index(["a", "b"], name="item"))
    t = RanefTable.from_frame(df)
    pdt.assert_frame_equal(t.to_pandas(), df)
    assert t.to_dict() == {"a": {"mode": 0.5, "condvar": 0.1}, "b": {"mode": -0.5, "condvar": 0.2}}
    assert VarCorrRow("g", "(Intercept)", None, 1.0, 1.0)._asdict()["var2"] is None
