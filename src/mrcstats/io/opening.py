"""Opening a log: the one place that decides which reader and which kind of log a caller gets.

:func:`open_log` takes the paths and what the caller needs and returns a lazy
:class:`~mrcstats.io.dataset.LogDataset`, the pandas-free :class:`~mrcstats.io.columns.Columns` of one
plain table, :func:`~mrcstats.io.reader.read_data`'s table or :func:`~mrcstats.io.reader.read_log`'s log.
A module of its own that imports no pandas (the readers are imported when they are used), so the command
line's pandas-free ``glmer`` path goes through it too.
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from mrcstats.errors import InputError

if TYPE_CHECKING:
    from mrcstats.io.source import Source

__all__ = ["open_log"]


def open_log(paths: str | os.PathLike | Sequence[str | os.PathLike], format: str | None = None,
             mapping: Mapping[str, str] | None = None, model: str | Mapping[str, str] | None = None,
             on_duplicate: str = "error", threshold: float | None = None, *, lazy: bool = True,
             table: bool = False, columns: Sequence[str] | None = None, loaded: Sequence[Source] = ()):
    """Open a log the way the caller needs it: io's one decision of which reader and which kind of log.

    The caller says what it needs; this function decides, in this order:

    1. a lazy :class:`~mrcstats.io.dataset.LogDataset` when ``paths`` names one dataset folder
       (``mrcstats ingest --dataset``), ``lazy`` is true and nothing asks for its rows to be read again
       (no ``format``, ``mapping``, ``model`` or ``threshold``): the statistics count it through its
       row pass (:func:`mrcstats.backends.dataset_pass`);
    2. with ``table`` (a model's data table, :func:`~mrcstats.io.reader.read_data`) and ``columns`` (the columns the caller
       will use, given only when it needs no pandas frame): the pandas-free
       :class:`~mrcstats.io.columns.Columns` of one plain CSV/TSV/Parquet file
       (:func:`~mrcstats.io.arrow_columns.read_table_columns`), when Arrow gives the cells
       :func:`~mrcstats.io.reader.read_data` would;
    3. with ``table``: :func:`~mrcstats.io.reader.read_data` (a plain table as it is, a tool's log as a canonical log;
       ``loaded``: files already read, not read again);
    4. else :func:`~mrcstats.io.reader.read_log` (an in-memory canonical log).

    Analyses accept each of these. ``lazy=False`` always reads into memory.
    """
    single = paths if isinstance(paths, (str, os.PathLike)) else (
        paths[0] if isinstance(paths, (list, tuple)) and len(paths) == 1 else None)
    plain = format is None and not mapping and not model and threshold is None
    if lazy and plain and isinstance(single, (str, os.PathLike)):
        from mrcstats.io.dataset import is_dataset, open_dataset

        if is_dataset(single):
            return open_dataset(single)
    if not table:
        from mrcstats.io.reader import read_log

        return read_log(paths, format=format, mapping=mapping, model=model, on_duplicate=on_duplicate,
                        threshold=threshold)
    if threshold is not None:
        raise InputError("threshold applies to a response log, not to a model's data table; binarise the "
                         "score column first")
    if columns is not None and plain and isinstance(single, (str, os.PathLike)) and not loaded:
        src = _plain_file(single)
        if src is not None:
            from mrcstats.io.arrow_columns import read_table_columns
            from mrcstats.io.detect import detect_format

            cols = read_table_columns(src, detect_format(src), columns)
            if cols is not None:
                return cols
            loaded = (src,)
    from mrcstats.io.reader import read_data

    return read_data(paths, format=format, mapping=mapping, model=model, on_duplicate=on_duplicate,
                     loaded=loaded)


def _plain_file(path: str | os.PathLike) -> Source | None:
    """The loaded file at ``path``, or None when it is not a regular file (a folder, a name the file system
    refuses: :func:`~mrcstats.io.reader.read_data` then says what is wrong)."""
    try:
        if not Path(path).is_file():
            return None
    except OSError:
        return None
    from mrcstats.io.source import load_source

    return load_source(path)
