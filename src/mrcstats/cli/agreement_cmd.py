"""CLI subcommands ``agreement`` and ``judge`` (argument parsing only; logic in :mod:`mrcstats.stats.agreement`
and :mod:`mrcstats.stats.judge`).

* ``mrcstats agreement TABLE (--item COL --rater COL --rating COL | --wide COL,COL,... [--item COL])
  [--level nominal|ordinal|interval|ratio] [--levels a,b,c] [--bootstrap B] [--seed S] [--alpha A] [--json]``
  -> ``{"level", "categories", "raters", "n_items", "statistics": [...], "indices", "marginals", "notes"}``;
* ``mrcstats judge LOG --human COL --judge COL[,COL,...] [--combine majority|mean] [--model-col COL]
  [--item-col COL] [--target population|rows] [--ppi crossfit|tuned|plain] [--width W] [--level ...] [--json]``
  -> ``{"human", "judge", "models": [{model, judge_*, human_*, rectifier, ppi_*}], "agreement": {...}}``, with
  ``--item-col`` ``"bias": {"models": [{outcome, model, rate, prob, ...}], "tests": [...]}``, and with
  several judges (the table and agreement then the panel's) ``"panel": {"judges", "correlation", "pairs",
  "mean_rho", "k_eff", ..., "per_judge": [...]}``.

TABLE and LOG are read as the model commands read their data (:func:`mrcstats.io.read_data`: csv, tsv, json,
jsonl, parquet as they are); an Inspect AI log is read with every scorer as a rater
(:mod:`mrcstats.io.inspect_raters`): one column per scorer (``--wide``, ``--judge``, ``--human``) keyed by
``model``, ``item`` and ``trial``, or for ``agreement`` without ``--wide`` the long form (``--item item --rater
rater --rating rating``).
"""
from __future__ import annotations

import argparse

from mrcstats._seeds import parse_seed
from mrcstats.cli._common import Once, add_format_option, add_input, add_json_flag, output, parse_list

LEVEL_CHOICES = ("nominal", "ordinal", "interval", "ratio")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--level", choices=LEVEL_CHOICES, default=None,
                   help="level of measurement: the alpha metric, the AC2 weights, whether ICC and rank "
                        "correlations are computed (default nominal)")
    p.add_argument("--levels", metavar="A,B,...", help="the allowed ratings, in order (required for ordinal labels "
                                                       "that are not numbers); a rating outside them is an error")
    p.add_argument("--bootstrap", type=int, default=1000, metavar="B",
                   help="resamples of the items for the statistics without an analytic SE (1000; 0 = none)")
    p.add_argument("--seed", type=parse_seed, default=0, metavar="S", help="bootstrap seed (0)")
    p.add_argument("--alpha", type=float, default=0.05, metavar="A", help="1 - confidence level (0.05)")
    add_format_option(p)
    add_json_flag(p)


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``agreement`` and ``judge`` to the mrcstats parser."""
    p = sub.add_parser("agreement", help="inter-rater agreement: kappa, alpha, AC1/AC2, ICC with SEs and CIs",
                       description="Cohen's kappa (two raters; unweighted, linear, quadratic), Fleiss' kappa, "
                                   "Krippendorff's alpha, Gwet's AC1/AC2, the six Shrout-Fleiss ICCs and Spearman/"
                                   "Kendall, each with an SE and a CI (analytic where the literature gives one, "
                                   "else a bootstrap over items), and prevalence/bias indices (docs/agreement.md).")
    add_input(p, "table", metavar="TABLE", help="ratings: long (item, rater, rating) or wide (a column per rater)")
    p.add_argument("--item", metavar="COL", action=Once, help="item column (long form; optional in the wide form)")
    p.add_argument("--rater", metavar="COL", action=Once, help="rater column (long form)")
    p.add_argument("--rating", metavar="COL", action=Once, help="rating column (long form)")
    p.add_argument("--wide", metavar="COL,COL,...", help="one column per rater (wide form)")
    _common(p)
    p.set_defaults(func=_agreement)

    p = sub.add_parser("judge", help="an LLM judge vs human labels: agreement and prediction-powered means per model",
                       description="Per model: the judge-only, human-only and prediction-powered (PPI, Angelopoulos "
                                   "et al. 2023) means with CIs, from a judge score on every row and a human label "
                                   "on a subset; and the agreement of judge and human on the labelled rows.")
    add_input(p, "log", metavar="LOG", help="one row per response: the judge's score and (on a subset) the human's")
    p.add_argument("--human", metavar="COL", required=True, help="column of the human labels (empty = unlabelled)")
    p.add_argument("--judge", metavar="COL[,COL,...]", required=True,
                   help="column of the judge's scores (every row); several columns: a panel of judges (their error "
                        "correlation, effective number, and the panel's agreement and PPI means)")
    p.add_argument("--combine", choices=("majority", "mean"), default=None,
                   help="several judges: the panel's score per row (majority at the nominal/ordinal level, mean at "
                        "the interval/ratio level)")
    p.add_argument("--model-col", metavar="COL", default="model", help="column naming the model (model)")
    p.add_argument("--item-col", metavar="COL", action=Once,
                   help="column naming the item: adds the judge's bias per model (binomial GLMMs of over-rating and "
                        "of disagreement on the model with item random intercepts, and their LRT)")
    p.add_argument("--target", choices=("population", "rows"), default="population",
                   help="population: the model's expected human score (Angelopoulos et al. 2023); rows: its mean "
                        "human score over these rows (finite-population SEs)")
    p.add_argument("--ppi", choices=("crossfit", "tuned", "plain"), default="crossfit",
                   help="the PPI weight lambda: crossfit (default; PPI++ with lambda cross-fitted over 5 seeded folds "
                        "of the labelled rows, t(n-1) CI), tuned (PPI++ with lambda fitted on the labelled rows "
                        "themselves: under-covers at small n) or plain (lambda = 1)")
    p.add_argument("--width", type=float, metavar="W",
                   help="target full CI width: the human labels each model would need, human-only and with PPI")
    _common(p)
    p.set_defaults(func=_judge)


def _read(args: argparse.Namespace, path: str, wide: bool = True):
    from mrcstats.io.inspect_raters import read_raters

    return read_raters(path, format=args.fmt, wide=wide)


def _levels(args: argparse.Namespace) -> list[str] | None:
    from mrcstats.errors import InputError

    if args.levels is None:
        return None
    levels = parse_list(args.levels, "--levels")
    if not levels:
        raise InputError("--levels: give the allowed ratings separated by commas")
    return levels


def _agreement(args: argparse.Namespace) -> int:
    from mrcstats.errors import InputError
    from mrcstats.stats.agreement import agreement

    wide = parse_list(args.wide, "--wide") if args.wide is not None else None
    if wide is None and (args.item is None or args.rater is None or args.rating is None):
        raise InputError("give the long form (--item COL --rater COL --rating COL) or the wide form "
                         "(--wide COL,COL,...: one column per rater)")
    if wide is not None and (args.rater is not None or args.rating is not None):
        raise InputError("give either --wide (one column per rater) or --rater and --rating (the long form), not both")
    levels = _levels(args)
    data = _read(args, args.table, wide=wide is not None)
    res = agreement(data, item=args.item, rater=args.rater, rating=args.rating, wide=wide,
                    level=args.level or "nominal", levels=levels, bootstrap=args.bootstrap, seed=args.seed,
                    alpha=args.alpha, source=str(args.table))
    return output(args, res.to_dict(), res.summary())


def _judge(args: argparse.Namespace) -> int:
    from mrcstats.errors import InputError
    from mrcstats.stats.judge import judge

    judges = parse_list(args.judge, "--judge")
    if not judges:
        raise InputError("--judge: give the judge's score column (or several, separated by commas)")
    levels = _levels(args)
    data = _read(args, args.log)
    res = judge(data, human=args.human, judge=judges[0] if len(judges) == 1 else judges, model=args.model_col,
                level=args.level or "nominal", levels=levels, alpha=args.alpha, target=args.target, ppi=args.ppi,
                width=args.width, bootstrap=args.bootstrap, seed=args.seed, combine=args.combine,
                item=args.item_col, source=str(args.log))
    return output(args, res.to_dict(), res.summary())
