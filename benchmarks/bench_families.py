"""Time every model family against its R anchor on the same generated data, same run (issue 41); prints the
ratios and the largest differences of the estimates.

Cases (seeded; the shapes of issue 41):

* ``lmer_slopes20k``   20,000 rows: ``y ~ x * f + (1 + x | g) + (1 | h)`` (500 g x 100 h)    anchor lme4 ``lmer``
* ``lmer_crossed50k``  50,000 rows: ``y ~ x + (1 | item) + (1 | model)`` (2,500 x 40)       anchor lme4 ``lmer``
* ``lmer_big500k``     500,000 rows, 125,000 groups: ``y ~ x + (1 + x | g)``                anchor lme4 ``lmer``
* ``binomial20k``      20,000 rows, 1,500 groups: ``correct ~ x * f + (1 | g)``             anchor lme4 ``glmer``
* ``poisson20k``       20,000 rows, 1,000 groups: ``count ~ x + (1 | g)``                   anchor lme4 ``glmer``
* ``clmm12k``          12,000 ratings 1..5: ``rating ~ x + (1 | item) + (1 | judge)``
  (600 items x 20 judges)                                                                    anchor ``ordinal::clmm``
* ``betabinomial20k``  20,000 rows, 1,000 groups: ``cbind(k, n - k) ~ x + (1 | g)``         anchor glmmTMB

mrcstats: the Python call (``lmer``/``glmer``/``clmm``; formula and in-memory data, ids as categoricals, to
the result with its standard errors, lmer's Satterthwaite df included), wall clock and process CPU time, after
one small warm-up fit per family (the lazy imports are not the fit). R: ``system.time()`` of the anchor's
default call on the same data written to CSV (read into factors before the clock starts), wall and CPU (user +
system) of the fit. Printed per case: both times, the ratio R / mrcstats (wall, and CPU / CPU: on a shared
machine wall clocks measure the queue), the largest |difference| of the fixed effects and the logLik
difference; for lme4's models also against the same model run to convergence (untimed; bobyqa with rhoend
1e-10, glmer also tolPwrss 1e-13: lme4's defaults stop short of the optimum; ``--no-converged`` skips it).
``--json`` prints one JSON object with every row instead.
``--repeat`` takes the median of several mrcstats runs (R runs once). No timing is asserted anywhere.

Usage::

    PYTHONPATH=src python benchmarks/bench_families.py                    # every case but lmer_big500k
    PYTHONPATH=src python benchmarks/bench_families.py --cases lmer_big500k
    PYTHONPATH=src python benchmarks/bench_families.py --cases lmer_slopes20k,clmm12k --json
    PYTHONPATH=src python benchmarks/bench_families.py --no-r            # mrcstats only
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import pandas as pd

R_SCRIPT = r"""
a <- commandArgs(TRUE)
kind <- a[3]
d <- read.csv(a[1], stringsAsFactors = TRUE)
f <- as.formula(a[2])
if (kind == "lmer") {
  suppressMessages(library(lme4))
  t <- system.time(m <- lmer(f, d))
  fe <- fixef(m)
} else if (kind %in% c("binomial", "poisson")) {
  suppressMessages(library(lme4))
  fam <- if (kind == "binomial") binomial else poisson
  t <- system.time(m <- glmer(f, d, family = fam))
  fe <- fixef(m)
} else if (kind == "clmm") {
  suppressMessages(library(ordinal))
  d$rating <- factor(d$rating, ordered = TRUE)
  t <- system.time(m <- clmm(f, data = d))
  fe <- coef(m)[names(m$beta)]
} else {
  suppressMessages(library(glmmTMB))
  t <- system.time(m <- glmmTMB(f, family = betabinomial, data = d))
  fe <- fixef(m)$cond
}
# untimed: the same model run to convergence (bobyqa, rhoend 1e-10; glmer also tolPwrss 1e-13), where the
# default stops short of the optimum (lme4's defaults; clmm and glmmTMB converge by default)
conv <- NULL
if (identical(a[4], "1") && kind %in% c("lmer", "binomial", "poisson")) {
  oc <- list(rhoend = 1e-10, maxfun = 1e5)
  mc <- if (kind == "lmer") lmer(f, d, control = lmerControl(optimizer = "bobyqa", optCtrl = oc)) else
    glmer(f, d, family = fam, control = glmerControl(optimizer = "bobyqa", tolPwrss = 1e-13, optCtrl = oc))
  fc <- fixef(mc)
  conv <- sprintf(', "conv_loglik": %.12f, "conv_fixef": {%s}', as.numeric(logLik(mc)),
                  paste(sprintf('"%s": %.15g', names(fc), fc), collapse = ", "))
}
cat(sprintf('{"seconds": %.6f, "cpu": %.6f, "loglik": %.12f, "fixef": {%s}%s}\n', t[["elapsed"]],
            t[["user.self"]] + t[["sys.self"]], as.numeric(logLik(m)),
            paste(sprintf('"%s": %.15g', names(fe), fe), collapse = ", "), if (is.null(conv)) "" else conv))
"""


def _ids(prefix: str, codes: np.ndarray) -> pd.Categorical:
    """Level labels as a categorical column (R reads them into a factor before its clock starts)."""
    width = len(str(int(codes.max())))
    return pd.Categorical.from_codes(codes, [f"{prefix}{i:0{width}d}" for i in range(int(codes.max()) + 1)])


def _lmer_slopes(rows: int = 20_000, ng: int = 500, nh: int = 100, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    g, h = rng.integers(0, ng, rows), rng.integers(0, nh, rows)
    x = rng.normal(size=rows)
    f = rng.choice(["a", "b", "c"], rows)
    b = rng.normal(size=(ng, 2)) @ np.array([[0.6, 0.0], [0.1, 0.3]]).T
    y = (0.5 + 0.2 * x + 0.1 * (f == "b") - 0.1 * x * (f == "c") + b[g, 0] + b[g, 1] * x
         + rng.normal(0, 0.4, nh)[h] + rng.normal(0, 0.8, rows))
    return pd.DataFrame({"y": y, "x": x, "f": f, "g": _ids("g", g), "h": _ids("h", h)})


def _lmer_crossed(rows: int = 50_000, ni: int = 2_500, nm: int = 40, seed: int = 2) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    i, j = rng.integers(0, ni, rows), rng.integers(0, nm, rows)
    x = rng.normal(size=rows)
    y = 0.3 + 0.2 * x + rng.normal(0, 0.7, ni)[i] + rng.normal(0, 0.5, nm)[j] + rng.normal(0, 1, rows)
    return pd.DataFrame({"y": y, "x": x, "item": _ids("i", i), "model": _ids("m", j)})


def _lmer_big(rows: int = 500_000, ng: int = 125_000, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    g = rng.integers(0, ng, rows)
    x = rng.normal(size=rows)
    b = rng.normal(size=(ng, 2)) @ np.array([[0.6, 0.0], [0.1, 0.3]]).T
    y = 1 + 0.5 * x + b[g, 0] + b[g, 1] * x + rng.normal(0, 1, rows)
    return pd.DataFrame({"y": y, "x": x, "g": _ids("g", g)})


def _binomial(rows: int = 20_000, ng: int = 1_500, seed: int = 4) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    g = rng.integers(0, ng, rows)
    x = rng.normal(size=rows)
    f = rng.choice(["a", "b", "c"], rows)
    eta = 0.4 + 0.3 * x - 0.4 * (f == "b") + 0.2 * x * (f == "c") + rng.normal(0, 0.8, ng)[g]
    return pd.DataFrame({"correct": (rng.random(rows) < 1 / (1 + np.exp(-eta))).astype(int), "x": x, "f": f,
                         "g": _ids("g", g)})


def _poisson(rows: int = 20_000, ng: int = 1_000, seed: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    g = rng.integers(0, ng, rows)
    x = rng.normal(size=rows)
    lam = np.exp(0.5 + 0.3 * x + rng.normal(0, 0.5, ng)[g])
    return pd.DataFrame({"count": rng.poisson(lam), "x": x, "g": _ids("g", g)})


def _clmm(rows: int = 12_000, items: int = 600, judges: int = 20, seed: int = 6) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    item, judge = rng.integers(0, items, rows), rng.integers(0, judges, rows)
    x = rng.normal(size=rows)
    eta = 0.5 * x + rng.normal(0, 1.0, items)[item] + rng.normal(0, 0.5, judges)[judge]
    rating = 1 + np.searchsorted([-1.5, -0.3, 0.8, 2.0], eta + rng.logistic(size=rows))
    return pd.DataFrame({"rating": rating, "x": x, "item": _ids("q", item),
                         "judge": _ids("j", judge)})


def _betabinomial(rows: int = 20_000, ng: int = 1_000, seed: int = 7) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    g = rng.integers(0, ng, rows)
    x = rng.normal(size=rows)
    trials = rng.integers(5, 21, rows)
    p = 1 / (1 + np.exp(-(0.2 + 0.5 * x + rng.normal(0, 0.7, ng)[g])))
    k = rng.binomial(trials, rng.beta(p * 5, (1 - p) * 5))
    return pd.DataFrame({"k": k, "n": trials, "x": x, "g": _ids("g", g)})


# name: (kind, formula, data maker)
CASES = {
    "lmer_slopes20k": ("lmer", "y ~ x * f + (1 + x | g) + (1 | h)", _lmer_slopes),
    "lmer_crossed50k": ("lmer", "y ~ x + (1 | item) + (1 | model)", _lmer_crossed),
    "lmer_big500k": ("lmer", "y ~ x + (1 + x | g)", _lmer_big),
    "binomial20k": ("binomial", "correct ~ x * f + (1 | g)", _binomial),
    "poisson20k": ("poisson", "count ~ x + (1 | g)", _poisson),
    "clmm12k": ("clmm", "rating ~ x + (1 | item) + (1 | judge)", _clmm),
    "betabinomial20k": ("betabinomial", "cbind(k, n - k) ~ x + (1 | g)", _betabinomial),
}
DEFAULT = [c for c in CASES if c != "lmer_big500k"]


def fit(kind: str, formula: str, df: pd.DataFrame):
    import mrcstats

    if kind == "lmer":
        return mrcstats.lmer(formula, df)
    if kind == "clmm":
        return mrcstats.clmm(formula, df)
    return mrcstats.glmer(formula, df, family=kind)


def _time(kind: str, formula: str, df: pd.DataFrame, repeat: int):
    walls, cpus = [], []
    for _ in range(repeat):
        c0, t0 = time.process_time(), time.perf_counter()
        m = fit(kind, formula, df)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return m, statistics.median(walls), statistics.median(cpus)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=",".join(DEFAULT), help=f"comma-separated, of {', '.join(CASES)}")
    ap.add_argument("--repeat", type=int, default=1, help="mrcstats runs per case (median)")
    ap.add_argument("--no-r", action="store_true")
    ap.add_argument("--no-converged", action="store_true",
                    help="skip the untimed R refit run to convergence (lmer/glmer with bobyqa, rhoend 1e-10; glmer tolPwrss 1e-13)")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = ap.parse_args(argv)
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    bad = [c for c in cases if c not in CASES]
    if bad:
        ap.error(f"unknown case(s) {', '.join(bad)}; choose from {', '.join(CASES)}")
    rscript = None if args.no_r else shutil.which("Rscript")
    warm = {"lmer": ("y ~ x + (1 | item) + (1 | model)", _lmer_crossed(2_000, 50, 10)),
            "binomial": ("correct ~ x * f + (1 | g)", _binomial(2_000, 100)),
            "poisson": ("count ~ x + (1 | g)", _poisson(2_000, 100)),
            "clmm": ("rating ~ x + (1 | item) + (1 | judge)", _clmm(1_000, 50, 5)),
            "betabinomial": ("cbind(k, n - k) ~ x + (1 | g)", _betabinomial(1_000, 50))}
    for kind in dict.fromkeys(CASES[c][0] for c in cases):          # warm-up per family: imports are not the fit
        fit(kind, *warm[kind])
    rows = []
    out = {"load_average": os.getloadavg()[0], "cpus": os.cpu_count(), "cases": rows}
    if not args.json:
        print(f"load average {out['load_average']:.2f} on {out['cpus']} CPUs (a shared machine's ratios are "
              f"rough: mrcstats and R run in turn)")
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "fam.R")
        with open(script, "w") as fh:
            fh.write(R_SCRIPT)
        for case in cases:
            kind, formula, make = CASES[case]
            df = make()
            m, wall, cpu = _time(kind, formula, df, args.repeat)
            row = {"case": case, "family": kind, "formula": formula, "rows": len(df), "seconds": wall,
                   "cpu_seconds": cpu, "fit_seconds": float(m.fit_seconds), "loglik": float(m.loglik)}
            if rscript:
                csv = os.path.join(tmp, f"{case}.csv")
                df.to_csv(csv, index=False)
                res = subprocess.run([rscript, script, csv, formula, kind, "0" if args.no_converged else "1"],
                                     capture_output=True, text=True, check=False)
                if res.returncode != 0:
                    row["r_error"] = res.stderr.strip().splitlines()[-1:] or ["failed"]
                else:
                    r = json.loads(res.stdout.strip().splitlines()[-1])
                    fx = {str(k): float(v) for k, v in m.fixef.items()}
                    common = [k for k in r["fixef"] if k in fx]
                    row.update({
                        "r_seconds": r["seconds"], "ratio": r["seconds"] / wall,
                        "r_cpu_seconds": r["cpu"],
                        "max_abs_fixef_diff": max(abs(fx[k] - r["fixef"][k]) for k in common) if common else None,
                        "loglik_diff": float(m.loglik) - r["loglik"]})
                    if "conv_fixef" in r:       # the same R model run to convergence (untimed)
                        cc = [k for k in r["conv_fixef"] if k in fx]
                        row.update({"conv_max_abs_fixef_diff": max(abs(fx[k] - r["conv_fixef"][k]) for k in cc),
                                    "conv_loglik_diff": float(m.loglik) - r["conv_loglik"]})
                    row["cpu_ratio"] = row["r_cpu_seconds"] / cpu
            rows.append(row)
            if not args.json:
                line = f"{case:16s} mrcstats {wall:7.3f} s (cpu {cpu:6.3f})"
                if "r_seconds" in row:
                    line += (f" | R {row['r_seconds']:8.3f} s  {row['ratio']:6.1f}x (cpu {row['r_cpu_seconds']:7.3f}, "
                             f"{row['cpu_ratio']:5.1f}x) | max|dfixef| {row['max_abs_fixef_diff']:.1e}"
                             f" dlogLik {row['loglik_diff']:+.1e}")
                    if "conv_loglik_diff" in row:
                        line += (f" | converged R: max|dfixef| {row['conv_max_abs_fixef_diff']:.1e}"
                                 f" dlogLik {row['conv_loglik_diff']:+.1e}")
                elif "r_error" in row:
                    line += f" | R failed: {row['r_error'][0]}"
                print(line, flush=True)
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
