"""``GlmerResult.confint`` against lme4's ``confint.merMod`` (1.1-31) in the same test run.

Targets (issue 17): Wald exact (to 1e-8), profile within 2e-3 of ``confint(m, method =
"profile")``; the bootstrap is deterministic given the seed and independent of the number
of worker processes, and counts failed refits.
"""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from scipy import optimize

from mrcstats.errors import InputError
from mrcstats.models import glmer
from mrcstats.models.confint import _norm_inter, back_spline_predict

from .test_slopes import slope_data

TOL_PROFILE = 2e-3

_R = r"""
suppressMessages(library(lme4))
a <- commandArgs(TRUE)
d <- read.csv(a[1], stringsAsFactors = TRUE)
m <- glmer(as.formula(a[2]), data = d, family = binomial, control = glmerControl(tolPwrss = 1e-13))
parm <- if (nchar(a[4])) strsplit(a[4], ",")[[1]] else NULL
ci <- suppressWarnings(if (is.null(parm)) confint(m, method = a[3], quiet = TRUE)
                       else confint(m, parm = parm, method = a[3], quiet = TRUE))
for (i in seq_len(nrow(ci))) {
  cat(rownames(ci)[i], sprintf("%.12g", ci[i, 1]), sprintf("%.12g", ci[i, 2]), sep = "\t")
  cat("\n")
}
"""


def r_confint(rscript, df, formula, method, tmp, parm=()) -> dict[str, tuple[float, float]]:
    csv, script = tmp / "d.csv", tmp / "ci.R"
    df.to_csv(csv, index=False)
    script.write_text(_R)
    r = subprocess.run([rscript, str(script), str(csv), formula, method, ",".join(parm)], capture_output=True,
                       text=True, timeout=900, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    out = {}
    for line in r.stdout.splitlines():
        parts = line.split("\t")
        if len(parts) == 3:
            out[parts[0]] = (float(parts[1]) if parts[1] != "NA" else np.nan,
                             float(parts[2]) if parts[2] != "NA" else np.nan)
    return out


def ri_data(seed: int = 2, G: int = 40, per: int = 20) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = G * per
    g = np.repeat(np.arange(G), per)
    x = rng.normal(size=n)
    u = rng.normal(0, 0.8, G)
    y = (rng.random(n) < 1 / (1 + np.exp(-(0.3 + 0.6 * x + u[g])))).astype(int)
    return pd.DataFrame({"correct": y, "x": x, "g": [f"g{i:02d}" for i in g]})


def _compare(ci, r, tol):
    assert list(ci.intervals.index) == list(r)
    for name, (lo, hi) in r.items():
        got = ci.intervals.loc[name].to_numpy()
        for a, b in zip(got, (lo, hi), strict=True):
            if np.isnan(b):
                assert np.isnan(a), name
            else:
                assert abs(a - b) < tol, f"{name}: native {got} lme4 {(lo, hi)}"


@pytest.mark.r
def test_wald_matches_lme4(rscript, tmp_path):
    df = slope_data(G=40, per=30)
    m = glmer("correct ~ x + (1 + x | g)", df)
    r = r_confint(rscript, df, "correct ~ x + (1 + x | g)", "Wald", tmp_path)
    ci = m.confint("Wald")
    assert list(ci.intervals.columns) == ["2.5 %", "97.5 %"]
    _compare(ci, r, 1e-3)       # the SEs agree to 1e-3 relative (lme4's finite-difference Hessian)


@pytest.mark.r
def test_profile_random_intercept_matches_lme4(rscript, tmp_path):
    df = ri_data()
    m = glmer("correct ~ x + (1 | g)", df)
    r = r_confint(rscript, df, "correct ~ x + (1 | g)", "profile", tmp_path)
    _compare(m.confint("profile"), r, TOL_PROFILE)


@pytest.mark.r
def test_profile_slope_terms_match_lme4(rscript, tmp_path):
    df = slope_data(seed=31, G=60, per=40, L=((0.9, 0.0), (0.25, 0.5)))
    f = "correct ~ x + (1 + x | g)"
    parm = (".sig02",)            # the correlation; the SDs are optimised through the sd/cor Jacobian
    r = r_confint(rscript, df, f, "profile", tmp_path, parm)
    _compare(glmer(f, df).confint("profile", parm=list(parm)), r, TOL_PROFILE)


def test_boot_deterministic_and_parallel_invariant():
    df = ri_data(G=25, per=12)
    m = glmer("correct ~ x + (1 | g)", df)
    a = m.confint("boot", nsim=24, seed=5, workers=1)
    b = m.confint("boot", nsim=24, seed=5, workers=2)
    assert np.array_equal(a.replicates.to_numpy(), b.replicates.to_numpy(), equal_nan=True)
    assert a.n_failed == 0 and a.nsim == 24
    assert list(a.intervals.index) == [".sig01", "(Intercept)", "x"]
    d = a.to_dict()
    assert d["method"] == "boot" and d["nsim"] == 24 and d["n_failed"] == 0 and d["seed"] == 5
    c = m.confint("boot", nsim=24, seed=6, workers=1)
    assert not np.array_equal(a.replicates.to_numpy(), c.replicates.to_numpy())


def test_boot_counts_failed_refits(monkeypatch):
    import mrcstats.models.confint as C

    df = ri_data(G=25, per=12)
    m = glmer("correct ~ x + (1 | g)", df)
    real = C._boot_one
    calls = {"n": 0}

    def flaky(s):
        calls["n"] += 1
        return None if calls["n"] % 4 == 0 else real(s)

    monkeypatch.setattr(C, "_boot_one", flaky)
    ci = m.confint("boot", nsim=20, seed=1, workers=1)
    assert ci.n_failed == 5
    assert any("5 of 20 bootstrap refits failed" in s for s in ci.messages)


def test_norm_inter_matches_boot():
    # boot:::norm.inter(1:99, c(.025, .975)) = 2.5 and 97.5 (exact order statistics)
    t = np.arange(1.0, 100.0)
    assert _norm_inter(t, np.array([0.025, 0.975])) == pytest.approx([2.5, 97.5], abs=0.2)
    assert _norm_inter(np.arange(1.0, 40.0), np.array([0.5])) == pytest.approx([20.0])


def test_back_spline_matches_r_splines():
    # R: x <- seq(-2, 2, length.out = 9); z <- 1.3 * x + 0.1 * x^3
    #    predict(backSpline(interpSpline(z ~ x)), c(-1.96, 0, 1.96, 0.3, 2.5))$y
    x = np.linspace(-2, 2, 9)
    z = 1.3 * x + 0.1 * x ** 3
    got = back_spline_predict(x, z, np.array([-1.96, 0.0, 1.96, 0.3, 2.5, 50.0]))
    r = [-1.32952250424, 0.0, 1.32952250424, 0.22999378796, 1.59550561798]
    assert got[:5] == pytest.approx(r, abs=1e-10)
    assert np.isnan(got[5])           # outside the profiled range: NA (then the bound)


def test_bad_arguments():
    m = glmer("correct ~ x + (1 | g)", ri_data(G=20, per=10))
    with pytest.raises(InputError, match="method"):
        m.confint("bayes")
    with pytest.raises(InputError, match="level"):
        m.confint("Wald", level=1.5)
    with pytest.raises(InputError, match="parm 'nope'"):
        m.confint("Wald", parm="nope")
    assert list(m.confint("Wald", parm="beta_").intervals.index) == ["(Intercept)", "x"]


def test_cli_confint_json(tmp_path):
    import json

    csv = tmp_path / "d.csv"
    ri_data(G=20, per=10).to_csv(csv, index=False)
    r = subprocess.run([sys.executable, "-m", "mrcstats", "glmer", str(csv), "--formula", "correct ~ x + (1 | g)",
                        "--confint", "Wald", "--json"], capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["confint"]["method"] == "Wald" and d["confint"]["level"] == 0.95
    assert d["confint"]["intervals"][".sig01"] == [None, None]
    assert len(d["confint"]["intervals"]["x"]) == 2 and "fixef" in d and "theta" in d


def _singular_slopes(seed: int = 2, M: int = 6, I: int = 150) -> pd.DataFrame:
    """Few models with an almost constant slope: lme4's fit of (1 + x | model) is singular (correlation -1)."""
    rng = np.random.default_rng(seed)
    model, item = np.repeat(np.arange(M), I), np.tile(np.arange(I), M)
    x = rng.normal(size=I)[item]
    eta = (0.5 + 0.3 * x + rng.normal(0, 0.6, M)[model] + 0.05 * rng.normal(size=M)[model] * x
           + rng.normal(0, 1.0, I)[item])
    y = (rng.random(M * I) < 1 / (1 + np.exp(-eta))).astype(int)
    return pd.DataFrame({"correct": y, "x": x, "model": [f"m{i}" for i in model], "item": [f"i{i}" for i in item]})


SINGULAR_F = "correct ~ x + (1 | item) + (1 + x | model)"


def test_profile_on_a_singular_fit_gives_checked_bounds_or_refuses(tmp_path, capsys):
    """Issue 26: on a singular fit lme4's profile scale breaks down; the fixed effects get finite bounds where the
    deviance minimised with the coefficient fixed is exactly χ²₁ above the optimum, the SD/correlation rows are
    refused with a reason (never ±Inf) and a warning in the messages; the CLI exits 0 as lme4 returns its
    bounds and warns (issue 35)."""
    from mrcstats.models.deviance import ResponseData
    from mrcstats.models.fit import deviance_function, make_model

    df = _singular_slopes()
    m = glmer(SINGULAR_F, df)
    assert m.singular
    ci = m.confint("profile")
    tab = ci.to_frame()
    assert np.isfinite(tab.loc[["(Intercept)", "x"]].to_numpy()).all()
    assert not np.isinf(tab.to_numpy()).any()
    assert len(ci.refused) == 4 and all("broke down" in r for r in ci.refused)
    assert ci.messages[0].startswith("a singular fit: no profile bound for .sig01, .sig02, .sig03, .sig04")
    # the direct check: fix β_j at a bound, minimise the deviance over everything else
    d = ResponseData.from_design(m.design)
    f = deviance_function(make_model(d, m.design.re))
    th, be = m.theta.to_numpy(), m.fixef.to_numpy()
    lower = np.concatenate([r.lower for r in m.design.re])
    k = len(th)
    for j, name in enumerate(m.fixef.index):
        for b, z in zip(tab.loc[name], (-1.959964, 1.959964), strict=True):
            mask = np.ones(k + len(be), bool)
            mask[k + j] = False

            def fun(zz, b=b, j=j, mask=mask):
                x = np.empty(k + len(be))
                x[mask], x[k + j] = zz, b
                D, g = f(x[:k], x[k:])
                return D, g[mask]
            r = optimize.minimize(fun, np.concatenate([th + 0.05, np.delete(be, j)]), jac=True, method="L-BFGS-B",
                                  bounds=[(0.0 if lo == 0 else None, None) for lo in lower] + [(None, None)],
                                  options={"ftol": 1e-15, "gtol": 1e-9, "maxiter": 5000})
            assert r.fun - (-2 * m.loglik) == pytest.approx(z * z, abs=2e-3), (name, b)
    p = tmp_path / "s.csv"
    df.to_csv(p, index=False)
    from mrcstats.cli import main

    assert main(["glmer", str(p), "--formula", SINGULAR_F, "--confint", "profile", "--json"]) == 0
    out = capsys.readouterr()
    got = json.loads(out.out)
    assert got["confint"]["intervals"][".sig01"] == [None, None] and "no bound: .sig01" in out.err
    assert got["confint"]["messages"][0] == ci.messages[0] and len(got["confint"]["refused"]) == 4
    assert all(v is not None for v in got["confint"]["intervals"]["x"])


@pytest.mark.r
@pytest.mark.slow
def test_singular_fit_profile_as_lme4(rscript, tmp_path):
    """lme4's whole ``confint(m, method = "profile")`` of this singular fit (85 s in R): it returns the fixed-effect
    bounds and warns about the variance parameters (non-monotonic profiles of .sig03/.sig04, interpolated to the
    range limits). Ours: the same fixed-effect bounds within its spline interpolation (measured: 1.2e-4), every
    variance parameter NA with its reason (never a number lme4 does not also give), a warning, exit 0."""
    df = _singular_slopes()
    csv = tmp_path / "s.csv"
    df.to_csv(csv, index=False)
    code = (f'suppressMessages(library(lme4)); d <- read.csv("{csv}"); '
            f'm <- glmer({SINGULAR_F}, d, family = binomial, control = glmerControl(tolPwrss = 1e-13)); '
            'ci <- confint(m, method = "profile", quiet = TRUE); cat(sprintf("%.12g", t(ci)), sep = "\\n")')
    r = subprocess.run([rscript, "-e", code], capture_output=True, text=True, timeout=900, check=False)
    assert r.returncode == 0, r.stderr[-1500:]
    assert "non-monotonic profile for .sig03" in r.stderr         # lme4 warns about the variance parameters
    want = np.array([float(v) for v in r.stdout.split()]).reshape(6, 2)
    ci = glmer(SINGULAR_F, df).confint("profile")
    got = ci.to_frame().to_numpy()
    np.testing.assert_allclose(got[4:], want[4:], atol=5e-4)
    assert np.isnan(got[:4]).all() and np.isfinite(want[:4]).all()
    assert [r.partition(":")[0] for r in ci.refused] == [".sig01", ".sig02", ".sig03", ".sig04"]
