"""Answer extraction and scoring.

An answer that cannot be read is *invalid* (``None`` / <NA>), never *wrong*: the log
keeps it with ``correct`` null and it is counted separately.

* :func:`extract_answer` pulls the answer out of a response: JSON or Python dicts
  (``{"answer": 3}``, ``{'basis': ..., 'answer': 2}``), bracketed answers (``[B]``,
  ``[1.0]``), ``Answer: C``/``answer is (C)``, a bare option letter or number.
* :func:`option_index` normalises an option letter or number to a 0-based index
  (``base=1`` for 1-based numbers as in maskcode, ``base=0`` for 0-based gold).
* :func:`parse_number` / :func:`numbers_equal` compare numeric answers with a
  tolerance (``abs(a - b) <= max(abs_tol, rel_tol * abs(b))``, as ``math.isclose``).
* :func:`score` / :func:`score_series` turn (pred, gold) into True/False/None.
"""
from __future__ import annotations

import ast
import json
import math
import re
from typing import Any

import numpy as np
import pandas as pd

_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_NUM = r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+]?\.\d+(?:[eE][-+]?\d+)?"
_NUM_RE = re.compile(rf"^\s*\$?\s*({_NUM})\s*%?\s*$")
_BRACKET_RE = re.compile(r"\[\s*([A-Za-z]|" + _NUM + r")\s*\]")
_ANSWER_IS_RE = re.compile(
    r"(?:final\s+answer|answer|option|choice)\s*(?:is|:|=)?\s*[:=]?\s*[\(\[\{\"']?\s*([A-Za-z]\b|" + _NUM + r")",
    re.IGNORECASE)
_DICT_RE = re.compile(r"\{[^{}]*\}", re.DOTALL)
_LETTER_RE = re.compile(r"^\s*[\(\[]?\s*([A-Za-z])\s*[\)\]\.:]?\s*$")
_LEAD_LETTER_RE = re.compile(r"^\s*[\(\[]?([A-Z])[\)\]\.:](?:\s|$)")
#: tried in order after JSON/Python dicts: [B] / [1.0]; a lone letter; a lone number; "answer is C"; "B) ..."
_FINDERS = (_BRACKET_RE.search, _LETTER_RE.match, _NUM_RE.match, _ANSWER_IS_RE.search, _LEAD_LETTER_RE.match)


def parse_number(text: Any) -> float | None:
    """A number written as text (``"1,234.5"``, ``"$3"``, ``"12%"``, ``"[1.0]"``), else None."""
    if text is None or text is pd.NA:
        return None
    if isinstance(text, bool):
        return None
    if isinstance(text, (int, float, np.integer, np.floating)):
        x = float(text)
        return None if math.isnan(x) else x
    s = str(text).strip()
    if s.startswith("[") and s.endswith("]"):
        s = s[1:-1].strip().strip("'\"")
    m = _NUM_RE.match(s)
    if not m:
        return None
    try:
        return float(m.group(1).replace(",", ""))
    except ValueError:  # pragma: no cover
        return None


def numbers_equal(a: float, b: float, rel_tol: float = 1e-6, abs_tol: float = 1e-9) -> bool:
    """``abs(a - b) <= max(abs_tol, rel_tol * max(abs(a), abs(b)))`` (``math.isclose``)."""
    return math.isclose(a, b, rel_tol=rel_tol, abs_tol=abs_tol)


def _load_dict(chunk: str) -> Any:
    for loader in (json.loads, ast.literal_eval):
        try:
            return loader(chunk)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    return None


def _from_dict_text(text: str, key: str) -> Any:
    """``key`` of the first JSON/Python dict written in ``text`` (braces inside strings allowed)."""
    for m in _DICT_RE.finditer(text):
        obj = _load_dict(m.group(0))
        if isinstance(obj, dict) and key in obj:
            return obj[key]
    starts = [i for i, c in enumerate(text) if c == "{"][:20]
    ends = [i for i, c in enumerate(text) if c == "}"][-50:]
    for a in starts:
        for b in ends:
            if b > a:
                obj = _load_dict(text[a:b + 1])
                if isinstance(obj, dict) and key in obj:
                    return obj[key]
    m = re.search(r"[\"']" + re.escape(key) + r"[\"']\s*:\s*[\"']?([^\"',}\s]+)", text)
    return m.group(1) if m else None


def extract_answer(response: Any, key: str = "answer") -> str | None:
    """The answer written in ``response`` as a short string, or None when there is none.

    Tried in order: a JSON/Python dict with ``key``; a bracketed answer ``[B]`` or
    ``[1.0]``; ``answer is C`` / ``Answer: (3)``; the whole response being one option
    letter or number; a leading ``B)``/``(B)``. Returns the letter upper-cased or
    the number as written (without thousands separators).
    """
    if response is None or response is pd.NA:
        return None
    if isinstance(response, dict):
        v = response.get(key)
        return None if v is None else _clean(v)
    if isinstance(response, (int, np.integer)) and not isinstance(response, bool):
        return str(int(response))
    if isinstance(response, (float, np.floating)):
        return None if math.isnan(response) else _clean(response)
    text = str(response).strip()
    if not text:
        return None
    if "{" in text:
        v = _from_dict_text(text, key)
        if v is not None:
            return _clean(v)
    for find in _FINDERS:
        m = find(text)
        if m:
            return _clean(m.group(1))
    return None


def number_text(v: float) -> str | None:
    """A number as text, the same wherever it was read: an integer by its digits (exact at any size), a whole
    float without ``.0`` (``2.0`` -> ``"2"``), any other float by its shortest round-trip ``repr``; NaN is
    None. (Answers, and ids in :func:`mrcstats.io.schema.id_text`.)"""
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if math.isnan(v):
        return None
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def _clean(v: Any) -> str | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (list, tuple)):
        return _clean(v[0]) if len(v) == 1 else None
    if isinstance(v, (int, np.integer, float, np.floating)):
        return number_text(v)
    s = str(v).strip().strip("'\"").strip()
    if not s:
        return None
    if len(s) == 1 and s.isalpha():
        return s.upper()
    n = parse_number(s)
    if n is not None:
        return str(int(n)) if n.is_integer() and abs(n) < 2**53 else repr(n)
    return s


def option_index(answer: Any, n_options: int | None = None, base: int = 1) -> int | None:
    """0-based option index of a letter (``"B"`` -> 1) or a ``base``-based number, else None.

    A number that is not an integer, below ``base``, or beyond ``n_options`` is
    invalid (None), as is a letter beyond ``n_options``.
    """
    if answer is None or answer is pd.NA or isinstance(answer, bool):
        return None
    if isinstance(answer, str):
        s = answer.strip().strip("()[]").strip()
        if len(s) == 1 and s.isalpha():
            idx = _LETTERS.index(s.upper())
            return idx if n_options is None or idx < n_options else None
        x = parse_number(s)
    else:
        x = parse_number(answer)
    if x is None or not float(x).is_integer():
        return None
    idx = int(x) - base
    if idx < 0 or (n_options is not None and idx >= n_options):
        return None
    return idx


def parse_index_list(value: Any) -> int | None:
    """A gold index written as ``"['0']"``, ``"[0]"``, ``0``, ``"0"`` or ``"0.0"`` (single element), else None."""
    if value is None or value is pd.NA:
        return None
    if isinstance(value, (list, tuple)):
        return parse_index_list(value[0]) if len(value) == 1 else None
    x = parse_number(value)
    if x is not None:
        return int(x) if float(x).is_integer() else None
    s = str(value).strip()
    if s.startswith("["):
        try:
            obj = ast.literal_eval(s)
        except (ValueError, SyntaxError):
            return None
        return parse_index_list(obj)
    return None


def count_options(value: Any) -> int | None:
    """Number of options in a ``choices``/``options`` cell (a list, or its Python/JSON text), else None."""
    if isinstance(value, (list, tuple)):
        return len(value)
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    s = str(value).strip()
    if not s.startswith("["):
        return None
    for loader in (ast.literal_eval, json.loads):
        try:
            obj = loader(s)
        except (ValueError, SyntaxError, TypeError):
            continue
        if isinstance(obj, (list, tuple)):
            return len(obj)
    return None


def score(pred: Any, gold: Any, rel_tol: float = 1e-6, abs_tol: float = 1e-9) -> bool | None:
    """True/False when ``pred`` matches ``gold``; None when ``pred`` is missing (invalid).

    Numbers compare with :func:`numbers_equal`; text compares after stripping
    whitespace, quotes and brackets, case-insensitively.
    """
    p = _norm(pred)
    if p is None:
        return None
    g = _norm(gold)
    if g is None:
        return None
    pn, gn = parse_number(p), parse_number(g)
    if pn is not None and gn is not None:
        return numbers_equal(pn, gn, rel_tol, abs_tol)
    return p == g


def _norm(v: Any) -> str | None:
    if v is None or v is pd.NA:
        return None
    if isinstance(v, float) and math.isnan(v):
        return None
    s = str(v).strip().strip("'\"()[]").strip().lower()
    return s or None


def score_series(pred: pd.Series, gold: pd.Series, rel_tol: float = 1e-6, abs_tol: float = 1e-9) -> pd.Series:
    """Vectorised :func:`score`: a nullable boolean Series (<NA> where pred or gold is missing)."""
    p = pred.astype("string").str.strip().str.strip("'\"()[]").str.strip().str.lower()
    g = gold.astype("string").str.strip().str.strip("'\"()[]").str.strip().str.lower()
    p = p.mask(p == "")
    g = g.mask(g == "")
    pn = pd.to_numeric(p.str.replace(",", "", regex=False), errors="coerce").astype("Float64")
    gn = pd.to_numeric(g.str.replace(",", "", regex=False), errors="coerce").astype("Float64")
    both = (pn.notna() & gn.notna()).to_numpy(dtype=bool, na_value=False)
    eq_text = (p == g).to_numpy(dtype=bool, na_value=False)
    a = pn.to_numpy(dtype=float, na_value=np.nan)
    b = gn.to_numpy(dtype=float, na_value=np.nan)
    with np.errstate(invalid="ignore"):
        eq_num = np.abs(a - b) <= np.maximum(abs_tol, rel_tol * np.maximum(np.abs(a), np.abs(b)))
    res = np.where(both, eq_num, eq_text)
    out = pd.array(res, dtype="boolean")
    out[(p.isna() | g.isna()).to_numpy()] = pd.NA
    return pd.Series(out, index=pred.index, name="correct")
