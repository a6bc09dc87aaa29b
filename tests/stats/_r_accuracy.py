"""R's per-model accuracy intervals for the summary tests: prop.test (Wilson), sandwich::vcovCL (cluster SE),
and with trials the mean, SD and t.test over the per-trial accuracies; the clustered SE of a mean graded
score (r_score_se)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest


def r_per_model(rscript: str, d: pd.DataFrame, tmp_path: Path, trials: bool = False) -> dict[str, list[float]]:
    """``{model: [wilson_low, wilson_high, se_cluster, se_base, clustered_low, clustered_high(, mean, sd, t_low,
    t_high)]}`` from R for the rows
    of ``d`` (columns model, cluster, y 0/1 and, with ``trials``, trial): se_cluster is
    ``sandwich::vcovCL(type = "HC1", cadjust = TRUE)`` (CR1) and se_base the same from base R's formula
    ``sqrt(G/(G-1) * sum(tapply(y - mean(y), cluster, sum)^2)) / n``; skips when jsonlite or sandwich is
    missing. The clustered interval is Wilson's formula at n_eff = min(p (1 - p) / se_cluster^2, n) (Korn &
    Graubard 1998) with the critical value qt(0.975, G - 1) (Inspect's ci_wilson(cluster=)), written out in R."""
    csv = tmp_path / "r_per_model.csv"
    d[["model", "cluster", "y", *(["trial"] if trials else [])]].to_csv(csv, index=False)
    extra = ("acc <- tapply(s$y, s$trial, mean); tt <- t.test(acc)\n"
             "      r <- c(r, mean(acc), sd(acc), tt$conf.int[1], tt$conf.int[2])") if trials else ""
    code = f"""
    d <- read.csv("{csv}")
    out <- list()
    for (m in sort(unique(d$model))) {{
      s <- d[d$model == m, ]
      pt <- prop.test(sum(s$y), nrow(s), correct = FALSE)
      v <- sandwich::vcovCL(lm(y ~ 1, data = s), cluster = ~cluster, type = "HC1", cadjust = TRUE)
      G <- length(unique(s$cluster))
      base <- sqrt(G / (G - 1) * sum(tapply(s$y - mean(s$y), s$cluster, sum)^2)) / nrow(s)
      p <- mean(s$y); ne <- min(p * (1 - p) / v[1, 1], nrow(s)); z <- qt(0.975, G - 1)
      cw <- (p + z^2 / (2 * ne)) / (1 + z^2 / ne); hw <- z / (1 + z^2 / ne) * sqrt(p * (1 - p) / ne + z^2 / (4 * ne^2))
      r <- c(pt$conf.int[1], pt$conf.int[2], sqrt(v[1, 1]), base, cw - hw, cw + hw)
      {extra}
      out[[m]] <- r
    }}
    cat(jsonlite::toJSON(out, digits = NA))
    """
    return run_r_json(rscript, code)


def run_r_json(rscript: str, code: str):
    """Run R ``code`` that prints one JSON value (jsonlite) and return it; skips without jsonlite/sandwich."""
    r = subprocess.run([rscript, "-e", code], check=False, capture_output=True, text=True, timeout=120)
    if r.returncode != 0 and ("jsonlite" in r.stderr or "sandwich" in r.stderr):
        pytest.skip("R package jsonlite or sandwich missing")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def r_score_se(rscript: str, d: pd.DataFrame, tmp_path: Path, cadjust: bool = True) -> dict[str, list[float]]:
    """``{model: [mean, se_cluster]}`` of a graded score from R: ``sandwich::vcovCL(lm(y ~ 1), cluster =
    ~cluster, type = "HC1", cadjust = cadjust)`` per model (CR1 by default), for the rows of ``d`` (columns model, cluster,
    y: the score, invalid rows already 0 or left out); ``cadjust`` is vcovCL's G/(G-1) factor."""
    csv = tmp_path / "r_scores.csv"
    d[["model", "cluster", "y"]].to_csv(csv, index=False)
    code = f"""
    d <- read.csv("{csv}")
    out <- list()
    for (m in sort(unique(d$model))) {{
      s <- d[d$model == m, ]
      v <- sandwich::vcovCL(lm(y ~ 1, data = s), cluster = ~cluster, type = "HC1", cadjust = {str(cadjust).upper()})
      out[[m]] <- c(mean(s$y), sqrt(v[1, 1]))
    }}
    cat(jsonlite::toJSON(out, digits = NA))
    """
    return run_r_json(rscript, code)
