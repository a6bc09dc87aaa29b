"""lighteval details files: ``details_<task>_<date>.parquet``, one row per evaluated sample.

lighteval (https://github.com/huggingface/lighteval, the tool behind the Open LLM Leaderboard's per-sample
details) writes, with ``--save-details``, ``OUT/details/<model>/<date>/details_<task>_<date>.parquet`` and
``OUT/results/<model>/results_<date>.json``. Each details row is ``DetailsLogger.Detail`` as a Parquet
struct per field (lighteval 0.13, ``logging/info_loggers.py``): ``doc`` (``Doc``: ``query``, ``choices``,
``gold_index``, ``id``, ``task_name`` = ``<task>|<num_fewshot>``, ``specific``, ...), ``model_response``
(``ModelResponse``: ``text``, ``text_post_processed``, ``logprobs``, ...) and ``metric`` (``{name: value}``,
the sample-level metrics).

One canonical row per (sample, metric):

* model = ``config_general.model_name`` of the ``results_<date>.json`` of the same run (beside the file, or
  in ``OUT/results/<model>/``), else ``--model``, else the ``details/<model>/<date>/`` folder names;
* item = ``<task>:<doc.id>`` (``task`` without the ``|<num_fewshot>`` suffix; a ``num_fewshot`` column, a run
  setting: when one read holds a model at several few-shot counts it joins the condition,
  :func:`mrcstats.io.reader.settings_into_condition`);
* condition = ``""`` when the task has one metric, else the metric name (rows of several metrics are kept
  apart, never merged); ``metric`` column = the metric name;
* correct = the metric value when it is 0 or 1 for every sample of that metric; a graded metric (F1,
  BLEU, ...) leaves ``correct`` null; ``score`` (Float64) = the value either way;
* response = the first ``text``; pred = the first ``text_post_processed`` (generative) or the choice with
  the largest log-probability (log-likelihood tasks); gold = ``choices[gold_index]``; question = ``query``.

lighteval's aggregate for a sample-level metric is the mean over samples, its stderr the sample standard
deviation / sqrt(n) -- for binary metrics mrcstats' ``se_cluster`` (cluster = item; CR1).
"""
from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mrcstats.errors import InputError
from mrcstats.io.formats import LIGHTEVAL_DETAIL_COLUMNS
from mrcstats.io.source import Source

#: top-level columns of a lighteval details Parquet file (``DetailsLogger.Detail``: doc, model_response, metric)
DETAIL_COLUMNS = LIGHTEVAL_DETAIL_COLUMNS     # the columns detection looks for (their home: io.formats)
_NAME = re.compile(r"^details_(?P<task>.+)_(?P<date>\d{4}-\d\d-\d\dT[\d\-.]+)\.parquet$", re.IGNORECASE)


def _run_date(path: Path) -> str | None:
    m = _NAME.match(path.name.removesuffix(".gz"))
    return m.group("date") if m else None


def _results_file(path: Path) -> Path | None:
    """``results_<date>.json`` of the run: beside the details file, or ``OUT/results/<model>/``."""
    date = _run_date(path)
    if date is None:
        return None
    name = f"results_{date}.json"
    if (path.parent / name).is_file():
        return path.parent / name
    parts = path.parts
    if "details" in parts:
        i = len(parts) - 1 - parts[::-1].index("details")
        model_dirs = parts[i + 1:-2]   # details/<model...>/<date>/<file>
        cand = Path(*parts[:i], "results", *model_dirs, name)
        if cand.is_file():
            return cand
    return None


def _model_from_layout(path: Path) -> str | None:
    parts = path.parts
    if "details" not in parts:
        return None
    i = len(parts) - 1 - parts[::-1].index("details")
    model_dirs = parts[i + 1:-2]
    return "/".join(model_dirs) or None


def _model(src: Source, model: str | None) -> str | None:
    res = _results_file(src.path)
    if res is not None:
        try:
            cfg = json.loads(res.read_text("utf-8")).get("config_general") or {}
        except (OSError, ValueError, AttributeError):
            cfg = {}
        name = cfg.get("model_name") or (cfg.get("model_config") or {}).get("model_name")
        if isinstance(name, str) and name:
            return name
    return model or _model_from_layout(src.path)


def _first(v: Any) -> Any:
    if isinstance(v, (list, tuple, np.ndarray)):
        return v[0] if len(v) else None
    return v


def _gold(doc: dict[str, Any]) -> str | None:
    choices = doc.get("choices")
    gi = doc.get("gold_index")
    idx = list(gi) if isinstance(gi, (list, tuple, np.ndarray)) else [gi]
    if choices is None or not len(choices):
        return None
    out = [str(choices[int(i)]).strip() for i in idx if i is not None and 0 <= int(i) < len(choices)]
    return ", ".join(out) if out else None


def _pred(doc: dict[str, Any], resp: dict[str, Any]) -> str | None:
    post = _first(resp.get("text_post_processed"))
    if post is not None:
        return str(post)
    text = _first(resp.get("text"))
    if text is not None:
        return str(text)
    lp = resp.get("logprobs")
    choices = doc.get("choices")
    if lp is not None and len(lp) and choices is not None and len(choices) == len(lp):
        return str(choices[int(np.argmax(np.asarray(lp, dtype=float)))]).strip()
    return None


def _binary(values: list[float]) -> bool:
    return all(v in (0.0, 1.0) for v in values if not np.isnan(v))


def read_lighteval(src: Source, model: str | None = None) -> pd.DataFrame:
    """Read one lighteval details Parquet file into rows with canonical field names (see the module docstring)."""
    import pyarrow.parquet as pq

    try:
        recs = pq.read_table(io.BytesIO(src.data)).to_pylist()
    except Exception as exc:  # noqa: BLE001 - any unreadable Parquet: one clear line
        raise InputError(f"{src.name}: cannot read the lighteval details Parquet file "
                         f"({str(exc).splitlines()[0][:160]})") from None
    if not recs:
        raise InputError(f"{src.name}: lighteval details file with no rows")
    rows: list[dict[str, Any]] = []
    for i, r in enumerate(recs, 1):
        doc, resp, metric = r.get("doc") or {}, r.get("model_response") or {}, r.get("metric")
        if not isinstance(metric, dict) or not metric:
            raise InputError(f"{src.name}: row {i}: no sample-level metric values (column 'metric' is "
                             f"{metric!r}); lighteval writes them for sample-level metrics only")
        task_full = str(doc.get("task_name") or "")
        task, _, shots = task_full.rpartition("|") if "|" in task_full else (task_full, "", "")
        sid = doc.get("id")
        if sid is None or str(sid) == "":
            raise InputError(f"{src.name}: row {i}: the sample has no doc.id; cannot name the item")
        base = {
            "item": f"{task}:{sid}",
            "response": None if _first(resp.get("text")) is None else str(_first(resp.get("text"))),
            "pred": _pred(doc, resp),
            "gold": _gold(doc),
            "question": doc.get("query"),
            "task": task,
            "num_fewshot": int(shots) if shots.isdigit() else pd.NA,
            "sample_id": str(sid),
        }
        for name, value in metric.items():
            if isinstance(value, bool):
                value = float(value)
            if not isinstance(value, (int, float)) or value is None:
                raise InputError(f"{src.name}: row {i}: metric {name!r} is {value!r}; a number was expected")
            rows.append({**base, "metric": str(name), "score": float(value)})
    df = pd.DataFrame(rows)
    several = df.groupby("task", sort=False)["metric"].transform("nunique") > 1
    df["condition"] = np.where(several.to_numpy(dtype=bool), df["metric"].astype(str), "")
    binary = {m: _binary(g.tolist()) for m, g in df.groupby("metric", sort=False)["score"]}
    corr = [(s == 1.0) if binary[m] and not np.isnan(s) else pd.NA for m, s in zip(df["metric"], df["score"])]
    df["correct"] = pd.array(corr, dtype="boolean")
    df["score"] = df["score"].astype("Float64")
    df["num_fewshot"] = df["num_fewshot"].astype("Int64")
    df.attrs["run_settings"] = ("num_fewshot",)  # the condition when a read holds several (io.reader)
    name = _model(src, model)
    if name is None:
        raise InputError(f"{src.name}: no model name (no results_<date>.json of the run beside it or in "
                         f"results/<model>/, and not under details/<model>/<date>/); pass --model NAME")
    df["model"] = name
    graded = sorted(m for m, b in binary.items() if not b)
    if graded:
        df.attrs["graded_metrics"] = graded
    return df
