"""Issue 25: the GLMM result names the covariance behind its SEs (vcov_method: "hessian" or "RX", lme4's
vcov(m, use.hessian = TRUE/FALSE)), offers the other, and both engines report the same rule by default."""
from __future__ import annotations

import numpy as np
import pytest

from mrcstats.errors import InputError
from mrcstats.models import glmer

from ._r import skip_without_rpy2


@pytest.fixture
def data(glmm_data):
    return glmm_data(seed=4, groups=40, per=8, factor="LLM", levels=("a", "b", "c"))


def _formula(d):
    resp = "correct" if "correct" in d.columns else "y"
    group = "g" if "g" in d.columns else "cluster"
    return f"{resp} ~ LLM + (1 | {group})"


def test_native_names_the_rule_and_offers_the_other(data):
    m = glmer(_formula(data), data)
    assert m.vcov_method == "hessian" and m.vcov_other is not None
    assert m.to_dict()["vcov_method"] == "hessian" and "use.hessian = TRUE" in m.summary()
    rx = m.use_vcov("RX")
    assert rx.vcov_method == "RX" and np.allclose(rx.se ** 2, np.diag(m.vcov_other))
    assert rx.use_vcov("hessian").se.equals(m.se)
    again = glmer(_formula(data), data, vcov="RX")
    np.testing.assert_allclose(again.se, rx.se, rtol=1e-10)
    with pytest.raises(InputError, match="hessian"):
        glmer(_formula(data), data, vcov="sandwich")


@pytest.mark.r
def test_engines_report_the_same_rule(rscript, data):
    skip_without_rpy2()
    f = _formula(data)
    nat, r = glmer(f, data), glmer(f, data, engine="lme4")
    assert nat.vcov_method == r.vcov_method == "hessian"
    np.testing.assert_allclose(nat.se, r.se, rtol=2e-3)
    np.testing.assert_allclose(nat.use_vcov("RX").se, r.use_vcov("RX").se, rtol=2e-3)
