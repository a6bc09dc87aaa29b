"""simulate_log: shape, determinism, schema, and recovery of the true GLMM (statsmodels / lme4)."""
from __future__ import annotations

import json
import subprocess

import pandas as pd
import pytest

from mrcstats.io import CANONICAL_COLUMNS, read_log, write_log
from mrcstats.tasks.simulate import simulate_log, true_accuracy


def test_default_shape_and_schema():
    log = simulate_log(0).log
    assert len(log) == 3 * 12 * 3 * 4 * 21 * 2
    assert list(log.columns[:len(CANONICAL_COLUMNS)]) == list(CANONICAL_COLUMNS)
    assert sorted(log["condition"].unique()) == ["lenient", "partial", "regular", "strict"]
    assert sorted(log["masking_rate"].unique()) == [float(r) for r in range(0, 101, 5)]
    assert log["cluster"].nunique() == 12 and log["item"].nunique() == 36
    assert log.groupby("item")["cluster"].nunique().eq(1).all()
    assert 0 < log["correct"].isna().mean() < 0.05
    assert log["question"].str.split().str[0].isin(["What", "Which", "Who", "Why", "How", "When", "Where"]).all()
    assert (log["passage"].str.split().str.len() == log["n_tokens"]).all()
    z = log.drop_duplicates("cluster")["scaled_tok"]
    assert abs(z.mean()) < 1e-12 and z.std(ddof=1) == pytest.approx(1.0)


def test_deterministic_and_roundtrip(tmp_path):
    sa, sb = simulate_log(3), simulate_log(3)
    a, b = sa.log, sb.log
    pd.testing.assert_frame_equal(a, b)
    assert sa.truth == sb.truth
    assert json.loads(json.dumps(sa.to_dict()))["fixef"] == sa.truth["fixef"]
    assert not simulate_log(4).log["correct"].equals(a["correct"])
    back = read_log(write_log(a, tmp_path / "s.parquet"))
    pd.testing.assert_frame_equal(a, back)


def test_masking_lowers_accuracy_by_condition():
    sim = simulate_log(1, trials=3)
    log = sim.log
    acc = log.groupby(["condition", log["masking_rate"] >= 50])["correct"].apply(lambda s: s.fillna(False).mean())
    for c in ("regular", "partial", "strict", "lenient"):
        assert acc[(c, True)] < acc[(c, False)]
    p = true_accuracy(sim)
    assert abs(log["correct"].astype(float).mean() - p.mean()) < 0.03


@pytest.mark.r
def test_glmm_truth_recovered_by_lme4(rscript, tmp_path):
    sim = simulate_log(7, n_passages=80, questions_per_passage=4, conditions=("regular",), masking_rates=(0,),
                       trials=6, invalid_rate=0.0)
    log = sim.log
    csv = tmp_path / "sim.csv"
    log[["model", "cluster", "scaled_tok", "correct"]].assign(correct=log["correct"].astype(int)).to_csv(
        csv, index=False)
    code = f"""
    suppressMessages(library(lme4))
    d <- read.csv("{csv}")
    f <- glmer(correct ~ scaled_tok * model + (1 | cluster), data = d, family = binomial)
    cat(jsonlite::toJSON(list(fixef = as.list(fixef(f)), se = as.list(sqrt(diag(as.matrix(vcov(f))))),
                               sd = attr(VarCorr(f)$cluster, "stddev")[[1]]), digits = NA, auto_unbox = TRUE))
    """
    r = subprocess.run([rscript, "-e", code], check=False, capture_output=True, text=True, timeout=300)
    if r.returncode != 0 and "jsonlite" in r.stderr:
        pytest.skip("R package jsonlite missing")
    assert r.returncode == 0, r.stderr
    fit = json.loads(r.stdout)
    truth = sim.truth
    for name, val in truth["fixef"].items():
        est, se = fit["fixef"][name], fit["se"][name]
        assert abs(est - val) < 4 * se, (name, est, val, se)
    assert abs(fit["sd"] - truth["sd_passage"]) < 0.5
