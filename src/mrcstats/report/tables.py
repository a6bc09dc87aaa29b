"""Publication tables: one :class:`Table` object and its four exports, shared by every report analysis.

A :class:`Table` keeps the *raw* values (numbers unrounded) and a per-column
format. CSV carries the raw values (for machines); LaTeX (booktabs), Markdown
and HTML carry the formatted cells (for people). Every export can be read back
(:func:`parse_markdown`, :func:`parse_latex`, :func:`parse_html`,
:meth:`Table.read_csv`), which the tests use to check round trips.

The builders of each analysis's tables live beside its plug-in in :mod:`mrcstats.report.analyses`
(the GLMM's regression, fit-statistics, variance, drop1/GVIF and emmeans tables in
:mod:`~mrcstats.report.analyses.glmm_tables`; the probability-at-σ table in ``probability``; the contingency
table of the table tests in ``_tests``; the P_d cutoff table in ``discrimination``; the accuracy grid in
``accuracy``; the masking indicators in ``masking``). Builders never re-derive what another layer computes:
they take result objects or their ``to_frame()`` and only lay the numbers out with what this module gives
(:class:`Table`, :class:`PairTable`, :func:`format_number`, :func:`kind_formats`, :func:`is_missing`).
"""
from __future__ import annotations

import html
import io
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mrcstats._files import write_text_atomic
from mrcstats._repr import Result
from mrcstats.errors import InputError
from mrcstats.report.format import is_missing, typographic_minus

Formatter = str | Callable[[Any], str]

#: what a missing value looks like in formatted cells
MISSING = "–"

# --------------------------------------------------------------------------- formatting


def format_number(v: Any, digits: int = 3) -> str:
    """A number with ``digits`` decimals; integers as integers; ±inf as ∞; missing as "–".

    Never a string of zeros: a nonzero value that rounds to zero prints in scientific notation
    (``5.2e-17``), an exact zero as ``0``, a whole number with ``digits = 0`` as an integer.
    """
    if is_missing(v):
        return MISSING
    if isinstance(v, bool | np.bool_):
        return "yes" if v else "no"
    if isinstance(v, int | np.integer):
        return str(int(v))
    if isinstance(v, float | np.floating):
        x = float(v)
        if math.isinf(x):
            return "∞" if x > 0 else "−∞"
        if x == 0:
            return "0"
        if digits == 0 and not x.is_integer():   # 0.1 with 0 decimals would print as 0
            return typographic_minus(f"{x:g}")
        s = f"{x:.{digits}f}"
        if float(s) == 0:
            return typographic_minus(f"{x:.1e}")
        return typographic_minus(s)
    return str(v)


def kind_formats(kinds: Mapping[str, str]) -> dict[str, Callable[[Any], str]]:
    """Column formatters from column kinds: ``"p"`` → p-values (:func:`~mrcstats.report.format.format_p`),
    any kind of :data:`mrcstats.report.format.KINDS` → :func:`~mrcstats.report.format.format_num`."""
    from mrcstats.report.format import format_num, format_p

    def num(kind: str) -> Callable[[Any], str]:
        return lambda v: format_num(v, kind)

    return {col: format_p if kind == "p" else num(kind) for col, kind in kinds.items()}


def signif_stars(p: Any) -> str:
    """R's significance codes: *** < 0.001 < ** < 0.01 < * < 0.05 < . < 0.1."""
    if is_missing(p):
        return ""
    p = float(p)
    for cut, mark in ((0.001, "***"), (0.01, "**"), (0.05, "*"), (0.1, ".")):
        if p < cut:
            return mark
    return ""


def r_column_decimals(values: Sequence[float], digits: int) -> int:
    """Decimals R's ``format()`` gives a numeric column so that every entry shows ``digits`` significant digits."""
    dec = 0
    for v in values:
        if is_missing(v) or not np.isfinite(v) or v == 0:
            continue
        need = digits - 1 - math.floor(math.log10(abs(float(v))))
        dec = max(dec, need)
    return int(min(dec, 15))


def _stub_format(v: Any) -> str:
    """Row labels: integer-valued numbers without decimals (a masking rate 5.0 reads "5"), others as ``g``."""
    if isinstance(v, float | np.floating) and math.isfinite(v):
        return str(int(v)) if float(v).is_integer() else typographic_minus(f"{float(v):g}")
    return format_number(v)


_ZERO_STRING = re.compile(r"[−-]?0\.0+")


def _apply_format(fmt: Formatter | None, v: Any) -> str:
    if fmt is None:
        return format_number(v)
    if is_missing(v):
        return MISSING
    if callable(fmt):
        return fmt(v)
    try:
        out = typographic_minus(fmt.format(v))
    except (ValueError, TypeError):
        return str(v)
    if _ZERO_STRING.fullmatch(out):   # never a string of zeros: exact 0 prints "0", a tiny value in e-notation
        return format_number(float(v), 2)
    return out


# --------------------------------------------------------------------------- the Table object


def write_exports(table: Any, stem: str | Path, formats: Sequence[str], who: str) -> list[Path]:
    """Write ``stem.<ext>`` for each of ``formats`` (tex, md, csv, html) from ``table.to_latex()``,
    ``to_markdown()``, ``to_csv()``, ``to_html()``, each atomically; returns the paths."""
    writers = {"tex": table.to_latex, "md": table.to_markdown, "csv": table.to_csv, "html": table.to_html}
    paths = []
    for ext in formats:
        if ext not in writers:
            raise InputError(f"{who}: unknown format {ext!r}; use one of {sorted(writers)}")
        p = Path(f"{stem}.{ext}")
        write_text_atomic(p, writers[ext]())
        paths.append(p)
    return paths


@dataclass(frozen=True, repr=False)
class Table(Result):
    """A publication table: raw values + per-column formats + caption/notes.

    Attributes
    ----------
    data : DataFrame of raw values; its columns are the header (the index is ignored).
    caption, label : caption text and a short identifier (LaTeX ``\\label``, file stem).
    formats : column -> format string (``"{:.2f}"``) or callable; other columns use
        :func:`format_number` (3 decimals for floats).
    notes : lines printed under the table (tests, settings, significance codes).
    stub : number of leading columns that label rows (left-aligned).
    """

    data: pd.DataFrame
    caption: str = ""
    label: str = "table"
    formats: Mapping[str, Formatter] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    stub: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.data, pd.DataFrame):
            raise InputError(f"Table {self.label!r}: data must be a pandas DataFrame, got {type(self.data).__name__}")
        if self.data.columns.duplicated().any():
            dup = list(self.data.columns[self.data.columns.duplicated()])
            raise InputError(f"Table {self.label!r}: duplicate column names {dup}; rename them")
        object.__setattr__(self, "data", self.data.reset_index(drop=True))
        object.__setattr__(self, "notes", tuple(self.notes))

    # ---- content
    @property
    def header(self) -> list[str]:
        return [str(c) for c in self.data.columns]

    def cells(self) -> list[list[str]]:
        """The formatted body, row by row (what LaTeX/Markdown/HTML show)."""
        fmts = [self.formats.get(str(c), _stub_format if i < self.stub else None)
                for i, c in enumerate(self.data.columns)]
        return [[_apply_format(f, v) for f, v in zip(fmts, row)]
                for row in self.data.itertuples(index=False, name=None)]

    def to_frame(self) -> pd.DataFrame:
        """The raw values (a copy)."""
        return self.data.copy()

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "caption": self.caption, "columns": self.header,
                "rows": self.data.to_dict(orient="records"), "notes": list(self.notes)}

    def summary(self) -> str:
        return self.to_markdown()

    def __str__(self) -> str:  # pragma: no cover - convenience
        return self.to_markdown()

    # ---- exports
    def to_csv(self) -> str:
        """Raw values, full precision; missing values as empty fields."""
        buf = io.StringIO()
        self.data.to_csv(buf, index=False, lineterminator="\n")
        return buf.getvalue()

    def to_markdown(self) -> str:
        head = self.header
        body = self.cells()
        aligns = [":--" if i < self.stub else "--:" for i in range(len(head))]
        lines = []
        if self.caption:
            lines.append(f"**{md_escape(self.caption)}**")
            lines.append("")
        lines.append("| " + " | ".join(md_escape(h) for h in head) + " |")
        lines.append("|" + "|".join(aligns) + "|")
        for r in body:
            lines.append("| " + " | ".join(md_escape(c) for c in r) + " |")
        for n in self.notes:
            lines.append("")
            lines.append(md_escape(n))
        return "\n".join(lines) + "\n"

    def to_latex(self, float_env: bool = True) -> str:
        """booktabs LaTeX (needs ``\\usepackage{booktabs}``); unicode symbols become math."""
        head = self.header
        spec = "l" * self.stub + "r" * (len(head) - self.stub)
        lines = []
        if float_env:
            lines += ["\\begin{table}[t]", "\\centering", "\\small"]
        lines.append(f"\\begin{{tabular}}{{{spec}}}")
        lines.append("\\toprule")
        lines.append(" & ".join(latex_escape(h) for h in head) + " \\\\")
        lines.append("\\midrule")
        for r in self.cells():
            lines.append(" & ".join(latex_escape(c) for c in r) + " \\\\")
        lines.append("\\bottomrule")
        lines.append("\\end{tabular}")
        if float_env:
            for n in self.notes:
                lines.append(f"\\par\\smallskip{{\\footnotesize {latex_escape(n)}}}")
            if self.caption:
                lines.append(f"\\caption{{{latex_escape(self.caption)}}}")
            lines.append(f"\\label{{tab:{_label_slug(self.label)}}}")
            lines.append("\\end{table}")
        return "\n".join(lines) + "\n"

    def to_html(self) -> str:
        head = self.header
        out = [f'<table class="mrcstats" id="{html.escape(_label_slug(self.label))}">']
        if self.caption:
            out.append(f"<caption>{html.escape(self.caption)}</caption>")
        out.append("<thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr></thead>")
        out.append("<tbody>")
        for r in self.cells():
            tds = []
            for i, c in enumerate(r):
                tag = "th" if i < self.stub else "td"
                tds.append(f"<{tag}>{html.escape(c)}</{tag}>")
            out.append("<tr>" + "".join(tds) + "</tr>")
        out.append("</tbody>")
        if self.notes:
            out.append("<tfoot>" + "".join(
                f'<tr><td colspan="{len(head)}">{html.escape(n)}</td></tr>' for n in self.notes) + "</tfoot>")
        out.append("</table>")
        return "\n".join(out) + "\n"

    def write(self, stem: str | Path, formats: Sequence[str] = ("tex", "md", "csv", "html")) -> list[Path]:
        """Write ``stem.<ext>`` for each export format, atomically; returns the paths."""
        return write_exports(self, stem, formats, "Table.write")

    @staticmethod
    def read_csv(path_or_text: str | Path) -> pd.DataFrame:
        """Read a CSV export back into raw values."""
        src = path_or_text
        if isinstance(src, str) and "\n" in src:
            return pd.read_csv(io.StringIO(src))
        return pd.read_csv(src)


def _label_slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.:-]+", "-", s).strip("-") or "table"


# --------------------------------------------------------------------------- escaping and parsing back

_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}
_LATEX_UNICODE = {"σ": r"$\sigma$", "±": r"$\pm$", "−": r"$-$", "χ": r"$\chi$", "²": r"$^2$", "≥": r"$\geq$",
                  "≤": r"$\leq$", "×": r"$\times$", "τ": r"$\tau$", "ε": r"$\varepsilon$", "β": r"$\beta$",
                  "θ": r"$\theta$", "∞": r"$\infty$", "–": r"\textendash{}", "<": r"$<$", ">": r"$>$", "|": r"$|$",
                  "·": r"$\cdot$", "√": r"$\surd$", "κ": r"$\kappa$", "μ": r"$\mu$",
                  "⟨": r"$\langle$", "⟩": r"$\rangle$", "Σ": r"$\Sigma$"}
_LATEX_MAP = {**_LATEX_SPECIAL, **_LATEX_UNICODE}
_LATEX_INVERSE = sorted(((v, k) for k, v in _LATEX_MAP.items()), key=lambda kv: -len(kv[0]))


def latex_escape(s: str) -> str:
    """Escape LaTeX specials and turn the unicode symbols the tables use into math."""
    return "".join(_LATEX_MAP.get(ch, ch) for ch in str(s))


def latex_unescape(s: str) -> str:
    """Inverse of :func:`latex_escape` (for round-trip tests)."""
    out, i = [], 0
    while i < len(s):
        for esc, ch in _LATEX_INVERSE:
            if s.startswith(esc, i):
                out.append(ch)
                i += len(esc)
                break
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


#: Markdown's inline markup characters, backslash-escaped in table text (pipes end a cell)
_MD_SPECIAL = frozenset("\\|*_`[]~")


def md_escape(s: Any) -> str:
    """Text from data as literal Markdown table text: names are data, never markup. HTML is escaped as
    the ``.html`` output escapes it (``<script>`` becomes ``&lt;script&gt;``, shown as written and never
    run), Markdown's inline markup and the cell-ending pipe are backslash-escaped, a newline becomes a
    space. :func:`parse_markdown` reverses it."""
    text = html.escape(str(s), quote=False).replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
    return "".join("\\" + ch if ch in _MD_SPECIAL else ch for ch in text)


def _md_split(line: str) -> list[str]:
    line = line.strip()
    line = line.removeprefix("|")
    if line.endswith("|") and not line.endswith("\\|"):
        line = line[:-1]
    cells, cur, i = [], [], 0
    while i < len(line):
        ch = line[i]
        if ch == "\\" and i + 1 < len(line):
            cur.append(line[i + 1])
            i += 2
            continue
        if ch == "|":
            cells.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
        i += 1
    cells.append("".join(cur).strip())
    return [html.unescape(c) for c in cells]


def parse_markdown(text: str) -> tuple[list[str], list[list[str]]]:
    """Header and body cells of the first pipe table in ``text``."""
    lines = [ln for ln in text.splitlines() if ln.strip().startswith("|")]
    if len(lines) < 2:
        raise InputError("parse_markdown: no pipe table found")
    return _md_split(lines[0]), [_md_split(ln) for ln in lines[2:]]


def parse_latex(text: str) -> tuple[list[str], list[list[str]]]:
    """Header and body cells of the first booktabs tabular in ``text``."""
    m = re.search(r"\\toprule\n(.*?)\\bottomrule", text, re.DOTALL)
    if not m:
        raise InputError("parse_latex: no booktabs tabular found")
    rows = [r for r in m.group(1).split("\n") if r.strip() and r.strip() != "\\midrule"]
    parsed = []
    for r in rows:
        r = r.rstrip()
        r = r.removesuffix("\\\\")
        parts = re.split(r"(?<!\\)&", r)
        parsed.append([latex_unescape(p.strip()) for p in parts])
    return parsed[0], parsed[1:]


class _HTMLTable(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None
        self._section = ""

    def handle_starttag(self, tag, attrs):
        if tag in ("thead", "tbody", "tfoot"):
            self._section = tag
        elif tag == "tr" and self._section in ("thead", "tbody"):
            self.rows.append([])
        elif tag in ("td", "th") and self._section in ("thead", "tbody"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def parse_html(text: str) -> tuple[list[str], list[list[str]]]:
    """Header and body cells of the first table written by :meth:`Table.to_html`."""
    p = _HTMLTable()
    p.feed(text)
    if not p.rows:
        raise InputError("parse_html: no table found")
    return p.rows[0], p.rows[1:]


# --------------------------------------------------------------------------- shared by the builders


@dataclass(frozen=True, repr=False)
class PairTable(Table):
    """A Table whose visible cells combine several raw columns; CSV, ``to_frame`` and ``to_dict`` export ``raw``."""

    raw: pd.DataFrame | None = None

    def to_csv(self) -> str:
        buf = io.StringIO()
        (self.raw if self.raw is not None else self.data).to_csv(buf, index=False, lineterminator="\n")
        return buf.getvalue()

    def to_frame(self) -> pd.DataFrame:
        return (self.raw if self.raw is not None else self.data).copy()

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        if self.raw is not None:
            d["rows"] = self.raw.to_dict(orient="records")
            d["columns"] = [str(c) for c in self.raw.columns]
        return d


def result_dict(res: Any) -> dict[str, Any]:
    """A test or result object as a dict (a mapping as is, ``to_dict()``, or its public attributes)."""
    if res is None:
        return {}
    if isinstance(res, Mapping):
        return dict(res)
    if hasattr(res, "to_dict"):
        return dict(res.to_dict())
    return {k: getattr(res, k) for k in dir(res) if not k.startswith("_")}
