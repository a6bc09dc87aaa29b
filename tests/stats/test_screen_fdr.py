"""The screen's flag controls the false-discovery rate it names: on generated logs with known mis-keyed items
and clean items that misfit the 2PL (two correlated skills), the share of clean items among the flagged ones is
at most ``fdr`` on average over seeds (deterministic: fixed seeds, no clock)."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

from mrcstats.stats.screen import _empirical_null, screen
from mrcstats.tasks.choices import choice_log

FDR = 0.2
SEEDS = (0, 1, 2, 3)


@pytest.fixture(scope="module")
def runs():
    out = []
    for seed in SEEDS:
        sim = choice_log(seed, models=80, items=200, miskeyed=20, skills=2, skill_corr=0.5)
        res = screen(sim.log, fdr=FDR, seed=seed, n_null=2000, progress=False)
        out.append((sim, res))
    return out


def test_realised_fdr_at_most_nominal_on_average(runs):
    rates, flagged, hits = [], 0, 0
    for sim, res in runs:
        fl = res.items[res.items["flag"]]
        bad = fl["item"].isin(sim.truth["miskeyed"])
        rates.append(float((~bad).sum()) / max(len(fl), 1))
        flagged += len(fl)
        hits += int(bad.sum())
    assert flagged >= 8, "the screen flagged (almost) nothing: the test would be vacuous"
    assert np.mean(rates) <= FDR, rates
    assert hits >= 0.8 * flagged


def test_p_values_never_below_the_simulated_ones(runs):
    for _sim, res in runs:
        it = res.items.dropna(subset=["p_value"])
        assert res.calibration["method"] == "empirical"
        assert res.calibration["sigma_used"] >= 1 and res.calibration["delta_used"] >= 0
        # the empirical null only makes the test more conservative than the simulation's mid-p
        assert (it["p_value"] <= 1).all() and (it["p_value"] > 0).all()
        q = it["q_value"].to_numpy()
        assert (it["flag"] == (q <= res.fdr)).all()


def test_empirical_null_recovers_shift_and_spread():
    rng = np.random.default_rng(0)
    s0 = np.sort(rng.normal(0, 1, 20000))
    same = rng.normal(0, 1, 4000)
    p, cal = _empirical_null(s0, same)
    assert abs(cal["delta"]) < 0.05 and abs(cal["sigma"] - 1) < 0.05
    assert np.max(np.abs(p - norm.sf(same))) < 0.02
    # clean items that misfit: shifted and wider than the simulation -> recentred, so a clean item in their
    # upper tail is no longer significant
    wide = rng.normal(0.5, 1.5, 4000)
    p, cal = _empirical_null(s0, wide)
    assert cal["delta"] == pytest.approx(0.5, abs=0.1) and cal["sigma"] == pytest.approx(1.5, abs=0.1)
    assert np.mean(p < 0.01) == pytest.approx(0.01, abs=0.006)
    # never below the simulation's mid-p (ties included)
    s0t = np.sort(np.round(rng.normal(0, 1, 3000), 1))
    x = np.round(rng.normal(0.2, 1.3, 500), 1)
    p, _cal = _empirical_null(s0t, x)
    mid = ((len(s0t) - np.searchsorted(s0t, x, "right")) + 0.5 * (np.searchsorted(s0t, x, "right")
           - np.searchsorted(s0t, x, "left")) + 0.5) / (len(s0t) + 1)
    tail = x > s0t[len(s0t) - 251]
    assert (p[~tail] >= mid[~tail] - 1e-12).all()
    # narrower than the simulation: never less conservative than it
    _p, cal = _empirical_null(s0, rng.normal(-0.3, 0.7, 4000))
    assert cal["delta_used"] == 0.0 and cal["sigma_used"] == 1.0
