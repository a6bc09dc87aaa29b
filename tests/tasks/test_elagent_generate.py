"""ELAGENT generators: seeded, deterministic, gold answers that follow from the prompt."""
from __future__ import annotations

import json
import re
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcstats.cli import main
from mrcstats.errors import InputError
from mrcstats.tasks.elagent.arith import (
    OPERATORS,
    Expression,
    evaluate,
    format_precedence,
    n_moves,
    parse_expression,
    parse_precedence,
    standard_precedence,
    weak_orders,
)
from mrcstats.tasks.elagent.generate import (
    MOVES,
    TASK5_VARIANTS,
    TASK6_TYPES,
    closure,
    task1,
    task2,
    task5,
    task6,
)
from mrcstats.tasks.elagent.verify import recompute


@pytest.mark.parametrize("fn, kw", [(task1, {}), (task2, {}), (task5, {"variant": "derive"}), (task6, {})])
def test_deterministic_given_seed(fn, kw):
    assert fn(20, seed=5, **kw) == fn(20, seed=5, **kw)
    assert fn(20, seed=5, **kw) != fn(20, seed=6, **kw)


@pytest.mark.parametrize("operators, digits", [(2, 1), (2, 5), (3, 1), (3, 3), (3, 5)])
def test_task1_gold_moves_and_filter(operators, digits):
    moves = ["none", "one"] if operators == 2 else ["none", "one", "two"]
    rows = task1(40, operators=operators, digits=digits, moves=moves, seed=digits)
    assert len(rows) == 40 * len(moves)
    assert len({r["expression"] for r in rows}) == 40  # the same expressions in every move condition
    for r in rows:
        expr = parse_expression(r["expression"])
        assert len(expr.ops) == operators == len(set(expr.ops))
        lo = 1 if digits == 1 else 10 ** (digits - 1)
        assert all(lo <= x < 10**digits for x in expr.operands)
        levels = parse_precedence(r["precedence"])
        assert n_moves(levels) == MOVES[r["condition"]] == r["moves"]
        value = evaluate(expr, levels)
        assert value == Fraction(r["gold_exact"])
        if r["condition"] != "none":  # dropped unless the new precedence changes the value
            assert value != evaluate(expr, standard_precedence(expr.ops))
            assert r["precedence"] in r["prompt"]
        assert recompute(r["prompt"]).fitting[1] == float(r["gold"])


def test_task2_one_fitting_choice_and_balanced_letters():
    rows = task2(200, digits=2, seed=1)
    assert len({r["item"] for r in rows}) == 200
    for r in rows:
        rec = recompute(r["prompt"])
        assert rec.fitting == (r["gold"],)
        assert len(re.findall(r"^[A-D]\. ", r["prompt"], re.MULTILINE)) == 4
    counts = {k: sum(r["gold"] == k for r in rows) for k in "ABCD"}
    assert min(counts.values()) > 25


def _solve_task5(prompt: str) -> str:
    """An independent reader of a Task 5 world: returns the gold letter."""
    lines = [re.sub(r"^\d+ ", "", s) for s in prompt.split("\n\n")[0].splitlines()]
    person = re.search(r"what is (\S+) afraid of\?", prompt).group(1)
    options = dict(re.findall(r"^([A-E])\. (.+)$", prompt, re.MULTILINE))
    if any(" not " in s or s.startswith("Some ") for s in lines):
        return "E"
    isa = {}
    fear = {}
    for s in lines:
        m = re.match(r"(\S+) (?:is|are) afraid of (\S+)\.$", s)
        if m:
            fear[m.group(1).lower()] = m.group(2).lower()
            continue
        m = re.match(r"(\S+) is (?:an? )?(\S+)\.$", s)
        isa[m.group(1)] = m.group(2).lower()
    plural = {"cats": "cat", "mice": "mouse", "wolves": "wolf", "sheep": "sheep"}
    fear = {plural.get(k, k): plural.get(v, v) for k, v in fear.items()}
    target = fear[isa[person]]
    answers = {target} | {p for p, k in isa.items() if k == target}
    hits = [letter for letter, o in options.items() if o.lower() in {a.lower() for a in answers}]
    assert len(hits) == 1, (prompt, hits)
    return hits[0]


@pytest.mark.parametrize("variant", TASK5_VARIANTS)
def test_task5_gold_follows_from_the_world(variant):
    rows = task5(60, variant=variant, seed=2)
    for r in rows:
        assert r["gold"] == _solve_task5(r["prompt"])
        assert r["prompt"].count("\n", 0, r["prompt"].index("\n\n")) == 7  # eight statements
        assert "E. not enough information" in r["prompt"]
    if variant in ("neg", "quant"):
        assert {r["gold"] for r in rows} == {"E"}
    else:
        assert {r["gold"] for r in rows} <= set("ABCD")


@pytest.mark.parametrize("ptype, gold", [("NTNS", "A"), ("TNS", "D"), ("NTS", "E"), ("TS", "G")])
def test_task6_gold_from_closure(ptype, gold):
    rows = task6(30, ptype=ptype, seed=1)
    assert {r["gold"] for r in rows} == {gold}
    for r in rows:
        assert "A. Only X2\nB. Only X3\nC. Only X4\nD. X2 and X3\nE. X2 and X4\nF. X3 and X4\nG. X2, X3, and X4" \
            in r["prompt"]
        assert r["definition"] in TASK6_TYPES[ptype][2]
        assert re.search(rf"X1 {r['predicate']} X2", r["prompt"])


@given(st.lists(st.tuples(st.sampled_from("abcd"), st.sampled_from("abcd")), max_size=6), st.booleans(),
       st.booleans())
@settings(max_examples=200, deadline=None)
def test_closure_properties(pairs, transitive, symmetric):
    rel = closure(pairs, transitive, symmetric)
    assert set(pairs) <= rel
    if symmetric:
        assert all((b, a) in rel for a, b in rel)
    if transitive:
        assert all((a, d) in rel for a, b in rel for c, d in rel if b == c)


def _tree_eval(operands, ops, levels, num):
    """Independent evaluator: the root is the rightmost operator of the loosest level (left-assoc)."""
    if not ops:
        return num(operands[0])
    loosest = max(levels[o] for o in ops)
    i = max(j for j, o in enumerate(ops) if levels[o] == loosest)
    a = _tree_eval(operands[: i + 1], ops[:i], levels, num)
    b = _tree_eval(operands[i + 1:], ops[i + 1:], levels, num)
    return {"+": a + b, "-": a - b, "*": a * b}[ops[i]] if ops[i] != "/" else a / b


@given(st.integers(2, 4).flatmap(lambda k: st.tuples(
    st.lists(st.integers(1, 99999), min_size=k + 1, max_size=k + 1),
    st.permutations(OPERATORS).map(lambda p: p[:k]))))
@settings(max_examples=200, deadline=None)
def test_arithmetic_round_trips_and_float_agrees(case):
    operands, ops = case
    expr = Expression(tuple(operands), tuple(ops))
    assert parse_expression(expr.text()) == expr
    for w in weak_orders(ops):
        assert parse_precedence(format_precedence(w)) == w
        try:
            exact = evaluate(expr, w)
        except ZeroDivisionError:
            with pytest.raises(ZeroDivisionError):
                _tree_eval(operands, ops, w, Fraction)
            continue
        assert exact == _tree_eval(operands, ops, w, Fraction)
        try:
            assert evaluate(expr, w, "float") == _tree_eval(operands, ops, w, float)  # same operation order
        except ZeroDivisionError:  # float cancellation can reach 0 where the exact value does not
            pass


def test_weak_order_counts_and_moves():
    assert [len(weak_orders(OPERATORS[:k])) for k in (1, 2, 3, 4)] == [1, 3, 13, 75]
    assert n_moves(parse_precedence("'*' = '/' > '+' = '-'")) == 0
    assert n_moves(parse_precedence("'+' > '*'")) == 1  # Fig. 1(b)
    assert n_moves(parse_precedence("'+' > '/' > '*' = '-'")) == 2  # Fig. 1(c)-style


@pytest.mark.parametrize("kw, msg", [
    ({"operators": 4}, "operators must be 2 or 3"), ({"digits": 6}, "digits must be 1 to 5"),
    ({"operators": 2, "moves": ["two"]}, "two moves need three operators"), ({"moves": ["three"]}, "moves must"),
    ({"n": 0}, "n must be positive")])
def test_task1_bad_arguments(kw, msg):
    with pytest.raises(InputError, match=msg):
        task1(**kw)


def test_cli_generate_writes_taskfile(tmp_path, capsys):
    out = tmp_path / "t.jsonl"
    assert main(["elagent", "generate", "task6", "--n", "7", "--type", "NTS", "--seed", "3", "--out", str(out)]) == 0
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 7 and rows == task6(7, ptype="NTS", seed=3)
    assert {"item", "prompt", "gold", "cluster", "condition", "scorer"} <= rows[0].keys()
    assert main(["elagent", "generate", "5", "--variant", "nope", "--out", str(out)]) == 2
    assert "variant" in capsys.readouterr().err
