"""The front door (issue 26): engine and backend chosen once, a ModelSpec (not formula text) passed on."""
from __future__ import annotations

import inspect

import pandas as pd
import pytest

from mrcstats.backends import DaskPass, DuckDBPass, MemoryPass, RowPass, pass_backend
from mrcstats.errors import InputError
from mrcstats.models import fit, outofcore
from mrcstats.models.formula import ModelSpec

ROWS = pd.DataFrame({"correct": [1, 0, 1, 1, 0, 0, 1, 0], "item": list("aabbccdd"), "model": list("xyxyxyxy")})


def test_choose_engine_and_backend():
    assert fit.choose("native", None, ROWS) == ("native", "memory")
    assert fit.choose("lme4", None, ROWS) == ("lme4", "memory")
    assert fit.choose("native", None, ROWS, scheduler="tcp://x:1") == ("native", "dask")
    assert fit.choose("native", "duckdb", ROWS) == ("native", "duckdb")
    with pytest.warns(DeprecationWarning, match="backend='dask'"):
        assert fit.choose("dask", None, ROWS) == ("native", "dask")
    with pytest.raises(InputError, match="engine 'spark'"):
        fit.choose("spark", None, ROWS)
    with pytest.raises(InputError, match="backend 'spark'"):
        fit.choose("native", "spark", ROWS)
    with pytest.raises(InputError, match="fits natively"):
        fit.choose("lme4", "duckdb", ROWS)
    with pytest.raises(InputError, match="scheduler goes with backend 'dask'"):
        fit.choose("native", "memory", ROWS, scheduler="tcp://x:1")


def test_outofcore_gets_a_model_spec_and_never_rebuilds_formula_text(monkeypatch):
    seen = {}

    def fake(spec, data, **kw):
        seen["spec"], seen["data"] = spec, data
        raise RuntimeError("stop")

    monkeypatch.setattr(outofcore, "fit_rows", fake)
    with pytest.raises(RuntimeError, match="stop"):
        outofcore.glmer_outofcore(fit.parse_formula("correct ~ model + (1 | item)"), ROWS, backend="memory",
                                  method="cells")
    spec = seen["spec"]
    assert isinstance(spec, ModelSpec) and spec.response.is_cbind and spec.term_labels == ("model",)
    assert [r.text for r in spec.random] == ["(1 | item)"]
    assert '.split("~"' not in inspect.getsource(outofcore) and ".split('~'" not in inspect.getsource(outofcore)


def test_front_door_passes_the_spec_with_family(monkeypatch):
    seen = {}

    def fake(spec, data, **kw):
        seen["spec"] = spec
        raise RuntimeError("stop")

    monkeypatch.setattr(fit, "fit_rows", fake)
    with pytest.raises(RuntimeError, match="stop"):
        fit.glmer("correct ~ model + (1 | item)", ROWS)
    assert isinstance(seen["spec"], ModelSpec) and seen["spec"].family.name == "binomial"


def test_every_backend_has_the_whole_method_set():
    names = ("columns", "cell_counts", "grid_counts", "group_counts")
    for cls in (MemoryPass, DuckDBPass, DaskPass):
        assert all(callable(getattr(cls, n, None)) for n in names), cls
    p = pass_backend(ROWS.assign(correct=ROWS["correct"].astype("boolean")), "memory")
    assert isinstance(p, RowPass)
    g = p.group_counts(["model"])
    assert g.to_dict("list") == {"model": ["x", "y"], "n": [4, 4], "k": [3, 1], "inv": [0, 0]}
