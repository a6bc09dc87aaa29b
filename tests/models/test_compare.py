"""anova / drop1 / gvif: the formulas, car's and lme4's edge cases, and R's own numbers."""
from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcstats.errors import InputError, ModelError
from mrcstats.models import compare
from mrcstats.models.compare import anova, drop1, gvif, gvif_from_vcov
from mrcstats.models.design import build_design
from mrcstats.models.formula import parse_formula
from mrcstats.models.results import GlmerResult

from ._fits import model_spec
from ._r import skip_without_rpy2

REPO = Path(__file__).resolve().parents[2]


def _fake_fit(formula: str, data: pd.DataFrame, loglik: float, nobs: int | None = None, seed: int = 0,
              engine: str = "native") -> GlmerResult:
    """A GlmerResult with given logLik and a random positive-definite vcov (no fitting)."""
    design = build_design(model_spec(formula), data)
    p = len(design.column_names)
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(p, p))
    V = a @ a.T / p + np.eye(p) * 0.1
    return GlmerResult.from_estimates(
        info=design.info, beta=rng.normal(size=p), vcov=V, theta=[0.5], group_names=["g"],
        ngroups={"g": 40}, ranef={}, loglik=loglik, deviance=-2 * loglik, resid_quantiles=[-2, -1, 0, 1, 2],
        nobs=nobs or design.nobs, converged=True, engine=engine, fit_options={}, frame=data, family=design.family)


# ----------------------------------------------------------------------------- gvif


def test_gvif_single_columns_equal_inverse_correlation_diagonal(glmm_data):
    d = glmm_data()
    m = _fake_fit("y ~ x + z + (1 | g)", d, -100.0, seed=3)
    g = gvif(m)
    V = m.vcov.to_numpy()[1:, 1:]
    R = V / np.sqrt(np.outer(np.diag(V), np.diag(V)))
    np.testing.assert_allclose(g.gvif, np.diag(np.linalg.inv(R)), rtol=1e-12)
    assert g.df == (1, 1)
    np.testing.assert_allclose(g.gvif_adj, np.sqrt(g.gvif), rtol=1e-12)
    assert list(g.to_frame().columns) == ["GVIF", "Df", "GVIF^(1/(2*Df))"]
    assert g.to_dict()["term"] == ["x", "z"]
    assert "GVIF^(1/(2*Df))" in g.summary()


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=0, max_value=10_000), st.lists(st.floats(0.1, 10.0), min_size=6, max_size=6))
def test_gvif_is_invariant_to_rescaling_the_columns(seed, scales):
    # GVIF depends on the correlation matrix only: rescaling a predictor (D V D) changes nothing
    rng = np.random.default_rng(seed)
    p = 6
    a = rng.normal(size=(p, p + 2))
    V = a @ a.T
    names = ["(Intercept)", "x", "f2", "f3", "x:f2", "x:f3"]
    assign = (0, 1, 2, 2, 3, 3)
    labels = ("x", "f", "x:f")
    g1 = gvif_from_vcov(pd.DataFrame(V, index=names, columns=names), assign, labels)
    D = np.diag(scales)
    g2 = gvif_from_vcov(pd.DataFrame(D @ V @ D, index=names, columns=names), assign, labels)
    np.testing.assert_allclose(g1.gvif, g2.gvif, rtol=1e-8)
    assert all(v >= 1 - 1e-9 for v in g1.gvif)  # det inequality (Fischer): GVIF >= 1
    assert g1.df == (1, 2, 2)


def test_gvif_needs_two_terms_as_car(glmm_data):
    m = _fake_fit("y ~ x + (1 | g)", glmm_data(), -100.0)
    with pytest.raises(ModelError, match="model contains fewer than 2 terms"):
        gvif(m)


def test_gvif_warns_without_intercept(glmm_data):
    m = _fake_fit("y ~ 0 + x + z + (1 | g)", glmm_data(), -100.0)
    with pytest.warns(UserWarning, match="No intercept: vifs may not be sensible."):
        g = gvif(m)
    assert g.messages == ("No intercept: vifs may not be sensible.",)
    assert len(g.gvif) == 2


def test_gvif_rejects_aliased_coefficients(glmm_data):
    m = _fake_fit("y ~ x + z + (1 | g)", glmm_data(), -100.0)
    bad = dataclasses.replace(m, fixef_values=np.where(np.array(m.fixef_names) != "z", m.fixef_values, np.nan))
    with pytest.raises(ModelError, match="aliased coefficients"):
        gvif(bad)


# ----------------------------------------------------------------------------- anova


def test_anova_orders_by_npar_and_clips_at_zero(glmm_data):
    d = glmm_data()
    small = _fake_fit("y ~ x + (1 | g)", d, -150.0)
    big = _fake_fit("y ~ x + f + (1 | g)", d, -147.5)
    a = anova(big, small)  # argument order does not matter (R sorts by npar)
    assert a.npar == (small.npar, big.npar) and a.df == 2
    assert a.chisq == pytest.approx(5.0)
    from scipy import stats

    assert a.p == pytest.approx(stats.chi2.sf(5.0, 2))
    assert a.deviance == (300.0, 295.0)
    worse = _fake_fit("y ~ x + f + (1 | g)", d, -151.0)
    assert anova(small, worse).chisq == 0.0  # 2 * pmax(0, diff(llk))
    frame = a.to_frame()
    assert list(frame.columns) == ["npar", "AIC", "BIC", "logLik", "deviance", "Chisq", "Df", "Pr(>Chisq)"]
    assert a.to_dict()["loglik"] == [-150.0, -147.5]
    assert "Pr(>Chisq)" in a.summary()


def test_anova_same_npar_gives_no_p(glmm_data):
    d = glmm_data()
    a = anova(_fake_fit("y ~ x + (1 | g)", d, -150.0), _fake_fit("y ~ z + (1 | g)", d, -149.0))
    assert a.df == 0 and a.p is None


def test_anova_needs_the_same_rows(glmm_data):
    d = glmm_data()
    with pytest.raises(ModelError, match="same size of dataset"):
        anova(_fake_fit("y ~ x + (1 | g)", d, -150.0), _fake_fit("y ~ x + f + (1 | g)", d, -149.0, nobs=100))
    with pytest.raises(InputError):
        anova(_fake_fit("y ~ x + (1 | g)", d, -150.0), "not a fit")  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- drop1


def test_drop1_scope_respects_marginality():
    assert parse_formula("y ~ x * f + z + (1 | g)").droppable() == ("z", "x:f")
    assert parse_formula("y ~ x + f + (1 | g)").droppable() == ("x", "f")
    assert parse_formula("y ~ a * b * c + (1 | g)").droppable() == ("a:b:c",)


def test_drop1_refits_with_the_same_engine_and_options(glmm_data, monkeypatch):
    d = glmm_data()
    full = _fake_fit("y ~ x * f + z + (1 | g)", d, -140.0)
    full = dataclasses.replace(full, fit_options={"contrasts": {"f": "sum"}, "nagq": 1, "levels": None,
                                                  "weights": None})
    calls = []

    def fake_glmer(spec, data, *, engine, contrasts=None, levels=None, weights=None, nagq=1, **kw):
        calls.append((spec.formula, engine, contrasts, nagq))
        return _fake_fit(spec.formula, data, -143.0 if "z" not in spec.formula else -141.5)

    monkeypatch.setattr("mrcstats.models.fit.glmer", fake_glmer)
    r = drop1(full)
    assert r.terms == ("z", "x:f")
    assert calls[0] == ("y ~ x + f + x:f + (1 | g)", "native", {"f": "sum"}, 1)
    assert calls[1][0] == "y ~ x + f + z + (1 | g)"
    assert r.npar == (1, 2)
    assert r.chisq == pytest.approx((6.0, 3.0))
    assert r.to_frame().index[0] == "<none>"
    assert r.to_dict()["df"] == [1, 2]
    assert "Single term deletions" in r.summary()


def test_drop1_drops_contrasts_of_removed_variables(glmm_data, monkeypatch):
    d = glmm_data()
    full = dataclasses.replace(_fake_fit("y ~ x + f + (1 | g)", d, -140.0),
                               fit_options={"contrasts": {"f": "sum"}, "nagq": 1})
    seen = []

    def fake_glmer(spec, data, *, engine, contrasts=None, **kw):
        seen.append(contrasts)
        return _fake_fit(spec.formula, data, -141.0)

    monkeypatch.setattr("mrcstats.models.fit.glmer", fake_glmer)
    drop1(full)
    assert seen == [{"f": "sum"}, None]


def test_drop1_stops_when_rows_change(glmm_data, monkeypatch):
    d = glmm_data()
    full = _fake_fit("y ~ x + f + (1 | g)", d, -140.0)
    monkeypatch.setattr("mrcstats.models.fit.glmer",
                        lambda spec, data, **kw: _fake_fit(spec.formula, data, -141.0, nobs=10))
    with pytest.raises(ModelError, match="number of rows in use has changed"):
        drop1(full)


def test_drop1_needs_data(glmm_data):
    m = dataclasses.replace(_fake_fit("y ~ x + f + (1 | g)", glmm_data(), -140.0), frame=None)
    with pytest.raises(InputError, match="pass data="):
        drop1(m)


# ----------------------------------------------------------------------------- against R


def _fit_glmer_r(rscript: str, csv: Path, formula: str, *extra: str) -> dict:
    r = subprocess.run([rscript, str(REPO / "R" / "fit_glmer.R"), "--data", str(csv), "--formula", formula,
                        *extra], check=False, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)


@pytest.mark.r
def test_gvif_formula_equals_car_on_r_vcov(glmm_data, rscript, tmp_path):
    d = glmm_data(seed=7, groups=60)
    d["f"] = np.where(d["f"] == "a", "lvl-a", d["f"])
    csv = tmp_path / "d.csv"
    d.to_csv(csv, index=False)
    r = _fit_glmer_r(rscript, csv, "y ~ x * f + z + (1 | g)", "--gvif", "--contrasts", "f=sum")
    names = list(r["fixef"])
    V = pd.DataFrame([[r["vcov"][a][b] for b in names] for a in names], index=names, columns=names)
    g = gvif_from_vcov(V, r["assign"], r["term_labels"])
    assert list(g.terms) == r["gvif"]["term"]
    np.testing.assert_allclose(g.gvif, r["gvif"]["gvif"], rtol=1e-10)
    np.testing.assert_allclose(g.gvif_adj, r["gvif"]["gvif_adj"], rtol=1e-10)
    assert list(g.df) == r["gvif"]["df"]


@pytest.mark.r
def test_car_errors_match(glmm_data, rscript, tmp_path):
    csv = tmp_path / "d.csv"
    glmm_data().to_csv(csv, index=False)
    r = _fit_glmer_r(rscript, csv, "y ~ x + (1 | g)", "--gvif")
    assert r["gvif"]["error"] == "model contains fewer than 2 terms"
    r = _fit_glmer_r(rscript, csv, "y ~ 0 + x + z + (1 | g)", "--gvif")
    assert r["gvif"]["warnings"] == ["No intercept: vifs may not be sensible."]


@pytest.mark.r
def test_lme4_engine_drop1_and_anova_equal_r(glmm_data, rscript):
    skip_without_rpy2()
    from mrcstats.models import glmer
    from mrcstats.models.r_engine import lme4_fit_dict

    d = glmm_data(seed=2, groups=80)
    f = "y ~ x * f + z + (1 | g)"
    ref = lme4_fit_dict(parse_formula(f).with_family("binomial"), d, contrasts={"f": "sum"}, drop1=True,
                        compare="y ~ x + f + (1 | g)")
    m = glmer(f, d, contrasts={"f": "sum"}, engine="lme4")
    r = drop1(m)
    assert list(r.terms) == ref["drop1"]["term"] == ["z", "x:f"]
    np.testing.assert_allclose(r.chisq, ref["drop1"]["chisq"], atol=1e-6)
    np.testing.assert_allclose(r.p, ref["drop1"]["p"], rtol=1e-4)
    assert list(r.npar) == ref["drop1"]["npar"]
    m0 = glmer("y ~ x + f + (1 | g)", d, contrasts={"f": "sum"}, engine="lme4")
    a = anova(m0, m)
    assert a.chisq == pytest.approx(ref["anova"]["chisq"], abs=1e-6)
    assert a.df == ref["anova"]["df"]
    np.testing.assert_allclose(a.aic, ref["anova"]["aic"], atol=1e-6)
    np.testing.assert_allclose(a.bic, ref["anova"]["bic"], atol=1e-6)
    assert compare.AnovaResult is type(a)


def test_drop1_refuses_a_refit_that_fits_better(glmm_data, monkeypatch):
    # e.g. weights lost between the fit and the refit: never report a negative LRT silently
    d = glmm_data()
    full = _fake_fit("y ~ x + f + (1 | g)", d, -140.0)
    monkeypatch.setattr("mrcstats.models.fit.glmer",
                        lambda spec, data, **kw: _fake_fit(spec.formula, data, -120.0))
    with pytest.raises(ModelError, match="fits better than the full model"):
        drop1(full)


def test_drop1_checks_weight_length(glmm_data):
    d = glmm_data()
    full = dataclasses.replace(_fake_fit("y ~ x + f + (1 | g)", d, -140.0),
                               fit_options={"weights": np.ones(len(d) + 3)})
    with pytest.raises(InputError, match="weights have"):
        drop1(full)


@settings(max_examples=30, deadline=None)
@given(st.floats(-500.0, -50.0), st.floats(-500.0, -50.0))
def test_anova_is_symmetric_and_bounded(ll0, ll1):
    d = _anova_data()
    small = _fake_fit("y ~ x + (1 | g)", d, ll0)
    big = _fake_fit("y ~ x + f + (1 | g)", d, ll1)
    a, b = anova(small, big), anova(big, small)
    assert a == b
    assert a.chisq >= 0 and 0 <= a.p <= 1
    assert a.chisq == pytest.approx(max(0.0, 2 * (ll1 - ll0)))


_ANOVA_DATA: list[pd.DataFrame] = []


def _anova_data() -> pd.DataFrame:
    if not _ANOVA_DATA:
        rng = np.random.default_rng(0)
        _ANOVA_DATA.append(pd.DataFrame({"g": np.repeat(["a", "b", "c", "d"], 5), "x": rng.normal(size=20),
                                         "f": rng.choice(["u", "v"], 20), "y": rng.integers(0, 2, 20)}))
    return _ANOVA_DATA[0]
