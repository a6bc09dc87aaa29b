"""p_adjust (R p.adjust) and the effect sizes with intervals (R prop.test; noncentral χ² inversion)."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcstats.errors import InputError
from mrcstats.stats.effects import cramers_v, proportion_difference
from mrcstats.stats.multiplicity import p_adjust

P = [0.01, 0.04, 0.03, float("nan"), 0.5, 0.002, 0.04]


def _r(rscript: str, code: str) -> list[float]:
    out = subprocess.run([rscript, "-e", code], capture_output=True, text=True, check=True).stdout
    return [float("nan") if v == "NA" else float(v) for v in out.split()]


def test_p_adjust_matches_r(rscript):
    for method in ("holm", "bonferroni", "BH"):
        want = _r(rscript, f"p <- c(0.01, 0.04, 0.03, NA, 0.5, 0.002, 0.04); "
                           f"cat(sprintf('%.15g', p.adjust(p, '{method}')))")
        got = p_adjust(P, method)
        assert np.allclose(np.nan_to_num(got, nan=-1), np.nan_to_num(np.array(want), nan=-1), atol=1e-15), method


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=30))
def test_holm_is_monotone_bounded_and_above_raw(ps):
    adj = p_adjust(ps, "holm")
    x = np.asarray(ps)
    assert np.all(adj >= x - 1e-15) and np.all(adj <= 1)
    o = np.argsort(x, kind="mergesort")
    assert np.all(np.diff(adj[o]) >= -1e-15)
    assert np.all(adj <= p_adjust(ps, "bonferroni") + 1e-15)


def test_p_adjust_rejects_bad_input():
    with pytest.raises(InputError, match="method"):
        p_adjust([0.1], "hochberg")
    with pytest.raises(InputError, match=r"\[0, 1\]"):
        p_adjust([1.5])


def test_proportion_difference_matches_prop_test(rscript):
    lo, hi = _r(rscript, "suppressWarnings(cat(sprintf('%.15g', prop.test(c(11, 8), c(11, 17), "
                         "correct = FALSE)$conf.int)))")
    d = proportion_difference(11, 11, 8, 17)
    assert d.estimate == pytest.approx(1 - 8 / 17)
    assert (d.ci_low, d.ci_high) == (pytest.approx(lo, abs=1e-12), pytest.approx(hi, abs=1e-12))


def test_cramers_v_interval_inverts_the_noncentral_chi_square():
    from scipy.stats import chi2_contingency, ncx2

    t = np.array([[30, 10, 5], [12, 20, 18]])
    v = cramers_v(t)
    stat = chi2_contingency(t, correction=False)[0]
    n, k = t.sum(), 1
    assert v.estimate == pytest.approx(np.sqrt(stat / n))
    lam_lo, lam_hi = v.ci_low ** 2 * n * k, v.ci_high ** 2 * n * k
    assert ncx2.cdf(stat, 2, lam_lo) == pytest.approx(0.975, abs=1e-6)
    assert ncx2.cdf(stat, 2, lam_hi) == pytest.approx(0.025, abs=1e-6)
    assert v.ci_low < v.estimate < v.ci_high
    weak = cramers_v(np.array([[20, 21], [20, 19]]))
    assert weak.ci_low == 0.0
