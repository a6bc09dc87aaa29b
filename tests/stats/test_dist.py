"""mrcstats._dist: the t and chi-square functions give scipy.stats' numbers to the bit; the scipy-free normal
tail and quantile agree with 40-digit values to 4e-16 relative and with scipy.stats to 4e-16 times the
problem's condition number (scipy's ``ndtr`` itself is off by up to ~x² ulp in the far tail), with the ends
(0, 1, ±inf, NaN, outside [0, 1]) exactly as scipy.stats."""
from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from mrcstats._dist import chi2_ppf, norm_ppf, norm_sf, t_ppf, t_sf

EDGE_Q = [0.0, 1.0, 0.5, 0.975, 0.995, 1e-300, 1 - 1e-16, -0.1, 1.1, np.nan]
EDGE_X = [0.0, -0.0, 1.96, -40.0, 40.0, np.inf, -np.inf, np.nan, 1e-300]
EDGE_DF = [0.0, -1.0, 0.5, 1.0, 2.0, 3.7, 30.0, 1e6, np.inf, np.nan]
RTOL = 4e-16

# Φ(−x) and Φ⁻¹(p) to 25 digits: mpmath 1.3 at 40 digits (mpmath.ncdf; mpmath.findroot on ncdf(x) − p)
SF_EXACT = [
    (0.0, "0.5"), (1e-300, "0.5"), (1e-08, "0.4999999960105771959856732"), (0.5, "0.3085375387259868963622954"),
    (1.0, "0.1586552539314570514147675"), (1.959963984540054, "0.02500000000000001087616802"),
    (2.5, "0.006209665325776135166978105"), (5.0, "0.0000002866515718791939116737523"),
    (8.0, "6.220960574271784123515995e-16"), (10.0, "7.619853024160526065973343e-24"),
    (20.0, "2.753624118606233695075623e-89"), (30.0, "4.906713927148187059533809e-198"),
    (37.0, "5.725571222524576822683193e-300"), (-3.0, "0.9986501019683699054733482"),
    (-0.25, "0.5987063256829237242408538"),
]
PPF_EXACT = [
    (1e-300, "-37.04709629936119923654704"), (1e-100, "-21.27345356096532429417952"),
    (1e-20, "-9.262340089798407579572095"), (1e-10, "-6.361340902404056199100397"),
    (1e-05, "-4.264890793922824610233749"), (0.001, "-3.090232306167813535358005"),
    (0.025, "-1.959963984540054211779584"), (0.1, "-1.281551565544600435334517"),
    (0.3, "-0.5244005127080408159694544"), (0.4999999, "-0.0000002506628274703106513497816"),
    (0.5, "0"), (0.500001, "0.00000250662827470570519913909"), (0.75, "0.674489750196081743202227"),
    (0.975, "1.959963984540053855604431"), (0.999, "3.090232306167813277758202"),
    (1 - 2 ** -52, "8.125890664701906858507992"),
]


def _same(a, b) -> None:
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))   # NaN == NaN, bit-level for floats
    assert np.shape(a) == np.shape(b)


def _close(a: float, b: float, rtol: float) -> None:
    assert abs(a - b) <= rtol * abs(b), (a, b, abs(a - b) / abs(b) if b else abs(a))


def test_normal_against_40_digit_values():
    for x, v in SF_EXACT:
        _close(float(norm_sf(x)), float(v), RTOL)
    for p, v in PPF_EXACT:
        _close(float(norm_ppf(p)), float(v), RTOL)
    assert norm_ppf(0.5) == 0.0 and norm_sf(0.0) == 0.5


def test_edges_equal_scipy_stats():
    q, x = np.array(EDGE_Q), np.array(EDGE_X)
    inner = (q > 0) & (q < 1)
    _same(norm_ppf(q[~inner]), stats.norm.ppf(q[~inner]))            # ±inf at 0/1, NaN outside and at NaN
    np.testing.assert_allclose(norm_ppf(q[inner]), stats.norm.ppf(q[inner]), rtol=4 * RTOL)
    finite = np.isfinite(x) & (np.abs(x) < 30)
    _same(norm_sf(x[~finite]), stats.norm.sf(x[~finite]))           # 1 at -inf, 0 at inf (and at 40), NaN
    np.testing.assert_allclose(norm_sf(x[finite]), stats.norm.sf(x[finite]), rtol=4 * RTOL)
    for df in EDGE_DF:
        _same(t_ppf(q, df), stats.t.ppf(q, df))
        _same(t_sf(x, df), stats.t.sf(x, df))
        _same(chi2_ppf(q, df), stats.chi2.ppf(q, df))
    _same(t_ppf(0.975, np.array(EDGE_DF)), stats.t.ppf(0.975, np.array(EDGE_DF)))
    _same(chi2_ppf(0.99, np.array(EDGE_DF)), stats.chi2.ppf(0.99, np.array(EDGE_DF)))


def test_scalars_stay_scalars_and_shapes_are_kept():
    for ours, theirs in ((norm_ppf(0.975), stats.norm.ppf(0.975)), (norm_sf(1.5), stats.norm.sf(1.5)),
                         (t_sf(2.1, 7), stats.t.sf(2.1, 7)), (chi2_ppf(0.99, 3), stats.chi2.ppf(0.99, 3))):
        assert type(ours) is type(theirs)
    assert float(t_sf(2.1, 7)) == float(stats.t.sf(2.1, 7))
    assert norm_sf(np.zeros((2, 3))).shape == (2, 3) and norm_ppf([0.1, 0.2]).shape == (2,)
    assert norm_ppf([]).shape == (0,)


@settings(max_examples=300, deadline=None)
@given(q=st.floats(0, 1), x=st.floats(allow_nan=True, allow_infinity=True),
       df=st.floats(min_value=1e-3, max_value=1e7))
def test_t_and_chi2_equal_scipy_stats(q, x, df):
    _same(t_ppf(q, df), stats.t.ppf(q, df))
    _same(t_sf(x, df), stats.t.sf(x, df))
    _same(chi2_ppf(q, df), stats.chi2.ppf(q, df))


@settings(max_examples=500, deadline=None)
@given(x=st.floats(-37.5, 37.5))
def test_normal_tail_agrees_with_scipy_within_its_condition_number(x):
    """d log Φ(−x) / d log x ≈ x² for large x: scipy's ndtr, which rounds x/√2, is off by that many ulp."""
    ours, ref = float(norm_sf(x)), float(stats.norm.sf(x))
    assert 0 <= ours <= 1
    if ref > 1e-300:
        _close(ours, ref, 4 * RTOL * max(1.0, x * x))


@settings(max_examples=500, deadline=None)
@given(p=st.one_of(st.floats(0, 1, exclude_min=True, exclude_max=True),
                   st.floats(1e-300, 1e-5), st.floats(-16, 0).map(lambda e: 1 - 10 ** e)))
def test_normal_quantile_agrees_with_scipy_and_inverts_the_tail(p):
    """rtol scaled by the quantile's condition number p / (x φ(x)) (near p = 1/2 x is tiny); and the
    quantile inverts the tail: Φ(Φ⁻¹(p)) = p to the tail's accuracy."""
    ours, ref = float(norm_ppf(p)), float(stats.norm.ppf(p))
    if p in (0.0, 1.0):
        assert ours == ref
        return
    phi = math.exp(-ref * ref / 2) / math.sqrt(2 * math.pi)
    cond = max(1.0, min(p, 1 - p) / abs(ref * phi)) if ref else math.inf
    if math.isfinite(cond):
        _close(ours, ref, 4 * RTOL * cond)
    if p < 0.25 and 1 - (1 - p) == p:                                  # symmetric where 1 - p is exact
        assert float(norm_ppf(1 - p)) == -ours
    if p < 0.5:
        _close(float(norm_sf(-ours)), p, 8 * RTOL * max(1.0, ours * ours))
