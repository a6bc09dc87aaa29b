"""Issue 14 reproducers in the statistics: bounded exact Fisher, count ranges, McNemar pairing,
discrimination cutoffs from the data, se_cluster for one observation, API type checks."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from mrcstats.errors import InputError
from mrcstats.stats.contingency import fisher, mcnemar, read_count_table
from mrcstats.stats.discrimination import discrimination


def test_fisher_huge_cell_is_refused_at_once():
    tab = [[10**9, 2, 3], [4, 5, 6], [7, 8, 9], [1, 2, 3]]
    with pytest.raises(InputError, match="FEXACT error 40.*--simulate"):
        fisher(tab)
    with pytest.raises(InputError, match="chisq"):
        fisher(tab, simulate=True, B=10, seed=1)


def test_fisher_wide_network_is_bounded():
    tab = np.full((4, 3), 4000)
    with pytest.raises(InputError, match="simulate"):
        fisher(tab)


def test_count_table_range(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text(",a,b\nx,1e30,2\ny,4,5\n")
    with pytest.raises(InputError, match="holds 1e30, more than the largest exact count"):
        read_count_table(p)
    with pytest.raises(InputError, match="more than the largest exact count"):
        fisher([[1e30, 2], [3, 4]])
    p.write_text(",a,a\nx,1,2\ny,4,5\n")
    with pytest.raises(InputError, match="appears 2 times"):
        read_count_table(p)
    p.write_text("\ufeff,a,b\r\nx,1,2\r\ny,4,5\r\n")
    assert read_count_table(p).to_numpy().tolist() == [[1, 2], [4, 5]]


def _masked_log():
    rows = []
    for m, shift in (("A", 0), ("B", 1)):
        for item in range(20):
            for mr in (0, 50):
                rows.append({"model": m, "item": str(item), "masking_rate": mr,
                             "correct": (item + shift + mr // 50) % 3 != 0})
    return pd.DataFrame(rows)


def test_mcnemar_pairs_on_the_log_key_with_masking_rates():
    res = mcnemar(_masked_log(), models=("A", "B"))
    assert res.n_items == 40 and res.n_unpaired == 0
    with pytest.raises(InputError, match="--pair-on"):
        mcnemar(_masked_log(), models=("A", "B"), keys=["item"])


def test_discrimination_default_cutoffs_follow_pd():
    rng = np.random.default_rng(3)
    rows = [{"model": m, "item": f"{c}:{q}", "cluster": str(c), "correct": bool(rng.random() < p)}
            for c in range(40) for q in range(4) for m, p in (("a", .4), ("b", .6), ("c", .7))]
    res = discrimination(pd.DataFrame(rows))
    cuts = res.default_cutoffs()
    assert cuts[0] == 0 and len(cuts) == 4 and cuts == sorted(cuts)
    q = np.quantile(res.pd.to_numpy(), [.25, .5, .75])
    assert cuts[1:] == pytest.approx(q, rel=5e-3)
    tab = res.cutoffs(None, bootstrap=0)
    counts = tab.to_dict()["cutoffs"]
    assert counts[0]["clusters"] > counts[-1]["clusters"] > 0  # each cutoff keeps some clusters


def test_se_cluster_is_na_for_one_observation():
    from mrcstats.stats.accuracy import summarize

    log = pd.DataFrame({"model": ["a", "b", "b"], "item": ["1", "1", "2"], "correct": [True, True, False]})
    res = summarize(log)
    t = res.table.set_index("model")
    assert math.isnan(t.loc["a", "se_cluster"]) and t.loc["b", "se_cluster"] == pytest.approx(0.5)  # CR1 over 2 items
    assert "NA" in res.summary().splitlines()[1]
    assert res.to_dict()["groups"][0]["se_cluster"] is None or math.isnan(res.to_dict()["groups"][0]["se_cluster"])


@pytest.mark.parametrize("bad", ["x", 123, None, [1, 2]])
def test_summarize_type_check(bad):
    from mrcstats.stats.accuracy import summarize

    with pytest.raises(InputError, match="summarize"):
        summarize(bad)
