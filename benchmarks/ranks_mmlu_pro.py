"""Rank confidence sets, tiers and the top set of MMLU-Pro's published model outputs: paired vs independent.

Reads the folder of TIGER-AI-Lab/MMLU-Pro ``eval_results`` (one JSON list per model, or the zips) with the loader
of ``benchmarks/bench_screen.py`` (``item = question_id``, ``correct = pred == answer``, no extracted answer =
not correct) and prints ``mrcstats.ranks`` with paired statistics (the SE of every difference from the 12,032
shared questions) beside the sets from independent per-model SEs.

Usage::

    git clone --depth 1 https://github.com/TIGER-AI-Lab/MMLU-Pro /tmp/mmlupro
    mkdir -p /tmp/mmlupro_json && for z in /tmp/mmlupro/eval_results/*.zip; do unzip -o -q "$z" -d /tmp/mmlupro_json; done
    python benchmarks/ranks_mmlu_pro.py /tmp/mmlupro_json [--level 0.95] [--seed 1] [--draws 1000]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--level", type=float, default=0.95)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--draws", type=int, default=1000)
    a = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_screen import load

    from mrcstats.stats.ranks import ranks

    log, _ = load(a.folder)
    print(f"{log['model'].nunique()} models, {log['item'].nunique()} questions, {len(log)} answers "
          f"({int(log['correct'].isna().sum())} without an extracted answer, counted as not correct)")
    t0 = time.perf_counter()
    res = ranks(log, level=a.level, seed=a.seed, draws=a.draws)
    print(f"ranks: {time.perf_counter() - t0:.1f} s")
    print(res.summary())
    m = res.models
    for pre, name in (("", "paired"), ("independent_", "independent")):
        mw = (m[f"{pre}marginal_hi"] - m[f"{pre}marginal_lo"] + 1).to_numpy()
        sw = (m[f"{pre}simultaneous_hi"] - m[f"{pre}simultaneous_lo"] + 1).to_numpy()
        tiers = m[f"{pre}tier"].max()
        top = list(m.loc[m[f"{pre}simultaneous_lo"] == 1, "model"])
        print(f"{name}: mean set size marginal {mw.mean():.2f}, simultaneous {sw.mean():.2f}; singletons "
              f"{int((mw == 1).sum())} / {int((sw == 1).sum())}; {tiers} tiers; top set {top}")
    rho = res.covariance.to_numpy()
    sd = np.sqrt(np.diag(rho))
    corr = rho / np.outer(sd, sd)
    off = corr[~np.eye(len(corr), dtype=bool)]
    print(f"correlation of the models' accuracies across questions: median {np.median(off):.3f} "
          f"(range {off.min():.3f} to {off.max():.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
