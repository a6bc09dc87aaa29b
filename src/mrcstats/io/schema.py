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
correct       boolean (nullable)  True / False; <NA> = invalid or no answer (kept, counted), or a
                                  graded row read without a threshold
score         Float64 (nullable)  the graded outcome: 1.0 / 0.0 for binary sources (= ``correct``),
                                  partial credit, a metric (f1, bleu) or a judge rating for graded
                                  ones; <NA> = invalid or no answer
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

**Binary and graded outcomes** (docs/scores.md). A source gives ``correct``, ``score`` or both.
Binary sources fill both (``score`` = 1.0/0.0, both <NA> for an invalid answer); a log without a
``score`` column gets it derived from ``correct``. A ``score`` column alone whose values are all
0/1 is binary too (``correct`` = ``score == 1``). Graded sources (partial credit, numeric metrics,
judge ratings) fill ``score`` and leave ``correct`` <NA> unless a threshold is given
(:func:`apply_threshold`: ``correct = score >= threshold``). :func:`resolve_outcome` says which
column an analysis of the mean uses (``summary``, ``compare``, ``power``: ``score`` when any score is
not 0/1); :func:`require_binary` is the one check of the analyses that need a 0/1 outcome.
"""
from __future__ import annotations

import weakref
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from mrcstats._words import plural
from mrcstats.errors import SchemaError
from mrcstats.io.answers import number_text
from mrcstats.io.fields import (  # noqa: F401  (the schema's names, in their pandas-free home)
    CANONICAL_COLUMNS,
    CORE_COLUMNS,
    DUPLICATE_POLICIES,
    INVALID_WORDS,
    KEY_COLUMNS,
    OUTCOMES,
    REQUIRED_COLUMNS,
    STRING_COLUMNS,
    TEXT_COLUMNS,
)
from mrcstats.io.invalid import apply_invalid, invalid_sentence  # noqa: F401  (their pandas-free home)

STRING_DTYPE = pd.StringDtype()

# ----------------------------------------------------------------- defaults and ranges, as data

#: the largest trial index: every integer up to it is exact as a float too (2**53 - 1)
MAX_TRIAL = 2**53 - 1


@dataclass(frozen=True)
class Default:
    """What an empty cell (or a missing column) of an optional key column becomes: the row's value of another
    column (``column``) or a constant (``value``)."""

    column: str | None = None
    value: Any = None


@dataclass(frozen=True)
class Range:
    """The inclusive range ``low..high`` of a numeric column (``integer``: whole numbers; else a float that
    must be finite)."""

    low: float
    high: float
    integer: bool = False


#: the canonical log's defaults, ONCE: :func:`coerce_log` (pandas) fills them and the DuckDB ingest of
#: :mod:`mrcstats.io.ingest` generates its SQL from them (:func:`sql_filled`)
DEFAULTS: dict[str, Default] = {"cluster": Default(column="item"), "trial": Default(value=0),
                                "condition": Default(value="")}
#: the canonical log's value ranges, ONCE: the pandas checks (:func:`coerce_masking_rate`, the trial's) and
#: the ingest SQL (:func:`sql_out_of_range`)
RANGES: dict[str, Range] = {"trial": Range(0, MAX_TRIAL, integer=True), "masking_rate": Range(0, 100)}


def _sql_literal(value: Any) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


def sql_filled(column: str, present: Collection[str], alias: str = "r", cast: str | None = None) -> str:
    """The SQL expression of ``column`` with its :data:`DEFAULTS` filled in, over the table ``alias`` whose
    columns are ``present``: ``coalesce(r.trial, 0)``, ``coalesce(r.cluster, r.item)``, or the default alone
    when the column is absent; ``cast`` (e.g. ``BIGINT``) casts the column (and a constant default)."""
    d = DEFAULTS[column]
    dflt = f"{alias}.{d.column}" if d.column is not None else _sql_literal(d.value)
    if column not in present:
        return dflt if cast is None or d.column is not None else f"CAST({dflt} AS {cast})"
    ref = f"{alias}.{column}" if cast is None else f"CAST({alias}.{column} AS {cast})"
    return f"coalesce({ref}, {dflt})"


def sql_out_of_range(column: str, alias: str = "r") -> str:
    """The SQL condition true for a value of ``column`` outside its :data:`RANGES` (a float: also NaN/inf)."""
    r, ref = RANGES[column], f"{alias}.{column}"
    bounds = f"{ref} < {r.low:g} OR {ref} > {r.high:g}" if not r.integer else f"{ref} < {r.low} OR {ref} > {r.high}"
    return bounds if r.integer else f"isnan({ref}) OR isinf({ref}) OR {bounds}"


_TRUE = ("true", "t", "1", "1.0", "yes", "y", "correct", "right")
_FALSE = ("false", "f", "0", "0.0", "no", "n", "incorrect", "wrong")
_NULL = ("", "na", "nan", "<na>", "none", "null", "invalid")
_BOOL_MAP: dict[str, Any] = {**{s: True for s in _TRUE}, **{s: False for s in _FALSE},
                             **{s: pd.NA for s in _NULL}}


def _na_float(n: int) -> pd.api.extensions.ExtensionArray:
    """An all-<NA> Float64 array of length ``n`` (built from a mask: fast)."""
    return pd.arrays.FloatingArray(np.zeros(n), np.ones(n, dtype=bool))


def _na_string(n: int, index: pd.Index) -> pd.Series:
    """An all-<NA> ``string`` Series of length ``n`` (an Arrow null array: no Python objects)."""
    return pd.Series(_const_string(None, n), index=index)


def _const_string(value: str | None, n: int) -> pd.api.extensions.ExtensionArray:
    """``n`` times ``value`` (None: <NA>) as a ``string`` array, built by Arrow when the dtype is Arrow's."""
    if STRING_DTYPE.storage == "pyarrow":
        import pyarrow as pa

        return pd.array(pa.repeat(pa.scalar(value, pa.large_string()), n), dtype=STRING_DTYPE)
    return pd.array(np.full(n, value, dtype=object), dtype=STRING_DTYPE)  # pragma: no cover - without pyarrow


def show_value(v: Any) -> str:
    """``repr`` of a cell value for messages (numpy scalars shown as plain Python)."""
    if isinstance(v, np.generic):
        v = v.item()
    return repr(v)


def where_text(source: str | None, row: int | None = None, column: str | None = None) -> str:
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
    return SchemaError(f"{where_text(source)}missing required {word} {need}; columns found: {shown or '(none)'}; "
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
            raise SchemaError(f"{where_text(source, pos, column)}correctness must be 0/1 or true/false, got "
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
        raise SchemaError(f"{where_text(source, pos, column)}correctness must be 0/1 or true/false, got "
                          f"{show_value(s.iloc[pos])}; map a binary column with --map correct=COLUMN")
    mapped = key.astype(object).map(mapping)
    return pd.Series(pd.array(mapped.tolist(), dtype="boolean"), index=s.index, name=s.name)


def _nested_at(s: pd.Series) -> int | None:
    """Position of the first JSON object/array (a dict or list cell) of an object column, else None."""
    if s.dtype != object:
        return None
    hit = s.map(lambda v: isinstance(v, (dict, list))).to_numpy(dtype=bool)
    return int(np.flatnonzero(hit)[0]) if hit.any() else None


def _json_text(v: Any) -> Any:
    """A dict/list cell as its JSON text (``["A", "B"]``); other values unchanged."""
    import json

    return json.dumps(v, ensure_ascii=False, default=str) if isinstance(v, (dict, list)) else v


def id_text(v: Any) -> Any:
    """One id value as text, the same whatever the other values of its column: a JSON integer as the digits it
    was written with (``9007199254740993``: Python parses it exactly; a float column would round it to
    ``9007199254740992.0``), a float without a trailing ``.0`` when whole (``2.0`` -> ``"2"``, else its
    shortest round-trip ``repr``); text unchanged; a missing value (``None``, NaN, ``pd.NA``) as ``None``; any
    other value (bool, object) unchanged, for the schema's checks."""
    if isinstance(v, (str, bool)):
        return v
    if isinstance(v, (int, np.integer, float, np.floating)):
        return number_text(v)
    if v is None or v is pd.NA:
        return None
    return v


def _to_string(s: pd.Series, *, nested: str = "refuse", source: str | None = None) -> pd.Series:
    """A column as nullable strings. A JSON object or array in a cell (``"options": ["A", "B"]``) becomes its
    JSON text when ``nested="json"`` (free-text and extra columns); in a one-value field (``nested="refuse"``:
    model, item, cluster, condition) it is refused, naming the row and column."""
    if isinstance(s.dtype, pd.StringDtype) and s.dtype.na_value is pd.NA:
        return s
    pos = _nested_at(s)
    if pos is not None:
        if nested != "json":
            v = s.iloc[pos]
            kind = "a JSON object" if isinstance(v, dict) else "a JSON array"
            raise SchemaError(f"{where_text(source, pos, str(s.name))}{s.name} must be one value per row, got {kind} "
                              f"{show_value(_json_text(v))}; map a field holding one value with --map {s.name}=COLUMN")
        s = s.map(_json_text)
    if s.dtype == object:
        # mixed python objects: keep text as is, render numbers without a trailing .0
        def conv(v: Any) -> Any:
            v = id_text(v)
            return pd.NA if v is None or v is pd.NA else v if isinstance(v, str) else str(v)
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
        raise SchemaError(f"{where_text(source)}expected a pandas DataFrame, got {type(df).__name__}")
    out = df.copy(deep=False)
    if model is not None:
        if "model" in out.columns:
            out["model"] = out["model"].astype(STRING_DTYPE).fillna(model)
        else:
            out["model"] = model
    missing = [c for c in REQUIRED_COLUMNS if c not in out.columns and not (c == "correct" and "score" in out)]
    if missing:
        hints = {"model": "name the model with --model NAME or --map model=COLUMN",
                 "item": "name the item id column with --map item=COLUMN",
                 "correct": "map a correctness column with --map correct=COLUMN (0/1 or true/false), or map "
                            "gold and pred (--map gold=COLUMN --map pred=COLUMN) so correctness is derived"}
        raise missing_columns_error(missing, [str(c) for c in df.columns], source,
                                    "; ".join(hints[m] for m in missing))
    n = len(out)
    for col in ("model", "item"):
        out[col] = _to_string(out[col], source=source)
        nul = out[col].isna().to_numpy()
        if nul.any():
            pos = int(np.flatnonzero(nul)[0])
            raise SchemaError(f"{where_text(source, pos, col)}{col} is missing; every row needs a {col}")
    cl = DEFAULTS["cluster"].column      # the defaults and ranges: DEFAULTS / RANGES (the ingest SQL's too)
    out["cluster"] = _to_string(out["cluster"], source=source).fillna(out[cl]) if "cluster" in out else out[cl].copy()
    cond = DEFAULTS["condition"].value
    if "condition" in out:
        out["condition"] = _to_string(out["condition"], source=source).fillna(cond)
    else:
        out["condition"] = pd.Series(_const_string(cond, n), index=out.index)
    out["trial"] = (_coerce_trial(out["trial"], source) if "trial" in out
                    else np.full(n, DEFAULTS["trial"].value, dtype="int64"))
    if "masking_rate" in out:
        out["masking_rate"] = coerce_masking_rate(out["masking_rate"], source)
    else:
        out["masking_rate"] = _na_float(n)
    if "score" in out:
        out["score"] = coerce_score(out["score"], source)
        if "correct" in out:
            out["correct"] = coerce_correct(out["correct"], source)
        else:
            out["correct"] = correct_from_score(out["score"])
    else:
        out["correct"] = coerce_correct(out["correct"], source)
        out["score"] = score_from_correct(out["correct"])
    for col in ("response", "gold", "pred", *TEXT_COLUMNS):
        if col in out:
            out[col] = _to_string(out[col], nested="json", source=source)
        elif col not in TEXT_COLUMNS:
            out[col] = _na_string(n, out.index)
    for col in out.columns:  # extra columns: a list or object per cell (MMLU-Pro's options) is kept as JSON text
        if col not in CANONICAL_COLUMNS and _nested_at(out[col]) is not None:
            out[col] = _to_string(out[col], nested="json", source=source)
    order = [c for c in CANONICAL_COLUMNS if c in out.columns]
    order += [c for c in out.columns if c not in order]
    out = out[order]
    out.index = pd.RangeIndex(n)
    return out


def coerce_score(values: pd.Series, source: str | None = None, column: str = "score") -> pd.Series:
    """Coerce a score column to nullable ``Float64``.

    Accepts numbers (any scale: partial credit 0-1, bleu 0-100, a judge's 1-10), booleans (1.0/0.0) and
    numbers written as text; empty, NA, ``null`` and ``invalid`` become <NA> (an invalid answer).
    Anything else (words, infinities) raises :class:`SchemaError` naming the file, row and column.
    """
    s = values
    if isinstance(s.dtype, pd.BooleanDtype) or s.dtype == bool:
        out = s.astype("Float64")
    elif pd.api.types.is_numeric_dtype(s.dtype):
        out = s.astype("Float64")
        out = out.mask(out.isna())          # NaN -> <NA>
    else:   # text: numbers, the correctness words (true/false, yes/no, ... as 1/0), empty/NA/invalid
        key = s.astype("string").str.strip()
        mapping: dict[str, float] = {}
        for u in pd.unique(key.dropna()):
            word = _BOOL_MAP.get(u.lower(), "?")
            if word is not pd.NA and word != "?":
                mapping[u] = 1.0 if word else 0.0
                continue
            if word is pd.NA:
                mapping[u] = np.nan
                continue
            try:
                mapping[u] = float(u)
            except ValueError:
                pos = int(np.flatnonzero((key == u).to_numpy(dtype=bool, na_value=False))[0])
                raise SchemaError(f"{where_text(source, pos, column)}a score must be a number, got "
                                  f"{show_value(s.iloc[pos])}; map a numeric column with --map score=COLUMN") from None
        num = key.astype(object).map(mapping).astype(float)
        out = pd.Series(num, index=s.index).astype("Float64")
        out = out.mask(out.isna())
    vals = out.to_numpy(dtype=float, na_value=np.nan)
    inf = np.isinf(vals)
    if inf.any():
        pos = int(np.flatnonzero(inf)[0])
        raise SchemaError(f"{where_text(source, pos, column)}a score must be a finite number, got {vals[pos]}")
    return pd.Series(out.array, index=s.index, name=s.name)


def score_from_correct(correct: pd.Series) -> pd.Series:
    """The score of a binary row: 1.0 / 0.0, <NA> for an invalid answer (``correct`` <NA>)."""
    return pd.Series(correct.astype("Float64").array, index=correct.index, name="score")


def correct_from_score(score: pd.Series, threshold: float | None = None) -> pd.Series:
    """``correct`` of a source that gives only ``score``: ``score >= threshold`` with a threshold; without one
    ``score == 1`` when every score is 0 or 1 (a binary source), else <NA> throughout (graded: no
    correctness until a threshold is given)."""
    vals = score.to_numpy(dtype=float, na_value=np.nan)
    nul = np.isnan(vals)
    if threshold is None:
        if not np.isin(vals[~nul], (0.0, 1.0)).all():
            return pd.Series(pd.array(np.full(len(vals), None, dtype=object), dtype="boolean"), index=score.index,
                             name="correct")
        hit = vals == 1.0
    else:
        with np.errstate(invalid="ignore"):
            hit = vals >= threshold
    out = pd.array(hit, dtype="boolean")
    out[nul] = pd.NA
    return pd.Series(out, index=score.index, name="correct")


def apply_threshold(log: pd.DataFrame, threshold: float | None, source: str | None = None) -> pd.DataFrame:
    """Binarise a graded log: ``correct = score >= threshold`` where ``correct`` is <NA> and ``score`` is not
    (the CLI's ``--threshold T``). Binary rows keep their ``correct``; ``score`` is kept as it is.
    ``threshold=None`` returns ``log`` unchanged. Returns a new frame (attrs kept, ``attrs["threshold"]`` set)."""
    if threshold is None:
        return log
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float, np.integer, np.floating)) \
            or not np.isfinite(float(threshold)):
        raise SchemaError(f"{where_text(source)}threshold must be a finite number (correct = score >= threshold), got "
                          f"{threshold!r}")
    if "score" not in log.columns:
        return log
    fill = log["correct"].isna() & log["score"].notna()
    out = log.copy(deep=False)
    if fill.any():
        corr = out["correct"].copy()
        corr[fill.to_numpy()] = correct_from_score(out["score"][fill], float(threshold)).to_numpy()
        out["correct"] = corr
    out.attrs = {**log.attrs, "threshold": float(threshold)}
    return out


def outcome_values(log: pd.DataFrame, outcome: str = "correct") -> pd.Series:
    """The outcome an analysis of the mean uses, as ``Float64`` (<NA> = invalid): the ``score`` column for
    ``outcome="score"`` (derived from ``correct`` when the frame has none), ``correct`` as 1.0/0.0 for
    ``"correct"``."""
    if outcome == "score" and "score" in log.columns:
        return log["score"].astype("Float64")
    return score_from_correct(log["correct"])


def graded_rows(log: Any) -> int:
    """Rows with a score but no correctness (a graded log read without a threshold)."""
    if not isinstance(log, pd.DataFrame) or "score" not in log.columns or "correct" not in log.columns:
        return 0
    return int((log["score"].notna() & log["correct"].isna()).sum())


def resolve_outcome(log: Any, outcome: str = "auto", where: str = "") -> str:
    """Which column an analysis of the mean uses: ``"score"`` or ``"correct"``.

    ``auto`` is ``score`` when the log has a score that is not 0/1 (graded), else ``correct``;
    ``correct`` on a log with graded rows and no threshold is refused (:class:`SchemaError`).
    """
    if outcome not in OUTCOMES:
        raise SchemaError(f"{where + ': ' if where else ''}outcome must be one of {', '.join(OUTCOMES)}, "
                          f"got {outcome!r}")
    has_score = isinstance(log, pd.DataFrame) and "score" in log.columns
    if outcome == "correct":
        require_binary(log, where or "this analysis")
        return "correct"
    if outcome == "score":
        return "score"
    if not has_score:
        return "correct"
    vals = log["score"].to_numpy(dtype=float, na_value=np.nan)
    vals = vals[~np.isnan(vals)]
    return "correct" if (np.isin(vals, (0.0, 1.0)).all() and graded_rows(log) == 0) else "score"


#: extracted answers that mean "no answer" (lm-evaluation-harness writes ``[invalid]`` when its filter finds none)
NO_ANSWER_MARKERS: tuple[str, ...] = ("", "[invalid]")


def unanswered(pred: pd.Series) -> np.ndarray:
    """The rows without an extracted answer, a boolean mask: ``pred`` missing, empty or ``[invalid]``
    (:data:`NO_ANSWER_MARKERS`); an empty ``pred`` counts in a column that holds at least one answer (a
    column left empty throughout, as a canonical log written without answers has, carries no extraction
    and decides nothing; a streamed read decides this per chunk).

    The package's one invalid-answer rule, part 1 (part 2 is :func:`apply_invalid`): a table read from a file
    (:func:`mrcstats.io.tabular.derive_correct`, every CSV/TSV/JSON/Parquet table reader, streamed or not)
    makes such a row invalid (``correct`` and ``score`` <NA>) even when it gives a ``correct`` for it
    (MMLU-Pro's rows without an extracted answer used to show as "Invalid: 0"); every count of invalid
    answers (``summary``, ``compare``, ``ingest``, the reports) then includes them. The tool readers
    (Inspect AI, lm-evaluation-harness, HELM, lighteval, EEE) decide invalid answers by their tool's own
    rule (an Inspect scorer's ``answer`` is optional and says nothing about validity)."""
    p = pred.astype("string").str.strip().str.lower()
    marked = p.isin([m for m in NO_ANSWER_MARKERS if m]).to_numpy(dtype=bool, na_value=False)
    empty = (p.isna() | (p == "")).to_numpy(dtype=bool, na_value=True)
    return marked | (empty if not empty.all() else False)




def require_binary(log: Any, where: str, correct: str = "correct") -> None:
    """The one check of every analysis that needs a 0/1 outcome (glmer binomial, McNemar, discrimination,
    IRT, masking indicators, ...): refuse a graded log (rows with a ``score`` and no ``correct``) with one
    line saying how to binarise it."""
    n = graded_rows(log) if correct == "correct" else 0
    if n:
        sc = log["score"][log["score"].notna() & log["correct"].isna()]
        raise SchemaError(f"{where}: needs a binary outcome (correct), but the log holds graded scores ({plural(n, 'row')} "
                          f"with a score and no correct, e.g. score {float(sc.iloc[0]):g}); read it with a "
                          f"threshold (--threshold T, read_log(..., threshold=T): correct = score >= T), or use "
                          f"summary / compare / power, which analyse the mean score")


def coerce_masking_rate(mr: pd.Series, source: str | None = None) -> pd.Series:
    """Masking rates as ``Float64`` percents in 0..100 (``"35%"`` and ``"35"`` read as 35; empty = null)."""
    if not pd.api.types.is_numeric_dtype(mr.dtype) or isinstance(mr.dtype, pd.BooleanDtype):
        text = mr.astype("string").str.strip()
        text = text.mask(text.str.lower().isin(_NULL))
        num = pd.to_numeric(text.str.rstrip("%"), errors="coerce")
        bad = (num.isna() & text.notna()).to_numpy(dtype=bool, na_value=False)
        if bad.any():
            pos = int(np.flatnonzero(bad)[0])
            raise SchemaError(f"{where_text(source, pos, 'masking_rate')}masking rate must be a number "
                              f"(percent 0-100), got {show_value(mr.iloc[pos])}")
        mr = num
    out = pd.Series(mr, copy=False).astype("Float64")
    vals = out.to_numpy(dtype=float, na_value=np.nan)
    rng = RANGES["masking_rate"]
    with np.errstate(invalid="ignore"):
        bad = (vals < rng.low) | (vals > rng.high) | np.isinf(vals)
    if bad.any():
        pos = int(np.flatnonzero(bad)[0])
        raise SchemaError(f"{where_text(source, pos, 'masking_rate')}masking rate {vals[pos]:g} is outside "
                          f"{rng.low:g}-{rng.high:g} "
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
    if {"model", "item"} <= set(log.columns) and ("correct" in log.columns or "score" in log.columns) \
            and not is_canonical(log):
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
        return SchemaError(f"{where_text(source, row, column)}correctness must be 0/1 or true/false, got {kind} "
                           f"{shown}; map a binary column with --map correct=COLUMN{nested}")
    return SchemaError(f"{where_text(source, row, column)}{field} must be one value per row, got {kind} {shown}; "
                       f"map a field holding one value with --map {field}=COLUMN{nested}")


def _coerce_trial(s: pd.Series, source: str | None) -> np.ndarray:
    """Trials as int64: whole numbers in ``0..MAX_TRIAL``; an empty cell is trial 0.

    Refused (naming the row): non-numbers, fractions, NaN/inf, negatives and numbers
    beyond :data:`MAX_TRIAL` (a float like 1e20 has no exact integer, and casting it
    would wrap to -9223372036854775808).
    """
    fix = "trial is a 0-based repetition index (a whole number 0, 1, 2, ...)"
    rng, empty = RANGES["trial"], DEFAULTS["trial"].value
    if isinstance(s.dtype, pd.CategoricalDtype):  # its values, as any other column of them
        s = s.astype(object)
    if pd.api.types.is_integer_dtype(s.dtype) and not s.isna().any():
        arr = s.to_numpy(dtype="int64") if not pd.api.types.is_unsigned_integer_dtype(s.dtype) else None
        if arr is None:  # uint64 may exceed int64
            u = s.to_numpy(dtype="uint64")
            bad = u > rng.high
        else:
            bad = (arr < rng.low) | (arr > rng.high)
        if bad.any():
            pos = int(np.flatnonzero(bad)[0])
            raise SchemaError(f"{where_text(source, pos, 'trial')}trial {show_value(s.iloc[pos])} is out of range "
                              f"{rng.low}..{rng.high}; {fix}")
        return s.to_numpy(dtype="int64")
    if s.dtype == object or isinstance(s.dtype, pd.StringDtype):
        text = s.astype("string").str.strip()
        missing = text.isna() | (text == "")
        num = pd.to_numeric(text.mask(missing), errors="coerce")
    elif isinstance(s.dtype, pd.BooleanDtype) or s.dtype == bool:
        raise SchemaError(f"{where_text(source, 0, 'trial')}trial must be an integer, got booleans; {fix}")
    else:
        num = s
        missing = s.isna()
    vals = pd.Series(num).astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    miss = np.asarray(missing, dtype=bool)
    filled = np.where(np.isnan(vals) & miss, float(empty), vals)
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(filled) | (filled != np.round(filled))
        out_of_range = ~bad & ((filled < rng.low) | (filled > rng.high))
    if bad.any():
        pos = int(np.flatnonzero(bad)[0])
        raise SchemaError(f"{where_text(source, pos, 'trial')}trial must be an integer, got {show_value(s.iloc[pos])}; "
                          f"{fix}")
    if out_of_range.any():
        pos = int(np.flatnonzero(out_of_range)[0])
        raise SchemaError(f"{where_text(source, pos, 'trial')}trial {show_value(s.iloc[pos])} is out of range "
                          f"{rng.low}..{rng.high}; {fix}")
    return filled.astype("int64")


def check_duplicates(df: pd.DataFrame, on_duplicate: str = "error", source: str | None = None,
                     skipped: dict[str, int] | None = None,
                     files: Sequence[tuple[str, int]] | None = None) -> pd.DataFrame:
    """Enforce one row per ``(model, item, trial, condition)`` (and masking rate, see :data:`KEY_COLUMNS`).

    ``on_duplicate="error"`` raises :class:`SchemaError` naming the first duplicated
    key, its rows and what can tell the rows apart (:func:`_duplicate_advice`); ``"first"``/``"last"`` keep
    that occurrence and count the dropped rows in ``skipped["duplicate (model, item, trial, condition)"]``.
    ``files``: ``(file name, rows)`` of each file when ``df`` is several files read in that order (the
    message then names each row's file, and suggests naming each file's model only when a key repeats across
    files: within one file that cannot help).
    """
    if on_duplicate not in DUPLICATE_POLICIES:
        raise SchemaError(f"on_duplicate must be one of {', '.join(DUPLICATE_POLICIES)}, got {on_duplicate!r}")
    key = _distinguishing(df, KEY_COLUMNS)
    dup = df.duplicated(subset=key, keep=False)
    if not dup.any():
        return df
    if on_duplicate == "error":
        pos = np.flatnonzero(dup.to_numpy())
        kd = df.iloc[pos[0]][list(KEY_COLUMNS)].to_dict()
        ids = df.iloc[pos].groupby(key, sort=False, dropna=False, observed=True).ngroup().to_numpy()
        twin = int(pos[np.flatnonzero(ids == ids[0])[1]])   # the first row's own duplicate (missing values equal)
        n_extra = int(dup.sum() - (~df[dup].duplicated(subset=list(KEY_COLUMNS))).sum())
        mr = "" if pd.isna(kd["masking_rate"]) else f" masking_rate={kd['masking_rate']}"
        file_of = _file_of(files, len(df))
        rows = f"rows {pos[0] + 1} and {twin + 1}"
        if file_of is not None:
            (fa, ra), (fb, rb) = file_of(pos[0]), file_of(twin)
            rows += f" ({fa} row {ra + 1}, {fb} row {rb + 1})"
        across = file_of is not None and _across_files(df, dup, key, file_of)
        raise SchemaError(f"{where_text(source)}{n_extra} duplicate (model, item, trial, condition) row(s), first "
                          f"model={kd['model']!r} item={kd['item']!r} trial={kd['trial']} "
                          f"condition={kd['condition']!r}{mr} at {rows}; "
                          f"{_duplicate_advice(df, dup, across)}")
    drop = df.duplicated(subset=key, keep=on_duplicate)
    n_drop = int(drop.sum())
    if skipped is not None:
        reason = f"duplicate (model, item, trial, condition), kept {on_duplicate}"
        skipped[reason] = skipped.get(reason, 0) + n_drop
    out = df.loc[~drop.to_numpy()]
    out.index = pd.RangeIndex(len(out))
    return out


def _file_of(files: Sequence[tuple[str, int]] | None, n: int):
    """``row -> (file name, row within that file)`` for a log of several files read in order, or None."""
    if not files or len(files) < 2 or sum(k for _, k in files) != n:
        return None
    ends = np.cumsum([k for _, k in files])

    def where(row: int) -> tuple[str, int]:
        i = int(np.searchsorted(ends, row, side="right"))
        return files[i][0], int(row - (ends[i - 1] if i else 0))
    return where


def _across_files(df: pd.DataFrame, dup: pd.Series, key: list[str], file_of) -> bool:
    """Whether some duplicated key has rows in two files (naming each file's model can then tell them apart)."""
    pos = np.flatnonzero(dup.to_numpy())
    rows = df.iloc[pos][key].assign(_file=[file_of(int(p))[0] for p in pos])
    per_key = rows.groupby(key, sort=False, dropna=False, observed=True)["_file"].nunique()
    return bool((per_key > 1).any())


def _distinguishing(df: pd.DataFrame, columns: tuple[str, ...]) -> list[str]:
    """The key columns that are not one value throughout (a log without trials, conditions or masking has
    trial 0, condition "" and no masking rate on every row): rows repeat a key exactly when they repeat it
    on these, so :func:`check_duplicates` hashes only them. Never empty (the first column stays)."""
    def constant(s: pd.Series) -> bool:
        na = s.isna().to_numpy()
        if na.all():
            return True
        return not na.any() and bool((s == s.iloc[0]).all())

    keep = [c for c in columns if not constant(df[c])]
    return keep or [columns[0]]


#: columns that say where a row was read from, not what it holds (left out when duplicates are compared)
_PROVENANCE = ("source", "file", "filename", "_file", "path")


#: columns that hold a row's answer or its scoring, not what the row is (two of them differing does not say why
#: a key repeats)
_OUTCOME = ("correct", "score", "response", "pred", "value", "answer", "explanation", "invalidated", "metadata")


def _duplicate_advice(df: pd.DataFrame, dup: pd.Series, across_files: bool = False) -> str:
    """How to resolve duplicate keys, only with what can help:

    * identical rows (the same run read twice): ``--on-duplicate first|last``;
    * rows that differ in a column other than the answer (a seed, a prompt): that column as the trial or the
      condition (``--map trial=COL`` / ``--map condition=COL``);
    * rows of several files under one model name: each file's model (``--model PATH=NAME``) -- never suggested
      for repeats inside one file, which it cannot tell apart;
    * rows that differ only in the answer: repeated samples without a trial number (number them, ``--map
      trial=COL``), or a re-run meant to replace a row (``--on-duplicate first|last``, the dropped rows counted).
    """
    rows = df[dup.to_numpy()]
    content = [c for c in rows.columns if c not in _PROVENANCE]
    same = rows.astype(str).duplicated(subset=content, keep=False)
    if bool(same.all()):
        return ("the duplicated rows are identical (the same run read twice?): pass --on-duplicate first|last "
                "to keep one copy")
    keyed = rows.astype(str).groupby(list(KEY_COLUMNS), sort=False, dropna=False)
    differ = [c for c in content if c not in KEY_COLUMNS and bool((keyed[c].nunique(dropna=False) > 1).any())]
    shown = ", ".join(repr(c) for c in differ[:5]) or "their content"
    telling = [c for c in differ if c not in _OUTCOME]
    ways = []
    if across_files:
        ways.append("name each file's model (--model PATH=NAME for each run's file or folder, or --map model=COLUMN)")
    if telling:
        c = telling[0]
        ways.append(f"use {c!r} as the trial or the condition (--map trial={c} for repeated samples, "
                    f"--map condition={c} for different settings)")
    if not ways:
        ways.append("if they are repeated samples of the item, number them in a column (0, 1, ... per model and "
                    "item) and pass --map trial=COLUMN; if a later row re-runs an earlier one, keep one with "
                    "--on-duplicate first|last (the dropped rows are counted)")
        return (f"the duplicated rows differ only in the answer ({shown}) and no column says why the key repeats: "
                + ways[0])
    return (f"the duplicated rows differ (in {shown}): they are different runs, samples or conditions, not one "
            f"run read twice, and --on-duplicate would drop real rows; tell them apart: " + "; or ".join(ways))


def validate_log(df: pd.DataFrame, *, on_duplicate: str = "error", source: str | None = None,
                 threshold: float | None = None) -> pd.DataFrame:
    """Validate a response log and return it in canonical form (a new frame).

    Checks the required columns (``model``, ``item``, ``correct`` or ``score``), coerces dtypes
    (see the module docstring), fills defaults (``cluster`` = ``item``, ``trial`` = 0,
    ``condition`` = "", ``score`` = ``correct`` as 1.0/0.0), orders canonical columns first and keeps
    every other column, and enforces one row per ``(model, item, trial, condition)``.
    ``threshold`` binarises graded scores (:func:`apply_threshold`).
    ``df.attrs`` are kept; dropped duplicates (``on_duplicate="first"|"last"``) are
    counted in ``attrs["skipped"]``.

    Raises:
        SchemaError: with the file/row/column and a fix, for any violation.
    """
    attrs = dict(getattr(df, "attrs", {}) or {})
    out = apply_threshold(coerce_log(df, source=source), threshold, source)
    skipped = dict(attrs.get("skipped", {}) or {})
    out = check_duplicates(out, on_duplicate, source, skipped)
    out.attrs.update(attrs)
    out.attrs["skipped"] = skipped
    return mark_validated(out)


#: the frames :func:`validate_log` and :func:`mrcstats.io.read_log` returned (by id, held weakly)
_VALIDATED: weakref.WeakValueDictionary[int, pd.DataFrame] = weakref.WeakValueDictionary()


def mark_validated(df: pd.DataFrame) -> pd.DataFrame:
    """Record that ``df`` is a validated canonical log (what :func:`validate_log` and ``read_log`` return), so
    :func:`mrcstats.io.write_log` writes it without validating it a second time. Returns ``df``."""
    _VALIDATED[id(df)] = df
    return df


def is_validated(df: Any) -> bool:
    """True for a frame :func:`mark_validated` recorded that still has the canonical dtypes. A new frame
    (a filter, a copy, a concatenation) is not: it is validated again. A log changed in place after
    reading (``log.loc[...] = ...``) is the one case this cannot see; pass ``log.copy()`` to have it checked."""
    return isinstance(df, pd.DataFrame) and _VALIDATED.get(id(df)) is df and is_canonical(df)


def is_canonical(df: pd.DataFrame) -> bool:
    """True when ``df`` already has every core column in its canonical dtype."""
    if not all(c in df.columns for c in CORE_COLUMNS):
        return False
    want = {"trial": "int64", "masking_rate": "Float64", "correct": "boolean"}
    if "score" in df.columns and str(df["score"].dtype) != "Float64":
        return False
    for c in CORE_COLUMNS:
        dt = df[c].dtype
        if c in want:
            if str(dt) != want[c]:
                return False
        elif not isinstance(dt, pd.StringDtype):
            return False
    return True


def log_stats(df: pd.DataFrame) -> dict[str, Any]:
    """The ``ingest`` summary of a canonical log: rows, models, items, clusters, conditions and, per model,
    ``accuracy`` -- the very number ``summary`` gives (its default conventions: invalid answers count as not
    correct, trials pooled), i.e. the mean of the outcome :func:`resolve_outcome` picks
    (:func:`outcome_values`, <NA> scoring 0) -- and ``invalid``, the rows without that outcome.

    A graded log (outcome ``score``) adds ``"outcome": "score"``; its ``accuracy`` is the mean score
    (``mean_score`` repeats it, the key older versions printed beside a 0/1 ``accuracy``), summed per model
    in row order exactly as :func:`mrcstats.stats.accuracy.summarize_scores` sums them. Read with a
    threshold, it adds ``threshold`` and ``accuracy_threshold``: the share with ``score >= threshold``.
    """
    acc = LogStats()
    acc.add(df)
    return acc.result(df.attrs.get("skipped", {}), df.attrs.get("threshold"))


class LogStats:
    """:func:`log_stats` gathered chunk by chunk (a streamed ``ingest --out``): :meth:`add` each chunk of the
    log in order, then :meth:`result` is what :func:`log_stats` gives for the whole log (the same numbers,
    to the bit: the per-row values are kept, 14 bytes a row, and summed as for the whole log).

    accuracy = correct rows / rows per model (invalid = not correct); mean score = mean of ``score`` per
    model with invalid rows 0 (pandas' groupby mean); ``outcome`` is ``score`` when a score is not 0/1 or a
    row has a score and no correct (:func:`resolve_outcome`)."""

    def __init__(self) -> None:
        self._models: dict[str, int] = {}
        self._codes: list[np.ndarray] = []
        self._correct: list[np.ndarray] = []
        self._no_correct: list[np.ndarray] = []
        self._score: list[np.ndarray] = []
        self._items: list[Any] = []
        self._clusters: list[Any] = []
        self._conditions: set[str] = set()
        self._binary = True        # every score 0/1 and no graded row
        self.rows = 0

    def add(self, df: pd.DataFrame) -> None:
        """Count one chunk of a canonical log."""
        codes, models = pd.factorize(df["model"])
        glob = np.array([self._models.setdefault(str(m), len(self._models)) for m in models], dtype=np.int32)
        self._codes.append(glob[codes] if len(codes) else np.zeros(0, np.int32))
        self._correct.append(df["correct"].fillna(False).astype(bool).to_numpy())
        self._no_correct.append(df["correct"].isna().to_numpy())
        score = df["score"].to_numpy(dtype=float, na_value=np.nan) if "score" in df.columns \
            else np.full(len(df), np.nan)
        self._score.append(score)
        if "score" in df.columns:
            vals = score[~np.isnan(score)]
            self._binary = self._binary and bool(np.isin(vals, (0.0, 1.0)).all()) and graded_rows(df) == 0
        for parts, col in ((self._items, "item"), (self._clusters, "cluster")):
            parts.append(pd.unique(df[col]))
            if len(parts) > 8:   # keep the distinct values only
                parts[:] = [pd.unique(_concat(parts))]
        self._conditions.update(str(c) for c in pd.unique(df["condition"]))
        self.rows += len(df)

    def result(self, skipped: Mapping[str, int] | None = None, threshold: float | None = None) -> dict[str, Any]:
        """The summary of the rows added (``skipped`` and ``threshold``: the log's ``attrs``)."""
        names = sorted(self._models)   # by code point, as Python sorts str
        order = np.empty(len(names), dtype=np.int32)
        for j, m in enumerate(names):
            order[self._models[m]] = j
        codes = order[np.concatenate(self._codes)] if self._codes else np.zeros(0, np.int32)
        correct = np.concatenate(self._correct) if self._correct else np.zeros(0, bool)
        score = np.concatenate(self._score) if self._score else np.zeros(0)
        graded = not self._binary
        invalid = np.isnan(score) if graded else (np.concatenate(self._no_correct) if self._no_correct
                                                  else np.zeros(0, bool))
        k = len(names)
        n = np.bincount(codes, minlength=k)
        c = np.bincount(codes, weights=correct, minlength=k)
        i = np.bincount(codes, weights=invalid, minlength=k)
        out = {
            "rows": self.rows,
            "models": names,
            "items": _n_unique(self._items),
            "clusters": _n_unique(self._clusters),
            "conditions": sorted(self._conditions),
            "accuracy": {m: float(c[j]) / float(n[j]) for j, m in enumerate(names)},
            "invalid": {m: int(i[j]) for j, m in enumerate(names)},
            "skipped": dict(skipped or {}),
        }
        if graded:
            # accuracy is the number summary prints: each model's scores (invalid = 0) summed in row order
            x = np.where(np.isnan(score), 0.0, score)
            parts = np.split(x[np.argsort(codes, kind="stable")], np.cumsum(n)[:-1])
            means = {names[j]: float(p.sum() / len(p)) for j, p in enumerate(parts)}
            share = out["accuracy"]
            out = {**out, "accuracy": dict(means), "outcome": "score", "mean_score": dict(means)}
            if threshold is not None:   # correct is score >= threshold
                out["threshold"] = float(threshold)
                out["accuracy_threshold"] = share
        return out


def _n_unique(parts: list[Any]) -> int:
    """The number of distinct values (missing ones not counted) over the chunks' unique values."""
    return int(_concat(parts).nunique()) if parts else 0


def _concat(parts: list[Any]) -> pd.Series:
    return pd.concat([pd.Series(p) for p in parts], ignore_index=True) if len(parts) > 1 else pd.Series(parts[0])


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
            raise SchemaError(f"{where_text(source)}columns {other!r} and {c!r} differ only in upper/lower case; a "
                              f"dataset is queried with DuckDB, where column names ignore case, so one would stand "
                              f"in for the other; rename one of them in the source (or read it in memory, without "
                              f"--dataset)")

