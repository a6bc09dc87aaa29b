"""Coverage of compare()'s 95% intervals on clustered data: naive (CLT) vs clustered vs cluster bootstrap.

Generative model (items in G clusters of m items, two models A and B)::

    logit P(correct_{k,i}) = a_k + u_c + v_{k,c} + e_i,   u_c ~ N(0, su²), v_{k,c} ~ N(0, sv²), e_i ~ N(0, se²)

``v_{k,c}`` (a model-specific cluster effect) makes the per-item *differences* clustered too. Model A and B
have the same ``a_k``, so the true difference is 0; the true accuracy of A (over the super-population of
clusters and items) is computed by a 4-million-draw Monte Carlo of the same process. For each setting,
``--reps`` data sets are drawn and we count how often each 95% interval covers the truth:

* accuracy of A: naive ``s̄ ± 1.96 se`` (Miller Eq. 2) and clustered ``s̄ ± 1.96 se_cluster`` (Eq. 4, G/(G-1));
* difference A - B: naive paired (Eq. 8), clustered paired, and (``--boot-reps`` data sets) the percentile
  cluster bootstrap (``--B`` resamples).

Usage: python benchmarks/sim_compare_coverage.py [--reps 1000] [--boot-reps 200] [--B 500] [--seed 1]
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import pandas as pd

SETTINGS = [  # (G clusters, m items per cluster, su, sv, se)
    (50, 10, 1.0, 0.8, 0.5),
    (200, 5, 1.0, 0.8, 0.5),
    (100, 10, 1.5, 0.0, 0.5),
    (400, 1, 1.0, 0.8, 0.5),   # one item per cluster: nothing to correct
]


def draw(rng, G, m, su, sv, se, models=2):
    cl = np.repeat(np.arange(G), m)
    u = rng.normal(0, su, G)[cl]
    e = rng.normal(0, se, G * m)
    frames = []
    for k in range(models):
        v = rng.normal(0, sv, G)[cl]
        y = (rng.random(G * m) < 1 / (1 + np.exp(-(0.3 + u + v + e)))).astype(float)
        frames.append(pd.DataFrame({"model": "AB"[k], "item": np.arange(G * m).astype(str),
                                    "cluster": cl.astype(str), "score": y, "n_trials": 1}))
    return pd.concat(frames, ignore_index=True)


def truth(su, sv, se, rng, n=4_000_000):
    eta = 0.3 + rng.normal(0, su, n) + rng.normal(0, sv, n) + rng.normal(0, se, n)
    return float(np.mean(1 / (1 + np.exp(-eta))))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--boot-reps", type=int, default=200)
    ap.add_argument("--B", type=int, default=500)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    from scipy.stats import norm

    from mrcstats.stats.compare import compare_scores

    z = norm.ppf(0.975)
    rng = np.random.default_rng(args.seed)
    print(f"coverage of nominal 95% intervals, {args.reps} data sets per setting (MC SE ~ "
          f"{100 * np.sqrt(0.95 * 0.05 / args.reps):.1f} points); bootstrap: {args.boot_reps} data sets, "
          f"B = {args.B}")
    head = (f"{'G':>4} {'m':>3} {'su':>4} {'sv':>4} | {'acc naive':>9} {'acc clust':>9} | {'diff naive':>10} "
            f"{'diff clust':>10} {'diff boot':>9} | {'se_cl/se':>8}")
    print(head)
    print("-" * len(head))
    t0 = time.perf_counter()
    for G, m, su, sv, se in SETTINGS:
        mu = truth(su, sv, se, rng)
        cov = np.zeros(5)
        ratio = []
        nb = 0
        for r in range(args.reps):
            items = draw(rng, G, m, su, sv, se)
            boot = r < args.boot_reps
            res = compare_scores(items, clustered=True, bootstrap=args.B if boot else 0, seed=r)
            a = res.models.iloc[0]
            p = res.pairs.iloc[0]
            cov[0] += abs(a.accuracy - mu) <= z * a.se
            cov[1] += abs(a.accuracy - mu) <= z * a.se_cluster
            cov[2] += abs(p["diff"]) <= z * p.se
            cov[3] += abs(p["diff"]) <= z * p.se_cluster
            if boot:
                cov[4] += p.boot_ci_low <= 0 <= p.boot_ci_high
                nb += 1
            ratio.append(p.se_cluster / p.se)
        c = 100 * cov / np.array([args.reps] * 4 + [max(nb, 1)])
        print(f"{G:>4} {m:>3} {su:>4} {sv:>4} | {c[0]:>8.1f}% {c[1]:>8.1f}% | {c[2]:>9.1f}% {c[3]:>9.1f}% "
              f"{c[4]:>8.1f}% | {np.mean(ratio):>8.2f}")
    print(f"({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
