"""The ``cat`` report analysis builds: ability trace figure, prediction curve and items asked tables."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mrcstats.report import build_report


def _log(path, J=12, I=80, seed=2):
    rng = np.random.default_rng(seed)
    th = rng.normal(size=J)
    b = rng.normal(size=I)
    y = rng.random((J, I)) < 1 / (1 + np.exp(-(th[:, None] - b)))
    pd.DataFrame({"model": np.repeat([f"m{j:02d}" for j in range(J)], I),
                  "item": np.tile([f"q{i:03d}" for i in range(I)], J), "correct": y.ravel(),
                  "category": np.tile([f"c{i % 2}" for i in range(I)], J)}).to_csv(path, index=False)


def test_cat_analysis(tmp_path):
    _log(tmp_path / "log.csv")
    (tmp_path / "s.yaml").write_text("logs: [log.csv]\nseed: 1\nanalyses:\n"
                                     "  - {type: cat, model: m03, max_items: 20, every: 10}\n")
    r = build_report(tmp_path / "s.yaml", tmp_path / "r.pdf")
    assert not r.skipped
    curve = pd.read_csv(tmp_path / "r_tables" / "a0_cat_curve.csv")
    assert list(curve["Items"]) == [10, 20]
    assert (curve["95% low"] <= curve["Predicted"]).all() and (curve["Predicted"] <= curve["95% high"]).all()
    items = pd.read_csv(tmp_path / "r_tables" / "a0_cat_items.csv")
    assert len(items) == 20 and items["Item"].is_unique
    assert "a0_cat_trace" in {p.stem for p in (tmp_path / "r_figures").iterdir()}


def test_cat_analysis_bad_bank(tmp_path):
    from mrcstats.errors import InputError
    from mrcstats.report.spec import load_spec

    _log(tmp_path / "log.csv")
    (tmp_path / "s.yaml").write_text("logs: [log.csv]\nanalyses: [{type: cat, model: m01, bank: nope.json}]\n")
    with pytest.raises(InputError, match="no such item bank"):
        load_spec(tmp_path / "s.yaml")
