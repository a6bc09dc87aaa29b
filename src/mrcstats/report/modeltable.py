"""Side-by-side model tables, as R's ``modelsummary::modelsummary(list(m1, m2))`` or ``texreg``.

:func:`table` lays several GLMM fits (:class:`mrcstats.models.GlmerResult`) out in
one table, one column per model, in three blocks separated by rules:

1. fixed effects: the estimate (optionally with significance stars) and below it the
   standard error in parentheses or the confidence interval in brackets;
2. random effects: the standard deviation of each random term (``SD (Intercept | passage)``)
   and, when a fit has them, the correlations (``Cor (Intercept, x | g)``);
3. goodness of fit: number of observations, groups per grouping factor, AIC, BIC and
   the log-likelihood.

Every number comes from the model's own tidy table, :meth:`GlmerResult.to_frame`
(``effect, group, term, estimate, std_error, statistic, p_value``, the numbers of
``coef_table()``), and its ``nobs``/``ngroups``/``aic``/``bic``/``loglik`` fields; nothing
is refitted or recomputed, except what the options ask for:

* the Wald interval ``β ± z_{1-α/2} SE`` from :meth:`GlmerResult.confint` with ``method="Wald"`` (lme4's
  ``confint(m, method = "Wald")``);
* with ``exponentiate=True`` the odds ratio ``exp(β)``, its interval ``exp(lo), exp(hi)``
  and the delta-method SE ``exp(β) SE`` (as ``modelsummary(exponentiate = TRUE)``);
  random-effect SDs and fit statistics are never exponentiated.

The layout follows modelsummary (models as ``(1)``, ``(2)`` unless named; coefficient
rows in order of first appearance across models; ``coef_map`` renames, selects and
orders; the uncertainty under the estimate; stars off by default) with texreg's
grouping rows (``Num. groups: passage``). Numbers are printed by
:mod:`mrcstats.report.format`; :meth:`ModelTable.to_frame` and the CSV keep them
unrounded in a tidy long form (one row per model × row × statistic).

References: Arel-Bundock (2022), *modelsummary: Data and Model Summaries in R*,
J. Stat. Softw. 103(1); Leifeld (2013), *texreg: Conversion of Statistical Model
Output in R to LaTeX and HTML Tables*, J. Stat. Softw. 55(8).
"""
from __future__ import annotations

import html
import io
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mrcstats._files import write_text_atomic
from mrcstats._repr import Result
from mrcstats.errors import InputError
from mrcstats.models.family import BINOMIAL
from mrcstats.models.family_table import family_labels
from mrcstats.report.format import MISSING, format_num
from mrcstats.report.tables import Table, latex_escape, md_escape, write_exports

__all__ = ["DEFAULT_STARS", "GOF_ROWS", "ModelTable", "ModelTableView", "table"]

#: texreg's and R's default thresholds (``*** p < .001, ** p < .01, * p < .05``)
DEFAULT_STARS: dict[str, float] = {"*": 0.05, "**": 0.01, "***": 0.001}

#: goodness-of-fit rows: key -> (label, column kind of :mod:`.format`)
GOF_ROWS: dict[str, tuple[str, str]] = {
    "nobs": ("Num. obs.", "count"),
    "groups": ("Num. groups", "count"),
    "aic": ("AIC", "ic"),
    "bic": ("BIC", "ic"),
    "loglik": ("Log likelihood", "ic"),
    "minus2loglik": ("−2 log likelihood", "ic"),
}

_STATISTICS = ("se", "ci", "none")
_LONG_COLUMNS = ["model", "block", "term", "label", "group", "statistic", "value"]


# --------------------------------------------------------------------------- the result


@dataclass(frozen=True, repr=False)
class ModelTable(Result):
    """Several models side by side: the tidy numbers and how to print them.

    Attributes
    ----------
    models : model names, the column headers, in order.
    data : long DataFrame with columns ``model, block, term, label, group, statistic, value``:
        ``block`` is ``coef``, ``ranef`` or ``gof``; ``term`` the model's own name
        (``scaled_tok:LLM1``, ``sd__(Intercept)``, ``nobs``); ``label`` the row label printed;
        ``statistic`` is ``estimate``, ``std_error``, ``conf_low``, ``conf_high``, ``z``,
        ``p_value`` (coef), ``sd``/``cor`` (ranef) or the fit statistic's key (gof).
        Values are unrounded.
    statistic : ``"se"``, ``"ci"`` or ``"none"``: what is printed under each estimate.
    conf_level : level of the Wald intervals.
    stars : thresholds ``{mark: p}`` (empty: no stars).
    exponentiate : estimates are odds ratios ``exp(β)``.
    layout : ``"stacked"`` (uncertainty on its own line, as modelsummary) or ``"inline"``
        (``0.512 (0.103)`` in one cell).
    caption, label, notes : caption, identifier (LaTeX ``\\label``, file stem), lines under the table.
    """

    models: tuple[str, ...]
    data: pd.DataFrame
    statistic: str = "se"
    conf_level: float = 0.95
    stars: Mapping[str, float] = field(default_factory=dict)
    exponentiate: bool = False
    layout: str = "stacked"
    caption: str = ""
    label: str = "modeltable"
    notes: tuple[str, ...] = ()

    # ---- tidy output
    def to_frame(self) -> pd.DataFrame:
        """The long form (a copy): one row per model × table row × statistic, unrounded."""
        return self.data.copy()

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON (``mrcstats._jsonout`` turns NaN into null, ±inf into "Inf"/"-Inf")."""
        return {"models": list(self.models), "statistic": self.statistic, "conf_level": self.conf_level,
                "stars": dict(self.stars), "exponentiate": self.exponentiate, "caption": self.caption,
                "notes": list(self.notes), "rows": self.data.to_dict(orient="records")}

    def wide(self) -> pd.DataFrame:
        """The printed table as strings: a ``block`` column, the row label, one column per model."""
        return pd.DataFrame(self._rows(), columns=["block", "", *self.models])

    def summary(self) -> str:
        """Plain text (as ``texreg::screenreg``): aligned columns, dashed rules between blocks."""
        rows = self._rows()
        head = ["", *self.models]
        body = [r[1:] for r in rows]
        w = [max(len(str(c)) for c in col) for col in zip(head, *body)]
        rule = "-" * (sum(w) + 2 * (len(w) - 1))

        def line(cells: Sequence[str]) -> str:
            return "  ".join([cells[0].ljust(w[0]), *(c.rjust(k) for c, k in zip(cells[1:], w[1:]))]).rstrip()

        out = []
        if self.caption:
            out.append(self.caption)
        out += [rule, line(head), rule]
        prev = None
        for r in rows:
            if prev is not None and r[0] != prev:
                out.append(rule)
            out.append(line(r[1:]))
            prev = r[0]
        out.append(rule)
        out += list(self.notes)
        return "\n".join(out)

    def __str__(self) -> str:
        return self.summary()

    # ---- exports
    def to_csv(self, path: str | Path | None = None) -> str:
        """The long form as CSV (full precision, missing values empty); written atomically to ``path`` if given."""
        buf = io.StringIO()
        self.data.to_csv(buf, index=False, lineterminator="\n", float_format="%.17g")
        text = buf.getvalue()
        if path is not None:
            write_text_atomic(Path(path), text)
        return text

    def to_markdown(self) -> str:
        """A pipe table (rules between blocks are not expressible in Markdown; the blocks follow each other)."""
        head = ["", *self.models]
        lines = []
        if self.caption:
            lines += [f"**{md_escape(self.caption)}**", ""]
        lines.append("| " + " | ".join(md_escape(h) for h in head) + " |")
        lines.append("|:--|" + "|".join(":-:" for _ in self.models) + "|")
        for r in self._rows():
            lines.append("| " + " | ".join(md_escape(c) for c in r[1:]) + " |")
        for n in self.notes:
            lines += ["", md_escape(n)]
        return "\n".join(lines) + "\n"

    def to_latex(self, float_env: bool = True) -> str:
        """booktabs LaTeX (``\\usepackage{booktabs}``), ``\\midrule`` between the blocks."""
        k = len(self.models)
        lines = []
        if float_env:
            lines += ["\\begin{table}[t]", "\\centering", "\\small"]
            if self.caption:
                lines.append(f"\\caption{{{latex_escape(self.caption)}}}")
            lines.append(f"\\label{{tab:{_slug(self.label)}}}")
        lines.append(f"\\begin{{tabular}}{{l{'c' * k}}}")
        lines.append("\\toprule")
        lines.append(" & ".join(["", *(latex_escape(m) for m in self.models)]) + " \\\\")
        lines.append("\\midrule")
        prev = None
        for r in self._rows():
            if prev is not None and r[0] != prev:
                lines.append("\\midrule")
            lines.append(" & ".join(_latex_cell(c) for c in r[1:]) + " \\\\")
            prev = r[0]
        lines.append("\\bottomrule")
        lines.append("\\end{tabular}")
        if float_env:
            for n in self.notes:
                lines.append(f"\\par\\smallskip{{\\footnotesize {latex_escape(n)}}}")
            lines.append("\\end{table}")
        return "\n".join(lines) + "\n"

    def to_html(self) -> str:
        """An HTML table: one ``<tbody>`` per block (class ``coef``/``ranef``/``gof``), notes in ``<tfoot>``."""
        out = [f'<table class="mrcstats modeltable" id="{html.escape(_slug(self.label))}">']
        if self.caption:
            out.append(f"<caption>{html.escape(self.caption)}</caption>")
        out.append("<thead><tr><th></th>" + "".join(f"<th>{html.escape(m)}</th>" for m in self.models)
                   + "</tr></thead>")
        prev = None
        for r in self._rows():
            if r[0] != prev:
                if prev is not None:
                    out.append("</tbody>")
                out.append(f'<tbody class="{r[0]}">')
                prev = r[0]
            out.append(f"<tr><th>{html.escape(r[1])}</th>"
                       + "".join(f"<td>{html.escape(c)}</td>" for c in r[2:]) + "</tr>")
        if prev is not None:
            out.append("</tbody>")
        if self.notes:
            out.append("<tfoot>" + "".join(f'<tr><td colspan="{len(self.models) + 1}">{html.escape(n)}</td></tr>'
                                           for n in self.notes) + "</tfoot>")
        out.append("</table>")
        return "\n".join(out) + "\n"

    def to_table(self) -> Table:
        """This table as a :class:`mrcstats.report.tables.Table` for the report route.

        Its cells are the printed strings (what the PDF draws); its exports (``to_latex``,
        ``to_markdown``, ``to_html``, ``to_csv``, ``write``) are this object's, so the
        LaTeX keeps the rules between blocks and the CSV the unrounded long form;
        ``rules`` lists the body rows above which a renderer draws a rule.
        """
        rows = self._rows()
        data = pd.DataFrame([r[1:] for r in rows], columns=["", *self.models], dtype=object)
        return ModelTableView(data, caption=self.caption, label=self.label, notes=self.notes, stub=1,
                              source=self, rules=self.block_starts())

    def block_starts(self) -> tuple[int, ...]:
        """Body-row indices where the random-effect and fit blocks begin (where a rule goes)."""
        rows = self._rows()
        return tuple(i for i in range(1, len(rows)) if rows[i][0] != rows[i - 1][0])

    def write(self, stem: str | Path, formats: Sequence[str] = ("tex", "md", "csv", "html")) -> list[Path]:
        """Write ``stem.<ext>`` for each format, atomically; returns the paths."""
        return write_exports(self, stem, formats, "ModelTable.write")

    # ---- laying out
    def _rows(self) -> list[list[str]]:
        """``[block, label, cell per model]`` for every printed row, in order."""
        d = self.data
        rows: list[list[str]] = []
        for block in ("coef", "ranef", "gof"):
            sub = d[d["block"] == block]
            for lab in dict.fromkeys(sub["label"]):
                cells = sub[sub["label"] == lab]
                vals = {(m, s): v for m, s, v in zip(cells["model"], cells["statistic"], cells["value"])}
                if block == "coef":
                    rows += self._coef_rows(lab, vals)
                else:
                    kind = {"sd": "sd", "cor": "correlation"}.get(cells["statistic"].iloc[0]) if block == "ranef" \
                        else GOF_ROWS.get(cells["term"].iloc[0].split(":", 1)[0], ("", "ic"))[1]
                    stat = cells["statistic"].iloc[0]
                    rows.append([block, lab, *(_cell(vals.get((m, stat)), kind) for m in self.models)])
        return rows

    def _coef_rows(self, lab: str, vals: Mapping[tuple[str, str], float]) -> list[list[str]]:
        kind = "odds_ratio" if self.exponentiate else "estimate"
        top, under = [], []
        for m in self.models:
            est = vals.get((m, "estimate"))
            if est is None:
                top.append("")
                under.append("")
                continue
            star = _stars(vals.get((m, "p_value")), self.stars)
            top.append(_cell(est, kind) + star)
            if self.statistic == "se":
                under.append(f"({_cell(vals.get((m, 'std_error')), 'se')})")
            elif self.statistic == "ci":
                under.append(f"[{_cell(vals.get((m, 'conf_low')), kind)}, {_cell(vals.get((m, 'conf_high')), kind)}]")
            else:
                under.append("")
        if self.statistic == "none":
            return [["coef", lab, *top]]
        if self.layout == "inline":
            return [["coef", lab, *(f"{a} {b}".strip() for a, b in zip(top, under))]]
        return [["coef", lab, *top], ["coef", "", *under]]


@dataclass(frozen=True, repr=False)
class ModelTableView(Table):
    """A :class:`Table` whose exports are those of the :class:`ModelTable` it shows (see
    :meth:`ModelTable.to_table`); caption, label and notes follow the view."""

    source: ModelTable | None = None
    rules: tuple[int, ...] = ()

    def _src(self) -> ModelTable:
        if self.source is None:  # pragma: no cover - built by ModelTable.to_table only
            raise InputError("ModelTableView without its ModelTable; build it with ModelTable.to_table()")
        return replace(self.source, caption=self.caption, label=self.label, notes=tuple(self.notes))

    def to_frame(self) -> pd.DataFrame:
        return self._src().to_frame()

    def to_dict(self) -> dict[str, Any]:
        return self._src().to_dict()

    def to_csv(self) -> str:
        return self._src().to_csv()

    def to_latex(self, float_env: bool = True) -> str:
        return self._src().to_latex(float_env)

    def to_markdown(self) -> str:
        return self._src().to_markdown()

    def to_html(self) -> str:
        return self._src().to_html()


def _cell(v: Any, kind: str) -> str:
    return MISSING if v is None else format_num(v, kind)


def _stars(p: Any, thresholds: Mapping[str, float]) -> str:
    if not thresholds or p is None or not np.isfinite(p):
        return ""
    best = ""
    for mark, cut in sorted(thresholds.items(), key=lambda kv: -kv[1]):
        if p < cut:
            best = mark
    return best


def _latex_cell(c: str) -> str:
    """Escaped cell; significance stars as a superscript (``0.890$^{***}$``, as texreg prints them)."""
    m = re.search(r"\*+$", c)
    if not m:
        return latex_escape(c)
    return latex_escape(c[:m.start()]) + f"$^{{{m.group(0)}}}$"


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.:-]+", "-", s).strip("-") or "modeltable"


def _p_cut(c: float) -> str:
    s = f"{c:g}"
    return s[1:] if s.startswith("0.") else s


# --------------------------------------------------------------------------- building


def _ranef_label(term: str, group: str) -> tuple[str, str]:
    """broom.mixed's ``sd__(Intercept)``/``cor__(Intercept).x`` -> (statistic, printed label)."""
    def bare(t: str) -> str:   # "(Intercept)" prints as "Intercept" inside the label's parentheses
        return "Intercept" if t == "(Intercept)" else t

    if term.startswith("sd__"):
        return "sd", f"SD ({bare(term[4:])} | {group})"
    if term.startswith("cor__"):
        a, _, b = term[5:].partition(".")
        return "cor", f"Cor ({bare(a)}, {bare(b)} | {group})"
    return "sd", f"{term} | {group}"


def _check_model(m: Any, name: str) -> pd.DataFrame:
    missing = [a for a in ("to_frame", "confint", "nobs", "ngroups", "aic", "bic", "loglik") if not hasattr(m, a)]
    if missing:
        raise InputError(f"table: model {name!r} is a {type(m).__name__}, not a fitted GLMM "
                         f"(it has no {', '.join(missing)}); pass results of mrcstats.glmer()")
    fr = m.to_frame()
    need = {"effect", "group", "term", "estimate", "std_error", "statistic", "p_value"}
    if not isinstance(fr, pd.DataFrame) or not need <= set(fr.columns):
        raise InputError(f"table: model {name!r}: to_frame() lacks the columns {sorted(need)}")
    return fr


def table(models: Sequence[Any] | Mapping[str, Any], *, statistic: str = "se", conf_level: float = 0.95,
          stars: bool | Mapping[str, float] = False, coef_map: Mapping[str, str] | Sequence[str] | None = None,
          coef_rename: Mapping[str, str] | None = None, exponentiate: bool = False,
          gof: Sequence[str] = ("nobs", "groups", "aic", "bic", "loglik"), layout: str = "stacked",
          caption: str = "", label: str = "modeltable", notes: Sequence[str] = ()) -> ModelTable:
    """Several GLMM fits side by side (modelsummary/texreg layout).

    Parameters
    ----------
    models : a list of :class:`~mrcstats.models.GlmerResult` (columns ``(1)``, ``(2)``, ...) or a
        mapping ``{"Tokens": m1, "Density": m2}`` (its keys are the column headers).
    statistic : ``"se"`` (standard error in parentheses, the default), ``"ci"`` (the model's
        ``confint(conf_level)``, Wald ``β ± z_{1-α/2} SE``, in brackets) or ``"none"``.
    conf_level : level of the interval (0.95).
    stars : ``True`` for ``* p < .05, ** p < .01, *** p < .001`` (a legend is added to the
        notes), or a mapping ``{mark: threshold}``; off by default.
    coef_map : ``{model term: printed label}`` or a list of terms: keeps only these
        coefficients, in this order (as modelsummary's ``coef_map``). A term no model has is
        an error (a typo would otherwise drop a row silently).
    coef_rename : ``{model term: printed label}``: renames, keeps every coefficient.
    exponentiate : odds ratios ``exp(β)`` with ``exp`` of the interval bounds and the
        delta-method SE ``exp(β) SE``.
    gof : which fit rows, in order, from :data:`GOF_ROWS` (``nobs``, ``groups``, ``aic``, ``bic``,
        ``loglik``, ``minus2loglik``).
    layout : ``"stacked"`` (uncertainty under the estimate) or ``"inline"`` (one cell).
    caption, label, notes : caption, identifier and extra lines under the table.

    Returns
    -------
    ModelTable : ``to_latex()``, ``to_markdown()``, ``to_html()``, ``to_csv(path)``,
    ``to_frame()`` (long, unrounded), ``to_dict()``, ``summary()`` (plain text).

    Example
    -------
    >>> t = mrcstats.table({"Tokens": m_tok, "Density": m_den}, statistic="ci")  # doctest: +SKIP
    >>> print(t.to_latex())                                                       # doctest: +SKIP
    """
    if isinstance(models, Mapping):
        names = [str(k) for k in models]
        fits = list(models.values())
    elif isinstance(models, Sequence) and not isinstance(models, str):
        fits = list(models)
        names = [f"({i + 1})" for i in range(len(fits))]
    else:
        fits, names = [models], ["(1)"]
    if not fits:
        raise InputError("table: no models given; pass a list of fits such as [m1, m2]")
    if len(set(names)) != len(names):
        raise InputError(f"table: model names must be unique, got {names}")
    if statistic not in _STATISTICS:
        raise InputError(f"table: statistic must be one of {list(_STATISTICS)}, got {statistic!r}")
    if layout not in ("stacked", "inline"):
        raise InputError(f"table: layout must be 'stacked' or 'inline', got {layout!r}")
    if isinstance(conf_level, bool) or not isinstance(conf_level, int | float) or not 0 < conf_level < 1:
        raise InputError(f"table: conf_level must be a number strictly between 0 and 1, got {conf_level!r}")
    bad = [g for g in gof if g not in GOF_ROWS]
    if bad:
        raise InputError(f"table: unknown gof rows {bad}; use some of {list(GOF_ROWS)}")
    if stars is True:
        thresholds = dict(DEFAULT_STARS)
    elif stars is False or stars is None:
        thresholds = {}
    elif isinstance(stars, Mapping) and all(isinstance(v, int | float) and 0 < v < 1 for v in stars.values()):
        thresholds = {str(k): float(v) for k, v in stars.items()}
    else:
        raise InputError(f"table: stars must be True/False or a mapping {{mark: p threshold}}, got {stars!r}")

    frames = [_check_model(m, n) for m, n in zip(fits, names)]
    cis = [m.confint("Wald", conf_level, parm="beta_").to_frame() for m in fits]

    # coefficient rows: union in order of first appearance, then coef_map / coef_rename
    order = list(dict.fromkeys(t for fr in frames for t in fr.loc[fr["effect"] == "fixed", "term"]))
    if coef_map is not None:
        cmap = dict(coef_map) if isinstance(coef_map, Mapping) else {str(t): str(t) for t in coef_map}
        unknown = [t for t in cmap if t not in order]
        if unknown:
            raise InputError(f"table: coef_map names {unknown}, which no model has; the models' terms are {order}")
        labels = cmap
    else:
        labels = {t: t for t in order}
    if coef_rename:
        unknown = [t for t in coef_rename if t not in order]
        if unknown:
            raise InputError(f"table: coef_rename names {unknown}, which no model has; the models' terms are {order}")
        labels = {t: coef_rename.get(t, lab) for t, lab in labels.items()}
    if len(set(labels.values())) != len(labels):
        raise InputError(f"table: two coefficients would print under one label: {labels}")

    recs: list[dict[str, Any]] = []
    for name, m, fr, ci in zip(names, fits, frames, cis):
        fx = fr[fr["effect"] == "fixed"].set_index("term")
        for term, lab in labels.items():
            if term not in fx.index:
                continue
            r = fx.loc[term]
            b, se = float(r["estimate"]), float(r["std_error"])
            lo, hi = (float(v) for v in ci.loc[term].iloc[:2])
            if exponentiate:
                b, se, lo, hi = math.exp(b), math.exp(b) * se, math.exp(lo), math.exp(hi)
            for stat, v in (("estimate", b), ("std_error", se), ("conf_low", lo), ("conf_high", hi),
                            ("z", float(r["statistic"])), ("p_value", float(r["p_value"]))):
                recs.append({"model": name, "block": "coef", "term": term, "label": lab, "group": None,
                             "statistic": stat, "value": v})
        rp = fr[fr["effect"] != "fixed"]
        for g, term, est in zip(rp["group"], rp["term"], rp["estimate"]):
            stat, lab = _ranef_label(str(term), str(g))
            recs.append({"model": name, "block": "ranef", "term": str(term), "label": lab, "group": str(g),
                         "statistic": stat, "value": float(est)})
        for key in gof:
            if key == "groups":
                for g, n in dict(m.ngroups).items():
                    recs.append({"model": name, "block": "gof", "term": f"groups:{g}",
                                 "label": f"{GOF_ROWS['groups'][0]}: {g}", "group": str(g), "statistic": "groups",
                                 "value": int(n)})
            else:
                v = getattr(m, key, None)
                recs.append({"model": name, "block": "gof", "term": key, "label": GOF_ROWS[key][0], "group": None,
                             "statistic": key, "value": None if v is None else (int(v) if key == "nobs" else float(v))})
    # rows in printed order (coef in label order, ranef and gof by first appearance), then by model
    first: dict[tuple[str, str], int] = {}
    coef_pos = {lab: i for i, lab in enumerate(labels.values())}
    for r in recs:
        first.setdefault((r["block"], r["label"]), coef_pos.get(r["label"], len(first))
                         if r["block"] == "coef" else len(first))
    blocks = {"coef": 0, "ranef": 1, "gof": 2}
    recs.sort(key=lambda r: (blocks[r["block"]], first[(r["block"], r["label"])], names.index(r["model"])))
    data = pd.DataFrame.from_records(recs, columns=_LONG_COLUMNS)

    # notes: what the cells are, the stars' legend, and what each fit reported about itself
    fams = list(dict.fromkeys(getattr(m, "family", BINOMIAL) for m in fits))
    if len(fams) == 1:
        lab = family_labels(fams[0])
        what = (f"{lab.ratio_desc} exp(β)" if exponentiate
                else f"Estimates on the {lab.eta_desc} scale ({fams[0].link} link)")
    else:
        what = "exp(β)" if exponentiate else "Estimates on each model's link scale (" + ", ".join(
            f"{f.name}: {f.link}" for f in fams) + ")"
    under = {"se": "; standard errors in parentheses" + (" (delta method)" if exponentiate else ""),
             "ci": f"; {conf_level:.0%} Wald confidence intervals in brackets", "none": ""}[statistic]
    out_notes = [f"{what}{under}."]
    if thresholds:
        out_notes.append(", ".join(f"{mark} p < {_p_cut(c)}"
                                   for mark, c in sorted(thresholds.items(), key=lambda kv: -kv[1])))
    for name, m in zip(names, fits):
        flags = []
        if getattr(m, "converged", True) is False:
            flags.append("did not converge")
        if getattr(m, "singular", False):
            flags.append("singular fit (a random-effect SD at or near zero)")
        if flags:
            out_notes.append(f"{name}: {'; '.join(flags)}.")
    out_notes += [str(n) for n in notes]
    return ModelTable(models=tuple(names), data=data, statistic=statistic, conf_level=float(conf_level),
                      stars=thresholds, exponentiate=bool(exponentiate), layout=layout, caption=caption,
                      label=label, notes=tuple(out_notes))
