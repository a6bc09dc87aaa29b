"""CLI subcommands for the masking area (argument parsing only; logic lives in the API).

* ``mrcstats masking LOG... [--baseline LOG_U...] [--acc0 X] [--json]`` -- Acc(MR) curves, NA/EA/KI
  (:mod:`mrcstats.stats.masking`);
* ``mrcstats mskcal OUTPUTS... [--model M] [--tol 0.01] [--json]`` -- MskCal error metrics
  (:mod:`mrcstats.stats.mskcal`);
* ``mrcstats mask TEXT_OR_FILE --rate MR --condition C --seed S [--json]`` -- mask a text
  (:mod:`mrcstats.tasks.masking`).
"""
from __future__ import annotations

import argparse
import os
import warnings

from mrcstats._seeds import parse_seed
from mrcstats.cli._common import add_input, add_json_flag, add_log_options, info, output, read_log_args


def register(sub: argparse._SubParsersAction) -> None:
    """Add this area's subcommands to the mrcstats parser."""
    p = sub.add_parser("masking", help="accuracy-masking-rate curves and NA/EA/KI indicators (MskQA)",
                       description="Acc(MR) per model x condition (mean, SD and 95% CI over trials; invalid "
                                   "answers count as not correct), and the NA, EA, KI indicators with their "
                                   "MR-weighted averages (Sato & Matsuzaki, MskQA).")
    add_input(p, "log", nargs="+", metavar="LOG", help="response log file(s) or folder(s) (any read_log format), "
                   "or one dataset folder (mrcstats ingest --dataset; counted lazily in DuckDB)")
    add_input(p, "--baseline", nargs="+", metavar="LOG_U",
                   help="background-knowledge baseline log(s) (UQA in the seed); enables EA and KI")
    p.add_argument("--acc0", type=float, metavar="X",
                   help="mask-free accuracy as a fraction (e.g. 0.8984); default: Acc at MR = 0")
    add_log_options(p)
    add_json_flag(p)
    p.set_defaults(func=_masking)

    p = sub.add_parser("mskcal", help="MskCal: extract numeric answers and score them per masking rate",
                       description="Extract NR, P, X, N, Y, L, E', D' from free-text MskCal answers and report, "
                                   "per masking rate, the missing-answer rate, the mean and trimmed mean "
                                   "relative error and the success rate (relative error < --tol).")
    add_input(p, "outputs", nargs="+", metavar="OUTPUTS", help="MskCal output files or folders")
    p.add_argument("--model", help="score only this answering model (needed when OUTPUTS hold several)")
    p.add_argument("--tol", type=float, default=0.01, help="success threshold on the relative error (0.01)")
    p.add_argument("--trim", type=float, default=0.1, help="proportion trimmed at each end (0.1)")
    add_json_flag(p)
    p.set_defaults(func=_mskcal)

    p = sub.add_parser("mask", help="mask content words of a text (MskQA masking generator)",
                       description="Replace a share of the content-word lemmas (NOUN, PROPN, VERB, ADJ, ADV) by "
                                   "codes <r001>, <r002>, ... and print the masked text and its metadata table.")
    add_input(p, "text", metavar="TEXT_OR_FILE", help="the text, or a path to a UTF-8 text file")
    p.add_argument("--rate", type=float, required=True, metavar="MR", help="masking rate in percent (0-100)")
    p.add_argument("--condition", default="regular", choices=("regular", "partial", "strict", "lenient"))
    p.add_argument("--seed", type=parse_seed, default=0, metavar="S")
    p.add_argument("--tagger", default="auto", choices=("auto", "stanza", "linkgrammar", "rules"),
                   help="POS tagger (auto: stanza when its models are installed, else link-grammar, else rules)")
    p.add_argument("--keep", metavar="WORDS", help="comma-separated words never masked (e.g. NR,P,X)")
    add_json_flag(p)
    p.set_defaults(func=_mask)


def _masking(args: argparse.Namespace) -> int:
    from mrcstats.stats.masking import masking_indicators

    log = _log_or_dataset(args, args.log, "LOG")
    base = None
    if args.baseline:
        base = _log_or_dataset(args, args.baseline, "baseline")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = masking_indicators(log, baseline=base, acc0=args.acc0)
    for n in res.notes:
        info(f"mrcstats masking: {n}")
    return output(args, res.to_dict(), res.summary(notes=False))


def _log_or_dataset(args: argparse.Namespace, paths: list[str], what: str):
    """A single dataset folder (mrcstats ingest --dataset) is opened lazily and counted by DuckDB;
    anything else is read into memory."""
    return read_log_args(args, paths, "masking", what, lazy=True)


def _mskcal(args: argparse.Namespace) -> int:
    from mrcstats.errors import InputError
    from mrcstats.stats.mskcal import mskcal

    if not 0 < args.tol:
        raise InputError(f"--tol must be positive (0.01 = 1 %), got {args.tol}")
    res = mskcal(args.outputs, tol=args.tol, trim=args.trim, model=args.model)
    for n in res.notes:
        info(f"mrcstats mskcal: {n}")
    if args.json:
        return output(args, res.to_dict())
    return output(args, None, res.summary(notes=False))


def _mask(args: argparse.Namespace) -> int:
    from mrcstats.tasks.masking import mask_text

    text = args.text
    if os.path.isfile(text):
        from mrcstats.io.files import read_text

        text = read_text(text)
    from mrcstats.cli._common import parse_list

    res = mask_text(text, rate=args.rate, condition=args.condition, seed=args.seed, tagger=args.tagger,
                    keep=parse_list(args.keep, "--keep"))
    return output(args, res.to_dict(), res.summary())
