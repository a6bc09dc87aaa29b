"""ELAGENT scorers: bracket extraction, accuracy, exact match, BLEU, morph F1, log scoring."""
from __future__ import annotations

import json

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrcstats.cli import main
from mrcstats.errors import InputError
from mrcstats.tasks.elagent.scoring import (
    accuracy,
    bleu,
    exact_match,
    extract,
    extract_bracket,
    extract_choice,
    morph_f1,
    parse_number,
    score,
    score_log,
)


@pytest.mark.parametrize("text, want", [
    ("So the value is [4327.68].", "4327.68"), ("[8 + 9 = 17]", "17"), ("[1,234,567.5]", "1234567.5"),
    ("[1.777...]", "1.777"), ("first [1] then [2]", "2"), ("no brackets 42", None), ("[]", None), (None, None),
    (r"[\frac{1}{2}]", "frac{1}{2}"),
])
def test_extract_bracket(text, want):
    assert extract_bracket(text) == want


@pytest.mark.parametrize("text, want", [
    ("the answer is [B]", "B"), ("[(c)]", "C"), ("[D. '+' > '*']", "D"), ("[Z]", None), ("[X2 and X3]", None),
    ("[G]", "G"), ("nothing", None)])
def test_extract_choice(text, want):
    assert extract_choice(text) == want


def test_score_conventions():
    assert score("4327.68", "4327.7") is True           # round(x, 1) on both sides (ELAGENT Task 1)
    assert score("4327.6", "4327.7") is False
    assert score("41/3", "13.666666666666666") is True
    assert score(None, "13.7") is None and score("x", None) is None
    assert score("b", "B") is True and score("A", "B") is False
    assert score("tgt_the  S_tgt_cat", "tgt_the S_tgt_cat", "exact") is True
    assert extract("I think [C]", gold="C") == "C" and extract("so [12.5]", gold="12.5") == "12.5"
    with pytest.raises(InputError):
        score("1", "x", "numeric")
    with pytest.raises(InputError):
        score("1", "1", "fuzzy")


@given(st.integers(-10**9, 10**9), st.integers(1, 10**6))
def test_parse_number_round_trip(p, q):
    assert parse_number(f"{p}/{q}") == pytest.approx(p / q)
    assert parse_number(repr(p / q)) == pytest.approx(p / q)


def test_accuracy_and_exact_match():
    acc = accuracy([True, False, None, True])
    assert (acc.n, acc.correct, acc.invalid, acc.accuracy, acc.invalid_rate) == (4, 2, 1, 0.5, 0.25)
    assert exact_match(["a b", None, "c"], ["a  b", "x", "d"]) == pytest.approx(100 / 3)
    with pytest.raises(InputError, match="2 predictions but 1"):
        exact_match(["a", "b"], ["a"])


def test_bleu_matches_sacrebleu():
    import sacrebleu

    hyp = ["tgt_the tgt_black S_tgt_cat tgt_the S_tgt_food tgt_eats", "tgt_a S_tgt_dog tgt_runs tgt_fast ."]
    ref = ["tgt_the tgt_black S_tgt_cat tgt_the S_tgt_food tgt_eats .", "tgt_a S_tgt_dog tgt_runs ."]
    assert bleu(hyp, ref) == sacrebleu.corpus_bleu(hyp, [ref]).score
    assert bleu(ref, ref) == pytest.approx(100)


def test_morph_f1_by_hand():
    m = morph_f1(["tgt_the S_tgt_cat P_tgt_dog tgt_eat_+", None],
                 ["tgt_the S_tgt_cat S_tgt_dog tgt_eat_+", "P_tgt_bird"])
    assert (m.tp, m.n_pred, m.n_gold) == (2, 3, 4)
    assert m.precision == pytest.approx(2 / 3) and m.recall == pytest.approx(0.5)
    assert m.f1 == pytest.approx(2 * (2 / 3) * 0.5 / (2 / 3 + 0.5))


def test_score_log_skips_failed_rows_and_cli(tmp_path, capsys):
    rows = [
        {"model": "m", "item": "1", "trial": 0, "condition": "a", "correct": True, "gold": "A", "pred": "A",
         "status": "ok"},
        {"model": "m", "item": "2", "trial": 0, "condition": "a", "correct": None, "gold": "B", "pred": None,
         "status": "ok"},
        {"model": "m", "item": "3", "trial": 0, "condition": "a", "correct": None, "gold": "B", "pred": None,
         "status": "failed"},
        {"model": "m", "item": "1", "trial": 0, "condition": "b", "correct": False, "gold": "A", "pred": "C",
         "status": "ok"},
    ]
    table = score_log(pd.DataFrame(rows), ["accuracy", "exact"])
    a = table.set_index("condition").loc["a"]
    assert (a["failed"], a["n"], a["correct"], a["invalid"], a["exact_match"]) == (1, 2, 1, 1, 50.0)
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["elagent", "score", str(log), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [g["accuracy"] for g in doc["groups"]] == [0.5, 0.0]
    with pytest.raises(InputError, match="unknown metric"):
        score_log(pd.DataFrame(rows), ["rouge"])
