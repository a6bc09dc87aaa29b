"""Ingest throughput: mrcstats.read_log vs a plain pandas read of the same file, in one run.

Generates a long CSV like the issue's check (29 models x 12k items, ~347k rows, columns
model/question_id/src/correct/pred/gold/response) and its Parquet twin in a temporary folder,
then times (best of --repeat):

* CSV:     ``read_log(csv, mapping={"item": "question_id", "cluster": "src"})`` vs ``pd.read_csv(csv)``
* Parquet: ``read_log(parquet)`` (a canonical log written by ``write_log``) vs ``pd.read_parquet(parquet)``
* the whole ``mrcstats ingest CSV --map ... --out LOG.parquet --json`` command (one run, wall clock)

and prints rows/s and the ratio mrcstats / pandas (time; > 1 means mrcstats is slower).
Usage: python benchmarks/bench_ingest.py [--models 29] [--items 12000] [--repeat 3]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd


def make_csv(path: Path, n_models: int, n_items: int, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    m = np.repeat([f"org/model-{i}:v1.{i}" for i in range(n_models)], n_items)
    it = np.tile([f"q{j:05d}" for j in range(n_items)], n_models)
    keep = rng.random(len(m)) > 0.003  # a few missing answers, like a real export
    df = pd.DataFrame({"model": m[keep], "question_id": it[keep],
                       "src": np.char.add("src", (np.tile(np.arange(n_items) // 4, n_models)[keep]).astype(str))})
    df["correct"] = (rng.random(len(df)) < 0.6).astype(int)
    df["pred"] = rng.choice(list("ABCD"), len(df))
    df["gold"] = rng.choice(list("ABCD"), len(df))
    df["response"] = "The answer is [" + df["pred"] + "]."
    df.to_csv(path, index=False)
    return df


def best(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=29)
    ap.add_argument("--items", type=int, default=12000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    from mrcstats.io import read_log, write_log

    with tempfile.TemporaryDirectory() as d:
        csv = Path(d) / "long.csv"
        src = make_csv(csv, args.models, args.items)
        n = len(src)
        mapping = {"item": "question_id", "cluster": "src"}
        t_pd, _ = best(lambda: pd.read_csv(csv), args.repeat)
        t_mr, log = best(lambda: read_log(csv, mapping=mapping), args.repeat)
        want = src.groupby("model")["correct"].mean()
        got = log.groupby("model")["correct"].apply(lambda s: s.fillna(False).sum() / len(s))
        exact = bool((got.reindex(want.index) == want).all())
        pq = write_log(log, Path(d) / "log.parquet")
        t_pdq, _ = best(lambda: pd.read_parquet(pq), args.repeat)
        t_mrq, _ = best(lambda: read_log(pq), args.repeat)
        exe = [sys.executable, "-m", "mrcstats", "ingest", str(csv), "--map", "item=question_id",
               "--map", "cluster=src", "--out", str(Path(d) / "cli.parquet"), "--json"]
        t = time.perf_counter()
        r = subprocess.run(exe, check=False, capture_output=True, text=True)
        t_cli = time.perf_counter() - t
        if r.returncode != 0:
            print(r.stderr, file=sys.stderr)
            return 1

    print(f"rows: {n} ({args.models} models x {args.items} items), best of {args.repeat}")
    print(f"CSV     mrcstats read_log {t_mr:7.3f} s  {n / t_mr:12,.0f} rows/s | pandas read_csv     "
          f"{t_pd:7.3f} s  {n / t_pd:12,.0f} rows/s | ratio {t_mr / t_pd:5.2f}x")
    print(f"Parquet mrcstats read_log {t_mrq:7.3f} s  {n / t_mrq:12,.0f} rows/s | pandas read_parquet "
          f"{t_pdq:7.3f} s  {n / t_pdq:12,.0f} rows/s | ratio {t_mrq / t_pdq:5.2f}x")
    print(f"CLI     mrcstats ingest --map item=question_id --map cluster=src --out: {t_cli:.2f} s wall "
          f"(limit 20 s); per-model accuracy exact: {exact}")
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
