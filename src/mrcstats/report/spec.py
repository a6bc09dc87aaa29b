"""The report spec: which logs to read and which analyses to run (YAML or a dict).

Example (``mrcstats report demo.yaml --out reports/demo.pdf``)::

    title: RACE-like demo
    subtitle: three simulated models      # optional
    notes: [Data simulated with known truth.]  # optional paragraphs for the data summary
    seed: 1                               # Monte Carlo tests, sampled figure points
    logs:                                 # one or more, concatenated (paths relative to this file)
      - path: demo_log.parquet
        format: null                      # optional: read_log format override
        model: null                       # optional: model name for sources without one
    features: null                        # optional table joined on `item` (CSV/Parquet)
    analyses:
      - type: summary                     # accuracy per group (n, accuracy, (clustered) Wilson CI, ...)
        by: [model]
      - type: glmm
        name: token count
        formula: correct ~ scaled_tok * model + (1 | cluster)
        contrasts: {model: sum}
        nagq: 1
        engine: native
        drop1: true
        gvif: true
        sigma_table: {feature: scaled_tok, factor: model, raw: tokens, sigmas: [-2, 0, 2, 4]}
        loess: true                       # LOESS of P(correct) vs the feature, GLMM curve overlaid
        ranef: true                       # caterpillar plot (100 sampled levels)
        truth: {"(Intercept)": 1.3}       # optional: simulated truth shown beside the estimates
        filter: {masking_rate: 0}         # optional, any analysis: keep rows whose column has the value(s)
      - type: contingency                 # a cross-table of two log columns with its tests
        rows: wh_word
        cols: model
        unit: item                        # item: one row per item; rows: every log row
        tests: [fisher, chisq]
        simulate: true
        B: 2000
      - type: confusion                   # gold x predicted label, heat map and chi-square
        gold: gold
        pred: pred
      - type: error_types                 # counts of an error-type column per condition: grouped bars
        rows: error_type
        cols: condition
      - type: probability                 # probability-at-σ table from given (e.g. published) fixed effects
        fixef: {"(Intercept)": 1.31, x: 0.08, LLM1: -1.12, LLM2: -0.04, "x:LLM1": 0.01, "x:LLM2": 0.0}
        feature: x
        factor: LLM
        levels: [Davinci-002, Davinci-003, GPT-4]
        coding: sum
      - type: wh_extremes                 # wh-word x easiest/hardest clusters of a fitted GLMM
        glmm: token count
        n: 100
      - type: discrimination
        cutoffs: [0, 5, 10, 15]
      - type: masking
        baseline: null                    # optional baseline log (UQA in seed 000)
        acc0: null
      - type: accuracy                    # mean ± SD table over trials
        rows: condition
        cols: model
        order: {condition: [strict, regular, partial, lenient]}   # optional row/column order

:func:`load_spec` validates everything once and raises :class:`~mrcstats.errors.InputError`
naming the file and the key (``analyses[2].formula``) with what is expected.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mrcstats._files import resolve_path
from mrcstats._seeds import check_seed
from mrcstats.errors import InputError
from mrcstats.report.analyses.base import COMMON_KEYS, AnalysisSpec, NotReproduced
from mrcstats.report.analyses.registry import ANALYSES

__all__ = ["AnalysisSpec", "LogSpec", "ReportSpec", "load_spec"]

_TOP = {"title", "subtitle", "seed", "logs", "features", "analyses", "author", "notes", "not_reproduced", "methods",
        "multiplicity"}


@dataclass(frozen=True)
class LogSpec:
    path: Path
    format: str | None = None
    model: str | None = None


@dataclass(frozen=True)
class ReportSpec:
    """A validated report spec (see the module docstring for the YAML form)."""

    title: str
    logs: tuple[LogSpec, ...]
    analyses: tuple[AnalysisSpec, ...]
    subtitle: str = ""
    author: str = "mrcstats"
    seed: int = 1
    features: Path | None = None
    source: str = "<dict>"
    base_dir: Path = field(default_factory=Path.cwd)
    notes: tuple[str, ...] = ()
    not_reproduced: tuple[NotReproduced, ...] = ()
    methods: tuple[str, ...] = ()          # paragraphs on what was done before the report (features, software)
    multiplicity: str = "holm"             # p.adjust method for each family of tests

    def to_dict(self) -> dict[str, Any]:
        return {"title": self.title, "subtitle": self.subtitle, "seed": self.seed,
                "logs": [{"path": str(s.path), "format": s.format, "model": s.model} for s in self.logs],
                "features": str(self.features) if self.features else None,
                "analyses": [{"type": a.type, **dict(a.options)} for a in self.analyses]}


def _err(source: str, key: str, msg: str) -> InputError:
    return InputError(f"{source}: {key}: {msg}")


def _check_type(source: str, key: str, value: Any, types: tuple[type, ...]) -> Any:
    if value is None:
        return None
    if float in types and isinstance(value, int) and not isinstance(value, bool):
        return value
    if bool not in types and isinstance(value, bool):
        raise _err(source, key, f"expected {_names(types)}, got a boolean ({value!r})")
    if not isinstance(value, types):
        raise _err(source, key, f"expected {_names(types)}, got {type(value).__name__} ({value!r})")
    return value


def _names(types: tuple[type, ...]) -> str:
    m = {list: "a list", dict: "a mapping", str: "a string", int: "an integer", float: "a number",
         bool: "true/false"}
    return " or ".join(m.get(t, t.__name__) for t in types)


def load_spec(spec: str | Path | Mapping[str, Any]) -> ReportSpec:
    """Read and validate a spec from a YAML file path or a mapping.

    Paths inside a file are relative to the file's directory; in a mapping,
    relative to the current directory.
    """
    if isinstance(spec, Mapping):
        raw, source, base = dict(spec), "<spec>", Path.cwd()
    else:
        p = Path(spec)
        source = str(p)
        if not p.is_file():
            raise InputError(f"{p}: spec file not found")
        import yaml

        try:
            raw = yaml.safe_load(p.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
            raise InputError(f"{p}: not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None
        except UnicodeDecodeError:
            raise InputError(f"{p}: not UTF-8 text; save the spec as UTF-8") from None
        base = resolve_path(p).parent
        if raw is None:
            raise InputError(f"{p}: the spec is empty; it needs at least `logs:` and `analyses:`")
    if not isinstance(raw, Mapping):
        raise InputError(f"{source}: the spec must be a mapping with keys logs, analyses, ... "
                         f"(got {type(raw).__name__})")
    unknown = sorted(set(map(str, raw)) - _TOP)
    if unknown:
        raise _err(source, unknown[0], f"unknown key; known top-level keys: {', '.join(sorted(_TOP))}")
    title = _check_type(source, "title", raw.get("title", "mrcstats report"), (str,)) or "mrcstats report"
    subtitle = _check_type(source, "subtitle", raw.get("subtitle", ""), (str,)) or ""
    author = _check_type(source, "author", raw.get("author", "mrcstats"), (str,)) or "mrcstats"
    seed = _check_type(source, "seed", raw.get("seed", 1), (int,))
    seed = 1 if seed is None else seed
    seed = check_seed(seed, f"{source}: seed")

    logs_raw = raw.get("logs")
    if logs_raw is None:
        raise _err(source, "logs", "missing; give one or more log paths (canonical Parquet/CSV or any format "
                   "`mrcstats ingest` reads)")
    if isinstance(logs_raw, str | Mapping):
        logs_raw = [logs_raw]
    if not isinstance(logs_raw, Sequence) or not logs_raw:
        raise _err(source, "logs", "expected a non-empty list of paths or {path, format, model} mappings")
    logs = []
    for i, item in enumerate(logs_raw):
        key = f"logs[{i}]"
        if isinstance(item, str):
            item = {"path": item}
        if not isinstance(item, Mapping):
            raise _err(source, key, f"expected a path or a mapping with `path`, got {type(item).__name__}")
        bad = sorted(set(item) - {"path", "format", "model"})
        if bad:
            raise _err(source, f"{key}.{bad[0]}", "unknown key; known keys: path, format, model")
        path = _check_type(source, f"{key}.path", item.get("path"), (str,))
        if not path:
            raise _err(source, f"{key}.path", "missing")
        fmt = _check_type(source, f"{key}.format", item.get("format"), (str,))
        model = _check_type(source, f"{key}.model", item.get("model"), (str,))
        lp = Path(path)
        lp = lp if lp.is_absolute() else base / lp
        if not lp.exists():
            raise _err(source, f"{key}.path", f"{lp} does not exist")
        logs.append(LogSpec(lp, fmt, model))

    notes = _check_type(source, "notes", raw.get("notes", []), (list, str)) or []
    notes = [notes] if isinstance(notes, str) else [str(n) for n in notes]
    feats = _check_type(source, "features", raw.get("features"), (str,))
    fpath = None
    if feats:
        fpath = Path(feats) if Path(feats).is_absolute() else base / feats
        if not fpath.exists():
            raise _err(source, "features", f"{fpath} does not exist")

    an_raw = raw.get("analyses")
    if an_raw is None:
        raise _err(source, "analyses", f"missing; give a list of analyses (types: {', '.join(ANALYSES)})")
    if not isinstance(an_raw, Sequence) or isinstance(an_raw, str):
        raise _err(source, "analyses", "expected a list of mappings, each with a `type`")
    analyses = []
    names: set[str] = set()
    for i, a in enumerate(an_raw):
        where = f"analyses[{i}]"
        if isinstance(a, str):
            a = {"type": a}
        if not isinstance(a, Mapping):
            raise _err(source, where, f"expected a mapping with a `type`, got {type(a).__name__}")
        a = dict(a)
        if "type" not in a and len(a) == 1:  # the short form `- glmm: {...}`
            (t, opts), = a.items()
            a = {"type": t, **(opts or {})}
        typ = a.pop("type", None)
        if typ not in ANALYSES:
            raise _err(source, f"{where}.type", f"expected one of {', '.join(ANALYSES)}, got {typ!r}")
        plugin = ANALYSES[typ]()
        schema = {**COMMON_KEYS, **plugin.keys}
        bad = sorted(set(map(str, a)) - set(schema))
        if bad:
            raise _err(source, f"{where}.{bad[0]}", f"unknown key for a {typ} analysis; known keys: "
                       f"{', '.join(sorted(schema))}")
        opts = {}
        for k, key in schema.items():
            default = key.default
            v = _check_type(source, f"{where}.{k}", a.get(k, default), key.types)
            if key.choices is not None and v is not None and v not in key.choices:
                raise _err(source, f"{where}.{k}", f"expected {' or '.join(map(str, key.choices))}, got {v!r}")
            opts[k] = v
        for k, key in schema.items():
            if key.required and not opts.get(k):
                raise _err(source, f"{where}.{k}", f"missing; a {typ} analysis needs it")

        def err(key: str, msg: str, _where: str = where) -> InputError:
            return _err(source, f"{_where}.{key}", msg)

        plugin.check(opts, err, base)
        if opts.get("published") is not None:
            opts["published"] = _published(source, f"{where}.published", opts["published"])
        if typ == "glmm":
            opts["name"] = opts.get("name") or f"model {len([x for x in analyses if x.type == 'glmm']) + 1}"
            if opts["name"] in names:
                raise _err(source, f"{where}.name", f"duplicate GLMM name {opts['name']!r}")
            names.add(opts["name"])
        for j, ref in enumerate(opts.get("glmms") or []):  # a `glmms` key lists glmm analyses before this one
            if ref not in names:
                raise _err(source, f"{where}.glmms[{j}]", f"no glmm analysis named {ref!r} before this one "
                           f"(named so far: {', '.join(sorted(names)) or 'none'})")
        analyses.append(AnalysisSpec(typ, opts, where))
    for a in analyses:
        if a.type == "wh_extremes" and a.get("glmm") not in names:
            raise _err(source, f"{a.where}.glmm", f"no glmm analysis named {a.get('glmm')!r} "
                       f"(named: {', '.join(sorted(names)) or 'none'})")
    nr_raw = _check_type(source, "not_reproduced", raw.get("not_reproduced", []), (list,)) or []
    not_rep = []
    for i, item in enumerate(nr_raw):
        if not isinstance(item, Mapping) or set(item) != {"what", "reason"}:
            raise _err(source, f"not_reproduced[{i}]", "expected a mapping with `what` and `reason`")
        not_rep.append(NotReproduced(str(item["what"]), str(item["reason"])))
    meth = _check_type(source, "methods", raw.get("methods", []), (list, str)) or []
    meth = [meth] if isinstance(meth, str) else [str(m) for m in meth]
    mult = _check_type(source, "multiplicity", raw.get("multiplicity", "holm"), (str,)) or "holm"
    if mult not in ("holm", "bonferroni", "BH", "none"):
        raise _err(source, "multiplicity", f"expected holm, bonferroni, BH or none, got {mult!r}")
    return ReportSpec(title=title, subtitle=subtitle, author=author, seed=int(seed), logs=tuple(logs),
                      analyses=tuple(analyses), features=fpath, source=source, base_dir=base,
                      notes=tuple(notes), not_reproduced=tuple(not_rep), methods=tuple(meth), multiplicity=mult)


def _published(source: str, key: str, value: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """``published: {row: {column: number}}`` (or ``{row: number}`` for a one-column table), validated.
    ``tolerance:`` (a number or ``{row, column or "row / column": number}``) says how close counts as reproduced;
    a value given as null is a cell the paper prints unreadably: shown, listed as not compared."""
    out: dict[str, dict[str, float]] = {}
    for row, cells in value.items():
        if not isinstance(cells, Mapping):
            cells = {"": cells}
        try:
            out[str(row)] = {str(c): float("nan") if v is None else float(v) for c, v in cells.items()
                             if not isinstance(v, bool)}
        except (TypeError, ValueError):
            raise _err(source, f"{key}.{row}", "expected numbers (the paper's values; null for an unreadable "
                                                "cell)") from None
    return out
