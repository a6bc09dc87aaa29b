"""The analysis plug-in interface: a spec in, an :class:`Output` (what to lay out and what to report) out.

An analysis type is one class in one module of this package, listed in
:mod:`mrcstats.report.analyses.registry`. It declares

* ``type`` — the name used in the spec (``- type: glmm``);
* ``title`` — the section title used when the analysis is skipped;
* ``keys`` — its spec keys, ``{name: Key(types, default, required=..., choices=...)}``; every analysis also
  takes the :data:`COMMON_KEYS` (``title``, ``filter``, ``published``, ``tolerance``);
* ``check(opts, err, base)`` — optional extra validation/normalisation of its options (``err(key, msg)``
  builds the :class:`~mrcstats.errors.InputError` naming the spec file and key);
* ``run(ctx, spec) -> Output`` — the computation, calling ``stats``/``models`` by plain imports, and the
  layout: tables (:class:`~mrcstats.report.tables.Table`), matplotlib figures (built with
  :mod:`mrcstats.report.figures`), paragraphs and notes, in order.

The :class:`Output` also carries what the report collects across analyses: Methods lines, rows left out
and why, the p-values of the hypothesis tests run (adjusted together for multiplicity), "paper | ours"
fidelity checks, analyses that could not be reproduced, and headline numbers for scripts.
An analysis raises :class:`Skip` when a building block is missing (the report notes it and goes on)
and :class:`~mrcstats.errors.InputError` for bad input (the report stops, naming the analysis).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from mrcstats.errors import InputError
from mrcstats.report.tables import Table


class Skip(Exception):
    """A building block is missing: the analysis is skipped, with this message as the note."""


@dataclass(frozen=True)
class Key:
    """One spec key of an analysis: accepted Python types, default, and whether it must be given."""

    types: tuple[type, ...]
    default: Any = None
    required: bool = False
    choices: tuple[Any, ...] | None = None
    help: str = ""


#: keys every analysis takes
COMMON_KEYS: dict[str, Key] = {
    "title": Key((str,), None, help="section title"),
    "filter": Key((dict,), {}, help="{column: value or [values]}: rows kept for this analysis"),
    "published": Key((dict,), None, help="the paper's values of the main table: {row: {column: value}}"),
    "tolerance": Key((float, int, dict), None, help="largest |ours - paper| counted as reproduced (table units): "
                     "a number or {row, column or \"row / column\": number}"),
    "not_compared": Key((dict,), None, help="{\"row / column\", row, column or \"*\": reason}: published cells "
                        "shown beside ours but not counted as reproduced (computed from simulated data, or from the "
                        "paper's own numbers; a paper value given as null: unreadable), each listed with the reason"),
}


@dataclass(frozen=True)
class AnalysisSpec:
    """One validated entry of the spec's ``analyses`` list."""

    type: str
    options: Mapping[str, Any]
    where: str  # "analyses[2]": for error messages only, never printed in the PDF

    def get(self, key: str) -> Any:
        return self.options.get(key)

    @property
    def index(self) -> int:
        """Position in the spec (keeps file names of repeated analysis types distinct)."""
        return int(self.where.split("[")[-1].rstrip("]"))


@dataclass(frozen=True)
class TestRecord:
    """One hypothesis test of a report (adjusted with the others of its family for multiplicity)."""

    family: str        # tests sharing a family are adjusted together ("report" by default)
    label: str         # what was tested, in words
    test: str          # test name ("Fisher's exact test (exact)")
    p: float
    statistic: str = ""  # e.g. "χ²(2) = 5.31", already formatted


@dataclass(frozen=True)
class Fidelity:
    """One published number set beside ours."""

    table: str
    cell: str
    paper: float
    ours: float
    tolerance: float

    @property
    def delta(self) -> float:
        return self.ours - self.paper

    @property
    def ok(self) -> bool:
        return abs(self.delta) <= self.tolerance + 1e-12


@dataclass(frozen=True)
class NotCompared:
    """A published cell shown beside ours but not counted as reproduced, and why (``paper`` NaN: unreadable)."""

    table: str
    cell: str
    reason: str
    paper: float = float("nan")
    ours: float = float("nan")


@dataclass(frozen=True)
class NotReproduced:
    """A published result the data cannot support, with the reason."""

    what: str
    reason: str


@dataclass
class Output:
    """What one analysis hands to the report: layout blocks in order, plus what the report collects.

    Build it with the helper methods (``out.table(t)``, ``out.figure(fig, name, caption)``,
    ``out.text(...)``, ``out.note(...)``, ``out.code(...)``, ``out.heading(...)``) and fill the lists.
    """

    title: str
    blocks: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = field(default_factory=list)
    methods: list[str] = field(default_factory=list)
    methods_title: str | None = None
    left_out: dict[str, int] = field(default_factory=dict)      # rows left out by this analysis, by reason
    tests: list[TestRecord] = field(default_factory=list)
    fidelity: list[Fidelity] = field(default_factory=list)
    not_compared: list[NotCompared] = field(default_factory=list)
    not_reproduced: list[NotReproduced] = field(default_factory=list)
    test_methods: dict[str, str] = field(default_factory=dict)  # shared method paragraphs, by key
    software: list[str] = field(default_factory=list)           # extra software used ("R 4.2.2, lme4 1.1-31")
    headline: dict[str, Any] = field(default_factory=dict)
    sections: list[Output] = field(default_factory=list)        # further sections (e.g. random effects)

    # ---- layout blocks
    def table(self, t: Table) -> None:
        self.blocks.append(("table", (t,), {}))

    def figure(self, fig: Any, name: str, caption: str, width_in: float | None = None) -> None:
        self.blocks.append(("figure", (fig, name, caption), {"width_in": width_in}))

    def text(self, s: str) -> None:
        self.blocks.append(("para", (s,), {}))

    def note(self, s: str) -> None:
        self.blocks.append(("note", (s,), {}))

    def code(self, s: str) -> None:
        self.blocks.append(("code", (s,), {}))

    def heading(self, s: str) -> None:
        self.blocks.append(("h2", (s,), {}))

    def leave_out(self, reason: str, n: int) -> None:
        """Count ``n`` rows left out of this analysis for ``reason`` (reported in its notes and Methods)."""
        if n:
            self.left_out[reason] = self.left_out.get(reason, 0) + int(n)


class Context:
    """What an analysis can read: the data (log joined with features), the seed, earlier results."""

    def __init__(self, data: pd.DataFrame, log: pd.DataFrame, seed: int, tables_dir: Path | None = None) -> None:
        self.data = data
        self.log = log
        self.seed = seed
        #: results other analyses refer to by name (``glmm`` stores ``(result, data, spec)``)
        self.glmms: dict[str, tuple[Any, pd.DataFrame, AnalysisSpec]] = {}
        #: extra table files written beside the PDF but not shown (e.g. a compact layout)
        self.extra_tables: list[Table] = []

    def rows(self, a: AnalysisSpec) -> pd.DataFrame:
        """The data rows an analysis uses: ``filter`` applied."""
        return apply_filter(self.data, a.get("filter"))


class Analysis:
    """Base class of an analysis plug-in (see the module docstring)."""

    type: ClassVar[str] = ""
    title: ClassVar[str] = ""
    keys: ClassVar[dict[str, Key]] = {}

    def check(self, opts: dict[str, Any], err: Callable[[str, str], InputError], base: Path) -> None:
        """Validate/normalise ``opts`` in place beyond types and required keys (default: nothing)."""

    def run(self, ctx: Context, a: AnalysisSpec) -> Output:  # pragma: no cover - interface
        raise NotImplementedError


# ----------------------------------------------------------------------------- helpers for plug-ins


def apply_filter(data: pd.DataFrame, filt: Mapping[str, Any] | None) -> pd.DataFrame:
    """Rows whose column ``k`` holds one of the values ``filt[k]`` (numbers compared as numbers)."""
    d = data
    for k, v in (filt or {}).items():
        if k not in d.columns:
            raise InputError(f"filter: no column {k!r} in the log (columns: {', '.join(map(str, d.columns))})")
        vals = v if isinstance(v, list) else [v]
        col = d[k]
        if pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col):
            try:
                keep = col.astype("Float64").isin([float(x) for x in vals]).fillna(False)
            except (TypeError, ValueError):
                raise InputError(f"filter.{k}: column {k!r} is numeric; give numbers, got {vals!r}") from None
        else:
            keep = col.astype(str).isin([str(x) for x in vals])
        d = d[keep.to_numpy(dtype=bool)]
    if len(d) == 0:
        raise InputError(f"filter {dict(filt or {})} keeps no rows")
    return d


def filter_note(filt: Mapping[str, Any] | None, lead: str = "; ") -> str:
    """``"; rows with condition = strict, masking_rate = 50"`` (empty without a filter)."""
    def val(v: Any) -> str:
        return " or ".join(map(str, v)) if isinstance(v, list) else str(v)

    return (f"{lead}rows with " + ", ".join(f"{k.replace('_', ' ')} = {val(v)}" for k, v in filt.items())) \
        if filt else ""


def words(col: str) -> str:
    """A column name as words in titles and captions (``wh_word`` → ``wh-word``, ``masking_rate`` → ``masking rate``)."""
    return {"wh_word": "wh-word", "wh_word_clause": "wh-word (interrogative clause)", "correct": "correctness"}.get(
        col, col.replace("_", " "))


def slug(s: str) -> str:
    """A file-name-safe form of ``s``."""
    import re

    return re.sub(r"[^A-Za-z0-9_.-]+", "_", s).strip("_") or "x"


def names(values: Sequence[Any]) -> str:
    return ", ".join(map(str, values))


def cluster_words(data: pd.DataFrame, cluster: str) -> str:
    """How the clustering of an interval reads in a caption: ``item`` when ``cluster`` only repeats the item."""
    if cluster == "item" or ("item" in data.columns and cluster in data.columns
                             and data[cluster].astype(str).equals(data["item"].astype(str))):
        return "item"
    if cluster == "cluster":
        return "cluster (passage or item group)"
    return cluster.replace("_", " ")


def _decimals(v: float) -> int:
    txt = repr(float(v))
    if "e" in txt:
        return 6
    frac = txt.split(".")[1] if "." in txt else ""
    return 0 if frac == "0" else len(frac)


def _shown(v: float, d: int) -> int:
    """Decimals to show ours with: one more than the paper's, none for whole numbers of a whole-number column."""
    return 0 if d == 0 and float(v).is_integer() else d + 1


def cell_option(options: Mapping[str, Any] | None, row: str, col: str) -> Any:
    """The option of a published cell, looked up by ``"row / column"``, row, column, then ``"*"`` (None if absent)."""
    if not options:
        return None
    return next((options[k] for k in (f"{row} / {col}", row, col, "*") if k in options), None)


def compare_published(out: Output, table: str, ours: pd.DataFrame, published: Mapping[str, Mapping[str, float]],
                      tolerance: float | Mapping[str, float] | None, label: str, unit: str = "",
                      not_compared: Mapping[str, str] | None = None) -> None:
    """Put the paper's values beside ours: a "paper | ours | Δ" table in ``out`` and one :class:`Fidelity`
    entry per published cell (collected in the report's Fidelity section).

    ``ours``: our numbers, rows and columns keyed as the spec's ``published:`` mapping
    (``{row: {column: value}}``; a column key ``""`` means the table's only column). ``tolerance``:
    the largest |ours − paper| still counted as reproduced — one number, or a mapping looked up by
    ``"row / column"``, row, column, then ``"*"``; by default half a unit in the last decimal of the
    paper's value (17.5 → 0.05, 0.7198 → 0.00005; give the tolerance when the paper prints trailing zeros).
    ``not_compared``: reasons, looked up the same way, for cells that are shown but must not count as
    reproduced (ours computed from simulated responses, or from the paper's own numbers; a paper value that
    is NaN — unreadable in the paper — needs one); each becomes a :class:`NotCompared` entry instead.
    """
    from mrcstats.report.tables import PairTable, format_number

    rows, raw = [], []
    reasons: dict[str, list[str]] = {}
    for r, cells in published.items():
        for c, paper in cells.items():
            col = c if c or ours.shape[1] != 1 else ours.columns[0]
            val = float(ours.loc[r, col]) if r in ours.index and col in ours.columns else float("nan")
            paper = float(paper)
            readable = not math.isnan(paper)
            default = 0.5 * 10 ** -_decimals(paper) if readable else 0.0
            tol = cell_option(tolerance, r, col) if isinstance(tolerance, Mapping) else tolerance
            tol = default if tol is None else float(tol)
            has = not math.isnan(val)
            if has:
                val = round(val, 10)
            cell = f"{r} / {col}" if col else r
            why = cell_option(not_compared, r, col)
            if why is None and not readable:
                why = "the paper's value is not readable"
            d = max(_decimals(paper) if readable else 2, round(-math.log10(2 * tol)) if tol > 0 else 0)
            f = Fidelity(table, cell, paper, val, tol)
            if why is None:
                out.fidelity.append(f)
                ok = f.ok if has else False
                verdict = "yes" if ok else f"NO (±{format_number(tol, d + 1)})"
            else:
                out.not_compared.append(NotCompared(table, cell, str(why), paper, val))
                reasons.setdefault(str(why), []).append(cell)
                ok = False
                verdict = f"not compared ({_mark(list(reasons).index(str(why)))})"
            raw.append({"row": r, "column": col, "paper": paper, "ours": val, "delta": f.delta,
                        "tolerance": tol, "within_tolerance": ok, "not_compared": why or ""})
            delta = round(f.delta, 10) if has and readable else float("nan")
            rows.append({"Row": r, "Column": col, "Paper": format_number(paper, d) if readable else "unreadable",
                         "Ours": format_number(val, _shown(val, d)) if has else "not in our table",
                         "Δ (ours − paper)": format_number(delta, _shown(delta, d)) if has and readable else "–",
                         "Within tolerance": verdict})
    n_nc = sum(len(v) for v in reasons.values())
    n_cmp = len(rows) - n_nc
    bad = sum(1 for r in rows if r["Within tolerance"].startswith("NO"))
    frame = pd.DataFrame(rows)
    head = (f"{n_cmp - bad} of {n_cmp} compared cells within tolerance" + (f", {bad} outside (marked NO)" if bad else "")
            if n_cmp else "no cell compared")
    if n_nc:
        head += f"; {n_nc} of {len(rows)} shown but not compared (reasons below the table)"
    notes = tuple(f"{_mark(i)} not compared: {why}" + ("." if not why.endswith(".") else "")
                  for i, why in enumerate(reasons))
    out.table(PairTable(frame, raw=pd.DataFrame(raw), caption=f"{table}: the paper's values beside ours"
                        f"{(' (' + unit + ')') if unit else ''}; {head}.", label=f"{label}_published",
                        stub=2, formats={c: str for c in frame.columns}, notes=notes))


def _mark(i: int) -> str:
    """The i-th note mark of a table: a, b, c, ..."""
    return chr(ord("a") + i) if i < 26 else f"n{i + 1}"
