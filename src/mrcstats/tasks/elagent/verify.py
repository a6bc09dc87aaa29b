"""Recompute the gold answer of every stored ELAGENT item (Tasks 1, 2, 5, 6) from its prompt.

A dataset-quality check: for each item of one or more result files
(``acc_*.json``, shapes in :mod:`~mrcstats.tasks.elagent.results`) the
expression, the precedence and (Task 2) the stated value and the four choices
are read back from the prompt -- the *last* question of the prompt, since
1-shot prompts begin with a worked example -- and the gold is recomputed:

* Task 1: the expression is evaluated in IEEE floating point in precedence
  order and rounded with Python's ``round(x, 1)``, the convention of the
  published files (their evaluation script compares ``round(float(gold), 1)``);
  the stored gold agrees when it equals that number (or the unrounded float,
  the convention of the ``datasets/`` files, or the exact value rounded to the
  nearest float, the convention of generated task files).
* Task 2: each choice is evaluated exactly (rationals) and in float (the
  files' convention, which differs after cancellation) and *fits* when either
  value ``v`` has ``|v - V| <= 1e-9 |V|`` for the stated value ``V`` (stated as a float repr,
  e.g. ``-3.839324278926909e-05``; ``v == 0`` when ``V == 0``). The stored
  letter agrees when it is the one fitting choice; an item where more than one
  choice fits is *ambiguous* (a flaw of the item, not of the evaluator).

* Task 5/6 (multiple choice over deduction worlds and predicate types): the
  world or relation is read back and solved (:mod:`~mrcstats.tasks.elagent.deduction`);
  as for Task 2, an item where more than one option answers is *ambiguous*.

Everything else is in ``disagree`` as ``[prompt, stored, computed]``; prompts
that are none of these (or Task 6 prompts whose definition is of unknown
type) are counted in ``skipped``.
"""
from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from mrcstats._repr import Result
from mrcstats.errors import InputError
from mrcstats.tasks.elagent.arith import evaluate, parse_expression, parse_precedence, standard_precedence
from mrcstats.tasks.elagent.deduction import is_task5, is_task6, solve_task5, solve_task6
from mrcstats.tasks.elagent.results import StoredItem, iter_items

#: relative tolerance within which a Task 2 choice's value fits the stated value
REL_TOL = Fraction(1, 10**9)

_T2_RE = re.compile(r"If\s+(?P<expr>[-+*/\d\s.]+?)\s*=\s*(?P<val>-?[\d.]+(?:[eE][-+]?\d+)?)\s*,\s*"
                    r"what is the redefined precedence", re.IGNORECASE)
_T1_RE = re.compile(r"what is the value of\s+(?P<expr>[-+*/\d\s.]+?)\s*\?", re.IGNORECASE)
_PREC_RE = re.compile(r"redefine the priorities of elementary arithmetic operators as follows:\s*(?P<prec>[^\n]+)",
                      re.IGNORECASE)
_CHOICE_RE = re.compile(r"^\s*\(?(?P<letter>[A-Z])[.)]\s*(?P<text>.+?)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Recomputed:
    """The recomputation of one item: its task and the computed gold; ``fitting`` holds the
    fitting choices (Task 2) or the other accepted forms of the value (Task 1: the unrounded
    float, the exact value as a float and that rounded)."""

    task: int
    computed: Any
    fitting: tuple = ()


@dataclass(frozen=True, repr=False)
class VerifyResult(Result):
    """Outcome of :func:`verify_files`.

    ``items`` = agree + len(ambiguous) + len(disagree) (skipped items are not
    counted in ``items``); ``by_file`` gives the same counts per file.
    """

    items: int
    agree: int
    ambiguous: list = field(default_factory=list)
    disagree: list = field(default_factory=list)
    skipped: dict = field(default_factory=dict)
    by_file: dict = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"items": self.items, "agree": self.agree, "ambiguous": self.ambiguous,
                "disagree": self.disagree, "skipped": self.skipped, "by_file": self.by_file}

    def to_frame(self):
        """One row per file: items, agree, ambiguous, disagree, skipped."""
        import pandas as pd

        rows = [{"file": f, **c} for f, c in self.by_file.items()]
        return pd.DataFrame(rows, columns=["file", "items", "agree", "ambiguous", "disagree", "skipped"])

    def summary(self) -> str:
        lines = [f"ELAGENT verify: {self.items} items, {self.agree} agree, {len(self.ambiguous)} ambiguous, "
                 f"{len(self.disagree)} disagree" + (f", skipped {self.skipped}" if self.skipped else "")]
        for prompt, stored, fits in self.ambiguous[:20]:
            lines.append(f"  ambiguous: stored {stored}, fitting {fits}: {_last_line_question(prompt)}")
        for prompt, stored, computed in self.disagree[:20]:
            lines.append(f"  disagree: stored {stored!r}, computed {computed!r}: {_last_line_question(prompt)}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def _last_line_question(prompt: str) -> str:
    m = list(_T2_RE.finditer(prompt)) or list(_T1_RE.finditer(prompt))
    if m:
        return m[-1].group(0)
    questions = [line for line in prompt.splitlines() if "?" in line]
    return (questions[-1] if questions else prompt)[:160]


def recompute(prompt: str) -> Recomputed | None:
    """Recompute the gold of one Task 1, 2, 5 or 6 prompt; ``None`` when it is none of them
    (or a Task 6 prompt whose predicate definition is of unknown type).

    Raises :class:`InputError` when the prompt looks like Task 1/2 but its
    expression or precedence cannot be read.
    """
    t2 = list(_T2_RE.finditer(prompt))
    if t2:
        return _recompute_task2(prompt, t2[-1])
    t1 = list(_T1_RE.finditer(prompt))
    if t1:
        return _recompute_task1(prompt, t1[-1])
    if is_task5(prompt):
        fits = solve_task5(prompt)
        return Recomputed(5, fits[0] if len(fits) == 1 else None, fits)
    if is_task6(prompt):
        fits6 = solve_task6(prompt)
        if fits6 is None:
            return None
        return Recomputed(6, fits6[0] if len(fits6) == 1 else None, fits6)
    return None


def _recompute_task1(prompt: str, m: re.Match) -> Recomputed:
    expr = parse_expression(m.group("expr"))
    prec = _PREC_RE.search(prompt[: m.start()])
    levels = parse_precedence(prec.group("prec")) if prec else standard_precedence(expr.ops)
    try:
        raw = float(evaluate(expr, levels, "float"))
        exact = float(evaluate(expr, levels, "exact"))
    except ZeroDivisionError:
        return Recomputed(1, None)
    return Recomputed(1, round(raw, 1), (raw, exact, round(exact, 1)))


def _recompute_task2(prompt: str, m: re.Match) -> Recomputed:
    expr = parse_expression(m.group("expr"))
    stated = Fraction(m.group("val"))
    choices = _choices(prompt[m.end():])
    if not choices:
        raise InputError(f"no answer choices (A. ..., B. ...) after the question {m.group(0)!r}")
    fitting = []
    for letter, text in choices:
        levels = parse_precedence(text)
        if any(within_tolerance(value, stated) for value in choice_values(expr, levels)):
            fitting.append(letter)
    return Recomputed(2, fitting[0] if len(fitting) == 1 else None, tuple(fitting))


def choice_values(expr, levels) -> list[Fraction]:
    """The exact value and the float value (the files' convention; they differ after cancellation)."""
    out = []
    for arithmetic in ("exact", "float"):
        try:
            v = evaluate(expr, levels, arithmetic)
        except ZeroDivisionError:
            continue
        if arithmetic == "float" and not math.isfinite(v):
            continue
        out.append(Fraction(v))
    return out


def within_tolerance(value: Fraction, stated: Fraction) -> bool:
    return abs(value - stated) <= REL_TOL * abs(stated)


def _choices(text: str) -> list[tuple[str, str]]:
    """The run of choices A, B, C, ... that follows the question."""
    out: list[tuple[str, str]] = []
    for cm in _CHOICE_RE.finditer(text):
        letter = cm.group("letter")
        if letter != chr(ord("A") + len(out)):
            if out:
                break
            continue
        if not re.search(r"[-+*/]", cm.group("text")):
            break
        out.append((letter, cm.group("text")))
    return out


def _same_number(stored: Any, rec: Recomputed) -> bool:
    """Stored Task 1 gold equals ``round(x, 1)`` (result files) or the unrounded float ``x`` (dataset
    files), ``x`` evaluated in float in precedence order or exactly and then rounded to a float
    (the task files of :func:`mrcstats.tasks.elagent.generate.task1`)."""
    if rec.computed is None:
        return False
    try:
        value = float(stored)
    except (TypeError, ValueError):
        return False
    return value == rec.computed or value in rec.fitting


def verify_items(items: Iterable[StoredItem]) -> VerifyResult:
    """Compare the stored gold of ``items`` with the recomputed one (see the module docstring)."""
    agree = 0
    ambiguous: list = []
    disagree: list = []
    skipped: dict[str, int] = {}
    by_file: dict[str, dict[str, int]] = {}
    for it in items:
        counts = by_file.setdefault(it.file, {"items": 0, "agree": 0, "ambiguous": 0, "disagree": 0,
                                              "skipped": 0})
        try:
            rec = recompute(it.prompt)
        except InputError:
            disagree.append([it.prompt, it.gold, None])
            counts["items"] += 1
            counts["disagree"] += 1
            continue
        if rec is None:
            reason = ("Task 6 predicate definition of unknown type" if is_task6(it.prompt)
                      else "not an ELAGENT Task 1, 2, 5 or 6 prompt")
            skipped[reason] = skipped.get(reason, 0) + 1
            counts["skipped"] += 1
            continue
        counts["items"] += 1
        if rec.task == 1:
            ok = _same_number(it.gold, rec)
        else:
            if len(rec.fitting) > 1:
                ambiguous.append([it.prompt, it.gold, list(rec.fitting)])
                counts["ambiguous"] += 1
                continue
            ok = rec.computed is not None and str(it.gold).strip() == rec.computed
        if ok:
            agree += 1
            counts["agree"] += 1
        else:
            disagree.append([it.prompt, it.gold, rec.computed])
            counts["disagree"] += 1
    n = agree + len(ambiguous) + len(disagree)
    return VerifyResult(n, agree, ambiguous, disagree, skipped, by_file)


def verify_files(paths: Sequence[str | os.PathLike]) -> VerifyResult:
    """Verify every stored item of the ELAGENT result files ``paths`` (Task 1 and Task 2 items)."""
    if not paths:
        raise InputError("no result files given; pass one or more ELAGENT acc_*.json files")

    def _all() -> Iterable[StoredItem]:
        for p in paths:
            yield from iter_items(p)

    return verify_items(_all())
