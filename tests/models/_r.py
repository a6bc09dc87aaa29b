"""Inline Rscript fits for the native-engine tests (the R parity suite proper is test_r_parity.py).

The R side prints tab-separated ``section<TAB>name<TAB>value`` lines (no jsonlite needed),
parsed here into a dict.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pandas as pd

_SCRIPT = r"""
suppressMessages(library(lme4))
a <- commandArgs(TRUE)
df <- read.csv(a[1], stringsAsFactors = TRUE)
sums <- if (nchar(a[3])) strsplit(a[3], ",")[[1]] else character(0)
cl <- if (length(sums)) setNames(as.list(rep("contr.sum", length(sums))), sums) else NULL
fam <- if (length(a) >= 7) get(a[7], mode = "function") else binomial
ctrl <- if (length(a) >= 8 && identical(a[8], "1"))   # run to convergence: bobyqa in both stages, rhoend 1e-9
  glmerControl(tolPwrss = as.numeric(a[5]), optimizer = "bobyqa", optCtrl = list(rhoend = 1e-9, maxfun = 1e5)) else
  glmerControl(tolPwrss = as.numeric(a[5]))
m <- glmer(as.formula(a[2]), data = df, family = fam, nAGQ = as.integer(a[4]), contrasts = cl, control = ctrl)
out <- function(sec, nm, v) cat(paste(sec, nm, sprintf("%.15g", v), sep = "\t"), sep = "\n")
out("fixef", names(fixef(m)), fixef(m))
out("se", names(fixef(m)), sqrt(diag(as.matrix(vcov(m)))))
out("theta", names(getME(m, "theta")), getME(m, "theta"))
out("scalar", c("loglik", "deviance", "aic", "bic", "df_resid"),
    c(as.numeric(logLik(m)), deviance(m), AIC(m), BIC(m), df.residual(m)))
out("resid_q", 1:5, as.numeric(quantile(residuals(m, "pearson", scaled = TRUE))))
re <- if (identical(a[6], "0")) list() else ranef(m, condVar = TRUE)
for (g in names(re)) {
  out(paste0("mode:", g), rownames(re[[g]]), re[[g]][[1]])
  out(paste0("condvar:", g), rownames(re[[g]]), as.numeric(attr(re[[g]], "postVar")))
}
for (msg in m@optinfo$conv$lme4$messages) cat(paste("message", "-", gsub("[\t\n]", " ", msg), sep = "\t"), sep = "\n")
"""


def lme4_fit(rscript: str, df: pd.DataFrame, formula: str, tmp: Path, sum_contrasts=(), nagq: int = 1,
             tol: float = 1e-13, ranef: bool = True, family: str = "binomial", converged: bool = False) -> dict:
    """Fit with lme4 (tolPwrss tightened; ``family`` as R names it) on the same data; returns the figures as
    a dict. ``converged``: also bobyqa in both stages with ``rhoend = 1e-9`` -- on a flat optimum lme4's default
    optimizer stops where its own BLAS rounding leaves it (fixef 5e-4 apart between runs on a loaded machine)."""
    csv = tmp / "data.csv"
    df.to_csv(csv, index=False)
    script = tmp / "fit.R"
    script.write_text(_SCRIPT)
    res = subprocess.run([rscript, str(script), str(csv), formula, ",".join(sum_contrasts), str(nagq), str(tol),
                          "1" if ranef else "0", family, "1" if converged else "0"],
                         capture_output=True, text=True, timeout=600, check=False)
    if res.returncode != 0:
        raise RuntimeError(res.stderr[-2000:])
    r: dict = {"fixef": {}, "se": {}, "theta": {}, "resid_q": [], "ranef": {}, "messages": []}
    for line in res.stdout.splitlines():
        parts = line.split("\t")
        if len(parts) != 3:
            continue
        sec, name, val = parts
        if sec == "message":
            r["messages"].append(val)
        elif sec in ("fixef", "se", "theta"):
            r[sec][name] = float(val)
        elif sec == "scalar":
            r[name] = float(val)
        elif sec == "resid_q":
            r["resid_q"].append(float(val))
        else:
            kind, g = sec.split(":", 1)
            entry = r["ranef"].setdefault(g, {"level": [], "mode": [], "condvar": []})
            if kind == "mode":
                entry["level"].append(name)
            entry[kind].append(float(val))
    return r


def skip_without_rpy2() -> None:
    """Skip (with the reason) unless the rpy2 engine can start R with lme4 and car.

    Starts R through ``r_engine`` rather than importing ``rpy2.robjects`` directly, so the
    engine's clean-up of rpy2's LD_LIBRARY_PATH change applies to the whole test session.
    """
    import pytest

    from mrcstats.models import r_engine

    reason = r_engine.lme4_available()
    if reason is not None:
        pytest.skip(reason)
