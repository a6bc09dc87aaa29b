"""Adaptive runs against an OpenAI-compatible endpoint: :func:`mrcstats.stats.cat.run_cat` with answers from
the query adapter.

Each chosen item is sent through :class:`~mrcstats.query.client.ChatClient` (the same retries, redaction
and answer extraction as ``mrcstats query``: the log rows are :mod:`mrcstats.query.runner`'s) and its row is
appended and flushed to the JSONL log before the next item is chosen. The selection is a function of the
seed and the answers, so a rerun of the same command replays the log's answers (sending nothing for them)
and continues where the run stopped: a killed and resumed run asks the same items and gives the same
result as an uninterrupted one. An item whose request fails after the retries is written as a failed row
and stops the run with an :class:`~mrcstats.errors.InputError` (the log is kept; rerun to resume).

The prompts come from ``tasks`` (a ``mrcstats query`` task file) or from the bank's item texts.
"""
from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mrcstats.errors import InputError
from mrcstats.query.log import dumps_row, load_log, log_lock
from mrcstats.query.runner import QueryConfig, log_row, now_iso, request_payload, resolve_api_key
from mrcstats.query.taskfile import TaskItem, read_taskfile

__all__ = ["CatQueryConfig", "bank_tasks", "run_cat_endpoint"]


@dataclass(frozen=True)
class CatQueryConfig:
    """An adaptive run against ``base_url`` (see :class:`~mrcstats.query.runner.QueryConfig` for the
    request settings and :func:`mrcstats.stats.cat.run_cat` for the CAT settings)."""

    bank: str
    model: str
    base_url: str
    out: str
    tasks: str | None = None
    api_key_env: str | None = None
    temperature: float | None = None
    #: the CAT seed (exposure control, interval draws); never sent to the endpoint
    seed: int = 0
    #: the model's sampling seed sent with each request (``query --seed``); None: none sent
    sampling_seed: int | None = None
    max_tokens: int | None = None
    max_attempts: int = 6
    backoff_base: float = 1.0
    timeout: float = 120.0
    max_items: int = 100
    target_se: float | None = None
    topk: int = 5
    level: float = 0.95
    draws: int = 400
    misfit: bool = True

    def query_config(self) -> QueryConfig:
        return QueryConfig(taskfile=self.tasks or self.bank, model=self.model, base_url=self.base_url, out=self.out,
                           api_key_env=self.api_key_env, concurrency=1, temperature=self.temperature,
                           seed=self.sampling_seed, max_tokens=self.max_tokens, max_attempts=self.max_attempts,
                           backoff_base=self.backoff_base, timeout=self.timeout, progress=False)


def bank_tasks(bank: Any, tasks_path: str | os.PathLike | None) -> tuple[dict[str, TaskItem], list[str]]:
    """The prompt of every askable bank item, from the task file or the bank's texts, and notes.

    A task file sharing no item with the bank, or disagreeing with the bank's keys, is another benchmark;
    a bank without texts and no task file cannot be asked."""
    ids = list(bank.items["item"])
    notes: list[str] = []
    if tasks_path is not None:
        tasks = {t.item: t for t in read_taskfile(tasks_path)}
        shared = [i for i in ids if i in tasks]
        if not shared:
            raise InputError(f"task file {tasks_path} shares no item with the bank (bank items e.g. "
                             f"{', '.join(map(repr, ids[:3]))}; task items e.g. "
                             f"{', '.join(map(repr, list(tasks)[:3]))}): the bank comes from another benchmark; "
                             "calibrate a bank on this benchmark's logs")
        if "gold" in bank.items.columns:
            gold = dict(zip(bank.items["item"], bank.items["gold"]))
            clash = [i for i in shared if gold.get(i) is not None and tasks[i].gold is not None
                     and str(gold[i]) != str(tasks[i].gold)]
            if len(clash) > max(0, len(shared) // 10):
                raise InputError(f"task file {tasks_path}: the key differs from the bank's on {len(clash)} of "
                                 f"{len(shared)} shared items (e.g. item {clash[0]!r}: task {tasks[clash[0]].gold!r}, "
                                 f"bank {gold[clash[0]]!r}): the bank comes from another benchmark or version")
        if len(shared) < len(ids):
            notes.append(f"{len(ids) - len(shared)} bank item(s) not in the task file are never asked")
        return {i: tasks[i] for i in shared}, notes
    if not bank.has_texts:
        raise InputError("the bank has no item texts (it was calibrated from a log without prompts); give the "
                         "benchmark's task file with --tasks TASKFILE")
    out: dict[str, TaskItem] = {}
    for r in bank.items.to_dict(orient="records"):
        prompt = r.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            continue
        out[r["item"]] = TaskItem(item=r["item"], messages=({"role": "user", "content": prompt},), prompt=prompt,
                                  gold=None if r.get("gold") is None else str(r["gold"]), cluster=r.get("content"))
    if len(out) < len(ids):
        notes.append(f"{len(ids) - len(out)} bank item(s) without a text are never asked")
    return out, notes


def run_cat_endpoint(cfg: CatQueryConfig, client_factory: Callable[..., Any] | None = None):
    """Run the adaptive test of ``cfg`` (see the module docstring); returns a :class:`~mrcstats.stats.cat.CatResult`."""
    from mrcstats.stats.cat import load_bank, run_cat

    qcfg = cfg.query_config()
    qcfg.validate()
    bank = load_bank(cfg.bank)
    tasks, notes = bank_tasks(bank, cfg.tasks)
    api_key = resolve_api_key(qcfg)
    out = Path(cfg.out)
    with log_lock(out):
        state = load_log(out)
        if state.torn_bytes:
            print(f"mrcstats cat run: cut off a torn last line ({state.torn_bytes} bytes) of {out}", file=sys.stderr)
        if client_factory is None:
            from mrcstats.query.client import ChatClient as client_factory
        client = client_factory(cfg.base_url, api_key, timeout=cfg.timeout, max_attempts=cfg.max_attempts,
                                backoff_base=cfg.backoff_base)
        from mrcstats._files import append_line

        replayed = 0
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            with open(out, "a", encoding="utf-8") as fh:

                def answer(item: str) -> Any:
                    nonlocal replayed
                    task = tasks[item]
                    prev = state.last.get((cfg.model, task.item, task.condition, 0))
                    if prev is not None and prev.get("status") == "ok":
                        replayed += 1
                        return prev.get("correct")
                    payload = request_payload(qcfg, task, 0)
                    started, t0 = now_iso(), time.monotonic()
                    outcome = client.complete(payload)
                    row = log_row(qcfg, task, 0, payload, outcome, started, time.monotonic() - t0)
                    row["cat_bank_sha256"] = bank.provenance.get("data_sha256")
                    append_line(fh, dumps_row(row))
                    state.last[(cfg.model, task.item, task.condition, 0)] = row
                    if row["status"] != "ok":
                        raise InputError(f"the endpoint did not answer item {item!r} after {row['attempts']} "
                                         f"attempt(s) ({row['error']}); the log {out} keeps the answers so far: "
                                         "rerun the same command to resume")
                    return row["correct"]

                res = run_cat(bank, answer, model=cfg.model, max_items=cfg.max_items, target_se=cfg.target_se,
                              seed=cfg.seed, topk=cfg.topk, level=cfg.level, draws=cfg.draws,
                              misfit=cfg.misfit, available=list(tasks), notes=notes)
        finally:
            client.close()
    if replayed:
        print(f"mrcstats cat run: {replayed} answer(s) replayed from {out}", file=sys.stderr)
    return res
