"""Detecting the format of a loaded file by its content.

Files are loaded once by :func:`mrcstats.io.source.load_source` (gzip, BOMs, UTF-16,
Git LFS pointers, UTF-8 check; re-exported here). :func:`detect_format` then asks each
format of the registry (:data:`mrcstats.io.formats.REGISTRY`, in its detection order) whether
the content is of it; the first that says yes names the format. The order, in short:

* binary: ``lighteval`` (a Parquet file with ``doc``, ``model_response`` and ``metric`` columns),
  ``parquet`` (the ``PAR1`` magic), ``inspect`` (a zip archive with ``header.json``: an Inspect ``.eval`` log);
* JSON documents: ``harness`` (lm-evaluation-harness samples: ``doc_id`` and ``filtered_resps``/``resps``,
  also as JSON lines), ``helm`` (a HELM ``per_instance_stats.json``: a list of ``instance_id`` + ``stats``
  objects), ``inspect`` (an Inspect AI log: ``eval`` + ``samples``), ``elagent`` (``data`` lists of
  ``result`` records, or operator-nested ``{accuracy, invalid, data: [[prompt, gold, pred, response], ...]}``),
  ``eee`` (an Every Eval Ever aggregate or instance-level record), ``jsonl`` (JSON lines, or one flat
  record), else ``json``;
* delimited text: ``mskqa`` (``answer_<model>_<MR>`` columns beside a gold ``answer``/``correct``
  column), else ``tsv`` or ``csv`` by the header's delimiter.
"""
from __future__ import annotations

import csv
import io
import re

from mrcstats.errors import InputError
from mrcstats.io import formats
from mrcstats.io.formats import EXTENSIONS, FORMATS
from mrcstats.io.source import Source, expand_paths, load_source

__all__ = ["EXTENSIONS", "FORMATS", "MSKQA_ANSWER_RE", "Source", "detect_format", "expand_paths",
           "header_columns", "is_mskqa_header", "load_source"]


MSKQA_ANSWER_RE = re.compile(r"^answer_(.+)_(\d+(?:\.\d+)?)$")


def first_line(data: bytes) -> str:
    """The first line of a text file; a line ends at CRLF, LF or a bare CR (as pandas reads it)."""
    head = data[: 1 << 20]
    ends = [i for i in (head.find(b"\n"), head.find(b"\r")) if i >= 0]
    line = head[: min(ends)] if ends else head
    return line.decode("utf-8", errors="replace")


def header_columns(src: Source, delimiter: str | None = None) -> list[str]:
    """Column names of a delimited text file (its first record; a quoted name may hold a line break)."""
    line = first_line(src.data)
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


def detect_format(src: Source) -> str:
    """The format name of ``src`` judged by its content (the registry's detection order; see the module
    docstring)."""
    return formats.detect(src)
