"""Peak memory of ``mrcstats ingest FILE --out LOG.parquet`` and ``--dataset DIR`` relative to the file size.

Writes a CSV and a JSON-lines file of about ``--mb`` MB each (canonical-log-like rows: model, item,
cluster, trial, condition, masking_rate, correct, response, gold, pred, question; the generator of
``bench_ingest_stream.py``) into a temporary folder, then runs for each file

    /usr/bin/time -v python -m mrcstats ingest FILE --out X.parquet --json
    /usr/bin/time -v python -m mrcstats ingest FILE --dataset DIR --json

and prints the peak resident set size ("Maximum resident set size") divided by the file size, the
wall-clock time and the rows written (checked against the rows generated). The files are deleted
afterwards. The target (issue 35): peak RSS <= 1.5x the input for both commands on a 400 MB file.

Usage: python benchmarks/bench_ingest_memory.py [--mb 400] [--dir /tmp/mrcstats-bench-mem] [--models 40]
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ingest_stream import generate


def run(src: Path, how: str, target: Path) -> dict:
    """``ingest src --out target`` (how="out") or ``--dataset target`` under ``/usr/bin/time -v``."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    cmd = ["/usr/bin/time", "-v", sys.executable, "-m", "mrcstats", "ingest", str(src), f"--{how}", str(target),
           "--json"]
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"ingest failed ({p.returncode}): {p.stderr[-2000:]}")
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr).group(1)) * 1024
    size = src.stat().st_size
    return {"file": src.name, "how": f"--{how}", "size_mb": size / 1e6, "rows": json.loads(p.stdout)["rows"],
            "peak_rss_mb": rss / 1e6, "ratio": rss / size, "seconds": wall}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=400.0)
    ap.add_argument("--dir", default=None, help="where to write the files (default: a new temporary folder)")
    ap.add_argument("--models", type=int, default=40)
    ap.add_argument("--formats", default="csv,jsonl")
    ap.add_argument("--how", default="out,dataset", help="which commands: out, dataset or both")
    args = ap.parse_args()
    d = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="mrcstats-bench-mem-"))
    d.mkdir(parents=True, exist_ok=True)
    models = [f"org/model-{i:02d}" for i in range(args.models)]
    results = []
    try:
        for fmt in args.formats.split(","):
            src = d / f"bench.{fmt}"
            n = generate(src, fmt, args.mb / 1000, models)
            print(f"generated {src} ({src.stat().st_size / 1e6:.0f} MB, {n:,} rows)", file=sys.stderr)
            for how in args.how.split(","):
                target = d / (f"out_{fmt}.parquet" if how == "out" else f"ds_{fmt}")
                r = run(src, how, target)
                assert r["rows"] == n, (r, n)
                results.append(r)
                print(json.dumps(r), file=sys.stderr)
                shutil.rmtree(target, ignore_errors=True) if target.is_dir() else target.unlink(missing_ok=True)
            src.unlink()
    finally:
        shutil.rmtree(d, ignore_errors=True) if not args.dir else [p.unlink() for p in d.glob("bench.*")]
    print(f"{'file':<12}{'command':<11}{'MB':>7}{'rows':>12}{'peak RSS MB':>13}{'RSS/size':>10}{'seconds':>9}")
    for r in results:
        print(f"{r['file']:<12}{r['how']:<11}{r['size_mb']:>7.0f}{r['rows']:>12,}{r['peak_rss_mb']:>13.0f}"
              f"{r['ratio']:>10.2f}{r['seconds']:>9.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
