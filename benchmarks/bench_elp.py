"""An ELP-sized crossed Bernoulli GLMM (issue 41): mrcstats in memory and out of core, lme4/glmmTMB on a slice.

The English Lexicon Project's lexical-decision log (Balota et al. 2007) has ~80,000 items (half words, half
non-words) x ~800 subjects, each subject seeing ~3,400 items: ~2.7M trials. MixedModels.jl's documentation fits
``acc ~ 1 + isword * wrdlen + (1 | item) + (1 | subj)`` (Bernoulli, logit) to it and gives "ten to fifteen
minutes on a recent laptop". This benchmark generates a log of that shape (seeded; ``isword`` 0/1 and
``wrdlen`` (3..14 letters) item-level covariates; item and subject random intercepts with known SDs) and
fits the same formula with:

1. ``mrcstats.glmer`` on the rows in memory (a pandas frame; own process under ``/usr/bin/time -v``);
2. ``glmer_outofcore`` on a dataset folder written by ``mrcstats.io.ingest.write_dataset`` (the Python API
   of ``mrcstats ingest --dataset``), streamed by DuckDB (own process);
3. on a ``--slice`` fraction of the subjects (10% = 80 subjects, ~272k rows, all items they saw):
   mrcstats (Laplace; ``--nagq0`` also tries nAGQ = 0, which the native engine has for one ``(1 | g)``
   term only, so it fails on this formula and lme4's nAGQ = 0 is set against the Laplace fit), lme4 ``glmer`` (nAGQ = 0 and 1) and ``glmmTMB`` in one Rscript process
   (``system.time`` of the fit, data read before timing); the ratio is R seconds / mrcstats seconds.

It prints one JSON line per step (wall seconds, peak RSS, load average) and a table of the estimates side by
side (fixef, item/subject SDs, logLik). The generated data is deleted unless ``--keep``.

Usage::

    PYTHONPATH=src python benchmarks/bench_elp.py --items 4000 --subjects 100 --per-subject 400   # quick
    PYTHONPATH=src python benchmarks/bench_elp.py                                                  # ELP size
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

PY = sys.executable
FORMULA = "acc ~ 1 + isword * wrdlen + (1 | item) + (1 | subj)"
TRUE = {"(Intercept)": 1.6, "isword": 0.5, "wrdlen": -0.05, "isword:wrdlen": 0.08, "sd_item": 1.0, "sd_subj": 0.6}


def make_elp(items: int, subjects: int, per_subject: int, seed: int = 41) -> pd.DataFrame:
    """The ELP's shape: every subject sees ``per_subject`` distinct items drawn at random (half words).

    Columns: ``model`` (= the subject, the canonical log's model column), ``item``, ``correct`` (= acc), and
    the formula's names ``subj``, ``acc``, ``isword`` (0/1), ``wrdlen`` (letters, centred at 8).
    """
    rng = np.random.default_rng(seed)
    isword = (np.arange(items) % 2 == 0).astype(np.int8)
    wrdlen = rng.integers(3, 15, items).astype(np.float64) - 8.0
    b_item = rng.normal(0.0, TRUE["sd_item"], items)
    b_subj = rng.normal(0.0, TRUE["sd_subj"], subjects)
    per = min(per_subject, items)
    # per subject a random subset of items without replacement (argpartition of uniforms, chunked)
    item_idx = np.empty(subjects * per, np.int32)
    for s in range(subjects):
        item_idx[s * per:(s + 1) * per] = rng.choice(items, per, replace=False)
    subj_idx = np.repeat(np.arange(subjects, dtype=np.int32), per)
    w, L = isword[item_idx], wrdlen[item_idx]
    eta = (TRUE["(Intercept)"] + TRUE["isword"] * w + TRUE["wrdlen"] * L + TRUE["isword:wrdlen"] * w * L
           + b_item[item_idx] + b_subj[subj_idx])
    acc = (rng.random(eta.shape) < 1.0 / (1.0 + np.exp(-eta))).astype(np.int8)
    subj_lab = np.array([f"s{i:04d}" for i in range(subjects)])
    item_lab = np.array([f"i{i:06d}" for i in range(items)])
    subj = pd.Categorical.from_codes(subj_idx, subj_lab)
    return pd.DataFrame({"model": subj, "item": pd.Categorical.from_codes(item_idx, item_lab), "correct": acc,
                         "subj": subj, "acc": acc, "isword": w, "wrdlen": L})


GEN = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from bench_elp import make_elp
t = time.perf_counter()
df = make_elp(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
for c in ("model", "item", "subj"):
    df[c] = df[c].astype(str)
df.to_parquet(sys.argv[5] + "/elp.parquet", index=False)
subs = sorted(df["subj"].unique())[: max(1, round(float(sys.argv[6]) * df["subj"].nunique()))]
sl = df[df["subj"].isin(set(subs))]
sl.to_parquet(sys.argv[5] + "/slice.parquet", index=False)
sl[["subj", "item", "acc", "isword", "wrdlen"]].to_csv(sys.argv[5] + "/slice.csv", index=False)
print(json.dumps({"rows": len(df), "items": int(df["item"].nunique()), "subjects": int(df["subj"].nunique()),
                  "slice_rows": len(sl), "slice_subjects": len(subs), "slice_items": int(sl["item"].nunique()),
                  "mean_acc": float(df["acc"].mean()), "seconds": time.perf_counter() - t}))
"""

INGEST = """
import json, sys, time
from mrcstats.io.ingest import write_dataset
t = time.perf_counter()
ds = write_dataset(sys.argv[1], sys.argv[2])
print(json.dumps({"rows": len(ds), "seconds": time.perf_counter() - t}))
"""

FIT_MEM = """
import json, sys, time
import pandas as pd
import mrcstats
t = time.perf_counter()
df = pd.read_parquet(sys.argv[1], columns=["subj", "item", "acc", "isword", "wrdlen"])
t1 = time.perf_counter()
m = mrcstats.glmer(sys.argv[2], df, nagq=int(sys.argv[3]))
t2 = time.perf_counter()
vc = m.varcorr
sd = {r["group"]: float(r["sd"]) for _, r in vc.iterrows()}
print(json.dumps({"fixef": m.fixef.to_dict(), "sd": sd, "loglik": m.loglik, "nobs": m.nobs,
                  "read_seconds": t1 - t, "fit_seconds": t2 - t1, "engine": m.engine}))
"""

FIT_OOC = """
import json, sys, time
from mrcstats.models.outofcore import glmer_outofcore
t = time.perf_counter()
m = glmer_outofcore(sys.argv[2], sys.argv[1])
vc = m.varcorr
sd = {r["group"]: float(r["sd"]) for _, r in vc.iterrows()}
print(json.dumps({"fixef": m.fixef.to_dict(), "sd": sd, "loglik": m.loglik, "nobs": m.nobs,
                  "fit_seconds": time.perf_counter() - t, "engine": m.engine,
                  "collapse": m.optinfo.get("collapse")}))
"""

R_SCRIPT = r"""
a <- commandArgs(TRUE)
df <- read.csv(a[1])
df$item <- factor(df$item); df$subj <- factor(df$subj)
f <- as.formula(a[2])
which <- strsplit(a[3], ",")[[1]]
out <- character(0)
for (w in which) {
  if (w %in% c("lme4_nagq0", "lme4_nagq1")) suppressMessages(library(lme4))
  if (w == "glmmTMB") suppressMessages(library(glmmTMB))
  st <- system.time(m <- switch(w,
    lme4_nagq0 = glmer(f, data = df, family = binomial, nAGQ = 0),
    lme4_nagq1 = glmer(f, data = df, family = binomial, nAGQ = 1),
    glmmTMB = glmmTMB(f, data = df, family = binomial)))
  if (w == "glmmTMB") {
    fe <- fixef(m)$cond
    vc <- VarCorr(m)$cond
    sds <- c(item = attr(vc$item, "stddev")[[1]], subj = attr(vc$subj, "stddev")[[1]])
  } else {
    fe <- fixef(m)
    vc <- VarCorr(m)
    sds <- c(item = attr(vc$item, "stddev")[[1]], subj = attr(vc$subj, "stddev")[[1]])
  }
  out <- c(out, sprintf('"%s": {"seconds": %.3f, "cpu": %.3f, "loglik": %.8f, "fixef": {%s}, "sd": {%s}}', w,
    st[["elapsed"]], st[["user.self"]] + st[["sys.self"]], as.numeric(logLik(m)),
    paste(sprintf('"%s": %.10g', names(fe), fe), collapse = ", "),
    paste(sprintf('"%s": %.10g', names(sds), sds), collapse = ", ")))
}
cat(paste0("{", paste(out, collapse = ", "), "}\n"))
"""


def timed(cmd: list[str], label: str, timeout: float | None = None) -> dict:
    """Run ``cmd`` under /usr/bin/time -v: wall seconds, peak RSS (GB), load average; its last JSON line."""
    full = ["/usr/bin/time", "-v", *cmd] if Path("/usr/bin/time").exists() else cmd
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = env.get("PYTHONPYCACHEPREFIX", str(Path(tempfile.gettempdir()) / "bench_pycache"))
    env["OMP_NUM_THREADS"] = os.environ.get("OMP_NUM_THREADS", "1")
    load0 = os.getloadavg()[0]
    t = time.perf_counter()
    try:
        r = subprocess.run(full, capture_output=True, text=True, env=env, check=False, timeout=timeout)
    except subprocess.TimeoutExpired:
        out = {"step": label, "error": f"timeout {timeout:g} s"}
        print(json.dumps(out), flush=True)
        return out
    wall = time.perf_counter() - t
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr)
    out = {"step": label, "seconds": round(wall, 2),
           "peak_rss_gb": round(int(m.group(1)) / 1024 ** 2, 3) if m else None,
           "load_before": round(load0, 2), "load_after": round(os.getloadavg()[0], 2), "rc": r.returncode}
    if r.returncode != 0:
        err = r.stderr.split("\tCommand being timed")[0].strip().splitlines()
        out["error"] = err[-2:]
    else:
        for line in reversed(r.stdout.strip().splitlines()):
            if line.startswith("{"):
                out["result"] = json.loads(line)
                break
    print(json.dumps(out), flush=True)
    return out


def _row(name: str, res: dict | None) -> list[str]:
    if not res:
        return [name] + ["-"] * 7
    fe, sd = res.get("fixef", {}), res.get("sd", {})
    keys = ["(Intercept)", "isword", "wrdlen", "isword:wrdlen"]
    return [name] + [f"{fe[k]:.5f}" if k in fe else "-" for k in keys] + \
        [f"{sd.get('item', float('nan')):.5f}", f"{sd.get('subj', float('nan')):.5f}",
         f"{res['loglik']:.3f}" if "loglik" in res else "-"]


def table(rows: list[list[str]]) -> str:
    head = ["fit", "(Intercept)", "isword", "wrdlen", "isword:wrdlen", "sd item", "sd subj", "logLik"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=80_000)
    ap.add_argument("--subjects", type=int, default=800)
    ap.add_argument("--per-subject", type=int, default=3_400)
    ap.add_argument("--slice", type=float, default=0.10, help="fraction of the subjects for the R anchors (0.10)")
    ap.add_argument("--r", default="lme4_nagq0,lme4_nagq1,glmmTMB",
                    help="R fits on the slice, comma-separated ('' = none)")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per step")
    ap.add_argument("--nagq0", action="store_true",
                    help="also mrcstats nAGQ=0 on the slice (natively one (1 | g) term only: fails on this formula)")
    ap.add_argument("--skip-memory", action="store_true", help="skip the full in-memory fit")
    ap.add_argument("--work", default=None)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="bench_elp_"))
    work.mkdir(parents=True, exist_ok=True)
    here = str(Path(__file__).resolve().parent)
    print(json.dumps({"formula": FORMULA, "items": args.items, "subjects": args.subjects,
                      "per_subject": args.per_subject, "slice": args.slice, "cpus": os.cpu_count(), "truth": TRUE}))
    try:
        gen = timed([PY, "-c", GEN, here, str(args.items), str(args.subjects), str(args.per_subject), str(work),
                     str(args.slice)], "generate")
        if gen.get("rc") != 0:
            sys.exit("generation failed")
        ing = timed([PY, "-c", INGEST, str(work / "elp.parquet"), str(work / "ds")], "ingest --dataset (write_dataset)")
        full = {}
        if not args.skip_memory:
            full["in memory"] = timed([PY, "-c", FIT_MEM, str(work / "elp.parquet"), FORMULA, "1"],
                                      "full: mrcstats.glmer in memory", args.timeout)
        if ing.get("rc") == 0:
            full["out of core"] = timed([PY, "-c", FIT_OOC, str(work / "ds"), FORMULA],
                                        "full: glmer_outofcore (DuckDB, dataset)", args.timeout)
        sl = {"mrcstats nAGQ=1": timed([PY, "-c", FIT_MEM, str(work / "slice.parquet"), FORMULA, "1"],
                                       "slice: mrcstats.glmer nAGQ=1", args.timeout)}
        if args.nagq0:
            sl["mrcstats nAGQ=0"] = timed([PY, "-c", FIT_MEM, str(work / "slice.parquet"), FORMULA, "0"],
                                          "slice: mrcstats.glmer nAGQ=0", args.timeout)
        r_res: dict = {}
        rscript = shutil.which("Rscript")
        if args.r and rscript:
            rf = work / "fit.R"
            rf.write_text(R_SCRIPT)
            for w in args.r.split(","):      # one Rscript per fit: a timeout loses only that fit
                rr = timed([rscript, str(rf), str(work / "slice.csv"), FORMULA, w], f"slice: R {w}", args.timeout)
                r_res.update(rr.get("result", {}))
        # the table
        rows = [_row("truth", {"fixef": TRUE, "sd": {"item": TRUE["sd_item"], "subj": TRUE["sd_subj"]}})]
        rows += [_row(f"full, mrcstats {k}", v.get("result")) for k, v in full.items()]
        rows += [_row(f"slice, {k}", v.get("result")) for k, v in sl.items()]
        rows += [_row(f"slice, {k}", v) for k, v in r_res.items()]
        print("\nEstimates (" + FORMULA + "):\n" + table(rows))
        times = ["| step | wall s | fit s | peak RSS GB |", "|---|---|---|---|"]
        for name, v in [("generate", gen), ("ingest --dataset", ing), *[(f"full, {k}", v) for k, v in full.items()],
                        *[(f"slice, {k}", v) for k, v in sl.items()]]:
            fit = (v.get("result") or {}).get("fit_seconds")
            times.append(f"| {name} | {v.get('seconds', v.get('error'))} | "
                         f"{'-' if fit is None else round(fit, 2)} | {v.get('peak_rss_gb')} |")
        for k, v in r_res.items():
            times.append(f"| slice, R {k} | - | {v['seconds']} | - |")
        print("\nTimes:\n" + "\n".join(times))
        base = {k: (v.get("result") or {}).get("fit_seconds") for k, v in sl.items()}
        ratios = {}
        for k, v in r_res.items():
            mk = "mrcstats nAGQ=0" if k == "lme4_nagq0" and base.get("mrcstats nAGQ=0") else "mrcstats nAGQ=1"
            if base.get(mk):
                ratios[f"{k} / {mk}"] = round(v["seconds"] / base[mk], 1)
        ll = {k: (v.get("result") or {}).get("loglik") for k, v in sl.items()}
        diffs = {}
        for k, v in r_res.items():
            mine = ll.get("mrcstats nAGQ=0" if k == "lme4_nagq0" else "mrcstats nAGQ=1")
            if mine is not None:    # nAGQ=0 against nAGQ=0 only (a different objective)
                diffs[f"logLik mrcstats - {k}"] = mine - v["loglik"]
        print("\nRatios (R fit seconds / mrcstats fit seconds, slice): " + json.dumps(ratios))
        print("logLik differences (slice): " + json.dumps(diffs))
        if len(full) == 2 and all("result" in v for v in full.values()):
            a, b = full["in memory"]["result"], full["out of core"]["result"]
            d = max([abs(a["fixef"][k] - b["fixef"][k]) for k in a["fixef"]]
                    + [abs(a["sd"][k] - b["sd"][k]) for k in a["sd"]] + [abs(a["loglik"] - b["loglik"])])
            print(f"full: max |in memory - out of core| over fixef, SDs, logLik = {d:.3g}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
