"""mrcstats.io: readers for response logs and the canonical log schema.

>>> import mrcstats
>>> log = mrcstats.read_log("results/", mapping={"item": "question_id"})   # doctest: +SKIP
>>> mrcstats.write_log(log, "log.parquet")                                   # doctest: +SKIP

:func:`read_log` reads one or several files or folders of one format, detected by
content (or named with ``format``), and returns a validated canonical log (see
:mod:`mrcstats.io.schema`); ``log.attrs["skipped"]`` counts every row left out,
by reason. :func:`write_log` writes Parquet (lossless) or CSV atomically.
"""
from __future__ import annotations

from mrcstats._lazy import lazy_exports
from mrcstats.io.formats import FORMATS

# name -> defining module; imported on first use so ``mrcstats --help`` stays light
_EXPORTS: dict[str, str] = {
    "read_log": "mrcstats.io.reader",
    "read_source": "mrcstats.io.reader",
    "write_log": "mrcstats.io.reader",
    "validate_log": "mrcstats.io.schema",
    "coerce_log": "mrcstats.io.schema",
    "log_stats": "mrcstats.io.schema",
    "CANONICAL_COLUMNS": "mrcstats.io.schema",
    "CORE_COLUMNS": "mrcstats.io.schema",
    "KEY_COLUMNS": "mrcstats.io.schema",
    "REQUIRED_COLUMNS": "mrcstats.io.schema",
    "TEXT_COLUMNS": "mrcstats.io.schema",
    "read_data": "mrcstats.io.reader",
    "open_log": "mrcstats.io.opening",
    "open_dataset": "mrcstats.io.dataset",
    "write_dataset": "mrcstats.io.ingest",
    "is_dataset": "mrcstats.io.dataset",
    "LogDataset": "mrcstats.io.dataset",
}

__all__ = ["FORMATS", *sorted(_EXPORTS)]  # noqa: PLE0604


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
