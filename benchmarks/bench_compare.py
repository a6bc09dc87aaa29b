"""Time ``mrcstats.compare`` on a leaderboard-sized log against the naive pandas/statsmodels computation.

The log: ``--models`` models (30) x ``--items`` items (12,000) x 1 trial, items in clusters of
``--cluster-size`` (4; 3,000 clusters), binary correctness from a model ability + cluster effect + item effect,
2% invalid answers. Timed (wall clock, best of ``--repeat``), in this process:

* ``mrcstats``: ``compare(log, cluster="cluster")`` from the canonical log (per-item scores included), all
  435 pairs, clustered SEs, Holm-adjusted p, exact McNemar; then the same with ``bootstrap=1000``, and
  unclustered with ``bootstrap=1000`` (12,000 items resampled);
* anchor: the naive way — for every pair, merge the two models' rows on ``item`` in pandas and fit
  statsmodels ``OLS(d ~ 1).fit(cov_type="cluster")`` on the per-item differences (the same clustered SE up to
  statsmodels' small-sample factor), plus statsmodels' ``multipletests(method="holm")`` and scipy's
  ``binomtest`` per pair; the bootstrap anchor resamples clusters per pair with a numpy loop over resamples
  (timed on ``--anchor-boot-pairs`` pairs and extrapolated to all pairs, printed as such).

Prints both times and the ratio anchor / mrcstats (> 1: mrcstats faster), and checks that both give the same
differences and (after undoing statsmodels' factor) the same clustered SEs. The machine is shared: times vary.

Usage: python benchmarks/bench_compare.py [--models 30] [--items 12000] [--cluster-size 4] [--repeat 1]
       [--bootstrap 1000] [--anchor-boot-pairs 5]
"""
from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np
import pandas as pd


def make_log(models: int, items: int, cluster_size: int, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    cl = np.arange(items) // cluster_size
    g = cl.max() + 1
    u = rng.normal(0, 1.0, g)[cl]
    e = rng.normal(0, 0.8, items)
    item = np.array([f"q{i}" for i in range(items)], dtype=object)
    clus = np.array([f"c{c}" for c in cl], dtype=object)
    frames = []
    for m in range(models):
        p = 1 / (1 + np.exp(-(rng.normal(0, 0.6) + u + e)))
        y = (rng.random(items) < p).astype(object)
        y[rng.random(items) < 0.02] = None
        frames.append(pd.DataFrame({"model": f"model-{m:02d}", "item": item, "cluster": clus, "correct": y}))
    from mrcstats.io import validate_log

    return validate_log(pd.concat(frames, ignore_index=True))


def naive(log: pd.DataFrame) -> pd.DataFrame:
    import statsmodels.api as sm
    from scipy.stats import binomtest
    from statsmodels.stats.multitest import multipletests

    df = pd.DataFrame({"model": log["model"].astype(str), "item": log["item"].astype(str),
                       "cluster": log["cluster"].astype(str),
                       "y": log["correct"].fillna(False).astype(float)})
    names = sorted(df["model"].unique())
    rows = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            m = df[df.model == a].merge(df[df.model == b], on=["item", "cluster"], suffixes=("_a", "_b"))
            d = m["y_a"] - m["y_b"]
            fit = sm.OLS(d.to_numpy(), np.ones((len(d), 1))).fit(cov_type="cluster",
                                                                  cov_kwds={"groups": pd.factorize(m["cluster"])[0]})
            bo = int(((m.y_a == 1) & (m.y_b == 0)).sum())
            co = int(((m.y_a == 0) & (m.y_b == 1)).sum())
            pm = binomtest(bo, bo + co).pvalue if bo + co else 1.0
            rows.append({"model_a": a, "model_b": b, "diff": float(fit.params[0]), "se": float(fit.bse[0]),
                         "p": float(fit.pvalues[0]), "p_mcnemar": pm, "n": len(d), "g": m["cluster"].nunique()})
    out = pd.DataFrame(rows)
    out["p_adjusted"] = multipletests(out["p"], method="holm")[1]
    return out


def naive_boot(log: pd.DataFrame, pairs: int, B: int, seed: int = 1) -> float:
    """Seconds for a per-pair loop bootstrap of `pairs` pairs."""
    df = pd.DataFrame({"model": log["model"].astype(str), "item": log["item"].astype(str),
                       "cluster": log["cluster"].astype(str),
                       "y": log["correct"].fillna(False).astype(float)})
    names = sorted(df["model"].unique())
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    done = 0
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if done >= pairs:
                return time.perf_counter() - t0
            m = df[df.model == a].merge(df[df.model == b], on=["item", "cluster"], suffixes=("_a", "_b"))
            m["d"] = m["y_a"] - m["y_b"]
            groups = [g["d"].to_numpy() for _, g in m.groupby("cluster", sort=False)]
            G = len(groups)
            vals = []
            for _ in range(B):
                pick = rng.integers(0, G, G)
                cat = np.concatenate([groups[k] for k in pick])
                vals.append(cat.mean())
            np.quantile(vals, [0.025, 0.975])
            done += 1
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=30)
    ap.add_argument("--items", type=int, default=12000)
    ap.add_argument("--cluster-size", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--anchor-boot-pairs", type=int, default=5)
    args = ap.parse_args(argv)
    from mrcstats.stats.compare import compare

    t0 = time.perf_counter()
    log = make_log(args.models, args.items, args.cluster_size)
    n_pairs = args.models * (args.models - 1) // 2
    print(f"log: {len(log):,} rows, {args.models} models x {args.items:,} items x 1 trial, "
          f"{args.items // args.cluster_size:,} clusters; {n_pairs} pairs (built in {time.perf_counter() - t0:.1f} s)")

    def best(fn):
        ts, res = [], None
        for _ in range(max(1, args.repeat)):
            t = time.perf_counter()
            res = fn()
            ts.append(time.perf_counter() - t)
        return min(ts), res

    # warm up: imports (scipy.stats, statsmodels) are not what is timed
    import statsmodels.api  # noqa: F401
    from statsmodels.stats.multitest import multipletests  # noqa: F401

    small = make_log(3, 200, args.cluster_size)
    compare(small, cluster="cluster", bootstrap=10, seed=1)
    naive(small)
    t_m, res = best(lambda: compare(log, cluster="cluster"))
    print(f"mrcstats compare, clustered, no bootstrap:        {t_m:8.2f} s")
    t_b, res_b = best(lambda: compare(log, cluster="cluster", bootstrap=args.bootstrap, seed=1))
    print(f"mrcstats compare, clustered, bootstrap {args.bootstrap}:     {t_b:8.2f} s")
    t_u, _ = best(lambda: compare(log, bootstrap=args.bootstrap, seed=1))
    print(f"mrcstats compare, unclustered, bootstrap {args.bootstrap} (items resampled): {t_u:6.2f} s")
    t_n, ref = best(lambda: naive(log))
    print(f"naive pandas merge + statsmodels OLS cluster SE:  {t_n:8.2f} s   ratio naive / mrcstats = "
          f"{t_n / t_m:.1f}x")
    t_nb = naive_boot(log, args.anchor_boot_pairs, args.bootstrap)
    t_nb_all = t_nb / args.anchor_boot_pairs * n_pairs
    print(f"naive per-pair loop bootstrap ({args.anchor_boot_pairs} pairs, {t_nb:.1f} s) extrapolated to {n_pairs} "
          f"pairs: {t_nb_all:8.1f} s   ratio naive / mrcstats = {t_nb_all / t_b:.1f}x")
    # agreement
    mine = res.pairs.set_index(["model_a", "model_b"])
    other = ref.set_index(["model_a", "model_b"])
    dd = float(np.max(np.abs(mine["diff"] - other["diff"])))
    # statsmodels' cluster SE carries G/(G-1) (N-1)/(N-K); with one regressor (K = 1) that is G/(G-1), as ours
    dse = float(np.max(np.abs(mine["se_cluster"] / other["se"] - 1)))
    dpm = float(np.max(np.abs(mine["p_mcnemar"] - other["p_mcnemar"]) / np.maximum(other["p_mcnemar"], 1e-300)))
    print(f"agreement: max |diff| {dd:.2e}; max rel. clustered SE {dse:.2e}; max rel. McNemar p {dpm:.2e}")
    print(f"targets: < 10 s without bootstrap ({'met' if t_m < 10 else 'NOT met'}), < 60 s with "
          f"--bootstrap {args.bootstrap} ({'met' if t_b < 60 else 'NOT met'})")
    del res_b
    return 0 if math.isfinite(t_m) else 1


if __name__ == "__main__":
    sys.exit(main())
