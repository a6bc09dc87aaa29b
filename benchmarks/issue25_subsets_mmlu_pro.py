#!/usr/bin/env python
"""Issue 25 check on real data: subsets and IRT on public MMLU-Pro outputs (not committed).

Reads TIGER-AI-Lab/MMLU-Pro's ``eval_results/model_outputs_<model>_5shots.zip`` files, unzipped one folder per
model under DIR (``DIR/<model>/model_outputs_<model>_5shots.json``: one JSON list of records whose
``options`` is a list), and prints

1. ``subset_eval``'s random-subset MAE at k = 50 asked alone and beside other ks and methods (one seed stream
   per choice: the two must be equal);
2. the share of physics items among ``subset(k=100, method="irt-info")`` under two seeds, and stratified by
   category (ties broken under the seed; physics is about 11% of the benchmark);
3. the IRT caveats with this few respondents.

Usage: python benchmarks/issue25_subsets_mmlu_pro.py DIR
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import mrcstats
from mrcstats.io import read_log


def main(root: str) -> int:
    folders = sorted(p for p in Path(root).iterdir() if p.is_dir() and any(p.glob("*.json")))
    if len(folders) < 4:
        print(f"{root}: need at least 4 model folders with MMLU-Pro JSON outputs", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    log = read_log([str(p) for p in folders], model={str(p): p.name for p in folders},
                   mapping={"item": "question_id", "gold": "answer", "pred": "pred", "cluster": "category"})
    print(f"read {len(log)} rows, {log['model'].nunique()} models, {log['item'].nunique()} items "
          f"in {time.perf_counter() - t0:.1f} s")
    kw = {"folds": 2, "seeds": 2, "progress": False}
    alone = mrcstats.subset_eval(log, ks=[50], methods=["random"], **kw)
    more = mrcstats.subset_eval(log, ks=[25, 50, 100], methods=["pd", "random", "anchor"], **kw)
    for name, res in (("alone", alone), ("with others", more)):
        r = res.results
        row = r[(r["method"] == "random") & (r["k"] == 50)].set_index("estimator")
        print(f"random k=50 {name}: MAE mean {row.at['mean', 'mae']:.5f}, irt {row.at['irt', 'mae']:.5f}")
    share = log.drop_duplicates("item")["cluster"].value_counts(normalize=True)
    print(f"physics share of the benchmark: {share.get('physics', 0):.3f}")
    cat = dict(zip(log["item"], log["cluster"]))
    for seed, strat in ((0, None), (1, None), (0, "cluster")):
        s = mrcstats.subset(log, 100, "irt-info", seed=seed, stratify=strat)
        phys = sum(cat[i] == "physics" for i in s.items) / len(s.items)
        print(f"irt-info k=100 seed {seed}{' stratified' if strat else ''}: physics share {phys:.2f}")
    res = mrcstats.irt(log)
    print("\n".join(f"irt caveat: {c}" for c in res.caveats))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "mmlu_pro_outputs"))
