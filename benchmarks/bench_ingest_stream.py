"""Streaming ingest: peak memory and time of ``mrcstats ingest FILE --dataset DIR`` on a 2 GB CSV and a 2 GB JSONL.

Generates, in ``--dir``, a CSV and a JSON-lines file of about ``--gb`` GB each, with rows like
``mrcstats demo``'s log (model, item, cluster, trial, condition, masking_rate, correct, response,
gold, pred and a question text; ``--models`` models, unique keys), then runs for each

    /usr/bin/time -v python -m mrcstats ingest FILE --dataset DIR --json

and reports the peak resident set size ("Maximum resident set size") and the wall-clock time, with the
rows the command wrote (checked against the rows generated) and the load average before each run.
The files and datasets are deleted afterwards unless ``--keep``. The target (issue 24) is < 3 GB peak
RSS for each file. Before streaming (da0790c) the whole file was read: a 417 MB JSONL peaked at 4.7 GB.

Usage: python benchmarks/bench_ingest_stream.py [--gb 2] [--dir /tmp/bench] [--models 40] [--keep]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

_WORDS = np.array(["river", "council", "farmer", "engine", "museum", "letter", "forest", "doctor", "harbor",
                   "village", "market", "teacher", "storm", "bridge", "garden", "soldier", "library", "island"])
_CONDS = np.array(["regular", "partial", "strict", "lenient"])


_POOL = 4096


def _pool(rng: np.random.Generator) -> pd.DataFrame:
    """Random answer/question parts, drawn once; rows pick from them (generation is I/O-bound then)."""
    pred = rng.choice(np.array(list("ABCD")), _POOL)
    gold = rng.choice(np.array(list("ABCD")), _POOL)
    q = [f"What did the {a} see near the {b}?" for a, b in zip(rng.choice(_WORDS, _POOL), rng.choice(_WORDS, _POOL))]
    return pd.DataFrame({"pred": pred, "gold": gold, "response": [f"The answer is [{p}]." for p in pred],
                         "correct": np.where(rng.random(_POOL) < 0.01, "", (pred == gold).astype(int).astype(str)),
                         "question": q})


def _block(rng: np.random.Generator, pool: pd.DataFrame, start: int, n: int, models: list[str]) -> pd.DataFrame:
    """``n`` demo-like rows, row ids ``start..start+n`` (unique (model, item, trial, condition) keys)."""
    idx = np.arange(start, start + n)
    m = idx % len(models)
    k = idx // len(models)                       # the k-th row of each model: item, trial, condition from it
    item, trial, cond = k // 8, (k // 4) % 2, k % 4
    r = pool.iloc[rng.integers(0, _POOL, n)].reset_index(drop=True)
    items = pd.Series(item).astype(str)
    return pd.DataFrame({
        "model": np.asarray(models, dtype=object)[m], "item": "q" + items,
        "cluster": "p" + pd.Series(item // 6).astype(str), "trial": trial, "condition": _CONDS[cond],
        "masking_rate": (item % 5) * 20.0, "correct": r["correct"], "response": r["response"], "gold": r["gold"],
        "pred": r["pred"], "question": r["question"]})


def generate(path: Path, fmt: str, gb: float, models: list[str], seed: int = 0, block: int = 200_000) -> int:
    """Write blocks until the file holds ``gb`` GB; returns the rows written."""
    rng = np.random.default_rng(seed)
    pool = _pool(rng)
    target = int(gb * 1e9)
    rows = 0
    with open(path, "w", encoding="utf-8", newline="") as fh:
        while fh.tell() < target:
            df = _block(rng, pool, rows, block, models)
            if fmt == "csv":
                df.to_csv(fh, index=False, header=rows == 0)
            else:
                text = df.to_json(orient="records", lines=True, force_ascii=False)
                fh.write(text if text.endswith("\n") else text + "\n")
            rows += len(df)
    return rows


def measure(src: Path, out: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    cmd = ["/usr/bin/time", "-v", sys.executable, "-m", "mrcstats", "ingest", str(src), "--dataset", str(out), "--json"]
    load = os.getloadavg()
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - t
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    if p.returncode != 0:
        raise SystemExit(f"ingest failed ({p.returncode}): {p.stderr[-2000:]}")
    stats = json.loads(p.stdout)
    return {"file": src.name, "size_gb": src.stat().st_size / 1e9, "rows": stats["rows"],
            "peak_rss_gb": int(rss.group(1)) * 1024 / 1e9 if rss else None, "seconds": wall,
            "load_before": [round(x, 2) for x in load], "files": sum(1 for _ in out.rglob("*.parquet"))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gb", type=float, default=2.0)
    ap.add_argument("--dir", default="/tmp/mrcstats-bench-stream")
    ap.add_argument("--models", type=int, default=40)
    ap.add_argument("--formats", default="csv,jsonl")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    d = Path(args.dir)
    d.mkdir(parents=True, exist_ok=True)
    models = [f"org/model-{i:02d}" for i in range(args.models)]
    results = []
    try:
        for fmt in args.formats.split(","):
            src = d / f"bench.{fmt}"
            t = time.perf_counter()
            n = generate(src, fmt, args.gb, models)
            print(f"generated {src} ({src.stat().st_size / 1e9:.2f} GB, {n:,} rows) in "
                  f"{time.perf_counter() - t:.0f} s", file=sys.stderr)
            r = measure(src, d / f"ds_{fmt}")
            r["rows_generated"] = n
            assert r["rows"] == n, r
            results.append(r)
            print(json.dumps(r), file=sys.stderr)
            src.unlink()
            shutil.rmtree(d / f"ds_{fmt}", ignore_errors=True)
    finally:
        if not args.keep:
            for p in d.glob("bench.*"):
                p.unlink()
            for p in d.glob("ds_*"):
                shutil.rmtree(p, ignore_errors=True)
    print(f"{'file':<12}{'GB':>6}{'rows':>14}{'peak RSS GB':>13}{'seconds':>9}  load before")
    for r in results:
        print(f"{r['file']:<12}{r['size_gb']:>6.2f}{r['rows']:>14,}{r['peak_rss_gb']:>13.2f}{r['seconds']:>9.0f}  "
              f"{r['load_before']}")
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
