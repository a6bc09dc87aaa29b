"""The ``compare`` report analysis: ranking table, pairwise matrix, forest plot, pairs table."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mrcstats.report import build_report


def _log(path, models=5, clusters=25, per=4, seed=5):
    rng = np.random.default_rng(seed)
    n = clusters * per
    cl = np.repeat(np.arange(clusters), per)
    u = rng.normal(0, 1, clusters)[cl]
    rows = []
    for m in range(models):
        p = 1 / (1 + np.exp(-(0.35 * m - 0.5 + u)))
        rows.append(pd.DataFrame({"model": f"model-{m}", "item": [f"q{i}" for i in range(n)],
                                  "cluster": [f"p{c}" for c in cl], "correct": rng.random(n) < p}))
    pd.concat(rows).to_csv(path, index=False)


def test_compare_analysis_builds(tmp_path):
    _log(tmp_path / "log.csv")
    (tmp_path / "s.yaml").write_text("logs: [log.csv]\nseed: 3\n"
                                     "analyses:\n  - {type: compare, cluster: cluster, bootstrap: 50}\n")
    r = build_report(tmp_path / "s.yaml", tmp_path / "r.pdf")
    assert not r.skipped
    assert "Model comparison" in r.sections
    rank = pd.read_csv(tmp_path / "r_tables" / "a0_compare_ranking.csv")
    assert next(iter(rank["Model"])) == "model-4" and list(rank["Rank"]) == sorted(rank["Rank"])
    pairs = pd.read_csv(tmp_path / "r_tables" / "a0_compare_pairs.csv")
    assert len(pairs) == 10 and "Boot. low" in pairs.columns
    from mrcstats.io import read_log
    from mrcstats.stats.compare import compare

    ref = compare(read_log(tmp_path / "log.csv"), cluster="cluster")
    assert rank["Accuracy (%)"].iloc[0] == pytest.approx(100 * ref.ranking()["accuracy"].iloc[0], rel=1e-12)
    figs = sorted(p.name for p in (tmp_path / "r_figures").iterdir()) if (tmp_path / "r_figures").exists() else []
    assert any("compare_matrix" in f for f in figs) and any("compare_forest" in f for f in figs)


def test_compare_analysis_bad_key(tmp_path):
    from mrcstats.errors import InputError
    from mrcstats.report.spec import load_spec

    _log(tmp_path / "log.csv", models=2)
    (tmp_path / "s.yaml").write_text("logs: [log.csv]\nanalyses: [{type: compare, adjust: sidak}]\n")
    with pytest.raises(InputError, match="adjust"):
        load_spec(tmp_path / "s.yaml")
