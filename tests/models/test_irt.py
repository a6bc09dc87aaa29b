"""1PL/2PL by marginal ML: equality with the GLMM, recovery against girth, information, bad input."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcstats.errors import InputError
from mrcstats.models.irt import fit_irt, marginal_loglik, response_matrix, score_abilities


def _log(y: np.ndarray) -> pd.DataFrame:
    J, I = y.shape
    return pd.DataFrame({"model": np.repeat([f"m{j:04d}" for j in range(J)], I),
                         "item": np.tile([f"i{i:03d}" for i in range(I)], J),
                         "correct": pd.array(y.ravel().astype(bool), dtype="boolean")})


def _sim(J: int, I: int, seed: int, sd_log_a: float = 0.3, sd_theta: float = 1.0):
    rng = np.random.default_rng(seed)
    th = rng.normal(0, sd_theta, J)
    a = np.exp(rng.normal(0, sd_log_a, I))
    b = rng.normal(0, 1, I)
    y = rng.random((J, I)) < 1 / (1 + np.exp(-a * (th[:, None] - b)))
    return y, th, a, b


@pytest.fixture(scope="module")
def rasch_data():
    rng = np.random.default_rng(3)
    J, I = 30, 16
    th = rng.normal(0, 1.3, J)
    b = rng.normal(0, 1, I)
    y = rng.random((J, I)) < 1 / (1 + np.exp(-(th[:, None] - b)))
    log = _log(y)
    log["y"] = log["correct"].astype(int)
    return log


def test_rasch_equals_glmm_with_fixed_items(rasch_data):
    """1PL (common a, theta ~ N(0,1)) = glmer(y ~ 0 + item + (1 | model), nAGQ = 25): d_i = fixef, a = sigma."""
    import mrcstats

    fit = fit_irt(rasch_data, "1pl", quadrature=25, tol=1e-10)
    g = mrcstats.glmer("y ~ 0 + item + (1 | model)", rasch_data, nagq=25)
    fe = g.fixef.rename(lambda k: k.replace("item", "", 1))
    d = fit.items.set_index("item")["d"]
    assert fit.converged
    assert np.max(np.abs(fe.reindex(d.index).to_numpy() - d.to_numpy())) < 1e-4
    assert abs(float(g.theta.iloc[0]) - fit.items["a"].iloc[0]) < 1e-4
    assert abs(g.loglik - fit.loglik) < 1e-6
    # full observed information (Louis) reproduces lme4's Hessian-based SEs of the item effects
    se = g.se.rename(lambda k: k.replace("item", "", 1)).reindex(d.index).to_numpy()
    assert np.max(np.abs(fit.items["se_d"].to_numpy() / se - 1)) < 1e-3


_LME4_RASCH = r"""
suppressMessages(library(lme4))
df <- read.csv(commandArgs(TRUE)[1], stringsAsFactors = TRUE)
m <- glmer(y ~ 0 + item + (1 | model), data = df, family = binomial, nAGQ = 25,
           control = glmerControl(tolPwrss = 1e-13, optimizer = "bobyqa",
                                  optCtrl = list(rhoend = 1e-12, maxfun = 1e6)))
cat(sprintf("%s\t%.15g\n", names(fixef(m)), fixef(m)), sep = "")
cat(sprintf("theta\t%.15g\nloglik\t%.15g\n", getME(m, "theta"), as.numeric(logLik(m))))
"""


def test_rasch_equals_lme4(rasch_data, rscript, tmp_path):
    """Same equality against lme4 run to convergence (bobyqa rhoend 1e-12: lme4's default stopping
    leaves nAGQ > 1 fits ~4e-4 short -- two items with identical answers then get different effects)."""
    import subprocess

    csv = tmp_path / "rasch.csv"
    rasch_data[["model", "item", "y"]].to_csv(csv, index=False)
    script = tmp_path / "rasch.R"
    script.write_text(_LME4_RASCH)
    out = subprocess.run([rscript, str(script), str(csv)], capture_output=True, text=True, timeout=600, check=True)
    r = dict(line.split("\t") for line in out.stdout.strip().splitlines())
    fit = fit_irt(rasch_data, "1pl", quadrature=25, tol=1e-10)
    d = fit.items.set_index("item")["d"]
    fe = np.array([float(r["item" + k]) for k in d.index])
    assert np.max(np.abs(fe - d.to_numpy())) < 1e-4
    assert abs(float(r["theta"]) - fit.items["a"].iloc[0]) < 1e-4
    assert abs(float(r["loglik"]) - fit.loglik) < 1e-6


def test_2pl_recovery_and_girth():
    """Known parameters: recovery, and a marginal logLik no worse than girth's at its optimum."""
    girth = pytest.importorskip("girth", reason="girth (dev extra) is the independent 2PL implementation")
    y, th, a, b = _sim(600, 25, seed=7)
    rm = response_matrix(_log(y))
    fit = fit_irt(rm, "2pl", prior_sd=None)
    assert fit.converged
    it = fit.items
    assert np.corrcoef(it["a"], a)[0, 1] > 0.8
    assert np.corrcoef(it["b"], b)[0, 1] > 0.97
    assert np.sqrt(np.mean((it["b"] - b) ** 2)) < 0.35
    assert np.corrcoef(fit.abilities["theta"], th)[0, 1] > 0.85
    g = girth.twopl_mml(y.T.astype(int))
    ga, gb = np.asarray(g["Discrimination"]), np.asarray(g["Difficulty"])
    ll_girth = marginal_loglik(ga, -ga * gb, rm.s, rm.n)
    assert fit.loglik >= ll_girth - 1e-6
    assert np.max(np.abs(it["a"].to_numpy() - ga)) < 0.01
    assert np.max(np.abs(it["b"].to_numpy() - gb)) < 0.02
    # SEs: the spread of the estimates around the truth is of their size
    z = (it["b"] - b) / it["se_b"]
    assert 0.5 < float(np.std(z)) < 2.0


def test_2pl_prior_keeps_separated_items_finite():
    # few models, an item whose pattern is perfectly separated by ability
    y, th, _, _ = _sim(12, 60, seed=2, sd_theta=1.5)
    order = np.argsort(th)
    y[:, 0] = False
    y[order[6:], 0] = True
    fit = fit_irt(_log(y), "2pl", prior_sd=1.0)
    assert np.all(np.isfinite(fit.items["a"])) and fit.items["a"].max() < 100
    assert fit.prior_mean is not None


def test_information_and_scoring():
    y, _, _, _ = _sim(40, 30, seed=5)
    fit = fit_irt(_log(y), "2pl")
    theta = np.array([-1.0, 0.0, 1.5])
    info = fit.information(theta).to_numpy()
    a, d = fit.items["a"].to_numpy(), fit.items["d"].to_numpy()
    p = 1 / (1 + np.exp(-(theta[:, None] * a + d)))
    np.testing.assert_allclose(info, a ** 2 * p * (1 - p))
    np.testing.assert_allclose(fit.test_information(theta).to_numpy(), info.sum(1))
    rm = response_matrix(_log(y))
    s, n = rm.s[:, rm.fit_mask], rm.n[:, rm.fit_mask]
    eap, sd = score_abilities(fit, s, n)
    np.testing.assert_allclose(eap, fit.abilities["theta"], atol=1e-8)
    np.testing.assert_allclose(sd, fit.abilities["sd"], atol=1e-8)


def test_trials_are_binomial_counts():
    y, _, _, _ = _sim(20, 15, seed=8)
    log = _log(y)
    twice = pd.concat([log.assign(trial=0), log.assign(trial=1)], ignore_index=True)
    rm1, rm2 = response_matrix(log), response_matrix(twice)
    np.testing.assert_array_equal(rm2.s, 2 * rm1.s)
    np.testing.assert_array_equal(rm2.n, 2 * rm1.n)
    f2 = fit_irt(twice, "1pl", tol=1e-9)
    assert f2.converged
    assert f2.loglik == pytest.approx(marginal_loglik(f2.items["a"], f2.items["d"], rm2.s[:, rm2.fit_mask],
                                                      rm2.n[:, rm2.fit_mask], quadrature=11), abs=1e-6)


def test_bad_input():
    y, _, _, _ = _sim(2, 10, seed=1)
    with pytest.raises(InputError, match="at least 3 models"):
        fit_irt(_log(y), "2pl")
    y, _, _, _ = _sim(5, 10, seed=1)
    log = _log(y)
    extra = pd.DataFrame({"model": ["m0000"], "item": ["lonely"], "correct": pd.array([True], dtype="boolean")})
    rm = response_matrix(pd.concat([log, extra], ignore_index=True))
    assert rm.skipped["items answered by one model only (left out)"] == 1
    assert "lonely" not in rm.items
    with pytest.raises(InputError, match="1pl"):
        fit_irt(log, "3pl")
    with pytest.raises(InputError, match="column"):
        response_matrix(log.drop(columns="correct"))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 6), st.sampled_from([True, False, None])),
                min_size=1, max_size=60))
def test_response_matrix_counts(rows):
    log = pd.DataFrame(rows, columns=["model", "item", "correct"])
    log["model"] = "m" + log["model"].astype(str)
    log["item"] = "i" + log["item"].astype(str)
    log["correct"] = log["correct"].astype("boolean")
    if log["model"].nunique() < 3:
        with pytest.raises(InputError):
            response_matrix(log)
        return
    try:
        rm = response_matrix(log)
    except InputError as exc:
        assert "two or more models" in str(exc)
        return
    kept = log[log["item"].isin(rm.items)]
    assert rm.n.sum() == len(kept)
    assert rm.s.sum() == int(kept["correct"].fillna(False).sum())
    assert np.all(rm.s <= rm.n)
    assert np.all((rm.n > 0).sum(axis=0) >= 2)
    left = log["item"].nunique() - len(rm.items)
    assert rm.skipped.get("items answered by one model only (left out)", 0) == left


def test_modes_with_steep_items_converge():
    """Steep items make plain Newton cycle; the safeguarded iteration finds the root of the score."""
    from mrcstats.models.irt import _modes

    rng = np.random.default_rng(0)
    a = np.concatenate([np.full(200, 20.0), np.full(200, 0.2)])
    d = rng.normal(0, 15, 400)
    s = (rng.random((5, 400)) < 0.35).astype(float)
    n = np.ones_like(s)
    th, _ = _modes(np.zeros(5), a, d, s, n)
    p = 1 / (1 + np.exp(-(th[:, None] * a + d)))
    g = (s - n * p) @ a - th
    assert np.max(np.abs(g)) < 1e-6
