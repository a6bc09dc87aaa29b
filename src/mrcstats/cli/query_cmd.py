"""CLI subcommands for the query area (argument parsing only; logic lives in the API)."""
from __future__ import annotations

import argparse

from mrcstats._seeds import parse_seed
from mrcstats.cli._common import add_input, add_output


def register(sub: argparse._SubParsersAction) -> None:
    """Add this area's subcommands to the mrcstats parser."""
    p = sub.add_parser(
        "query", help="send a task file to an OpenAI-compatible endpoint; resumable JSONL log",
        description="Send each prompt of TASKFILE (JSONL: item, prompt or messages, optional gold, cluster, "
                    "condition, scorer) to an OpenAI-compatible chat-completions endpoint and append one JSON "
                    "line per (item, trial) to --out. Rerunning skips what the log already holds; a torn last "
                    "line is cut off. The log is read by `mrcstats ingest` as it is.")
    add_input(p, "taskfile", metavar="TASKFILE")
    p.add_argument("--model", required=True, help="model name sent to the endpoint and written to the log")
    p.add_argument("--base-url", required=True,
                   help="endpoint base URL, e.g. https://api.openai.com/v1 or http://127.0.0.1:8000/v1")
    p.add_argument("--api-key-env", metavar="VAR",
                   help="environment variable holding the API key (never written anywhere); omit for "
                        "endpoints without a key")
    add_output(p, "--out", required=True, metavar="LOG.jsonl", help="append-only JSONL log")
    p.add_argument("--concurrency", type=int, default=4, metavar="N", help="requests in flight (default 4)")
    p.add_argument("--temperature", type=float, metavar="T")
    p.add_argument("--top-p", type=float, metavar="P")
    p.add_argument("--seed", type=parse_seed, metavar="S", help="sampling seed; trial k sends S + k")
    p.add_argument("--trials", type=int, default=1, metavar="K", help="samples per prompt, trials 0..K-1")
    p.add_argument("--max-tokens", type=int, metavar="M")
    p.add_argument("--retry-failed", action="store_true",
                   help="re-send rows recorded as failed; the log is rewritten atomically with the new outcome")
    p.add_argument("--max-attempts", type=int, default=6,
                   help="attempts per request on 429/5xx/network errors before the row is failed (default 6)")
    p.add_argument("--backoff", type=float, default=1.0, metavar="SECONDS",
                   help="first retry delay; doubles per attempt, with jitter, capped at 60 s (default 1)")
    p.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS", help="per-request timeout")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.add_argument("--json", action="store_true", help="print the run's counts as one JSON object on stdout")
    p.set_defaults(func=_query)


def _query(args: argparse.Namespace) -> int:
    from mrcstats.query.runner import QueryConfig, run_query

    cfg = QueryConfig(taskfile=args.taskfile, model=args.model, base_url=args.base_url, out=args.out,
                      api_key_env=args.api_key_env, concurrency=args.concurrency, temperature=args.temperature,
                      top_p=args.top_p, seed=args.seed, trials=args.trials, max_tokens=args.max_tokens,
                      retry_failed=args.retry_failed, max_attempts=args.max_attempts, backoff_base=args.backoff,
                      timeout=args.timeout, progress=False if args.no_progress else None)
    report = run_query(cfg)
    from mrcstats.cli._common import info, output  # after the run: it pulls in numpy

    if args.json:
        output(args, report.to_dict())
    info(report.summary())
    return 130 if report.interrupted else 0
