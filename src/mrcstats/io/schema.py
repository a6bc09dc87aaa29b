"""The canonical response log: its columns, dtypes and the one place it is validated.

One row per ``(model, item, trial, condition)``:

============  ==================  ==========================================================
column        dtype               meaning
============  ==================  ==========================================================
model         string              the answering model
item          string              the question / test item id
cluster       string              passage or item group (defaults to ``item``)
trial         int64               repetition index (default 0)
condition     string              experimental condition (default ``""``)
masking_rate  Float64 (nullable)  percent of masked tokens, 0-100 (null when not masked)
correct       boolean (nullable)  True / False; <NA> = invalid or no answer (kept, counted)
response      string (nullable)   the raw model output
gold          string (nullable)   the gold answer
pred          string (nullable)   the answer extracted from ``response``
passage       string (optional)   item texts, when the source has them
question      string (optional)
options       string (optional)
============  ==================  ==========================================================

Any other column is preserved untouched after these. Readers build a frame with
canonical names and call :func:`coerce_log`; :func:`validate_log` is the public
entry point for frames built by hand.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from mrcstats.errors import SchemaError

#: every canonical column, in the order they appear in a log
CANONICAL_COLUMNS: tuple[str, ...] = (
    "model", "item", "cluster", "trial", "condition", "masking_rate", "correct",
    "response", "gold", "pred", "passage", "question", "options",
)
#: columns every log has (the texts are optional)
CORE_COLUMNS: tuple[str, ...] = CANONICAL_COLUMNS[:10]
#: optional text columns, present when the source has them
TEXT_COLUMNS: tuple[str, ...] = ("passage", "question", "options")
#: columns a source must provide (``cluster``, ``trial``, ``condition`` have defaults)
REQUIRED_COLUMNS: tuple[str, ...] = ("model", "item", "correct")
#: the key that identifies a row; the masking rate is part of the condition (null when there is no
#: masking), so without masking this is exactly (model, item, trial, condition)
KEY_COLUMNS: tuple[str, ...] = ("model", "item", "trial", "condition", "masking_rate")
STRING_COLUMNS: tuple[str, ...] = ("model", "item", "cluster", "condition", "response", "gold", "pred",
                                   *TEXT_COLUMNS)
DUPLICATE_POLICIES: tuple[str, ...] = ("error", "first", "last")

STRING_DTYPE = pd.StringDtype()

_TRUE = ("true", "t", "1", "1.0", "yes", "y", "correct", "right")
_FALSE = ("false", "f", "0", "0.0", "no", "n", "incorrect", "wrong")
_NULL = ("", "na", "nan", "<na>", "none", "null", "invalid")
_BOOL_MAP: dict[str, Any] = {**{s: True for s in _TRUE}, **{s: False for s in _FALSE},
                             **{s: pd.NA for s in _NULL}}


def _na_float(n: int) -> pd.api.extensions.ExtensionArray:
    """An all-<NA> Float64 array of length ``n`` (built from a mask: fast)."""
    return pd.arrays.FloatingArray(np.zeros(n), np.ones(n, dtype=bool))


def _na_string(n: int, index: pd.Index) -> pd.Series:
    """An all-<NA> ``string`` Series of length ``n``."""
    return pd.Series(pd.array(np.full(n, None, dtype=object), dtype=STRING_DTYPE), index=index)


def show_value(v: Any) -> str:
    """``repr`` of a cell value for messages (numpy scalars shown as plain Python)."""
    if isinstance(v, np.generic):
        v = v.item()
    return repr(v)


def _where(source: str | None, row: int | None = None, column: str | None = None) -> str:
    parts = []
    if source:
        parts.append(str(source))
    if row is not None:
        parts.append(f"row {row + 1}")
    if column:
        parts.append(f"column {column!r}")
    return (", ".join(parts) + ": ") if parts else ""


#: source column names that usually mean a canonical field (for "did you mean --map ..." hints)
FIELD_SYNONYMS: dict[str, tuple[str, ...]] = {
    "model": ("llm", "model_name", "modelname", "system", "engine", "model_id"),
    "item": ("question_id", "qid", "item_id", "id", "doc_id", "sample_id", "example_id", "problem_id"),
    "correct": ("is_correct", "correctness", "acc", "accuracy", "exact_match", "em", "score", "label", "right",
                "is_right", "hit", "result"),
    "cluster": ("passage_id", "passage", "src", "source", "group", "context_id", "article_id"),
    "gold": ("answer", "target", "gold_answer", "label", "reference"),
    "pred": ("prediction", "predicted", "output", "model_answer", "extracted"),
}


def suggest_mapping(missing: list[str], found: list[str]) -> list[str]:
    """``FIELD=COLUMN`` guesses for missing fields from the columns found (case-insensitive synonyms)."""
    lower = {c.lower(): c for c in found}
    out = []
    for m in missing:
        hit = next((lower[s] for s in FIELD_SYNONYMS.get(m, ()) if s in lower), None)
        if hit is not None:
            out.append(f"{m}={hit}")
    return out


def missing_columns_error(missing: list[str], found: list[str], source: str | None, hint: str = "") -> SchemaError:
    """The error for a source without a required column: lists what was found and suggests --map."""
    shown = ", ".join(repr(c) for c in found[:40]) + (" ..." if len(found) > 40 else "")
    need = ", ".join(repr(m) for m in missing)
    fix = hint or ("name the source column with --map " + " ".join(f"{m}=COLUMN" for m in missing))
    guess = suggest_mapping(missing, found)
    if guess:
        fix += " (perhaps " + " ".join(f"--map {g}" for g in guess) + ")"
    word = "column" if len(missing) == 1 else "columns"
    return SchemaError(f"{_where(source)}missing required {word} {need}; columns found: {shown or '(none)'}; "
                       f"{fix}")


def coerce_correct(values: pd.Series, source: str | None = None, column: str = "correct") -> pd.Series:
    """Coerce a correctness column to nullable ``boolean``.

    Accepts booleans, 0/1 (int, float or text), and the words true/false, yes/no,
    correct/incorrect, right/wrong (any case). Empty, NA, ``null`` and ``invalid``
    become <NA> (an invalid answer). Anything else raises :class:`SchemaError`
    naming the file, row and column.
    """
    s = values
    if isinstance(s.dtype, pd.BooleanDtype):
        return s.copy()
    if s.dtype == bool:
        return s.astype("boolean")
    if pd.api.types.is_numeric_dtype(s.dtype):
        num = s.astype("Float64")
        bad = num.notna() & ~num.isin([0.0, 1.0])
        if bad.any():
            pos = int(np.flatnonzero(bad.to_numpy(dtype=bool, na_value=False))[0])
            raise SchemaError(f"{_where(source, pos, column)}correctness must be 0/1 or true/false, got "
                              f"{show_value(s.iloc[pos])}; map a binary column with --map correct=COLUMN")
        out = pd.array(num.to_numpy(dtype=float, na_value=np.nan) == 1.0, dtype="boolean")
        out[num.isna().to_numpy()] = pd.NA
        return pd.Series(out, index=s.index, name=s.name)
    # text / object: map through a small vocabulary, vectorised over unique values
    key = s.astype("string").str.strip().str.lower()
    mapping: dict[str, Any] = {}
    bad_values = []
    for u in pd.unique(key.dropna()):
        if u in _BOOL_MAP:
            mapping[u] = _BOOL_MAP[u]
            continue
        try:
            f = float(u)
        except ValueError:
            f = None
        if f in (0.0, 1.0):
            mapping[u] = f == 1.0
        else:
            bad_values.append(u)
    if bad_values:
        pos = int(np.flatnonzero(key.isin(bad_values).to_numpy(dtype=bool, na_value=False))[0])
        raise SchemaError(f"{_where(source, pos, column)}correctness must be 0/1 or true/false, got "
                          f"{show_value(s.iloc[pos])}; map a binary column with --map correct=COLUMN")
    mapped = key.astype(object).map(mapping)
    return pd.Series(pd.array(mapped.tolist(), dtype="boolean"), index=s.index, name=s.name)


def _to_string(s: pd.Series) -> pd.Series:
    if isinstance(s.dtype, pd.StringDtype) and s.dtype.na_value is pd.NA:
        return s
    if s.dtype == object:
        # mixed python objects: keep text as is, render numbers without a trailing .0
        def conv(v: Any) -> Any:
            if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)):
                return pd.NA
            if isinstance(v, float) and v.is_integer():
                return str(int(v))
            return v if isinstance(v, str) else str(v)
        uniq = pd.unique(s)
        if len(uniq) < len(s) // 2:
            return s.map({u: conv(u) for u in uniq if not (isinstance(u, float) and np.isnan(u))}).astype(
                STRING_DTYPE)
        return s.map(conv).astype(STRING_DTYPE)
    if pd.api.types.is_float_dtype(s.dtype):
        arr = s.to_numpy(dtype=float, na_value=np.nan)
        if np.all(np.isnan(arr) | (arr == np.round(arr))) and np.all(np.abs(arr[~np.isnan(arr)]) < 2**53):
            out = pd.Series(arr, index=s.index).astype("Int64").astype(STRING_DTYPE)
            return out
    return s.astype(STRING_DTYPE)


def coerce_log(df: pd.DataFrame, *, source: str | None = None, model: str | None = None) -> pd.DataFrame:
    """Bring a frame with canonical column names to canonical dtypes, defaults and order.

    ``model`` fills the model where the source has none. Raises :class:`SchemaError`
    for a missing required column (listing the columns found), non-binary
    correctness, a null key, or a non-integer trial. Does not check duplicates
    (see :func:`check_duplicates`).
    """
    if not isinstance(df, pd.DataFrame):
        raise SchemaError(f"{_where(source)}expected a pandas DataFrame, got {type(df).__name__}")
    out = df.copy(deep=False)
    if model is not None:
        if "model" in out.columns:
            out["model"] = out["model"].astype(STRING_DTYPE).fillna(model)
        else:
            out["model"] = model
    missing = [c for c in REQUIRED_COLUMNS if c not in out.columns]
    if missing:
        hints = {"model": "name the model with --model NAME or --map model=COLUMN",
                 "item": "name the item id column with --map item=COLUMN",
                 "correct": "map a correctness column with --map correct=COLUMN (0/1 or true/false), or map "
                            "gold and pred (--map gold=COLUMN --map pred=COLUMN) so correctness is derived"}
        raise missing_columns_error(missing, [str(c) for c in df.columns], source,
                                    "; ".join(hints[m] for m in missing))
    n = len(out)
    for col in ("model", "item"):
        out[col] = _to_string(out[col])
        nul = out[col].isna().to_numpy()
        if nul.any():
            pos = int(np.flatnonzero(nul)[0])
            raise SchemaError(f"{_where(source, pos, col)}{col} is missing; every row needs a {col}")
    out["cluster"] = _to_string(out["cluster"]).fillna(out["item"]) if "cluster" in out else out["item"].copy()
    if "condition" in out:
        out["condition"] = _to_string(out["condition"]).fillna("")
    else:
        out["condition"] = pd.Series(pd.array(np.full(n, "", dtype=object), dtype=STRING_DTYPE), index=out.index)
    out["trial"] = _coerce_trial(out["trial"], source) if "trial" in out else np.zeros(n, dtype="int64")
    if "masking_rate" in out:
        out["masking_rate"] = coerce_masking_rate(out["masking_rate"], source)
    else:
        out["masking_rate"] = _na_float(n)
    out["correct"] = coerce_correct(out["correct"], source)
    for col in ("response", "gold", "pred", *TEXT_COLUMNS):
        if col in out:
            out[col] = _to_string(out[col])
        elif col not in TEXT_COLUMNS:
            out[col] = _na_string(n, out.index)
    order = [c for c in CANONICAL_COLUMNS if c in out.columns]
    order += [c for c in out.columns if c not in order]
    out = out[order]
    out.index = pd.RangeIndex(n)
    return out


#: the largest trial index: every integer up to it is exact as a float too (2**53 - 1)
MAX_TRIAL = 2**53 - 1


def coerce_masking_rate(mr: pd.Series, source: str | None = None) -> pd.Series:
    """Masking rates as ``Float64`` percents in 0..100 (``"35%"`` and ``"35"`` read as 35; empty = null)."""
    if not pd.api.types.is_numeric_dtype(mr.dtype) or isinstance(mr.dtype, pd.BooleanDtype):
        text = mr.astype("string").str.strip()
        text = text.mask(text.str.lower().isin(_NULL))
        num = pd.to_numeric(text.str.rstrip("%"), errors="coerce")
        bad = (num.isna() & text.notna()).to_numpy(dtype=bool, na_value=False)
        if bad.any():
            pos = int(np.flatnonzero(bad)[0])
            raise SchemaError(f"{_where(source, pos, 'masking_rate')}masking rate must be a number "
                              f"(percent 0-100), got {show_value(mr.iloc[pos])}")
        mr = num
    out = pd.Series(mr, copy=False).astype("Float64")
    vals = out.to_numpy(dtype=float, na_value=np.nan)
    with np.errstate(invalid="ignore"):
        bad = (vals < 0) | (vals > 100) | np.isinf(vals)
    if bad.any():
        pos = int(np.flatnonzero(bad)[0])
        raise SchemaError(f"{_where(source, pos, 'masking_rate')}masking rate {vals[pos]:g} is outside 0-100 "
                          f"(it is a percent: write 35 for 35%)")
    return out


def require_log(log: Any, where: str, columns: tuple[str, ...] = REQUIRED_COLUMNS,
                correct: str | None = "correct") -> pd.DataFrame:
    """The check every analysis of a log calls at its boundary (one validator for the whole package).

    ``log`` must be a DataFrame. A frame with the canonical required columns (``model``, ``item``,
    ``correct``) that is not yet canonical is validated in full (:func:`validate_log`); then the
    ``columns`` the analysis needs must be present (:class:`SchemaError` lists what was found),
    and the ``correct`` column (an analysis may name another one) is coerced to nullable boolean
    by :func:`coerce_correct`. Returns the (possibly new) frame; the input is never modified.
    """
    if not isinstance(log, pd.DataFrame):
        raise SchemaError(f"{where}: expected a canonical log (a pandas DataFrame, e.g. from mrcstats.read_log), "
                          f"got {type(log).__name__}")
    if all(c in log.columns for c in REQUIRED_COLUMNS) and not is_canonical(log):
        log = validate_log(log, source=where)
    missing = [c for c in columns if c not in log.columns]
    if missing:
        raise missing_columns_error(missing, [str(c) for c in log.columns], where,
                                    "name an existing column, or read the log with mrcstats.read_log")
    if correct is not None and correct in log.columns and not isinstance(log[correct].dtype, pd.BooleanDtype):
        log = log.copy(deep=False)
        log[correct] = coerce_correct(log[correct], where, correct)
    return log


def structured_value_error(value: Any, source: str | None, row: int, column: str, field: str) -> SchemaError:
    """The error for a JSON object or array in a one-value field (``{"correct": {"value": true}}``), worded
    as the field's own check words a bad value, with the ``--map`` that reaches a nested value."""
    import json

    shown = json.dumps(value, ensure_ascii=False, default=str)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    kind = "a JSON object" if isinstance(value, dict) else "a JSON array"
    nested = (f" (for the nested value: --map {field}={column}.{next(iter(value))})"
              if isinstance(value, dict) and len(value) == 1 else "")
    if field == "correct":
        return SchemaError(f"{_where(source, row, column)}correctness must be 0/1 or true/false, got {kind} "
                           f"{shown}; map a binary column with --map correct=COLUMN{nested}")
    return SchemaError(f"{_where(source, row, column)}{field} must be one value per row, got {kind} {shown}; "
                       f"map a field holding one value with --map {field}=COLUMN{nested}")


def _coerce_trial(s: pd.Series, source: str | None) -> np.ndarray:
    """Trials as int64: whole numbers in ``0..MAX_TRIAL``; an empty cell is trial 0.

    Refused (naming the row): non-numbers, fractions, NaN/inf, negatives and numbers
    beyond :data:`MAX_TRIAL` (a float like 1e20 has no exact integer, and casting it
    would wrap to -9223372036854775808).
    """
    fix = "trial is a 0-based repetition index (a whole number 0, 1, 2, ...)"
    if isinstance(s.dtype, pd.CategoricalDtype):  # its values, as any other column of them
        s = s.astype(object)
    if pd.api.types.is_integer_dtype(s.dtype) and not s.isna().any():
        arr = s.to_numpy(dtype="int64") if not pd.api.types.is_unsigned_integer_dtype(s.dtype) else None
        if arr is None:  # uint64 may exceed int64
            u = s.to_numpy(dtype="uint64")
            bad = u > MAX_TRIAL
        else:
            bad = (arr < 0) | (arr > MAX_TRIAL)
        if bad.any():
            pos = int(np.flatnonzero(bad)[0])
            raise SchemaError(f"{_where(source, pos, 'trial')}trial {show_value(s.iloc[pos])} is out of range "
                              f"0..{MAX_TRIAL}; {fix}")
        return s.to_numpy(dtype="int64")
    if s.dtype == object or isinstance(s.dtype, pd.StringDtype):
        text = s.astype("string").str.strip()
        missing = text.isna() | (text == "")
        num = pd.to_numeric(text.mask(missing), errors="coerce")
    elif isinstance(s.dtype, pd.BooleanDtype) or s.dtype == bool:
        raise SchemaError(f"{_where(source, 0, 'trial')}trial must be an integer, got booleans; {fix}")
    else:
        num = s
        missing = s.isna()
    vals = pd.Series(num).astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    miss = np.asarray(missing, dtype=bool)
    filled = np.where(np.isnan(vals) & miss, 0.0, vals)
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(filled) | (filled != np.round(filled))
        out_of_range = ~bad & ((filled < 0) | (filled > MAX_TRIAL))
    if bad.any():
        pos = int(np.flatnonzero(bad)[0])
        raise SchemaError(f"{_where(source, pos, 'trial')}trial must be an integer, got {show_value(s.iloc[pos])}; "
                          f"{fix}")
    if out_of_range.any():
        pos = int(np.flatnonzero(out_of_range)[0])
        raise SchemaError(f"{_where(source, pos, 'trial')}trial {show_value(s.iloc[pos])} is out of range "
                          f"0..{MAX_TRIAL}; {fix}")
    return filled.astype("int64")


def check_duplicates(df: pd.DataFrame, on_duplicate: str = "error", source: str | None = None,
                     skipped: dict[str, int] | None = None) -> pd.DataFrame:
    """Enforce one row per ``(model, item, trial, condition)`` (and masking rate, see :data:`KEY_COLUMNS`).

    ``on_duplicate="error"`` raises :class:`SchemaError` naming the first duplicated
    key; ``"first"``/``"last"`` keep that occurrence and count the dropped rows in
    ``skipped["duplicate (model, item, trial, condition)"]``.
    """
    if on_duplicate not in DUPLICATE_POLICIES:
        raise SchemaError(f"on_duplicate must be one of {', '.join(DUPLICATE_POLICIES)}, got {on_duplicate!r}")
    dup = df.duplicated(subset=list(KEY_COLUMNS), keep=False)
    if not dup.any():
        return df
    if on_duplicate == "error":
        pos = np.flatnonzero(dup.to_numpy())
        key = df.iloc[pos[0]][list(KEY_COLUMNS)].to_dict()
        n_extra = int(dup.sum() - (~df[dup].duplicated(subset=list(KEY_COLUMNS))).sum())
        mr = "" if pd.isna(key["masking_rate"]) else f" masking_rate={key['masking_rate']}"
        raise SchemaError(f"{_where(source)}{n_extra} duplicate (model, item, trial, condition) row(s), first "
                          f"model={key['model']!r} item={key['item']!r} trial={key['trial']} "
                          f"condition={key['condition']!r}{mr} at rows {pos[0] + 1} and {pos[1] + 1}; "
                          f"pass --on-duplicate first|last to keep one, or --map trial=/condition= to tell them "
                          f"apart")
    drop = df.duplicated(subset=list(KEY_COLUMNS), keep=on_duplicate)
    n_drop = int(drop.sum())
    if skipped is not None:
        reason = f"duplicate (model, item, trial, condition), kept {on_duplicate}"
        skipped[reason] = skipped.get(reason, 0) + n_drop
    out = df.loc[~drop.to_numpy()]
    out.index = pd.RangeIndex(len(out))
    return out


def validate_log(df: pd.DataFrame, *, on_duplicate: str = "error", source: str | None = None) -> pd.DataFrame:
    """Validate a response log and return it in canonical form (a new frame).

    Checks the required columns (``model``, ``item``, ``correct``), coerces dtypes
    (see the module docstring), fills defaults (``cluster`` = ``item``, ``trial`` = 0,
    ``condition`` = ""), orders canonical columns first and keeps every other
    column, and enforces one row per ``(model, item, trial, condition)``.
    ``df.attrs`` are kept; dropped duplicates (``on_duplicate="first"|"last"``) are
    counted in ``attrs["skipped"]``.

    Raises:
        SchemaError: with the file/row/column and a fix, for any violation.
    """
    attrs = dict(getattr(df, "attrs", {}) or {})
    out = coerce_log(df, source=source)
    skipped = dict(attrs.get("skipped", {}) or {})
    out = check_duplicates(out, on_duplicate, source, skipped)
    out.attrs.update(attrs)
    out.attrs["skipped"] = skipped
    return out


def is_canonical(df: pd.DataFrame) -> bool:
    """True when ``df`` already has every core column in its canonical dtype."""
    if not all(c in df.columns for c in CORE_COLUMNS):
        return False
    want = {"trial": "int64", "masking_rate": "Float64", "correct": "boolean"}
    for c in CORE_COLUMNS:
        dt = df[c].dtype
        if c in want:
            if str(dt) != want[c]:
                return False
        elif not isinstance(dt, pd.StringDtype):
            return False
    return True


def log_stats(df: pd.DataFrame) -> dict[str, Any]:
    """The ``ingest`` summary of a canonical log (accuracy counts invalid rows as not correct)."""
    correct = df["correct"].fillna(False).astype(bool)
    invalid = df["correct"].isna()
    g = pd.DataFrame({"model": df["model"].astype(object), "c": correct, "i": invalid})
    agg = g.groupby("model", sort=True).agg(n=("c", "size"), c=("c", "sum"), i=("i", "sum"))
    return {
        "rows": len(df),
        "models": [str(m) for m in agg.index],
        "items": int(df["item"].nunique()),
        "clusters": int(df["cluster"].nunique()),
        "conditions": sorted(str(c) for c in pd.unique(df["condition"].astype(object))),
        "accuracy": {str(m): float(r.c) / float(r.n) for m, r in agg.iterrows()},
        "invalid": {str(m): int(r.i) for m, r in agg.iterrows()},
        "skipped": dict(df.attrs.get("skipped", {}) or {}),
    }


def merge_skipped(*dicts: Mapping[str, int]) -> dict[str, int]:
    """Add up ``{reason: count}`` dictionaries."""
    out: dict[str, int] = {}
    for d in dicts:
        for k, v in (d or {}).items():
            out[k] = out.get(k, 0) + int(v)
    return out


#: what a log measures (the outcome and the model's answer): never a grouping column
OUTCOME_COLUMNS: tuple[str, ...] = ("correct", "response", "pred", "score")


def check_grouping(by: Any, columns: Any, role: str = "group by") -> list[str]:
    """The one check of grouping columns (``summary --by``, ``summarize(by=)``, ``elagent score --by``,
    ``compare --cluster``, the report's ``by:``), in memory and on a dataset alike.

    ``by`` is a column name or a list of them (``[]``: no grouping); ``columns`` the columns of the log
    or dataset. Every name must be a known column, named once, and groupable: not an outcome
    (:data:`OUTCOME_COLUMNS`: grouping by ``correct`` would split what is being counted). Returns the
    names as a list; raises :class:`SchemaError` naming the first offending column and the groupable ones
    (``role`` words the message: "group by", "cluster by", ...).
    """
    if isinstance(by, str):
        names = [by]
    elif isinstance(by, (list, tuple)) and all(isinstance(b, str) for b in by):
        names = list(by)
    else:
        raise SchemaError(f"grouping columns must be a column name or a list of column names, got {by!r}")
    have = [str(c) for c in columns]
    groupable = [c for c in have if c not in OUTCOME_COLUMNS]
    hint = f"groupable columns: {', '.join(groupable) or '(none)'}"
    seen: set[str] = set()
    for b in names:
        if b in seen:
            raise SchemaError(f"cannot {role} {b!r} twice; name each grouping column once ({hint})")
        seen.add(b)
        if b in OUTCOME_COLUMNS:
            raise SchemaError(f"cannot {role} {b!r}: it is an outcome (what is measured), not a grouping; "
                              f"{hint}")
        if b not in have:
            comma = " (give several columns as a list, or --by A,B)" if "," in b else ""
            raise SchemaError(f"cannot {role} {b!r}: no such column{comma}; {hint}")
    return names


def check_case_distinct(columns: Any, source: str | None = None) -> None:
    """Refuse column names that differ only in upper/lower case (``model`` and ``Model``) in a log dataset:
    DuckDB, which queries datasets, ignores the case of column names, so one column would silently stand in
    for the other (``summary --by Model`` grouped by ``model``)."""
    seen: dict[str, str] = {}
    for c in map(str, columns):
        other = seen.setdefault(c.casefold(), c)
        if other != c:
            raise SchemaError(f"{_where(source)}columns {other!r} and {c!r} differ only in upper/lower case; a "
                              f"dataset is queried with DuckDB, where column names ignore case, so one would stand "
                              f"in for the other; rename one of them in the source (or read it in memory, without "
                              f"--dataset)")

