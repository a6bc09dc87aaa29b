"""Coverage of ``GlmerResult.confint`` intervals in a small simulation (issue 17).

Datasets are simulated from a known random-intercept-and-slope model
``correct ~ x + (1 + x | g)`` (or ``--model ri``: ``correct ~ x + (1 | g)``), each is fitted,
and the intervals of each method are checked for covering the true parameter values
(SDs, correlation, fixed effects, on lme4's ``.sig``/fixef scale). Prints, per method and
parameter, the share of intervals that cover the truth with its binomial standard error.

Usage::

    python benchmarks/coverage_confint.py --datasets 40 --nsim 200 --methods boot,Wald --seed 1
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np
import pandas as pd


def simulate(rng: np.random.Generator, model: str, groups: int, per: int):
    n = groups * per
    g = np.repeat(np.arange(groups), per)
    x = rng.normal(size=n)
    beta = np.array([0.3, 0.6])
    if model == "ri":
        sd = 0.8
        b = rng.normal(0, sd, groups)
        eta = beta[0] + beta[1] * x + b[g]
        truth = {".sig01": sd, "(Intercept)": beta[0], "x": beta[1]}
    else:
        sd1, sd2, rho = 0.8, 0.4, 0.3
        S = np.array([[sd1 ** 2, rho * sd1 * sd2], [rho * sd1 * sd2, sd2 ** 2]])
        b = rng.multivariate_normal([0, 0], S, size=groups)
        eta = beta[0] + beta[1] * x + b[g, 0] + b[g, 1] * x
        truth = {".sig01": sd1, ".sig02": rho, ".sig03": sd2, "(Intercept)": beta[0], "x": beta[1]}
    y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(int)
    return pd.DataFrame({"correct": y, "x": x, "g": [f"g{i:03d}" for i in g]}), truth


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", type=int, default=40)
    ap.add_argument("--nsim", type=int, default=200, help="bootstrap samples per dataset")
    ap.add_argument("--groups", type=int, default=40)
    ap.add_argument("--per", type=int, default=25)
    ap.add_argument("--model", choices=("ri", "slope"), default="ri")
    ap.add_argument("--methods", default="boot,Wald,profile")
    ap.add_argument("--level", type=float, default=0.95)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    from mrcstats.models import glmer

    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    formula = "correct ~ x + (1 | g)" if args.model == "ri" else "correct ~ x + (1 + x | g)"
    rng = np.random.default_rng(args.seed)
    hits: dict[tuple[str, str], list[bool]] = {}
    failed = 0
    t0 = time.perf_counter()
    print(f"load average at start: {os.getloadavg()}", flush=True)
    for k in range(args.datasets):
        df, truth = simulate(rng, args.model, args.groups, args.per)
        m = glmer(formula, df)
        for meth in methods:
            ci = m.confint(meth, level=args.level, nsim=args.nsim, seed=args.seed * 100_000 + k)
            if meth == "boot":
                failed += ci.n_failed
            for name, v in truth.items():
                lo, hi = ci.intervals.loc[name]
                if np.isnan(lo) or np.isnan(hi):
                    continue
                hits.setdefault((meth, name), []).append(bool(lo <= v <= hi))
        print(f"dataset {k + 1}/{args.datasets} done ({time.perf_counter() - t0:.0f}s)", file=sys.stderr, flush=True)
    print(f"{args.datasets} datasets of {args.groups} groups x {args.per} rows, {formula}, level {args.level}, "
          f"bootstrap nsim={args.nsim} (failed refits: {failed}); {time.perf_counter() - t0:.0f}s")
    for (meth, name), h in sorted(hits.items()):
        p = float(np.mean(h))
        se = math.sqrt(p * (1 - p) / len(h)) if h else float("nan")
        print(f"{meth:8s} {name:12s} coverage {p:.3f} (SE {se:.3f}, n={len(h)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
