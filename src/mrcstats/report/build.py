"""``build_report(spec, out)``: read the logs, run the analyses of a spec, write the PDF and its tables.

The PDF has a title, a data summary, a Methods section written from what was
actually run (formulas, contrasts, engine, nAGQ, tests and their settings,
software versions, seeds), then one section per analysis with numbered tables
and figures. Beside ``NAME.pdf`` it writes ``NAME_tables/`` (each table as
``.tex`` (booktabs), ``.md``, ``.csv`` and ``.html``) and ``NAME_figures/``
(vector PDF). The three are built in a hidden staging folder beside the PDF and
moved into place together at the end (:mod:`mrcstats._staging`): a failed or
killed build leaves the previous report whole, and the next build cleans up
after it; files of those types from the earlier build are replaced, other files
in the two folders are kept. Numbers come from the result objects of the other layers (``glmer``,
``drop1``, ``gvif``, ``fisher``, ``chisq``, ``discrimination``,
``masking_indicators``, ``summarize``); this module only lays them out.

An analysis that cannot run never kills the report: one whose building block is
not installed (:class:`~mrcstats.report.analyses.base.Skip`), or that fails on
this log (an :class:`~mrcstats.errors.InputError` such as a formula naming a
missing column, a model that does not converge, or any other exception), is
skipped with a note in its section of the PDF and HTML, listed under "Skipped
analyses" and in :attr:`ReportResult.skipped`; a failure is also in
:attr:`ReportResult.failed` with the analysis's place in the spec
(``analyses[1] (glmm): ...``). ``on_error="raise"`` (the CLI's ``--strict``)
stops at the first failure instead, naming the analysis. Errors of the spec
itself (an unknown key or type) are found before any log is read and always stop.
"""
from __future__ import annotations

import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from mrcstats._repr import Result
from mrcstats._staging import Staging, recover_stale
from mrcstats._words import plural
from mrcstats.errors import InputError, MrcstatsError
from mrcstats.report import figures as F
from mrcstats.report.analyses.base import (
    AnalysisSpec,
    Context,
    Fidelity,
    NotCompared,
    NotReproduced,
    Output,
    Skip,
    TestRecord,
    apply_filter,
    slug,
)
from mrcstats.report.analyses.registry import ANALYSES
from mrcstats.report.pdf import ReportDocument
from mrcstats.report.spec import ReportSpec, load_spec

__all__ = ["ReportResult", "apply_filter", "build_report"]


@dataclass(frozen=True, repr=False)
class ReportResult(Result):
    """What :func:`build_report` wrote."""

    pdf: Path
    pages: int
    tables: tuple[Path, ...]
    figures: tuple[Path, ...]
    sections: tuple[str, ...]
    skipped: tuple[str, ...]
    headline: Mapping[str, Any] = field(default_factory=dict)
    html: Path | None = None
    #: the analyses skipped because they failed (not a missing building block): ``"analyses[i] (type): error"``
    failed: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"pdf": str(self.pdf), "html": None if self.html is None else str(self.html),
                "pages": self.pages, "tables": [str(p) for p in self.tables],
                "figures": [str(p) for p in self.figures], "sections": list(self.sections),
                "skipped": list(self.skipped), "failed": list(self.failed), "headline": dict(self.headline)}

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame({"section": list(self.sections)})

    def summary(self) -> str:
        lines = [(f"wrote {self.pdf} ({self.pages} pages, {len(self.tables)} table files, "
                  f"{len(self.figures)} figures)")]
        if self.html is not None:
            lines.append(f"wrote {self.html} (interactive HTML: sortable tables, hover on figures)")
        lines += [f"skipped: {s}" for s in self.skipped]
        return "\n".join(lines)


# ----------------------------------------------------------------------------- orchestrator


def _versions() -> str:
    import importlib.metadata as md

    parts = [f"Python {platform.python_version()}"]
    for pkg in ("mrcstats", "numpy", "pandas", "scipy", "statsmodels", "matplotlib", "reportlab", "pdfrw"):
        try:
            parts.append(f"{pkg} {md.version(pkg)}")
        except md.PackageNotFoundError:
            pass
    return ", ".join(parts)


def build_report(spec: str | Path | Mapping[str, Any] | ReportSpec, out: str | Path,
                 html: bool | str | Path = False, on_error: str = "skip") -> ReportResult:
    """Run the analyses of ``spec`` and write the PDF report to ``out`` (tables and figures beside it).

    ``spec``: a YAML file, a mapping of the same shape, or a :class:`ReportSpec`
    (format in :mod:`mrcstats.report.spec` and docs/report.md). Deterministic: the
    same spec and logs give a byte-identical PDF. ``html``: also write the interactive HTML report
    (:mod:`mrcstats.report.html`; ``True``: ``NAME.html`` beside the PDF), built from the same blocks.
    ``on_error``: ``"skip"`` (default) — an analysis that fails is skipped with a note and the report is still
    written (the failures in :attr:`ReportResult.failed`); ``"raise"`` — the first failure stops the build,
    naming the analysis, and nothing is written.
    """
    if on_error not in ("skip", "raise"):
        raise InputError(f"on_error={on_error!r}: expected 'skip' (note the failure, write the report) or 'raise'")
    out = Path(out)
    if out.suffix.lower() != ".pdf":
        raise InputError(f"--out {out}: the report is a PDF; give a path ending in .pdf")
    recover_stale(out.parent, out.name)  # first: finish or remove what a killed build of this report left
    rs = spec if isinstance(spec, ReportSpec) else load_spec(spec)
    log = _read_logs(rs)
    final_tables, final_figures = out.parent / f"{out.stem}_tables", out.parent / f"{out.stem}_figures"
    html_out = None if html is False else (out.with_suffix(".html") if html is True else Path(html))
    targets = {"tables": (final_tables, "dir", TABLE_EXTS), "figures": (final_figures, "dir", FIGURE_EXTS)}
    if html_out is not None:
        targets["html"] = (html_out, "file", ())
    targets["pdf"] = (out, "file", ())  # the PDF last
    with Staging(out, targets) as stage:  # nothing beside the PDF changes until the commit at the end
        res = _build(rs, log, stage.path("pdf"), stage.path("tables"), stage.path("figures"),
                     None if html_out is None else stage.path("html"), on_error)
        stage.commit()
    return replace(res, pdf=out, tables=tuple(stage.final(p) for p in res.tables),
                   figures=tuple(stage.final(p) for p in res.figures), html=html_out)


#: the file endings a report writes into ``NAME_tables/`` and ``NAME_figures/`` (other files there are kept)
TABLE_EXTS: tuple[str, ...] = (".tex", ".md", ".csv", ".html")
FIGURE_EXTS: tuple[str, ...] = (".pdf", ".svg")


def _build(rs: ReportSpec, log: pd.DataFrame, out: Path, tables_dir: Path, figures_dir: Path,
           html_path: Path | None = None, on_error: str = "skip") -> ReportResult:
    """Run the analyses and write the PDF, tables, figures (and the HTML report) at the (staged) paths given."""
    data, feature_missing = _join_features(log, rs)
    ctx = Context(data, log, rs.seed)
    outputs: list[Output] = []
    skipped: list[str] = []
    failed: list[str] = []
    for a in rs.analyses:
        outputs.append(_run(ANALYSES[a.type](), ctx, a, rs, skipped, failed, on_error))

    table_paths: list[Path] = []
    figure_paths: list[Path] = []
    for t in ctx.extra_tables:
        table_paths += t.write(tables_dir / slug(t.label))
    doc = ReportDocument(rs.title, rs.subtitle, rs.author)
    if html_path is not None:
        from mrcstats.report.html import Documents, HtmlDocument

        doc = Documents(doc, HtmlDocument(rs.title, rs.subtitle, rs.author), html_path)
    from mrcstats.report import glossary

    texts = [rs.title, rs.subtitle or "", *rs.notes, *rs.methods, *glossary.output_texts(outputs),
             *(str(n) for n in rs.not_reproduced), *skipped]
    _data_summary(doc, rs, log, feature_missing, glossary.paragraph(glossary.used(texts)))
    _methods(doc, rs, outputs, log.attrs.get("notes") or ())
    sections: list[str] = []
    for o in outputs:
        for sec in (o, *o.sections):
            sections.append(sec.title)
            table_paths_, figure_paths_ = _emit(doc, sec, tables_dir, figures_dir)
            table_paths += table_paths_
            figure_paths += figure_paths_
    table_paths += _multiplicity(doc, [t for o in outputs for t in o.tests], rs.multiplicity, tables_dir)
    fidelity = _fidelity(doc, [f for o in outputs for f in o.fidelity], [n for o in outputs for n in o.not_compared])
    _not_reproduced(doc, [*rs.not_reproduced, *(n for o in outputs for n in o.not_reproduced)])
    if skipped:
        doc.heading("Skipped analyses", 2)
        doc.bullets(skipped)
    doc.build(out)
    headline: dict[str, Any] = {}
    for o in outputs:
        for k, v in o.headline.items():
            if isinstance(v, dict) and isinstance(headline.get(k), dict):
                headline[k].update(v)
            else:
                headline[k] = v
    if fidelity:
        headline["fidelity"] = fidelity
    return ReportResult(pdf=out, pages=doc.pages, tables=tuple(table_paths), figures=tuple(figure_paths),
                        sections=("Data", "Methods", *sections), skipped=tuple(skipped), headline=headline,
                        html=html_path, failed=tuple(failed))


def _run(plugin: Any, ctx: Context, a: AnalysisSpec, rs: ReportSpec, skipped: list[str], failed: list[str],
         on_error: str = "skip") -> Output:
    """Run one plug-in. A missing building block (:class:`Skip`) or a failure on this log gives a section holding
    only the note "Skipped: why" (and an entry in ``skipped``; a failure also in ``failed`` with its place in the
    spec); with ``on_error="raise"`` a failure stops the report, naming the analysis."""
    title = a.get("title") or plugin.title
    n_extra = len(ctx.extra_tables)
    try:
        return plugin.run(ctx, a)
    except Skip as exc:
        why = str(exc)
    except MrcstatsError as exc:
        if on_error == "raise":
            raise type(exc)(f"{rs.source}: {a.where} ({a.type}): {exc}") from None
        why = f"the analysis failed on this log: {exc}"
        failed.append(f"{a.where} ({a.type}): {exc}")
    except Exception as exc:  # a failing analysis never kills the report (docs/report.md)
        if on_error == "raise":
            raise
        why = f"the analysis failed on this log ({type(exc).__name__}: {exc})"
        failed.append(f"{a.where} ({a.type}): {type(exc).__name__}: {exc}")
    del ctx.extra_tables[n_extra:]          # nothing half-built of a skipped analysis is written
    skipped.append(f"{title}: {why}")
    o = Output(title)
    o.note(f"Skipped: {why}")
    return o


def _emit(doc: ReportDocument, sec: Output, tables_dir: Path, figures_dir: Path) -> tuple[list[Path], list[Path]]:
    """Lay out one section; write its tables and figures beside the PDF."""
    tables: list[Path] = []
    figures: list[Path] = []
    doc.heading(sec.title)
    for op, args, kw in sec.blocks:
        if op == "table":
            t = args[0]
            tables += t.write(tables_dir / slug(t.label))
            doc.table(t)
        elif op == "figure":
            fig, name, caption = args
            figures += F.save_figure(fig, figures_dir / f"{slug(name)}.pdf")
            doc.figure(fig, caption, width_in=kw.get("width_in"))
        elif op == "para":
            doc.paragraph(args[0])
        elif op == "note":
            doc.note(args[0])
        elif op == "code":
            doc.code(args[0])
        elif op == "h2":
            doc.heading(args[0], 2)
    return tables, figures


def _methods(doc: ReportDocument, rs: ReportSpec, outputs: list[Output], reading: Sequence[str] = ()) -> None:
    """The Methods section; ``reading``: what the readers said about each file (the log's ``attrs["notes"]``)."""
    doc.heading("Methods")
    extra = sorted({sw for o in outputs for sw in o.software})
    doc.paragraph(f"Software: {_versions()}" + (f"; {'; '.join(extra)}" if extra else "") + ". "
                  f"Random seed of the report (Monte Carlo tests, bootstrap, sampled figure points): {rs.seed}.")
    if reading:
        doc.paragraph("Reading the logs:")
        doc.bullets([str(n) for n in reading])
    for m in rs.methods:
        doc.paragraph(m)
    test_methods: dict[str, str] = {}
    for o in outputs:
        if not o.methods:
            continue
        doc.heading(o.methods_title or o.title, 2)
        for ln in o.methods:
            doc.paragraph(ln)
        if o.left_out:
            doc.paragraph("Rows left out of this analysis: " + "; ".join(f"{n:,} ({why})" for why, n in
                                                                            o.left_out.items()) + ".")
        test_methods.update(o.test_methods)
    if test_methods:
        doc.heading("Statistical tests", 2)
        for text in test_methods.values():
            doc.paragraph(text)
    tests = [t for o in outputs for t in o.tests]
    if tests:
        doc.heading("Multiplicity", 2)
        fams = _families(tests)
        multi = {f: ts for f, ts in fams.items() if len(ts) > 1}
        if rs.multiplicity == "none":
            doc.paragraph("No correction for multiple testing was applied (multiplicity: none); the p-values are "
                          "unadjusted.")
        elif multi:
            doc.paragraph(f"Where a report runs a family of tests, the p-values are adjusted with "
                          f"{_METHOD_NAMES[rs.multiplicity]} (R's p.adjust(p, \"{rs.multiplicity}\")) within each "
                          f"family: " + "; ".join(f"{_family_name(f)} ({len(ts)} tests)" for f, ts in multi.items())
                          + ". The section Multiplicity lists the unadjusted and adjusted p-values; the tables "
                          "show unadjusted p-values. Wald tests of single coefficients of a mixed model are not adjusted.")
        else:
            doc.paragraph("Each family holds a single test, so no adjustment for multiplicity was needed.")


_METHOD_NAMES = {"holm": "Holm's step-down method (Holm 1979)", "bonferroni": "the Bonferroni correction",
                 "BH": "the Benjamini-Hochberg false-discovery-rate method", "none": "no correction"}


def _family_name(f: str) -> str:
    return "the table tests of this report" if f == "report" else f


def _families(tests: list[TestRecord]) -> dict[str, list[TestRecord]]:
    fams: dict[str, list[TestRecord]] = {}
    for t in tests:
        fams.setdefault(t.family, []).append(t)
    return fams


def _multiplicity(doc: ReportDocument, tests: list[TestRecord], method: str, tables_dir: Path) -> list[Path]:
    """A table of every family with ≥ 2 tests: unadjusted and adjusted p (R's p.adjust)."""
    from mrcstats.report.format import format_p
    from mrcstats.report.tables import PairTable
    from mrcstats.stats.multiplicity import p_adjust

    fams = {f: ts for f, ts in _families(tests).items() if len(ts) > 1}
    if not fams or method == "none":
        return []
    doc.heading("Multiplicity")
    doc.paragraph(f"p-values adjusted with {_METHOD_NAMES[method]} within each family of tests "
                  f"(R's p.adjust(p, \"{method}\")).")
    paths: list[Path] = []
    for i, (fam, ts) in enumerate(fams.items()):
        adj = p_adjust([t.p for t in ts], method)
        raw = pd.DataFrame({"test": [t.label for t in ts], "method": [t.test for t in ts],
                            "statistic": [t.statistic for t in ts], "p": [t.p for t in ts], "p_adjusted": adj})
        vis = pd.DataFrame({"Hypothesis": raw["test"], "Test": raw["method"], "Statistic": raw["statistic"],
                            "p": raw["p"], f"p ({method})": adj})
        if not any(raw["statistic"]):          # no test of the family has a statistic: no column of dashes
            vis = vis.drop(columns=["Statistic"])
        t = PairTable(vis, raw=raw, caption=f"Family: {_family_name(fam)}; {len(ts)} tests, unadjusted p and p "
                      f"adjusted by {_METHOD_NAMES[method]}.", label=f"multiplicity_{i + 1}", stub=2,
                      formats={"p": format_p, f"p ({method})": format_p,
                               **({"Statistic": lambda v: v or "–"} if "Statistic" in vis.columns else {})})
        paths += t.write(tables_dir / slug(t.label))
        doc.table(t)
    return paths


def _fidelity(doc: ReportDocument, cells: list[Fidelity], not_compared: list[NotCompared]) -> dict[str, Any]:
    """Per published table: compared cells within tolerance, each cell outside it, and every cell shown but not
    compared with its reason. Returns the same counts for the headline (``{table: {compared, reproduced,
    outside, not_compared: {cell: reason}}}``)."""
    if not cells and not not_compared:
        return {}
    from mrcstats.report.tables import format_number

    doc.heading("Fidelity")
    doc.paragraph("The paper's published values beside ours: a compared cell counts as reproduced when |ours − "
                  "paper| is within the stated tolerance (half a unit in the last decimal the paper prints unless "
                  "stated). Only cells computed from the paper's real data are compared; cells computed from "
                  "simulated responses or from the paper's own numbers, and cells the paper prints unreadably, are "
                  "listed as not compared, with the reason.")
    by: dict[str, list[Fidelity]] = {}
    nc: dict[str, dict[str, list[str]]] = {}
    for c in cells:
        by.setdefault(c.table, []).append(c)
    for n in not_compared:
        by.setdefault(n.table, [])
        nc.setdefault(n.table, {}).setdefault(n.reason, []).append(n.cell)
    lines = []
    summary: dict[str, Any] = {}
    for table, cs in by.items():
        bad = [c for c in cs if not (c.ok and c.ours == c.ours)]
        skipped = nc.get(table, {})
        n_nc = sum(len(v) for v in skipped.values())
        txt = (f"{table}: {len(cs) - len(bad)} of {len(cs)} compared cells reproduced" if cs else
               f"{table}: no cell compared")
        if bad:
            txt += "; outside the tolerance: " + "; ".join(
                f"{c.cell} (paper {c.paper:g}, ours "
                + (f"{round(c.ours, 6):g}, Δ {format_number(round(c.delta, 6), 2)}"
                   if c.ours == c.ours else "missing") + ")" for c in bad)
        for why, cl in skipped.items():
            txt += (f"; not compared ({plural(len(cl), 'cell')}" + ("" if n_nc == len(cl) and not cs else
                    f": {', '.join(cl)}") + f"): {why.rstrip('.')}")
        lines.append(txt + ".")
        summary[table] = {"compared": len(cs), "reproduced": len(cs) - len(bad), "outside": [c.cell for c in bad],
                          "not_compared": {cell: why for why, cl in skipped.items() for cell in cl}}
    doc.bullets(lines)
    return summary


def _not_reproduced(doc: ReportDocument, items: list[NotReproduced]) -> None:
    if items:
        doc.heading("Not reproduced")
        doc.paragraph("Published analyses that this report does not reproduce, and why:")
        doc.bullets([f"{n.what}: {n.reason}." if not n.reason.endswith(".") else f"{n.what}: {n.reason}"
                     for n in items])


# ----------------------------------------------------------------------------- data


def _read_logs(rs: ReportSpec) -> pd.DataFrame:
    try:
        from mrcstats.io import read_log
    except ImportError as exc:  # pragma: no cover - io is part of the package
        raise InputError(f"cannot read logs: {exc}") from None
    frames = []
    skipped: dict[str, int] = {}
    relabel: list = []
    notes: list[str] = []
    for ls in rs.logs:
        df = read_log(str(ls.path), format=ls.format, model=ls.model)
        for k, v in (df.attrs.get("skipped") or {}).items():
            skipped[k] = skipped.get(k, 0) + int(v)
        relabel += list(df.attrs.get("relabel") or [])
        notes += list(df.attrs.get("notes") or [])     # each reader's notes, naming its file (io.reader.file_notes)
        frames.append(df)
    log = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True, sort=False)
    if len(frames) > 1:
        from mrcstats.io import validate_log

        log = validate_log(log)
    log.attrs["skipped"] = skipped
    log.attrs["notes"] = notes
    if relabel:
        log.attrs["relabel"] = relabel
    return log


def _join_features(log: pd.DataFrame, rs: ReportSpec) -> tuple[pd.DataFrame, int]:
    """The log with the item features joined on ``item``, and the number of rows that found no features."""
    if rs.features is None:
        return log, 0
    p = rs.features
    feats = pd.read_parquet(p) if p.suffix == ".parquet" else pd.read_csv(p)
    if "item" not in feats.columns:
        raise InputError(f"{p}: the features table has no `item` column to join on (columns: {list(feats.columns)})")
    extra = [c for c in feats.columns if c == "item" or c not in log.columns]
    feats = feats[extra].drop_duplicates("item")
    out = log.merge(feats, on="item", how="left", validate="many_to_one")
    missing = int(out[extra[1]].isna().sum()) if len(extra) > 1 else 0
    return out, missing


def _some(values: list[str], n: int = 8) -> str:
    """The first ``n`` values, then how many more."""
    vals = [v or "(none)" for v in values]
    return ", ".join(vals) if len(vals) <= n else f"{len(vals)} ({', '.join(vals[:n])}, …)"


def _data_summary(doc: ReportDocument, rs: ReportSpec, log: pd.DataFrame, feature_missing: int,
                  abbreviations: str = "") -> None:
    from mrcstats.io.schema import log_stats

    st = log_stats(log)
    doc.heading("Data")
    if abbreviations:       # first, so each abbreviation is defined before its first use
        doc.paragraph(abbreviations)
    sources = ", ".join(str(s.path.name) for s in rs.logs)
    doc.paragraph(f"Logs: {sources}. {st['rows']:,} responses from {plural(len(st['models']), 'model')} "
                  f"({', '.join(st['models'])}) on {st['items']:,} items in {st['clusters']:,} clusters; "
                  f"conditions: {_some(st['conditions'])}; trials: "
                  f"{log['trial'].nunique()}.")
    inv = sum(st["invalid"].values())
    doc.paragraph(f"Invalid or missing answers: {inv:,}, kept and counted as not correct in every section "
                  "(accuracy, comparisons, item response models, mixed models) unless a section says it leaves them out. "
                  + (f"Rows skipped while reading: {st['skipped']}." if st["skipped"] else
                     "No rows were skipped while reading."))
    from mrcstats.io.relabel import relabel_notes

    for line in relabel_notes(log.attrs):   # a log whose keys a person's review changed says so
        doc.paragraph(f"The log was {line}.")
    if rs.features is not None:
        doc.paragraph(f"Item features joined on the item identifier from {rs.features.name}"
                      + (f"; {feature_missing:,} rows have no features." if feature_missing else "."))
    for n in rs.notes:
        doc.paragraph(n)
