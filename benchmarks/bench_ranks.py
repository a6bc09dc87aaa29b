"""Coverage and size of mrcstats.ranks()'s rank confidence sets on simulated boards with paired item-level data.

Generative model (every model answers the same ``n`` items, drawn afresh for each board from a population)::

    logit P(correct_{k,i}) = a_k - b_i + v_{k,i},   b_i ~ N(0, sb²),  v_{k,i} ~ N(0, sv²)

``b_i`` (item difficulty, shared by all models) makes the models' per-item scores positively correlated: the
paired differences are far more precise than each model's own SE suggests. The true accuracy of model ``k``
is ``θ_k = E_b,v[logistic(a_k - b + v)]`` over the item population (Gauss-Hermite quadrature, 80 nodes, on
``b + v ~ N(0, sb² + sv²)``), and its true rank ``1 + #{j : θ_j > θ_k}``. For each board ``ranks(log)`` gives
the marginal and simultaneous sets with paired statistics (``method="paired"``) and with independent
per-model SEs (the alternative it also reports); we count

* marginal coverage: the share of (board, model) sets that contain the model's true rank, and the lowest
  share over the models (each marginal set is a ``level`` set for its own model);
* simultaneous coverage: the share of boards on which every model's set contains its true rank;
* size: the mean number of ranks in a set, and the share of singleton sets.

Usage: python benchmarks/bench_ranks.py [--boards 1000] [--items 400] [--draws 1000] [--level 0.95] [--seed 1]
(1,000 boards of 8 models x 400 items: about 3 minutes on one core; 1,500 items: about 5.)
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import pandas as pd

#: model abilities (logits): close pairs, a middle group and a clear leader
ABILITIES = np.array([0.0, 0.08, 0.3, 0.35, 0.4, 0.7, 0.78, 1.3])


def true_accuracy(a: np.ndarray, sd: float) -> np.ndarray:
    """θ_k = E[logistic(a_k + sd·Z)], Z ~ N(0, 1), by 80-node Gauss-Hermite quadrature."""
    x, w = np.polynomial.hermite_e.hermegauss(80)
    w = w / w.sum()
    return (w[None, :] / (1 + np.exp(-(a[:, None] + sd * x[None, :])))).sum(axis=1)


def draw_board(rng: np.random.Generator, n: int, sb: float, sv: float) -> pd.DataFrame:
    p = len(ABILITIES)
    b = rng.normal(0, sb, n)
    eta = ABILITIES[:, None] - b[None, :] + rng.normal(0, sv, (p, n))
    y = rng.random((p, n)) < 1 / (1 + np.exp(-eta))
    return pd.DataFrame({"model": np.repeat([f"m{k}" for k in range(p)], n),
                         "item": np.tile(np.arange(n), p).astype(str), "correct": y.ravel()})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--boards", type=int, default=1000)
    ap.add_argument("--items", type=int, default=400)
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--level", type=float, default=0.95)
    ap.add_argument("--sb", type=float, default=1.5, help="SD of the shared item difficulty (1.5)")
    ap.add_argument("--sv", type=float, default=0.5, help="SD of the model-by-item noise (0.5)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)

    from mrcstats import validate_log
    from mrcstats.stats.ranks import ranks

    theta = true_accuracy(ABILITIES, float(np.hypot(args.sb, args.sv)))
    truth = 1 + (theta[None, :] > theta[:, None]).sum(axis=1)
    names = [f"m{k}" for k in range(len(ABILITIES))]
    true_rank = dict(zip(names, truth))
    rng = np.random.default_rng(args.seed)
    prefixes = {"paired": "", "independent": "independent_"}
    cover_m = {m: np.zeros((args.boards, len(names)), dtype=bool) for m in prefixes}
    cover_s = {m: np.zeros(args.boards, dtype=bool) for m in prefixes}
    size_m = {m: [] for m in prefixes}
    size_s = {m: [] for m in prefixes}
    t0 = time.perf_counter()
    for b in range(args.boards):
        log = validate_log(draw_board(rng, args.items, args.sb, args.sv))
        res = ranks(log, level=args.level, draws=args.draws, seed=args.seed + b)
        tab = res.models.set_index("model").loc[names]
        tr = np.array([true_rank[m] for m in names])
        for meth, pre in prefixes.items():
            mlo, mhi = tab[f"{pre}marginal_lo"].to_numpy(), tab[f"{pre}marginal_hi"].to_numpy()
            slo, shi = tab[f"{pre}simultaneous_lo"].to_numpy(), tab[f"{pre}simultaneous_hi"].to_numpy()
            cover_m[meth][b] = (mlo <= tr) & (tr <= mhi)
            cover_s[meth][b] = bool(((slo <= tr) & (tr <= shi)).all())
            size_m[meth].append(mhi - mlo + 1)
            size_s[meth].append(shi - slo + 1)
    secs = time.perf_counter() - t0

    print(f"bench_ranks: {args.boards} boards, {len(names)} models x {args.items} shared items, sb={args.sb}, "
          f"sv={args.sv}, level={args.level}, {args.draws} draws, seed={args.seed}; {secs:.1f} s "
          f"({1000 * secs / args.boards:.0f} ms per board, both methods)")
    print("true accuracies: " + ", ".join(f"{m} {t:.4f} (rank {r})" for m, t, r in zip(names, theta, truth)))
    rows = []
    for meth in prefixes:
        sm, ss = np.concatenate(size_m[meth]), np.concatenate(size_s[meth])
        rows.append({"statistics": meth,
                     "marginal coverage": f"{cover_m[meth].mean():.3f}",
                     "lowest per model": f"{cover_m[meth].mean(axis=0).min():.3f}",
                     "simultaneous coverage": f"{cover_s[meth].mean():.3f}",
                     "marginal size": f"{sm.mean():.2f}", "simultaneous size": f"{ss.mean():.2f}",
                     "marginal singletons": f"{(sm == 1).mean():.3f}",
                     "simultaneous singletons": f"{(ss == 1).mean():.3f}"})
    print(pd.DataFrame(rows).to_string(index=False))
    print("mean set size per model (paired / independent), marginal: " + ", ".join(
        f"{m} {np.mean([s[k] for s in size_m['paired']]):.2f}/{np.mean([s[k] for s in size_m['independent']]):.2f}"
        for k, m in enumerate(names)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
