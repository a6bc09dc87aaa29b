"""Answer extraction and scoring (examples and hypothesis properties)."""
from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcstats.io.answers import (
    count_options,
    extract_answer,
    option_index,
    parse_index_list,
    parse_number,
    score,
    score_series,
)


@pytest.mark.parametrize("text,want", [
    ("The correct answer is [C] (5, 7, 8).", "C"),
    ("so the result is [1.0]", "1"),
    ("[-3.25]", "-3.25"),
    ('{"answer": 3}', "3"),
    ("{'basis': 'the text says so {ok}', 'answer': 2}", "2"),
    ("Here: {'basis': 'x', 'answer': 'B'}", "B"),
    ("b", "B"),
    ("(D)", "D"),
    ("3", "3"),
    ("Answer: C", "C"),
    ("The final answer is (2)", "2"),
    ("B) because", "B"),
    ("I cannot tell", None),
    ("", None),
    (None, None),
    (7, "7"),
])
def test_extract(text, want):
    assert extract_answer(text) == want


def test_option_index():
    assert option_index("B") == 1
    assert option_index("3", n_options=4) == 2
    assert option_index("3", n_options=4, base=0) == 3
    assert option_index(0) is None            # 1-based: 0 is invalid
    assert option_index(-1) is None
    assert option_index("5", n_options=4) is None
    assert option_index("2.5") is None
    assert option_index("E", n_options=4) is None
    assert option_index("x", n_options=4) is None and option_index("foo") is None


def test_gold_and_options_parsing():
    assert parse_index_list("['0']") == 0 and parse_index_list("[2]") == 2 and parse_index_list(3) == 3
    assert parse_index_list("['0', '1']") is None and parse_index_list("abc") is None
    assert count_options("['a', 'b', 'c']") == 3 and count_options("a, b") is None


def test_score():
    assert score("B", "b") is True
    assert score("1009.0", "1009.1") is False
    assert score("14.5", 14.5) is True
    assert score("1,000", "1000") is True
    assert score(None, "A") is None and score("", "A") is None
    s = score_series(pd.Series(["B", "3.0", None, "x"]), pd.Series(["b", "3", "A", "y"]))
    assert s.isna().tolist() == [False, False, True, False]
    assert s.fillna(False).tolist() == [True, True, False, False]


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(list("ABCDEFGH")), st.sampled_from(["[{}]", "({})", "Answer: {}", "{}",
                                                            '{{"answer": "{}"}}', "The answer is {}."]))
def test_letter_roundtrip(letter, template):
    assert extract_answer(template.format(letter)) == letter


@settings(max_examples=150, deadline=None)
@given(st.integers(-10**9, 10**9), st.sampled_from(["[{}]", "{}", '{{"answer": {}}}', "answer is {}"]))
def test_integer_roundtrip(n, template):
    got = extract_answer(template.format(n))
    assert got is not None and parse_number(got) == n


@settings(max_examples=150, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12))
def test_float_bracket_roundtrip(x):
    got = extract_answer(f"[{x!r}]")
    assert got is not None and score(got, x) is True


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=40))
def test_extract_never_raises(text):
    out = extract_answer(text)
    assert out is None or isinstance(out, str)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 10), st.data())
def test_option_index_bases(n_opt, data):
    k = data.draw(st.integers(-3, n_opt + 3))
    one = option_index(k, n_options=n_opt, base=1)
    zero = option_index(k - 1, n_options=n_opt, base=0)
    assert one == zero
    assert (one is None) == (k < 1 or k > n_opt)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.sampled_from(["A", "b", "3", "3.0", " 2 ", ""])),
                          st.sampled_from(["A", "B", "2", "3"])), min_size=1, max_size=20))
def test_score_series_matches_scalar(pairs):
    pred = pd.Series([p for p, _ in pairs], dtype=object)
    gold = pd.Series([g for _, g in pairs], dtype=object)
    vec = score_series(pred, gold).tolist()
    for (p, g), v in zip(pairs, vec, strict=True):
        s = score(p, g)
        assert (v is pd.NA and s is None) or v == s
