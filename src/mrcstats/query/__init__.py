"""mrcstats.query: send task files to OpenAI-compatible chat-completions endpoints.

``run_query(QueryConfig(...))`` writes a resumable JSONL log that ``mrcstats
ingest`` reads as a canonical response log. Importing this package is cheap;
httpx is imported when a run starts.
"""
from __future__ import annotations

from mrcstats.query.runner import QueryConfig, QueryReport, run_query
from mrcstats.query.taskfile import TaskItem, read_taskfile

__all__ = ["QueryConfig", "QueryReport", "TaskItem", "lm_meta", "read_taskfile", "run_query"]


def lm_meta(model: str, base_url: str, api_key: str | None = None, **kw):
    """A masking meta-information hook (:class:`mrcstats.tasks.masking.LMMeta`) answered by ``model`` at an
    OpenAI-compatible ``base_url`` through :class:`~mrcstats.query.client.ChatClient`."""
    from mrcstats.query.client import ChatClient
    from mrcstats.tasks.masking import LMMeta

    return LMMeta(model=model, client=ChatClient(base_url, api_key), **kw)
