"""The families' kernels: the binomial cumulant from the mean (issue 28) equals the direct one."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from mrcstats.models.family import BINOMIAL, POISSON, _expit, _softplus, _softplus_at_mean

EPS = float(np.finfo(float).eps)


@settings(max_examples=200, deadline=None)
@given(arrays(np.float64, st.integers(1, 60), elements=st.floats(-800, 800, allow_nan=False)))
def test_binomial_cumulant_from_the_mean_is_the_softplus(eta):
    """b(η) = log(1 + e^η) from μ = expit(η) agrees with log1p(exp(−|η|)) + max(η, 0) to a few ulp of
    max(1, |η|) per row: the deviance sums these, so its error stays at rounding level."""
    a = _softplus_at_mean(eta, _expit(eta.copy()))
    b = _softplus(eta.copy())
    assert np.all(np.abs(a - b) <= 4 * EPS * np.maximum(1.0, np.abs(eta)))
    assert np.all(a >= 0)


def test_cumulant_at_uses_the_mean_only_where_a_family_says_so():
    eta = np.linspace(-40, 40, 101)
    np.testing.assert_allclose(BINOMIAL.cumulant_at(eta, _expit(eta.copy())), _softplus(eta.copy()), rtol=0,
                               atol=4 * EPS * 40)
    np.testing.assert_array_equal(POISSON.cumulant_at(eta, np.zeros_like(eta)), POISSON.cumulant(eta))
