"""JSON output conventions shared by every ``--json`` command.

* stdout carries exactly one JSON object (use :func:`emit_json`);
* numbers are not rounded;
* missing values (None, NaN, pandas NA/NaT) become ``null``;
* infinities become the strings ``"Inf"`` and ``"-Inf"``;
* numpy / pandas scalars and arrays are converted to plain Python.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import sys
from collections.abc import Mapping
from typing import Any


def to_jsonable(obj: Any) -> Any:
    """Recursively convert ``obj`` to plain JSON-compatible Python following the rules above."""
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    # numpy is never imported here: if it is not loaded, no numpy objects exist
    np = sys.modules.get("numpy")
    if np is not None and isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, int) or (np is not None and isinstance(obj, np.integer)):
        return int(obj)
    if isinstance(obj, float) or (np is not None and isinstance(obj, np.floating)):
        x = float(obj)
        if math.isnan(x):
            return None
        if math.isinf(x):
            return "Inf" if x > 0 else "-Inf"
        return x
    if isinstance(obj, Mapping):
        return {str(k) if not isinstance(k, str) else k: to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in obj]
    if np is not None and isinstance(obj, np.ndarray):
        return [to_jsonable(v) for v in obj.tolist()]
    if isinstance(obj, (_dt.datetime, _dt.date)):
        return obj.isoformat()
    pd = sys.modules.get("pandas")
    if pd is not None:
        if obj is pd.NA or obj is pd.NaT:
            return None
        if isinstance(obj, pd.Series):
            return {str(k): to_jsonable(v) for k, v in obj.items()}
        if isinstance(obj, pd.DataFrame):
            return [to_jsonable(r) for r in obj.to_dict(orient="records")]
        if isinstance(obj, pd.Timestamp):
            return obj.isoformat()
    if hasattr(obj, "to_dict"):
        return to_jsonable(obj.to_dict())
    return str(obj)


def plain_records(frame: Any) -> list[dict[str, Any]]:
    """A DataFrame's rows as dicts of plain Python values: numpy scalars to int/float, NaN and ``pd.NA`` to
    None (infinities stay floats; :func:`to_jsonable` writes them as "Inf"/"-Inf")."""
    np = sys.modules.get("numpy")
    pd = sys.modules.get("pandas")
    rows = []
    for rec in frame.to_dict(orient="records"):
        out = {}
        for k, v in rec.items():
            if v is None or (pd is not None and v is pd.NA) or (isinstance(v, float) and math.isnan(v)):
                v = None
            elif np is not None and isinstance(v, np.integer):
                v = int(v)
            elif np is not None and isinstance(v, np.floating):
                v = None if math.isnan(float(v)) else float(v)
            out[k] = v
        rows.append(out)
    return rows


def dumps(obj: Any, **kw: Any) -> str:
    """Serialise ``obj`` with :func:`to_jsonable`; never emits NaN/Infinity literals."""
    return json.dumps(to_jsonable(obj), allow_nan=False, **kw)


def emit_json(obj: Any) -> None:
    """Write exactly one JSON object to stdout, followed by a newline."""
    sys.stdout.write(dumps(obj))
    sys.stdout.write("\n")
    sys.stdout.flush()
