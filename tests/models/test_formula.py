"""The formula parser: R's term expansion, ordering and labels (terms.formula, lme4 findbars)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcstats.errors import InputError
from mrcstats.models.formula import parse_formula


@pytest.mark.parametrize("text, labels, intercept", [
    ("correct ~ scaled_tok * LLM + (1 | passage)", ("scaled_tok", "LLM", "scaled_tok:LLM"), True),
    ("y ~ a*b*c - a:b:c + (1|g)", ("a", "b", "c", "a:b", "a:c", "b:c"), True),
    ("y ~ (a + b + c)^2 - 1 + (1|g)", ("a", "b", "c", "a:b", "a:c", "b:c"), False),
    ("y ~ 0 + f:x + (1|g)", ("f:x",), False),
    ("y ~ b:a + a + (1|g)", ("a", "b:a"), True),
    ("y ~ a/b + (1|g)", ("a", "a:b"), True),
    ("y ~ -1 + x + (1|g)", ("x",), False),
    ("y ~ scale(x) + factor(k) + (1|g)", ("scale(x)", "factor(k)"), True),
    ("y ~ x + x + (1|g)", ("x",), True),
    ("y ~ 1 + (1|g)", (), True),
])
def test_terms_in_r_order(text, labels, intercept):
    spec = parse_formula(text)
    assert spec.term_labels == labels
    assert spec.intercept is intercept


def test_random_terms_lme4_names():
    spec = parse_formula("y ~ x + (1 | g/h) + (1 | item) + (1 | a:b)")
    assert [r.name for r in spec.random] == ["h:g", "g", "item", "a:b"]
    assert spec.random_slopes == ()


def test_random_slopes_recorded_not_parsed_as_intercepts():
    spec = parse_formula("y ~ x + (1 + x | g)")
    assert spec.random_slopes == ("(1 + x | g)",)


def test_cbind_response():
    spec = parse_formula("cbind(s, n - s) ~ period + (1 | herd)")
    assert spec.response.is_cbind
    assert spec.response.columns == ("s", "n")
    assert spec.response.text == "cbind(s, n - s)"


def test_columns_and_droppable():
    spec = parse_formula("correct ~ scaled_tok * LLM + Gender + (1 | passage)")
    assert spec.columns == ("correct", "scaled_tok", "LLM", "Gender", "passage")
    assert spec.droppable() == ("Gender", "scaled_tok:LLM")
    reduced = spec.drop("scaled_tok:LLM")
    assert reduced.term_labels == ("scaled_tok", "LLM", "Gender")
    assert reduced.formula == "correct ~ scaled_tok + LLM + Gender + (1 | passage)"


@pytest.mark.parametrize("text", [
    "y x", "~ x", "y ~", "y ~ x +", "y ~ (x", "y ~ x | g", "y ~ eval(x) + (1|g)", "y ~ 3 + x",
    "y ~ x ~ z", "cbind(a) ~ x", "y ~ x + $", "y ~ x + (1 | log(g))",
])
def test_bad_formulas_raise_one_clear_error(text):
    with pytest.raises(InputError) as err:
        parse_formula(text)
    assert "formula" in str(err.value)


def test_response_as_predictor_is_an_error():
    with pytest.raises(InputError, match="also a predictor"):
        parse_formula("y ~ y + (1|g)")


_names = st.sampled_from(["a", "b", "c", "x.1", "tok_2"])


@st.composite
def _rhs(draw, depth=0):
    if depth > 2 or draw(st.booleans()):
        return draw(_names)
    op = draw(st.sampled_from(["+", "*", ":"]))
    return f"({draw(_rhs(depth + 1))} {op} {draw(_rhs(depth + 1))})"


@settings(max_examples=150, deadline=None)
@given(_rhs())
def test_expansion_properties(rhs):
    """Every parse gives distinct terms, sorted by order, each a set of the formula's variables,
    and parsing the deparsed formula gives the same terms (round trip)."""
    spec = parse_formula(f"y ~ {rhs} + (1 | g)")
    labels = spec.term_labels
    assert len(set(labels)) == len(labels)
    orders = [t.order for t in spec.terms]
    assert orders == sorted(orders)
    for t in spec.terms:
        assert len({v.column for v in t.variables}) == t.order
    again = parse_formula(f"y ~ {spec.fixed_rhs()} + (1 | g)")
    assert {frozenset(t.variables) for t in again.terms} == {frozenset(t.variables) for t in spec.terms}


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=30))
def test_garbage_never_crashes(text):
    try:
        parse_formula(text)
    except InputError:
        pass
