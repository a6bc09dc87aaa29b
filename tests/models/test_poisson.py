"""Poisson-log GLMMs (the family design's test): the native engine against lme4's ``glmer(family = poisson)``
run to convergence (``tolPwrss = 1e-13``) in the same test run, on data generated here.

Targets: fixef, θ and logLik within 1e-4 absolute; standard errors within 1e-3 relative, as the binomial parity
tests (lme4's SEs come from its finite-difference Hessian, ``deriv12`` with step 1e-4, whose error reaches ~1e-4
relative on the crossed fits).
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from mrcstats.errors import InputError, ModelError
from mrcstats.models import glmer
from mrcstats.models.emmeans import emmeans
from mrcstats.models.family import BINOMIAL, POISSON, get_family

from ._r import lme4_fit, skip_without_rpy2

TOL = 1e-4
SE_REL = 1e-3


def counts_data(seed: int = 4, G: int = 120, per: int = 6) -> pd.DataFrame:
    """Counts per group (random intercept), a covariate and a 3-level factor."""
    rng = np.random.default_rng(seed)
    g = np.repeat(np.arange(G), per)
    x = rng.normal(size=G * per)
    cond = rng.choice(["a", "b", "c"], size=G * per)
    eta = 0.6 + 0.3 * x + np.select([cond == "b", cond == "c"], [0.4, -0.5], 0.0) + rng.normal(0, 0.5, G)[g]
    return pd.DataFrame({"y": rng.poisson(np.exp(eta)), "x": x, "cond": cond, "g": [f"g{i:03d}" for i in g]})


def crossed_counts(seed: int = 9, M: int = 15, I: int = 90) -> pd.DataFrame:
    """Models crossed with items, a random slope of x per model."""
    rng = np.random.default_rng(seed)
    model = np.repeat(np.arange(M), I)
    item = np.tile(np.arange(I), M)
    x = rng.normal(size=I)[item]
    bm = rng.normal(size=(M, 2)) @ np.array([[0.5, 0.0], [0.1, 0.25]]).T
    eta = 0.8 + 0.2 * x + bm[model, 0] + bm[model, 1] * x + rng.normal(0, 0.4, I)[item]
    return pd.DataFrame({"y": rng.poisson(np.exp(eta)), "x": x, "model": [f"m{i:02d}" for i in model],
                         "item": [f"i{i:03d}" for i in item]})


CASES = {
    "intercept": (counts_data, "y ~ x + cond + (1 | g)", 1),
    "crossed": (crossed_counts, "y ~ x + (1 | model) + (1 | item)", 1),
    "slopes": (crossed_counts, "y ~ x + (1 + x | model) + (1 | item)", 1),
    "agq5": (counts_data, "y ~ x + cond + (1 | g)", 5),
    "nagq0": (counts_data, "y ~ x + cond + (1 | g)", 0),
}


def _same(m, r, se_rel=SE_REL) -> None:
    for k, v in r["fixef"].items():
        assert m.fixef[k] == pytest.approx(v, abs=TOL), k
    for k, v in r["se"].items():
        assert m.se[k] == pytest.approx(v, rel=se_rel), k
    for k, v in r["theta"].items():
        assert m.theta[k] == pytest.approx(v, abs=TOL), k
    assert m.loglik == pytest.approx(r["loglik"], abs=TOL)
    assert m.aic == pytest.approx(r["aic"], abs=2 * TOL)
    assert m.deviance == pytest.approx(r["deviance"], rel=1e-6)
    assert m.df_resid == r["df_resid"]


@pytest.mark.r
@pytest.mark.parametrize("case", list(CASES))
def test_poisson_matches_lme4(case, rscript, tmp_path):
    make, formula, nagq = CASES[case]
    df = make()
    m = glmer(formula, df, family="poisson", nagq=nagq)
    r = lme4_fit(rscript, df, formula, tmp_path, nagq=nagq, family="poisson", ranef=nagq != 0)
    _same(m, r)
    assert m.family is POISSON and m.link == "log" and m.converged
    assert np.allclose(m.resid_quantiles.to_numpy(), r["resid_q"], atol=1e-4)
    for g, rr in r["ranef"].items():
        modes = pd.Series(rr["mode"], index=[str(x) for x in rr["level"]])
        col = "mode" if "mode" in m.ranef[g] else "(Intercept)"
        assert np.allclose(m.ranef[g][col].reindex(modes.index), modes, atol=2e-4)


@pytest.mark.r
def test_poisson_lme4_engine_and_emmeans(rscript):
    skip_without_rpy2()
    df = counts_data()
    f = "y ~ x + cond + (1 | g)"
    m = glmer(f, df, family="poisson")
    r = glmer(f, df, family="poisson", engine="lme4")
    assert r.family is POISSON
    assert np.allclose(m.fixef, r.fixef, atol=TOL) and m.loglik == pytest.approx(r.loglik, abs=TOL)
    em = emmeans(m, "cond", type="response").to_frame()
    assert list(em.columns[:3]) == ["cond", "rate", "SE"]
    assert np.allclose(em["rate"], np.exp(emmeans(m, "cond").to_frame()["emmean"]))
    pr = emmeans(m, "cond", type="response").pairs().to_frame()
    assert "ratio" in pr.columns and "odds.ratio" not in pr.columns
    assert any("log scale" in n for n in emmeans(m, "cond", type="response").pairs().notes)


def test_poisson_predict_confint_and_refits():
    df = counts_data()
    m = glmer("y ~ x + cond + (1 | g)", df, family="poisson")
    mu = m.predict(df.head(10), type="response")
    assert np.allclose(mu, np.exp(m.predict(df.head(10))))
    ci = m.confint("Wald").to_frame()
    assert np.isfinite(ci.loc["x"]).all()
    boot = m.confint("boot", nsim=12, seed=3)
    assert boot.to_frame().shape[0] == len(m.fixef) + len(m.theta)
    from mrcstats.models.compare import drop1

    d1 = drop1(m)
    assert all(f.family is POISSON for f in d1.fits)
    assert "family = poisson(log)" not in m.summary() and "poisson  ( log )" in m.summary()


def test_poisson_bad_responses_are_one_clear_error():
    df = counts_data().head(60)
    with pytest.raises(InputError, match="non-negative whole numbers"):
        glmer("y ~ x + (1 | g)", df.assign(y=df["y"] - 3), family="poisson")
    with pytest.raises(InputError, match="non-negative whole numbers"):
        glmer("y ~ x + (1 | g)", df.assign(y=df["y"] + 0.5), family="poisson")
    with pytest.raises(InputError, match="cbind"):
        glmer("cbind(y, 3) ~ x + (1 | g)", df, family="poisson")
    with pytest.raises(ModelError, match="every response is 0"):
        glmer("y ~ x + (1 | g)", df.assign(y=0), family="poisson")
    with pytest.raises(InputError, match="not supported"):
        glmer("y ~ x + (1 | g)", df, family="gamma")
    with pytest.raises(InputError, match="log link"):
        glmer("y ~ x + (1 | g)", df, family="poisson(identity)")


def test_family_registry_spellings():
    assert get_family("poisson") is POISSON and get_family('poisson(link = "log")') is POISSON
    assert get_family("binomial(logit)") is BINOMIAL and get_family(POISSON) is POISSON
    eta = np.linspace(-3, 3, 7)
    assert np.allclose(POISSON.linkinv(eta), np.exp(eta)) and np.allclose(POISSON.linkfun(np.exp(eta)), eta)
    assert np.allclose(BINOMIAL.linkfun(BINOMIAL.linkinv(eta)), eta)


def test_cli_glmer_family_poisson(tmp_path, capsys):
    from mrcstats.cli import main

    df = counts_data()
    p = tmp_path / "counts.csv"
    df.to_csv(p, index=False)
    f = "y ~ x + cond + (1 | g)"
    assert main(["glmer", str(p), "--formula", f, "--family", "poisson", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    m = glmer(f, df, family="poisson")
    assert got["family"] == "poisson" and got["link"] == "log"
    assert got["fixef"] == pytest.approx(m.fixef.to_dict(), abs=1e-12)
    assert got["loglik"] == pytest.approx(m.loglik, abs=1e-9)
    assert main(["glmer", str(p), "--formula", f, "--family", "poisson", "--engine", "duckdb"]) == 2
    assert "binomial" in capsys.readouterr().err
