"""Coverage of the clustered accuracy interval with few clusters: the old rule vs the new one (issue 36).

Data: ``n = 300`` binary answers with success probability ``p = 0.7`` spread over ``G`` clusters
(sizes as equal as they go), ``G`` in {3, 5, 10, 14, 30, 91}, in three settings:

* ``independent``: the answers are independent (the cluster structure is only a label);
* ``icc``: intra-cluster correlation, each cluster's probability drawn from Beta with mean p and
  ICC ``rho`` (``a = p (1/rho - 1)``, ``b = (1 - p)(1/rho - 1)``; ``--rho``, default 0.05);
* ``unequal``: independent answers in clusters of unequal size (sizes proportional to 1, 2, ..., G).

For each data set, the 95% interval of the accuracy from the per-cluster counts, under

* ``old``: Wilson at the effective n = p(1 - p)/se_cluster² with the normal z (mrcstats <= the last
  release; ``accuracy_interval(..., clusters=None)`` with ``n_eff`` uncapped, recomputed here);
* ``new``: :func:`mrcstats.stats.accuracy.accuracy_interval` (``"clustered wilson"``: n_eff capped at n,
  t critical value on G - 1 df; Inspect's ``ci_wilson(cluster=)``),

and its coverage of the true p (``independent``, ``unequal``) or of the mean of the cluster
probabilities' distribution, p (``icc``). Also the mean width. Fixed seed; about 10 s at --reps 2000.

Usage: python benchmarks/sim_few_clusters.py [--reps 2000] [--seed 1] [--rho 0.05]
"""
from __future__ import annotations

import argparse

import numpy as np

from mrcstats.stats.accuracy import accuracy_interval, cr1_se, wilson_interval

GS = (3, 5, 10, 14, 30, 91)


def sizes(n: int, g: int, unequal: bool) -> np.ndarray:
    w = np.arange(1, g + 1, dtype=float) if unequal else np.ones(g)
    m = np.floor(n * w / w.sum()).astype(int)
    m[: n - m.sum()] += 1
    return m


def draw(rng: np.random.Generator, setting: str, g: int, reps: int, p: float, n: int, rho: float):
    """Per-cluster correct counts (reps x G) and sizes (G)."""
    m = sizes(n, g, setting == "unequal")
    if setting == "icc":
        a, b = p * (1 / rho - 1), (1 - p) * (1 / rho - 1)
        pc = rng.beta(a, b, size=(reps, g))
    else:
        pc = np.full((reps, g), p)
    return rng.binomial(m[None, :], pc), m


def intervals(s: np.ndarray, m: np.ndarray, level: float = 0.95):
    n = m.sum()
    g = len(m)
    phat = s.sum(axis=1) / n
    rss = ((s - m[None, :] * phat[:, None]) ** 2).sum(axis=1)
    se = np.asarray(cr1_se(rss, n, g), dtype=float)
    new = accuracy_interval(phat, n, se, "clustered wilson", level, clusters=g)
    with np.errstate(invalid="ignore", divide="ignore"):     # the old rule: uncapped n_eff, normal z
        ok = (phat > 0) & (phat < 1) & (se > 0)
        n_eff = np.where(ok, phat * (1 - phat) / np.where(ok, se * se, 1.0), n)
    old = wilson_interval(phat * n_eff, n_eff, level)
    return old, new


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rho", type=float, default=0.05)
    ap.add_argument("--p", type=float, default=0.7)
    ap.add_argument("--n", type=int, default=300)
    a = ap.parse_args(argv)
    rng = np.random.default_rng(a.seed)
    print(f"coverage of 95% intervals, p = {a.p}, n = {a.n}, {a.reps} data sets per cell (seed {a.seed})")
    print(f"{'setting':12s} {'G':>3s}  {'old cover':>9s} {'new cover':>9s}  {'old width':>9s} {'new width':>9s}")
    for setting in ("independent", "icc", "unequal"):
        for g in GS:
            s, m = draw(rng, setting, g, a.reps, a.p, a.n, a.rho)
            (olo, ohi), (nlo, nhi) = intervals(s, m)
            cov_o = np.mean((olo <= a.p) & (a.p <= ohi))
            cov_n = np.mean((nlo <= a.p) & (a.p <= nhi))
            label = setting + (f" {a.rho:g}" if setting == "icc" else "")
            print(f"{label:12s} {g:3d}  {cov_o:9.3f} {cov_n:9.3f}  {np.mean(ohi - olo):9.3f} {np.mean(nhi - nlo):9.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
