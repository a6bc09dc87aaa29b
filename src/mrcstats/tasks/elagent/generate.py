"""Seeded generators of ELAGENT task files (seed 004: Li et al., "Challenging Large Language
Models with New Tasks", §2 and Appendix C), one JSON object per item with ``item``, ``prompt``,
``gold``, ``cluster``, ``condition``, ``scorer`` and descriptive fields, ready for
``mrcstats query``.

* :func:`task1` -- expressions with 2 or 3 distinct operators over ``digits``-digit operands and a
  precedence with no / one / two moves (App. C.1; with two operators the one-move precedence
  is a strict order, "the opposite one"); gold computed exactly with rationals; an
  expression is kept only when every requested redefined precedence changes its value. The same
  expressions are used for every move condition (``item`` is the expression, ``condition`` the move).
* :func:`task2` -- the correct precedence among four choices; the three wrong choices are other
  precedences whose values differ from the stated value (by more than a relative 1e-9, so the
  answer is unique) (App. C.2).
* :func:`task5` -- bAbI-style deduction worlds ("Winona is a sheep", "Sheep are afraid of mice")
  with the ``origin``, ``random`` (random-string names), ``neg`` (a negated evidence sentence),
  ``quant`` ("Some" added to the subject of the evidence rule) and ``derive`` (answers are persons,
  one more reasoning step) variants and the fixed answer options (App. C.5).
* :func:`task6` -- a random-string predicate of one of the four types (non-/transitive x
  non-/symmetric) over the chain ``X4 p X1, X1 p X2, X2 p X3``; the gold is read off the
  relation's closure; the seven fixed choices (App. C.6).

Every generator is deterministic given ``seed`` (``random.Random(seed)``; no global state).
"""
from __future__ import annotations

import json
import os
import random
import string
from collections.abc import Sequence
from fractions import Fraction
from itertools import combinations
from typing import Any

from mrcstats.errors import InputError
from mrcstats.tasks.elagent.arith import (
    OPERATORS,
    Expression,
    as_decimal_text,
    evaluate,
    evaluation_steps,
    format_precedence,
    n_moves,
    standard_precedence,
    weak_orders,
)
from mrcstats.tasks.elagent.deduction import TASK6_TYPES, closure
from mrcstats.tasks.elagent.verify import choice_values, within_tolerance

MOVES = {"none": 0, "one": 1, "two": 2}
_T1_TAIL = ("You can give the result as a decimal, and please put the final numeric result in brackets [], "
            "for example, [1].")
_T2_TAIL = ("Please choose the correct answer from A, B, C, and D, and put the final answer choice in brackets, "
            "for example, [B].")


def _value(expr: Expression, levels: dict[str, int]) -> Fraction | None:
    try:
        return evaluate(expr, levels, "exact")  # type: ignore[return-value]
    except ZeroDivisionError:
        return None


def _random_expression(rng: random.Random, operators: int, digits: int) -> Expression:
    lo, hi = (1, 9) if digits == 1 else (10 ** (digits - 1), 10**digits - 1)
    operands = tuple(rng.randint(lo, hi) for _ in range(operators + 1))
    return Expression(operands, tuple(rng.sample(OPERATORS, operators)))


def _check_t1_args(operators: int, digits: int, n: int, moves: Sequence[str]) -> None:
    if operators not in (2, 3):
        raise InputError(f"operators must be 2 or 3 (seed 004, App. C.1), got {operators}")
    if not 1 <= digits <= 5:
        raise InputError(f"digits must be 1 to 5, got {digits}")
    if n < 1:
        raise InputError(f"n must be positive, got {n}")
    bad = [m for m in moves if m not in MOVES]
    if bad or not moves:
        raise InputError(f"moves must be among none, one, two; got {list(moves)}")
    if operators == 2 and "two" in moves:
        raise InputError("two moves need three operators: with two operators every redefinition is one move")


def _expressions(n: int, operators: int, digits: int, moves: Sequence[str], rng: random.Random,
                 max_tries: int = 200_000) -> list[tuple[Expression, dict[str, dict[str, int]]]]:
    """``n`` distinct expressions, each with one precedence per requested move count."""
    out: list[tuple[Expression, dict[str, dict[str, int]]]] = []
    seen: set[str] = set()
    for _ in range(max_tries):
        if len(out) == n:
            return out
        expr = _random_expression(rng, operators, digits)
        if expr.text() in seen:
            continue
        std = standard_precedence(expr.ops)
        v_std = _value(expr, std)
        if v_std is None:
            continue
        orders = weak_orders(expr.ops)
        values = [(w, _value(expr, w)) for w in orders]
        if all(v == v_std for _, v in values):  # precedence does not matter (2 + 3 * 1 style)
            continue
        chosen: dict[str, dict[str, int]] = {}
        for m in moves:
            k = MOVES[m]
            if k == 0:
                chosen[m] = std
                continue
            cands = [w for w, v in values if v is not None and v != v_std and n_moves(w) == k
                     and (operators == 3 or len(set(w.values())) == 2)]
            if not cands:
                break
            chosen[m] = rng.choice(cands)
        else:
            seen.add(expr.text())
            out.append((expr, chosen))
    raise InputError(f"could not find {n} distinct expressions with {operators} operators and {digits}-digit "
                     f"operands for moves {list(moves)} (found {len(out)}); ask for fewer")


def _t1_example(expr: Expression, levels: dict[str, int], style: str) -> str:
    val = as_decimal_text(_value(expr, levels))  # type: ignore[arg-type]
    if style == "shot":
        return f"[Example Question]: What is the value of {expr.text()}?\n[Answer]: [{val}].\n\n"
    lines = [f"[Example Question]: What is the value of {expr.text()}?",
             f"[Answer]: Based on the priorities {format_precedence(levels, expr.ops)}, we evaluate step by step."]
    for i, (a, op, b, r, rest) in enumerate(evaluation_steps(expr, levels), 1):
        after = f", so the expression becomes {rest}." if rest != r else f", so the final answer is [{r}]."
        lines.append(f"Step{i}: we calculate '{op}': {a} {op} {b} = {r}{after}")
    return "\n".join(lines) + "\n\n"


def task1(n: int = 200, *, operators: int = 3, digits: int = 2, moves: Sequence[str] = ("none", "one", "two"),
          example: str = "none", seed: int = 0) -> list[dict[str, Any]]:
    """Task 1 items: ``n`` expressions x the requested move conditions (see the module docstring).

    ``example``: ``none`` (0-shot), ``shot`` (a worked example with its answer) or ``cot`` (a worked
    example evaluated step by step), the example drawn with the same precedence.
    """
    moves = list(dict.fromkeys(moves))
    _check_t1_args(operators, digits, n, moves)
    if example not in ("none", "shot", "cot"):
        raise InputError(f"example must be none, shot or cot, got {example!r}")
    rng = random.Random(seed)
    exprs = _expressions(n, operators, digits, moves, rng)
    rows = []
    for i, (expr, chosen) in enumerate(exprs):
        for m in moves:
            levels = chosen[m]
            value = _value(expr, levels)
            prec = format_precedence(levels, expr.ops)
            ex = ""
            if example != "none":
                for _ in range(1000):
                    e2 = Expression(tuple(rng.randint(1, 99) for _ in expr.operands), expr.ops)
                    if _value(e2, levels) is not None and e2.text() != expr.text():
                        ex = _t1_example(e2, levels, example)
                        break
            if m == "none":
                prompt = f"{ex}What is the value of {expr.text()}? {_T1_TAIL}"
            else:
                prompt = (f"We redefine the priorities of elementary arithmetic operators as follows: {prec}\n"
                          f"{ex}Based on the new priorities, what is the value of {expr.text()}? {_T1_TAIL}")
            rows.append({"item": f"e{i:04d}", "prompt": prompt, "gold": as_decimal_text(value),
                         "cluster": f"e{i:04d}", "condition": m, "scorer": "numeric", "task": "task1",
                         "expression": expr.text(), "precedence": prec, "moves": MOVES[m], "digits": digits,
                         "operators": operators, "example": example, "gold_exact": str(value)})
    return rows


def task2(n: int = 200, *, operators: int = 3, digits: int = 1, move: str = "two", seed: int = 0,
          max_tries: int = 200_000) -> list[dict[str, Any]]:
    """Task 2 items: which of four precedences gives the stated value (App. C.2).

    The stated value is written as an integer or the repr of the nearest float; each of the three
    wrong choices evaluates (exactly and in float) to values more than a relative 1e-9 away from it.
    """
    _check_t1_args(operators, digits, n, [move])
    if move == "none":
        raise InputError("Task 2 needs a redefined precedence: move one or two")
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    for _ in range(max_tries):
        if len(rows) == n:
            return rows
        [(expr, chosen)] = _expressions(1, operators, digits, [move], rng)
        if expr.text() in seen:
            continue
        correct = chosen[move]
        value = _value(expr, correct)
        stated_text = as_decimal_text(value)  # type: ignore[arg-type]
        stated = Fraction(stated_text)
        wrong = []
        for w in weak_orders(expr.ops):
            values = choice_values(expr, w)  # exact and float, as verify checks them
            if w != correct and len(values) == 2 and not any(within_tolerance(v, stated) for v in values):
                wrong.append(w)
        if len(wrong) < 3:
            continue
        seen.add(expr.text())
        choices = rng.sample(wrong, 3) + [correct]
        rng.shuffle(choices)
        letters = "ABCD"
        gold = letters[choices.index(correct)]
        listing = "\n".join(f"{letters[j]}. {format_precedence(c, expr.ops)}" for j, c in enumerate(choices))
        e = expr.text()
        prompt = (f"For the expression {e}, the precedence of the operators is redefined. If {e} = {stated_text}, "
                  f"what is the redefined precedence of the operators? {_T2_TAIL}\n{listing}")
        rows.append({"item": f"e{len(rows):04d}", "prompt": prompt, "gold": gold, "cluster": f"e{len(rows):04d}",
                     "condition": move, "scorer": "choice", "task": "task2", "expression": e,
                     "precedence": format_precedence(correct, expr.ops), "moves": MOVES[move], "digits": digits,
                     "operators": operators, "value": stated_text})
    raise InputError(f"could not build {n} Task 2 items (built {len(rows)}); ask for fewer")


# --- Task 5 -----------------------------------------------------------------------------------------

SPECIES = ("cat", "mouse", "wolf", "sheep")  # the fixed answer order A-D
PLURAL = {"cat": "cats", "mouse": "mice", "wolf": "wolves", "sheep": "sheep"}
NAMES = ("Winona", "Jessica", "Emily", "Gertrude")
TASK5_VARIANTS = ("origin", "random", "neg", "quant", "derive")
_NO_INFO = "not enough information is provided to answer the question"
_T5_TAIL = ("Please provide reasoning and choose the correct answer from above. Please put the final answer choice "
            "in square brackets, for example, [B]; and put the number of sentences used to arrive at the "
            "conclusion in parentheses, for example, (2, 5).")


def _random_word(rng: random.Random, taken: set[str], lo: int = 4, hi: int = 6) -> str:
    while True:
        w = "".join(rng.choice(string.ascii_letters) for _ in range(rng.randint(lo, hi)))
        w = w[0].upper() + w[1:]
        if w not in taken:
            taken.add(w)
            return w


def task5(n: int = 250, *, variant: str = "origin", seed: int = 0) -> list[dict[str, Any]]:
    """Task 5 items (bAbI basic deduction with a twist), see the module docstring.

    A world: each of four species is afraid of another species; each of four persons is of a
    species; the question asks what one person is afraid of. Answer options: the four species
    (A. cat, B. mouse, C. wolf, D. sheep, or their random strings / persons) and E. not enough
    information. ``neg`` and ``quant`` break the reasoning chain, so their gold is E.
    """
    if variant not in TASK5_VARIANTS:
        raise InputError(f"Task 5 variant must be one of {', '.join(TASK5_VARIANTS)}, got {variant!r}")
    if n < 1:
        raise InputError(f"n must be positive, got {n}")
    rng = random.Random(seed)
    rows = []
    while len(rows) < n:
        fear = {s: rng.choice([t for t in SPECIES if t != s]) for s in SPECIES}
        kind = {p: rng.choice(SPECIES) for p in NAMES}
        person = rng.choice(NAMES)
        target = fear[kind[person]]
        holders = [p for p in NAMES if kind[p] == target]
        if variant == "derive" and len(holders) != 1:
            continue  # the answer person must be unique
        taken: set[str] = set()
        if variant == "random":
            sp_word = {s: _random_word(rng, taken) for s in SPECIES}
            nm_word = {p: _random_word(rng, taken) for p in NAMES}
        else:
            sp_word = {s: s for s in SPECIES}
            nm_word = {p: p for p in NAMES}
        facts = []  # (key, sentence)
        for s in SPECIES:
            subj = sp_word[s] if variant == "random" else PLURAL[s].capitalize()
            verb = "is" if variant == "random" else "are"
            obj = sp_word[fear[s]] if variant == "random" else PLURAL[fear[s]]
            facts.append((("rule", s), f"{subj} {verb} afraid of {obj}."))
        for p in NAMES:
            art = "" if variant == "random" else ("an " if sp_word[kind[p]][0] in "aeiou" else "a ")
            facts.append((("isa", p), f"{nm_word[p]} is {art}{sp_word[kind[p]]}."))
        rng.shuffle(facts)
        ev_keys = [("isa", person), ("rule", kind[person])]
        if variant == "derive":
            ev_keys.append(("isa", holders[0]))
        gold_label, gold_choice = target, "ABCD"[SPECIES.index(target)]
        if variant in ("neg", "quant"):
            i = next(j for j, (k, _) in enumerate(facts) if k == ("rule", kind[person]))
            if variant == "neg" and rng.random() < 0.5:
                i = next(j for j, (k, _) in enumerate(facts) if k == ("isa", person))
                facts[i] = (facts[i][0], facts[i][1].replace(" is ", " is not ", 1))
            elif variant == "neg":
                facts[i] = (facts[i][0], facts[i][1].replace(" are afraid", " are not afraid", 1))
            else:
                facts[i] = (facts[i][0], "Some " + facts[i][1][0].lower() + facts[i][1][1:])
            gold_label, gold_choice = "no info", "E"
        options = [sp_word[s] for s in SPECIES]
        if variant == "derive":
            options[SPECIES.index(target)] = holders[0]
            others = [p for p in NAMES if kind[p] != target and p != person]
            slots = [j for j in range(4) if SPECIES[j] != target]
            if others:
                options[rng.choice(slots)] = rng.choice(others)
            gold_label = holders[0]
        number = {k: j + 1 for j, (k, _) in enumerate(facts)}
        text = "\n".join(f"{j + 1} {s}" for j, (_, s) in enumerate(facts))
        listing = "\n".join(f"{letter}. {o}" for letter, o in zip("ABCD", options)) + f"\nE. {_NO_INFO}"
        prompt = (f"{text}\n\nBased on the above sentences, what is {nm_word[person]} afraid of?\n{listing}\n"
                  f"{_T5_TAIL}")
        label = sp_word.get(gold_label, gold_label)
        rows.append({"item": f"w{len(rows):04d}", "prompt": prompt, "gold": gold_choice, "cluster": f"w{len(rows):04d}",
                     "condition": variant, "scorer": "choice", "task": "task5", "gold_label": label,
                     "gold_evidence": [number[k] for k in ev_keys]})
    return rows


# --- Task 6 -----------------------------------------------------------------------------------------

TASK6_CHOICES = ("Only X2", "Only X3", "Only X4", "X2 and X3", "X2 and X4", "X3 and X4", "X2, X3, and X4")
_T6_TAIL = ("Please provide reasoning and choose the correct answer from above. Please put the final answer choice "
            "in square brackets, for example, [B]; Please put the sentence numbers used in the reasoning in "
            "parentheses, for example, (2, 3).")


def _choice_sets() -> list[frozenset[str]]:
    ents = ("X2", "X3", "X4")
    return [frozenset(c) for k in (1, 2, 3) for c in combinations(ents, k)]


def task6(n: int = 200, *, ptype: str = "TS", seed: int = 0) -> list[dict[str, Any]]:
    """Task 6 items: ``What does X1 p?`` for a random-string predicate ``p`` of type ``ptype``
    (NTNS, TNS, NTS, TS). The three statements X1 p X2, X4 p X1, X2 p X3 are shuffled; the gold is
    ``{y != X1 : (X1, y)}`` in the closure of the relation, mapped onto the seven fixed choices."""
    if ptype not in TASK6_TYPES:
        raise InputError(f"Task 6 type must be one of {', '.join(TASK6_TYPES)}, got {ptype!r}")
    if n < 1:
        raise InputError(f"n must be positive, got {n}")
    transitive, symmetric, defs = TASK6_TYPES[ptype]
    rng = random.Random(seed)
    sets = _choice_sets()
    rows = []
    for i in range(n):
        pred = _random_word(rng, set(), 4, 6)
        pairs = [("X1", "X2"), ("X4", "X1"), ("X2", "X3")]
        rng.shuffle(pairs)
        rel = closure(pairs, transitive, symmetric)
        answer = frozenset(b for a, b in rel if a == "X1" and b != "X1")
        k = sets.index(answer)
        gold = "ABCDEFG"[k]
        # evidence: the statements on some path from X1 to each answer entity
        used = {j + 1 for j, (a, b) in enumerate(pairs)
                if any(x in answer | {"X1"} for x in (a, b)) and _on_path(pairs, (a, b), answer, symmetric)}
        statements = "\n".join(f"{j + 1}. {a} {pred} {b}" for j, (a, b) in enumerate(pairs))
        definition = rng.choice(defs)
        listing = "\n".join(f"{letter}. {c}" for letter, c in zip("ABCDEFG", TASK6_CHOICES))
        prompt = (f"Given the three statements here:\n{statements}\n\n"
                  f"If 'X {pred} Y' means '{definition}', what does X1 {pred}?\n{listing}\n{_T6_TAIL}")
        rows.append({"item": f"r{i:04d}", "prompt": prompt, "gold": gold, "cluster": f"r{i:04d}",
                     "condition": ptype, "scorer": "choice", "task": "task6", "gold_label": TASK6_CHOICES[k],
                     "gold_evidence": sorted(used), "predicate": pred, "definition": definition})
    return rows


def _on_path(pairs: Sequence[tuple[str, str]], edge: tuple[str, str], answer: frozenset[str],
             symmetric: bool) -> bool:
    """Is ``edge`` needed to reach some answer entity from X1 (walking edges forward, or both ways
    when symmetric)?"""
    rest = [p for p in pairs if p != edge]
    reach_without = {b for a, b in closure(rest, True, symmetric) if a == "X1"}
    reach_with = {b for a, b in closure(pairs, True, symmetric) if a == "X1"}
    return bool((reach_with - reach_without) & answer)


def generate(task: str, n: int | None = None, seed: int = 0, **options: Any) -> list[dict[str, Any]]:
    """Dispatch on ``task`` (``task1``, ``task2``, ``task5``, ``task6`` or ``1``/``2``/``5``/``6``)."""
    name = task if task.startswith("task") else f"task{task}"
    funcs = {"task1": task1, "task2": task2, "task5": task5, "task6": task6}
    if name not in funcs:
        raise InputError(f"unknown ELAGENT task {task!r}; choose task1, task2, task5 or task6")
    kw = dict(options)
    if n is not None:
        kw["n"] = n
    return funcs[name](seed=seed, **kw)


def write_taskfile(rows: Sequence[dict[str, Any]], path: str | os.PathLike) -> None:
    """Write ``rows`` as a JSONL task file, atomically."""
    from mrcstats._files import atomic_open

    with atomic_open(path, "w") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
