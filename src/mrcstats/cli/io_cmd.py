"""CLI subcommands ``ingest`` and ``summary`` (argument parsing only; logic lives in the API)."""
from __future__ import annotations

import argparse

from mrcstats.cli._common import add_json_flag, info, output, parse_kv, parse_list
from mrcstats.io.detect import FORMATS as _FORMATS


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``ingest`` and ``summary`` to the mrcstats parser."""
    p = sub.add_parser("ingest", help="read response logs, validate them, write the canonical log",
                       description="Read response logs (CSV/TSV/JSON/JSONL/Parquet, gzip, folders; maskcode, "
                                   "ELAGENT, lm-eval-harness, Inspect AI), validate them and write the "
                                   "canonical log (Parquet) atomically.")
    p.add_argument("paths", nargs="+", metavar="PATH", help="files or folders, all of one format")
    p.add_argument("--format", choices=_FORMATS, help="source format (default: detected by content)")
    p.add_argument("--map", action="append", metavar="FIELD=COLUMN", default=[],
                   help="name the source column for a log field, e.g. --map item=question_id (repeatable)")
    p.add_argument("--model", help="model name for sources that do not name one")
    p.add_argument("--on-duplicate", choices=("error", "first", "last"), default="error",
                   help="repeated (model, item, trial, condition) keys: error (default) or keep first/last")
    p.add_argument("--out", metavar="LOG.parquet|DIR/",
                   help="write the canonical log here (.parquet or .csv); a path ending in / writes a "
                        "partitioned dataset folder (as --dataset)")
    p.add_argument("--dataset", metavar="DIR",
                   help="write a hive-partitioned Parquet dataset (by model) instead: streamed in bounded memory, "
                        "validated chunk by chunk, renamed into place at the end; read lazily by summary etc.")
    add_json_flag(p)
    p.set_defaults(func=_ingest)

    s = sub.add_parser("summary", help="accuracy per group with Wilson CI and cluster-robust SE",
                       description="Accuracy per group (invalid answers count as not correct), accuracy over "
                                   "valid answers, invalid count, Wilson 95%% CI and the cluster-robust SE "
                                   "(clustered on 'cluster', Miller 2024).")
    s.add_argument("log", nargs="+", metavar="LOG", help="a canonical log (or any source read_log reads)")
    s.add_argument("--by", default="model", metavar="COL[,COL...]", help="grouping columns (default: model)")
    s.add_argument("--format", choices=_FORMATS, help="source format (default: detected by content)")
    s.add_argument("--map", action="append", metavar="FIELD=COLUMN", default=[],
                   help="name the source column for a log field (repeatable)")
    s.add_argument("--model", help="model name for sources that do not name one")
    add_json_flag(s)
    s.set_defaults(func=_summary)


def _ingest(args: argparse.Namespace) -> int:
    from mrcstats.io import log_stats, read_log, write_log

    mapping = parse_kv(args.map, "--map")
    target = args.dataset or (args.out if args.out and args.out.endswith(("/", "\\")) else None)
    if target:
        from mrcstats.io.dataset import dataset_stats, write_dataset

        if args.dataset and args.out:
            from mrcstats.errors import InputError

            raise InputError("give either --out or --dataset, not both")
        ds = write_dataset(args.paths, target, format=args.format, mapping=mapping or None, model=args.model,
                           on_duplicate=args.on_duplicate)
        info(f"wrote {len(ds)} rows in {len(ds.files)} files to the dataset {ds.path}")
        stats = dataset_stats(ds)
        return output(args, stats, _ingest_text(stats))
    log = read_log(args.paths, format=args.format, mapping=mapping or None, model=args.model,
                   on_duplicate=args.on_duplicate)
    if args.out:
        write_log(log, args.out)
        info(f"wrote {len(log)} rows to {args.out}")
    stats = log_stats(log)
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
    from mrcstats.io import open_log
    from mrcstats.stats.accuracy import summarize

    mapping = parse_kv(args.map, "--map")
    log = open_log(args.log, format=args.format, mapping=mapping or None, model=args.model)  # lazy for a dataset
    by = parse_list(args.by, "--by")
    res = summarize(log, by=by)
    return output(args, res.to_dict(), res.summary())
