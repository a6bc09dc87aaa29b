"""Detecting the format of a loaded file by its content.

Files are loaded once by :func:`mrcstats.io.source.load_source` (gzip, BOMs, UTF-16,
Git LFS pointers, UTF-8 check; re-exported here). :func:`detect_format` then looks
at the content:

* ``parquet``: the ``PAR1`` magic; ``inspect``: a zip archive with ``header.json`` (an Inspect ``.eval`` log);
* JSON documents: ``inspect`` (an Inspect AI log: ``eval`` + ``samples``), ``helm`` (a HELM
  ``per_instance_stats.json``: a list of ``instance_id`` + ``stats`` objects),
  ``elagent`` (``data`` lists of ``result`` records, or operator-nested
  ``{accuracy, invalid, data: [[prompt, gold, pred, response], ...]}``), else ``json``;
* JSON lines: ``harness`` (lm-evaluation-harness samples: ``doc_id`` and
  ``filtered_resps``/``resps``), else ``jsonl``;
* delimited text: ``mskqa`` (``answer_<model>_<MR>`` columns beside a gold
  ``answer``/``correct`` column), else ``tsv`` or ``csv`` by the header's delimiter.
"""
from __future__ import annotations

import csv
import io
import json
import re
from typing import Any

from mrcstats.errors import InputError
from mrcstats.io.elagent import looks_like_elagent
from mrcstats.io.source import EXTENSIONS, FORMATS, ZIP_MAGIC, Source, expand_paths, load_source

__all__ = ["EXTENSIONS", "FORMATS", "MSKQA_ANSWER_RE", "Source", "detect_format", "expand_paths",
           "header_columns", "is_mskqa_header", "load_source"]


MSKQA_ANSWER_RE = re.compile(r"^answer_(.+)_(\d+(?:\.\d+)?)$")


def _first_line(data: bytes) -> str:
    """The first line of a text file; a line ends at CRLF, LF or a bare CR (as pandas reads it)."""
    head = data[: 1 << 20]
    ends = [i for i in (head.find(b"\n"), head.find(b"\r")) if i >= 0]
    line = head[: min(ends)] if ends else head
    return line.decode("utf-8", errors="replace")


def header_columns(src: Source, delimiter: str | None = None) -> list[str]:
    """Column names of a delimited text file (its first record; a quoted name may hold a line break)."""
    line = _first_line(src.data)
    if delimiter is None:
        delimiter = "\t" if line.count("\t") > line.count(",") else ","
    text = src.data[: 1 << 20].decode("utf-8", errors="replace")
    try:
        return next(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True), [])
    except csv.Error as exc:
        raise InputError(f"{src.name}: cannot read the header line as {'TSV' if delimiter == chr(9) else 'CSV'} "
                         f"({exc}); the first line must name the columns") from None


def is_mskqa_header(cols: list[str]) -> bool:
    """True for maskcode outputs: ``answer_<model>_<MR>`` columns and no canonical ``model`` column."""
    return any(MSKQA_ANSWER_RE.match(c) for c in cols) and "model" not in cols


def _json_kind(obj: Any) -> str:
    from mrcstats.io.helm import looks_like_helm

    if looks_like_helm(obj):
        return "helm"
    if isinstance(obj, dict):
        if "samples" in obj and "eval" in obj:
            return "inspect"
        if looks_like_elagent(obj):
            return "elagent"
    return "json"


def detect_format(src: Source) -> str:
    """The format name of ``src`` judged by its content (see the module docstring)."""
    if src.binary:
        if src.data[:4] == ZIP_MAGIC:
            from mrcstats.io.inspect_ai import archive_names, looks_like_eval_archive

            if looks_like_eval_archive(archive_names(src)):
                return "inspect"
            raise InputError(f"{src.name}: a zip archive that is not an Inspect AI .eval log; unpack it and pass "
                             f"the files inside")
        return "parquet"
    head = src.data.lstrip()[:1]
    if head in (b"{", b"["):
        try:
            obj = src.json()
        except InputError:
            first = src.data.lstrip().split(b"\n", 1)[0]
            try:
                rec = json.loads(first)
            except ValueError:  # JSONDecodeError, or bytes json guesses to be UTF-16/32 that do not decode
                raise InputError(f"{src.name}: looks like JSON but neither the file nor its first line "
                                 f"parses; fix the JSON or pass --format") from None
            if isinstance(rec, dict) and "doc_id" in rec and ("filtered_resps" in rec or "resps" in rec):
                return "harness"
            return "jsonl"
        if isinstance(obj, dict) and "doc_id" in obj and ("filtered_resps" in obj or "resps" in obj):
            return "harness"  # a one-line samples file
        kind = _json_kind(obj)
        if kind == "json" and isinstance(obj, dict) and not any(isinstance(v, list) for v in obj.values()):
            return "jsonl"  # one flat record: a JSON-lines file with one line
        return kind
    cols = header_columns(src)
    if is_mskqa_header(cols):
        return "mskqa"
    line = _first_line(src.data)
    return "tsv" if line.count("\t") > line.count(",") else "csv"
