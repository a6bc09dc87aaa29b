"""maskcode / MskQA outputs: one wide CSV per (trial, masking condition) -> long log rows.

Format (Kim et al., MskQA; repo maskcode9004/maskcode):

* answer columns ``answer_<model>_<MR>``: the model name is everything between
  ``answer_`` and the last ``_`` (it may contain ``:``, ``.`` or ``_``); ``MR`` is
  the masking rate in percent. File and folder names name the *masking* model,
  not the answering one.
* gold: a 0-based option index, written ``"['0']"`` in a column ``answer`` or as a
  plain integer in a column ``correct`` (AQuA files); an option letter is read too.
* model answers are 1-based option numbers. An empty cell, ``-1``, ``0``, anything
  non-numeric or non-integer, or a number beyond the item's options (counted from
  a ``choices``/``options`` list) is an invalid answer: the row stays in the log
  with ``correct`` <NA>.
* file suffix ``_filtered`` / ``_no_meaning`` / ``_no_verb`` -> condition
  ``partial`` / ``strict`` / ``lenient``; none -> ``regular``. The trial is the last
  integer before that suffix (``RQA_gemma2_9b_10_filtered.csv`` -> trial 10,
  partial); none -> 0.
* item = ``question_id`` (or ``--map item=COLUMN``); cluster = item.

In the log, ``gold`` and ``pred`` are both 1-based option numbers (as shown to the
model), ``response`` is the raw answer cell; ``question``/``options``/``passage`` come
from ``question_sentence``/``choices``/``evidence_wo_url`` when present. Per-rate
wide columns other than the answers (``query_<MR>``, ``s4_..._<MR>``) are not
carried over; every other item-level column is.
"""
from __future__ import annotations

import io
import re
from collections.abc import Mapping

import numpy as np
import pandas as pd

from mrcstats.errors import InputError
from mrcstats.io.answers import count_options, parse_index_list
from mrcstats.io.formats.content import MSKQA_ANSWER_RE, header_columns
from mrcstats.io.schema import SchemaError, missing_columns_error
from mrcstats.io.source import Source

#: file-name suffix -> masking condition
CONDITION_SUFFIXES: dict[str, str] = {"_filtered": "partial", "_no_meaning": "strict", "_no_verb": "lenient"}
_STEM_RE = re.compile(r"^(?P<base>.*?)(?P<suffix>_filtered|_no_meaning|_no_verb)?$")
_TRIAL_RE = re.compile(r"(\d+)(?!.*\d)")
_TEXT_SOURCES = {"question": ("question_sentence", "question"), "options": ("choices", "options"),
                 "passage": ("evidence_wo_url", "evidence", "context", "passage")}


def parse_mskqa_name(stem: str) -> tuple[int, str]:
    """``(trial, condition)`` from a file name stem: ``RQA_gemma2_9b_10_filtered`` -> ``(10, "partial")``."""
    m = _STEM_RE.match(stem)
    base, suffix = (m.group("base"), m.group("suffix")) if m else (stem, None)
    cond = CONDITION_SUFFIXES.get(suffix or "", "regular")
    t = _TRIAL_RE.search(base)
    return (int(t.group(1)) if t else 0), cond


def _wide_rates(cols: list[str]) -> set[str]:
    return {m.group(2) for c in cols if (m := MSKQA_ANSWER_RE.match(c))}


def read_mskqa(src: Source, mapping: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Read one maskcode output CSV into long rows with canonical field names (not yet coerced)."""
    mapping = dict(mapping or {})
    cols = header_columns(src, ",")
    answer_cols = [c for c in cols if MSKQA_ANSWER_RE.match(c)]
    if not answer_cols:
        raise missing_columns_error(["answer_<model>_<MR>"], cols, src.name,
                                    "this does not look like a maskcode output; pass another --format")
    rates = _wide_rates(cols)
    per_rate = re.compile(r"^.+_(" + "|".join(re.escape(r) for r in sorted(rates)) + r")$")
    keep = [c for c in cols if c in answer_cols or not per_rate.match(c)]
    try:
        raw = pd.read_csv(io.BytesIO(src.data), usecols=keep, dtype=str, keep_default_na=False,
                          na_values=[], engine="c")
    except pd.errors.ParserError as exc:
        raise InputError(f"{src.name}: cannot parse as CSV: {str(exc).strip().splitlines()[-1]}") from None
    if len(raw) == 0:
        raise InputError(f"{src.name}: has a header but no data rows")
    gold_col = mapping.pop("gold", None)
    gold_idx0 = _gold_index(raw, gold_col, src)
    item_col = mapping.pop("item", None) or ("question_id" if "question_id" in raw else None)
    if item_col is None or item_col not in raw:
        raise missing_columns_error(["item"], cols, src.name,
                                    "maskcode items are named by 'question_id'; name another with --map item=COLUMN")
    n_opt = _n_options(raw)
    trial, condition = parse_mskqa_name(src.stem)

    n = len(raw)
    item_level = raw.drop(columns=answer_cols)
    if "correct" in item_level:  # AQuA gold, not the canonical boolean
        item_level = item_level.rename(columns={"correct": "correct_source"})
    for fld, candidates in _TEXT_SOURCES.items():
        src_col = next((c for c in candidates if c in item_level.columns), None)
        if src_col is not None and fld not in item_level.columns:
            item_level[fld] = item_level[src_col]
    item_level["item"] = raw[item_col]
    for fld, col in mapping.items():  # remaining --map fields (e.g. cluster=src)
        if col not in raw.columns:
            raise SchemaError(f"{src.name}: --map {fld}={col}: no column {col!r} in the file")
        item_level[fld] = raw[col]

    parts = []
    gold_1 = np.where(gold_idx0 >= 0, gold_idx0 + 1, -1)
    gold_str = pd.array([str(g) if g > 0 else None for g in gold_1], dtype="string")
    for c in answer_cols:
        m = MSKQA_ANSWER_RE.match(c)
        model, rate = m.group(1), float(m.group(2))
        cell = raw[c]
        num = pd.to_numeric(cell.str.strip(), errors="coerce").to_numpy(dtype=float)
        valid = np.isfinite(num) & (num == np.round(num)) & (num >= 1)
        valid &= np.where(np.isnan(n_opt), True, num <= np.nan_to_num(n_opt, nan=np.inf))
        corr = pd.array(num - 1 == gold_idx0, dtype="boolean")
        corr[~valid] = pd.NA
        pred = pd.array([str(int(x)) if v else None for x, v in zip(num, valid)], dtype="string")
        part = item_level.copy()
        part["model"] = model
        part["masking_rate"] = rate
        part["correct"] = corr
        part["response"] = cell.mask(cell == "").astype("string").to_numpy()
        part["pred"] = pred
        part["gold"] = gold_str
        parts.append(part)
    out = pd.concat(parts, ignore_index=True)
    out["trial"] = np.int64(trial)
    out["condition"] = condition
    if len(out) != n * len(answer_cols):  # pragma: no cover - internal invariant
        raise InputError(f"{src.name}: internal error reshaping maskcode columns")
    return out


def _gold_index(raw: pd.DataFrame, gold_col: str | None, src: Source) -> np.ndarray:
    """0-based gold index per row, from ``answer`` (``"['0']"``) or ``correct`` (AQuA plain integer)."""
    if gold_col is None:
        gold_col = "answer" if "answer" in raw.columns else ("correct" if "correct" in raw.columns else None)
    if gold_col is None or gold_col not in raw.columns:
        raise missing_columns_error(["answer"], list(raw.columns), src.name,
                                    "maskcode gold answers are in 'answer' (\"['0']\") or 'correct' (AQuA); "
                                    "name another with --map gold=COLUMN (free-text MskCal outputs have no "
                                    "option answers to score)")
    vals = raw[gold_col]
    uniq = {u: _gold_value(u) for u in pd.unique(vals)}
    idx = vals.map(uniq).to_numpy(dtype=float)
    bad = np.isnan(idx) | (idx < 0)
    if bad.any():
        pos = int(np.flatnonzero(bad)[0])
        raise SchemaError(f"{src.name}, row {pos + 1}, column {gold_col!r}: gold answer {vals.iloc[pos]!r} is not "
                          f"a 0-based option index like \"['0']\" or 2")
    return idx.astype(np.int64)


def _gold_value(v: str) -> float:
    s = (v or "").strip()
    if len(s) == 1 and s.isalpha():
        return float("ABCDEFGHIJKLMNOPQRSTUVWXYZ".index(s.upper()))
    stripped = s.strip("[]'\" ")
    if len(stripped) == 1 and stripped.isalpha():
        return float("ABCDEFGHIJKLMNOPQRSTUVWXYZ".index(stripped.upper()))
    i = parse_index_list(s)
    return float("nan") if i is None else float(i)


def _n_options(raw: pd.DataFrame) -> np.ndarray:
    col = next((c for c in ("choices", "options") if c in raw.columns), None)
    if col is None:
        return np.full(len(raw), np.nan)
    uniq = {u: count_options(u) for u in pd.unique(raw[col])}
    return raw[col].map(lambda v: np.nan if uniq[v] is None else float(uniq[v])).to_numpy(dtype=float)
