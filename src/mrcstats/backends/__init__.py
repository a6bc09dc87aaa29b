"""Row-pass backends: where a log's rows are read (memory, DuckDB, Dask), below both models and stats.

Layers: io (readers, datasets) -> backends -> models / stats -> report. A backend turns the rows
into small integer tables in one pass (:class:`RowPass`); :mod:`.sql` is the one home of the
DuckDB SQL over a log dataset. See docs/architecture.md.
"""
from __future__ import annotations

from mrcstats.backends.passes import (
    BACKENDS,
    DaskPass,
    DatasetPass,
    DuckDBPass,
    MemoryPass,
    RowPass,
    dask_client,
    dataset_pass,
    keep_value,
    pass_backend,
)

__all__ = ["BACKENDS", "DaskPass", "DatasetPass", "DuckDBPass", "MemoryPass", "RowPass", "dask_client",
           "dataset_pass", "keep_value", "pass_backend"]
