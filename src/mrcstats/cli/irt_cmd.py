"""CLI subcommands for item response theory and evaluation subsets (argument parsing only).

* ``mrcstats irt LOG [--model 1pl|2pl] [--prior-sd S | --no-prior] [--quadrature Q] [--json]``
  -> ``{"model", "loglik", "aic", "bic", "items": [{"item", "a", "b", "se_a", "se_b", "p", "pd", "r_pb"}],
  "abilities": [{"model", "theta", "sd"}], "lrt_1pl_vs_2pl": {"chisq", "df", "p"}, ...}``
  (:func:`mrcstats.stats.irt.irt`);
* ``mrcstats subset LOG --k K --method random|pd|irt-info|anchor [--seed S] [--json]``
  -> ``{"method", "k", "items": [...], "weights": [...] or null}`` (:func:`mrcstats.stats.subsets.subset`);
* ``mrcstats subset-eval LOG [--ks 25,50,100,200,400] [--methods ...] [--folds 5] [--seeds 3]
  [--groups COL] [--json]`` -> ``{"folds", "seeds", "results": [{"method", "estimator", "k", "mae",
  "mae_ci_low", "mae_ci_high", "tau", "tau_ci_low", "tau_ci_high"}]}``
  (:func:`mrcstats.stats.subsets.subset_eval`).

Every one reads its log with the shared options (``--format``, ``--map FIELD=COLUMN``, ``--threshold``);
``--model-col COL``/``--item-col COL`` are deprecated aliases of ``--map model=COL``/``--map item=COL``.
``subset``/``subset-eval`` take ``--stratify COL`` (docs/subsets_irt.md).
"""
from __future__ import annotations

import argparse

from mrcstats._seeds import DEFAULT_SEED, parse_seed
from mrcstats.cli._common import (
    Once,
    add_format_option,
    add_input,
    add_json_flag,
    add_map_option,
    add_output,
    add_threshold_option,
    info,
    output,
    parse_list,
    read_log_args,
)


def _log_args(p: argparse.ArgumentParser) -> None:
    """The shared log options (``--format``, ``--map FIELD=COLUMN``, ``--threshold``; ``--model`` is the IRT
    model here) and the deprecated ``--model-col``/``--item-col`` (aliases of ``--map model=``/``item=``)."""
    add_input(p, "log", nargs="+", metavar="LOG", help="canonical log (e.g. from mrcstats ingest) or any read_log input")
    add_format_option(p)
    add_map_option(p, legacy_cols=True)
    add_threshold_option(p)


def register(sub: argparse._SubParsersAction) -> None:
    """Add this area's subcommands to the mrcstats parser."""
    p = sub.add_parser("irt", help="1PL/2PL item response model by marginal ML, with P_d and classical item statistics",
                       description="Fit a 1PL (Rasch) or 2PL model with the models as respondents by marginal maximum "
                                   "likelihood (adaptive Gauss-Hermite quadrature): item discrimination a and "
                                   "difficulty b with SEs, EAP abilities, logLik/AIC/BIC, the 1PL-vs-2PL "
                                   "likelihood-ratio test, and beside each item its P_d (seed 003), share correct p and "
                                   "point-biserial r_pb, with their rank correlations.")
    _log_args(p)
    p.add_argument("--model", dest="irt_model", default="2pl", choices=("1pl", "2pl", "rasch"),
                   help="item response model (2pl)")
    p.add_argument("--prior-sd", type=float, default=1.0, metavar="S",
                   help="2PL: SD of the normal prior on log a, centred at the estimated mean (1.0)")
    p.add_argument("--no-prior", action="store_true", help="2PL: plain ML, a bounded to [0.001, 100]")
    p.add_argument("--quadrature", type=int, default=11, metavar="Q", help="adaptive Gauss-Hermite nodes (11)")
    p.add_argument("--no-lrt", dest="lrt", action="store_false", help="skip the 1PL fit for the LRT")
    add_output(p, "--items-out", metavar="CSV", help="also write the item table to this CSV")
    add_json_flag(p)
    p.set_defaults(func=_irt)

    p = sub.add_parser("subset", help="choose k items: random, top P_d, max IRT information, or anchor points",
                       description="Pick k items of the log: 'random'; 'pd' (highest P_d, seed 003's filter); "
                                   "'irt-info' (greedy maximum 2PL information across the models' abilities); "
                                   "'anchor' (tinyBenchmarks-style anchor points: k-means on the items' correctness "
                                   "patterns, one item per cluster with the cluster's share as weight).")
    _log_args(p)
    p.add_argument("--k", type=int, required=True, help="number of items")
    p.add_argument("--method", default="random", choices=("random", "pd", "irt-info", "anchor"))
    p.add_argument("--seed", type=parse_seed, default=DEFAULT_SEED, metavar="S", help="random seed (also breaks ties; 0)")
    p.add_argument("--stratify", metavar="COL", action=Once, help="log column constant per item (subject, cluster): each value "
                                                     "gets k times its share of the items")
    add_json_flag(p)
    p.set_defaults(func=_subset)

    p = sub.add_parser("subset-eval", help="leave-models-out validation of the subset methods (MAE, Kendall tau)",
                       description="Cross-validate the subset methods over held-out models: the subset and the 2PL "
                                   "are chosen on the training models only; each held-out model's full accuracy is "
                                   "estimated from its answers on the subset (mean, anchor-weighted mean, p-IRT). "
                                   "Reports MAE and Kendall tau with t intervals over folds x seeds.")
    _log_args(p)
    p.add_argument("--ks", default="25,50,100,200,400", metavar="LIST", help="subset sizes (25,50,100,200,400)")
    p.add_argument("--methods", default="random,pd,irt-info,anchor", metavar="LIST",
                   help="methods (random,pd,irt-info,anchor)")
    p.add_argument("--folds", type=int, default=5, help="number of folds of models (5)")
    p.add_argument("--seeds", type=int, default=3, metavar="N", help="repetitions with seeds 0..N-1 (3)")
    p.add_argument("--groups", metavar="COL", action=Once, help="log column grouping models that are held out together "
                                                   "(e.g. checkpoints of one model)")
    p.add_argument("--stratify", metavar="COL", action=Once, help="choose every subset stratified by this item column")
    add_output(p, "--predictions-out", metavar="CSV", help="also write every held-out estimate to this CSV")
    add_json_flag(p)
    p.set_defaults(func=_subset_eval)


def _read(args: argparse.Namespace, cmd: str):
    return read_log_args(args, args.log, cmd)


def _irt(args: argparse.Namespace) -> int:
    from mrcstats.stats.irt import irt

    log = _read(args, "irt")
    res = irt(log, model=args.irt_model, prior_sd=None if args.no_prior else args.prior_sd,
              quadrature=args.quadrature, lrt=args.lrt, progress=None)
    for why, n in res.skipped.items():
        info(f"mrcstats irt: {n} {why}")
    if args.items_out:
        args.items_out.write_csv(res.items)
        info(f"mrcstats irt: item table written to {args.items_out}")
    return output(args, res.to_dict(), res.summary())


def _subset(args: argparse.Namespace) -> int:
    from mrcstats.stats.subsets import subset

    log = _read(args, "subset")
    res = subset(log, args.k, method=args.method, seed=args.seed, stratify=args.stratify)
    text = res.summary() if not args.json else None
    return output(args, res.to_dict(), text)


def _subset_eval(args: argparse.Namespace) -> int:
    from mrcstats.stats.subsets import subset_eval

    ks = parse_list(args.ks, "--ks", int)
    methods = parse_list(args.methods, "--methods")
    log = _read(args, "subset-eval")
    res = subset_eval(log, ks=ks, methods=methods, folds=args.folds, seeds=args.seeds, groups=args.groups,
                      stratify=args.stratify, progress=None)
    if args.predictions_out:
        args.predictions_out.write_csv(res.predictions)
        info(f"mrcstats subset-eval: predictions written to {args.predictions_out}")
    return output(args, res.to_dict(), res.summary())
