"""Inline Rscript fits for the native-engine tests (the R parity suite proper is test_r_parity.py)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pandas as pd

_SCRIPT = r"""
suppressMessages(library(lme4))
a <- commandArgs(TRUE)
df <- read.csv(a[1], stringsAsFactors = TRUE)
cl <- if (nchar(a[3])) setNames(as.list(rep("contr.sum", length(strsplit(a[3], ",")[[1]]))), strsplit(a[3], ",")[[1]]) else NULL
m <- glmer(as.formula(a[2]), data = df, family = binomial, nAGQ = as.integer(a[4]), contrasts = cl,
           control = glmerControl(tolPwrss = as.numeric(a[5])))
cv <- lapply(ranef(m, condVar = TRUE), function(r) list(mode = r[[1]], condvar = as.numeric(attr(r, "postVar")), level = rownames(r)))
out <- list(fixef = as.list(fixef(m)), se = as.list(sqrt(diag(as.matrix(vcov(m))))),
            theta = as.list(getME(m, "theta")), loglik = as.numeric(logLik(m)), deviance = deviance(m),
            aic = AIC(m), bic = BIC(m), df_resid = df.residual(m),
            resid_q = as.numeric(quantile(residuals(m, "pearson", scaled = TRUE))), ranef = cv,
            messages = as.list(m@optinfo$conv$lme4$messages))
cat(jsonlite::toJSON(out, digits = I(15), auto_unbox = TRUE, null = "null"))
"""


def lme4_fit(rscript: str, df: pd.DataFrame, formula: str, tmp: Path, sum_contrasts=(), nagq: int = 1,
             tol: float = 1e-13) -> dict:
    """Fit with lme4 (tolPwrss tightened) on the same data; returns the figures as a dict."""
    csv = tmp / "data.csv"
    df.to_csv(csv, index=False)
    script = tmp / "fit.R"
    script.write_text(_SCRIPT)
    out = subprocess.run([rscript, str(script), str(csv), formula, ",".join(sum_contrasts), str(nagq), str(tol)],
                         capture_output=True, text=True, timeout=600, check=False)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout)
