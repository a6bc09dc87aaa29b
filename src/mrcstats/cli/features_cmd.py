"""CLI subcommands ``features`` and ``models download`` (argument parsing only; logic lives in the API)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mrcstats.cli._common import (
    add_input,
    add_json_flag,
    add_log_options,
    add_output,
    info,
    output,
    read_log_args,
)

_PARSERS = ("auto", "stanza", "link-grammar", "trees", "none")


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``features`` and ``models download`` to the mrcstats parser."""
    p = sub.add_parser(
        "features", help="token counts, syntactic density and wh-words per item",
        description="Item features (seed 003): NLTK token counts, syntactic density (all constituency-tree "
                    "nodes per token and per leaf) for the whole MCQ and per piece (passage, question, "
                    "options), wh-words, and the z-scored scaled_tok/scaled_con. Items come from a log's "
                    "text columns or from --items (RACE JSON files/folder, or a CSV/Parquet table with "
                    "item and tree columns for --parser trees).")
    add_input(p, "log", nargs="*", metavar="LOG", help="a canonical log (or any source `ingest` reads)")
    add_log_options(p)
    add_input(p, "--items", metavar="PATH",
                   help="items instead of a log: RACE JSON file(s)/folder, or a CSV/TSV/Parquet item table")
    p.add_argument("--parser", choices=_PARSERS, default="auto",
                   help="constituency parser (default auto: stanza when its models are present, "
                        "else link-grammar)")
    p.add_argument("--jobs", type=int, default=1, metavar="N", help="parallel parsing processes (default 1)")
    add_output(p, "--cache", kind="folder", metavar="DIR",
                   help="parse cache directory (default $MRCSTATS_CACHE or ~/.cache/mrcstats, + /features)")
    p.add_argument("--no-cache", action="store_true", help="parse everything, read and write no cache")
    add_input(p, "--models-dir", metavar="DIR", help="Stanza models directory (see `mrcstats models download`)")
    p.add_argument("--max-parse-time", type=int, metavar="S",
                   help="link-grammar: safety limit in seconds per sentence and pass (default 30); "
                        "parses are bounded by sentence length, so results do not depend on machine load")
    add_output(p, "--out", suffixes=(".parquet", ".pq", ".csv"), metavar="FEATURES.parquet", help="write the feature table here (.parquet or .csv)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar on stderr (default: when stderr is a terminal)")
    add_json_flag(p)
    p.set_defaults(func=_features)

    m = sub.add_parser("models", help="manage parser models (Stanza)",
                       description="Manage the optional Stanza models used by `features --parser stanza`.")
    msub = m.add_subparsers(dest="models_command", metavar="ACTION", parser_class=type(p))
    d = msub.add_parser("download", help="download Stanza's English tokenize/pos/constituency models",
                        description="Download Stanza's English tokenize, pos and constituency models "
                                    "(wraps stanza.download; needs the stanza extra and network access).")
    add_output(d, "--dir", kind="folder", metavar="DIR",
                   help="models directory (default $MRCSTATS_STANZA_DIR, $STANZA_RESOURCES_DIR or "
                        "~/stanza_resources)")
    add_json_flag(d)
    d.set_defaults(func=_models_download)
    m.set_defaults(func=_models_help, _models_parser=m)


def _features(args: argparse.Namespace) -> int:
    from mrcstats.errors import InputError
    from mrcstats.features import compute_features, items_from_frame, load_items

    if bool(args.log) == bool(args.items):
        raise InputError("give either a LOG or --items PATH (not both, not neither)")
    if args.jobs < 1:
        raise InputError(f"--jobs must be at least 1, got {args.jobs}")
    if args.items:
        source = load_items(args.items)
    else:
        log = read_log_args(args, args.log, "features")
        source = items_from_frame(log, source=", ".join(args.log))
    cache = None
    if not args.no_cache and args.parser not in ("none", "trees"):
        from mrcstats.features.cache import default_cache_dir

        cache = Path(args.cache).expanduser() if args.cache else default_cache_dir()
    opts = {"max_parse_time": args.max_parse_time} if args.max_parse_time is not None else None
    res = compute_features(source, parser=args.parser, jobs=args.jobs, cache=cache, models_dir=args.models_dir,
                           parser_options=opts if args.parser in ("link-grammar", "auto") else None,
                           progress=args.progress)
    if opts and res.parser != "link-grammar":
        info(f"note: --max-parse-time applies to link-grammar only, not {res.parser}")
    df = res.to_frame()
    if args.out:
        args.out.write_table(df)
        info(f"wrote {len(df)} rows to {args.out}")
    payload = res.to_dict()
    payload["out"] = args.out
    payload["cache"] = None if cache is None else str(cache)
    if not args.out:
        payload["features"] = df
    text = res.summary() + ("" if args.out else "\n(use --out FEATURES.parquet to save the table)")
    return output(args, payload, text)


def _models_download(args: argparse.Namespace) -> int:
    from mrcstats.features.parsers.stanza import download_models

    d = download_models(args.dir)
    return output(args, {"models_dir": str(d), "processors": ["tokenize", "pos", "constituency"]},
                  f"Stanza English models are in {d}")


def _models_help(args: argparse.Namespace) -> int:
    args._models_parser.print_help(sys.stderr)
    return 2

