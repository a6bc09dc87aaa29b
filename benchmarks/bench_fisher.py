"""Time mrcstats' Fisher test against R's ``fisher.test`` on the same tables, same run.

Cases (fixed tables, plus seeded random ones):

* ``2x2``      seed 004 Table 13, [[11, 0], [8, 9]] (p, conditional MLE odds ratio and CI);
* ``3x4``      a 3 x 4 table with n = 62 (the size of seed 003's Table 4 / ELAGENT tables);
* ``2x9``      a 2 x 9 wh-word-like table with n = 894 (seed 003 Table 3 scale; R's default
               workspace overflows, so R is timed with ``workspace = 2e8``; mrcstats needs nothing);
* ``2x9-wh``   a 2 x 9 table with n = 800 and a dominant "Other" column, as in seed 003 Table 3;
* ``3x3``      a 3 x 3 table with n = 295 (large counts: R's bounds prune far better here);
* ``2x3``      a 2 x 3 table with n = 6,000;
* ``sim``      Monte Carlo p-value, B = 2000, on the 2 x 9 table (R ``simulate.p.value = TRUE``).

mrcstats: ``mrcstats.stats.contingency.fisher`` timed in-process (best of --repeat);
R: ``system.time(fisher.test(...))`` inside one Rscript (best of --repeat), so R's start-up
is not counted; calls faster than 50 ms are averaged over 100 calls on both sides. Times are
CPU seconds of the process (user + system: ``time.process_time`` / ``system.time``), which a
busy shared machine disturbs less than wall-clock time; both sides are single-threaded. Prints both times, the ratio R / mrcstats (> 1: mrcstats faster) and the
relative difference of the p-values (Monte Carlo: both p-values).

Usage: python benchmarks/bench_fisher.py [--repeat 3] [--cases 2x2,3x4,2x9,2x9-wh,3x3,2x3,sim]
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CASES = {
    "2x2": (np.array([[11, 0], [8, 9]]), False),
    "3x4": (np.array([[3, 5, 2, 6], [4, 8, 1, 5], [7, 2, 9, 5]]), False),
    "2x9": (np.array([[60, 95, 80, 110, 70, 40, 30, 25, 14], [50, 70, 60, 70, 40, 30, 20, 20, 10]]), False),
    "2x9-wh": (np.array([[62, 9, 58, 21, 3, 4, 1, 6, 252], [86, 5, 46, 11, 3, 9, 1, 14, 201]]), False),
    "3x3": (np.array([[40, 30, 35], [30, 45, 20], [25, 30, 40]]), False),
    "2x3": (np.array([[900, 1100, 1000], [1000, 950, 1050]]), False),
    "sim": (np.array([[60, 95, 80, 110, 70, 40, 30, 25, 14], [50, 70, 60, 70, 40, 30, 20, 20, 10]]), True),
}

R_CODE = r"""
a <- commandArgs(TRUE)
x <- as.matrix(read.csv(a[1], row.names = 1)); sim <- a[2] == "TRUE"; rep <- as.integer(a[3])
# R's default workspace first; tables that overflow it (FEXACT error 7) are rerun with 2e8
ws <- 200000
ok <- tryCatch({ fisher.test(x, simulate.p.value = sim, B = 2000); TRUE }, error = function(e) FALSE)
if (!ok) ws <- 2e8
cpu <- function(st) st[["user.self"]] + st[["sys.self"]]
inner <- if (cpu(system.time(fisher.test(x, workspace = ws, simulate.p.value = sim, B = 2000))) < 0.05) 100 else 1
best <- Inf; p <- NA
for (i in seq_len(rep)) {
  t <- cpu(system.time(for (j in seq_len(inner)) r <- fisher.test(x, workspace = ws, simulate.p.value = sim, B = 2000))) / inner
  best <- min(best, t); p <- r$p.value
}
cat(sprintf('{"seconds": %.6f, "p": %.17g, "workspace": %.0f}\n', best, p, ws))
"""


def time_ours(x: np.ndarray, sim: bool, repeat: int) -> tuple[float, float]:
    from mrcstats.stats.contingency import fisher

    t0 = time.process_time()
    fisher(x, simulate=sim, B=2000, seed=0)
    inner = 100 if time.process_time() - t0 < 0.05 else 1  # fast cases: average 100 calls, as for R
    best, p = float("inf"), float("nan")
    for i in range(repeat):
        t0 = time.process_time()
        for _ in range(inner):
            p = fisher(x, simulate=sim, B=2000, seed=i).p
        best = min(best, (time.process_time() - t0) / inner)
    return best, p


def time_r(rscript: str, x: np.ndarray, sim: bool, repeat: int, tmp: Path) -> tuple[float, float, float]:
    csv = tmp / "t.csv"
    rows = [",".join(f"c{j}" for j in range(x.shape[1]))]
    rows = ["," + rows[0]] + [f"r{i}," + ",".join(map(str, r)) for i, r in enumerate(x)]
    csv.write_text("\n".join(rows) + "\n")
    script = tmp / "bench.R"
    script.write_text(R_CODE)
    out = subprocess.run([rscript, str(script), str(csv), "TRUE" if sim else "FALSE", str(repeat)],
                         check=False, capture_output=True, text=True, timeout=1200)
    if out.returncode != 0:
        return float("nan"), float("nan"), float("nan")
    obj = json.loads(out.stdout.strip().splitlines()[-1])
    return obj["seconds"], obj["p"], obj["workspace"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cases", default=",".join(CASES))
    args = ap.parse_args()
    rscript = shutil.which("Rscript")
    if not rscript:
        print("Rscript not found: only mrcstats timings are printed", file=sys.stderr)
    print(f"{'case':8} {'shape':6} {'n':>5} {'mrcstats s':>11} {'R s':>9} {'R/mrcstats':>10} {'R workspace':>11}"
          "  p (mrcstats)  p (R)  rel.diff")
    with tempfile.TemporaryDirectory() as d:
        for name in args.cases.split(","):
            x, sim = CASES[name]
            t_ours, p_ours = time_ours(x, sim, args.repeat)
            t_r, p_r, ws = time_r(rscript, x, sim, args.repeat, Path(d)) if rscript else (float("nan"),) * 3
            ratio = t_r / t_ours if t_ours > 0 else float("nan")
            rel = abs(p_ours - p_r) / p_r if not np.isnan(p_r) and p_r > 0 else float("nan")
            print(f"{name:8} {x.shape[0]}x{x.shape[1]:<4} {int(x.sum()):5d} {t_ours:11.4f} {t_r:9.4f} "
                  f"{ratio:10.2f} {ws:11.0f}  {p_ours:.10g}  {p_r:.10g}  {rel:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
