"""Prompt sensitivity (mrcstats.stats.sensitivity): Kendall's W equals Friedman's test in scipy and a direct
implementation with ties, the pairwise concordance on a hand example, the stacked (bootstrap) computation equals
the single one, the quantiles and CIs on generated data, the guards and the CLI."""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import friedmanchisquare, rankdata

from mrcstats.cli import main
from mrcstats.errors import InputError
from mrcstats.stats.sensitivity import kendall_w, pair_concordance, sensitivity


def _direct_w(s: np.ndarray) -> float:
    """Kendall's W as Siegel & Castellan (1988) §9.4 write it, template by template."""
    n, T = s.shape
    r = np.column_stack([rankdata(-s[:, t]) for t in range(T)])
    R = r.sum(axis=1)
    S = ((R - R.mean()) ** 2).sum()
    ties = sum(sum(c ** 3 - c for c in np.unique(r[:, t], return_counts=True)[1]) for t in range(T))
    return 12 * S / (T * T * (n ** 3 - n) - T * ties)


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 6), st.integers(2, 5), st.integers(0, 10 ** 6))
def test_kendall_w_equals_friedman_and_the_direct_formula(n, T, seed):
    rng = np.random.default_rng(seed)
    s = rng.integers(0, 4, size=(n, T)).astype(float)           # small integers: ties
    w, chi2, p = kendall_w(s)
    if np.all([len(np.unique(s[:, t])) == 1 for t in range(T)]):
        assert math.isnan(w)
        return
    assert w == pytest.approx(_direct_w(s), abs=1e-12)
    if n >= 3:
        f = friedmanchisquare(*[s[m] for m in range(n)])
        assert chi2 == pytest.approx(f.statistic, rel=1e-10) and p == pytest.approx(f.pvalue, rel=1e-8)
    stack = np.stack([s, s[::-1], s])
    ws = kendall_w(stack)[0]
    assert ws[0] == pytest.approx(w, abs=1e-12) and ws[1] == pytest.approx(_direct_w(s[::-1]), abs=1e-12)


def test_pair_concordance_hand_example():
    # templates t1, t2, t3: t1 and t2 order a > b > c, t3 orders b > a > c
    s = np.array([[3.0, 3, 1], [2, 2, 2], [1, 1, 0]])
    overall, per = pair_concordance(s)
    # pair (a, b): template pairs (t1,t2) agree, (t1,t3) and (t2,t3) disagree -> 1/3; (a, c), (b, c): 1
    assert per[0, 1] == pytest.approx(1 / 3) and per[0, 2] == 1 and per[1, 2] == 1
    assert overall == pytest.approx((1 / 3 + 1 + 1) / 3)
    tie = np.array([[1.0, 1], [1, 0]])                          # a tie in one template counts half
    assert pair_concordance(tie)[0] == pytest.approx(0.5)


def _log(seed=0, M=4, T=4, I=150, shift_sd=0.3):
    rng = np.random.default_rng(seed)
    rows = []
    for m in range(M):
        for t in range(T):
            shift = rng.normal(0, shift_sd)
            p = 1 / (1 + np.exp(-(0.5 * m - 0.7 + shift)))
            rows += [{"model": f"m{m}", "item": f"q{i}", "trial": t, "prompt": f"p{t}", "correct": bool(c)}
                     for i, c in enumerate(rng.random(I) < p)]
    return pd.DataFrame(rows)


def test_quantiles_scores_and_cis():
    d = _log()
    r = sensitivity(d, bootstrap=300, seed=1)
    want = d.groupby(["model", "prompt"])["correct"].mean().unstack()
    np.testing.assert_allclose(r.scores.loc[want.index, want.columns].to_numpy(), want.to_numpy())
    row = r.models.set_index("model").loc["m2"]
    x = want.loc["m2"].to_numpy()
    assert row.q0 == x.min() and row.q100 == x.max() and row.q50 == pytest.approx(np.median(x))
    assert row.range == pytest.approx(x.max() - x.min()) and row.sd == pytest.approx(x.std(ddof=1))
    assert row.q0_low <= row.q0 <= row.q0_high and row.range_low <= row.range_high
    assert r.w_low <= r.w <= r.w_high and r.concordance_low <= r.concordance <= r.concordance_high
    assert r.w == pytest.approx(kendall_w(r.scores.to_numpy())[0])
    assert list(r.models["model"]) == ["m3", "m2", "m1", "m0"]
    again = sensitivity(d, bootstrap=300, seed=1)
    assert again.w_low == r.w_low and again.models.equals(r.models)           # seeded
    d2 = sensitivity(_log(shift_sd=0.0, I=2000), bootstrap=0)                 # no template effect, big gaps
    assert d2.w > 0.9 and d2.concordance > 0.9 and math.isnan(d2.w_low)


def test_guards():
    d = _log()
    with pytest.raises(InputError, match="'nope' is not a column"):
        sensitivity(d, over="nope")
    with pytest.raises(InputError, match="one level"):
        sensitivity(d[d["prompt"] == "p0"], bootstrap=0)
    with pytest.raises(InputError, match="no answer under prompt 'p1'"):
        sensitivity(d[~((d["model"] == "m1") & (d["prompt"] == "p1"))], bootstrap=0)
    bad = d.astype({"prompt": object})
    bad.loc[5, "prompt"] = None
    with pytest.raises(InputError, match="row 6 has no 'prompt'"):
        sensitivity(bad, bootstrap=0)
    with pytest.raises(InputError, match="bootstrap"):
        sensitivity(d, bootstrap=-1)


def test_cli_variance_sensitivity(tmp_path, capsys):
    p = tmp_path / "log.csv"
    _log(I=60).to_csv(p, index=False)
    assert main(["variance", str(p), "--over", "prompt", "--sensitivity", "--bootstrap", "100", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "components" in out and out["sensitivity"]["templates"] == ["p0", "p1", "p2", "p3"]
    assert set(out["sensitivity"]["kendall_w"]) == {"estimate", "ci_low", "ci_high", "chi2", "df", "p"}
    assert main(["variance", str(p), "--over", "prompt", "--sensitivity", "--bootstrap", "0"]) == 0
    assert "Kendall's W" in capsys.readouterr().out
