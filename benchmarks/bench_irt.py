"""Time the 2PL fit and subset-eval against girth (the anchor) on generated data, same run.

    python benchmarks/bench_irt.py [--models 30] [--items 12000] [--skip-eval] [--skip-girth]

Data: a 2PL with theta ~ N(0, 1), log a ~ N(0, 0.4^2), b ~ N(-0.5, 1.2^2) (LLM-like: many easy
items). Prints the mrcstats and girth (``twopl_mml``, fixed 41-point quadrature) wall times, their
ratio, the recovery of both (correlation with the truth, RMSE of b) and both marginal
log-likelihoods evaluated by the same adaptive integrator; then the wall time of
``subset_eval`` with 5 folds, ks 25..400 and the 4 methods (1 seed).
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd


def simulate(J: int, I: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    th = rng.normal(size=J)
    a = np.exp(rng.normal(0, 0.4, I))
    b = rng.normal(-0.5, 1.2, I)
    y = rng.random((J, I)) < 1 / (1 + np.exp(-a * (th[:, None] - b)))
    log = pd.DataFrame({"model": np.repeat([f"m{j:03d}" for j in range(J)], I),
                        "item": np.tile([f"i{i:05d}" for i in range(I)], J),
                        "correct": pd.array(y.ravel(), dtype="boolean")})
    return log, y, th, a, b


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=30)
    ap.add_argument("--items", type=int, default=12000)
    ap.add_argument("--skip-eval", action="store_true")
    ap.add_argument("--skip-girth", action="store_true")
    args = ap.parse_args()
    from mrcstats.models.irt import fit_irt, marginal_loglik, response_matrix

    log, y, _th, a, b = simulate(args.models, args.items)
    rm = response_matrix(log)
    t0 = time.perf_counter()
    fit = fit_irt(rm, "2pl")
    t_ours = time.perf_counter() - t0
    pos = {f"i{i:05d}": i for i in range(args.items)}
    idx = np.array([pos[i] for i in fit.items["item"]])
    print(f"data: {args.models} models x {args.items} items ({int(rm.fit_mask.sum())} with variation)")
    print(f"mrcstats 2PL: {t_ours:.2f} s, {fit.iterations} iterations, converged={fit.converged}, "
          f"logLik {fit.loglik:.3f}, corr(a) {np.corrcoef(fit.items['a'], a[idx])[0, 1]:.3f}, "
          f"corr(b) {np.corrcoef(fit.items['b'], b[idx])[0, 1]:.3f}, "
          f"RMSE(b) {np.sqrt(np.mean((fit.items['b'] - b[idx]) ** 2)):.3f}")
    if not args.skip_girth:
        try:
            from girth import twopl_mml
        except ImportError:
            print("girth not installed (pip install girth): no anchor timing")
        else:
            data = y[:, idx].T.astype(int)
            t0 = time.perf_counter()
            g = twopl_mml(data)
            t_girth = time.perf_counter() - t0
            ga, gb = np.asarray(g["Discrimination"]), np.asarray(g["Difficulty"])
            ll_g = marginal_loglik(ga, -ga * gb, rm.s[:, rm.fit_mask], rm.n[:, rm.fit_mask])
            print(f"girth twopl_mml: {t_girth:.2f} s, logLik (same integrator) {ll_g:.3f}, "
                  f"corr(a) {np.corrcoef(ga, a[idx])[0, 1]:.3f}, corr(b) {np.corrcoef(gb, b[idx])[0, 1]:.3f}, "
                  f"RMSE(b) {np.sqrt(np.mean((gb - b[idx]) ** 2)):.3f}")
            print(f"ratio girth / mrcstats: {t_girth / t_ours:.2f}x")
    if not args.skip_eval:
        from mrcstats.stats.subsets import subset_eval

        t0 = time.perf_counter()
        res = subset_eval(log, ks=[25, 50, 100, 200, 400], folds=5, seeds=1, progress=False)
        t_eval = time.perf_counter() - t0
        print(f"subset_eval (5 folds, 5 ks, 4 methods, 1 seed): {t_eval:.1f} s")
        print(res.table("mae").round(4).to_string())


if __name__ == "__main__":
    main()
