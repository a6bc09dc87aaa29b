"""The ``ranks`` report analysis: the leaderboard table carries :func:`mrcstats.ranks`'s sets (paired and independent),
the rank-set figure is drawn, and the HTML page hovers each model's sets."""
from __future__ import annotations

import numpy as np
import pandas as pd

from mrcstats import ranks
from mrcstats.report import build_report


def _log(tmp_path, n_items: int = 200):
    """Six models on shared items (a common item difficulty, so their errors correlate); accuracies spaced .04."""
    rng = np.random.default_rng(4)
    hard = rng.normal(0, 1.2, n_items)
    rows = []
    for k in range(6):
        p = 1 / (1 + np.exp(-(0.2 * k - 0.5 - hard)))
        rows.append(pd.DataFrame({"model": f"m{k}", "item": [f"q{i}" for i in range(n_items)],
                                  "correct": rng.random(n_items) < p}))
    d = pd.concat(rows, ignore_index=True)
    d.to_csv(tmp_path / "log.csv", index=False)
    return d


def _set(lo, hi):
    return f"{lo}" if lo == hi else f"[{lo}, {hi}]"


def test_ranks_analysis_table_figure_and_html(tmp_path):
    d = _log(tmp_path)
    (tmp_path / "s.yaml").write_text("logs: [log.csv]\nseed: 3\nanalyses:\n  - {type: ranks, draws: 500}\n")
    r = build_report(tmp_path / "s.yaml", tmp_path / "r.pdf", html=True)
    assert not r.skipped
    ref = ranks(d, seed=3, draws=500).models
    t = pd.read_csv(tmp_path / "r_tables" / "a0_ranks.csv", dtype=str)
    assert list(t["Model"]) == list(ref["model"])
    assert list(t["Marginal set"]) == [_set(a, b) for a, b in zip(ref["marginal_lo"], ref["marginal_hi"])]
    assert list(t["Simultaneous set"]) == [_set(a, b) for a, b in zip(ref["simultaneous_lo"], ref["simultaneous_hi"])]
    assert list(t["Simultaneous (independent)"]) == [
        _set(a, b) for a, b in zip(ref["independent_simultaneous_lo"], ref["independent_simultaneous_hi"])]
    assert t["Tier"].astype(int).tolist() == ref["tier"].tolist()
    assert (tmp_path / "r_figures" / "a0_ranks.pdf").is_file()
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    top = ref.iloc[0]
    assert (f"{top.model}: rank {top['rank']}, marginal [{top.marginal_lo}, {top.marginal_hi}], simultaneous "
            f"[{top.simultaneous_lo}, {top.simultaneous_hi}]") in html


def test_ranks_analysis_spec_errors(tmp_path):
    import pytest

    from mrcstats.errors import InputError
    from mrcstats.report.spec import load_spec

    _log(tmp_path, 20)
    for bad, what in (("{type: ranks, level: 1.5}", "level"), ("{type: ranks, draws: 10}", "draws"),
                      ("{type: ranks, method: wild}", "method")):
        (tmp_path / "s.yaml").write_text(f"logs: [log.csv]\nanalyses: [{bad}]\n")
        with pytest.raises(InputError, match=what):
            load_spec(tmp_path / "s.yaml")
