"""Arithmetic expressions with redefined operator precedence (ELAGENT Tasks 1 and 2).

An expression is ``o0 op1 o1 op2 o2 ...`` over positive integers with distinct
operators from ``+ - * /``. A *precedence* maps each operator to a level; a
smaller level binds tighter, equal levels evaluate left to right (Li et al.,
"Challenging Large Language Models with New Tasks", seed 004, §2.1 and
Appendix C.1). Evaluation repeatedly applies the leftmost operator of the
tightest level until one value is left.

Two arithmetics are offered: exact rationals (:class:`fractions.Fraction`, what
the generators use) and IEEE floats applied in the same order (the convention
of the published ELAGENT files, which :mod:`~mrcstats.tasks.elagent.verify`
reproduces).

The *number of moves* (no / one / two moves) of a precedence is the smallest
number of operators that must be moved to another slot of the five-slot array
of Fig. 1 (standard: ``* /`` in slot 2, ``+ -`` in slot 4) to obtain the same
ordering of the operators present in the expression.
"""
from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from mrcstats.errors import InputError

OPERATORS = ("+", "-", "*", "/")
#: five-slot array of Fig. 1; smaller slot = higher priority
STANDARD_SLOTS: Mapping[str, int] = {"*": 2, "/": 2, "+": 4, "-": 4}
N_SLOTS = 5
MOVE_NAMES = {0: "none", 1: "one", 2: "two"}

_NUM = r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
_EXPR_RE = re.compile(rf"^\s*({_NUM})((?:\s*[-+*/]\s*{_NUM})+)\s*$")
_TAIL_RE = re.compile(rf"\s*([-+*/])\s*({_NUM})")


@dataclass(frozen=True)
class Expression:
    """Operands and the operators between them (``len(ops) == len(operands) - 1``)."""

    operands: tuple[int, ...]
    ops: tuple[str, ...]

    def text(self) -> str:
        """The expression as the ELAGENT prompts write it: ``98 * 43 + 29 / 25``."""
        parts = [str(self.operands[0])]
        for op, x in zip(self.ops, self.operands[1:]):
            parts += [op, str(x)]
        return " ".join(parts)


def parse_expression(text: str) -> Expression:
    """Parse ``"98 * 43 + 29 / 25"``; raises :class:`InputError` when it is not such an expression."""
    m = _EXPR_RE.match(text)
    if not m:
        raise InputError(f"not an arithmetic expression of numbers and + - * /: {text!r}")
    operands = [m.group(1)]
    ops = []
    for op, num in _TAIL_RE.findall(m.group(2)):
        ops.append(op)
        operands.append(num)
    return Expression(tuple(_to_number(x) for x in operands), tuple(ops))


def _to_number(s: str) -> int | Fraction:
    try:
        return int(s)
    except ValueError:
        return Fraction(s)


def parse_precedence(text: str) -> dict[str, int]:
    """Parse a precedence statement such as ``'+' = '/' > '*'`` into ``{op: level}`` (0 = tightest).

    Quotes and spaces are ignored, so the slightly garbled forms found in some
    prompts (``'- = '*' > '+'``) parse too.
    """
    tokens = re.findall(r"[-+*/]|[=>]", text)
    levels: dict[str, int] = {}
    level = 0
    expect_op = True
    for tok in tokens:
        if expect_op:
            if tok not in OPERATORS or tok in levels:
                raise InputError(f"cannot read the precedence {text!r}: unexpected {tok!r}")
            levels[tok] = level
            expect_op = False
        else:
            if tok == ">":
                level += 1
            elif tok != "=":
                raise InputError(f"cannot read the precedence {text!r}: expected '>' or '=', got {tok!r}")
            expect_op = True
    if not levels or expect_op:
        raise InputError(f"cannot read the precedence {text!r}")
    return levels


def format_precedence(levels: Mapping[str, int], order: Sequence[str] | None = None) -> str:
    """Write ``{op: level}`` as ``'+' = '/' > '*'``; ``order`` fixes the order within a level."""
    order = list(order) if order is not None else list(OPERATORS)
    groups: dict[int, list[str]] = {}
    for op in sorted(levels, key=lambda o: (levels[o], order.index(o) if o in order else 99)):
        groups.setdefault(levels[op], []).append(op)
    return " > ".join(" = ".join(f"'{op}'" for op in groups[lv]) for lv in sorted(groups))


def standard_precedence(ops: Sequence[str]) -> dict[str, int]:
    """The usual precedence restricted to ``ops`` (``* /`` before ``+ -``)."""
    return normalize({op: STANDARD_SLOTS[op] for op in ops})


def normalize(levels: Mapping[str, int]) -> dict[str, int]:
    """Renumber levels to 0, 1, 2, ... keeping their order (two precedences are equal iff equal here)."""
    ranks = {lv: i for i, lv in enumerate(sorted(set(levels.values())))}
    return {op: ranks[lv] for op, lv in levels.items()}


def evaluate(expr: Expression, levels: Mapping[str, int],
             arithmetic: Literal["exact", "float"] = "exact") -> Fraction | float:
    """Value of ``expr`` under ``levels``: exact rational or IEEE float, applied in precedence order.

    Raises ``ZeroDivisionError`` when a division by zero occurs and
    :class:`InputError` when an operator has no level.
    """
    missing = [op for op in expr.ops if op not in levels]
    if missing:
        raise InputError(f"the precedence gives no level for {missing} in {expr.text()!r}")
    if arithmetic == "exact":
        vals: list = [Fraction(x) for x in expr.operands]
    else:
        vals = [float(x) for x in expr.operands]
    ops = list(expr.ops)
    while ops:
        best = min(range(len(ops)), key=lambda i: (levels[ops[i]], i))
        a, b = vals[best], vals[best + 1]
        op = ops.pop(best)
        if op == "+":
            v = a + b
        elif op == "-":
            v = a - b
        elif op == "*":
            v = a * b
        else:
            if b == 0:
                raise ZeroDivisionError(f"division by zero in {expr.text()!r}")
            v = a / b
        vals[best:best + 2] = [v]
    return vals[0]


def weak_orders(ops: Sequence[str]) -> list[dict[str, int]]:
    """All precedences (weak orders) over ``ops``: 3 for two operators, 13 for three, 75 for four."""
    ops = list(dict.fromkeys(ops))
    seen: dict[tuple, dict[str, int]] = {}
    for assignment in itertools.product(range(len(ops)), repeat=len(ops)):
        lv = normalize(dict(zip(ops, assignment)))
        key = tuple(lv[o] for o in ops)
        seen.setdefault(key, lv)
    return [seen[k] for k in sorted(seen)]


def n_moves(levels: Mapping[str, int]) -> int:
    """Smallest number of operators to move in the five-slot array (Fig. 1) to obtain ``levels``."""
    ops = list(levels)
    target = normalize(levels)
    for k in range(len(ops) + 1):
        for moved in itertools.combinations(ops, k):
            for slots in itertools.product(range(1, N_SLOTS + 1), repeat=k):
                placed = {op: STANDARD_SLOTS[op] for op in ops}
                placed.update(zip(moved, slots))
                if normalize(placed) == target:
                    return k
    return len(ops)  # pragma: no cover - every weak order of <= 4 operators is reachable


def as_decimal_text(value: Fraction | float) -> str:
    """The value as the ELAGENT prompts state it: an integer, or the repr of the nearest float."""
    if isinstance(value, Fraction) and value.denominator == 1:
        return str(value.numerator)
    f = float(value)
    if f.is_integer() and abs(f) < 2**53:
        return str(int(f))
    return repr(f)


def evaluation_steps(expr: Expression, levels: Mapping[str, int]) -> list[tuple[str, str, str, str, str]]:
    """The exact evaluation as steps ``(a, op, b, result, expression after the step)``, numbers written
    with :func:`as_decimal_text` (for worked examples)."""
    vals: list[Fraction] = [Fraction(x) for x in expr.operands]
    ops = list(expr.ops)
    steps = []
    while ops:
        best = min(range(len(ops)), key=lambda i: (levels[ops[i]], i))
        a, b, op = vals[best], vals[best + 1], ops.pop(best)
        v = {"+": a + b, "-": a - b, "*": a * b}[op] if op != "/" else a / b
        vals[best:best + 2] = [v]
        rest = [as_decimal_text(vals[0])]
        for o, x in zip(ops, vals[1:]):
            rest += [o, as_decimal_text(x)]
        steps.append((as_decimal_text(a), op, as_decimal_text(b), as_decimal_text(v), " ".join(rest)))
    return steps
