"""CLI subcommands ``ingest`` and ``summary`` (argument parsing only; logic lives in the API)."""
from __future__ import annotations

import argparse

from mrcstats.cli._common import (
    add_by_option,
    add_json_flag,
    add_log_options,
    by_columns,
    info,
    output,
    read_log_args,
)


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``ingest`` and ``summary`` to the mrcstats parser."""
    p = sub.add_parser("ingest", help="read response logs, validate them, write the canonical log",
                       description="Read response logs (CSV/TSV/JSON/JSONL/Parquet, gzip, folders; maskcode, "
                                   "ELAGENT, lm-eval-harness, Inspect AI), validate them and write the "
                                   "canonical log (Parquet) atomically.")
    p.add_argument("paths", nargs="+", metavar="PATH", help="files or folders, all of one format")
    add_log_options(p)
    p.add_argument("--out", metavar="LOG.parquet|DIR/",
                   help="write the canonical log here (.parquet or .csv); a path ending in / writes a "
                        "partitioned dataset folder (as --dataset)")
    p.add_argument("--dataset", metavar="DIR",
                   help="write a hive-partitioned Parquet dataset (by model) instead: streamed in bounded memory, "
                        "validated chunk by chunk, renamed into place at the end; read lazily by summary etc.")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="with --dataset: read the inputs in N processes (default 1)")
    add_json_flag(p)
    p.set_defaults(func=_ingest)

    s = sub.add_parser("summary", help="accuracy per group with Wilson CI and cluster-robust SE",
                       description="Accuracy per group (invalid answers count as not correct), accuracy over "
                                   "valid answers, invalid count, Wilson 95% CI and the cluster-robust SE "
                                   "(clustered on 'cluster', Miller 2024).")
    s.add_argument("log", nargs="+", metavar="LOG", help="a canonical log, a dataset folder (mrcstats ingest --dataset; "
                   "aggregated lazily in DuckDB) or any source read_log reads")
    add_by_option(s, "model")
    s.add_argument("--engine", choices=("duckdb", "memory", "dask"), default=None,
                   help="aggregation engine (default: DuckDB for a dataset folder, pandas otherwise)")
    s.add_argument("--scheduler", metavar="ADDRESS",
                   help="--engine dask: address of a running Dask scheduler (default: in-process)")
    s.add_argument("--invalid", choices=("wrong", "exclude"), default="wrong",
                   help="invalid answers count as not correct (wrong, default) or are left out (exclude)")
    s.add_argument("--trials", choices=("pool", "mean"), default="pool",
                   help="pool the trials (default) or average the per-trial accuracy (mean: adds SD and t interval)")
    add_log_options(s)
    add_json_flag(s)
    s.set_defaults(func=_summary)


def _ingest(args: argparse.Namespace) -> int:
    from mrcstats._files import check_output_path
    from mrcstats.io import log_stats, write_log
    from mrcstats.io.reader import LOG_SUFFIXES

    target = args.dataset or (args.out if args.out and args.out.endswith(("/", "\\")) else None)
    if target:
        return _ingest_dataset(args, target)
    if args.out:
        check_output_path(args.out, suffixes=LOG_SUFFIXES, inputs=args.paths)
    log = read_log_args(args, args.paths, "ingest", report=False)  # the text output lists them
    if args.out:
        write_log(log, args.out)
        info(f"wrote {len(log)} rows to {args.out}")
    stats = log_stats(log)
    return output(args, stats, _ingest_text(stats))


def _ingest_dataset(args: argparse.Namespace, target: str) -> int:
    from mrcstats.cli._common import parse_kv
    from mrcstats.errors import InputError
    from mrcstats.io.dataset import dataset_stats, write_dataset

    if args.dataset and args.out:
        raise InputError("give either --out or --dataset, not both")
    mapping = parse_kv(args.map, "--map")
    ds = write_dataset(args.paths, target, format=args.fmt, mapping=mapping or None, model=args.model,
                       on_duplicate=args.on_duplicate, jobs=args.jobs)
    info(f"wrote {len(ds)} rows in {len(ds.files)} files to the dataset {ds.path}")
    stats = dataset_stats(ds)
    return output(args, stats, _ingest_text(stats))


def _ingest_text(s: dict) -> str:
    conds = ", ".join(repr(c) for c in s["conditions"])
    lines = [f"{s['rows']} rows: {len(s['models'])} model(s), {s['items']} items, {s['clusters']} clusters, "
             + f"conditions: {conds}"]
    width = max(len(m) for m in s["models"])
    for m in s["models"]:
        lines.append(f"  {m.ljust(width)}  accuracy {s['accuracy'][m]:.4f}  invalid {s['invalid'][m]}")
    if s["skipped"]:
        lines.append("skipped: " + "; ".join(f"{k}: {v}" for k, v in s["skipped"].items()))
    else:
        lines.append("skipped: none")
    return "\n".join(lines)


def _summary(args: argparse.Namespace) -> int:
    from mrcstats.io.dataset import is_dataset, open_dataset
    from mrcstats.stats.accuracy import summarize

    if len(args.log) == 1 and is_dataset(args.log[0]) and not args.map and not args.model and not args.fmt:
        log = open_dataset(args.log[0])        # a dataset folder: lazy, aggregated by DuckDB
    else:
        log = read_log_args(args, args.log, "summary")
    by = by_columns(args)
    if args.scheduler and args.engine != "dask":
        from mrcstats.errors import InputError

        raise InputError("--scheduler goes with --engine dask")
    res = summarize(log, by=by, engine=args.engine, scheduler=args.scheduler, invalid=args.invalid,
                    trials=args.trials)
    return output(args, res.to_dict(), res.summary())
