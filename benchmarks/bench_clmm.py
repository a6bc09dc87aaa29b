"""Time ``mrcstats.clmm`` against R's ``ordinal::clmm()`` on the same ratings, same run; prints the ratio.

Case (issue 26): 20,000 judge ratings on a 1..5 scale, ``rating ~ x + LLM + (1 | item) + (1 | model)`` with
400 items crossed with 20 models (logit link). mrcstats' time is the whole call (formula and data to the result
with standard errors); R's is ``system.time`` of ``clmm()`` with ordinal's defaults (which includes its Hessian).
Both logLiks are printed (R's default inner tolerance can leave its Laplace log-likelihood a little lower).

Usage::

    python benchmarks/bench_clmm.py
    python benchmarks/bench_clmm.py --rows 5000 --link probit
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import pandas as pd

FORMULA = "rating ~ x + LLM + (1 | item) + (1 | model)"

R_SCRIPT = r"""
suppressMessages(library(ordinal))
a <- commandArgs(TRUE)
d <- read.csv(a[1], stringsAsFactors = TRUE)
d$rating <- factor(d$rating, ordered = TRUE)
t1 <- system.time(m <- clmm(as.formula(a[2]), data = d, link = a[3]))[["elapsed"]]
cat(sprintf("%.6f\t%.10f\n", t1, as.numeric(logLik(m))))
"""


def make(rows: int, items: int, models: int, seed: int = 1) -> pd.DataFrame:
    """Ratings 1..5 from a logistic latent variable with crossed item and model intercepts."""
    rng = np.random.default_rng(seed)
    item, model = rng.integers(0, items, rows), rng.integers(0, models, rows)
    x = rng.normal(size=rows)
    llm = rng.choice(["a", "b"], size=rows)
    eta = 0.5 * x - 0.3 * (llm == "b") + rng.normal(0, 1.0, items)[item] + rng.normal(0, 0.5, models)[model]
    rating = 1 + np.searchsorted([-1.5, -0.3, 0.8, 2.0], eta + rng.logistic(size=rows))
    return pd.DataFrame({"rating": rating, "x": x, "LLM": llm, "item": [f"q{i:04d}" for i in item],
                         "model": [f"m{m:02d}" for m in model]})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--items", type=int, default=400)
    ap.add_argument("--models", type=int, default=20)
    ap.add_argument("--link", choices=("logit", "probit"), default="logit")
    ap.add_argument("--no-r", action="store_true")
    args = ap.parse_args(argv)
    import mrcstats

    mrcstats.clmm(FORMULA, make(1_000, 30, 4), link=args.link)       # warm-up: the lazy imports are not the fit
    df = make(args.rows, args.items, args.models)
    rscript = shutil.which("Rscript")
    print(f"load average {os.getloadavg()[0]:.2f}; {args.rows:,} ratings, {args.items} items x {args.models} models, "
          f"{args.link}")
    t0 = time.perf_counter()
    m = mrcstats.clmm(FORMULA, df, link=args.link)
    ours = time.perf_counter() - t0
    line = f"mrcstats clmm {ours:8.3f} s (logLik {m.loglik:.6f}, {m.niter} iterations)"
    if rscript and not args.no_r:
        with tempfile.TemporaryDirectory() as tmp:
            csv, script = os.path.join(tmp, "d.csv"), os.path.join(tmp, "b.R")
            df.to_csv(csv, index=False)
            with open(script, "w") as fh:
                fh.write(R_SCRIPT)
            out = subprocess.run([rscript, script, csv, FORMULA, args.link], capture_output=True, text=True,
                                 check=True).stdout
        t1, ll = (float(v) for v in out.split())
        line += f" | ordinal::clmm {t1:8.3f} s (logLik {ll:.6f}) | ratio {t1 / ours:6.1f}x"
    print(line, flush=True)
    print(f"load average after {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
