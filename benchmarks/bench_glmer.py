"""Time the native GLMM engine against lme4's ``glmer()`` on the same data, same run.

For each case the data are generated (seeded), written to a temporary CSV for R, and
fitted by

* mrcstats: ``mrcstats.glmer(formula, df, contrasts=...)`` -> ``fit_seconds`` (formula to
  result, data already in memory, the way one times ``glmer()`` in R);
* lme4: ``system.time(glmer(formula, data, family = binomial))`` with lme4's default
  ``glmerControl()`` (what users run), read from R's output; optionally also with
  ``tolPwrss = 1e-10`` (``--converged``), the fit the native engine reproduces.

The ratio lme4 / mrcstats is printed per case, plus the logLik difference.

Cases: ``10k`` (10k rows / 1k groups), ``200k`` (200k rows / 20k groups), ``crossed``
(item x model, 11,567 items x 30 models = 347k rows), ``10M`` (10M rows / 1M groups,
native only unless ``--r-10m``; needs about 4 GB); issue 17: ``slopes``
(``correct ~ x * cond + (1 + x | g)``, 100k rows / 2,000 groups), ``crossed_slopes``
(``correct ~ x + (1 + x | model) + (1 | item)``, 200k rows: 29 models x 6,897 items),
``crossed_ri`` (``correct ~ 1 + (1 | item) + (1 | model)`` on a real-shaped log: 12,000
items x 29 models, 347k rows, string ids), ``profile`` (``confint(m, method = "profile")``
of the 10k random-intercept model, against lme4's). ``--cli`` times the path users run
instead: ``mrcstats glmer FILE --json`` as a process on a CSV and a Parquet file with
string columns, against ``Rscript`` reading the CSV and calling ``glmer()`` (both wall
clock, start-up and reading included).

Usage::

    python benchmarks/bench_glmer.py                 # 10k, 200k, crossed
    python benchmarks/bench_glmer.py --cases 10k --repeat 3
    python benchmarks/bench_glmer.py --cases 10M     # native only, prints time and peak RSS
    python benchmarks/bench_glmer.py --cases slopes,crossed_slopes,crossed_ri,profile
    python benchmarks/bench_glmer.py --cli --cases 200k_cli,slopes
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import pandas as pd

SEED_FORMULA = "correct ~ scaled_tok * LLM + (1 | passage)"
CROSSED_FORMULA = "correct ~ scaled_tok + family + (1 | item) + (1 | model)"

R_SCRIPT = r"""
suppressMessages(library(lme4))
a <- commandArgs(TRUE)
df <- read.csv(a[1], stringsAsFactors = TRUE)
ctl <- if (a[3] == "default") glmerControl() else glmerControl(tolPwrss = as.numeric(a[3]))
cl <- if (a[4] == "sum") list(LLM = "contr.sum") else NULL
t <- system.time(m <- glmer(as.formula(a[2]), data = df, family = binomial, control = ctl, contrasts = cl))[["elapsed"]]
cat(sprintf('{"seconds": %.6f, "loglik": %.10f}\n', t, as.numeric(logLik(m))))
"""


def single(n_groups: int, rows_per_group: int, seed: int = 1) -> pd.DataFrame:
    """Seed-003-like data: passages with random intercepts, 3 models, a scaled covariate."""
    rng = np.random.default_rng(seed)
    n = n_groups * rows_per_group
    g = np.repeat(np.arange(n_groups), rows_per_group)
    llm = rng.choice(np.array(["davinci2", "davinci3", "gpt4"]), n)
    tok = rng.normal(size=n)
    b = rng.normal(0, 0.75, n_groups)
    off = np.select([llm == "davinci2", llm == "gpt4"], [-1.1, 1.1], 0.0)
    eta = 1.3 + off + b[g] - 0.1 * tok * (llm == "davinci2")
    y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(np.int8)
    width = len(str(n_groups))
    passage = pd.Categorical.from_codes(g, [f"p{i:0{width}d}" for i in range(n_groups)])
    return pd.DataFrame({"passage": passage, "scaled_tok": tok, "LLM": llm, "correct": y})


def crossed(n_items: int = 11567, n_models: int = 30, seed: int = 2) -> pd.DataFrame:
    """Every model answers every item: (1 | item) + (1 | model), 347k rows by default."""
    rng = np.random.default_rng(seed)
    item = np.repeat(np.arange(n_items), n_models)
    model = np.tile(np.arange(n_models), n_items)
    fam = np.array(["gpt", "llama", "mistral"])[model % 3]
    tok = rng.normal(size=n_items)[item]
    eta = 0.8 + rng.normal(0, 1.2, n_items)[item] + rng.normal(0, 0.6, n_models)[model] - 0.2 * tok
    y = (rng.random(item.size) < 1 / (1 + np.exp(-eta))).astype(np.int8)
    return pd.DataFrame({"item": [f"i{i:05d}" for i in item], "model": [f"m{j:02d}" for j in model],
                         "family": fam, "scaled_tok": tok, "correct": y})


def slopes(n: int = 100_000, n_groups: int = 2000, seed: int = 3) -> pd.DataFrame:
    """Correlated random intercepts and slopes of ``x`` per group ``g`` (string ids), 3 conditions."""
    rng = np.random.default_rng(seed)
    g = rng.integers(0, n_groups, n)
    x = rng.normal(size=n)
    cond = rng.choice(np.array(["a", "b", "c"]), n)
    b = rng.normal(size=(n_groups, 2)) @ np.array([[0.8, 0.0], [0.2, 0.4]]).T
    eta = (-0.2 + 0.4 * x + np.select([cond == "b", cond == "c"], [0.5, -0.3], 0.0) + 0.1 * x * (cond == "b")
           + b[g, 0] + b[g, 1] * x)
    y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(np.int8)
    return pd.DataFrame({"g": [f"g{i:04d}" for i in g], "x": x, "cond": cond, "correct": y})


def crossed_slopes(n_models: int = 29, n_items: int = 6897, seed: int = 4) -> pd.DataFrame:
    """Models (random intercept and slope of an item covariate) crossed with items, 200k rows."""
    rng = np.random.default_rng(seed)
    model = np.repeat(np.arange(n_models), n_items)
    item = np.tile(np.arange(n_items), n_models)
    x = rng.normal(size=n_items)[item]
    bm = rng.normal(size=(n_models, 2)) @ np.array([[0.7, 0.0], [0.15, 0.3]]).T
    eta = 0.5 + 0.3 * x + bm[model, 0] + bm[model, 1] * x + rng.normal(0, 1.1, n_items)[item]
    y = (rng.random(model.size) < 1 / (1 + np.exp(-eta))).astype(np.int8)
    return pd.DataFrame({"model": [f"m{k:02d}" for k in model], "item": [f"i{k:05d}" for k in item], "x": x,
                         "correct": y})


R_PROFILE = r"""
suppressMessages(library(lme4))
a <- commandArgs(TRUE)
df <- read.csv(a[1], stringsAsFactors = TRUE)
m <- glmer(as.formula(a[2]), data = df, family = binomial, contrasts = list(LLM = "contr.sum"))
t <- system.time(ci <- suppressWarnings(confint(m, method = "profile", quiet = TRUE)))[["elapsed"]]
cat(sprintf('{"seconds": %.6f, "loglik": %.10f}
', t, as.numeric(logLik(m))))
"""


def bench_profile(df: pd.DataFrame, args) -> None:
    from mrcstats.models import glmer

    m = glmer(SEED_FORMULA, df, contrasts={"LLM": "sum"})
    t = time.perf_counter()
    ci = m.confint("profile")
    nat = time.perf_counter() - t
    print(f"profile  rows={len(df):>9,d} mrcstats confint(profile) {nat:.2f}s "
          f"({len(ci.intervals)} parameters)", flush=True)
    if args.no_r or not shutil.which("Rscript"):
        return
    with tempfile.TemporaryDirectory() as tmp:
        csv = os.path.join(tmp, "data.csv")
        df.to_csv(csv, index=False)
        script = os.path.join(tmp, "p.R")
        with open(script, "w") as fh:
            fh.write(R_PROFILE)
        out = subprocess.run([shutil.which("Rscript"), script, csv, SEED_FORMULA], capture_output=True, text=True,
                             check=False, timeout=args.timeout)
        if out.returncode != 0:
            print(f"         lme4 profile failed: {out.stderr.strip()[-300:]}")
            return
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"         lme4 confint(method='profile') {r['seconds']:.2f}s  ratio lme4/mrcstats = "
              f"{r['seconds'] / nat:.1f}x", flush=True)


R_CLI = r"""
suppressMessages(library(lme4))
a <- commandArgs(TRUE)
df <- read.csv(a[1], stringsAsFactors = TRUE)
m <- glmer(as.formula(a[2]), data = df, family = binomial)
cat(sprintf('{"loglik": %.10f}
', as.numeric(logLik(m))))
"""


def bench_cli(name: str, df: pd.DataFrame, formula: str, args) -> None:
    """Wall clock of the whole user path: process start, reading the file, fit, output."""
    exe = os.path.join(os.path.dirname(sys.executable), "mrcstats")
    with tempfile.TemporaryDirectory() as tmp:
        csv = os.path.join(tmp, "data.csv")
        pq = os.path.join(tmp, "data.parquet")
        df.to_csv(csv, index=False)
        df.to_parquet(pq, index=False)
        res = {}
        for label, path in (("csv", csv), ("parquet", pq)):
            t = time.perf_counter()
            out = subprocess.run([exe, "glmer", path, "--formula", formula, "--json"], capture_output=True,
                                 text=True, check=False)
            res[label] = time.perf_counter() - t
            if out.returncode != 0:
                print(f"{name}: mrcstats CLI failed: {out.stderr.strip()[-300:]}")
                return
            ll = json.loads(out.stdout)["loglik"]
        print(f"{name:8s} CLI rows={len(df):>9,d} mrcstats glmer --json: csv {res['csv']:.2f}s, "
              f"parquet {res['parquet']:.2f}s (wall, process start to JSON) logLik={ll:.4f}", flush=True)
        if args.no_r or not shutil.which("Rscript"):
            return
        script = os.path.join(tmp, "cli.R")
        with open(script, "w") as fh:
            fh.write(R_CLI)
        t = time.perf_counter()
        out = subprocess.run([shutil.which("Rscript"), script, csv, formula], capture_output=True, text=True,
                             check=False, timeout=args.timeout)
        rt = time.perf_counter() - t
        if out.returncode != 0:
            print(f"         Rscript failed: {out.stderr.strip()[-300:]}")
            return
        print(f"         Rscript read.csv + glmer() {rt:.2f}s (wall)  ratio vs mrcstats csv = {rt / res['csv']:.1f}x",
              flush=True)


def run_r(csv: str, formula: str, control: str, contrasts: str, timeout: float) -> dict | None:
    rscript = shutil.which("Rscript")
    if not rscript:
        return None
    with tempfile.NamedTemporaryFile("w", suffix=".R", delete=False) as fh:
        fh.write(R_SCRIPT)
    try:
        out = subprocess.run([rscript, fh.name, csv, formula, control, contrasts], capture_output=True, check=False,
                             text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"seconds": float("nan"), "loglik": float("nan"), "error": f"timeout {timeout}s"}
    finally:
        os.unlink(fh.name)
    if out.returncode != 0:
        return {"seconds": float("nan"), "loglik": float("nan"), "error": out.stderr.strip()[-300:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench(name: str, df: pd.DataFrame, formula: str, contrasts: dict | None, args) -> None:
    from mrcstats.models import glmer

    times = []
    m = None
    for _ in range(args.repeat):
        m = glmer(formula, df, contrasts=contrasts)
        times.append(m.fit_seconds)
    best = min(times)
    line = (f"{name:8s} rows={len(df):>9,d} groups={dict(m.ngroups)} mrcstats fit_seconds={best:.3f} "
            f"(runs {', '.join(f'{t:.3f}' for t in times)}) logLik={m.loglik:.4f}")
    print(line, flush=True)
    if args.no_r or (name == "10M" and not args.r_10m):
        return
    with tempfile.TemporaryDirectory() as tmp:
        csv = os.path.join(tmp, "data.csv")
        df.to_csv(csv, index=False)
        contr = "sum" if contrasts else "none"
        r = run_r(csv, formula, "default", contr, args.timeout)
        if r is None:
            print("         Rscript not found: no lme4 timing")
            return
        ratio = r["seconds"] / best if np.isfinite(r["seconds"]) else float("nan")
        print(f"         lme4 default glmer() {r['seconds']:.2f}s  ratio lme4/mrcstats = {ratio:.1f}x  "
              f"logLik(lme4 default) - logLik(mrcstats) = {r['loglik'] - m.loglik:+.4f}"
              + (f"  [{r.get('error')}]" if r.get("error") else ""), flush=True)
        if args.converged:
            tol = "1e-13" if name != "200k" else "1e-10"
            rc = run_r(csv, formula, tol, contr, args.timeout)
            print(f"         lme4 tolPwrss={tol} {rc['seconds']:.2f}s  ratio {rc['seconds'] / best:.1f}x  "
                  f"logLik diff {rc['loglik'] - m.loglik:+.2e}", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="10k,200k,crossed", help="comma list of 10k,200k,crossed,10M")
    ap.add_argument("--repeat", type=int, default=1, help="native fits per case (best time reported)")
    ap.add_argument("--no-r", action="store_true", help="skip lme4")
    ap.add_argument("--r-10m", action="store_true", help="also run lme4 on the 10M case (hours)")
    ap.add_argument("--converged", action="store_true", help="also time lme4 with tolPwrss tightened")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per R run")
    ap.add_argument("--cli", action="store_true",
                    help="time the CLI on CSV/Parquet files with string columns (process wall clock) instead")
    args = ap.parse_args(argv)
    print(f"load average at start: {os.getloadavg()}", flush=True)
    cases = {
        "slopes": (slopes, "correct ~ x * cond + (1 + x | g)"),
        "crossed_slopes": (crossed_slopes, "correct ~ x + (1 + x | model) + (1 | item)"),
        "crossed_ri": (lambda: crossed(12000, 29, seed=5), "correct ~ 1 + (1 | item) + (1 | model)"),
        "200k_cli": (lambda: single(20000, 10).astype({"passage": str}), "correct ~ scaled_tok * LLM + (1 | passage)"),
    }
    for case in [c.strip() for c in args.cases.split(",") if c.strip()]:
        if case in cases:
            make, formula = cases[case]
            if args.cli:
                bench_cli(case, make(), formula, args)
            else:
                bench(case, make(), formula, None, args)
            continue
        if case == "profile":
            bench_profile(single(1000, 10), args)
            continue
        if case == "10k":
            bench(case, single(1000, 10), SEED_FORMULA, {"LLM": "sum"}, args)
        elif case == "200k":
            bench(case, single(20000, 10), SEED_FORMULA, {"LLM": "sum"}, args)
        elif case == "crossed":
            bench(case, crossed(), CROSSED_FORMULA, None, args)
        elif case == "10M":
            t = time.perf_counter()
            df = single(1_000_000, 10)
            print(f"10M data generated in {time.perf_counter() - t:.1f}s", flush=True)
            bench(case, df, SEED_FORMULA, {"LLM": "sum"}, args)
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2
            print(f"         peak RSS of this process {rss:.2f} GB (includes the generated data)")
        else:
            print(f"unknown case {case!r}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
