"""mrcstats._dist gives scipy.stats' numbers to the bit, without importing scipy.stats."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from mrcstats._dist import norm_ppf, norm_sf, t_ppf, t_sf

EDGE_Q = [0.0, 1.0, 0.5, 0.975, 0.995, 1e-300, 1 - 1e-16, -0.1, 1.1, np.nan]
EDGE_X = [0.0, -0.0, 1.96, -40.0, 40.0, np.inf, -np.inf, np.nan, 1e-300]
EDGE_DF = [0.0, -1.0, 0.5, 1.0, 2.0, 3.7, 30.0, 1e6, np.inf, np.nan]


def _same(a, b) -> None:
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))   # NaN == NaN, bit-level for floats
    assert np.shape(a) == np.shape(b)


def test_edges_equal_scipy_stats():
    q, x = np.array(EDGE_Q), np.array(EDGE_X)
    _same(norm_ppf(q), stats.norm.ppf(q))
    _same(norm_sf(x), stats.norm.sf(x))
    for df in EDGE_DF:
        _same(t_ppf(q, df), stats.t.ppf(q, df))
        _same(t_sf(x, df), stats.t.sf(x, df))
    _same(t_ppf(0.975, np.array(EDGE_DF)), stats.t.ppf(0.975, np.array(EDGE_DF)))


def test_scalars_stay_scalars():
    assert type(norm_ppf(0.975)) is type(stats.norm.ppf(0.975))
    assert float(norm_ppf(0.975)) == float(stats.norm.ppf(0.975))
    assert float(t_sf(2.1, 7)) == float(stats.t.sf(2.1, 7))


@settings(max_examples=300, deadline=None)
@given(q=st.floats(0, 1), x=st.floats(allow_nan=True, allow_infinity=True),
       df=st.floats(min_value=1e-3, max_value=1e7))
def test_random_values_equal_scipy_stats(q, x, df):
    _same(norm_ppf(q), stats.norm.ppf(q))
    _same(norm_sf(x), stats.norm.sf(x))
    _same(t_ppf(q, df), stats.t.ppf(q, df))
    _same(t_sf(x, df), stats.t.sf(x, df))
