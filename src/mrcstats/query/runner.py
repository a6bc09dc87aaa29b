"""Send a task file to a chat-completions endpoint and append the outcomes to a resumable log.

Each (item, condition, trial) is sent once per model; its outcome -- ``ok`` with
the response, or ``failed`` after the bounded retries -- is appended to the log
as one JSON line and flushed at once (:func:`mrcstats._files.append_line`), so
killing the process loses only the requests in flight. A rerun skips what the
log already holds; ``retry_failed=True`` re-sends the failed rows and rewrites
the log atomically with the new outcome in place of the old one.

Log rows carry the canonical keys read by ``mrcstats ingest``: ``model``,
``item``, ``trial``, ``condition``, ``cluster``, ``correct`` (true/false/null),
``response``, ``gold``, ``pred``, plus ``prompt``, ``status``, ``attempts``,
``error``, the sampling parameters, timestamps, latency and token usage, and
any extra fields of the task.
"""
from __future__ import annotations

import datetime as _dt
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mrcstats._repr import Result
from mrcstats.errors import InputError
from mrcstats.query.log import Key, compact, dumps_row, load_log, log_lock
from mrcstats.query.taskfile import TaskItem, read_taskfile


@dataclass(frozen=True)
class QueryConfig:
    """Everything one query run needs. ``api_key_env`` names the variable holding the key
    (the key itself is never stored). ``seed`` is sent as ``seed + trial``."""

    taskfile: str
    model: str
    base_url: str
    out: str
    api_key_env: str | None = None
    concurrency: int = 4
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    trials: int = 1
    max_tokens: int | None = None
    retry_failed: bool = False
    max_attempts: int = 6
    backoff_base: float = 1.0
    backoff_max: float = 60.0
    timeout: float = 120.0
    progress: bool | None = None

    def secrets(self) -> list[str]:
        """What must never be written: the API key and any credentials inside ``base_url``."""
        from mrcstats.query.redact import url_secrets

        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        return [s for s in (key, *url_secrets(self.base_url)) if s]

    def validate(self) -> None:
        if self.trials < 1:
            raise InputError(f"--trials must be at least 1, got {self.trials}")
        if self.concurrency < 1:
            raise InputError(f"--concurrency must be at least 1, got {self.concurrency}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise InputError(f"--max-tokens must be positive, got {self.max_tokens}")
        if self.temperature is not None and not 0 <= self.temperature <= 2:
            raise InputError(f"--temperature must be in [0, 2], got {self.temperature}")
        if self.top_p is not None and not 0 <= self.top_p <= 1:
            raise InputError(f"--top-p must be in [0, 1], got {self.top_p}")
        if not self.model:
            raise InputError("--model must not be empty")
        from mrcstats._files import check_output_path
        from mrcstats.query.client import completions_url

        completions_url(self.base_url)
        check_output_path(self.out, inputs=[self.taskfile])


@dataclass(frozen=True, repr=False)
class QueryReport(Result):
    """Counts of one run: tasks x trials wanted, already in the log, sent, ok, failed, and the log size."""

    wanted: int
    already: int
    sent: int
    ok: int
    failed: int
    retried_failed: int
    torn_bytes: int
    log_rows: int
    out: str
    interrupted: bool = False

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame([self.to_dict()])

    def summary(self) -> str:
        s = (f"query: {self.wanted} (item, trial) wanted, {self.already} already in the log, sent {self.sent}: "
             f"{self.ok} ok, {self.failed} failed")
        if self.retried_failed:
            s += f" ({self.retried_failed} were failed rows retried)"
        if self.torn_bytes:
            s += f"; cut a torn last line of {self.torn_bytes} bytes"
        s += f"; log {self.out} has {self.log_rows} rows"
        if self.interrupted:
            s += " (interrupted: rerun the same command to finish)"
        return s


def now_iso() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")


def resolve_api_key(cfg: QueryConfig) -> str | None:
    if not cfg.api_key_env:
        return None
    key = os.environ.get(cfg.api_key_env)
    if not key:
        raise InputError(f"--api-key-env {cfg.api_key_env}: the environment variable is not set or empty; "
                         f"export it, or drop the flag for endpoints without a key")
    return key


def request_payload(cfg: QueryConfig, task: TaskItem, trial: int) -> dict[str, Any]:
    p: dict[str, Any] = {"model": cfg.model, "messages": list(task.messages)}
    if cfg.temperature is not None:
        p["temperature"] = cfg.temperature
    if cfg.top_p is not None:
        p["top_p"] = cfg.top_p
    if cfg.seed is not None:
        p["seed"] = cfg.seed + trial
    if cfg.max_tokens is not None:
        p["max_tokens"] = cfg.max_tokens
    return p


def log_row(cfg: QueryConfig, task: TaskItem, trial: int, payload: dict, outcome: Any, started: str,
         latency: float) -> dict[str, Any]:
    from mrcstats.query.redact import redact
    from mrcstats.tasks.elagent.scoring import extract, score

    pred = extract(outcome.response, task.scorer, task.gold) if outcome.status == "ok" else None
    correct = score(pred, task.gold, task.scorer) if outcome.status == "ok" else None
    row: dict[str, Any] = {
        "model": cfg.model, "item": task.item, "trial": trial, "condition": task.condition,
        "cluster": task.cluster if task.cluster is not None else task.item,
        "correct": correct, "response": outcome.response, "gold": task.gold, "pred": pred,
        "status": outcome.status, "attempts": outcome.attempts,
        "error": None if outcome.error is None else redact(outcome.error, cfg.secrets()),
        "prompt": task.prompt,
        "temperature": payload.get("temperature"), "top_p": payload.get("top_p"), "seed": payload.get("seed"),
        "max_tokens": payload.get("max_tokens"),
        "started_at": started, "finished_at": now_iso(), "latency_s": round(latency, 4),
        **{k: outcome.usage.get(k) for k in ("prompt_tokens", "completion_tokens", "total_tokens")},
        "finish_reason": outcome.finish_reason, "response_model": outcome.response_model,
    }
    for k, v in task.extra.items():
        row.setdefault(k, v)
    return row


def run_query(cfg: QueryConfig, client_factory: Callable[..., Any] | None = None) -> QueryReport:
    """Run ``cfg`` (see the module docstring) and return its :class:`QueryReport`.

    Ctrl-C stops sending, writes what has arrived and returns a report with
    ``interrupted=True``; ``client_factory`` replaces :class:`~mrcstats.query.client.ChatClient`
    (tests).
    """
    cfg.validate()
    tasks = read_taskfile(cfg.taskfile)
    api_key = resolve_api_key(cfg)
    out = Path(cfg.out)
    with log_lock(out):
        return _run(cfg, tasks, api_key, out, client_factory)


def _run(cfg: QueryConfig, tasks: list[TaskItem], api_key: str | None, out: Path,
         client_factory: Callable[..., Any] | None) -> QueryReport:
    state = load_log(out)
    if state.torn_bytes:
        print(f"mrcstats query: cut off a torn last line ({state.torn_bytes} bytes) of {out}", file=sys.stderr)
    if state.superseded:
        n = compact(out, state.rows)
        print(f"mrcstats query: compacted {out} to {n} rows (one per item and trial)", file=sys.stderr)
        state = load_log(out)

    todo: list[tuple[TaskItem, int]] = []
    already = retried = 0
    for task in tasks:
        for trial in range(cfg.trials):
            prev = state.last.get((cfg.model, task.item, task.condition, trial))
            if prev is None:
                todo.append((task, trial))
            elif cfg.retry_failed and prev.get("status") == "failed":
                todo.append((task, trial))
                retried += 1
            else:
                already += 1
    wanted = len(tasks) * cfg.trials

    stop = threading.Event()
    if client_factory is None:
        from mrcstats.query.client import ChatClient as client_factory
    client = client_factory(cfg.base_url, api_key, timeout=cfg.timeout, max_attempts=cfg.max_attempts,
                            backoff_base=cfg.backoff_base, backoff_max=cfg.backoff_max, stop=stop)
    ok = failed = sent = 0
    interrupted = False
    from mrcstats._progress import progress

    bar = progress(total=len(todo), desc=f"query {cfg.model}", unit="req", disable=(
        None if cfg.progress is None else not cfg.progress))
    # Ctrl-C (SIGINT) only sets `stop`: an asynchronous KeyboardInterrupt inside
    # concurrent.futures.wait() can leave a future's lock held and hang the pool's shutdown.
    # A second Ctrl-C gets the previous handler back (plain KeyboardInterrupt).
    prev_sigint = None
    if threading.current_thread() is threading.main_thread():
        def _on_sigint(signum: int, frame: Any) -> None:
            stop.set()
            signal.signal(signal.SIGINT, prev_sigint or signal.default_int_handler)

        prev_sigint = signal.signal(signal.SIGINT, _on_sigint)
    try:

        def work(task: TaskItem, trial: int) -> dict[str, Any]:
            payload = request_payload(cfg, task, trial)
            started, t0 = now_iso(), time.monotonic()
            outcome = client.complete(payload)
            return log_row(cfg, task, trial, payload, outcome, started, time.monotonic() - t0)

        out.parent.mkdir(parents=True, exist_ok=True)
        with open(out, "a", encoding="utf-8") as fh, ThreadPoolExecutor(cfg.concurrency) as pool:
            from mrcstats._files import append_line

            queue = iter(todo)
            inflight: set[Future] = set()

            def refill() -> None:
                while len(inflight) < 2 * cfg.concurrency and not stop.is_set():
                    nxt = next(queue, None)
                    if nxt is None:
                        return
                    inflight.add(pool.submit(work, *nxt))

            try:
                refill()
                while inflight and not stop.is_set():
                    done, inflight_left = wait(inflight, timeout=0.25, return_when=FIRST_COMPLETED)
                    inflight.clear()
                    inflight.update(inflight_left)
                    for fut in done:
                        row = fut.result()
                        append_line(fh, dumps_row(row))
                        sent += 1
                        ok += row["status"] == "ok"
                        failed += row["status"] == "failed"
                        bar.update(1)
                    refill()
            except BaseException:
                stop.set()
                for fut in inflight:
                    fut.cancel()
                raise
            if stop.is_set():  # interrupted: send nothing more; what is in flight is not written
                interrupted = True
                for fut in inflight:
                    fut.cancel()
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if prev_sigint is not None and signal.getsignal(signal.SIGINT) is not prev_sigint:
            signal.signal(signal.SIGINT, prev_sigint or signal.default_int_handler)
        bar.close()
        client.close()
    final = load_log(out, repair=False)
    if final.superseded:
        compact(out, final.rows)
        final = load_log(out, repair=False)
    report = QueryReport(wanted, already, sent, ok, failed, retried, state.torn_bytes, len(final.rows), str(out),
                         interrupted)
    return report


__all__ = ["Key", "QueryConfig", "QueryReport", "run_query"]
