"""The ``irt`` and ``subset_eval`` report analyses build, and their tables carry the API's numbers."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mrcstats.report import build_report


def _log(path, J=15, I=120, seed=4):
    rng = np.random.default_rng(seed)
    th = rng.normal(size=J)
    a = np.exp(rng.normal(0, 0.4, I))
    b = rng.normal(size=I)
    y = rng.random((J, I)) < 1 / (1 + np.exp(-a * (th[:, None] - b)))
    pd.DataFrame({"model": np.repeat([f"m{j:02d}" for j in range(J)], I),
                  "item": np.tile([f"q{i:03d}" for i in range(I)], J), "correct": y.ravel()}).to_csv(path, index=False)


def test_irt_and_subset_eval_analyses(tmp_path):
    _log(tmp_path / "log.csv")
    (tmp_path / "s.yaml").write_text(
        "logs: [log.csv]\nseed: 1\nanalyses:\n  - {type: irt, n: 5}\n"
        "  - {type: subset_eval, ks: [10, 40], folds: 3, seeds: 1, methods: [random, anchor]}\n")
    r = build_report(tmp_path / "s.yaml", tmp_path / "r.pdf")
    assert not r.skipped
    fit = pd.read_csv(tmp_path / "r_tables" / "a0_irt_fit.csv")
    import mrcstats
    from mrcstats.io import read_log

    ref = mrcstats.irt(read_log(tmp_path / "log.csv"))
    assert fit["logLik"].iloc[0] == pytest.approx(ref.fit.loglik, rel=1e-9)
    ev = pd.read_csv(tmp_path / "r_tables" / "a1_subset_eval.csv")
    assert set(ev["Method"]) == {"random", "anchor"} and set(ev["k"]) == {10, 40}
    figs = {p.stem for p in (tmp_path / "r_figures").iterdir()}
    assert {"a0_irt_item_map", "a0_irt_pd_vs_a", "a1_subset_mae"} <= figs
    # issue 25: what the data cannot support is said in the table's own caption (15 models < 30 respondents)
    texts = {p.name: p.read_text(encoding="utf-8") for p in (tmp_path / "r_tables").iterdir() if p.suffix != ".csv"}
    fit_text = "".join(t for n, t in texts.items() if n.startswith("a0_irt_fit"))
    top_text = "".join(t for n, t in texts.items() if n.startswith("a0_irt_top_items"))
    assert "Caveat: only 15 respondents" in fit_text, sorted(texts)
    assert "Caveat: discrimination a from 15 respondents" in top_text


def test_subset_eval_bad_method(tmp_path):
    from mrcstats.errors import InputError
    from mrcstats.report.spec import load_spec

    _log(tmp_path / "log.csv")
    (tmp_path / "s.yaml").write_text("logs: [log.csv]\nanalyses: [{type: subset_eval, methods: [best]}]\n")
    with pytest.raises(InputError, match="methods"):
        load_spec(tmp_path / "s.yaml")
