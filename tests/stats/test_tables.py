"""Table builders from a canonical log: wh-word, condition x outcome, confusion matrices (seeds 003, 004)."""
from __future__ import annotations

import json
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mrcstats.errors import InputError
from mrcstats.stats.contingency import ChisqResult, FisherResult
from mrcstats.stats.discrimination import cluster_difficulty
from mrcstats.stats.tables import condition_outcome_table, confusion_table, crosstab, wh_word_table

R_SCRIPT = Path(__file__).resolve().parents[2] / "R" / "fisher_chisq.R"


def table13_log() -> pd.DataFrame:
    """Seed 004 Table 13 as a log: factual 11 right / 0 wrong, counterfactual 8 right / 9 wrong."""
    rows = ([("factual", True)] * 11 + [("counterfactual", True)] * 8 + [("counterfactual", False)] * 9)
    log = pd.DataFrame({"model": "gpt-4", "item": [f"q{i}" for i in range(len(rows))],
                        "condition": [c for c, _ in rows], "correct": [v for _, v in rows]})
    log["correct"] = log["correct"].astype("boolean")
    return log


def test_condition_outcome_reproduces_table13() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = condition_outcome_table(table13_log())
    assert list(res.table.columns) == ["right", "wrong", "invalid"]
    assert res.table.loc["factual"].tolist() == [11, 0, 0]
    assert res.table.loc["counterfactual"].tolist() == [8, 9, 0]
    assert isinstance(res.test, FisherResult) and round(res.test.p, 4) == 0.0039
    assert res.test.table.dropped_cols == ("invalid",)
    d = res.to_dict()
    assert d["test"]["p"] == res.test.p and d["columns"] == ["right", "wrong", "invalid"]


def test_condition_outcome_counts_invalid() -> None:
    log = table13_log()
    log.loc[0, "correct"] = pd.NA
    res = condition_outcome_table(log)
    assert res.table.loc[log.loc[0, "condition"], "invalid"] == 1


def confusion_log() -> pd.DataFrame:
    """Seed 004 Tables 14 and 15: gold always 'SVO&SOV', predictions by condition."""
    preds = {"SOV 1st": {"SOV": 155, "SVO": 39, "SVO&SOV": 6}, "SVO 1st": {"SOV": 37, "SVO": 135, "SVO&SOV": 28}}
    rows = []
    for cond, counts in preds.items():
        for lab, k in counts.items():
            rows += [{"model": "gpt-4", "condition": cond, "gold": "SVO&SOV", "pred": lab}] * k
    log = pd.DataFrame(rows)
    log["item"] = [f"i{i}" for i in range(len(log))]
    return log


def test_confusion_tables_14_15_and_16(rscript, tmp_path) -> None:
    log = confusion_log()
    labels = ["SOV", "SVO", "VSO", "SVO&SOV"]
    # only one gold label: nothing to test
    with pytest.raises(InputError, match="1 x"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        confusion_table(log[log["condition"] == "SOV 1st"], labels=labels)
    t14 = pd.crosstab(log["gold"], log["pred"]).reindex(index=labels, columns=labels, fill_value=0)
    assert t14.loc["SVO&SOV"].tolist() == [192, 174, 0, 34]
    res = crosstab(log, "condition", "pred", test="chisq", col_order=["SOV", "SVO", "SVO&SOV"])
    assert res.table.to_numpy().tolist() == [[155, 39, 6], [37, 135, 28]]
    assert isinstance(res.test, ChisqResult) and res.test.p < 1e-5
    csv = tmp_path / "t16.csv"
    res.table.to_csv(csv)
    out = subprocess.run([rscript, str(R_SCRIPT), str(csv)], check=False, capture_output=True, text=True, timeout=120)
    r = json.loads(out.stdout)[0]
    assert abs(res.test.statistic - r["chisq"]["statistic"]) <= 1e-9 * r["chisq"]["statistic"]


def test_confusion_table_with_two_gold_labels() -> None:
    log = pd.DataFrame({"gold": list("AABBBAB"), "pred": list("ABBBAAB"), "model": "m"})
    res = confusion_table(log, test="fisher")
    assert res.table.to_numpy().tolist() == [[2, 1], [1, 3]]
    assert res.test.odds_ratio is not None


def wh_fixture():
    rng = np.random.default_rng(4)
    words = ["What", "Which", "Why", "How", "Who", "Other"]
    rows, feats = [], []
    for c in range(20):
        for i in range(4):
            it = f"c{c}#{i}"
            p = [0.35, 0.1, 0.05, 0.2, 0.1, 0.2] if c < 10 else [0.15, 0.3, 0.2, 0.05, 0.05, 0.25]
            feats.append({"item": it, "wh_word": str(rng.choice(words, p=p))})
            for m in ("a", "b"):
                rows.append({"model": m, "cluster": f"c{c}", "item": it, "correct": bool(rng.random() < 0.6)})
    feats[0]["wh_word"] = None
    log = pd.DataFrame(rows)
    log["correct"] = log["correct"].astype("boolean")
    return log, pd.DataFrame(feats)


def test_wh_word_table_counts_each_item_once(capsys) -> None:
    log, feats = wh_fixture()
    groups = {"Hardest": [f"c{c}" for c in range(10)], "Easiest": [f"c{c}" for c in range(10, 20)]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = wh_word_table(log, feats, groups, seed=1)
    assert list(res.table.index) == ["Hardest", "Easiest"]
    assert res.table.to_numpy().sum() == 79  # 80 items, one without a wh-word
    assert res.skipped == {"items without wh_word": 1}
    assert "without wh_word" in capsys.readouterr().err
    assert list(res.table.columns)[:2] == ["What", "Which"]
    assert res.test.method == "monte-carlo" and res.test.B == 2000
    ex = wh_word_table(log, feats, groups, simulate=False)
    assert 0 <= ex.test.p <= 1 and ex.test.method == "exact"


def test_wh_word_table_from_cluster_difficulty() -> None:
    log, feats = wh_fixture()
    diff = cluster_difficulty({f"c{c}": float(c) for c in range(20)}, intercept=0.0, n=5)
    res = wh_word_table(log, feats, diff, simulate=False)
    assert list(res.table.index) == ["Easiest", "Hardest"]
    with pytest.raises(InputError, match="both group"):
        wh_word_table(log, feats, {"x": ["c1"], "y": ["c1"]})


def test_large_table_falls_back_to_monte_carlo(capsys) -> None:
    rng = np.random.default_rng(0)
    n = 4000
    log = pd.DataFrame({"model": "m", "item": [f"i{i}" for i in range(n)], "condition": rng.choice(list("ABCD"), n),
                        "correct": pd.array(np.where(rng.random(n) < 0.1, None, rng.random(n) < 0.6),
                                            dtype="boolean")})
    res = condition_outcome_table(log, seed=1)
    assert res.test.method == "monte-carlo" and 0 < res.test.p <= 1
    assert "Monte Carlo" in capsys.readouterr().err


def test_real_elagent_task5_condition_outcome_matches_r(shared_data, rscript, tmp_path) -> None:
    """ELAGENT Task 5 (GPT-4, 5 variants x 250 items): condition x outcome, exact Fisher vs R."""
    from mrcstats.io import read_log

    log = read_log(shared_data / "elagent" / "results" / "task 5", model="gpt-4-1106-preview")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = condition_outcome_table(log)
    assert res.table.to_numpy().sum() == len(log) == 1250
    assert res.test.method == "exact"
    csv = tmp_path / "task5.csv"
    res.table.to_csv(csv)
    out = subprocess.run([rscript, str(R_SCRIPT), str(csv)], check=False, capture_output=True, text=True,
                         timeout=300)
    r = json.loads(out.stdout)[0]
    assert abs(res.test.p - r["fisher"]["p"]) <= 1e-6 * r["fisher"]["p"]
