"""maskcode (MskQA) wide -> long reader."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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


_SUFFIX = {"": "regular", "_filtered": "partial", "_no_meaning": "strict", "_no_verb": "lenient"}


@st.composite
def _wide(draw):
    n = draw(st.integers(1, 12))
    model = draw(st.text(alphabet="abcxyz019:._-", min_size=1, max_size=12))
    rates = draw(st.lists(st.integers(0, 20).map(lambda k: 5 * k), min_size=1, max_size=4, unique=True))
    n_opt = draw(st.lists(st.integers(2, 5), min_size=n, max_size=n))
    gold = [draw(st.integers(0, k - 1)) for k in n_opt]
    answers = {r: draw(st.lists(st.sampled_from(["", "-1", "0", "1", "2", "3", "4", "5", "6", "x", "2.0", "1.5"]),
                                min_size=n, max_size=n)) for r in rates}
    trial = draw(st.integers(0, 30))
    suffix = draw(st.sampled_from(list(_SUFFIX)))
    return model, rates, n_opt, gold, answers, trial, suffix


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_wide())
def test_wide_to_long_property(tmp_path, case):
    model, rates, n_opt, gold, answers, trial, suffix = case
    n = len(gold)
    df = pd.DataFrame({"question_id": [f"q{i}" for i in range(n)],
                       "choices": [repr([f"o{j}" for j in range(k)]) for k in n_opt],
                       "answer": [f"['{g}']" for g in gold]})
    for r in rates:
        df[f"answer_{model}_{r}"] = answers[r]
    p = tmp_path / f"QA_masker_9b_{trial}{suffix}.csv"
    df.to_csv(p, index=False)
    log = read_log(p)
    assert len(log) == n * len(rates)
    assert set(log["model"]) == {model}
    assert set(log["trial"]) == {trial} and set(log["condition"]) == {_SUFFIX[suffix]}
    for r in rates:
        cell = log[log["masking_rate"] == r].set_index("item")
        for i in range(n):
            a = answers[r][i]
            try:
                x = float(a)
            except ValueError:
                x = float("nan")
            valid = not math.isnan(x) and x.is_integer() and 1 <= x <= n_opt[i]
            got = cell.loc[f"q{i}", "correct"]
            if valid:
                assert got == (int(x) - 1 == gold[i])
            else:
                assert pd.isna(got)
