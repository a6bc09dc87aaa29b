"""lighteval details files (placeholder; reader below)."""
from __future__ import annotations

#: top-level columns of a lighteval details Parquet file (``DetailsLogger.Detail``: doc, model_response, metric)
DETAIL_COLUMNS: tuple[str, ...] = ("doc", "metric", "model_response")
