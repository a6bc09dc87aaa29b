"""Several runs of the same model and task as separate units: two checkpoints, two seeds, two prompt versions.

A harness output folder or an Inspect log names its model, so two runs of one model read together collide on
the log's key ``(model, item, trial, condition)``. :func:`read_runs` reads each run on its own
(:func:`mrcstats.io.read_log`) and names its rows' model after the run: ``names`` when given, else the run's
path as given (its last part when those differ between the runs). The model the run itself names is kept in
the column ``run_model``; a run holding several models is refused (compare its models directly instead).
The result is one canonical log in which :func:`mrcstats.compare` pairs the runs on their shared items
(McNemar's exact test and the paired, clustered difference, Miller 2024).
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from mrcstats.errors import InputError

__all__ = ["read_runs", "run_names"]


def run_names(paths: Sequence[str | os.PathLike]) -> list[str]:
    """A name per run: the last part of each path (without a ``.eval``/``.json`` ending) when those differ, else the
    paths as given."""
    stems = [Path(p).name for p in paths]
    stems = [s[: -len(ext)] if (ext := next((e for e in (".eval", ".json", ".jsonl", ".csv") if s.endswith(e)), ""))
             else s for s in stems]
    if len(set(stems)) == len(stems):
        return stems
    full = [str(p) for p in paths]
    if len(set(full)) != len(full):
        raise InputError(f"the same run is given twice ({', '.join(full)}); give each run once")
    return full


def read_runs(paths: Sequence[str | os.PathLike], names: Sequence[str] | None = None, **read_kw: Any
              ) -> pd.DataFrame:
    """One canonical log of several runs, each run's rows named after the run (module docstring).

    Args:
        paths: two or more runs (a harness output folder, an Inspect log or folder of logs, any read_log input).
        names: the runs' names (default :func:`run_names`).
        read_kw: passed to :func:`mrcstats.io.read_log` for every run (``format``, ``mapping``, ``threshold``).
    """
    from mrcstats.io import read_log
    from mrcstats.io.schema import validate_log

    paths = list(paths)
    if len(paths) < 2:
        raise InputError(f"--runs compares runs: give two or more run folders or logs, got {len(paths)}")
    labels = list(names) if names is not None else run_names(paths)
    if len(labels) != len(paths):
        raise InputError(f"{len(labels)} run name(s) for {len(paths)} runs; give one name per run")
    if len(set(labels)) != len(labels):
        raise InputError(f"run names repeat ({', '.join(labels)}); give each run its own name")
    parts = []
    skipped: dict[str, int] = {}
    for path, label in zip(paths, labels):
        log = read_log(path, **read_kw)
        models = sorted(log["model"].astype(str).unique())
        if len(models) != 1:
            raise InputError(f"run {str(path)!r} holds {len(models)} models ({', '.join(models[:5])}); a run is one "
                             "model's output: compare its models directly, or give one model's run per path")
        for why, n in (log.attrs.get("skipped") or {}).items():
            skipped[f"{label}: {why}"] = n
        parts.append(log.assign(run_model=models[0], model=label))
    out = validate_log(pd.concat(parts, ignore_index=True, sort=False), source="runs")
    tasks = [set(p["item"].astype(str)) for p in parts]
    if not set.intersection(*tasks):
        raise InputError(f"the runs share no item ({', '.join(labels)}): they are not runs of the same task (item "
                         "ids differ); a paired comparison needs the same items")
    out.attrs["skipped"] = skipped
    return out
