"""maskcode (MskQA) wide -> long reader."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mrcstats.io import read_log
from mrcstats.io.mskqa import parse_mskqa_name


@pytest.mark.parametrize("stem,expected", [
    ("RQA_gemma2_9b_10_filtered", (10, "partial")),
    ("RQA_gemma2_9b_3_no_meaning", (3, "strict")),
    ("RQA_gemma2_9b_7_no_verb", (7, "lenient")),
    ("RQA_gemma2_9b_1", (1, "regular")),
    ("results", (0, "regular")),
])
def test_name(stem, expected):
    assert parse_mskqa_name(stem) == expected


def _write(tmp_path, name="AQA_x_2_no_verb.csv"):
    df = pd.DataFrame({
        "question_id": ["q1", "q2", "q3"],
        "question_sentence": ["What?", "Which?", "Who?"],
        "choices": ["['a', 'b', 'c']", "['a', 'b']", "['a', 'b', 'c', 'd']"],
        "answer": ["['0']", "['1']", "['3']"],
        "answer_gpt-4o:mini.v1_0": [1, 2, 5],        # q3: 5 > 4 options -> invalid
        "answer_gpt-4o:mini.v1_50": ["-1", "x", "4"],  # failed call, non-numeric -> invalid
        "query_0": ["p", "p", "p"],
        "query_50": ["p", "p", "p"],
    })
    p = tmp_path / name
    df.to_csv(p, index=False)
    return p


def test_small_file(tmp_path):
    log = read_log(_write(tmp_path))
    assert len(log) == 6
    assert set(log["model"]) == {"gpt-4o:mini.v1"}
    assert set(log["condition"]) == {"lenient"} and set(log["trial"]) == {2}
    r0 = log[log["masking_rate"] == 0].set_index("item")
    assert r0["correct"].tolist()[:2] == [True, True] and pd.isna(r0.loc["q3", "correct"])
    r50 = log[log["masking_rate"] == 50].set_index("item")
    assert r50["correct"].isna().tolist() == [True, True, False]
    assert r50.loc["q3", "correct"] == True
    assert r50.loc["q3", "gold"] == "4" and r50.loc["q3", "pred"] == "4"
    assert "query_0" not in log.columns and log["question"].iloc[0] == "What?"


def test_aqua_correct_column(tmp_path):
    df = pd.DataFrame({"question_id": [1, 2], "options": ["['A)1', 'B)2']", "['A)1', 'B)2']"],
                       "correct": [0, 1], "answer_m_0": [1, 1]})
    p = tmp_path / "AQuA_m_0.csv"
    df.to_csv(p, index=False)
    log = read_log(p, format="mskqa")
    assert log["correct"].tolist() == [True, False]
    assert "correct_source" in log.columns


@pytest.mark.shared
def test_rqa_shared(shared_data):
    folder = shared_data / "mskqa" / "output" / "RQA"
    log = read_log(folder)
    assert len(log) == 100 * 21 * 4 * 10
    assert log.groupby(["condition", "masking_rate"]).size().eq(1000).all()
    assert sorted(log["condition"].unique()) == ["lenient", "partial", "regular", "strict"]
    assert sorted(log["trial"].unique()) == list(range(1, 11))
    # exact accuracy per cell, recomputed from the raw wide file by hand
    raw = pd.read_csv(folder / "RQA_gemma2_9b_3_filtered.csv")
    col = "answer_gpt-4o-mini-2024-07-18_35"
    gold = raw["answer"].str.extract(r"(\d+)")[0].astype(int).to_numpy()
    n_opt = raw["choices"].map(lambda s: len(eval(s))).to_numpy()
    ans = pd.to_numeric(raw[col], errors="coerce").to_numpy()
    valid = (ans >= 1) & (ans <= n_opt)
    expect = np.sum(valid & (ans - 1 == gold))
    cell = log[(log["trial"] == 3) & (log["condition"] == "partial") & (log["masking_rate"] == 35)]
    assert int(cell["correct"].fillna(False).sum()) == expect
    assert int(cell["correct"].isna().sum()) == int((~valid).sum())
