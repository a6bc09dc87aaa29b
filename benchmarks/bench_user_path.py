"""The user's path against glmmTMB and lme4 in one run (issue 28): ``mrcstats glmer FILE --json``.

Four generated CSV files (seeded; written once into ``--dir``) and one formula each:

* ``ri20k``    20,000 rows, 1,500 groups: ``correct ~ x * f + (1 | g)``            target: wall >= 10x glmmTMB
* ``slope70k`` 70,000 rows: ``correct ~ x + (1 | item) + (1 + x | model)``          target: wall >= 20x glmmTMB
* ``crossed347k`` 29 models x 12,000 items, every pair once (348,000 rows):
  ``correct ~ 1 + (1 | item) + (1 | model)``                                        target: wall >= 50x lme4 default
* ``verbagg``  VerbAgg-shaped 316 persons x 24 items, binary, crossed:
  ``r2 ~ Anger + Gender + btype + situ + (1 | id) + (1 | item)``                    target: fit_seconds <= 0.05 s

Real shapes (issue 41: logs are rarely complete grids): 31 models x 3,000 items in 14 categories with 75% of
the cells filled (two thirds of the models skip whole categories, every model misses 2% of the rest at random):

* ``missing70k``  ``correct ~ x + (1 | item) + (1 | model)``                        target: wall >= 20x glmmTMB
* ``slopemiss70k``  the same cells, ``correct ~ x + (1 | item) + (1 + x | model)``  target: wall >= 20x glmmTMB
* ``singular70k``  the same cells and formula, no slope variance (a singular fit)   target: wall >= 20x glmmTMB
* ``boundary70k``  other cells (seed 286), the slope half the model's intercept: an optimum next to the boundary
  (slope's own θ 0.02), where the Newton phase overshoots in θ and backtracks          target: wall >= 20x glmmTMB
* ``mmlupro``  the real MMLU-Pro log (29 models x 12,032 questions, 99.5% of the cells; ``--mmlupro`` CSV with
  model, item, pred, gold, or the folder of ``eval_results`` JSON that ``benchmarks/ranks_mmlu_pro.py`` reads;
  skipped without it): ``correct ~ 1 + (1 | item) + (1 | model)``                  target: wall >= 50x lme4 default

A real judge-preference log, fitted by ``mrcstats lmer`` (issue 41):

* ``alpacaeval``  AlpacaEval 2.0's per-instruction judge preferences (``--alpacaeval``: the mirror's bare git dir
  of ``tatsu-lab/alpaca_eval``, or a folder holding ``results/<model>/weighted_alpaca_eval_gpt4_turbo/
  annotations.json``; skipped without it). The first ``--alpacaeval-models`` (60) models by name whose file is
  there (the mirror holds 58 of the 223: 46,680 rows; six files miss 1-3 instructions), one row per
  annotation: model = ``generator_2``, item = the instruction's number (``i000``..``i804``, in the order first
  met), ``dataset`` (5 sources), score = ``preference`` - 1 (the judge's weight on the model's answer over the
  reference's, in [0, 1]; AlpacaEval's win rate is its mean): ``score ~ dataset + (1 | model) + (1 | item)``
  against ``lme4::lmer`` (REML) and ``lmerTest::lmer`` + ``summary`` (the Satterthwaite df the JSON has)
                                                                                    target: wall >= 1x lme4

Measured per case:

* mrcstats: ``python -m mrcstats glmer FILE --formula F --json`` (``lmer`` for ``alpacaeval``) as its own process (wall clock from
  process start to the JSON, start-up and reading included, and the process's CPU time), ``--repeat`` runs
  (median) after one untimed run, with Python's bytecode cache on as in an installed package (the
  sandbox's ``PYTHONDONTWRITEBYTECODE`` is dropped for these processes), and the ``fit_seconds`` the JSON
  reports (median);
* R: for ``alpacaeval`` ``system.time()`` of ``lme4::lmer(F)`` and of ``lmerTest::lmer(F)`` + ``summary()``;
  otherwise ``system.time()`` of ``glmmTMB(F, family = binomial)`` and of lme4's default
  ``glmer(F, family = binomial)`` on the same CSV (read before timing), ``--r-repeat`` fits in one
  Rscript process (median); with ``--converged`` also lme4 run to convergence (``lme4tight``). Each R line
  gives R's logLik and its difference, the largest fixed-effect difference, R's evaluation count and lme4's
  ``isSingular``.

The ratio printed is anchor seconds / mrcstats wall seconds (and / fit_seconds, and CPU / CPU: on a
shared, loaded machine wall clocks measure the queue, CPU times less so). ``--quick`` runs
only each case's target anchor, once. ``--save DIR`` writes each case's mrcstats JSON;
``--check DIR`` compares estimates, θ and logLik with a saved run (the "speed never changes a
number" check; tolerance ``--tol``, default 1e-8 relative to max(1, |value|)).

Usage (from the repository, with this checkout's source first on the path)::

    PYTHONPATH=src python benchmarks/bench_user_path.py                  # everything (several minutes)
    PYTHONPATH=src python benchmarks/bench_user_path.py --targets                        # the targets' anchors, median of 3
    PYTHONPATH=src python benchmarks/bench_user_path.py --quick --cases crossed347k,verbagg
    PYTHONPATH=src python benchmarks/bench_user_path.py --r-repeat 1 --converged \
        --cases missing70k,slopemiss70k,singular70k,mmlupro --mmlupro /tmp/mmlupro_json   # issue 41's shapes
    PYTHONPATH=src python benchmarks/bench_user_path.py --r-repeat 1 --cases alpacaeval \
        --alpacaeval /work/.mirror/tatsu-lab+alpaca_eval/repo                       # the judge-preference lmer
    PYTHONPATH=src python benchmarks/bench_user_path.py --no-r --save /tmp/before
    PYTHONPATH=src python benchmarks/bench_user_path.py --no-r --check /tmp/before
    PYTHONPATH=/old/checkout/src python benchmarks/bench_user_path.py --engine-only   # the engine's CPU
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

CASES = {
    "ri20k": {"formula": "correct ~ x * f + (1 | g)", "target": ("glmmTMB", 10.0)},
    "slope70k": {"formula": "correct ~ x + (1 | item) + (1 + x | model)", "target": ("glmmTMB", 20.0)},
    "crossed347k": {"formula": "correct ~ 1 + (1 | item) + (1 | model)", "target": ("lme4", 50.0)},
    "verbagg": {"formula": "r2 ~ Anger + Gender + btype + situ + (1 | id) + (1 | item)",
                "target": ("fit_seconds", 0.05)},
    "missing70k": {"formula": "correct ~ x + (1 | item) + (1 | model)", "target": ("glmmTMB", 20.0)},
    "slopemiss70k": {"formula": "correct ~ x + (1 | item) + (1 + x | model)", "target": ("glmmTMB", 20.0)},
    "singular70k": {"formula": "correct ~ x + (1 | item) + (1 + x | model)", "target": ("glmmTMB", 20.0)},
    "boundary70k": {"formula": "correct ~ x + (1 | item) + (1 + x | model)", "target": ("glmmTMB", 20.0)},
    "mmlupro": {"formula": "correct ~ 1 + (1 | item) + (1 | model)", "target": ("lme4", 50.0)},
    "alpacaeval": {"formula": "score ~ dataset + (1 | model) + (1 | item)", "target": ("lmer", 1.0),
                   "command": "lmer"},
}
#: cases that run by default (``mmlupro`` needs ``--mmlupro``, ``alpacaeval`` ``--alpacaeval``)
DEFAULT_CASES = [c for c in CASES if c not in ("mmlupro", "alpacaeval")]
#: the R anchors of an ``lmer`` case (``lmer``: lme4's default; ``lmerTest``: its lmer + summary, the df)
LMER_ANCHORS = ["lmer", "lmerTest"]

R_SCRIPT = r"""
a <- commandArgs(TRUE)
df <- read.csv(a[1], stringsAsFactors = TRUE)
f <- as.formula(a[2])
which <- strsplit(a[3], ",")[[1]]
reps <- as.integer(a[4])
out <- list()
for (w in which) {
  if (w %in% c("lme4", "lmer")) suppressMessages(library(lme4))
  if (w == "lmerTest") suppressMessages(library(lmerTest))
  if (w == "glmmTMB") suppressMessages(library(glmmTMB))
  ts <- numeric(0)
  cs <- numeric(0)
  for (r in seq_len(reps)) {
    if (w == "lme4tight") suppressMessages(library(lme4))
    st <- system.time(m <- if (w == "lmer") lme4::lmer(f, data = df)
                           else if (w == "lmerTest") {mt <- lmerTest::lmer(f, data = df); s <- summary(mt); mt}
                           else if (w == "lme4") glmer(f, data = df, family = binomial)
                           else if (w == "lme4tight") glmer(f, data = df, family = binomial,
                                  control = glmerControl(tolPwrss = 1e-10, optimizer = "bobyqa",
                                                         optCtrl = list(rhoend = 1e-9, maxfun = 1e5)))
                           else glmmTMB(f, data = df, family = binomial))
    ts <- c(ts, st[["elapsed"]])
    cs <- c(cs, st[["user.self"]] + st[["sys.self"]])
  }
  fe <- if (w == "glmmTMB") fixef(m)$cond else fixef(m)
  nev <- if (w == "glmmTMB") m$fit$evaluations[["function"]] else m@optinfo$feval
  sing <- if (w == "glmmTMB") "null" else tolower(as.character(isSingular(m)))
  ddf <- if (w == "lmerTest") s$coefficients[, "df"] else numeric(0)
  out[[length(out) + 1]] <- sprintf(
    '"%s": {"seconds": [%s], "cpu": [%s], "loglik": %.10f, "fixef": {%s}, "df": {%s}, "evals": %d, "singular": %s}', w,
    paste(sprintf("%.4f", ts), collapse = ", "), paste(sprintf("%.4f", cs), collapse = ", "),
    as.numeric(logLik(m)), paste(sprintf('"%s": %.10f', names(fe), fe), collapse = ", "),
    paste(sprintf('"%s": %.10f', names(ddf), ddf), collapse = ", "), as.integer(nev), sing)
}
cat(paste0("{", paste(unlist(out), collapse = ", "), "}\n"))
"""


# ----------------------------------------------------------------------------- data


def _draw(rng, eta):
    return (rng.random(eta.shape) < 1.0 / (1.0 + np.exp(-eta))).astype(np.int8)


def make_ri20k(seed: int = 281) -> pd.DataFrame:
    """20,000 rows, 1,500 groups (13-14 rows each), a covariate x crossed with a 3-level factor f."""
    rng = np.random.default_rng(seed)
    n, q = 20_000, 1_500
    g = rng.permutation(np.arange(n) % q)
    x = rng.normal(size=n)
    f = rng.choice(np.array(["a", "b", "c"]), n)
    eta = 0.4 + 0.5 * x + np.select([f == "b", f == "c"], [-0.6, 0.3], 0.0) - 0.3 * x * (f == "b") \
        + rng.normal(0, 0.9, q)[g]
    return pd.DataFrame({"g": [f"g{i:04d}" for i in g], "x": x, "f": f, "correct": _draw(rng, eta)})


def make_slope70k(seed: int = 282) -> pd.DataFrame:
    """70,000 rows: 20 models x 3,500 items, every pair once; a row covariate x with a
    per-model random slope correlated with the model's intercept."""
    rng = np.random.default_rng(seed)
    nm, ni = 20, 3_500
    model = np.repeat(np.arange(nm), ni)
    item = np.tile(np.arange(ni), nm)
    x = rng.normal(size=nm * ni)
    L = np.linalg.cholesky(np.array([[0.8, 0.2], [0.2, 0.15]]))
    bm = rng.normal(size=(nm, 2)) @ L.T
    eta = 0.2 + 0.3 * x + bm[model, 0] + bm[model, 1] * x + rng.normal(0, 1.2, ni)[item]
    return pd.DataFrame({"model": [f"m{i:02d}" for i in model], "item": [f"i{i:05d}" for i in item], "x": x,
                         "correct": _draw(rng, eta)})


def make_crossed347k(seed: int = 283) -> pd.DataFrame:
    """The leaderboard stand-in: 29 models x 12,000 items, every pair once (rows in log order:
    model by model, items shuffled within each)."""
    rng = np.random.default_rng(seed)
    nm, ni = 29, 12_000
    model = np.repeat(np.arange(nm), ni)
    item = np.concatenate([rng.permutation(ni) for _ in range(nm)])
    eta = 0.3 + rng.normal(0, 0.8, nm)[model] + rng.normal(0, 1.6, ni)[item]
    return pd.DataFrame({"model": [f"model-{i:02d}" for i in model], "item": [f"q{i:05d}" for i in item],
                         "correct": _draw(rng, eta)})


def make_verbagg(seed: int = 284) -> pd.DataFrame:
    """VerbAgg-shaped: 316 persons x 24 items (btype 3 x situ 2 x mode 2 x 2), binary r2,
    person covariates Anger and Gender."""
    rng = np.random.default_rng(seed)
    npers, nit = 316, 24
    pid = np.repeat(np.arange(npers), nit)
    it = np.tile(np.arange(nit), npers)
    anger = rng.integers(11, 40, npers)
    gender = rng.choice(np.array(["F", "M"]), npers, p=[0.77, 0.23])
    btype = np.array(["curse", "scold", "shout"])[(np.arange(nit) // 2) % 3]
    situ = np.array(["other", "self"])[np.arange(nit) // 12]
    eta = (-1.1 + 0.057 * anger[pid] + 0.32 * (gender[pid] == "M") - np.select(
        [btype[it] == "scold", btype[it] == "shout"], [1.06, 2.1], 0.0) - 1.05 * (situ[it] == "self")
        + rng.normal(0, 1.34, npers)[pid] + rng.normal(0, 0.5, nit)[it])
    return pd.DataFrame({"id": [f"p{i:03d}" for i in pid], "item": [f"S{i:02d}" for i in it],
                         "Anger": anger[pid], "Gender": gender[pid], "btype": btype[it], "situ": situ[it],
                         "r2": _draw(rng, eta)})


def _skip_categories(rng, nm: int, ni: int, ncat: int, fill: float) -> tuple[np.ndarray, np.ndarray]:
    """(model, item) codes of the answered cells of an nm x ni log, items in ``ncat`` categories: two thirds
    of the models skip whole categories (as many as make ``fill`` of the cells answered), and every model
    misses 2% of the rest at random; rows model by model."""
    cat = np.arange(ni) % ncat
    keep = np.ones((nm, ncat), bool)
    skippers = rng.choice(nm, size=nm * 2 // 3, replace=False)
    for s in range(round((1 - fill / 0.98) * nm * ncat)):
        m = skippers[s % len(skippers)]
        keep[m, rng.choice(np.flatnonzero(keep[m]))] = False
    mm, ii = np.meshgrid(np.arange(nm), np.arange(ni), indexing="ij")
    ok = keep[mm, cat[ii]] & (rng.random((nm, ni)) < 0.98)
    return mm[ok], ii[ok]


def make_missing(seed: int = 285, slope_sd: float = 0.35, slope_of_intercept: float | None = None) -> pd.DataFrame:
    """31 models x 3,000 items (14 categories), 75% of the cells answered (:func:`_skip_categories`); a row
    covariate x with a per-model random slope of SD ``slope_sd`` (0: none, a singular fit of
    ``(1 + x | model)``), or ``slope_of_intercept`` times the model's intercept (correlation 1 in the
    generating model: an optimum next to the boundary), and item intercepts."""
    rng = np.random.default_rng(seed)
    nm, ni = 31, 3_000
    model, item = _skip_categories(rng, nm, ni, 14, 0.75)
    x = rng.normal(size=model.size)
    bm = rng.normal(0, 0.8, nm)
    if slope_of_intercept is not None:
        sm = slope_of_intercept * bm
    else:
        sm = rng.normal(0, slope_sd, nm) if slope_sd > 0 else np.zeros(nm)
    eta = 0.2 + 0.3 * x + bm[model] + sm[model] * x + rng.normal(0, 1.2, ni)[item]
    return pd.DataFrame({"model": [f"m{i:02d}" for i in model], "item": [f"i{i:05d}" for i in item], "x": x,
                         "correct": _draw(rng, eta)})


def make_mmlupro(source: str) -> pd.DataFrame:
    """The MMLU-Pro log as (model, item, correct): a CSV with model, item, pred, gold (correct = pred == gold,
    no extracted answer = not correct), or the folder of ``eval_results`` JSON (the loader of
    ``benchmarks/bench_screen.py``)."""
    if os.path.isdir(source):
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from bench_screen import load

        log, _ = load(Path(source))
        return pd.DataFrame({"model": log["model"], "item": log["item"],
                             "correct": log["correct"].fillna(False).astype(np.int8)})
    df = pd.read_csv(source)
    return pd.DataFrame({"model": df["model"], "item": df["item"],
                         "correct": (df["pred"] == df["gold"]).astype(np.int8)})


#: where AlpacaEval keeps each model's annotations by its default (AlpacaEval 2.0) annotator
ALPACA_ANNOTATIONS = "weighted_alpaca_eval_gpt4_turbo/annotations.json"


def alpacaeval_files(source: str, nmodels: int = 60) -> list[tuple[str, bytes]]:
    """(model folder, annotations JSON text) of the first ``nmodels`` models by name whose
    ``results/<model>/weighted_alpaca_eval_gpt4_turbo/annotations.json`` is there: ``source`` is a bare git dir
    of ``tatsu-lab/alpaca_eval`` (its HEAD; a mirror may lack the largest blobs: those models are passed over)
    or a folder with ``results/`` (or the ``results`` folder itself)."""
    out = []
    if os.path.isdir(os.path.join(source, "objects")):                   # a bare git dir
        git = ["git", f"--git-dir={source}"]
        tree = subprocess.run([*git, "ls-tree", "-r", "HEAD", "results/"], capture_output=True, text=True,
                              check=True).stdout
        for line in sorted(tree.splitlines(), key=lambda t: t.split("\t", 1)[1]):
            meta, path = line.split("\t", 1)
            parts = path.split("/")
            if len(parts) != 4 or "/".join(parts[2:]) != ALPACA_ANNOTATIONS:
                continue
            blob = meta.split()[2]
            if subprocess.run([*git, "cat-file", "-e", blob], capture_output=True, check=False).returncode:
                continue                                                    # not in this mirror
            out.append((parts[1], subprocess.run([*git, "cat-file", "blob", blob], capture_output=True,
                                                 check=True).stdout))
            if len(out) == nmodels:
                break
        return out
    root = Path(source)
    root = root / "results" if (root / "results").is_dir() else root
    for d in sorted(p for p in root.iterdir() if (p / ALPACA_ANNOTATIONS).is_file())[:nmodels]:
        out.append((d.name, (d / ALPACA_ANNOTATIONS).read_bytes()))
    return out


def make_alpacaeval(source: str, nmodels: int = 60) -> pd.DataFrame:
    """The long table of :func:`alpacaeval_files`: model (``generator_2``), item (``i000``.., the instruction's
    number in the order first met, models by name), dataset, score = preference - 1 (AlpacaEval's
    ``preference`` is 1 for the reference's output, 2 for the model's, weighted by the judge's
    probabilities; AlpacaEval 2.0's win rate is 100 x the mean of score); rows model by model, as the files."""
    ids: dict[str, int] = {}
    rows = []
    for _, text in alpacaeval_files(source, nmodels):
        for r in json.loads(text):
            i = ids.setdefault(r["instruction"], len(ids))
            rows.append((r["generator_2"], f"i{i:03d}", r["dataset"], float(r["preference"]) - 1.0))
    return pd.DataFrame(rows, columns=["model", "item", "dataset", "score"])


MAKERS = {"ri20k": make_ri20k, "slope70k": make_slope70k, "crossed347k": make_crossed347k,
          "verbagg": make_verbagg, "missing70k": make_missing, "slopemiss70k": make_missing,
          "singular70k": lambda: make_missing(slope_sd=0.0),
          "boundary70k": lambda: make_missing(seed=286, slope_of_intercept=0.5)}


# ----------------------------------------------------------------------------- runs


def run_mrcstats(csv: str, formula: str, repeat: int, command: str = "glmer") -> dict:
    walls, cpus, fits, obj = [], [], [], None
    argv = [sys.executable, "-m", "mrcstats", command, csv, "--formula", formula, "--json"]
    env = dict(os.environ)
    # bytecode is cached as an installed package has it (pip compiles it at install); one untimed run writes
    # the cache of a checkout that has changed (PYTHONDONTWRITEBYTECODE would recompile every run)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
    for _ in range(repeat):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        out = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
        walls.append(time.perf_counter() - t)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
        if out.returncode != 0:
            return {"error": out.stderr.strip()[-400:]}
        obj = json.loads(out.stdout)
        fits.append(float(obj["fit_seconds"]))
    return {"wall": statistics.median(walls), "walls": walls, "cpu": statistics.median(cpus),
            "fit": statistics.median(fits), "fits": fits, "json": obj}


def run_r(csv: str, formula: str, which: list[str], reps: int, timeout: float) -> dict:
    rscript = shutil.which("Rscript")
    if not rscript or not which:
        return {}
    with tempfile.NamedTemporaryFile("w", suffix=".R", delete=False) as fh:
        fh.write(R_SCRIPT)
    try:
        out = subprocess.run([rscript, fh.name, csv, formula, ",".join(which), str(reps)], capture_output=True,
                             text=True, check=False, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {w: {"error": f"timeout {timeout:g}s"} for w in which}
    finally:
        os.unlink(fh.name)
    if out.returncode != 0:
        return {w: {"error": out.stderr.strip()[-300:]} for w in which}
    res = json.loads(out.stdout.strip().splitlines()[-1])
    for r in res.values():
        r["median"] = statistics.median(r["seconds"])
        r["cpu_median"] = statistics.median(r["cpu"])
    return res


def fit_cpu(csv: str, formula: str, repeat: int) -> dict:
    """``mrcstats.glmer(formula, data)`` in this process: CPU seconds (``time.process_time``) and
    ``fit_seconds`` of each of ``repeat`` fits, data read once (the engine alone, robust to a loaded machine;
    run with ``PYTHONPATH`` at another checkout for its before/after)."""
    from mrcstats.io import read_data
    from mrcstats.models import glmer

    df = read_data(csv)
    cpus, walls, m = [], [], None
    for _ in range(repeat):
        c = time.process_time()
        m = glmer(formula, df)
        cpus.append(time.process_time() - c)
        walls.append(m.fit_seconds)
    return {"cpu": statistics.median(cpus), "cpus": cpus, "fit": statistics.median(walls),
            "nfev": _evals({"optinfo": m.optinfo, "singular": m.singular}), "loglik": m.loglik}


def _evals(obj: dict) -> str:
    """Whether the fit is singular, and its deviance evaluations when the result has them (in-process fits:
    on all rows, and on the subsample start)."""
    oi = obj.get("optinfo") or {}
    start = (oi.get("start") or {}).get("nfev")
    ev = "" if "nfev" not in oi else f"{oi['nfev']} deviance evaluations" + (
        f" (+{start} on the subsample start)" if start else "") + ", "
    return f"{ev}singular {obj.get('singular')}"


def _fixef_diff(r: dict, mine: dict, relative: bool = False) -> str:
    """The largest |R − mrcstats| over the fixed effects (or other named figures) both report (names as R writes
    them); ``relative``: divided by max(1, |R|)."""
    both = [k for k in r if k in mine]
    if not both:
        return "not compared"

    def d(k):
        return abs(r[k] - float(mine[k])) / (max(1.0, abs(r[k])) if relative else 1.0)

    k = max(both, key=d)
    return f"largest {'relative ' if relative else ''}difference {d(k):.1e} ({k})"


def numbers(obj: dict) -> dict[str, float]:
    """The figures speed must not change: logLik, θ, fixed effects and their SEs."""
    out = {"loglik": float(obj["loglik"])}
    for key in ("theta", "fixef", "se"):
        for k, v in (obj.get(key) or {}).items():
            out[f"{key}:{k}"] = float(v)
    return out


def check(name: str, obj: dict, saved_dir: str, tol: float) -> str:
    """Estimates, θ and logLik against a saved run (difference relative to max(1, |value|), must be within
    ``tol``), and the largest relative difference of the SEs (reported: they come from a finite-difference
    Hessian taken where the optimiser stopped, within about 1e-4 of the optimum, so they move with its path
    at the 1e-8..1e-6 level)."""
    path = os.path.join(saved_dir, f"{name}.json")
    if not os.path.exists(path):
        return "no saved run"
    with open(path) as fh:
        old = numbers(json.load(fh))
    new = numbers(obj)
    if old.keys() != new.keys():
        return f"MISMATCH: {sorted(old.keys() ^ new.keys())} on one side only"
    worst, where, se = 0.0, "-", 0.0
    for k in old:
        if k.startswith("se:"):
            se = max(se, abs(new[k] - old[k]) / abs(old[k]) if old[k] else abs(new[k]))
            continue
        d = abs(new[k] - old[k]) / max(1.0, abs(old[k]))
        if d > worst:
            worst, where = d, k
    return (f"estimates, θ, logLik {'same' if worst <= tol else 'DIFFERENT'} (largest relative difference "
            f"{worst:.1e} at {where}); SEs: largest relative difference {se:.1e}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=None,
                    help=f"comma list of {', '.join(CASES)} (default: all but mmlupro, and mmlupro with --mmlupro)")
    ap.add_argument("--mmlupro", help="the MMLU-Pro log: a CSV (model, item, pred, gold) or the folder of "
                                      "eval_results JSON; the mmlupro case is skipped without it")
    ap.add_argument("--alpacaeval", help="AlpacaEval: the bare git dir of tatsu-lab/alpaca_eval or a folder with "
                                         "results/<model>/weighted_alpaca_eval_gpt4_turbo/annotations.json; the "
                                         "alpacaeval case is skipped without it")
    ap.add_argument("--alpacaeval-models", type=int, default=60,
                    help="how many models (the first by name whose file is there; default 60)")
    ap.add_argument("--repeat", type=int, default=3, help="mrcstats processes per case (median)")
    ap.add_argument("--r-repeat", type=int, default=3, help="R fits per anchor (median)")
    ap.add_argument("--quick", action="store_true", help="only each case's target anchor, fitted once")
    ap.add_argument("--targets", action="store_true",
                    help="only each case's target anchor, --r-repeat fits (median): the issue's ratios, faster")
    ap.add_argument("--no-r", action="store_true", help="no R anchors")
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "mrcstats-bench-user-path"),
                    help="where the CSV files are written (kept between runs)")
    ap.add_argument("--save", help="write each case's mrcstats JSON here")
    ap.add_argument("--check", help="compare the numbers with the JSON files saved there")
    ap.add_argument("--tol", type=float, default=1e-8)
    ap.add_argument("--engine-only", action="store_true",
                    help="only the in-process fit CPU of --fit-cpu (no CLI processes, no R)")
    ap.add_argument("--fit-cpu", action="store_true",
                    help="also time mrcstats.glmer() in this process (CPU seconds of the fit alone, median)")
    ap.add_argument("--converged", action="store_true",
                    help="also lme4 run to convergence (tolPwrss 1e-10, bobyqa in both stages with rhoend 1e-9: "
                         "the default's Nelder-Mead stage stops short, 8e-3 in logLik on missing70k): the "
                         "agreement check, fixef and logLik within 1e-4")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per Rscript process")
    args = ap.parse_args(argv)
    if args.cases is None:
        names = DEFAULT_CASES + (["mmlupro"] if args.mmlupro else []) + (["alpacaeval"] if args.alpacaeval else [])
    else:
        names = [c.strip() for c in args.cases.split(",") if c.strip()]
    bad = [c for c in names if c not in CASES]
    if bad:
        ap.error(f"unknown case(s) {bad}; choose from {list(CASES)}")
    os.makedirs(args.dir, exist_ok=True)
    if args.save:
        os.makedirs(args.save, exist_ok=True)
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {os.cpu_count()} cores; python {sys.executable}",
          flush=True)
    summary = []
    for name in names:
        spec = CASES[name]
        csv = os.path.join(args.dir, f"{name}.csv")
        if name == "mmlupro":
            if not args.mmlupro or not os.path.exists(args.mmlupro):
                print("mmlupro: skipped (no --mmlupro CSV or folder given)", flush=True)
                continue
            make_mmlupro(args.mmlupro).to_csv(csv, index=False)
        elif name == "alpacaeval":
            if not args.alpacaeval or not os.path.exists(args.alpacaeval):
                print("alpacaeval: skipped (no --alpacaeval git dir or folder given)", flush=True)
                continue
            make_alpacaeval(args.alpacaeval, args.alpacaeval_models).to_csv(csv, index=False)
        elif not os.path.exists(csv):
            MAKERS[name]().to_csv(csv, index=False)
        with open(csv) as fh:
            nrows = sum(1 for _ in fh) - 1
        if args.engine_only:
            fc = fit_cpu(csv, spec["formula"], args.repeat)
            print(f"{name:12s} {nrows:>8,d} rows  mrcstats.glmer() in-process: fit CPU {fc['cpu']:.3f}s (runs "
                  f"{', '.join(f'{t:.3f}' for t in fc['cpus'])}), fit_seconds {fc['fit']:.3f}s, "
                  f"{fc['nfev']}, logLik {fc['loglik']:.10f}", flush=True)
            continue
        command = spec.get("command", "glmer")
        m = run_mrcstats(csv, spec["formula"], args.repeat, command)
        if "error" in m:
            print(f"{name}: mrcstats failed: {m['error']}", flush=True)
            continue
        obj = m["json"]
        print(f"{name:12s} {nrows:>8,d} rows  {spec['formula']}\n"
              f"  mrcstats {command} --json: wall {m['wall']:.3f}s (runs {', '.join(f'{t:.3f}' for t in m['walls'])}), "
              f"process CPU {m['cpu']:.3f}s, fit_seconds {m['fit']:.3f}s (runs "
              f"{', '.join(f'{t:.3f}' for t in m['fits'])}), logLik {obj['loglik']:.10f}, {_evals(obj)}", flush=True)
        if args.fit_cpu and command == "glmer":
            fc = fit_cpu(csv, spec["formula"], args.repeat)
            print(f"  mrcstats.glmer() in-process: fit CPU {fc['cpu']:.3f}s (runs "
                  f"{', '.join(f'{t:.3f}' for t in fc['cpus'])}), fit_seconds {fc['fit']:.3f}s, "
                  f"{fc['nfev']}", flush=True)
        if args.save:
            with open(os.path.join(args.save, f"{name}.json"), "w") as fh:
                json.dump(obj, fh)
        if args.check:
            print(f"  numbers vs {args.check}: {check(name, obj, args.check, args.tol)}", flush=True)
        kind, want = spec["target"]
        if args.no_r:
            which = []
        elif command == "lmer":
            which = [kind] if args.quick or args.targets else LMER_ANCHORS
        elif args.quick or args.targets:
            which = ([kind] if kind != "fit_seconds" else []) + (["lme4tight"] if args.converged else [])
        else:
            which = ["glmmTMB", "lme4"] + (["lme4tight"] if args.converged else [])
        r = run_r(csv, spec["formula"], which, 1 if args.quick else args.r_repeat, args.timeout)
        for w, res in r.items():
            if "error" in res:
                print(f"  {w}: {res['error']}", flush=True)
                continue
            print(f"  {w:8s} fit {res['median']:.3f}s (runs {', '.join(f'{t:.3f}' for t in res['seconds'])}; "
                  f"CPU {res['cpu_median']:.3f}s): {res['median'] / m['wall']:.1f}x mrcstats wall, "
                  f"{res['median'] / m['fit']:.1f}x fit_seconds, CPU {res['cpu_median'] / m['cpu']:.1f}x mrcstats "
                  f"process CPU; logLik {res['loglik']:.6f} ({res['loglik'] - obj['loglik']:+.2e}), fixef "
                  f"{_fixef_diff(res.get('fixef', {}), obj.get('fixef') or {})}; {res.get('evals')} evaluations"
                  + ("" if res.get("singular") is None else f", singular {res['singular']}")
                  + (f"; Satterthwaite df {_fixef_diff(res['df'], obj.get('df') or {}, relative=True)}"
                     if res.get("df") else ""), flush=True)
        if kind == "fit_seconds":
            ok = m["fit"] <= want
            summary.append(f"{name:12s} fit_seconds {m['fit']:.3f}s   target <= {want:g}s   "
                           f"{'met' if ok else 'NOT met'}")
        elif kind in r and "median" in r[kind]:
            ratio = r[kind]["median"] / m["wall"]
            summary.append(f"{name:12s} {kind} / mrcstats wall = {ratio:.1f}x   target >= {want:g}x   "
                           f"{'met' if ratio >= want else 'NOT met'}  (fit_seconds ratio "
                           f"{r[kind]['median'] / m['fit']:.0f}x; CPU ratio {r[kind]['cpu_median'] / m['cpu']:.1f}x)")
        else:
            summary.append(f"{name:12s} wall {m['wall']:.3f}s, fit {m['fit']:.3f}s (no {kind} anchor run)")
    print("\nTargets (issues 28 and 41):")
    for line in summary:
        print("  " + line)
    load = os.getloadavg()
    print(f"load average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
