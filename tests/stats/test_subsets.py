"""stats.subsets helpers (the subset evaluation itself: tests/stats/test_irt*.py and the report tests)."""
from __future__ import annotations

import numpy as np
import pytest

from mrcstats.stats.subsets import _t_ci


def test_t_interval_is_clipped_to_the_statistics_range():
    m, lo, hi = _t_ci(np.array([1.0, 1.0, 0.2]), lo=-1.0, hi=1.0)
    assert hi == 1.0 and lo > -1.0 and m == pytest.approx(2.2 / 3)
    m, lo, hi = _t_ci(np.array([0.01, 0.0, 0.3]), lo=0.0)
    assert lo == 0.0 and hi > m
    assert np.isnan(_t_ci(np.array([0.5]))[1:]).all()     # one replicate: no interval
