"""Leaderboard scale: logs larger than memory on DuckDB, out-of-core GLMMs, the Dask overhead.

Every step runs as its own process under ``/usr/bin/time -v`` (wall clock and peak RSS), with the
load average noted beside it (the machine is shared: timings are noisy). Steps:

1. ``mrcstats demo --models M --items N --out WORK/gen`` — the leaderboard log with known truth
   (M x N rows, one trial; not part of the targets);
2. ``mrcstats ingest WORK/gen --dataset WORK/ds`` — streamed, validated, atomic;
3. ``mrcstats summary WORK/ds --by model --json`` — accuracy, Wilson CI, cluster-robust SE in DuckDB;
   target: steps 2 + 3 < 3 min at < 4 GB peak RSS;
4. equality on a slice of ``--slice-models`` models (hard links to their partitions): ``summarize``
   of the lazy dataset vs ``summarize(read_log(slice))`` in memory — max relative difference;
   and the anchor of step 2: the same slice of the generated log ingested by the DuckDB fast path and
   by the pandas path (``write_dataset(..., fast=False)``), each timed, the ratio printed, the two
   datasets compared (metadata, partitions, summaries);
5. the crossed GLMM ``correct ~ 1 + (1 | item) + (1 | model)`` on the slice: out of core
   (DuckDB collapse, own process) vs ``mrcstats.glmer`` on the rows in memory (own process):
   time, peak RSS and max |difference| of the estimates;
   with ``--glmm-full`` also on the whole dataset (under ``ulimit -v`` = ``--glmm-mem`` GB);
6. the Dask engine on a 2-worker ``LocalCluster`` (worker processes) vs the DuckDB engine and the
   in-memory fit on a ``--dask-models``-model slice: the overhead ratio.

Usage: python benchmarks/bench_scale.py [--models 5000] [--items 20000] [--slice-models 500]
       [--dask-models 50] [--work DIR] [--gen DIR] [--keep] [--glmm-full] [--skip-glmm]
The generated data is deleted at the end unless ``--keep``.
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

PY = sys.executable
CROSSED = "correct ~ 1 + (1 | item) + (1 | model)"


def timed(cmd: list[str], *, stdout=None, mem_gb: float | None = None, label: str = "") -> dict:
    """Run ``cmd`` under /usr/bin/time -v; wall seconds, peak RSS (GB), exit code, load before/after."""
    if not Path("/usr/bin/time").exists():
        sys.exit("needs /usr/bin/time (Debian package 'time')")
    full = ["/usr/bin/time", "-v", *cmd]
    if mem_gb:
        full = ["bash", "-c", f"ulimit -v {int(mem_gb * 1024 * 1024)}; exec " + " ".join(_q(c) for c in full)]
    load0 = os.getloadavg()[0]
    t = time.perf_counter()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    # byte-code cache outside the tree: without it every process recompiles numpy/scipy/pandas (~10 s loaded)
    env["PYTHONPYCACHEPREFIX"] = env.get("PYTHONPYCACHEPREFIX", str(Path(tempfile.gettempdir()) / "bench_pycache"))
    env["OMP_NUM_THREADS"] = os.environ.get("OMP_NUM_THREADS", "1")
    r = subprocess.run(full, stdout=stdout or subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                       check=False)
    wall = time.perf_counter() - t
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr)
    rss = int(m.group(1)) / 1024 / 1024 if m else float("nan")
    out = {"step": label, "seconds": round(wall, 2), "peak_rss_gb": round(rss, 3), "rc": r.returncode,
           "load_before": round(load0, 2), "load_after": round(os.getloadavg()[0], 2)}
    if r.returncode != 0:
        out["error"] = [ln for ln in r.stderr.splitlines() if "mrcstats" in ln or "Error" in ln][-3:]
    print(json.dumps(out), flush=True)
    out["stdout"] = r.stdout if stdout is None else None
    return out


def _q(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"


def make_slice(ds: Path, out: Path, n_models: int) -> Path:
    """A dataset of the first ``n_models`` model partitions (hard links: no copy)."""
    out.mkdir(parents=True, exist_ok=True)
    parts = sorted(p for p in ds.iterdir() if p.name.startswith("model="))[:n_models]
    for p in parts:
        d = out / p.name
        d.mkdir(exist_ok=True)
        for f in p.iterdir():
            try:
                os.link(f, d / f.name)
            except OSError:   # another file system
                shutil.copyfile(f, d / f.name)
    return out


SUMMARY_EQ = """
import json, sys, numpy as np
from mrcstats.io import read_log
from mrcstats.io.dataset import open_dataset
from mrcstats.stats.accuracy import summarize
a = summarize(open_dataset(sys.argv[1]), by="model").to_frame()
b = summarize(read_log(sys.argv[1]), by="model").to_frame()
assert list(a["model"]) == list(b["model"])
cols = ["n", "correct", "accuracy", "accuracy_valid", "invalid", "ci_low", "ci_high", "se_cluster", "clusters"]
rel = max(float(np.nanmax(np.abs(a[c].to_numpy(float) - b[c].to_numpy(float)) / np.abs(b[c].to_numpy(float))))
          for c in cols)
print(json.dumps({"models": len(a), "rows": int(a["n"].sum()), "max_rel_diff": rel}))
"""

INGEST = """
import sys
from mrcstats.io.ingest import write_dataset
write_dataset(sys.argv[1], sys.argv[2], fast=sys.argv[3] == "fast")
"""

SAME_DATASETS = """
import json, sys, numpy as np
from mrcstats.io.dataset import open_dataset
from mrcstats.stats.accuracy import summarize
a, b = (open_dataset(p) for p in sys.argv[1:3])
sa, sb = (summarize(d, by="model").to_frame() for d in (a, b))
num = [c for c in sa.columns if c != "model"]
rel = float(np.nanmax(np.abs(sa[num].to_numpy(float) - sb[num].to_numpy(float))
                      / np.maximum(np.abs(sb[num].to_numpy(float)), 1e-300)))
ma, mb = (json.loads((d.path / "_mrcstats.json").read_text()) for d in (a, b))
same_meta = {k: v for k, v in ma.items() if k != "sources"} == {k: v for k, v in mb.items() if k != "sources"}
print(json.dumps({"rows": len(a), "same_rows": len(a) == len(b), "same_meta": same_meta,
                  "same_partitions": sorted(p.name for p in a.path.iterdir()) == sorted(p.name for p in b.path.iterdir()),
                  "summary_max_rel_diff": rel}))
"""

GLMM_OOC = """
import json, sys
from mrcstats.models.outofcore import glmer_outofcore
m = glmer_outofcore(sys.argv[2], sys.argv[1], engine=sys.argv[3] if len(sys.argv) > 3 else None)
print(json.dumps({"fixef": m.fixef.to_dict(), "theta": m.theta.tolist(), "se": m.se.tolist(), "loglik": m.loglik,
                  "nobs": m.nobs, "engine": m.engine, "fit_seconds": m.fit_seconds,
                  "nfev": m.optinfo.get("nfev"), "pirls_iters": m.optinfo.get("pirls_iters"),
                  "collapse": {k: v for k, v in m.optinfo["collapse"].items()}}))
"""

GLMM_MEM = """
import json, sys
import mrcstats
from mrcstats.io import read_log
log = read_log(sys.argv[1])
m = mrcstats.glmer(sys.argv[2], log)
print(json.dumps({"fixef": m.fixef.to_dict(), "theta": m.theta.tolist(), "se": m.se.tolist(), "loglik": m.loglik,
                  "nobs": m.nobs}))
"""

GLMM_DASK = """
import json, sys, time
from distributed import Client, LocalCluster
from mrcstats.models.outofcore import glmer_outofcore
if __name__ == "__main__":
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cl, \\
            Client(cl) as c:
        t = time.perf_counter()
        m = glmer_outofcore(sys.argv[2], sys.argv[1], engine="dask", scheduler=c)
        print(json.dumps({"fixef": m.fixef.to_dict(), "theta": m.theta.tolist(), "se": m.se.tolist(),
                          "loglik": m.loglik, "nobs": m.nobs, "fit_seconds_inside_cluster": time.perf_counter() - t}))
"""


def _last_json(text: str | None) -> dict:
    """The last line of a step's stdout that is a JSON object (libraries may print before it)."""
    for line in reversed((text or "").strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    return {"error": "no JSON result", "stdout_tail": (text or "")[-300:]}


def _py(code: str, *args: str) -> list[str]:
    return [PY, "-c", code, *args]


def _diff(a: dict, b: dict) -> float:
    d = [abs(a["fixef"][k] - b["fixef"][k]) for k in a["fixef"]]
    d += [abs(x - y) for x, y in zip(a["theta"], b["theta"])]
    return max(d)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=5000)
    ap.add_argument("--items", type=int, default=20000)
    ap.add_argument("--slice-models", type=int, default=500, help="models in the equality slice (500 = 10M rows)")
    ap.add_argument("--dask-models", type=int, default=50, help="models in the Dask slice (50 = 1M rows)")
    ap.add_argument("--jobs", type=int, default=2, help="ingest processes (2)")
    ap.add_argument("--work", default=None, help="work folder (default: a temporary folder)")
    ap.add_argument("--gen", default=None, help="ingest this existing generated dataset (mrcstats demo --out DIR) "
                    "instead of generating one (--models/--items then unused; never deleted)")
    ap.add_argument("--keep", action="store_true", help="keep the generated data")
    ap.add_argument("--skip-glmm", action="store_true")
    ap.add_argument("--glmm-full", action="store_true", help="also fit the crossed GLMM on the whole dataset")
    ap.add_argument("--glmm-mem", type=float, default=0.0,
                    help="address-space limit (GB, ulimit -v) of the full GLMM; 0 = none (the target is on peak RSS)")
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="bench_scale_"))
    work.mkdir(parents=True, exist_ok=True)
    mrc = [PY, "-m", "mrcstats"]
    results: dict = {"rows": args.models * args.items, "cpus": os.cpu_count()}
    try:
        gen_dir = Path(args.gen) if args.gen else work / "gen"
        if args.gen:
            gen = {"step": "generate", "skipped": f"--gen {args.gen}"}
            results["rows"] = json.loads((gen_dir / "_mrcstats.json").read_text())["rows"]
        else:
            gen = timed([*mrc, "demo", "--models", str(args.models), "--items", str(args.items), "--out",
                         str(gen_dir), "--json"], label="generate")
        ing = timed([*mrc, "ingest", str(gen_dir), "--dataset", str(work / "ds"), "--jobs", str(args.jobs),
                     "--json"],
                    stdout=subprocess.DEVNULL, label="ingest --dataset")
        summ = timed([*mrc, "summary", str(work / "ds"), "--by", "model", "--json"], label="summary --by model")
        results.update(generate=gen, ingest=ing, summary=summ)
        total = ing["seconds"] + summ["seconds"]
        peak = max(ing["peak_rss_gb"], summ["peak_rss_gb"])
        results["ingest_plus_summary"] = {"seconds": total, "peak_rss_gb": peak,
                                          "target": "< 180 s, < 4 GB", "met": total < 180 and peak < 4}
        print(json.dumps({"ingest_plus_summary": results["ingest_plus_summary"]}), flush=True)
        sl = make_slice(work / "ds", work / "slice", args.slice_models)
        eq = timed(_py(SUMMARY_EQ, str(sl)), label=f"summary equality on {args.slice_models} models")
        results["summary_equality"] = _last_json(eq["stdout"]) if eq["rc"] == 0 else eq
        print(json.dumps({"summary_equality": results["summary_equality"]}), flush=True)
        # the anchor of the ingest: the pandas path (write_dataset(fast=False)) on the same slice of the
        # generated log, against the DuckDB fast path; the two datasets must be the same
        gsl = make_slice(gen_dir, work / "gen_slice", args.slice_models)
        fi = timed(_py(INGEST, str(gsl), str(work / "ds_fast"), "fast"), label="ingest slice, DuckDB fast path")
        pi = timed(_py(INGEST, str(gsl), str(work / "ds_pandas"), "pandas"),
                   label="ingest slice, pandas path (anchor)")
        same = timed(_py(SAME_DATASETS, str(work / "ds_fast"), str(work / "ds_pandas")),
                     label="fast vs pandas dataset")
        results["ingest_fast_vs_pandas"] = {
            "fast": fi, "pandas": pi, "ratio_pandas_over_fast": round(pi["seconds"] / fi["seconds"], 2),
            "same": _last_json(same["stdout"]) if same["rc"] == 0 else same}
        print(json.dumps({"ingest_fast_vs_pandas": {k: v for k, v in results["ingest_fast_vs_pandas"].items()
                                                    if k in ("ratio_pandas_over_fast", "same")}}), flush=True)
        if not args.skip_glmm:
            ooc = timed(_py(GLMM_OOC, str(sl), CROSSED), label="crossed GLMM out of core (slice)")
            mem = timed(_py(GLMM_MEM, str(sl), CROSSED), label="crossed GLMM in memory (slice)")
            res = {"out_of_core": ooc, "in_memory": mem}
            if ooc["rc"] == 0 and mem["rc"] == 0:
                a, b = _last_json(ooc["stdout"]), _last_json(mem["stdout"])
                res["max_abs_diff_fixef_theta"] = _diff(a, b)
                res["target"] = "max |diff| < 1e-6"
                res["met"] = res["max_abs_diff_fixef_theta"] < 1e-6
                res["fit"] = a
            results["glmm_slice"] = res
            print(json.dumps({"glmm_slice_max_abs_diff": res.get("max_abs_diff_fixef_theta")}), flush=True)
            dsl = make_slice(work / "ds", work / "dslice", args.dask_models)
            dk = timed(_py(GLMM_DASK, str(dsl), CROSSED), label="crossed GLMM dask 2 workers (dask slice)")
            dd = timed(_py(GLMM_OOC, str(dsl), CROSSED, "duckdb"), label="crossed GLMM duckdb (dask slice)")
            dm = timed(_py(GLMM_MEM, str(dsl), CROSSED), label="crossed GLMM in memory (dask slice)")
            r = {"dask": dk, "duckdb": dd, "in_memory": dm}
            if dk["rc"] == 0 and dm["rc"] == 0:
                a, b = _last_json(dk["stdout"]), _last_json(dm["stdout"])
                r["max_abs_diff_dask_vs_memory"] = _diff(a, b)
                r["ratio_dask_over_memory"] = dk["seconds"] / dm["seconds"]
                r["ratio_dask_over_duckdb"] = dk["seconds"] / dd["seconds"]
                # without the cluster's start-up (process spawn): the fit inside the running cluster
                r["ratio_dask_fit_over_memory"] = a["fit_seconds_inside_cluster"] / dm["seconds"]
            results["dask"] = r
            print(json.dumps({k: v for k, v in r.items() if not isinstance(v, dict)}), flush=True)
            if args.glmm_full:
                full = timed(_py(GLMM_OOC, str(work / "ds"), CROSSED), mem_gb=args.glmm_mem or None,
                             label="crossed GLMM out of core (full)")
                full["fit"] = _last_json(full["stdout"]) if full["rc"] == 0 else None
                full["target"] = "< 1200 s, < 8 GB peak RSS"
                full["met"] = full["rc"] == 0 and full["seconds"] < 1200 and full["peak_rss_gb"] < 8
                results["glmm_full"] = full
                print(json.dumps({"glmm_full": {k: v for k, v in full.items() if k != "stdout"}}), flush=True)
        for v in results.values():
            if isinstance(v, dict):
                v.pop("stdout", None)
                for w in v.values():
                    if isinstance(w, dict):
                        w.pop("stdout", None)
        print("RESULT " + json.dumps(results))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
