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


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(0, 2**32 - 1), st.floats(-12, 12), st.floats(0.01, 2000.0))
def test_betabinomial_sums_equal_the_special_functions(rows, seed, shift, phi):
    """Issue 41: the beta-binomial's finite sums over the integer counts (log Γ, ψ, ψ' differences by their
    recurrences) give the numbers of scipy's betaln/digamma/polygamma per row: ℓ and its two η-derivatives within
    1e-11 relative (of max(1, |value|))."""
    from mrcstats.models.family import BETABINOMIAL

    rng = np.random.default_rng(seed)
    n = rng.integers(0, 60, rows).astype(float)
    k = rng.binomial(n.astype(int), rng.random()).astype(float)
    y = np.where(n > 0, k / np.where(n > 0, n, 1), 0.0)
    eta = shift + rng.normal(0, 2, rows)
    fast = BETABINOMIAL.loglik_kernel(y, n)
    slow = BETABINOMIAL.loglik_kernel(y, n, method="scipy")
    assert fast.sums and not slow.sums
    for a, b in zip(fast(eta, phi), slow(eta, phi)):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-11 * max(1.0, float(np.max(np.abs(b)))))
    ll, d1, d2 = fast(eta, phi, derivs=False)
    assert d1 is None and d2 is None and np.array_equal(ll, fast(eta, phi)[0])
    np.testing.assert_allclose(BETABINOMIAL.loglik_rows(y, n, eta, phi)[0], ll, rtol=0, atol=0)
