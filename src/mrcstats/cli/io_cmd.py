"""CLI subcommands ``ingest``, ``summary`` and ``export`` (argument parsing only; logic lives in the API)."""
from __future__ import annotations

import argparse
import textwrap

from mrcstats.cli._common import (
    add_by_option,
    add_input,
    add_json_flag,
    add_log_options,
    add_output,
    by_columns,
    info,
    map_arg,
    model_arg,
    output,
    read_log_args,
)


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``ingest``, ``summary`` and ``export`` to the mrcstats parser."""
    from mrcstats.io.formats import LOG_SUFFIXES, formats_epilog, formats_phrase

    p = sub.add_parser("ingest", help="read response logs, validate them, write the canonical log",
                       description=textwrap.fill(f"Read response logs ({formats_phrase()}), validate them and "
                                                 f"write the canonical log (Parquet) atomically.", 88),
                       epilog=formats_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_input(p, "paths", nargs="+", metavar="PATH", help="files or folders, all of one format")
    add_log_options(p)
    add_output(p, "--out", kind="auto", suffixes=LOG_SUFFIXES, metavar="LOG.parquet|DIR/",
                   help="write the canonical log here (.parquet or .csv); a path ending in / writes a "
                        "partitioned dataset folder (as --dataset)")
    add_output(p, "--dataset", kind="folder", metavar="DIR",
                   help="write a hive-partitioned Parquet dataset (by model) instead: streamed in bounded memory, "
                        "validated chunk by chunk, renamed into place at the end; read lazily by summary etc.")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="with --dataset: read the inputs in N processes (default 1)")
    add_json_flag(p)
    p.set_defaults(func=_ingest)

    s = sub.add_parser("summary", help="accuracy per group with (clustered) Wilson CI and cluster-robust SE",
                       description="Accuracy per group (invalid answers count as not correct), accuracy over "
                                   "valid answers, invalid count, the 95% CI (the Wilson score interval, or the clustered Wilson "
                                   "interval when a cluster holds several rows: Korn-Graubard effective n from "
                                   "the CR1 SE, capped at n, t critical value on G - 1 df) and the cluster-robust SE "
                                   "(clustered on 'cluster', Miller 2024): the trial level, every epoch a row. "
                                   "For Inspect AI logs the tool's own headline (the declared epoch reducer "
                                   "within each sample, then mean and Inspect's stderr) is printed beside it.")
    add_input(s, "log", nargs="+", metavar="LOG", help="a canonical log, a dataset folder (mrcstats ingest --dataset; "
                   "aggregated lazily in DuckDB) or any source read_log reads")
    add_by_option(s, "model")
    s.add_argument("--engine", choices=("duckdb", "memory", "dask"), default=None,
                   help="aggregation engine (default: DuckDB for a dataset folder, pandas otherwise)")
    s.add_argument("--scheduler", metavar="ADDRESS",
                   help="--engine dask: address of a running Dask scheduler (default: in-process)")
    s.add_argument("--invalid", choices=("wrong", "exclude"), default="wrong",
                   help="invalid answers count as not correct (wrong, default) or are left out (exclude)")
    s.add_argument("--outcome", choices=("auto", "correct", "score"), default="auto",
                   help="the outcome summarised: score (graded: partial credit, f1, judge ratings; mean score) or "
                        "correct (accuracy); auto = score when the log has scores other than 0/1 (docs/scores.md)")
    s.add_argument("--trials", choices=("pool", "mean"), default="pool",
                   help="pool the trials (default) or average the per-trial accuracy (mean: adds the SD over trials)")
    add_log_options(s)
    add_json_flag(s)
    s.set_defaults(func=_summary)

    e = sub.add_parser("export", help="write a log in another tool's format (Every Eval Ever)",
                       description="Write a log (any source mrcstats reads) as Every Eval Ever files: per "
                                   "(evaluation, model) an aggregate <uuid>.json with mrcstats' accuracy and "
                                   "cluster-robust SE, and its <uuid>_samples.jsonl, validated against the EEE "
                                   "0.3.0 JSON schemas, in the EEE datastore layout under --out.")
    add_input(e, "log", nargs="+", metavar="LOG", help="a canonical log or any source read_log reads")
    e.add_argument("--to", choices=("eee",), default="eee", help="output format (eee: Every Eval Ever)")
    add_output(e, "--out", kind="folder", required=True, metavar="DIR",
               help="folder to write (<evaluation>/<developer>/<model>/); built in a hidden folder beside it and "
                    "moved into place at the end; files already there are kept")
    e.add_argument("--evaluation-name", metavar="NAME",
                   help="EEE evaluation_name of every row (default: the log's task column, else 'evaluation')")
    e.add_argument("--source-organization", default="unknown", metavar="ORG",
                   help="source_metadata.source_organization_name (who ran or shares the evaluation)")
    e.add_argument("--evaluator-relationship", default="third_party",
                   choices=("first_party", "third_party", "collaborative", "other"),
                   help="source_metadata.evaluator_relationship (default third_party)")
    e.add_argument("--eval-library", default="unknown=unknown", metavar="NAME=VERSION",
                   help="the tool that ran the evaluation, e.g. inspect_ai=0.3.285 (default unknown=unknown)")
    e.add_argument("--timestamp", metavar="UNIX_TIME",
                   help="retrieved_timestamp (default now); the same value gives the same file names")
    add_log_options(e)
    add_json_flag(e)
    e.set_defaults(func=_export)


def _ingest(args: argparse.Namespace) -> int:
    from mrcstats.io import log_stats

    target = args.dataset or (args.out if args.out and args.out.kind == "folder" else None)
    if target:
        return _ingest_dataset(args, target)
    if args.out:   # a large CSV/TSV/JSONL file is streamed (bounded memory), anything else read whole
        from mrcstats.io.ingest_log import ingest_log

        res = ingest_log(args.paths, args.out, format=args.fmt, mapping=map_arg(args, "ingest") or None,
                         model=model_arg(args.model), on_duplicate=args.on_duplicate, threshold=args.threshold)
        info(f"wrote {res.stats['rows']} rows to {args.out}")
        return output(args, res.stats, _ingest_text(res.stats))
    log = read_log_args(args, args.paths, "ingest", report=False)  # the text output lists them
    stats = log_stats(log)
    return output(args, stats, _ingest_text(stats))


def _ingest_dataset(args: argparse.Namespace, target: str) -> int:
    from mrcstats.cli._common import parse_kv
    from mrcstats.errors import InputError
    from mrcstats.io.dataset import dataset_stats
    from mrcstats.io.ingest import write_dataset

    if args.dataset and args.out:
        raise InputError("give either --out or --dataset, not both")
    mapping = parse_kv(args.map, "--map")
    ds = write_dataset(args.paths, target, format=args.fmt, mapping=mapping or None, model=model_arg(args.model),
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
        if s.get("outcome") == "score":   # a graded log: the mean score (docs/scores.md)
            acc = f"  accuracy (score >= {s['threshold']:g}) {s['accuracy_threshold'][m]:.4f}" \
                if "threshold" in s else ""
            lines.append(f"  {m.ljust(width)}  mean score {s['accuracy'][m]:.4f}{acc}  invalid {s['invalid'][m]}")
        else:
            lines.append(f"  {m.ljust(width)}  accuracy {s['accuracy'][m]:.4f}  invalid {s['invalid'][m]}")
    if s["skipped"]:
        lines.append("skipped: " + "; ".join(f"{k}: {v}" for k, v in s["skipped"].items()))
    else:
        lines.append("skipped: none")
    return "\n".join(lines)


def _summary(args: argparse.Namespace) -> int:
    from mrcstats.stats.accuracy import summarize

    log = read_log_args(args, args.log, "summary", lazy=True)    # a dataset folder: lazy, aggregated by DuckDB
    by = by_columns(args)
    if args.scheduler and args.engine != "dask":
        from mrcstats.errors import InputError

        raise InputError("--scheduler goes with --engine dask")
    res = summarize(log, by=by, backend=args.engine, scheduler=args.scheduler, invalid=args.invalid,
                    trials=args.trials, outcome=args.outcome)
    from mrcstats.stats.headline import has_headline, inspect_headline

    if has_headline(log):  # an Inspect log: the tool's own headline beside the trial-level figure
        head = inspect_headline(log)
        return output(args, {**res.to_dict(), "figure": "trial level: every epoch of a sample is a row, pooled",
                             "tool_headline": head.to_dict()},
                      "trial level (every epoch a row, pooled):\n" + res.summary() + "\n\n" + head.summary())
    return output(args, res.to_dict(), res.summary())


def _export(args: argparse.Namespace) -> int:
    from mrcstats.errors import InputError
    from mrcstats.report.eee import write_eee

    lib = args.eval_library.split("=", 1)
    if len(lib) != 2 or not lib[0].strip():
        raise InputError(f"--eval-library expects NAME=VERSION (e.g. inspect_ai=0.3.285), got {args.eval_library!r}")
    log = read_log_args(args, args.log, "export")
    paths = write_eee(log, args.out, evaluation_name=args.evaluation_name,
                      source_organization_name=args.source_organization,
                      evaluator_relationship=args.evaluator_relationship,
                      eval_library=(lib[0].strip(), lib[1].strip()), retrieved_timestamp=args.timestamp)
    info(f"wrote {len(paths)} Every Eval Ever file(s) under {args.out}")
    return output(args, {"format": args.to, "written": [str(p) for p in paths]}, "\n".join(map(str, paths)))
