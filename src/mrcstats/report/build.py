"""``build_report(spec, out)``: read the logs, run the analyses of a spec, write the PDF and its tables.

The PDF has a title, a data summary, a Methods section written from what was
actually run (formulas, contrasts, engine, nAGQ, tests and their settings,
software versions, seeds), then one section per analysis with numbered tables
and figures. Beside ``NAME.pdf`` it writes ``NAME_tables/`` (each table as
``.tex`` (booktabs), ``.md``, ``.csv`` and ``.html``) and ``NAME_figures/``
(vector PDF); files of those types left there by an earlier build are removed
first. Numbers come from the result objects of the other layers (``glmer``,
``drop1``, ``gvif``, ``fisher``, ``chisq``, ``discrimination``,
``masking_indicators``, ``summarize``); this module only lays them out.

An analysis whose building block is not installed is skipped with a note in
the PDF and in :attr:`ReportResult.skipped`; bad input (a formula naming a
missing column, say) raises :class:`~mrcstats.errors.InputError` naming the
analysis (``analyses[1] (glmm)``).
"""
from __future__ import annotations

import platform
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mrcstats.errors import DependencyError, InputError, MrcstatsError
from mrcstats.report import figures as F
from mrcstats.report.pdf import ReportDocument
from mrcstats.report.spec import AnalysisSpec, ReportSpec, load_spec
from mrcstats.report.tables import (
    Table,
    accuracy_table,
    anova_table,
    coef_frame,
    contingency_table,
    fit_statistics_table,
    format_number,
    masking_indicator_table,
    pd_cutoff_table,
    probability_frame,
    probability_table,
    random_effects_table,
    regression_table,
)


class _Skip(Exception):
    """A building block is missing: the analysis is skipped with this note."""


@dataclass(frozen=True)
class ReportResult:
    """What :func:`build_report` wrote."""

    pdf: Path
    pages: int
    tables: tuple[Path, ...]
    figures: tuple[Path, ...]
    sections: tuple[str, ...]
    skipped: tuple[str, ...]
    headline: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"pdf": str(self.pdf), "pages": self.pages, "tables": [str(p) for p in self.tables],
                "figures": [str(p) for p in self.figures], "sections": list(self.sections),
                "skipped": list(self.skipped), "headline": dict(self.headline)}

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame({"section": list(self.sections)})

    def summary(self) -> str:
        lines = [(f"wrote {self.pdf} ({self.pages} pages, {len(self.tables)} table files, "
                  f"{len(self.figures)} figures)")]
        lines += [f"skipped: {s}" for s in self.skipped]
        return "\n".join(lines)


# ----------------------------------------------------------------------------- build context


@dataclass
class _Section:
    title: str
    ops: list[tuple[str, tuple, dict]] = field(default_factory=list)

    def add(self, op: str, *args: Any, **kw: Any) -> None:
        self.ops.append((op, args, kw))


class _Context:
    def __init__(self, spec: ReportSpec, out: Path) -> None:
        self.spec = spec
        self.out = out
        self.tables_dir = out.parent / f"{out.stem}_tables"
        self.figures_dir = out.parent / f"{out.stem}_figures"
        self.methods: list[tuple[str, list[str]]] = []
        self.sections: list[_Section] = []
        self.table_paths: list[Path] = []
        self.figure_paths: list[Path] = []
        self.skipped: list[str] = []
        self.glmms: dict[str, tuple[Any, pd.DataFrame, AnalysisSpec]] = {}
        self.headline: dict[str, Any] = {}
        self.tests_used: dict[str, str] = {}
        self.log: pd.DataFrame = pd.DataFrame()
        self.data: pd.DataFrame = pd.DataFrame()

    def table(self, sec: _Section, t: Table) -> None:
        self.table_paths += t.write(self.tables_dir / _slug(t.label))
        sec.add("table", t)

    def figure(self, sec: _Section, fig: Any, name: str, caption: str, width_in: float | None = None) -> None:
        self.figure_paths += F.save_figure(fig, self.figures_dir / f"{_slug(name)}.pdf")
        sec.add("figure", fig, caption, width_in=width_in)


def _slug(s: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9_.-]+", "_", s).strip("_") or "x"


def _versions() -> str:
    import importlib.metadata as md

    parts = [f"Python {platform.python_version()}"]
    for pkg in ("mrcstats", "numpy", "pandas", "scipy", "statsmodels", "matplotlib", "reportlab", "pdfrw"):
        try:
            parts.append(f"{pkg} {md.version(pkg)}")
        except md.PackageNotFoundError:
            pass
    return ", ".join(parts)


# ----------------------------------------------------------------------------- entry point


def build_report(spec: str | Path | Mapping[str, Any] | ReportSpec, out: str | Path) -> ReportResult:
    """Run the analyses of ``spec`` and write the PDF report to ``out`` (tables and figures beside it).

    ``spec``: a YAML file, a mapping of the same shape, or a :class:`ReportSpec`
    (format in :mod:`mrcstats.report.spec` and the README). Deterministic: the
    same spec and logs give a byte-identical PDF.
    """
    rs = spec if isinstance(spec, ReportSpec) else load_spec(spec)
    out = Path(out)
    if out.suffix.lower() != ".pdf":
        raise InputError(f"--out {out}: the report is a PDF; give a path ending in .pdf")
    ctx = _Context(rs, out)
    ctx.log = _read_logs(rs)
    _clear_outputs(ctx)
    ctx.data = _join_features(ctx.log, rs)
    data_section = _data_summary(ctx)
    for a in rs.analyses:
        runner = _RUNNERS[a.type]
        try:
            runner(ctx, a)
        except _Skip as exc:
            note = f"{a.where} ({a.type}): {exc}"
            ctx.skipped.append(note)
            sec = _Section(_SKIP_TITLES.get(a.type, a.type))
            sec.add("note", f"Skipped: {exc}")
            ctx.sections.append(sec)
        except MrcstatsError as exc:
            raise type(exc)(f"{rs.source}: {a.where} ({a.type}): {exc}") from None

    doc = ReportDocument(rs.title, rs.subtitle, rs.author)
    _emit(doc, data_section)
    doc.heading("Methods")
    src = Path(rs.source).name if rs.source != "<spec>" else "given in Python (build_report with a mapping)"
    doc.paragraph(f"Software: {_versions()}. Report seed: {rs.seed}. Spec: {src}.")
    for title, lines in ctx.methods:
        doc.heading(title, 2)
        for ln in lines:
            doc.paragraph(ln)
    if ctx.tests_used:
        doc.heading("Statistical tests", 2)
        for text in ctx.tests_used.values():
            doc.paragraph(text)
    for sec in ctx.sections:
        _emit(doc, sec)
    if ctx.skipped:
        doc.heading("Skipped analyses", 2)
        doc.bullets(ctx.skipped)
    doc.build(out)
    return ReportResult(pdf=out, pages=doc.pages, tables=tuple(ctx.table_paths), figures=tuple(ctx.figure_paths),
                        sections=("Data", "Methods", *(s.title for s in ctx.sections)),
                        skipped=tuple(ctx.skipped), headline=ctx.headline)


_SKIP_TITLES = {"glmm": "Fixed effects and random effects", "contingency": "Fisher and chi-square tests",
                "confusion": "Confusion matrix", "error_types": "Error types", "probability": "Probabilities",
                "wh_extremes": "Fisher: wh-words of the easiest and hardest clusters",
                "discrimination": "Discrimination", "masking": "Masking", "accuracy": "Accuracy",
                "summary": "Accuracy"}


def _clear_outputs(ctx: _Context) -> None:
    """Remove the table and figure files of an earlier build of the same report (only the file types this
    module writes, only in ``NAME_tables/`` and ``NAME_figures/``), so the folders hold exactly this build."""
    for folder, exts in ((ctx.tables_dir, {".tex", ".md", ".csv", ".html"}), (ctx.figures_dir, {".pdf", ".svg"})):
        if folder.is_dir():
            for f in folder.iterdir():
                if f.is_file() and f.suffix in exts:
                    f.unlink()


def _emit(doc: ReportDocument, sec: _Section) -> None:
    doc.heading(sec.title)
    for op, args, kw in sec.ops:
        if op == "table":
            doc.table(*args, **kw)
        elif op == "figure":
            doc.figure(*args, **kw)
        elif op == "para":
            doc.paragraph(*args, **kw)
        elif op == "note":
            doc.note(*args, **kw)
        elif op == "code":
            doc.code(*args, **kw)
        elif op == "h2":
            doc.heading(args[0], 2)


# ----------------------------------------------------------------------------- data


def _read_logs(rs: ReportSpec) -> pd.DataFrame:
    try:
        from mrcstats.io import read_log
    except ImportError as exc:  # pragma: no cover - io is part of the package
        raise InputError(f"cannot read logs: {exc}") from None
    frames = []
    skipped: dict[str, int] = {}
    for ls in rs.logs:
        df = read_log(str(ls.path), format=ls.format, model=ls.model)
        for k, v in (df.attrs.get("skipped") or {}).items():
            skipped[k] = skipped.get(k, 0) + int(v)
        frames.append(df)
    log = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True, sort=False)
    if len(frames) > 1:
        from mrcstats.io import validate_log

        log = validate_log(log)
    log.attrs["skipped"] = skipped
    return log


def _join_features(log: pd.DataFrame, rs: ReportSpec) -> pd.DataFrame:
    if rs.features is None:
        return log
    p = rs.features
    feats = pd.read_parquet(p) if p.suffix == ".parquet" else pd.read_csv(p)
    if "item" not in feats.columns:
        raise InputError(f"{p}: the features table has no `item` column to join on (columns: {list(feats.columns)})")
    extra = [c for c in feats.columns if c == "item" or c not in log.columns]
    feats = feats[extra].drop_duplicates("item")
    out = log.merge(feats, on="item", how="left", validate="many_to_one")
    missing = int(out[extra[1]].isna().sum()) if len(extra) > 1 else 0
    if missing:
        out.attrs["feature_missing"] = missing
    return out


def _data_summary(ctx: _Context) -> _Section:
    from mrcstats.io.schema import log_stats

    st = log_stats(ctx.log)
    sec = _Section("Data")
    sources = ", ".join(str(s.path.name) for s in ctx.spec.logs)
    sec.add("para", f"Logs: {sources}. {st['rows']:,} responses from {len(st['models'])} model(s) "
                    f"({', '.join(st['models'])}) on {st['items']:,} items in {st['clusters']:,} clusters; "
                    f"conditions: {', '.join(c or '(none)' for c in st['conditions'])}; trials: "
                    f"{ctx.log['trial'].nunique()}.")
    inv = sum(st["invalid"].values())
    sec.add("para", f"Invalid or missing answers (kept, counted as not correct in accuracy): {inv:,}. "
                    + (f"Rows skipped while reading: {st['skipped']}." if st["skipped"] else
                       "No rows were skipped while reading."))
    if ctx.spec.features is not None:
        miss = ctx.data.attrs.get("feature_missing", 0)
        sec.add("para", f"Item features joined on `item` from {ctx.spec.features.name}"
                        + (f"; {miss:,} rows have no features." if miss else "."))
    for n in ctx.spec.notes:
        sec.add("para", n)
    return sec


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


def _filter_note(filt: Mapping[str, Any] | None) -> str:
    return ("; rows with " + ", ".join(f"{k} = {v}" for k, v in filt.items())) if filt else ""


def _idx(a: AnalysisSpec) -> str:
    """The analysis' position in the spec (``analyses[3]`` -> ``3``), to keep file names distinct."""
    return a.where.split("[")[-1].rstrip("]")


def _api(module: str, name: str) -> Callable[..., Any]:
    import importlib

    try:
        mod = importlib.import_module(module)
        return getattr(mod, name)
    except (ImportError, AttributeError):
        raise _Skip(f"{module}.{name} is not available in this installation") from None


# ----------------------------------------------------------------------------- analyses


def _run_summary(ctx: _Context, a: AnalysisSpec) -> None:
    summarize = _api("mrcstats.stats.accuracy", "summarize")
    res = summarize(apply_filter(ctx.data, a.get("filter")), by=a.get("by"))
    f = res.to_frame()
    by = list(a.get("by"))
    cols = [*by, "n", "accuracy", "ci_low", "ci_high", "se_cluster", "accuracy_valid", "invalid"]
    t = Table(f[[c for c in cols if c in f.columns]].rename(columns={
        "accuracy": "Accuracy", "ci_low": "95% CI low", "ci_high": "95% CI high", "se_cluster": "SE (cluster)",
        "accuracy_valid": "Acc. (valid)", "invalid": "Invalid"}),
        caption=f"{a.get('title')} by {', '.join(by) or 'all'}: accuracy over all responses (invalid = not "
                "correct), Wilson 95% interval, cluster-robust SE (clustered on `cluster`).",
        label=f"a{_idx(a)}_summary_{'_'.join(by)}", stub=len(by),
        formats={"Accuracy": "{:.4f}", "95% CI low": "{:.4f}", "95% CI high": "{:.4f}", "SE (cluster)": "{:.4f}",
                 "Acc. (valid)": "{:.4f}"})
    sec = _Section(f"{a.get('title')} by {', '.join(by)}" if by else a.get("title"))
    ctx.table(sec, t)
    ctx.sections.append(sec)
    ctx.methods.append((f"{a.get('title')} ({a.where})", [
        ("Accuracy = correct / all responses per group (invalid answers count as not correct); Wilson score "
        "interval as R's prop.test(k, n, correct = FALSE); cluster-robust SE (CR0) as Miller (2024), Eq. 4.")]))


def _model_frame(ctx: _Context, a: AnalysisSpec) -> pd.DataFrame:
    return apply_filter(ctx.data, a.get("filter"))


def _run_glmm(ctx: _Context, a: AnalysisSpec) -> None:
    glmer = _api("mrcstats.models", "glmer")
    name = a.get("name")
    data = _model_frame(ctx, a)
    try:
        res = glmer(a.get("formula"), data, contrasts=a.get("contrasts") or None, nagq=a.get("nagq"),
                    engine=a.get("engine"), levels=a.get("levels") or None, lme4_defaults=a.get("lme4_defaults"))
    except NotImplementedError as exc:
        raise _Skip(f"the {a.get('engine')} GLMM engine is not available: {exc}") from None
    except (ImportError, DependencyError) as exc:
        raise _Skip(f"the {a.get('engine')} GLMM engine needs a missing piece: {exc}") from None
    ctx.glmms[name] = (res, data, a)
    labels = dict(a.get("labels") or {})
    truth = a.get("truth")

    # ---- methods
    contr = dict(getattr(res, "contrasts", {}) or {})
    nagq = int(getattr(res, "nagq", a.get("nagq")))
    approx = ("nAGQ = 0 (β estimated inside the penalized IRLS)" if nagq == 0 else
              "Laplace approximation (nAGQ = 1)" if nagq == 1 else f"adaptive Gauss-Hermite quadrature, nAGQ = {nagq}")
    lines = [f"Model: glmer({res.formula}, family = binomial(logit)), fitted by maximum likelihood with the "
             f"{approx}; engine: {res.engine}" + (" with lme4's default tolerances" if a.get("lme4_defaults") else "")
             + ".",
             "Contrasts: " + (", ".join(f"{k} = contr.{str(v).removeprefix('contr.')}" for k, v in contr.items()) if contr else
                              "none (no factors) or R's default contr.treatment") + ". Standard errors from the "
             "Hessian of the deviance in (θ, β), as lme4's default vcov(); Wald z tests.",
             f"Data: {len(data):,} log rows{_filter_note(a.get('filter'))}. Observations used: {res.nobs:,}; groups: " + ", ".join(f"{g} {n:,}" for g, n in dict(res.ngroups).items())
             + f"; converged: {'yes' if res.converged else 'no'}; singular fit: {'yes' if res.singular else 'no'}."]
    opt = dict(getattr(res, "optinfo", {}) or {})
    if opt.get("optimizer"):
        lines.append(f"Optimizer: {opt['optimizer']}" + (f", {opt['nit']} iterations" if "nit" in opt else "")
                     + (f", {opt['nfev']} deviance evaluations" if "nfev" in opt else "") + ".")
    for m in getattr(res, "messages", ()) or ():
        lines.append(f"Fit message: {m}")
    if a.get("drop1"):
        lines.append("drop1: likelihood-ratio χ² tests dropping each term that respects marginality, as R's "
                     "drop1(m, test = \"Chisq\").")
    if a.get("gvif"):
        lines.append("GVIF: generalized variance inflation factors as car::vif for merMod "
                     "(GVIF, Df, GVIF^(1/(2·Df))).")
    if truth:
        lines.append("The data were simulated with known fixed effects; the tables show the truth beside the "
                     "estimates.")
    ctx.methods.append((f"GLMM '{name}' ({a.where})", lines))

    # ---- fixed effects
    sec = _Section(f"Fixed effects: {name}")
    sec.add("code", _short_summary(res))
    ctx.table(sec, regression_table(res, caption=f"Fixed effects of the {name} GLMM ({res.formula}); "
                                    "lme4 layout" + ("; Truth = simulated value" if truth else "") + ".",
                                    label=f"fixef_{name}", layout=a.get("layout"), truth=truth))
    compact = regression_table(res, caption=f"Fixed effects of the {name} GLMM, compact layout.",
                               label=f"fixef_{name}_compact", layout="compact", truth=truth)
    ctx.table_paths += compact.write(ctx.tables_dir / _slug(compact.label))
    ctx.table(sec, fit_statistics_table(res, caption=f"Fit statistics of the {name} GLMM.", label=f"fit_{name}"))
    if truth:
        cf = coef_frame(res)
        tv = np.array([truth.get(t, np.nan) for t in cf["term"]], dtype=float)
        ok = np.isfinite(tv)
        cover = float(np.mean(np.abs(cf["estimate"].to_numpy()[ok] - tv[ok]) <= 1.959963984540054 *
                              cf["se"].to_numpy()[ok])) if ok.any() else float("nan")
        maxerr = float(np.max(np.abs(cf["estimate"].to_numpy()[ok] - tv[ok]))) if ok.any() else float("nan")
        ctx.headline.setdefault("glmm", {})[name] = {
            "estimate": dict(zip(cf["term"], cf["estimate"])), "se": dict(zip(cf["term"], cf["se"])),
            "truth": {t: truth[t] for t in cf["term"] if t in truth}, "max_abs_error": maxerr,
            "coverage_95": cover}
        sec.add("para", f"Recovery: the largest |estimate − truth| is {maxerr:.3f}; {cover:.0%} of the true "
                        "fixed effects lie inside estimate ± 1.96 SE.")
        ctx.figure(sec, F.fixef_truth_plot(cf, truth), f"fixef_truth_{name}",
                   f"Recovered fixed effects (±1.96 SE) of the {name} GLMM against the simulated truth (×).")
    if a.get("drop1"):
        drop1 = _api("mrcstats.models", "drop1")
        d1 = drop1(res)
        ctx.table(sec, anova_table(_frame_of(d1), caption=f"drop1 likelihood-ratio tests, {name} GLMM.",
                                   label=f"drop1_{name}"))
    if a.get("gvif"):
        gvif = _api("mrcstats.models", "gvif")
        gv = gvif(res)
        ctx.table(sec, anova_table(_frame_of(gv), caption=f"Generalized variance inflation factors, {name} GLMM.",
                                   label=f"gvif_{name}"))
    st = a.get("sigma_table")
    for j, s in enumerate([st] if isinstance(st, dict) else (st or [])):
        _sigma_section(ctx, sec, res, data, s, name, labels, a.get("loess"))
    ctx.sections.append(sec)

    # ---- random effects
    rsec = _Section(f"Random effects: {name}")
    tsd = a.get("truth_sd")
    ctx.table(rsec, random_effects_table(res, caption=f"Random-effect variance components of the {name} GLMM"
                                         + (" with the simulated SD." if tsd else "."), label=f"ranef_{name}",
                                         truth=tsd))
    opt = a.get("ranef")
    if opt:
        n = opt.get("n", 100) if isinstance(opt, dict) else 100
        for g, frame in dict(res.ranef).items():
            r = frame.reset_index(names="level") if "level" not in frame.columns else frame
            ctx.figure(rsec, F.caterpillar_plot(r, n=n, seed=ctx.spec.seed), f"ranef_{name}_{g}",
                       f"Conditional modes of the {g} random intercepts of the {name} GLMM with 95% intervals "
                       f"from the conditional variances (±1.96·√condVar); {min(n, len(r))} of {len(r):,} levels "
                       f"sampled with seed {ctx.spec.seed}, sorted.")
            modes = r.sort_values("mode")
            rsec.add("para", f"{g}: hardest level {modes['level'].iloc[0]} (mode {modes['mode'].iloc[0]:.3f}), "
                             f"easiest {modes['level'].iloc[-1]} (mode {modes['mode'].iloc[-1]:.3f}); SD of the "
                             f"modes {modes['mode'].std():.3f}.")
    ctx.sections.append(rsec)


def _frame_of(obj: Any) -> pd.DataFrame:
    if isinstance(obj, pd.DataFrame):
        return obj
    if hasattr(obj, "to_frame"):
        return obj.to_frame()
    return pd.DataFrame(obj)


def _short_summary(res: Any) -> str:
    """The header block of lme4's summary (no fit times, so the PDF stays deterministic)."""
    text = res.summary() if hasattr(res, "summary") else str(res)
    keep = []
    for ln in text.splitlines():
        if ln.startswith("Fixed effects:"):
            break
        keep.append(ln)
    return "\n".join(keep).rstrip()


def _sigma_section(ctx: _Context, sec: _Section, res: Any, data: pd.DataFrame, s: Mapping[str, Any], name: str,
                   labels: Mapping[str, str], loess: Any) -> None:
    feature, factor = s["feature"], s["factor"]
    levels = list(dict(getattr(res, "xlevels", {}) or {}).get(factor, ()))
    if not levels:
        levels = sorted(pd.unique(data[factor].dropna().astype(str)))
    coding = dict(getattr(res, "contrasts", {}) or {}).get(factor, "treatment")
    sigmas = s.get("sigmas", [-2, 0, 2, 4])
    raw = s.get("raw")
    rm = rsd = None
    if raw:
        if raw not in data.columns:
            raise InputError(f"sigma_table.raw: no column {raw!r} in the data")
        items = data.drop_duplicates("item")[raw].astype(float)
        rm, rsd = float(items.mean()), float(items.std(ddof=1))
    label = s.get("label") or feature
    t = probability_table(dict(res.fixef), feature, factor, levels, coding=coding, sigmas=sigmas, raw_mean=rm,
                          raw_sd=rsd, feature_label=label, labels=labels,
                          caption=f"Predicted probability of a correct answer per {factor} at {label} "
                                  f"{', '.join(format_number(float(x), 0) for x in sigmas)} SD from the mean"
                                  + (f" (raw {raw} in brackets)" if raw else "") + f" ({name} GLMM, seed 003 "
                                  "Tables 1-2 layout).", label=f"sigma_{name}_{feature}")
    ctx.table(sec, t)
    if loess:
        x = pd.to_numeric(data[feature], errors="coerce")
        grid = np.linspace(float(np.nanmin(x)), float(np.nanmax(x)), 60)
        pf = probability_frame(dict(res.fixef), feature, factor, levels, coding, sigmas=grid)
        curves = pf[pf[factor] != "Grand Mean"].melt(id_vars=factor, var_name=feature, value_name="p")
        frac = loess.get("frac", 0.6) if isinstance(loess, dict) else 0.6
        fig = F.loess_plot(data, feature, by=factor, glmm=curves, frac=frac, order=levels, labels=labels,
                           xlabel=f"{label} (SD from the mean)")
        ctx.figure(sec, fig, f"loess_{name}_{feature}",
                   f"LOESS (statsmodels lowess, frac = {frac}, no robustness iterations) of P(correct) against {label} per {factor}, with "
                   f"the {name} GLMM's population-level curve (thin dashed) overlaid (seed 003 Fig. 1).")


def _filtered(data: pd.DataFrame, unit: str, filt: Mapping[str, Any]) -> pd.DataFrame:
    d = apply_filter(data, filt)
    return d.drop_duplicates("item") if unit == "item" else d


def _fisher_kw(ctx: _Context, simulate: bool, B: int) -> dict[str, Any]:
    return {"simulate": simulate, "B": B, "seed": ctx.spec.seed}


def _table_test(fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
    """Run a stats table builder; if the exact r×c Fisher network outgrows memory, use its Monte Carlo p."""
    try:
        return fn(*args, **kw)
    except MemoryError:
        kw["simulate"] = True
        return fn(*args, **kw)


def _test_name(res: Any) -> str:
    t = getattr(res, "test", res)
    if type(t).__name__.startswith("Fisher"):
        mc = getattr(t, "method", "") == "monte-carlo"
        return "Fisher's exact test" + (f" (Monte Carlo p, B = {t.B}, seed {t.seed})" if mc else " (exact)")
    return "Pearson's chi-square test" + (" with Yates' correction" if getattr(t, "correct", False) else "")


def _run_contingency(ctx: _Context, a: AnalysisSpec) -> None:
    crosstab = _api("mrcstats.stats.tables", "crosstab")
    d = _filtered(ctx.data, a.get("unit"), a.get("filter"))
    results = [_table_test(crosstab, d, a.get("rows"), a.get("cols"), test=t, **_fisher_kw(ctx, a.get("simulate"),
                                                                                          a.get("B")))
               for t in a.get("tests")]
    tests = [(_test_name(r), r.test) for r in results]
    counts = results[0].table
    title = a.get("title") or f"{a.get('rows')} × {a.get('cols')}"
    kind = "Fisher" if "fisher" in a.get("tests") else "Chi-square"
    sec = _Section(f"{kind}: {title}")
    t = contingency_table(counts, tests, caption=f"Counts of {a.get('rows')} by {a.get('cols')} "
                          f"({'one row per item' if a.get('unit') == 'item' else 'all log rows'}).",
                          label=f"a{_idx(a)}_contingency_{a.get('rows')}_{a.get('cols')}")
    ctx.table(sec, t)
    for why, k in dict(results[0].skipped).items():
        sec.add("note", f"Left out {k} row(s): {why}.")
    for r in results:
        if getattr(r.test, "warning", None):
            sec.add("note", f"{_test_name(r)}: {r.test.warning}.")
    ctx.sections.append(sec)
    ctx.headline.setdefault("tests", {})[title] = {n: _p(r) for n, r in tests}
    ctx.methods.append((f"Contingency table {title} ({a.where})",
                        [f"Counts of {a.get('rows')} by {a.get('cols')}{_filter_note(a.get('filter'))}."]
                        + [_test_method(n, ctx) for n, _ in tests]))


def _p(res: Any) -> Any:
    d = res.to_dict() if hasattr(res, "to_dict") else dict(res)
    return d.get("p")


_TEST_TEXT = {
    "fisher": ("Fisher's exact test as R's fisher.test: for 2×2 tables the exact p, the conditional maximum-likelihood "
               "odds ratio and its 95% interval; for r×c tables the exact p (network algorithm) or, where stated, a "
               "Monte Carlo p from B Patefield random tables, (1 + #{sim ≤ obs}) / (B + 1), seeded."),
    "chisq": ("Pearson's chi-square test of independence as R's chisq.test (Yates' continuity correction for 2×2 "
              "tables only); a note flags expected counts below 5."),
}


def _test_method(name: str, ctx: _Context | None = None) -> str:
    key = "fisher" if name.startswith("Fisher") else "chisq"
    if ctx is not None:
        ctx.tests_used[key] = _TEST_TEXT[key]
    return f"Test: {name}."


def _wh_table(ctx: _Context, sec: _Section, data: pd.DataFrame, groups: Any, col: str, simulate: bool, B: int,
              label: str, caption: str, key: str) -> None:
    wh_word_table = _api("mrcstats.stats.tables", "wh_word_table")
    feats = data.drop_duplicates("item")[["item", col]]
    tt = _table_test(wh_word_table, data, feats, groups, wh_col=col, test="fisher",
                     **_fisher_kw(ctx, simulate, B))
    counts = tt.table.copy()
    counts.index.name = ""
    name = _test_name(tt)
    ctx.table(sec, contingency_table(counts, [(name, tt.test)], ratio_rows=True, label=label, caption=caption))
    for why, k in dict(tt.skipped).items():
        sec.add("note", f"Left out {k} item(s): {why}.")
    ctx.headline.setdefault("tests", {})[key] = {name: tt.test.p}
    return name


def _run_confusion(ctx: _Context, a: AnalysisSpec) -> None:
    confusion_table = _api("mrcstats.stats.tables", "confusion_table")
    d = apply_filter(ctx.data, a.get("filter"))
    results = [_table_test(confusion_table, d, a.get("gold"), a.get("pred"), model=a.get("model"),
                           labels=a.get("labels"), test=t, **_fisher_kw(ctx, a.get("simulate"), a.get("B")))
               for t in a.get("tests")]
    tests = [(_test_name(r), r.test) for r in results]
    counts = results[0].table
    title = a.get("title") or f"{a.get('gold')} × {a.get('pred')}"
    sec = _Section(f"Confusion matrix: {title}")
    ctx.figure(sec, F.confusion_matrix_plot(counts, xlabel=f"predicted ({a.get('pred')})",
                                            ylabel=f"gold ({a.get('gold')})"), f"a{_idx(a)}_confusion",
               f"Confusion matrix, {title}: rows = gold, columns = predicted, counts in the cells.")
    ctx.table(sec, contingency_table(counts, tests, caption=f"Confusion matrix, {title} (rows gold, columns "
                                     "predicted).", label=f"a{_idx(a)}_confusion"))
    for why, k in dict(results[0].skipped).items():
        sec.add("note", f"Left out {k} row(s): {why}.")
    ctx.sections.append(sec)
    ctx.headline.setdefault("tests", {})[title] = {n: _p(r) for n, r in tests}
    ctx.methods.append((f"Confusion matrix {title} ({a.where})",
                        [f"Counts of gold {a.get('gold')} by predicted {a.get('pred')}{_filter_note(a.get('filter'))}."]
                        + [_test_method(n, ctx) for n, _ in tests]))


def _run_error_types(ctx: _Context, a: AnalysisSpec) -> None:
    crosstab = _api("mrcstats.stats.tables", "crosstab")
    d = apply_filter(ctx.data, a.get("filter"))
    rows, cols = a.get("rows"), a.get("cols")
    results = [_table_test(crosstab, d, rows, cols, test=t, **_fisher_kw(ctx, a.get("simulate"), a.get("B")))
               for t in a.get("tests")]
    counts = results[0].table
    order = dict(a.get("order") or {})
    if rows in order:
        counts = counts.reindex([str(v) for v in order[rows]] + [r for r in counts.index
                                                                 if r not in set(map(str, order[rows]))],
                                fill_value=0)
    if cols in order:
        counts = counts.reindex(columns=[str(v) for v in order[cols]] + [c for c in counts.columns
                                                                         if c not in set(map(str, order[cols]))],
                                fill_value=0)
    tests = [(_test_name(r), r.test) for r in results]
    title = a.get("title") or f"{rows} by {cols}"
    sec = _Section(f"Error types: {title}")
    ctx.figure(sec, F.error_type_bars(counts), f"a{_idx(a)}_error_types",
               f"{title}: counts of each {rows} per {cols} (seed 004 Fig. 2 layout).")
    ctx.table(sec, contingency_table(counts, tests, caption=f"{title}: counts of {rows} by {cols}.",
                                     label=f"a{_idx(a)}_error_types"))
    ctx.sections.append(sec)
    ctx.headline.setdefault("error_types", {})[title] = counts.to_dict()
    ctx.methods.append((f"Error types {title} ({a.where})",
                        [f"Counts of {rows} by {cols}{_filter_note(a.get('filter'))}."]
                        + [_test_method(n, ctx) for n, _ in tests]))


def _run_probability(ctx: _Context, a: AnalysisSpec) -> None:
    rm, rsd = a.get("raw_mean"), a.get("raw_sd")
    raw = a.get("raw")
    if raw:
        if raw not in ctx.data.columns:
            raise InputError(f"raw: no column {raw!r} in the data")
        vals = ctx.data.drop_duplicates("item")[raw].astype(float)
        rm, rsd = float(vals.mean()), float(vals.std(ddof=1))
    label = a.get("label") or a.get("feature")
    title = a.get("title") or f"Predicted probabilities at {label} from given fixed effects"
    t = probability_table(a.get("fixef"), a.get("feature"), a.get("factor"), [str(v) for v in a.get("levels")],
                          coding=a.get("coding"), sigmas=a.get("sigmas"), raw_mean=rm, raw_sd=rsd,
                          feature_label=label, labels=a.get("labels"),
                          caption=f"{title}: P(correct) per {a.get('factor')} at "
                                  f"{', '.join(format_number(float(x), 0) for x in a.get('sigmas'))} SD of {label}"
                                  + (f" (raw {raw} in brackets)" if raw else "") + ".",
                          label=f"a{_idx(a)}_probability")
    sec = _Section(title)
    ctx.table(sec, t)
    ctx.sections.append(sec)
    ctx.headline.setdefault("probability", {})[title] = t.to_frame().to_dict(orient="records")
    ctx.methods.append((f"{title} ({a.where})", [
        (f"P(correct) = logistic(β0 + Σ_j C[m, j] β_j + k·(β_x + Σ_j C[m, j] β_x:j)) from the given fixed effects "
        f"with contr.{a.get('coding')} contrasts for {a.get('factor')} (levels {', '.join(map(str, a.get('levels')))});"
        " Grand Mean = logistic of the mean log-odds over levels.")]))


def _run_wh_extremes(ctx: _Context, a: AnalysisSpec) -> None:
    res, data, _ga = ctx.glmms.get(a.get("glmm"), (None, None, None))
    if res is None:
        raise _Skip(f"the GLMM {a.get('glmm')!r} was not fitted")
    cluster_difficulty = _api("mrcstats.stats.discrimination", "cluster_difficulty")
    col, n = a.get("column"), a.get("n")
    if col not in data.columns:
        raise InputError(f"no column {col!r} in the data for the wh-word table (join item features with `features:`)")
    group = next(iter(dict(res.ranef)))
    k = min(n, len(dict(res.ranef)[group]) // 2)
    cd = cluster_difficulty(res, n=k)
    sec = _Section(f"Fisher: {col} of the easiest and hardest clusters")
    e, h = cd.easiest.iloc[0], cd.hardest.iloc[0]
    sec.add("para", f"Easiest {group}: {e['level']} (implied P(correct) {e['probability']:.2f} for the mean model); "
                    f"hardest: {h['level']} ({h['probability']:.2f}).")
    if group != "cluster":
        data = data.assign(cluster=data[group])
    name = _wh_table(ctx, sec, data, cd, col, a.get("simulate"), a.get("B"), f"wh_extremes_{a.get('glmm')}",
                     f"{col} of the items in the {k} easiest and {k} hardest {group} clusters (conditional modes "
                     f"of the {a.get('glmm')} GLMM; seed 003 Table 3); last row: ratio of column shares.",
                     f"{col} easiest/hardest")
    ctx.headline["easiest_hardest"] = {"easiest": str(e["level"]), "p_easiest": float(e["probability"]),
                                       "hardest": str(h["level"]), "p_hardest": float(h["probability"])}
    ctx.sections.append(sec)
    ctx.methods.append((f"Easiest/hardest clusters ({a.where})", [
        (f"The {k} {group} levels with the highest and lowest conditional modes of the {a.get('glmm')} GLMM "
         "(implied probability plogis(intercept + mode)); each item's wh-word counted once."),
        _test_method(name, ctx)]))


def _run_discrimination(ctx: _Context, a: AnalysisSpec) -> None:
    discrimination = _api("mrcstats.stats.discrimination", "discrimination")
    ddata = apply_filter(ctx.data, a.get("filter"))
    res = discrimination(ddata, cluster=a.get("cluster"), model=a.get("model"), epsilon=float(a.get("epsilon")))
    pdv = res.pd.astype(float)
    cut = res.cutoffs(a.get("cutoffs"), bootstrap=a.get("bootstrap"), seed=ctx.spec.seed)
    sec = _Section("Discrimination: P_d")
    ctx.figure(sec, F.pd_histogram(pdv, bins=a.get("bins"), cutoffs=[c for c in a.get("cutoffs") if c > 0]),
               "pd_histogram", f"Distribution of the discriminatory power P_d over {len(pdv):,} clusters "
               "(seed 003 Fig. 4); dotted lines: cutoffs.")
    ctx.table(sec, pd_cutoff_table(cut, caption="Accuracy of each model on the clusters with P_d above each "
                                   "cutoff, grand mean, counts and Kendall's τ against the full ranking "
                                   "(seed 003 Table 5)" + (f"; 95% percentile intervals from {a.get('bootstrap')} "
                                   "cluster-bootstrap resamples" if a.get("bootstrap") else "") + ".",
                                   label="pd_cutoffs"))
    ctx.headline["pd"] = {"clusters": len(pdv), "mean": float(pdv.mean()) if len(pdv) else None,
                          "max": float(pdv.max()) if len(pdv) else None,
                          "cutoffs": [dict(r) for r in cut.to_dict()["cutoffs"]]}
    for why, k in dict(res.skipped).items():
        sec.add("note", f"{k} cluster(s) without P_d: {why}.")
    wh = a.get("wh_column")
    if wh and wh in ddata.columns and len(pdv) >= 4:
        k = min(a.get("n"), len(pdv) // 2)
        s = pdv.sort_values(kind="mergesort")
        groups = {"Highest P_d": list(s.index[-k:][::-1]), "Lowest P_d": list(s.index[:k])}
        data = ddata if a.get("cluster") == "cluster" else ddata.assign(cluster=ddata[a.get("cluster")])
        _wh_table(ctx, sec, data, groups, wh, True, 2000, "wh_pd",
                  f"{wh} of the items in the {k} most and {k} least discriminative clusters (seed 003 Table 3, "
                  "lower half); last row: ratio of column shares.", f"{wh} high/low P_d")
    ctx.sections.append(sec)
    ctx.methods.append((f"Discrimination ({a.where})", [
        (f"P_d per {a.get('cluster')} (seed 003 eq. 4-7): p_k = accuracy of model k on the cluster (invalid = not "
        f"correct), clipped to [ε, 1 − ε] with ε = {float(a.get('epsilon')):g}; symmetrised Bernoulli KL divergence "
        "(natural log) averaged over model pairs."),
        "Cutoff table: clusters with P_d > cutoff, their items, each model's accuracy and the grand mean "
        f"(cutoffs {', '.join(format_number(c, 0) for c in a.get('cutoffs'))})"
        + (f"; cluster-bootstrap intervals with B = {a.get('bootstrap')}." if a.get("bootstrap") else ".")]))


def _run_masking(ctx: _Context, a: AnalysisSpec) -> None:
    masking_indicators = _api("mrcstats.stats.masking", "masking_indicators")
    log = apply_filter(ctx.data, a.get("filter"))
    if "masking_rate" not in log.columns or log["masking_rate"].isna().all():
        raise InputError("the log has no masking rates (column masking_rate); a masking analysis needs them")
    if a.get("models"):
        log = log[log["model"].astype(str).isin(a.get("models"))]
    base = None
    if a.get("baseline"):
        from mrcstats.io import read_log

        base = read_log(a.get("baseline"))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = masking_indicators(log, baseline=base, acc0=a.get("acc0"))
    acc = res.accuracy.to_frame()
    sec = _Section("Masking: accuracy against masking rate")
    models = sorted(acc["model"].unique())
    for start in range(0, len(models), 3):
        chunk = models[start:start + 3]
        fig, axes = F.new_figure("page", 0.36, 1, len(chunk), sharey=True, squeeze=False)
        for ax, m in zip(axes[0], chunk):
            F.masking_curves(acc[acc["model"] == m], ax=ax, title=str(m))
        ntr = int(acc[acc["model"].isin(chunk)]["n_trials"].max())
        ctx.figure(sec, fig, f"masking_curves_{start // 3 + 1}",
                   f"Accuracy of {', '.join(chunk)} against the masking rate per masking condition: mean over "
                   f"{ntr} trial(s); band = {res.accuracy.level:.0%} t interval over trials (seed 000 Figs. 2-6).")
    av = res.averages[res.averages["kind"] == "weighted"]
    ctx.table(sec, masking_indicator_table(av, caption="MR-weighted average accuracy per masking condition and "
                                           "the NA, EA and KI indicators of regular masking (seed 000 Table 3)"
                                           + ("" if res.has_baseline else "; EA and KI need a baseline log "
                                              "(UQA in the seed) and are empty here") + ".",
                                           label="masking_indicators"))
    tab = res.to_frame()
    cond = "regular" if "regular" in set(tab["condition"]) else tab["condition"].iloc[0]
    ind = tab[tab["condition"] == cond]
    cols = [c for c in ("na", "ea", "ki") if c in ind.columns and ind[c].notna().any()]
    if cols:
        ctx.figure(sec, F.indicator_plot(ind, group="model", indicators=cols), "masking_indicators",
                   f"{', '.join(c.upper() for c in cols)} against the masking rate ({cond} masking; seed 000 Fig. 7).")
    for n in res.notes:
        sec.add("note", n)
    ctx.sections.append(sec)
    ctx.headline["masking"] = {f"{r.model}/{r.condition}": {"acc": r.acc, "na": r.na, "ea": r.ea, "ki": r.ki}
                               for r in av.itertuples(index=False)}
    ctx.methods.append((f"Masking ({a.where})", [
        ("Acc(MR) = mean over trials of the per-trial accuracy over all items (invalid = not correct); SD over "
        "trials; t interval."),
        "NA_r = Acc_r / Acc_0; EA_r = Acc_0·√(NA_r·NA^U_r); KI_r = (NA^U_r − NA_r)/(1 − NA_r) (undefined where "
        "NA_r ≥ 1); MR-weighted averages ⟨X⟩ = Σ MR·X / Σ MR (seed 000 §2.3, App. D)"
        + (f"; Acc_0 = {a.get('acc0')}" if a.get("acc0") is not None else "; Acc_0 = accuracy at MR = 0") + "."]))


def _run_accuracy(ctx: _Context, a: AnalysisSpec) -> None:
    summarize = _api("mrcstats.stats.accuracy", "summarize")
    rows = [a.get("rows")] if isinstance(a.get("rows"), str) else list(a.get("rows"))
    cols = a.get("cols")
    per = summarize(apply_filter(ctx.data, a.get("filter")), by=[*rows, cols, "trial"]).to_frame()
    agg = per.groupby([*rows, cols], sort=False).agg(accuracy=("accuracy", "mean"), sd=("accuracy", "std"),
                                                    trials=("accuracy", "size"), n=("n", "sum")).reset_index()
    order = dict(a.get("order") or {})
    keys = [c for c in [*rows, cols] if c in order]
    if keys:
        rank = {c: {str(v): i for i, v in enumerate(order[c])} for c in keys}
        agg = agg.sort_values(by=keys, key=lambda s: s.astype(str).map(rank[s.name]).fillna(len(rank[s.name])),
                              kind="mergesort").reset_index(drop=True)
    title = a.get("title") or f"Accuracy by {', '.join(rows)} and {cols}"
    one = bool((agg["trials"] <= 1).all())
    t = accuracy_table(agg, rows, cols, mean="accuracy", sd=None if one else "sd", percent=a.get("percent"),
                       caption=f"{title}: " + ("accuracy (percent), one trial per cell." if one else
                                               "mean ± SD over trials (percent)."),
                       label=f"a{_idx(a)}_accuracy_{'_'.join(rows)}_{cols}")
    sec = _Section(title)
    ctx.table(sec, t)
    ctx.sections.append(sec)
    ctx.methods.append((f"{title} ({a.where})", [
        ("Accuracy per cell = correct / all responses (invalid = not correct) per trial; mean and sample SD over "
        "trials (seed 004 tables).")]))


_RUNNERS: dict[str, Callable[[_Context, AnalysisSpec], None]] = {
    "summary": _run_summary, "glmm": _run_glmm, "contingency": _run_contingency, "confusion": _run_confusion,
    "wh_extremes": _run_wh_extremes, "error_types": _run_error_types, "probability": _run_probability,
    "discrimination": _run_discrimination, "masking": _run_masking, "accuracy": _run_accuracy,
}
