"""CLI subcommands for the stats area (argument parsing only; logic lives in the API).

* ``mrcstats fisher TABLE.csv [--simulate --B N --seed S] [--alternative A] [--json]``
  -> ``{"p", "odds_ratio", "conf_int"}`` (:func:`mrcstats.stats.contingency.fisher`);
* ``mrcstats chisq TABLE.csv [--no-correct] [--json]``
  -> ``{"statistic", "df", "p", "expected", "cramers_v"}`` (:func:`~mrcstats.stats.contingency.chisq`);
* ``mrcstats discrim LOG [--cluster COL] [--epsilon E] [--cutoffs 0,5,10,15]
  [--bootstrap B] [--seed S] [--json]`` -> ``{"pd": {cluster: P_d}, "cutoffs": [...]}``
  (:mod:`mrcstats.stats.discrimination`); without ``--cutoffs`` the cutoffs are 0 and the
  quartiles of P_d (printed on stderr);
* ``mrcstats mcnemar LOG --models A,B [--pair-on COLS] [--json]``
  -> ``{"n_items", "a_only", "b_only", "p_exact", "statistic", "p_asymptotic"}``.

TABLE.csv: the first row holds the column labels, the first column the row labels.
Logs are read as ``ingest`` reads them (``--format``, ``--map``, ``--model NAME``, ``--on-duplicate``).
"""
from __future__ import annotations

import argparse

from mrcstats._seeds import DEFAULT_SEED, parse_seed
from mrcstats.cli._common import (
    add_input,
    add_json_flag,
    add_log_options,
    info,
    output,
    parse_list,
    read_log_args,
)


def register(sub: argparse._SubParsersAction) -> None:
    """Add this area's subcommands to the mrcstats parser."""
    p = sub.add_parser("fisher", help="Fisher's exact test on a table of counts (as R's fisher.test)",
                       description="Fisher's exact test: 2 x 2 p-value, conditional MLE odds ratio and 95% CI; "
                                   "r x c exact p-value (network algorithm) or a Monte Carlo p-value. "
                                   "TABLE.csv: first row column labels, first column row labels.")
    add_input(p, "table", metavar="TABLE.csv")
    p.add_argument("--simulate", action="store_true",
                   help="Monte Carlo p-value on --B random tables with the same margins (r x c only, as R)")
    p.add_argument("--B", type=int, default=2000, metavar="N", help="Monte Carlo replicates (2000)")
    p.add_argument("--seed", type=parse_seed, default=DEFAULT_SEED, metavar="S", help="random seed for --simulate (0)")
    p.add_argument("--alternative", default="two-sided", choices=("two-sided", "less", "greater"),
                   help="alternative hypothesis (one-sided only for 2 x 2 tables)")
    add_json_flag(p)
    p.set_defaults(func=_fisher)

    p = sub.add_parser("chisq", help="Pearson's chi-square test on a table of counts (as R's chisq.test)",
                       description="Pearson's chi-square test of independence with expected counts, "
                                   "Cramer's V and residuals; Yates' correction for 2 x 2 unless --no-correct.")
    add_input(p, "table", metavar="TABLE.csv")
    p.add_argument("--no-correct", dest="correct", action="store_false",
                   help="no Yates continuity correction for 2 x 2 tables")
    add_json_flag(p)
    p.set_defaults(func=_chisq)

    p = sub.add_parser("discrim", help="discriminatory power P_d per cluster and the P_d cutoff table",
                       description="KL-based discriminatory power P_d of each cluster (seed 003 eq. 4-7) and "
                                   "model accuracies on the clusters with P_d > each cutoff (seed Table 5), "
                                   "with Kendall's tau against the full ranking and cluster-bootstrap CIs.")
    add_input(p, "log", nargs="+", metavar="LOG", help="canonical log (e.g. from mrcstats ingest) or any read_log input")
    p.add_argument("--cluster", default="cluster", metavar="COL", help="cluster column (cluster)")
    p.add_argument("--epsilon", type=float, default=1e-10, metavar="E", help="smoothing constant (1e-10)")
    p.add_argument("--cutoffs", default=None, metavar="LIST",
                   help="P_d cutoffs, e.g. 0,5,10,15 (seed 003); default 0 and the P_d quartiles, printed")
    p.add_argument("--bootstrap", type=int, default=2000, metavar="B",
                   help="cluster-bootstrap resamples for the accuracy CIs (2000; 0 = none)")
    p.add_argument("--seed", type=parse_seed, default=DEFAULT_SEED, metavar="S", help="bootstrap seed (0)")
    add_log_options(p)
    add_json_flag(p)
    p.set_defaults(func=_discrim)

    p = sub.add_parser("mcnemar", help="is model A better than model B on the same items? (McNemar)",
                       description="Paired comparison of two models: exact binomial test on the discordant "
                                   "items and McNemar's chi-square with continuity correction.")
    add_input(p, "log", nargs="+", metavar="LOG", help="canonical log or any read_log input")
    p.add_argument("--models", required=True, metavar="A,B", help="the two models to compare")
    p.add_argument("--pair-on", metavar="COL[,COL...]",
                   help="columns that pair a row of A with a row of B (default: item, trial, condition, "
                        "masking_rate: the log's key without the model)")
    add_log_options(p)
    add_json_flag(p)
    p.set_defaults(func=_mcnemar)


def _fisher(args: argparse.Namespace) -> int:
    from mrcstats.errors import InputError
    from mrcstats.stats.contingency import fisher, read_count_table

    if args.B < 1:
        raise InputError(f"--B must be at least 1, got {args.B}")
    tab = read_count_table(args.table)
    res = fisher(tab, simulate=args.simulate, B=args.B, seed=args.seed, alternative=args.alternative)
    if args.simulate and tab.shape == (2, 2):
        info("mrcstats fisher: a 2 x 2 table always gets the exact test (as R); --simulate ignored")
    return output(args, res.to_dict(), res.summary())


def _chisq(args: argparse.Namespace) -> int:
    from mrcstats.stats.contingency import chisq, read_count_table

    res = chisq(read_count_table(args.table), correct=args.correct)
    if res.note:
        info(f"mrcstats chisq: warning: {res.note}")
    return output(args, res.to_dict(), res.summary())


def _discrim(args: argparse.Namespace) -> int:
    from mrcstats.stats.discrimination import discrimination

    cutoffs = parse_list(args.cutoffs, "--cutoffs", float) if args.cutoffs is not None else None
    log = read_log_args(args, args.log, "discrim", lazy=True)     # a dataset folder: counted by DuckDB SQL
    res = discrimination(log, cluster=args.cluster, epsilon=args.epsilon)
    if cutoffs is None:
        cutoffs = res.default_cutoffs()
        info("mrcstats discrim: cutoffs " + ", ".join(f"{c:g}" for c in cutoffs)
             + " (0 and the P_d quartiles; choose others with --cutoffs)")
    tab = res.cutoffs(cutoffs, bootstrap=args.bootstrap, seed=args.seed)
    obj = {"pd": res.to_dict()["pd"], **tab.to_dict()}
    return output(args, obj, res.summary() + "\n\n" + tab.summary())


def _mcnemar(args: argparse.Namespace) -> int:
    from mrcstats.errors import InputError
    from mrcstats.stats.contingency import mcnemar

    models = parse_list(args.models, "--models")
    if len(models) != 2:
        raise InputError(f"--models needs exactly two model names separated by a comma, got {args.models!r}")
    log = read_log_args(args, args.log, "mcnemar")
    keys = parse_list(args.pair_on, "--pair-on") or None
    res = mcnemar(log, models=models, keys=keys)
    return output(args, res.to_dict(), res.summary())
