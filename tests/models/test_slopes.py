"""General random-effects terms (issue 17): the native engine against lme4 1.1-31 run to
convergence (``tolPwrss = 1e-13``) in the same test run, on data generated here.

Targets: fixef and θ within 1e-4 absolute, logLik within 1e-4 (native not lower by more),
standard errors within 1e-3 relative; θ named as ``getME(m, "theta")``.
"""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from mrcstats.errors import InputError, ModelError
from mrcstats.models import glmer

from ._fits import model_spec
from ._r import lme4_fit

TOL_ABS = 1e-4
TOL_SE_REL = 1e-3


def _expit(x):
    return 1.0 / (1.0 + np.exp(-x))


def slope_data(seed: int = 21, G: int = 70, per: int = 40, L=((0.9, 0.0), (-0.25, 0.45))) -> pd.DataFrame:
    """Correlated random intercepts and slopes of ``x`` per group ``g``, a 3-level ``cond``."""
    rng = np.random.default_rng(seed)
    n = G * per
    g = np.repeat(np.arange(G), per)
    x = rng.normal(size=n)
    cond = rng.choice(["a", "b", "c"], size=n)
    b = rng.normal(size=(G, 2)) @ np.asarray(L).T
    eta = (0.2 + 0.5 * x + np.select([cond == "b", cond == "c"], [0.4, -0.3], 0.0) + 0.2 * x * (cond == "b")
           + b[g, 0] + b[g, 1] * x)
    y = (rng.random(n) < _expit(eta)).astype(int)
    return pd.DataFrame({"correct": y, "x": x, "cond": cond, "g": [f"g{i:03d}" for i in g]})


def crossed_slope_data(seed: int = 8, M: int = 12, I: int = 160) -> pd.DataFrame:
    """Models (random intercept and slope of x) crossed with items (random intercept)."""
    rng = np.random.default_rng(seed)
    model = np.repeat(np.arange(M), I)
    item = np.tile(np.arange(I), M)
    x = rng.normal(size=I)[item]
    bm = rng.normal(size=(M, 2)) @ np.array([[0.7, 0.0], [0.3, 0.35]]).T
    eta = 0.4 + 0.3 * x + bm[model, 0] + bm[model, 1] * x + rng.normal(0, 1.0, I)[item]
    y = (rng.random(M * I) < _expit(eta)).astype(int)
    return pd.DataFrame({"correct": y, "x": x, "model": [f"m{k:02d}" for k in model],
                         "item": [f"i{k:03d}" for k in item]})


CASES = {
    "correlated": (slope_data, "correct ~ x * cond + (1 + x | g)"),
    "double_bar": (slope_data, "correct ~ x + cond + (1 + x || g)"),
    "no_intercept": (slope_data, "correct ~ x + (0 + x | g) + (1 | cond)"),
    "crossed": (crossed_slope_data, "correct ~ x + (1 + x | model) + (1 | item)"),
    # the slope SD is 0 in the generating model: a small slope SD is estimated (θ_g.x ≈ 0.12)
    "near_singular": (lambda: slope_data(seed=4, L=((0.8, 0.0), (0.0, 0.0))), "correct ~ x + (1 + x | g)"),
    # a grouping factor without variance: a singular fit (θ_h = 0 on the boundary) beside a slope term
    "singular": (lambda: _with_null_factor(slope_data(seed=6, G=50, per=36)), "correct ~ x + (1 + x | g) + (1 | h)"),
}


def _with_null_factor(df: pd.DataFrame) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    return df.assign(h=[f"h{k}" for k in rng.integers(0, 8, len(df))])

_FITS: dict = {}


def _fits(name, rscript, tmp_path_factory):
    if name not in _FITS:
        make, formula = CASES[name]
        df = make()
        r = lme4_fit(rscript, df, formula, tmp_path_factory.mktemp(name), ranef=False)
        _FITS[name] = (glmer(formula, df), r)
    return _FITS[name]


@pytest.mark.r
@pytest.mark.parametrize("name", list(CASES))
def test_slopes_match_lme4(name, rscript, tmp_path_factory):
    m, r = _fits(name, rscript, tmp_path_factory)
    assert list(m.fixef.index) == list(r["fixef"])
    assert list(m.theta.index) == list(r["theta"])
    fx = max(abs(m.fixef[k] - v) for k, v in r["fixef"].items())
    th = max(abs(m.theta[k] - v) for k, v in r["theta"].items())
    se = max(abs(m.se[k] / v - 1) for k, v in r["se"].items())
    dl = m.loglik - r["loglik"]
    msg = f"{name}: fixef {fx:.2e} theta {th:.2e} se_rel {se:.2e} loglik {dl:.2e}"
    assert -TOL_ABS < dl < TOL_ABS, msg
    assert fx < TOL_ABS and th < TOL_ABS and se < TOL_SE_REL, msg
    if name == "singular":
        assert m.singular and m.theta["h.(Intercept)"] < 1e-4, msg


def test_theta_names_and_varcorr():
    m = glmer("correct ~ x + (1 + x | g)", slope_data(G=40, per=30))
    assert list(m.theta.index) == ["g.(Intercept)", "g.x.(Intercept)", "g.x"]
    vc = m.varcorr
    assert list(vc["name"]) == ["(Intercept)", "x", "(Intercept)"]
    assert list(vc["var2"].fillna("")) == ["", "", "x"]
    t = m.theta.to_numpy()
    sd_x = np.hypot(t[1], t[2])
    assert vc["sd"].iloc[0] == pytest.approx(t[0]) and vc["sd"].iloc[1] == pytest.approx(sd_x)
    assert vc["sd"].iloc[2] == pytest.approx(t[1] / sd_x)
    assert "Corr" in m.summary()
    d = m.to_dict()
    assert d["varcorr"][2]["var2"] == "x" and d["varcorr"][0]["var2"] is None
    assert set(m.ranef["g"].columns) == {"(Intercept)", "x", "condvar:(Intercept)", "condvar:x"}
    m2 = glmer("correct ~ x + (1 + x || g)", slope_data(G=40, per=30))
    assert list(m2.theta.index) == ["g.(Intercept)", "g.x"]
    assert list(m2.varcorr["group"]) == ["g", "g.1"]


def test_gradient_matches_finite_differences():
    """The analytic gradient of the general Laplace deviance against central differences."""
    from mrcstats.models.design import build_design
    from mrcstats.models.deviance import BinomialData, GeneralModel

    des = build_design(model_spec("correct ~ x + (1 + x | model) + (1 | item)"), crossed_slope_data(M=6, I=60))
    d = BinomialData(des.X, des.y, des.weights, None, 0.0, des.family)
    gm = GeneralModel(d, des.re)
    th = np.array([0.8, 0.2, 0.4, 0.9])
    beta = np.array([0.3, 0.2])
    _D, g = gm.evaluate(th, beta, keep=False)
    x0 = np.concatenate([th, beta])
    for k in range(len(x0)):
        e = np.zeros_like(x0)
        e[k] = 1e-5
        fp = gm.evaluate((x0 + e)[:4], (x0 + e)[4:], grad=False, keep=False)[0]
        fm = gm.evaluate((x0 - e)[:4], (x0 - e)[4:], grad=False, keep=False)[0]
        assert g[k] == pytest.approx((fp - fm) / 2e-5, rel=1e-5, abs=1e-5)


def test_bad_slope_terms_are_input_errors():
    df = slope_data(G=30, per=20)
    df["gconst"] = df["g"].str[1:].astype(float)          # constant within every group
    with pytest.raises(InputError, match=r"\(1 \+ gconst \| g\).*constant within every level"):
        glmer("correct ~ x + (1 + gconst | g)", df)
    df["k"] = df["g"]                                        # a factor with more levels than 'cond'
    with pytest.raises(InputError, match=r"\(1 \+ k \| cond\).*only 3 levels"):
        glmer("correct ~ x + (1 + k | cond)", df)
    with pytest.raises(InputError, match=r"\(0 \| g\) has no columns"):
        glmer("correct ~ x + (0 | g)", df)
    with pytest.raises(InputError, match="in parentheses"):
        glmer("correct ~ x + 1 + x | g", df)
    with pytest.raises(ModelError, match="single scalar random-effects term"):
        glmer("correct ~ x + (1 + x | g)", df, nagq=5)


def test_cli_bad_slope_exit_2(tmp_path):
    df = slope_data(G=30, per=20)
    df["gconst"] = df["g"].str[1:].astype(float)
    csv = tmp_path / "d.csv"
    df.to_csv(csv, index=False)
    r = subprocess.run([sys.executable, "-m", "mrcstats", "glmer", str(csv), "--formula",
                        "correct ~ x + (1 + gconst | g)", "--json"], capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and "constant within every level" in r.stderr
    assert r.stdout == ""
