"""Detecting the format of a loaded file by its content.

Files are loaded once by :func:`mrcstats.io.source.load_source` (gzip, BOMs, UTF-16,
Git LFS pointers, UTF-8 check; re-exported here; the text-table helpers :func:`header_columns`,
:func:`first_line` and :func:`is_mskqa_header` live in :mod:`mrcstats.io.formats.content`, re-exported
here too). :func:`detect_format` then asks each format of the registry (:data:`mrcstats.io.formats.REGISTRY`, in its detection order) whether
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

from mrcstats.io.formats import EXTENSIONS, FORMATS, detect
from mrcstats.io.formats.content import MSKQA_ANSWER_RE, first_line, header_columns, is_mskqa_header
from mrcstats.io.source import Source, load_source

__all__ = ["EXTENSIONS", "FORMATS", "MSKQA_ANSWER_RE", "Source", "detect_format", "first_line",
           "header_columns", "is_mskqa_header", "load_source"]


def detect_format(src: Source) -> str:
    """The format name of ``src`` judged by its content (the registry's detection order; see the module
    docstring)."""
    return detect(src)
