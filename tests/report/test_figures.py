"""Figures: deterministic vector output, two-column sizes, LOESS on 0/1 outcomes."""
from __future__ import annotations

import numpy as np
import pandas as pd

from mrcstats.report import figures as F


def _binary(seed=0, n=1500):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    d = pd.DataFrame({"model": np.repeat(["a", "b"], n // 2), "x": x})
    base = np.where(d["model"] == "a", 0.2, 2.2)
    d["correct"] = pd.array(rng.random(n) < 1 / (1 + np.exp(-(base + 0.3 * x))), dtype="boolean")
    return d


def test_loess_follows_binary_data_with_a_high_mean():
    d = _binary()
    fig = F.loess_plot(d, "x")
    lines = [ln for ln in fig.axes[0].get_lines() if ln.get_label() == "b"]
    y = lines[0].get_ydata()
    mean_b = d.loc[d["model"] == "b", "correct"].astype(float).mean()
    # robustifying iterations would pin the curve at 1 for a model that is right ~90% of the time
    assert 0.7 < float(np.median(y)) < 0.97
    assert abs(float(np.mean(y)) - mean_b) < 0.08


def test_saved_figures_are_byte_identical_and_column_sized(tmp_path):
    d = _binary()
    paths = []
    for k in (1, 2):
        fig = F.loess_plot(d, "x", glmm=pd.DataFrame({"model": ["a", "a"], "x": [-2.0, 2.0], "p": [0.4, 0.7]}))
        assert abs(fig.get_figwidth() - F.COLUMN_WIDTH) < 1e-9
        paths.append(F.save_figure(fig, tmp_path / f"f{k}"))
    for a, b in zip(*paths, strict=True):
        assert a.suffix in (".pdf", ".svg")
        assert a.read_bytes() == b.read_bytes()


def test_every_figure_builds():
    rng = np.random.default_rng(1)
    r = pd.DataFrame({"level": [f"c{i}" for i in range(300)], "mode": rng.normal(size=300),
                      "condvar": rng.random(300) * 0.1})
    assert F.caterpillar_plot(r, n=100, seed=3).get_figwidth() == F.PAGE_WIDTH
    F.pd_histogram(rng.exponential(3, 500), cutoffs=[5, 10])
    m = pd.DataFrame([(c, mr, 0.9 - mr / 300, 0.02) for c in ("regular", "strict") for mr in range(0, 101, 10)],
                     columns=["condition", "masking_rate", "acc", "sd"])
    F.masking_curves(m, lo=None)
    F.indicator_plot(pd.DataFrame({"masking_rate": [0, 50, 100], "na": [1, 0.8, 0.5], "ki": [None, 0.1, 0.2]}))
    cm = pd.DataFrame([[0, 0], [155, 45]], index=["SOV", "SVO&SOV"], columns=["SOV", "SVO"])
    F.confusion_matrix_plot(cm)
    F.error_type_bars(pd.DataFrame({"No CoT": [73, 20], "CoT2": [5, 0]}, index=["FP", "FI"]))
    F.fixef_truth_plot(pd.DataFrame({"term": ["a", "b"], "estimate": [1.0, 0.1], "se": [0.1, 0.1]}), {"a": 1.1})
