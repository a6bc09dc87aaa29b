"""Leaderboard-shaped logs with known truth, written in chunks as a log dataset.

:func:`leaderboard_log` simulates ``models`` x ``items`` x ``trials`` rows (one row per model,
item and trial; no masking) from a Rasch-like model with a cluster effect::

    logit P(correct) = b0 + a[m] - d[i] + u[c(i)],   a ~ N(0, sd_ability²), d ~ N(0, sd_difficulty²),
                                                      u ~ N(0, sd_cluster²)

where items are grouped ``items_per_cluster`` at a time into clusters (``cluster`` column,
e.g. passages). In lme4 notation the truth is ``correct ~ 1 + (1 | item) + (1 | model)`` with
item SD sqrt(sd_difficulty² + sd_cluster²·…) — the per-item effect is -d[i] + u[c(i)] — or,
with the cluster term, ``correct ~ 1 + (1 | model) + (1 | item) + (1 | cluster)``. A share
``invalid_rate`` of answers is invalid (``correct`` null).

Rows are drawn model by model with a generator seeded by ``(seed, model index)``, so the log is
deterministic given ``seed`` whatever the chunk size, and written through
:class:`mrcstats.io.ingest.DatasetWriter` ``chunk_rows`` rows at a time (bounded memory) as a
hive-partitioned Parquet dataset. The truth (parameters and the drawn a, d, u) is stored in the
dataset description (``_mrcstats.json``, key ``truth``).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mrcstats._repr import Result
from mrcstats._seeds import check_seed
from mrcstats._words import plural
from mrcstats.errors import InputError


@dataclass(frozen=True, repr=False)
class LeaderboardLog(Result):
    """What :func:`leaderboard_log` wrote."""

    path: Path
    rows: int
    models: int
    items: int
    clusters: int
    trials: int
    files: int
    seconds: float
    truth: dict[str, Any] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "rows": self.rows, "models": self.models, "items": self.items,
                "clusters": self.clusters, "trials": self.trials, "files": self.files, "seconds": self.seconds,
                "truth": {k: v for k, v in self.truth.items() if k not in ("ability", "difficulty", "cluster")}}

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame([{k: v for k, v in self.to_dict().items() if k != "truth"}])

    def summary(self) -> str:
        t = self.truth
        return (f"wrote {self.rows:,} rows ({self.models:,} models x {self.items:,} items x {plural(self.trials, 'trial')}; "
                f"{self.clusters:,} clusters) in {self.files:,} files to {self.path} in {self.seconds:.1f} s\n"
                f"truth: {t.get('formula')}; b0 = {t.get('intercept')}, SD(ability) = {t.get('sd_ability')}, "
                f"SD(difficulty) = {t.get('sd_difficulty')}, SD(cluster) = {t.get('sd_cluster')}")


def _names(prefix: str, n: int) -> list[str]:
    width = max(4, len(str(n - 1)))
    return [f"{prefix}{k:0{width}d}" for k in range(n)]


def leaderboard_log(out: str | os.PathLike, *, models: int = 100, items: int = 1000, trials: int = 1,
                    items_per_cluster: int = 4, seed: int = 0, intercept: float = 0.5, sd_ability: float = 1.0,
                    sd_difficulty: float = 1.5, sd_cluster: float = 0.5, invalid_rate: float = 0.01,
                    chunk_rows: int = 1_000_000, show_progress: bool | None = None) -> LeaderboardLog:
    """Write a leaderboard-shaped log with known truth to the dataset folder ``out``.

    See the module docstring for the model. ``chunk_rows`` bounds the rows held in memory.
    """
    from mrcstats._progress import progress
    from mrcstats.io.ingest import DatasetWriter
    from mrcstats.io.schema import STRING_DTYPE
    from mrcstats.tasks.simulate import take_strings

    if models < 1 or items < 1 or trials < 1 or items_per_cluster < 1:
        raise InputError("leaderboard_log needs models, items, trials and items_per_cluster >= 1")
    if not 0 <= invalid_rate < 1:
        raise InputError(f"invalid_rate must be in [0, 1), got {invalid_rate}")
    if chunk_rows < 1:
        raise InputError(f"chunk_rows must be >= 1, got {chunk_rows}")
    t0 = time.perf_counter()
    seed = check_seed(seed)
    rng = np.random.default_rng([seed, 0])
    ability = rng.normal(0.0, sd_ability, models)
    difficulty = rng.normal(0.0, sd_difficulty, items)
    n_clusters = -(-items // items_per_cluster)
    u = rng.normal(0.0, sd_cluster, n_clusters)
    item_cluster = np.arange(items) // items_per_cluster
    item_eta = intercept - difficulty + u[item_cluster]          # per item: b0 - d[i] + u[c(i)]
    model_names, item_names, cluster_names = _names("m", models), _names("i", items), _names("c", n_clusters)
    per_model = items * trials
    models_per_chunk = max(1, chunk_rows // per_model)
    item_idx = np.tile(np.repeat(np.arange(items), trials), 1)
    trial_idx = np.tile(np.arange(trials, dtype=np.int64), items)
    truth = {"formula": "correct ~ 1 + (1 | model) + (1 | item) + (1 | cluster)",
             "linear_predictor": "b0 + ability[model] - difficulty[item] + cluster_effect[cluster]",
             "intercept": float(intercept), "sd_ability": float(sd_ability),
             "sd_difficulty": float(sd_difficulty), "sd_cluster": float(sd_cluster),
             "invalid_rate": float(invalid_rate), "seed": int(seed), "items_per_cluster": int(items_per_cluster),
             "ability": {m: float(a) for m, a in zip(model_names, ability)},
             "difficulty": {i: float(d) for i, d in zip(item_names, difficulty)},
             "cluster": {c: float(v) for c, v in zip(cluster_names, u)}}
    bar = progress(total=models * per_model, desc="generate", unit="row",
                   disable=None if show_progress is None else not show_progress)
    rows = 0
    with DatasetWriter(out, validate=False) as w:
        w.sources = [f"mrcstats.tasks.leaderboard.leaderboard_log(seed={seed})"]
        w.extra_meta["truth"] = truth
        w.extra_meta["format"] = "leaderboard-simulation"
        for start in range(0, models, models_per_chunk):
            ms = range(start, min(models, start + models_per_chunk))
            k = len(ms)
            y = np.empty(k * per_model, dtype=bool)
            inv = np.empty(k * per_model, dtype=bool)
            for j, m in enumerate(ms):
                r = np.random.default_rng([seed, 1, m])
                eta = item_eta[item_idx] + ability[m]
                p = 1.0 / (1.0 + np.exp(-eta))
                sl = slice(j * per_model, (j + 1) * per_model)
                y[sl] = r.random(per_model) < p
                inv[sl] = r.random(per_model) < invalid_rate if invalid_rate > 0 else False
            n = k * per_model
            it = np.tile(item_idx, k)
            correct = pd.arrays.BooleanArray(y, inv)
            nulls = pd.array(np.full(n, None, dtype=object), dtype=STRING_DTYPE)
            frame = pd.DataFrame({
                "model": take_strings(model_names, np.repeat(np.arange(start, start + k), per_model)),
                "item": take_strings(item_names, it),
                "cluster": take_strings(cluster_names, item_cluster[it]),
                "trial": np.tile(trial_idx, k),
                "condition": take_strings([""], np.zeros(n, dtype=np.int64)),
                "masking_rate": pd.arrays.FloatingArray(np.zeros(n), np.ones(n, dtype=bool)),
                "correct": correct,
                "response": nulls, "gold": nulls, "pred": nulls,
            })
            rows += w.write(frame, f"models {start}..{start + k - 1}")
            bar.update(n)
        ds = w.close()
    bar.close()
    return LeaderboardLog(ds.path, rows, models, items, n_clusters, trials, len(ds.files),
                          time.perf_counter() - t0, truth)
