"""engine="lme4": dependency errors, data conversion, options, and R's figures in a GlmerResult."""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mrcstats.errors import DependencyError, InputError
from mrcstats.models import glmer, r_engine
from mrcstats.models.formula import parse_formula

from ._r import skip_without_rpy2

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def llm_data(glmm_data):
    """make(seed, groups): 8 rows per group, factor LLM with levels out of code-point order."""
    def make(seed: int = 4, groups: int = 60):
        return glmm_data(seed=seed, groups=groups, per=8, factor="LLM", levels=("gpt-4", "Claude", "davinci-002"))
    return make


@pytest.fixture
def no_engine_state(monkeypatch):
    """Forget the started R so that the import checks run again."""
    monkeypatch.setattr(r_engine, "_STATE", {})


def _needs_rpy2(rscript):
    skip_without_rpy2()


# ----------------------------------------------------------------------------- without R


def test_missing_rpy2_names_it(llm_data, monkeypatch, no_engine_state):
    monkeypatch.setitem(sys.modules, "rpy2", None)
    with pytest.raises(DependencyError, match=r"needs rpy2.*pip install 'mrcstats\[r\]'"):
        glmer("y ~ x + (1 | g)", llm_data(), engine="lme4")
    assert "rpy2" in r_engine.lme4_available()


def test_r_that_does_not_start_is_reported(llm_data, monkeypatch, no_engine_state):
    fake = types.ModuleType("rpy2")
    monkeypatch.setitem(sys.modules, "rpy2", fake)
    monkeypatch.setitem(sys.modules, "rpy2.robjects", None)
    with pytest.raises(DependencyError, match="could not start R.*R_HOME"):
        glmer("y ~ x + (1 | g)", llm_data(), engine="lme4")


@pytest.mark.parametrize("missing", ["lme4", "car"])
def test_missing_r_package_names_it(llm_data, monkeypatch, no_engine_state, missing):
    fake = types.ModuleType("rpy2")
    ro = types.ModuleType("rpy2.robjects")
    ro.r = lambda code: [missing not in code]  # requireNamespace() is FALSE for the missing one
    fake.robjects = ro
    monkeypatch.setitem(sys.modules, "rpy2", fake)
    monkeypatch.setitem(sys.modules, "rpy2.robjects", ro)
    with pytest.raises(DependencyError, match=f"R package {missing} is not installed.*r-cran-{missing}"):
        glmer("y ~ x + (1 | g)", llm_data(), engine="lme4")


# ----------------------------------------------------------------------------- with R


@pytest.mark.r
def test_result_carries_r_figures(llm_data, rscript):
    _needs_rpy2(rscript)
    d = llm_data()
    m = glmer("y ~ x + LLM + (1 | g)", d, engine="lme4", contrasts={"LLM": "sum"})
    assert m.engine == "lme4"
    # code-point order: "Claude" < "davinci-002" < "gpt-4"; sum contrasts number the columns
    assert list(m.fixef.index) == ["(Intercept)", "x", "LLM1", "LLM2"]
    assert m.assign == (0, 1, 2, 2) and m.term_labels == ("x", "LLM")
    assert list(m.theta.index) == ["g.(Intercept)"]
    assert m.optinfo["tol_pwrss"] == 1e-13 and m.optinfo["lme4_defaults"] is False
    assert m.nobs == len(d) and m.ngroups == {"g": 60}
    assert m.df_resid == len(d) - 5
    assert m.aic == pytest.approx(-2 * m.loglik + 2 * 5)
    re = m.ranef["g"]
    assert len(re) == 60 and (re["condvar"] > 0).all() and list(re.columns) == ["mode", "condvar"]
    assert m.converged and not m.singular
    assert "Engine: lme4" in m.summary()
    assert m.frame is d and m.fit_options["contrasts"] == {"LLM": "sum"}


@pytest.mark.r
def test_treatment_names_follow_given_levels(llm_data, rscript):
    _needs_rpy2(rscript)
    d = llm_data()
    m = glmer("y ~ x + LLM + (1 | g)", d, engine="lme4", levels={"LLM": ["gpt-4", "Claude", "davinci-002"]})
    assert list(m.fixef.index) == ["(Intercept)", "x", "LLMClaude", "LLMdavinci-002"]
    m2 = glmer("y ~ x + LLM + (1 | g)", d, engine="lme4")
    assert list(m2.fixef.index) == ["(Intercept)", "x", "LLMdavinci-002", "LLMgpt-4"]
    assert m.loglik == pytest.approx(m2.loglik, abs=1e-6)  # a reparameterisation only


@pytest.mark.r
def test_missing_values_are_dropped_and_counted(llm_data, rscript):
    _needs_rpy2(rscript)
    d = llm_data().astype({"y": "float"})
    d.loc[[3, 10, 11], "y"] = np.nan
    d.loc[20, "LLM"] = None
    m = glmer("y ~ x + LLM + (1 | g)", d, engine="lme4")
    assert m.nobs == len(d) - 4
    assert any("4 rows with missing values" in s for s in m.messages)


@pytest.mark.r
def test_weights_equal_replicated_rows(llm_data, rscript):
    _needs_rpy2(rscript)
    d = llm_data(groups=40)
    m_w = glmer("y ~ x + (1 | g)", d, engine="lme4", weights="w")
    rep = d.loc[d.index.repeat(d["w"])].reset_index(drop=True)
    m_r = glmer("y ~ x + (1 | g)", rep, engine="lme4")
    np.testing.assert_allclose(m_w.fixef.to_numpy(), m_r.fixef.to_numpy(), atol=1e-4)
    np.testing.assert_allclose(m_w.theta.to_numpy(), m_r.theta.to_numpy(), atol=1e-4)
    m_a = glmer("y ~ x + (1 | g)", d, engine="lme4", weights=d["w"].to_numpy())
    assert m_a.loglik == pytest.approx(m_w.loglik, abs=1e-8)


@pytest.mark.r
def test_lme4_defaults_and_tolerance(llm_data, rscript):
    _needs_rpy2(rscript)
    d = llm_data(groups=120)
    conv = glmer("y ~ x + LLM + (1 | g)", d, engine="lme4")
    dflt = glmer("y ~ x + LLM + (1 | g)", d, engine="lme4", lme4_defaults=True)
    assert dflt.optinfo["tol_pwrss"] == 1e-7 and dflt.optinfo["lme4_defaults"] is True
    # the converged fit's logLik is the larger (or equal) maximum
    assert conv.loglik >= dflt.loglik - 1e-6
    ro = r_engine._robjects()
    assert ro.r["mrc_is_pirls_failure"]("PIRLS step-halvings failed to reduce deviance in pwrssUpdate")[0]
    assert not ro.r["mrc_is_pirls_failure"]("Model failed to converge")[0]


@pytest.mark.r
def test_nagq_and_cbind(llm_data, rscript):
    _needs_rpy2(rscript)
    d = llm_data()
    agg = d.groupby(["g", "LLM"], as_index=False).agg(s=("y", "sum"), n=("y", "size"))
    m1 = glmer("cbind(s, n - s) ~ LLM + (1 | g)", agg, engine="lme4")
    m9 = glmer("cbind(s, n - s) ~ LLM + (1 | g)", agg, engine="lme4", nagq=9)
    assert m9.nagq == 9 and "nAGQ = 9" in m9.summary()
    assert m9.optinfo["tol_pwrss"] == 1e-13 and m1.nagq == 1
    # for 0/1 responses the AGQ and Laplace log-likelihoods are on the same scale (for counts
    # lme4's AGQ deviance is built from deviance residuals, so its logLik is not comparable)
    b1 = glmer("y ~ LLM + (1 | g)", d, engine="lme4")
    b9 = glmer("y ~ LLM + (1 | g)", d, engine="lme4", nagq=9)
    assert abs(b9.loglik - b1.loglik) < 1.0 and b9.loglik != b1.loglik


@pytest.mark.r
def test_random_slopes_go_through_lme4(llm_data, rscript):
    _needs_rpy2(rscript)
    d = llm_data(groups=80)
    m = glmer("y ~ x + (1 + x | g)", d, engine="lme4")
    assert list(m.theta.index) == ["g.(Intercept)", "g.x.(Intercept)", "g.x"]
    assert list(m.varcorr["name"]) == ["(Intercept)", "x", "(Intercept)"]
    assert m.varcorr["var2"].iloc[2] == "x"
    nat = glmer("y ~ x + (1 + x | g)", d)           # the native engine fits the same model
    assert np.max(np.abs(nat.theta - m.theta)) < 1e-4 and abs(nat.loglik - m.loglik) < 1e-4


@pytest.mark.r
def test_input_errors(llm_data, rscript):
    _needs_rpy2(rscript)
    d = llm_data()
    with pytest.raises(InputError, match="nope"):
        glmer("y ~ nope + (1 | g)", d, engine="lme4")
    with pytest.raises(InputError, match="sum or treatment"):
        glmer("y ~ LLM + (1 | g)", d, engine="lme4", contrasts={"LLM": "helmert"})
    with pytest.raises(InputError, match="not among the given levels"):
        glmer("y ~ LLM + (1 | g)", d, engine="lme4", levels={"LLM": ["gpt-4", "Claude"]})
    with pytest.raises(InputError, match="cannot read formula"):
        r_engine.lme4_fit_dict(dataclasses.replace(parse_formula("y ~ x + (1 | g)").with_family("binomial"),
                                                   formula="y ~ (x"), d)    # R reads the text itself
    with pytest.raises(InputError, match="with its family"):
        r_engine.lme4_fit_dict("y ~ x + (1 | g)", d)     # no family travels beside the formula


@pytest.mark.r
def test_rscript_program_reports_errors_as_json(llm_data, rscript, tmp_path):
    csv = tmp_path / "d.csv"
    llm_data().to_csv(csv, index=False)
    script = str(REPO / "R" / "fit_glmer.R")
    r = subprocess.run([rscript, script, "--data", str(csv), "--formula", "y ~ nope + (1 | g)"],
                       check=False, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "nope" in json.loads(r.stdout)["error"]
    r = subprocess.run([rscript, script, "--data", str(csv), "--formula", "y ~ LLM + (1 | g)",
                        "--contrasts", "LLM=helmert"], check=False, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "sum|treatment" in json.loads(r.stdout)["error"]
    r = subprocess.run([rscript, script, "--data", str(csv), "--formula", "y ~ x + LLM + (1 | g)",
                        "--levels", "LLM=gpt-4,Claude,davinci-002", "--lme4-defaults"],
                       check=False, capture_output=True, text=True, timeout=120)
    out = json.loads(r.stdout)
    assert r.returncode == 0 and out["tol_pwrss"] == 1e-7
    assert list(out["fixef"]) == ["(Intercept)", "x", "LLMClaude", "LLMdavinci-002"]


@pytest.mark.r
def test_rscript_weights_and_compare_equal_rpy2(llm_data, rscript, tmp_path):
    _needs_rpy2(rscript)
    d = llm_data(groups=40)
    csv = tmp_path / "d.csv"
    d.to_csv(csv, index=False)
    r = subprocess.run([rscript, str(REPO / "R" / "fit_glmer.R"), "--data", str(csv), "--formula",
                        "y ~ x + LLM + (1 | g)", "--weights", "w", "--compare", "y ~ x + (1 | g)"],
                       check=False, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout)
    ref = r_engine.lme4_fit_dict(parse_formula("y ~ x + LLM + (1 | g)").with_family("binomial"), d, weights="w",
                                 compare="y ~ x + (1 | g)")
    assert out["loglik"] == pytest.approx(ref["loglik"], abs=1e-6)
    assert out["anova"]["chisq"] == pytest.approx(ref["anova"]["chisq"], abs=1e-5)
    assert out["anova"]["df"] == ref["anova"]["df"] == 2
    m = glmer("y ~ x + LLM + (1 | g)", d, engine="lme4", weights="w")
    assert m.loglik == pytest.approx(out["loglik"], abs=1e-6)


@pytest.mark.r
def test_pirls_failure_relaxes_tolerance(llm_data, rscript):
    _needs_rpy2(rscript)
    ro = r_engine._robjects()
    # a glmer() in the global environment (found before lme4's) that fails as lme4 does on
    # large data when tolPwrss is below 1e-10
    ro.r('''glmer <- function(..., control) {
              if (control$tolPwrss < 1e-11) stop("(maxstephalfit) PIRLS step-halvings failed to reduce deviance in pwrssUpdate")
              lme4::glmer(..., control = control)
            }''')
    try:
        m = glmer("y ~ x + (1 | g)", llm_data(), engine="lme4")
        m_dflt = glmer("y ~ x + (1 | g)", llm_data(), engine="lme4", lme4_defaults=True)
    finally:
        ro.r("rm(glmer, envir = globalenv())")
    assert m.optinfo["tol_pwrss"] == 1e-10
    assert any(s.startswith("tolPwrss relaxed from 1e-13 to 1e-10") for s in m.messages)
    assert m_dflt.optinfo["tol_pwrss"] == 1e-7


@pytest.mark.r
def test_singular_fit_message_is_kept_not_printed(rscript, capfd):
    _needs_rpy2(rscript)
    rng = np.random.default_rng(2)  # no group effect at all: lme4 reports a boundary fit
    d = pd.DataFrame({"g": np.repeat(np.arange(30), 10).astype(str), "x": rng.normal(size=300)})
    d["y"] = (rng.random(300) < 0.5).astype(int)
    m = glmer("y ~ x + (1 | g)", d, engine="lme4")
    assert m.singular and m.converged
    assert m.messages == ("boundary (singular) fit: see help('isSingular')",)
    out, err = capfd.readouterr()
    assert "singular" not in out + err


def test_starting_r_leaves_child_environment_alone():
    """rpy2 sets LD_LIBRARY_PATH for R; the engine restores it so child Pythons still start cleanly."""
    import subprocess
    import sys

    skip_without_rpy2()
    code = ("import os, subprocess, sys\n"
            "before = os.environ.get('LD_LIBRARY_PATH')\n"
            "from mrcstats.models import r_engine\n"
            "assert r_engine.lme4_available() is None\n"
            "assert os.environ.get('LD_LIBRARY_PATH') == before, os.environ.get('LD_LIBRARY_PATH')\n"
            "subprocess.run([sys.executable, '-c', 'import ssl'], check=True)\n")
    r = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
