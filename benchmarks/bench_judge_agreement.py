"""Agreement and prediction-powered means on real crowd and expert labels (JUDGE-BENCH, issue 38).

Data: a checkout of ``dmg-illc/JUDGE-BENCH`` (https://github.com/dmg-illc/JUDGE-BENCH; per-dataset licences in
its ``data/README.md``); the script reads, under ``ROOT``:

* ``data/dices/dices_350_crowdsourced.json``: 350 conversations, 123 crowd safety ratings each (Yes/No/Unsure);
* ``data/dices/dices_350_expert.json``: one expert (gold) safety label per conversation (Yes/No);
* ``data/medical-safety/original_data/medicheck-crowd.csv``: 861 medical queries with 3-12 crowd risk labels
  (``query-cws``) and an expert label (``query-expert``): Not medical < Non-serious < Serious < Critical.

Part 1 -- agreement of the crowd: Krippendorff's alpha, Fleiss' kappa and Gwet's AC1 with their 95% CIs
(``mrcstats.agreement``; these three depend only on each item's category counts, so the crowd labels of an
item fill rater columns in their listed order -- the files do not say which crowd worker gave which label).

Part 2 -- prediction-powered means: the cheap label on every item is the crowd majority, the gold label the
expert's; the quantity is the share of items the expert calls safe (DICES) or serious-or-critical
(medical-safety). For n in {50, 100, 200}, ``--reps`` random gold subsets of size n (without replacement);
the truth is the mean expert label over all items. Reported: coverage of the 95% interval and its mean width
(target "rows": the finite set of items, the truth here) for the gold-only mean (finite-population SE), plain
PPI (lambda = 1), PPI++ with lambda fitted on the same labelled rows, and PPI++ with lambda cross-fitted over 5
folds and a t(n-1) interval (the default rule of ``mrcstats judge``; ``mrcstats.stats.judge.ppi_mean``).

Usage: python benchmarks/bench_judge_agreement.py ROOT [--reps 200] [--seed 1]
"""
from __future__ import annotations

import argparse
import ast
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

import mrcstats
from mrcstats.stats.judge import ppi_critical, ppi_mean

RISK = ["Not medical", "Non-serious", "Serious", "Critical"]


def wide(lists: list[list[str]]) -> pd.DataFrame:
    k = max(len(x) for x in lists)
    return pd.DataFrame([x + [None] * (k - len(x)) for x in lists], columns=[f"c{j}" for j in range(k)])


def majority(labels: list[str], order: list[str]) -> str:
    counts = pd.Series(labels).value_counts()
    top = counts[counts == counts.max()].index
    return min(top, key=order.index)          # ties: the first in the listed order (documented)


def load(root: Path):
    crowd = json.loads((root / "data/dices/dices_350_crowdsourced.json").read_text())
    expert = json.loads((root / "data/dices/dices_350_expert.json").read_text())
    gold = {i["id"]: i["annotations"]["safety"]["majority_human"] for i in expert["instances"]}
    ids = [i["id"] for i in crowd["instances"]]
    dl = [i["annotations"]["safety"]["individual_human_scores"] for i in crowd["instances"]]
    dices = {"name": "DICES-350 safety", "ratings": wide(dl), "levels": ["No", "Yes", "Unsure"],
             "cheap": np.array([majority(x, ["Yes", "No", "Unsure"]) == "Yes" for x in dl], dtype=float),
             "gold": np.array([gold[i] == "Yes" for i in ids], dtype=float), "what": "share safe (expert)"}
    med_csv = root / "data/medical-safety/original_data/medicheck-crowd.csv"
    if not med_csv.is_file():       # a partial checkout (the snapshot may lack large files): say so, go on
        print(f"note: {med_csv} not found; medical-safety left out", file=sys.stderr)
        return [dices]
    med = pd.read_csv(med_csv)
    ml = [ast.literal_eval(s) for s in med["query-cws"]]
    keep = [len(x) > 0 and isinstance(e, str) for x, e in zip(ml, med["query-expert"])]
    ml = [x for x, k in zip(ml, keep) if k]
    exp = med["query-expert"][keep].tolist()
    medical = {"name": "medical-safety query risk", "ratings": wide(ml), "levels": RISK,
               "cheap": np.array([majority(x, RISK) in ("Serious", "Critical") for x in ml], dtype=float),
               "gold": np.array([e in ("Serious", "Critical") for e in exp], dtype=float),
               "what": "share serious or critical (expert)"}
    return [dices, medical]


def part1(ds) -> list[str]:
    out = []
    for d in ds:
        t0 = time.perf_counter()
        r = mrcstats.agreement(d["ratings"], wide=list(d["ratings"].columns), level="nominal", levels=d["levels"],
                               bootstrap=0)
        secs = time.perf_counter() - t0
        out.append(f"{d['name']}: {r.n_items} items, up to {len(r.raters)} ratings each, "
                   f"{r.n_missing} empty cells ({secs:.1f} s)")
        for s in ("krippendorff_alpha", "fleiss_kappa", "gwet_ac1"):
            row = r.table[r.table.statistic == s].iloc[0]
            out.append(f"  {s:<20} {row.estimate:.4f}  [{row.ci_low:.4f}, {row.ci_high:.4f}]  se {row.se:.4f}")
        out.append(f"  observed agreement {r.indices['observed_agreement']:.4f}, most common category "
                   f"{r.indices['max_prevalence']:.3f} of the ratings")
    return out


def part2(ds, reps: int, seed: int) -> list[str]:
    """Coverage / mean width of each 95% interval, target "rows" (the truth here: the mean over these items), one
    row per data set, n and method: gold-only (finite-population SE, normal CI), plain PPI (λ = 1, normal), PPI++
    with λ fitted on the same labelled rows (normal) and PPI++ with λ cross-fitted over 5 folds (t(n-1)), each as
    ``mrcstats.stats.judge`` computes it (``ppi_mean`` and ``ppi_critical``)."""
    methods = [("gold only", None), ("PPI (lambda = 1)", "plain"), ("PPI++ same-fold", "tuned"),
               ("PPI++ cross-fit", "crossfit")]
    out = ["| data | n | method | coverage | mean width | width / gold-only |", "|---|---|---|---|---|---|"]
    z = 1.959963984540054
    for d in ds:
        f, y = d["cheap"], d["gold"]
        N, truth = len(y), float(y.mean())
        for n in (50, 100, 200):
            rng = np.random.default_rng([seed, n, len(y)])
            res = [[0, 0.0] for _ in methods]
            for rep in range(reps):
                lab = rng.choice(N, n, replace=False)
                for j, (_, method) in enumerate(methods):
                    if method is None:
                        est, q = y[lab].mean(), z
                        se = y[lab].std(ddof=1) * math.sqrt((1 - n / N) / n)
                    else:
                        est, se, _ = ppi_mean(f, f[lab], y[lab], target="rows", method=method, seed=seed, key=rep)
                        q = ppi_critical(method, n)
                    res[j][0] += abs(est - truth) <= q * se
                    res[j][1] += 2 * q * se
            gold_w = res[0][1] / reps
            for (name, _), (c, w) in zip(methods, res):
                out.append(f"| {d['name']} | {n} | {name} | {100 * c / reps:.1f}% | {w / reps:.3f} | "
                           f"{w / reps / gold_w:.2f} |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", type=Path, help="a JUDGE-BENCH checkout (holding data/)")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    ds = load(a.root)
    print("\n".join(part1(ds)))
    for d in ds:
        agree = float((d["cheap"] == d["gold"]).mean())
        print(f"{d['name']}: crowd majority vs expert agree on {agree:.3f} of {len(d['gold'])} items; "
              f"{d['what']} = {d['gold'].mean():.3f}, crowd majority says {d['cheap'].mean():.3f}")
    print(f"\nCoverage of 95% intervals (target rows) over {a.reps} random gold subsets (seed {a.seed}):")
    print("\n".join(part2(ds, a.reps, a.seed)))


if __name__ == "__main__":
    main()
