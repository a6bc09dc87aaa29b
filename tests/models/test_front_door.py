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


def test_a_path_is_opened_by_io_not_rechecked_by_choose(tmp_path, monkeypatch):
    """glmer given a path hands it to io.open_log (a dataset folder opens lazily and goes out of core, a table
    file is read); choose() itself looks only at what io returned (issue 37)."""
    from mrcstats.io.dataset import LogDataset
    from mrcstats.io.ingest import write_dataset

    seen = {}

    def fake(spec, data, **kw):
        seen["data"], seen["backend"] = data, kw.get("backend")
        raise RuntimeError("stop")

    monkeypatch.setattr(outofcore, "glmer_outofcore", fake)
    ROWS.assign(correct=ROWS["correct"].astype(bool)).to_csv(tmp_path / "rows.csv", index=False)
    write_dataset(tmp_path / "rows.csv", tmp_path / "ds")
    with pytest.raises(RuntimeError, match="stop"):
        fit.glmer("correct ~ model + (1 | item)", str(tmp_path / "ds"), invalid="exclude")
    assert isinstance(seen["data"], LogDataset) and seen["backend"] == "duckdb"
    assert fit.choose("native", None, str(tmp_path / "ds")) == ("native", "memory")   # a path is io's to open
    monkeypatch.setattr(fit, "fit_rows", lambda spec, data, **kw: (seen.update(rows=data), 1 / 0))
    with pytest.raises(ZeroDivisionError):
        fit.glmer("correct ~ model + (1 | item)", tmp_path / "rows.csv")
    assert len(seen["rows"]) == len(ROWS)


def test_the_model_commands_parse_the_formula_once(monkeypatch, tmp_path):
    """glmer, lmer and clmm parse --formula once (cli._common.parse_model_args) and fit the ModelSpec."""
    import sys

    import mrcstats.models.formula as formula_mod
    from mrcstats.cli import main

    calls = []
    real = formula_mod.parse_formula

    def counted(*a, **k):
        calls.append(a[0])
        return real(*a, **k)

    for name, mod in list(sys.modules.items()):     # every module that holds the parser by name
        if name.startswith("mrcstats.") and getattr(mod, "parse_formula", None) is real:
            monkeypatch.setattr(mod, "parse_formula", counted)
    ROWS.to_csv(tmp_path / "rows.csv", index=False)
    main(["glmer", str(tmp_path / "rows.csv"), "--formula", "correct ~ model + (1 | item)", "--emmeans", "model",
          "--json"])
    assert calls == ["correct ~ model + (1 | item)"]
