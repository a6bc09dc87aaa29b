"""Time ``mrcstats.emmeans`` + ``pairs`` against R's emmeans on the same fitted model, same run.

Data: seed-003-like, ``correct ~ scaled_tok * LLM + cond + (1 | passage)`` with ``LLM`` sum-coded
(3 models) and a 2-level ``cond``. mrcstats fits natively; R fits the same CSV with lme4. Timed:

* mrcstats: ``emmeans(m, "LLM", by="cond", type="response")`` + ``pairs(em)`` (Tukey), best of
  ``--repeat`` runs, data and fit already in memory;
* R: ``system.time(summary(pairs(em <- emmeans(m, "LLM", by = "cond", type = "response"))))``
  plus ``summary(em)``, best of ``--repeat`` runs, fit already in memory.

The ratio R / mrcstats is printed with the largest difference of the two ``prob`` columns; R fits
with lme4's default ``glmerControl()`` (a converged ``tolPwrss = 1e-10`` fit takes minutes here), so
that difference is the native-vs-default-lme4 fit difference (~1e-4), not emmeans's (see
tests/models/test_emmeans.py for exact parity).

Usage::

    python benchmarks/bench_emmeans.py                 # 10k and 50k rows
    python benchmarks/bench_emmeans.py --rows 10000 --repeat 5
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

FORMULA = "correct ~ scaled_tok * LLM + cond + (1 | passage)"

R_SCRIPT = r"""
suppressMessages({library(lme4); library(emmeans)})
a <- commandArgs(TRUE)
d <- read.csv(a[1], stringsAsFactors = TRUE)
m <- suppressWarnings(glmer(as.formula(a[2]), data = d, family = binomial, contrasts = list(LLM = "contr.sum")))
best <- Inf
for (i in seq_len(as.integer(a[3]))) {
  t <- system.time({em <- emmeans(m, "LLM", by = "cond", type = "response"); s <- summary(em);
                    p <- summary(pairs(em))})[["elapsed"]]
  best <- min(best, t)
}
cat(sprintf('{"seconds": %.6f, "prob": [%s]}\n', best, paste(sprintf("%.12g", s$prob), collapse = ",")))
"""


def make(rows: int, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    groups = max(rows // 10, 2)
    g = rng.integers(0, groups, rows)
    llm = rng.choice(np.array(["davinci2", "davinci3", "gpt4"]), rows)
    cond = rng.choice(np.array(["regular", "strict"]), rows)
    tok = rng.normal(size=rows)
    eta = (1.0 + 0.1 * tok - 0.8 * (llm == "davinci2") + 0.8 * (llm == "gpt4") - 0.5 * (cond == "strict")
           + rng.normal(0, 0.75, groups)[g])
    y = (rng.random(rows) < 1 / (1 + np.exp(-eta))).astype(int)
    return pd.DataFrame({"passage": [f"p{i}" for i in g], "LLM": llm, "cond": cond, "scaled_tok": tok, "correct": y})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[10_000, 50_000])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    import mrcstats

    rscript = shutil.which("Rscript")
    print(f"{'rows':>8} {'mrcstats s':>11} {'R emmeans s':>12} {'ratio':>7} {'max|Δprob|':>11}")
    for n in args.rows:
        df = make(n)
        m = mrcstats.glmer(FORMULA, df, contrasts={"LLM": "sum"})
        best = float("inf")
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            em = mrcstats.emmeans(m, "LLM", by="cond", type="response")
            em.to_frame()
            mrcstats.pairs(em).to_frame()
            best = min(best, time.perf_counter() - t0)
        r_s, diff = float("nan"), float("nan")
        if rscript:
            with tempfile.TemporaryDirectory() as tmp:
                csv, script = Path(tmp) / "d.csv", Path(tmp) / "emm.R"
                df.to_csv(csv, index=False)
                script.write_text(R_SCRIPT)
                res = subprocess.run([rscript, str(script), str(csv), FORMULA, str(args.repeat)],
                                     capture_output=True, text=True, check=False, timeout=3600)
                if res.returncode == 0:
                    out = json.loads(res.stdout.strip().splitlines()[-1])
                    r_s = out["seconds"]
                    diff = float(np.max(np.abs(np.asarray(out["prob"]) - em.to_frame()["prob"].to_numpy())))
                else:
                    print(res.stderr[-500:], file=sys.stderr)
        ratio = r_s / best if best > 0 else float("nan")
        print(f"{n:>8} {best:>11.4f} {r_s:>12.4f} {ratio:>6.0f}x {diff:>11.1e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
