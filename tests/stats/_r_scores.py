"""R's clustered SE of a mean graded score: sandwich::vcovCL on lm(score ~ 1) with the cluster, per model."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest


def r_score_se(rscript: str, d: pd.DataFrame, tmp_path: Path, cadjust: bool = False) -> dict[str, list[float]]:
    """``{model: [mean, se_cluster]}`` from R for the rows of ``d`` (columns model, cluster, y: the score,
    invalid rows already 0 or left out); ``cadjust`` is vcovCL's G/(G-1) factor. Skips without sandwich."""
    csv = tmp_path / "r_scores.csv"
    d[["model", "cluster", "y"]].to_csv(csv, index=False)
    code = f"""
    d <- read.csv("{csv}")
    out <- list()
    for (m in sort(unique(d$model))) {{
      s <- d[d$model == m, ]
      v <- sandwich::vcovCL(lm(y ~ 1, data = s), cluster = ~cluster, type = "HC0", cadjust = {str(cadjust).upper()})
      out[[m]] <- c(mean(s$y), sqrt(v[1, 1]))
    }}
    cat(jsonlite::toJSON(out, digits = NA))
    """
    r = subprocess.run([rscript, "-e", code], check=False, capture_output=True, text=True, timeout=120)
    if r.returncode != 0 and ("jsonlite" in r.stderr or "sandwich" in r.stderr):
        pytest.skip("R package jsonlite or sandwich missing")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)
