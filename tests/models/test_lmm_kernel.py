"""The one-term LMM kernel (``mrcstats.models._lmmkernel``, issue 41) against the numpy path it replaces: the
profiled deviance, its pieces and the exact gradient (and ∂RXᵀRX) at random θ, for every code path of the kernel
(q = 1 and 2 with m = 1 + p <= 6: four levels per vector step and a zero-padded tail; q <= 2 with more fixed
effects: the lane loop; q = 3: the per-level loop), and whole fits (fixed effects, θ, random effects and their
conditional variances) with and without it."""
from __future__ import annotations

import contextlib
import os

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given, reject, settings
from hypothesis import strategies as st

import mrcstats
from mrcstats.errors import InputError, ModelError
from mrcstats.models import lmm_fit
from mrcstats.models.design import build_design
from mrcstats.models.family import GAUSSIAN
from mrcstats.models.lmm import LmmSystem

from ._fits import model_spec

needs_kernel = pytest.mark.skipif(lmm_fit.KERNEL is None, reason="the C kernel is not built (no C compiler?)")


def test_the_kernel_is_built_where_ci_runs():
    """CI (``.ci/run`` sets MRCSTATS_REQUIRE_KERNEL=1) installs with a C compiler: the kernel must be there, or
    every one-term fit would silently take the slower numpy path."""
    if lmm_fit.KERNEL is None:
        if os.environ.get("MRCSTATS_REQUIRE_KERNEL", "") not in ("", "0"):
            pytest.fail("mrcstats.models._lmmkernel is not built: `pip install -e .` needs a C compiler")
        pytest.skip("the C kernel is not built")


def _data(levels: int, per: int, p: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    g = np.repeat(np.arange(levels), per)[: levels * per]
    rng.shuffle(g)
    n = len(g)
    df = pd.DataFrame({f"x{i}": rng.normal(size=n) for i in range(max(p, 2))})
    df["g"] = pd.Categorical([f"g{i}" for i in g])
    df["y"] = (0.2 + 0.5 * df["x0"] + rng.normal(0, 0.7, levels)[g] + rng.normal(0, 0.3, levels)[g] * df["x1"]
               + rng.normal(0, 0.8, n))
    return df


@contextlib.contextmanager
def _numpy_path():
    """The module as installed without the extension."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(lmm_fit, "KERNEL", None)
        yield


def _pair(formula: str, df: pd.DataFrame, reml: bool) -> tuple[LmmSystem, LmmSystem]:
    design = build_design(model_spec(formula, GAUSSIAN), df)
    with_kernel = LmmSystem(design, reml=reml)
    with _numpy_path():
        without = LmmSystem(design, reml=reml)
    return with_kernel, without


def _compare(sk: LmmSystem, sn: LmmSystem, theta: np.ndarray, rel: float = 1e-11) -> None:
    assert sk.kernel
    ek = sk.evaluate(theta)
    gk = sk.grad_parts(ek, drtr=True)
    with _numpy_path():
        assert not sn.kernel
        en = sn.evaluate(theta)
        gn = sn.grad_parts(en, drtr=True)
    for key in ("dev", "r2", "ldL2", "ldRX2"):
        assert ek[key] == pytest.approx(en[key], rel=rel, abs=1e-10), key
    tol = max(1e-8, 1e3 * rel)
    assert np.allclose(ek["beta"], en["beta"], rtol=tol, atol=1e-10)
    assert np.allclose(ek["RXtRX"], en["RXtRX"], rtol=1e-11, atol=1e-9)
    for a, b in zip(gk[:3], gn[:3], strict=True):
        assert np.allclose(a, b, rtol=tol, atol=tol * (1 + np.abs(b).max(initial=0.0))), (a, b)
    for a, b in zip(gk[3], gn[3], strict=True):
        assert np.allclose(a, b, rtol=tol, atol=tol * (1 + np.abs(b).max(initial=0.0)))
    # the PLS pieces a kernel evaluation computes when read (the result's random effects)
    for a, b in zip(ek["u_split"], en["u_split"], strict=True):
        assert np.allclose(a, b, rtol=tol, atol=1e-10)


@needs_kernel
@settings(max_examples=25, deadline=None)
@given(levels=st.integers(2, 60), per=st.integers(3, 6), p=st.integers(0, 7), slope=st.sampled_from([0, 1, 2]),
       reml=st.booleans(), seed=st.integers(0, 10_000))
def test_kernel_matches_the_numpy_path(levels, per, p, slope, reml, seed):
    """q = 1, 2, 3 and p = 0..7 (m = 1 + p up to 8: the vector step for m <= 6, the lane loop above), any number
    of levels (the tail of n1 mod 4 zero-padded)."""
    # (rows enough that r² is not a cancellation: with n − p near 0 both paths are rounding)
    assume(levels * per >= 4 * (p + 1) + 8)
    df = _data(levels, per, p, seed)
    fixed = " + ".join(f"x{i}" for i in range(p)) if p else "0"
    re = ["(1 | g)", "(1 + x1 | g)", "(1 + x0 + x1 | g)"][slope]
    try:
        sk, sn = _pair(f"y ~ {fixed} + {re}", df, reml)
    except (ModelError, InputError):   # lme4's design checks (e.g. fewer rows than random effects): not the kernel's case
        reject()
    rng = np.random.default_rng(seed)
    theta = np.concatenate([t.start for t in sk.terms]) * rng.uniform(0.2, 2.0) + 0.1 * rng.random(int(sk.th_off[-1]))
    lower = np.concatenate([t.lower for t in sk.terms])
    _compare(sk, sn, np.maximum(theta, lower))


@needs_kernel
def test_kernel_log_determinant_does_not_overflow():
    """Levels with many rows and a large θ: each det D_j is ~1e10, their product overflows a double after ~30
    levels; the kernel logs its running products before they do."""
    df = _data(400, 50, 1, 5)
    df["x1"] *= 1e3
    sk, sn = _pair("y ~ x0 + (1 + x1 | g)", df, True)
    ek = sk.evaluate(np.array([300.0, 2.0, 50.0]))
    assert np.isfinite(ek["ldL2"]) and ek["ldL2"] > 400 * np.log(1e10)
    # (RXᵀRX = XᵀX − K cancels to ~1e-10 relative at this θ, in either path)
    _compare(sk, sn, np.array([300.0, 2.0, 50.0]), rel=1e-8)
    sk, sn = _pair("y ~ x0 + (1 | g)", df, False)
    with _numpy_path():
        ref = sn.evaluate(np.array([1e4]))["ldL2"]
    assert sk.evaluate(np.array([1e4]))["ldL2"] == pytest.approx(ref, rel=1e-13)


@needs_kernel
def test_kernel_rejects_arrays_of_the_wrong_shape():
    q, m, n1 = 2, 3, 10
    T, A, B = np.eye(q), np.ones((q, q, n1)), np.ones((q, m, n1))
    K, Q, G = np.empty((m, m)), np.empty((q, q)), np.empty((q, q, m, m))
    lmm_fit.KERNEL.one_term(T, A, B, K, Q, G, q, m, n1)
    with pytest.raises(ValueError, match="B must be a contiguous float64 array of 60 values"):
        lmm_fit.KERNEL.one_term(T, A, np.ones((q, 2, n1)), K, Q, G, q, m, n1)
    with pytest.raises(ValueError, match="A must be"):
        lmm_fit.KERNEL.one_term(T, A.astype(np.float32), B, K, Q, G, q, m, n1)
    with pytest.raises(ValueError, match="q must be"):
        lmm_fit.KERNEL.one_term(T, A, B, K, Q, G, 0, m, n1)


@needs_kernel
@pytest.mark.parametrize("formula", ["y ~ x0 + (1 + x1 | g)", "y ~ x0 + x1 + (1 | g)"])
def test_fit_with_and_without_the_kernel(formula):
    """The whole fit (θ̂, β̂ and their SEs, Satterthwaite df, logLik, random effects and conditional variances)
    does not depend on the kernel beyond rounding and the optimiser's tolerance."""
    df = _data(300, 5, 2, 11)
    fk = mrcstats.lmer(formula, df)
    with _numpy_path():
        fn = mrcstats.lmer(formula, df)
    assert fk.loglik == pytest.approx(fn.loglik, rel=1e-10)
    assert np.allclose(fk.fixef_values, fn.fixef_values, rtol=1e-6, atol=1e-8)
    assert np.allclose(fk.theta_values, fn.theta_values, rtol=1e-5, atol=1e-7)
    assert np.allclose(fk.se_values, fn.se_values, rtol=1e-6)
    assert np.allclose(fk.df_values, fn.df_values, rtol=1e-5)
    rk, rn = fk.ranef["g"], fn.ranef["g"]
    assert list(rk.columns) == list(rn.columns)
    for c in rk.columns:
        assert np.allclose(np.stack(rk[c].to_numpy()).astype(float), np.stack(rn[c].to_numpy()).astype(float),
                           rtol=1e-5, atol=1e-7), c
