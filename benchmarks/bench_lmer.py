"""Time ``mrcstats.lmer`` against lme4's ``lmer()`` (and lmerTest's Satterthwaite ``summary``) on the same data,
same run; prints the ratios.

Cases (issue 26): ``ri`` (``score ~ x + LLM + (1 | item)``, 100k rows, 2,000 items) and ``slopes``
(``score ~ x + LLM + (1 + x | item)``, same rows). mrcstats' time is ``fit_seconds`` plus the Satterthwaite
step (both inside ``lmer``: formula to result with df and p); R's is ``system.time`` of ``lmer()`` with lme4's
defaults, and separately of ``lmerTest::lmer()`` + ``summary()`` (what gives the same df and p).

Usage::

    python benchmarks/bench_lmer.py                  # both cases
    python benchmarks/bench_lmer.py --cases ri --rows 20000
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

FORMULAS = {"ri": "score ~ x + LLM + (1 | item)", "slopes": "score ~ x + LLM + (1 + x | item)"}

R_SCRIPT = r"""
suppressMessages(library(lmerTest))
a <- commandArgs(TRUE)
d <- read.csv(a[1], stringsAsFactors = TRUE)
f <- as.formula(a[2])
t1 <- system.time(m1 <- lme4::lmer(f, d))[["elapsed"]]
t2 <- system.time({m2 <- lmerTest::lmer(f, d); s <- summary(m2)$coefficients})[["elapsed"]]
cat(sprintf("%.6f\t%.6f\t%.10f\n", t1, t2, as.numeric(logLik(m1))))
"""


def make(rows: int, items: int, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    item = rng.integers(0, items, rows)
    x = rng.normal(size=rows)
    llm = rng.choice(["a", "b", "c", "d"], size=rows)
    b = rng.normal(size=(items, 2)) @ np.array([[0.6, 0.0], [0.1, 0.3]]).T
    score = 0.5 + 0.2 * x + 0.1 * (llm == "b") + b[item, 0] + b[item, 1] * x + rng.normal(0, 0.8, rows)
    return pd.DataFrame({"item": [f"q{i:05d}" for i in item], "LLM": llm, "x": x, "score": score})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="ri,slopes")
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--items", type=int, default=2_000)
    ap.add_argument("--no-r", action="store_true")
    args = ap.parse_args(argv)
    import mrcstats

    mrcstats.lmer(FORMULAS["ri"], make(2_000, 50))      # warm-up: the lazy imports are not the fit
    df = make(args.rows, args.items)
    rscript = shutil.which("Rscript")
    print(f"load average {os.getloadavg()[0]:.2f}; {args.rows:,} rows, {args.items:,} items")
    with tempfile.TemporaryDirectory() as tmp:
        csv = os.path.join(tmp, "d.csv")
        df.to_csv(csv, index=False)
        script = os.path.join(tmp, "b.R")
        with open(script, "w") as fh:
            fh.write(R_SCRIPT)
        for case in args.cases.split(","):
            f = FORMULAS[case]
            t0 = time.perf_counter()
            m = mrcstats.lmer(f, df)
            ours = time.perf_counter() - t0
            line = f"{case:7s} mrcstats {ours:8.3f} s (fit_seconds {m.fit_seconds:.3f})"
            if rscript and not args.no_r:
                out = subprocess.run([rscript, script, csv, f], capture_output=True, text=True, check=True).stdout
                t1, t2, ll = (float(v) for v in out.split())
                line += (f" | lme4 lmer {t1:8.3f} s ({t1 / ours:6.1f}x) | lmerTest lmer+summary {t2:8.3f} s "
                         f"({t2 / ours:6.1f}x) | logLik diff {m.loglik - ll:+.2e}")
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
