"""Every Eval Ever (placeholder)."""
from __future__ import annotations

from typing import Any


def looks_like_eee(obj: Any) -> bool:
    if not isinstance(obj, dict) or "schema_version" not in obj or "evaluation_id" not in obj:
        return False
    return ("evaluation_results" in obj and "model_info" in obj) or ("sample_id" in obj and "evaluation" in obj)
