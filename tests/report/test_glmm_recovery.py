"""The recovery check of a GLMM against a simulated truth: per-term z and the joint Wald test."""
from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chi2

from mrcstats.report.analyses.glmm import _recovery_sentence, truth_recovery


def _fit(est, se, rho):
    terms = ["(Intercept)", "x"]
    cf = pd.DataFrame({"term": terms, "estimate": est, "se": se})
    V = np.array([[se[0] ** 2, rho * se[0] * se[1]], [rho * se[0] * se[1], se[1] ** 2]])
    return cf, pd.DataFrame(V, index=terms, columns=terms)


def test_wald_against_the_truth_by_hand():
    cf, V = _fit([1.2, -0.1], [0.1, 0.2], 0.5)
    rec = truth_recovery(cf, V, {"(Intercept)": 1.0, "x": 0.0})
    d = np.array([0.2, -0.1])
    w = d @ np.linalg.inv(V.to_numpy()) @ d
    assert np.isclose(rec["wald_truth"]["chi2"], w) and rec["wald_truth"]["df"] == 2
    assert np.isclose(rec["wald_truth"]["p"], chi2.sf(w, 2))
    assert np.allclose(list(rec["z_truth"].values()), [2.0, -0.5])
    assert rec["coverage_95"] == 0.5 and np.isclose(rec["max_abs_error"], 0.2)
    text = _recovery_sentence(rec)
    assert "(Intercept) 2.00; x −0.50" in text.replace("-", "−") and "1 of 2 beyond ±1.96" in text
    assert "χ²(2) = " in text and "binomial" not in text


def test_terms_without_a_truth_are_not_tested():
    cf, V = _fit([1.2, -0.1], [0.1, 0.2], 0.0)
    rec = truth_recovery(cf, V, {"x": -0.1})
    assert rec["wald_truth"]["df"] == 1 and rec["wald_truth"]["chi2"] == 0.0 and rec["z_truth"] == {"x": 0.0}


@settings(max_examples=50, deadline=None)
@given(st.floats(-3, 3), st.floats(-3, 3), st.floats(0.01, 2), st.floats(0.01, 2))
def test_uncorrelated_wald_is_the_sum_of_squared_z(a, b, s1, s2):
    cf, V = _fit([a, b], [s1, s2], 0.0)
    rec = truth_recovery(cf, V, {"(Intercept)": 0.0, "x": 0.0})
    z = np.array(list(rec["z_truth"].values()))
    assert np.isclose(rec["wald_truth"]["chi2"], float(z @ z), rtol=1e-9, atol=1e-12)
