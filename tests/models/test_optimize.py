"""The Newton phase's step rules (issue 41): quadratic-interpolation backtracking and the bound-aware step."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcstats.models.optimize import _backtrack, _bound_step


@settings(max_examples=200, deadline=None)
@given(alpha=st.floats(1e-6, 1.0), D=st.floats(-1e5, 1e5), rise=st.floats(-1e3, 1e6), slope=st.floats(-10, 1e4))
def test_backtrack_stays_within_a_tenth_to_a_half(alpha, D, rise, slope):
    a = _backtrack(alpha, D, D + rise, slope)
    assert alpha / 10 * (1 - 1e-12) <= a <= alpha / 2 * (1 + 1e-12)


def test_backtrack_is_the_quadratic_minimiser():
    # φ(a) = 10 - 4a + 20a²: minimiser 0.1 (inside [0.1, 0.5] of alpha = 1)
    assert np.isclose(_backtrack(1.0, 10.0, 10.0 - 4.0 + 20.0, 4.0), 0.1)
    assert _backtrack(1.0, 10.0, float("nan"), 4.0) == 0.5


def test_bound_step_resolves_the_others_given_the_cut_theta():
    H = np.array([[2.0, 1.5], [1.5, 2.0]])
    x = np.array([0.05, 1.0])            # θ (bound 0) then β
    g = np.array([1.0, 0.2])
    bound = np.array([True, False])
    free = np.ones(2, dtype=bool)
    s = np.linalg.solve(H, g)
    assert x[0] - s[0] < 0               # the full Newton step crosses the bound
    t = _bound_step(H, g, s, x, bound, free, 1)
    assert np.isclose(t[0], 0.9 * x[0])  # θ goes to a tenth of its value
    assert np.isclose(t[1], (g[1] - H[1, 0] * t[0]) / H[1, 1])   # the β step given it
    assert g @ t > 0
    inside = np.array([1.5, 1.0])        # nothing crosses: the step is unchanged
    assert _bound_step(H, g, s, inside, bound, free, 1) is s
