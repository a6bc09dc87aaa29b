"""Publication tables: one :class:`Table` object, four exports, and builders for the seeds' tables.

A :class:`Table` keeps the *raw* values (numbers unrounded) and a per-column
format. CSV carries the raw values (for machines); LaTeX (booktabs), Markdown
and HTML carry the formatted cells (for people). Every export can be read back
(:func:`parse_markdown`, :func:`parse_latex`, :func:`parse_html`,
:meth:`Table.read_csv`), which the tests use to check round trips.

Builders never re-derive what another layer computes: they take result objects
(``GlmerResult``, contingency/discrimination/masking results) or their
``to_frame()`` and only lay the numbers out; the probability-at-σ table (seed 003
Tables 1-2) takes its numbers from :func:`mrcstats.models.predict.probability_frame`.
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
from mrcstats.report.format import format_p

Formatter = str | Callable[[Any], str]

#: what a missing value looks like in formatted cells
MISSING = "–"

# --------------------------------------------------------------------------- formatting


def _is_missing(v: Any) -> bool:
    if v is None or v is pd.NA or v is pd.NaT:
        return True
    try:
        return bool(isinstance(v, float | np.floating) and math.isnan(v))
    except TypeError:  # pragma: no cover
        return False


def format_number(v: Any, digits: int = 3) -> str:
    """A number with ``digits`` decimals; integers as integers; ±inf as ∞; missing as "–".

    Never a string of zeros: a nonzero value that rounds to zero prints in scientific notation
    (``5.2e-17``), an exact zero as ``0``, a whole number with ``digits = 0`` as an integer.
    """
    if _is_missing(v):
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
            return _minus(f"{x:g}")
        s = f"{x:.{digits}f}"
        if float(s) == 0:
            return _minus(f"{x:.1e}")
        return _minus(s)
    return str(v)


def kind_formats(kinds: Mapping[str, str]) -> dict[str, Callable[[Any], str]]:
    """Column formatters from column kinds: ``"p"`` → p-values (:func:`~mrcstats.report.format.format_p`),
    any kind of :data:`mrcstats.report.format.KINDS` → :func:`~mrcstats.report.format.format_num`."""
    from mrcstats.report.format import format_num, format_p

    def num(kind: str) -> Callable[[Any], str]:
        return lambda v: format_num(v, kind)

    return {col: format_p if kind == "p" else num(kind) for col, kind in kinds.items()}


def _minus(s: str) -> str:
    """Typographic minus for a leading '-'."""
    return "−" + s[1:] if s.startswith("-") else s


def signif_stars(p: Any) -> str:
    """R's significance codes: *** < 0.001 < ** < 0.01 < * < 0.05 < . < 0.1."""
    if _is_missing(p):
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
        if _is_missing(v) or not np.isfinite(v) or v == 0:
            continue
        need = digits - 1 - math.floor(math.log10(abs(float(v))))
        dec = max(dec, need)
    return int(min(dec, 15))


def _stub_format(v: Any) -> str:
    """Row labels: integer-valued numbers without decimals (a masking rate 5.0 reads "5"), others as ``g``."""
    if isinstance(v, float | np.floating) and math.isfinite(v):
        return str(int(v)) if float(v).is_integer() else _minus(f"{float(v):g}")
    return format_number(v)


_ZERO_STRING = re.compile(r"[−-]?0\.0+")


def _apply_format(fmt: Formatter | None, v: Any) -> str:
    if fmt is None:
        return format_number(v)
    if _is_missing(v):
        return MISSING
    if callable(fmt):
        return fmt(v)
    try:
        out = _minus(fmt.format(v))
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


# --------------------------------------------------------------------------- regression tables


def _as_series(obj: Any, name: str) -> pd.Series:
    if isinstance(obj, pd.Series):
        return obj.astype(float)
    if isinstance(obj, Mapping):
        return pd.Series({str(k): float(v) if not _is_missing(v) else np.nan for k, v in obj.items()}, dtype=float)
    raise InputError(f"regression table: cannot read {name} of type {type(obj).__name__}")


def coef_frame(result: Any) -> pd.DataFrame:
    """``term, estimate, se, z, p`` from a fit's :meth:`~mrcstats.models.GlmerResult.coef_table`, or from a
    DataFrame of estimates and SEs given elsewhere (a ``term`` column or index; lme4's column names work too),
    through :func:`mrcstats.models.results.wald_table` — the one coefficient table."""
    from mrcstats.models.results import wald_table

    if isinstance(result, pd.DataFrame):
        df = result.copy()
        if "term" in df.columns:
            df = df.set_index("term")
        ren = {}
        for c in df.columns:
            lc = str(c).lower()
            if lc in ("estimate", "fixef", "coef", "beta"):
                ren[c] = "estimate"
            elif lc in ("se", "std. error", "std_error", "stderr", "std.error"):
                ren[c] = "se"
        df = df.rename(columns=ren)
        missing = [c for c in ("estimate", "se") if c not in df.columns]
        if missing:
            raise InputError(f"regression table: columns {missing} not found among {list(df.columns)}")
        tab = wald_table(df["estimate"], df["se"])
    elif hasattr(result, "coef_table"):
        tab = result.coef_table()
    else:
        raise InputError(f"regression table: {type(result).__name__} is neither a fit nor a DataFrame")
    tab = tab.reset_index(names="term")
    tab.columns = ["term", "estimate", "se", "z", "p"]
    tab["term"] = tab["term"].astype(str)
    return tab


def regression_table(result: Any, caption: str = "", label: str = "fixef", layout: str = "lme4",
                     truth: Mapping[str, float] | None = None, terms: Mapping[str, str] | None = None,
                     level: float = 0.95) -> Table:
    """The fixed-effects table.

    ``layout="lme4"``: Estimate, Std. Error, z value, Pr(>|z|) and significance
    stars, numbers formatted like R's ``printCoefmat`` (common decimals per column,
    4 significant digits for estimates/SEs, 3 for z, ``format.pval`` for p).
    ``layout="compact"``: ``β (SE)`` with stars and ``p``, the usual paper layout.
    ``layout="apa"``: Estimate, SE, Wald 95% CI (``β ± z SE``, lme4's ``confint(m, method = "Wald")``),
    z and p, numbers as journals print them (:mod:`mrcstats.report.format`).
    ``truth`` (term -> value) adds a "Truth" column (simulated data); ``terms`` renames terms for display
    (``{"model1": "model1 (gpt-a)"}``).
    """
    cf = coef_frame(result)
    names = dict(terms or {})
    from mrcstats.models.family_table import family_labels

    fam = getattr(result, "family", None)
    eta = family_labels(fam).eta_desc if fam is not None else "log-odds"
    if layout == "apa":
        from mrcstats._dist import norm_ppf
        from mrcstats.report.format import format_ci

        zc = float(norm_ppf(0.5 + level / 2))
        lo, hi = cf["estimate"] - zc * cf["se"], cf["estimate"] + zc * cf["se"]
        df = pd.DataFrame({"Term": [names.get(t, t) for t in cf["term"]], "Estimate": cf["estimate"],
                           "SE": cf["se"], f"{level:.0%} CI": list(zip(lo, hi)), "z": cf["z"], "p": cf["p"]})
        fmts: dict[str, Formatter] = kind_formats({"Estimate": "estimate", "SE": "se", "z": "statistic", "p": "p"})
        fmts[f"{level:.0%} CI"] = lambda v: format_ci(0.0, v[0], v[1]).split(" ", 1)[1]
        if truth is not None:
            df.insert(1, "Truth", [truth.get(t, np.nan) for t in cf["term"]])
            fmts.update(kind_formats({"Truth": "estimate"}))
        return PairTable(df, caption=caption, label=label, formats=fmts,
                          raw=pd.DataFrame({"Term": cf["term"], "Estimate": cf["estimate"], "SE": cf["se"],
                                            "CI low": lo, "CI high": hi, "z": cf["z"], "p": cf["p"],
                                            **({"Truth": df["Truth"]} if truth is not None else {})}),
                          notes=(f"Wald z tests; {level:.0%} CI = estimate ± {zc:.2f} SE ({eta}).",))
    notes = ["Signif. codes: 0 '***' 0.001 '**' 0.01 '*' 0.05 '.' 0.1 ' ' 1"]
    if layout == "lme4":
        df = pd.DataFrame({"Term": cf["term"], "Estimate": cf["estimate"], "Std. Error": cf["se"],
                           "z value": cf["z"], "Pr(>|z|)": cf["p"],
                           "": [signif_stars(p) for p in cf["p"]]})
        de = r_column_decimals([*cf["estimate"], *cf["se"]], 4)
        dz = min(r_column_decimals(cf["z"], 3), 3)
        fmts: dict[str, Formatter] = {"Estimate": f"{{:.{de}f}}", "Std. Error": f"{{:.{de}f}}",
                                      "z value": f"{{:.{dz}f}}", "Pr(>|z|)": format_p}
        if truth is not None:
            df.insert(2, "Truth", [truth.get(t, np.nan) for t in cf["term"]])
            fmts["Truth"] = f"{{:.{de}f}}"
    elif layout == "compact":
        cells = [f"{format_number(float(e), 2)} ({format_number(float(s), 2)}){signif_stars(p)}" for e, s, p in
                 zip(cf["estimate"], cf["se"], cf["p"])]
        df = pd.DataFrame({"Term": cf["term"], "β (SE)": cells, "p": cf["p"]})
        fmts = {"p": format_p}
        if truth is not None:
            df.insert(1, "Truth", [truth.get(t, np.nan) for t in cf["term"]])
            fmts["Truth"] = "{:.2f}"
        notes = ["*** p < .001, ** p < .01, * p < .05, . p < .1"]
    else:
        raise InputError(f"regression_table: layout must be 'apa', 'lme4' or 'compact', got {layout!r}")
    return Table(df, caption=caption, label=label, formats=fmts, notes=tuple(notes))


def fit_statistics_table(result: Any, caption: str = "", label: str = "fitstats") -> Table:
    """AIC, BIC, log-likelihood, −2 log-likelihood, deviance, df.resid, nobs and groups of a GLMM fit.

    lme4 prints two different "deviances": ``−2 logLik`` (the Laplace/AGQ objective, what AIC is built
    from) and ``deviance()`` (the sum of squared deviance residuals at the conditional modes); both are
    shown, each with its own label.
    """
    rows: list[tuple[str, Any]] = []
    for key, name in (("aic", "AIC"), ("bic", "BIC"), ("loglik", "Log-likelihood"),
                      ("minus2loglik", "−2 log-likelihood (lme4 summary \"deviance\")"),
                      ("deviance", "Conditional deviance (lme4 deviance())"), ("df_resid", "Residual df"),
                      ("nobs", "Observations")):
        v = getattr(result, key, None)
        if v is not None:
            rows.append((name, v))
    ng = getattr(result, "ngroups", None) or {}
    for g, n in dict(ng).items():
        rows.append((f"Groups: {g}", n))
    for key, name in (("converged", "Converged"), ("singular", "Singular fit")):
        v = getattr(result, key, None)
        if v is not None:
            rows.append((name, bool(v)))
    df = pd.DataFrame(rows, columns=["Statistic", "Value"]).astype({"Value": object})
    from mrcstats.report.format import format_num

    fmt = {"Value": lambda v: format_num(v, "ic") if isinstance(v, float)
           else (f"{int(v):,}" if isinstance(v, int | np.integer) and not isinstance(v, bool) else format_number(v))}
    return Table(df, caption=caption, label=label, formats=fmt,
                 notes=(("−2 log-likelihood is the objective AIC and BIC are built from; the conditional deviance "
                         "is the sum of squared deviance residuals given the random-effect modes."),))


def random_effects_table(result: Any, caption: str = "", label: str = "ranef_var",
                         truth: Mapping[str, float] | None = None) -> Table:
    """Random-effects variance components: Groups, Name, Variance, Std.Dev. (lme4's block)."""
    theta = getattr(result, "theta", None)
    if theta is None:
        raise InputError("random_effects_table: the result has no theta")
    rows = []
    for key, sd in dict(theta).items():
        g, _, name = str(key).partition(".")
        rows.append({"Groups": g, "Name": name or "(Intercept)", "Variance": float(sd) ** 2, "Std.Dev.": float(sd)})
    df = pd.DataFrame(rows).rename(columns={"Groups": "Group", "Name": "Term", "Std.Dev.": "SD"})
    kinds = {"Variance": "variance", "SD": "sd"}
    if truth is not None:
        df["True SD"] = [truth.get(k, np.nan) for k in dict(theta)]
        kinds["True SD"] = "sd"
    return Table(df, caption=caption, label=label, formats=kind_formats(kinds), stub=2)


def anova_table(frame: pd.DataFrame, caption: str = "", label: str = "drop1") -> Table:
    """A drop1/anova/GVIF frame with readable headers; numbers by column kind, p APA-style."""
    df = frame.copy()
    if df.index.name is not None or not isinstance(df.index, pd.RangeIndex):
        df = df.reset_index()
    heads = {"term": "Term", "index": "Term", "npar": "df", "df": "df", "aic": "AIC", "bic": "BIC",
             "loglik": "Log-likelihood", "deviance": "−2 log-likelihood", "lrt": "χ² (LRT)", "chisq": "χ²",
             "statistic": "χ² (LRT)", "p": "p", "p_value": "p", "pr(>chi)": "p", "pr(chi)": "p", "gvif": "GVIF",
             "gvif^(1/(2*df))": "GVIF^(1/(2·df))", "gvif_adj": "GVIF^(1/(2·df))"}
    df = df.rename(columns={c: heads.get(str(c).lower(), str(c)) for c in df.columns})
    kinds: dict[str, str] = {}
    for c in df.columns:
        if c == "p":
            kinds[c] = "p"
        elif c in ("df", "Parameters"):
            kinds[c] = "df"
        elif c in ("AIC", "BIC", "Log-likelihood", "−2 log-likelihood"):
            kinds[c] = "ic"
        elif c.startswith("χ²"):
            kinds[c] = "statistic"
        elif pd.api.types.is_float_dtype(df[c]):
            kinds[c] = "estimate"
    return Table(df, caption=caption, label=label, formats=kind_formats(kinds))


# --------------------------------------------------------------------------- probability at σ


def _sigma_label(s: float) -> str:
    s = float(s)
    txt = f"{s:g}"
    return _minus(txt) + "σ"


def probability_table(fixef: Mapping[str, float] | Any, feature: str, factor: str, levels: Sequence[str],
                      coding: str = "sum", sigmas: Sequence[float] = (-2, 0, 2, 4),
                      raw_mean: float | None = None, raw_sd: float | None = None, feature_label: str | None = None,
                      labels: Mapping[str, str] | None = None, caption: str = "", label: str = "sigma",
                      digits: int = 2) -> Table:
    """Probability-at-σ table (seed 003 Tables 1-2) from the fixed effects of a fitted GLMM.

    ``fixef`` may be the mapping or a result with ``.fixef``. With ``raw_mean`` and
    ``raw_sd`` each column header also shows the raw feature value, ``kσ (mean + k·sd)``.
    ``labels`` renames the factor levels for display.
    """
    from mrcstats.models.predict import probability_frame

    if not isinstance(fixef, Mapping):
        fixef = dict(fixef.fixef)
    pf = probability_frame(fixef, feature, factor, levels, coding, sigmas)
    names = dict(labels or {})
    first = feature_label or feature
    pf[factor] = [names.get(v, v) for v in pf[factor]]
    cols = {factor: first}
    for s in sigmas:
        h = _sigma_label(s)
        if raw_mean is not None and raw_sd is not None:
            h += f" ({_minus(f'{raw_mean + float(s) * raw_sd:.{digits}f}')})"
        cols[float(s)] = h
    pf = pf.rename(columns=cols)
    fmts = {h: f"{{:.{digits}f}}" for k, h in cols.items() if k != factor}
    note = (f"Population-level predictions from the fixed effects ({coding} contrasts for {factor}); "
            "random effects at zero.")
    return Table(pf, caption=caption, label=label, formats=fmts, notes=(note,))


# --------------------------------------------------------------------------- contingency, P_d, accuracy, masking


def _result_dict(res: Any) -> dict[str, Any]:
    if res is None:
        return {}
    if isinstance(res, Mapping):
        return dict(res)
    if hasattr(res, "to_dict"):
        return dict(res.to_dict())
    return {k: getattr(res, k) for k in dir(res) if not k.startswith("_")}


def describe_test(res: Any, name: str, n: int | None = None) -> str:
    """One line naming a test and its numbers, APA-style (``Pearson's chi-square test: χ²(2, N = 600) = 5.31,
    p = .070``; Fisher: ``p = .004``, the odds ratio with its interval for 2 × 2 tables; a Monte Carlo p
    with B and its Monte Carlo SE)."""
    from mrcstats.report.format import format_ci, format_p, format_stat

    d = _result_dict(res)
    parts = []
    stat = d.get("statistic")
    if stat is not None and not _is_missing(stat) and d.get("df") is not None:
        parts.append(format_stat("chi2", float(stat), d["df"], n=n))
    mc_b = getattr(res, "B", None) if getattr(res, "method", "") == "monte-carlo" else None
    if d.get("p") is not None:
        pv = format_p(d["p"], mc_b=mc_b)
        parts.append(f"p {pv}" if pv[:1] in "<>≤" else f"p = {pv}")     # as _pformat.p_clause, MC bounds too
    if d.get("odds_ratio") is not None and not _is_missing(d.get("odds_ratio")):
        ci = d.get("conf_int") or (np.nan, np.nan)
        parts.append(f"odds ratio = {format_ci(float(d['odds_ratio']), ci[0], ci[1], 'odds_ratio')}")
    return name + (": " + ", ".join(parts) if parts else "")


def effect_line(e: Any) -> str:
    """``Cramér's V = 0.094 [0.000, 0.160]`` from an :class:`mrcstats.stats.effects.EffectSize`."""
    from mrcstats.report.format import format_ci

    kind = "cramers_v" if "Cramér" in e.name else "difference"
    return f"{e.name} = {format_ci(e.estimate, e.ci_low, e.ci_high, kind)} ({e.level:.0%} CI)"


def contingency_table(counts: pd.DataFrame, tests: Sequence[tuple[str, Any]] = (), caption: str = "",
                      label: str = "contingency", margins: bool = True, ratio_rows: bool = False,
                      effects: Sequence[Any] = (), labels: Mapping[str, str] | None = None) -> Table:
    """A table of counts (rows × columns, labels in the index) with totals and its tests as notes.

    ``tests`` is a list of (name, result) pairs, e.g. ``[("Fisher's exact test", fisher(...))]``;
    each result's ``to_dict()`` provides p (and statistic, df, odds ratio when present).
    ``ratio_rows`` adds, for a two-row table, the row-1/row-2 ratio of column shares
    (seed 003 Table 3's E/H and H/L rows). ``effects`` (effect sizes with intervals) are printed
    under the tests; ``labels`` renames row and column labels (``{"False": "not correct"}``).
    """
    if not isinstance(counts, pd.DataFrame):
        counts = pd.DataFrame(counts)
    names = dict(labels or {})
    t = counts.copy()
    if t.index.name:
        t.index.name = str(t.index.name).replace("_", " ").capitalize()
    t.columns = [names.get(str(c), str(c)) for c in t.columns]
    t.index = pd.Index([names.get(str(r), str(r)) for r in t.index], name=t.index.name)
    stub = str(t.index.name or "")
    body = t.apply(pd.to_numeric)
    if all(pd.api.types.is_integer_dtype(body[c]) for c in body.columns):
        body = body.astype("int64")
    t = body.copy()
    if margins:
        t["Total"] = body.sum(axis=1)
    df = t.reset_index().rename(columns={t.index.name or "index": stub or " "})
    df[df.columns[0]] = df[df.columns[0]].astype(str)
    if margins:
        tot = {df.columns[0]: "Total", **{c: body[c].sum() if c in body else body.values.sum() for c in df.columns[1:]}}
        tot["Total"] = body.values.sum()
        df = pd.concat([df, pd.DataFrame([tot])], ignore_index=True)
    if ratio_rows and len(body) == 2:
        share = body.div(body.sum(axis=1), axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = (share.iloc[0] / share.iloc[1]).replace([np.inf, -np.inf], np.nan)
        row = {df.columns[0]: f"{body.index[0]}/{body.index[1]}", **{c: ratio.get(c, np.nan) for c in df.columns[1:]}}
        if "Total" in row:
            row["Total"] = np.nan
        df = pd.concat([df, pd.DataFrame([row])], ignore_index=True)

    def fmt(v: Any) -> str:
        if _is_missing(v):
            return MISSING
        v = float(v)
        return f"{int(v):,}" if v.is_integer() else format_number(v, 2)

    fmts = {c: fmt for c in df.columns[1:]}
    n = int(body.values.sum())
    notes = tuple(describe_test(res, name, n=n) for name, res in tests) + tuple(effect_line(e) for e in effects)
    return Table(df, caption=caption, label=label, formats=fmts, notes=notes)


def pd_cutoff_table(frame: pd.DataFrame | Any, caption: str = "", label: str = "pd_cutoffs",
                    labels: Mapping[str, str] | None = None) -> Table:
    """Seed 003 Table 5: accuracy of each model on the clusters with P_d above each cutoff.

    ``frame``: the discrimination helper's cutoff table — a DataFrame with a
    ``cutoff`` column, ``clusters`` and ``items`` counts, ``grand_mean``, optionally
    ``kendall_tau``, and one accuracy per model either as columns ``acc_<model>`` /
    ``accuracy.<model>`` or as an ``accuracy`` column of mappings — or a result
    object whose ``cutoff_frame()``/``cutoffs_frame()``/``to_frame()`` returns it.
    Models become rows and cutoffs columns, as in the seed.
    """
    if not isinstance(frame, pd.DataFrame):
        for meth in ("cutoff_frame", "cutoffs_frame", "cutoff_table"):
            if hasattr(frame, meth):
                frame = getattr(frame, meth)()
                break
        else:
            d = _result_dict(frame)
            if "cutoffs" in d:
                frame = pd.DataFrame(d["cutoffs"])
            else:
                frame = frame.to_frame()
    f = frame.copy()
    if "cutoff" not in f.columns:
        raise InputError(f"pd_cutoff_table: no 'cutoff' column among {list(f.columns)}")
    acc: dict[str, list[float]] = {}
    if "accuracy" in f.columns and isinstance(f["accuracy"].iloc[0], Mapping):
        models = sorted({m for d in f["accuracy"] for m in d})
        for m in models:
            acc[m] = [d.get(m, np.nan) for d in f["accuracy"]]
    else:
        for c in f.columns:
            for pre in ("acc_", "accuracy.", "accuracy_"):
                if str(c).startswith(pre):
                    acc[str(c)[len(pre):]] = list(f[c])
    names = dict(labels or {})
    cut_cols = [f"P_d > {format_number(c, 0) if float(c).is_integer() else c}" for c in f["cutoff"]]
    cis: dict[str, list[Any]] = {}
    if "accuracy_ci" in f.columns:
        for m in acc:
            vals_ci = [(d or {}).get(m) if isinstance(d, Mapping) else None for d in f["accuracy_ci"]]
            if any(v is not None for v in vals_ci):
                cis[m] = [f"[{v[0]:.2f}, {v[1]:.2f}]" if v is not None else np.nan for v in vals_ci]
    rows = []
    for m, vals in acc.items():
        rows.append([names.get(m, m), *vals])
        if m in cis:
            rows.append([f"{names.get(m, m)} 95% CI", *cis[m]])
    if "grand_mean" in f.columns:
        rows.append(["Grand Mean", *f["grand_mean"]])
    for col, name in (("clusters", "Cluster count"), ("items", "Item count"), ("kendall_tau", "Kendall's τ")):
        if col in f.columns:
            vals = list(f[col])
            if col != "kendall_tau":
                vals = [int(v) for v in vals]
            rows.append([name, *vals])
    df = pd.DataFrame(rows, columns=["", *cut_cols], dtype=object)

    def fmt(v: Any) -> str:
        if _is_missing(v):
            return MISSING
        if isinstance(v, int | np.integer) and not isinstance(v, bool):
            return f"{int(v):,}"
        if isinstance(v, str):
            return v
        return _minus(f"{float(v):.2f}")

    return Table(df, caption=caption, label=label, formats={c: fmt for c in cut_cols})


def accuracy_table(frame: pd.DataFrame, rows: str | Sequence[str], cols: str, mean: str = "accuracy",
                   sd: str | None = "sd", percent: bool = True, digits: int = 1, caption: str = "",
                   label: str = "accuracy", row_order: Sequence[Any] | None = None,
                   col_order: Sequence[Any] | None = None, lo: str | None = None, hi: str | None = None,
                   notes: Sequence[str] = ()) -> Table:
    """Accuracy laid out rows × columns (seed 004 Tables 6-7, 11-12): ``mean [lo, hi]`` and/or ``± SD``.

    ``frame`` holds one row per cell with the ``mean`` column (fraction), optionally the interval
    bounds ``lo``/``hi`` and the ``sd``; cells are shown in percent by default. The raw export keeps
    the fractions (times 100 with ``percent``) in ``<col>``, ``<col> low``, ``<col> high`` and
    ``<col> SD`` columns.
    """
    rows = [rows] if isinstance(rows, str) else list(rows)
    need = [*rows, cols, mean] + ([sd] if sd else []) + ([lo, hi] if lo and hi else [])
    miss = [c for c in need if c not in frame.columns]
    if miss:
        raise InputError(f"accuracy_table: columns {miss} not found among {list(frame.columns)}")

    def piv_of(col: str) -> pd.DataFrame:
        return frame.pivot_table(index=rows, columns=cols, values=col, aggfunc="first", sort=False, dropna=False)

    piv = piv_of(mean)
    extra = {k: piv_of(c).reindex(index=piv.index, columns=piv.columns)
             for k, c in (("SD", sd), ("low", lo if hi else None), ("high", hi if lo else None)) if c}
    if row_order is not None:
        piv = piv.reindex(row_order)
        extra = {k: v.reindex(row_order) for k, v in extra.items()}
    if col_order is not None:
        piv = piv.reindex(columns=col_order)
        extra = {k: v.reindex(columns=col_order) for k, v in extra.items()}
    scale = 100.0 if percent else 1.0
    out = piv.reset_index()
    out.columns = [str(c) for c in out.columns]
    data_cols = [str(c) for c in piv.columns]
    raw = out[[str(r) for r in rows]].copy()
    for c, cs in zip(piv.columns, data_cols):
        raw[cs] = piv[c].to_numpy() * scale
        for k in ("low", "high", "SD"):
            if k in extra:
                raw[f"{cs} {k}"] = extra[k][c].to_numpy() * scale
    visible = raw[[*[str(r) for r in rows], *data_cols]].copy().astype({c: object for c in data_cols})
    nan = [np.nan] * len(raw)
    for cs in data_cols:
        visible[cs] = list(zip(raw[cs], raw[f"{cs} low"] if "low" in extra else nan,
                               raw[f"{cs} high"] if "high" in extra else nan,
                               raw[f"{cs} SD"] if "SD" in extra else nan))

    def num(v: float) -> str:
        return format_number(float(v), digits) if not _is_missing(v) else MISSING

    def fmt(v: Any) -> str:
        mv, lv, hv, sv = v
        if _is_missing(mv):
            return MISSING
        txt = num(mv)
        if not _is_missing(lv) and not _is_missing(hv):
            txt += f" [{num(lv)}, {num(hv)}]"
        if not _is_missing(sv):
            txt += f" ± {num(sv)}"
        return txt

    what = ("mean" if "SD" in extra else "accuracy") + (" [95% CI]" if "low" in extra else "") + \
        (" ± SD over trials" if "SD" in extra else "") + (" (percent)" if percent else "")
    return PairTable(visible, caption=caption, label=label, formats={c: fmt for c in data_cols}, stub=len(rows),
                      raw=raw, notes=(f"Cells: {what}.", *notes) if extra else tuple(notes))


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


def masking_indicator_table(frame: pd.DataFrame, caption: str = "", label: str = "masking_indicators",
                            percent: bool = True) -> Table:
    """Seed 000 Table 3: Acc per masking condition and the NA/EA/KI indicators.

    ``frame``: one row per (dataset or model, condition) with ``acc`` (MR-weighted
    average accuracy) and optionally ``na``, ``ea``, ``ki`` (e.g. the masking
    helper's weighted-average frame). Columns: one Acc per condition (strict,
    regular, partial, lenient order when present), then NA, EA and KI of the
    ``regular`` condition (the seed's choice), or of the only condition.
    """
    f = frame.copy()
    key = next((c for c in ("dataset", "model", "source") if c in f.columns), None)
    if key is None or "condition" not in f.columns or "acc" not in f.columns:
        raise InputError("masking_indicator_table: need columns (dataset|model), condition and acc; "
                         f"found {list(f.columns)}")
    order = [c for c in ("strict", "regular", "partial", "lenient") if c in set(f["condition"])]
    order += sorted(set(f["condition"]) - set(order))
    scale = 100.0 if percent else 1.0
    rows = []
    for k, g in f.groupby(key, sort=False):
        g = g.set_index("condition")
        row: dict[str, Any] = {key.capitalize(): str(k)}
        for c in order:
            row[f"Acc {c}"] = float(g["acc"].get(c, np.nan)) * scale
        ref = "regular" if "regular" in g.index else g.index[0]
        for ind, sc in (("na", 1.0), ("ea", scale), ("ki", 1.0)):
            if ind in g.columns:
                v = g.loc[ref, ind]
                row[ind.upper()] = np.nan if _is_missing(v) else float(v) * sc
        rows.append(row)
    df = pd.DataFrame(rows)
    fmts: dict[str, Formatter] = {c: "{:.2f}" for c in df.columns if c.startswith("Acc") or c == "EA"}
    fmts.update({c: "{:.4f}" for c in ("NA", "KI") if c in df.columns})
    notes = ("MR-weighted averages ⟨X⟩ = Σ MR·X(MR) / Σ MR; NA, EA, KI for regular masking.",)
    return Table(df, caption=caption, label=label, formats=fmts, notes=notes)


# --------------------------------------------------------------------------- estimated marginal means


def emmeans_table(em: Any, caption: str = "", label: str = "emmeans") -> Table:
    """An :class:`~mrcstats.models.emmeans.EmmeansResult` as emmeans prints it (``prob``/``emmean``, SE,
    df, asymptotic limits), emmeans's messages as notes."""
    df = em.to_frame()
    stub = len(em.specs) + len(em.by)
    fmts: dict[str, Formatter] = {c: "{:.4f}" for c in df.columns[stub:] if c != "df"}
    return Table(df, caption=caption, label=label, formats=fmts, notes=tuple(em.notes), stub=stub)


def pairs_table(pr: Any, caption: str = "", label: str = "pairs") -> Table:
    """A :class:`~mrcstats.models.emmeans.PairsResult` as emmeans prints it (``estimate``/``odds.ratio``, SE,
    df, z.ratio, p.value adjusted as noted)."""
    df = pr.to_frame()
    stub = 1 + len(pr.by)
    fmts: dict[str, Formatter] = {c: "{:.4f}" for c in (pr.est_name, "SE")}
    fmts.update({"z.ratio": "{:.3f}", "p.value": format_p})
    if "null" in df.columns:
        fmts["null"] = "{:g}"
    return Table(df, caption=caption, label=label, formats=fmts, notes=tuple(pr.notes), stub=stub)
