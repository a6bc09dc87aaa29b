"""Beta-binomial GLMMs for k-of-n outcomes (pass@k designs) against glmmTMB's ``betabinomial`` run in the same test
run, on data generated here. Targets (issue 26): fixef, random-effect SD, logLik and the dispersion (glmmTMB's
``sigma``) within 1e-4 (the dispersion relative), SEs within 1e-4 relative."""
from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest

from mrcstats.errors import InputError
from mrcstats.models import glmer
from mrcstats.models.family import BETABINOMIAL

_R = r"""
suppressMessages(library(glmmTMB))
a <- commandArgs(TRUE)
d <- read.csv(a[1], stringsAsFactors = TRUE)
m <- glmmTMB(as.formula(a[2]), family = betabinomial, data = d)
out <- function(sec, nm, v) cat(paste(sec, nm, sprintf("%.17g", v), sep = "\t"), sep = "\n")
fe <- fixef(m)$cond
out("fixef", names(fe), fe)
out("se", names(fe), sqrt(diag(vcov(m)$cond)))
vc <- VarCorr(m)$cond
for (g in names(vc)) out("sd", g, attr(vc[[g]], "stddev"))
out("scalar", c("sigma", "loglik"), c(sigma(m), as.numeric(logLik(m))))
out("resid_q", 1:5, as.numeric(quantile(residuals(m, "pearson"))))
"""


def _glmmtmb() -> str:
    rs = shutil.which("Rscript")
    if rs is None:
        pytest.skip("Rscript not installed")
    ok = subprocess.run([rs, "-e", 'cat(requireNamespace("glmmTMB", quietly = TRUE))'], capture_output=True,
                        text=True, check=False).stdout.strip()
    if ok != "TRUE":
        pytest.skip("the R package glmmTMB is not installed (apt-get install r-cran-glmmtmb)")
    return rs


def passk_data(seed: int = 1, G: int = 40, per: int = 5) -> pd.DataFrame:
    """k correct of n samples per (item, model) row: overdispersed beyond the item effect."""
    rng = np.random.default_rng(seed)
    g = np.repeat(np.arange(G), per)
    n = G * per
    x = rng.normal(size=n)
    trials = rng.integers(5, 21, n)
    p = 1 / (1 + np.exp(-(0.2 + 0.5 * x + rng.normal(0, 0.7, G)[g])))
    k = rng.binomial(trials, rng.beta(p * 5, (1 - p) * 5))
    return pd.DataFrame({"k": k, "n": trials, "x": x, "item": [f"i{i:02d}" for i in g]})


@pytest.mark.r
def test_betabinomial_matches_glmmtmb(tmp_path):
    rs = _glmmtmb()
    df = passk_data()
    f = "cbind(k, n - k) ~ x + (1 | item)"
    m = glmer(f, df, family="betabinomial")
    csv = tmp_path / "d.csv"
    df.to_csv(csv, index=False)
    (tmp_path / "bb.R").write_text(_R)
    res = subprocess.run([rs, str(tmp_path / "bb.R"), str(csv), f], capture_output=True, text=True, timeout=600,
                         check=False)
    assert res.returncode == 0, res.stderr[-2000:]
    r: dict = {"fixef": {}, "se": {}, "sd": {}, "resid_q": {}}
    for line in res.stdout.splitlines():
        sec, name, val = line.split("\t")
        if sec == "scalar":
            r[name] = float(val)
        else:
            r[sec][name] = float(val)
    for k, v in r["fixef"].items():
        assert m.fixef[k] == pytest.approx(v, abs=1e-4), k
        assert m.se[k] == pytest.approx(r["se"][k], rel=1e-4), k
    assert m.theta["item.(Intercept)"] == pytest.approx(r["sd"]["item"], abs=1e-4)
    assert m.dispersion == pytest.approx(r["sigma"], rel=1e-4)
    assert m.loglik == pytest.approx(r["loglik"], abs=1e-4)
    assert m.family is BETABINOMIAL and m.to_dict()["dispersion"] == m.dispersion
    assert m.aic == pytest.approx(-2 * m.loglik + 2 * 4)
    assert np.allclose(m.resid_quantiles.to_numpy(), list(r["resid_q"].values()), atol=1e-3)


def test_betabinomial_cli_and_errors(tmp_path, capsys):
    from mrcstats.cli import main

    df = passk_data(G=20)
    p = tmp_path / "passk.csv"
    df.to_csv(p, index=False)
    f = "cbind(k, n - k) ~ x + (1 | item)"
    assert main(["glmer", str(p), "--formula", f, "--family", "betabinomial", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["family"] == "betabinomial" and got["dispersion"] > 0 and set(got["fixef"]) == {"(Intercept)", "x"}
    with pytest.raises(InputError, match="glmmTMB"):
        glmer(f, df, family="betabinomial", engine="lme4")
    with pytest.raises(InputError, match="nagq"):
        glmer(f, df, family="betabinomial", nagq=3)
