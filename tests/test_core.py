"""Core helpers: JSON conventions, atomic writes, lazy exports."""
from __future__ import annotations

import json
import math
import os

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from mrcstats._files import atomic_path, write_text_atomic
from mrcstats._jsonout import dumps


def test_json_conventions():
    obj = {"a": np.float64(1.5), "b": float("nan"), "c": float("inf"), "d": -np.inf,
           "e": pd.NA, "f": np.int64(3), "g": np.array([1.0, np.nan]), 4: np.bool_(True)}
    out = json.loads(dumps(obj))
    assert out == {"a": 1.5, "b": None, "c": "Inf", "d": "-Inf", "e": None, "f": 3,
                   "g": [1.0, None], "4": True}


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_json_floats_round_trip_unrounded(x):
    back = json.loads(dumps({"x": x}))["x"]
    if math.isnan(x):
        assert back is None
    elif math.isinf(x):
        assert back == ("Inf" if x > 0 else "-Inf")
    else:
        assert back == x


def test_atomic_write_keeps_old_file_on_error(tmp_path):
    target = tmp_path / "out.txt"
    write_text_atomic(target, "old")
    try:
        with atomic_path(target) as tmp:
            tmp.write_text("partial")
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]
    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(target).st_mode & 0o777 == 0o666 & ~umask


def test_lazy_api_names_resolve():
    import mrcstats

    for name in ("read_log", "summarize", "fisher", "glmer"):
        assert callable(getattr(mrcstats, name))
