"""mrcstats.query: send task files to OpenAI-compatible chat-completions endpoints.

``run_query(QueryConfig(...))`` writes a resumable JSONL log that ``mrcstats
ingest`` reads as a canonical response log. Importing this package is cheap;
httpx is imported when a run starts.
"""
from __future__ import annotations

from mrcstats.query.runner import QueryConfig, QueryReport, run_query
from mrcstats.query.taskfile import TaskItem, read_taskfile

__all__ = ["QueryConfig", "QueryReport", "TaskItem", "read_taskfile", "run_query"]
