"""Wald intervals of the fixed effects as lme4's confint(m, parm = "beta_", method = "Wald"), R in the same run."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest

from mrcstats.errors import InputError
from mrcstats.models import glmer

_R = r"""
suppressMessages(library(lme4))
a <- commandArgs(TRUE)
df <- read.csv(a[1], stringsAsFactors = TRUE)
m <- glmer(y ~ x + f + (1 | g), data = df, family = binomial, control = glmerControl(tolPwrss = 1e-13))
ci <- confint(m, parm = "beta_", method = "Wald", level = as.numeric(a[2]))
cat(colnames(ci), sep = "\t"); cat("\n")
for (i in seq_len(nrow(ci))) cat(rownames(ci)[i], sprintf("%.15g", ci[i, ]), sep = "\t", fill = FALSE, "\n")
"""


@pytest.mark.parametrize("level", [0.95, 0.9])
def test_confint_matches_lme4_wald(level, glmm_data, rscript, tmp_path):
    df = glmm_data(seed=5, groups=40, per=6)
    m = glmer("y ~ x + f + (1 | g)", df)
    ci = m.confint("Wald", level, parm="beta_").to_frame()
    (tmp_path / "d.csv").write_text(df.to_csv(index=False))
    (tmp_path / "ci.R").write_text(_R)
    out = subprocess.run([rscript, str(tmp_path / "ci.R"), str(tmp_path / "d.csv"), str(level)],
                         capture_output=True, text=True, timeout=300, check=True).stdout.splitlines()
    assert out[0].split("\t") == list(ci.columns)            # "2.5 %" "97.5 %" / "5 %" "95 %"
    r = {ln.split("\t")[0]: [float(v) for v in ln.split("\t")[1:3]] for ln in out[1:] if ln.strip()}
    assert list(r) == list(ci.index)
    for term, (lo, hi) in r.items():
        tol = 1e-4 + 2e-3 * float(m.se[term])                 # the parity targets: fixef 1e-4, SE 1e-3 relative
        assert abs(ci.loc[term].iloc[0] - lo) < tol and abs(ci.loc[term].iloc[1] - hi) < tol


def test_confint_is_beta_plus_minus_z_se(glmm_data):
    m = glmer("y ~ x + (1 | g)", glmm_data(seed=2, groups=20, per=5))
    ci = m.confint("Wald", parm="beta_").to_frame()
    assert np.allclose(ci["2.5 %"], m.fixef - 1.959963984540054 * m.se, rtol=0, atol=1e-12)
    assert np.allclose(ci["97.5 %"], m.fixef + 1.959963984540054 * m.se, rtol=0, atol=1e-12)
    for bad in (0, 1, 95, True, "x"):
        with pytest.raises(InputError, match="level"):
            m.confint("Wald", bad)
