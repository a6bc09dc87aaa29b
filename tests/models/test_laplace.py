"""The Laplace fit's fast paths (issue 41): the block-diagonal H of one grouping factor gives the dense path's
objective and conditional covariances, and the analytic gradient of one random intercept is the derivative of the
objective."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from mrcstats.models.design import build_design
from mrcstats.models.family import BETABINOMIAL
from mrcstats.models.laplace import LaplaceModel

from ._fits import model_spec


def _data(seed: int = 3, G: int = 15, per: int = 6) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    g = np.repeat(np.arange(G), per)
    x = rng.normal(size=G * per)
    n = rng.integers(3, 15, G * per)
    b = rng.normal(0, 0.7, G)[g] + rng.normal(0, 0.3, G)[g] * x
    p = 1 / (1 + np.exp(-(0.3 + 0.5 * x + b)))
    k = rng.binomial(n, rng.beta(p * 6, (1 - p) * 6))
    return pd.DataFrame({"k": k, "n": n, "x": x, "g": [f"g{i:02d}" for i in g]})


def _design(formula: str):
    return build_design(model_spec(formula, BETABINOMIAL), _data(), allow_slopes=True)


@pytest.mark.parametrize("formula, theta", [
    ("cbind(k, n - k) ~ x + (1 | g)", [0.6]),
    ("cbind(k, n - k) ~ x + (0 + x | g)", [0.4]),
    ("cbind(k, n - k) ~ x + (1 + x | g)", [0.7, -0.2, 0.35]),
])
def test_blocks_equal_the_dense_path(formula, theta):
    d = _design(formula)
    fast, dense = LaplaceModel(d), LaplaceModel(d, dense=True)
    assert fast.blocks and not dense.blocks
    theta, beta = np.array(theta), np.array([0.2, 0.4])
    for phi in (2.0, 8.0):
        assert fast.objective(theta, beta, phi) == pytest.approx(dense.objective(theta, beta, phi), rel=1e-12)
        np.testing.assert_allclose(fast.u, dense.u, atol=1e-9)
        ef, bf, cf = fast.conditional(theta, beta, phi)
        ed, bd, cd = dense.conditional(theta, beta, phi)
        np.testing.assert_allclose(ef, ed, atol=1e-10)
        np.testing.assert_allclose(bf, bd, atol=1e-9)
        np.testing.assert_allclose(cf[0], cd[0], atol=1e-10)


@pytest.mark.parametrize("x", [[0.6, 0.2, 0.5, math.log(5.0)], [0.15, -0.3, 0.9, math.log(40.0)],
                               [1.5, 0.0, 0.0, 0.0]])
def test_gradient_is_the_derivative_of_the_objective(x):
    """The analytic gradient (implicit modes, row derivatives by differences) against central differences of
    −2 log L itself (step 1e-5): within 1e-5 of max(1, |gradient|)."""
    m = LaplaceModel(_design("cbind(k, n - k) ~ x + (1 | g)"))
    assert m.has_gradient and not LaplaceModel(_design("cbind(k, n - k) ~ x + (1 + x | g)")).has_gradient
    x = np.array(x)

    def f(z):
        return m.objective(z[:1], z[1:3], math.exp(z[3]))

    _f, g = m.gradient(x[:1], x[1:3], math.exp(x[3]))
    num = np.array([(f(x + e) - f(x - e)) / 2e-5 for e in np.eye(4) * 1e-5])
    np.testing.assert_allclose(g, num, rtol=0, atol=1e-5 * max(1.0, float(np.max(np.abs(num)))))
