"""The one registry of input formats: detection, dispatch and help are derived from :data:`REGISTRY`.

Each :class:`Format` record names a format, the file endings a folder listing picks up for it,
``detect(content) -> bool`` (content: :class:`~mrcstats.io.formats.content.Content`, the loaded
file parsed lazily), ``read(src, mapping, model) -> frame`` (canonical field names, before
:func:`mrcstats.io.schema.coerce_log`) and one line of help. :data:`REGISTRY` lists them ONCE,
in detection order: :func:`detect` returns the first format whose ``detect`` is true, so the more
specific formats (a tool's log) come before the generic tables they would also parse as.

Derived from it: :data:`FORMATS` (``--format`` choices), :data:`EXTENSIONS` (what a folder listing
reads), :func:`mrcstats.io.reader.read_source` (dispatch), and every CLI help text
(:func:`formats_phrase`, :func:`formats_epilog`). A new reader plugs in by one record here.

The reader modules are imported when a file of theirs is read, never at import time (``mrcstats
--help`` stays fast).
"""
from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mrcstats.errors import InputError
from mrcstats.io.formats.content import Content

if TYPE_CHECKING:
    import pandas as pd

    from mrcstats.io.source import Source

Reader = Callable[["Source", "Mapping[str, str] | None", "str | None"], "pd.DataFrame"]


@dataclass(frozen=True)
class Format:
    """One input format: how to recognise a file of it and how to read one.

    Attributes:
        name: the ``--format`` name.
        title: how help texts name it (e.g. ``Inspect AI``).
        extensions: file endings (lower case, with the dot) a folder listing picks up for it.
        detect: ``detect(content) -> bool`` on a :class:`Content`; may raise :class:`InputError`
            for a file that is damaged in a way no other format could claim.
        read: ``read(src, mapping, model) -> DataFrame`` with canonical field names.
        help: one line for ``--help`` and docs/formats.md.
        log_only: the file is only meaningful as a response log (``read_data`` reads it as one).
    """

    name: str
    title: str
    extensions: tuple[str, ...]
    detect: Callable[[Content], bool]
    read: Reader
    help: str
    log_only: bool = True


# ---------------------------------------------------------------------------- readers


def _post_map(df: pd.DataFrame, mapping: Mapping[str, str] | None, src: Source) -> pd.DataFrame:
    """Apply ``--map`` to the frame of a reader that names the canonical fields itself."""
    if not mapping:
        return df
    from mrcstats.io.tabular import apply_mapping

    attrs = dict(df.attrs)
    out = apply_mapping(df, mapping, src.name)
    out.attrs = attrs
    return out


def _table(fmt: str) -> Reader:
    def read(src: Source, mapping: Mapping[str, str] | None, model: str | None) -> pd.DataFrame:
        from mrcstats.io.tabular import read_table

        return read_table(src, fmt, mapping)

    return read


def _read_harness(src: Source, mapping: Mapping[str, str] | None, model: str | None) -> pd.DataFrame:
    """lm-evaluation-harness samples: ``--map score=METRIC`` (or ``correct=METRIC``) picks the per-sample metric
    the reader analyses (it decides ``correct`` and ``score`` from it); the rest of the mapping is applied after."""
    from mrcstats.io.harness import read_harness

    rest = dict(mapping or {})
    picks = {rest.pop(f) for f in ("score", "correct") if f in rest}
    if len(picks) > 1:
        raise InputError(f"{src.name}: --map score= and --map correct= name different metrics "
                         f"({', '.join(sorted(picks))}); a harness log is analysed on one metric: map one")
    return _post_map(read_harness(src, model, metric=next(iter(picks), None)), rest, src)


def _read_mskqa(src: Source, mapping: Mapping[str, str] | None, model: str | None) -> pd.DataFrame:
    from mrcstats.io.mskqa import read_mskqa

    return read_mskqa(src, mapping)


def _tool(module: str, function: str) -> Reader:
    """The reader ``module.function(src, model)`` of a tool's log, with ``--map`` applied after it."""

    def read(src: Source, mapping: Mapping[str, str] | None, model: str | None) -> pd.DataFrame:
        import importlib

        fn = getattr(importlib.import_module(module), function)
        return _post_map(fn(src, model), mapping, src)

    read.__qualname__ = f"read:{module}.{function}"
    return read


# ---------------------------------------------------------------------------- detectors


def _is_harness_record(rec: Any) -> bool:
    return isinstance(rec, dict) and "doc_id" in rec and ("filtered_resps" in rec or "resps" in rec)


def _detect_harness(c: Content) -> bool:
    return c.looks_json and _is_harness_record(c.record)


def _detect_helm(c: Content) -> bool:
    if not isinstance(c.document, list):      # the reader's module (and its pandas) only for a JSON list
        return False
    from mrcstats.io.helm import looks_like_helm

    return looks_like_helm(c.document)


def _detect_inspect(c: Content) -> bool:
    if c.is_zip:
        from mrcstats.io.inspect_ai import looks_like_eval_archive

        return looks_like_eval_archive(c.zip_names)
    doc = c.document
    return isinstance(doc, dict) and "samples" in doc and "eval" in doc


def _detect_elagent(c: Content) -> bool:
    if not isinstance(c.document, dict):
        return False
    from mrcstats.io.elagent import looks_like_elagent

    return looks_like_elagent(c.document)


def _detect_eee(c: Content) -> bool:
    if not c.looks_json:
        return False
    from mrcstats.io.eee import looks_like_eee

    return looks_like_eee(c.record)


#: the columns that make a Parquet file lighteval's details (here, not in the reader's module: detecting a
#: format imports no reader, and with it no pandas)
LIGHTEVAL_DETAIL_COLUMNS: tuple[str, ...] = ("doc", "metric", "model_response")


def _detect_lighteval(c: Content) -> bool:
    return c.is_parquet and set(LIGHTEVAL_DETAIL_COLUMNS) <= set(c.parquet_columns)


def _detect_jsonl(c: Content) -> bool:
    doc = c.document
    # JSON lines, or one flat record (a JSON-lines file with one line)
    return c.is_json_lines or (isinstance(doc, dict) and not any(isinstance(v, list) for v in doc.values()))


def _detect_mskqa(c: Content) -> bool:
    from mrcstats.io.formats.content import is_mskqa_header

    return c.is_text_table and is_mskqa_header(c.columns)


def _detect_tsv(c: Content) -> bool:
    return c.is_text_table and c.first_line.count("\t") > c.first_line.count(",")


# ---------------------------------------------------------------------------- the registry

#: every input format, ONCE, in detection order (the first whose ``detect`` is true wins)
REGISTRY: tuple[Format, ...] = (
    Format("lighteval", "lighteval", (".parquet",), _detect_lighteval,
           _tool("mrcstats.io.lighteval", "read_lighteval"),
           "lighteval details (details_<task>_<date>.parquet: doc, model_response, metric per sample)"),
    Format("parquet", "Parquet", (".parquet", ".pq"), lambda c: c.is_parquet, _table("parquet"),
           "a Parquet table of log rows (canonical column names, or --map)", log_only=False),
    Format("harness", "lm-evaluation-harness", (".jsonl",), _detect_harness,
           _read_harness,
           "lm-evaluation-harness samples (samples_<task>_<date>.jsonl; model from results_*.json beside it)"),
    Format("helm", "HELM", (".json",), _detect_helm, _tool("mrcstats.io.helm", "read_helm"),
           "HELM run folder (per_instance_stats.json with scenario_state.json beside it)"),
    Format("inspect", "Inspect AI", (".eval", ".json"), _detect_inspect,
           _tool("mrcstats.io.inspect_ai", "read_inspect"),
           "Inspect AI log (.eval archive or .json with eval and samples)"),
    Format("elagent", "ELAGENT", (".json",), _detect_elagent, _tool("mrcstats.io.elagent", "read_elagent"),
           "ELAGENT result file (data lists of result records)"),
    Format("eee", "Every Eval Ever", (".json", ".jsonl"), _detect_eee, _tool("mrcstats.io.eee", "read_eee"),
           "Every Eval Ever aggregate <uuid>.json with its <uuid>_samples.jsonl (or the samples file alone)"),
    Format("jsonl", "JSON lines", (".jsonl", ".ndjson"), _detect_jsonl, _table("jsonl"),
           "JSON lines of log rows, one object per line", log_only=False),
    Format("json", "JSON", (".json",), lambda c: c.looks_json, _table("json"),
           "a JSON array of log rows (or {\"rows\": [...]})", log_only=False),
    Format("mskqa", "maskcode", (".csv", ".tsv", ".txt"), _detect_mskqa, _read_mskqa,
           "maskcode (MskQA) outputs: answer_<model>_<rate> columns beside a gold answer column"),
    Format("tsv", "TSV", (".tsv", ".txt"), _detect_tsv, _table("tsv"),
           "tab-separated log rows with a header line", log_only=False),
    Format("csv", "CSV", (".csv", ".txt"), lambda c: c.is_text_table, _table("csv"),
           "comma-separated log rows with a header line", log_only=False),
)

#: every format name accepted by ``--format``, in detection order
FORMATS: tuple[str, ...] = tuple(f.name for f in REGISTRY)
#: file name endings a folder listing picks up (each optionally ``.gz``)
EXTENSIONS: tuple[str, ...] = tuple(dict.fromkeys(e for f in REGISTRY for e in f.extensions))
#: formats read as plain tables by :func:`mrcstats.io.read_data`
TABLE_FORMATS: tuple[str, ...] = tuple(f.name for f in REGISTRY if not f.log_only)

_BY_NAME: dict[str, Format] = {f.name: f for f in REGISTRY}


def get_format(name: str) -> Format:
    """The record of format ``name``; an unknown name raises :class:`InputError` listing the choices."""
    try:
        return _BY_NAME[name]
    except (KeyError, TypeError):
        raise InputError(f"unknown format {name!r}; choose one of {', '.join(FORMATS)}") from None


def detect(src: Source) -> str:
    """The name of the first registered format whose ``detect`` accepts ``src``'s content."""
    return _detect(Content(src))


def detect_parquet_file(path: str | os.PathLike) -> str | None:
    """The format of a Parquet file judged by its footer alone (a large input is not loaded): ``lighteval``
    or ``parquet`` by :data:`REGISTRY`; None when the file is not Parquet (or unreadable: the full detection
    and the reader say why)."""
    from pathlib import Path

    from mrcstats.io.formats.content import PARQUET_MAGIC
    from mrcstats.io.source import Source

    try:
        with open(path, "rb") as fh:
            if fh.read(4) != PARQUET_MAGIC:
                return None
        import pyarrow.parquet as pq

        names = tuple(pq.read_schema(path).names)
    except Exception:  # noqa: BLE001 - unreadable here: leave it to load_source and the reader
        return None
    c = Content(Source(Path(path), PARQUET_MAGIC, binary=True))
    c.__dict__["parquet_columns"] = names   # the footer's columns (cached_property seeded)
    return _detect(c)


def _detect(c: Content) -> str:
    src = c.src
    for f in REGISTRY:
        if f.detect(c):
            return f.name
    if c.is_zip:
        raise InputError(f"{src.name}: a zip archive that is not an Inspect AI .eval log; unpack it and pass "
                         f"the files inside")
    raise InputError(f"{src.name}: not a format mrcstats reads; pass --format (one of {', '.join(FORMATS)})")


def formats_phrase() -> str:
    """The formats as one phrase for a command's description (every registered format, by title)."""
    tables = [f.title for f in REGISTRY if not f.log_only]
    tools = [f.title for f in REGISTRY if f.log_only]
    return f"{'/'.join(tables)} tables, gzip, folders; {', '.join(tools)}"


#: file endings :func:`mrcstats.io.write_log` writes (Parquet, or CSV/TSV, optionally gzipped); here, beside the
#: formats read, so the command line declares ``ingest --out`` without importing the reader
LOG_SUFFIXES: tuple[str, ...] = (".parquet", ".pq", ".csv", ".csv.gz", ".tsv", ".tsv.gz")


def formats_epilog() -> str:
    """One line per format (name, file endings, help), in detection order, for a command's epilog."""
    width = max(len(f.name) for f in REGISTRY)
    lines = [f"  {f.name:<{width}}  {f.help} [{' '.join(f.extensions)}]" for f in REGISTRY]
    return "formats (detected by content in this order; --format FMT names one):\n" + "\n".join(lines)


def formats_markdown() -> str:
    """The format table of docs/formats.md (name, title, file endings, description), in detection order."""
    rows = ["| format | tool | files | what |", "|---|---|---|---|"]
    def esc(text: str) -> str:
        return text.replace("<", "\\<").replace(">", "\\>").replace("|", "\\|")

    rows += [f"| `{f.name}` | {f.title} | {' '.join(f'`{e}`' for e in f.extensions)} | {esc(f.help)} |"
             for f in REGISTRY]
    return "\n".join(rows)


__all__ = ["EXTENSIONS", "FORMATS", "REGISTRY", "TABLE_FORMATS", "Content", "Format", "detect",
           "detect_parquet_file", "formats_epilog",
           "formats_markdown", "formats_phrase", "get_format"]
