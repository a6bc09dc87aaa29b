"""Start-up and reading, before vs after (issue 28), in one run.

Generates a 347k-row log (29 models x 12,000 items: model, item, cluster, correct, pred, gold, response),
writes it as CSV and as a canonical Parquet log, then times the same work with two source trees of
mrcstats, each in fresh processes (``PYTHONPATH=<tree>``):

* ``read_log(CSV)`` and ``read_log(Parquet)``: reading + validating, best of ``--repeat`` in one process
  (after one warm-up read, so imports are not counted);
* ``mrcstats ingest CSV --out LOG.parquet`` and ``mrcstats summary CSV``: the whole command, wall clock,
  median of ``--repeat`` processes;
* ``mrcstats --version`` and ``mrcstats --help``: wall clock, median of ``--startup`` processes.

"before" is ``--before-ref`` (default 452bd97, the commit before this work) unpacked with ``git archive``
(or ``--before SRC``, a ``src`` folder); "after" is this checkout's ``src``. Prints each time and the
ratio before/after (> 1: faster now), wall and CPU time (user + system: the steadier figure on a shared
machine), and the load average.
Usage: python benchmarks/bench_read.py [--models 29] [--items 12000] [--repeat 3] [--startup 10]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

READ = """
import json, sys, time
from mrcstats.io import read_log
path, repeat = sys.argv[1], int(sys.argv[2])
read_log(path)
times, cpu = [], []
for _ in range(repeat):
    t, c = time.perf_counter(), time.process_time()
    log = read_log(path)
    times.append(time.perf_counter() - t); cpu.append(time.process_time() - c)
print(json.dumps({"best": min(times), "cpu": min(cpu), "rows": len(log)}))
"""


def make_log(folder: Path, n_models: int, n_items: int, after: str) -> tuple[Path, Path]:
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(28)
    n = n_models * n_items
    theta, b = rng.normal(size=n_models), rng.normal(size=n_items)
    p = 1 / (1 + np.exp(-(np.repeat(theta, n_items) - np.tile(b, n_models))))
    df = pd.DataFrame({"model": np.repeat([f"org/model-{i:02d}" for i in range(n_models)], n_items),
                       "item": np.tile([f"q{j:05d}" for j in range(n_items)], n_models),
                       "cluster": np.tile([f"src{j // 4}" for j in range(n_items)], n_models),
                       "correct": (rng.random(n) < p).astype(int)})
    df["pred"] = rng.choice(list("ABCD"), n)
    df["gold"] = rng.choice(list("ABCD"), n)
    df["response"] = "The answer is [" + df["pred"] + "]."
    csv = folder / "log.csv"
    df.to_csv(csv, index=False)
    pq = folder / "log.parquet"
    _run(after, ["-m", "mrcstats", "ingest", str(csv), "--out", str(pq)])
    return csv, pq


def _env(src: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": src, "PYTHONDONTWRITEBYTECODE": "1"}


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _run(src: str, args: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system, of the child) of one ``python ARGS``."""
    c, t = _cpu(), time.perf_counter()
    subprocess.run([sys.executable, *args], env=_env(src), check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - t, _cpu() - c


def wall(src: str, args: list[str], n: int) -> tuple[float, float]:
    """Median wall and median CPU time of ``n`` fresh processes ``python ARGS`` with ``src`` on the path (the
    CPU time is the steadier figure on a shared machine)."""
    _run(src, args)
    runs = [_run(src, args) for _ in range(n)]
    return statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs)


def read_best(src: str, path: Path, repeat: int) -> tuple[float, float]:
    """Best wall and best CPU (this process's ``time.process_time``) of ``repeat`` reads in one process."""
    out = subprocess.run([sys.executable, "-c", READ, str(path), str(repeat)], env=_env(src), check=True,
                         capture_output=True, text=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    return float(r["best"]), float(r["cpu"])


def before_tree(ref: str, folder: Path) -> str:
    dest = folder / "before"
    dest.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "src"], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return str(dest / "src")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=29)
    ap.add_argument("--items", type=int, default=12000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--startup", type=int, default=10)
    ap.add_argument("--before-ref", default="452bd97")
    ap.add_argument("--before", help="a src folder of the older version (instead of --before-ref)")
    a = ap.parse_args()
    after = str(ROOT / "src")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        before = a.before or before_tree(a.before_ref, folder)
        csv, pq = make_log(folder, a.models, a.items, after)
        print(f"log: {a.models} models x {a.items:,} items = {a.models * a.items:,} rows; CSV "
              f"{csv.stat().st_size / 2**20:.1f} MiB, Parquet {pq.stat().st_size / 2**20:.1f} MiB; "
              f"before = {a.before or a.before_ref}")
        rows = [
            ("mrcstats --version (median)", lambda s: wall(s, ["-m", "mrcstats", "--version"], a.startup)),
            ("mrcstats --help (median)", lambda s: wall(s, ["-m", "mrcstats", "--help"], a.startup)),
            ("read_log(CSV) (best, in process)", lambda s: read_best(s, csv, a.repeat)),
            ("read_log(Parquet) (best, in process)", lambda s: read_best(s, pq, a.repeat)),
            ("mrcstats summary CSV (median)",
             lambda s: wall(s, ["-m", "mrcstats", "summary", str(csv)], a.repeat)),
            ("mrcstats ingest CSV --out (median)",
             lambda s: wall(s, ["-m", "mrcstats", "ingest", str(csv), "--out", str(folder / "o.parquet")],
                            a.repeat)),
        ]
        print(f"{'':40s} {'wall: before':>12s} {'after':>8s} {'ratio':>6s}   {'CPU: before':>11s} {'after':>8s} "
              f"{'ratio':>6s}")
        for name, fn in rows:
            (w0, c0), (w1, c1) = fn(before), fn(after)
            print(f"{name:40s} {w0:11.3f}s {w1:7.3f}s {w0 / w1:5.2f}x   {c0:10.3f}s {c1:7.3f}s {c0 / c1:5.2f}x",
                  flush=True)
    print("load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg()) + f" ({os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
