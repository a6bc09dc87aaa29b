"""CLI subcommands ``compare``, ``ranks``, ``variance`` and ``power`` (argument parsing only; logic in
:mod:`mrcstats.stats.compare`, :mod:`mrcstats.stats.ranks`, :mod:`mrcstats.stats.variance`).

* ``mrcstats compare LOG [--models a,b,...] [--cluster COL] [--adjust holm|BH|bonferroni|none]
  [--bootstrap B] [--seed S] [--alpha A] [--condition C] [--map FIELD=COLUMN] [--json]``
  -> ``{"models": [...], "pairs": [...], "adjust", "cluster", "skipped", ...}``;
* ``mrcstats ranks LOG [--level 0.95] [--cluster COL] [--method paired|independent] [--draws R] [--seed S]
  [--top K] [--models ...] [--condition C] [--json]`` -> ``{"models": [{"model", "estimate", "rank", "marginal",
  "simultaneous", "tier", ...}], "method", "level", "top_set", "alternative", ...}`` (:mod:`mrcstats.stats.ranks`);
* ``mrcstats variance LOG --over trial|seed|prompt|checkpoint|condition|COL [--by model] [--target-snr T |
  --target-agreement P] [--no-item-model] [--sensitivity [--bootstrap B] [--seed S]] [--condition C] [--json]``
  -> ``{"components": [{"component", "variance", "sd", "share"}], "snr", "agreement", "signal_var", "noise_var",
  "target", "models", "pairs", ...}``, with ``--sensitivity`` also ``"sensitivity": {"models": [{model, q0..q100,
  range, CIs, rank_min, rank_max}], "kendall_w": {...}, "concordance": {...}, ...}`` (:mod:`mrcstats.stats.sensitivity`);
* ``mrcstats compare RUN_A RUN_B --runs [NAME,NAME]``: two runs of the same model and task (checkpoints, seeds)
  as two units paired on their items (:mod:`mrcstats.io.runs`);
* ``mrcstats power --sd-diff SD (--n-items N | --effect D) [--design-effect X] [--alpha A] [--power P]``, or
  ``mrcstats power LOG [--models ...] [--cluster COL] [--n-items N | --effect D]`` (each pair's observed
  paired SD and design effect) -> ``{"alpha", "power", "z_alpha", "z_beta", "results": [...]}``.
"""
from __future__ import annotations

import argparse

from mrcstats._seeds import DEFAULT_SEED, parse_seed
from mrcstats._words import plural
from mrcstats.cli._common import (
    Once,
    add_format_option,
    add_input,
    add_json_flag,
    add_map_option,
    add_model_option,
    add_threshold_option,
    info,
    map_arg,
    model_arg,
    output,
    parse_list,
)


def _add_log_args(p: argparse.ArgumentParser, nargs: str) -> None:
    add_input(p, "log", nargs=nargs, metavar="LOG", help="canonical log (e.g. from mrcstats ingest) or any "
                                                           "read_log input (harness/HELM output folders too)")
    p.add_argument("--models", metavar="A,B,...", help="models to compare (all pairs among them; default: all)")
    p.add_argument("--cluster", metavar="COL", action=Once, help="column grouping items (passage, subject) for cluster-robust "
                                                    "SEs and the cluster bootstrap (default: items independent)")
    _add_read_args(p, "compared")


def _add_read_args(p: argparse.ArgumentParser, verb: str) -> None:
    """The reading options :func:`_load` takes (--condition, --format, --map, --model, --threshold) and --outcome."""
    p.add_argument("--condition", metavar="C", help="keep only this condition (logs with several conditions)")
    add_format_option(p)
    add_map_option(p)
    add_model_option(p, dest="model_name")
    add_threshold_option(p)
    p.add_argument("--outcome", choices=("auto", "correct", "score"), default="auto",
                   help=f"the outcome {verb}: score (graded: partial credit, f1, judge ratings) or correct "
                        "(0/1); auto = score when the log has scores other than 0/1 (docs/scores.md)")


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``compare``, ``ranks``, ``variance`` and ``power`` to the mrcstats parser."""
    p = sub.add_parser("compare", help="rank models and compare every pair: paired, clustered, adjusted p-values",
                       description="Per model: accuracy, CLT and cluster-robust SEs, CI, rank. Per pair (paired on "
                                   "item): difference, paired SE, CI, z, p, p adjusted across pairs, exact "
                                   "McNemar p, correlation, variance saved by pairing, optional cluster-bootstrap "
                                   "CI (Miller 2024, 'Adding Error Bars to Evals').")
    _add_log_args(p, "+")
    p.add_argument("--adjust", default="holm", choices=("holm", "BH", "bonferroni", "none"),
                   help="p-value adjustment across pairs, as R's p.adjust (holm)")
    p.add_argument("--bootstrap", type=int, default=0, metavar="B",
                   help="cluster-bootstrap resamples for the CI of each difference (0 = none)")
    p.add_argument("--seed", type=parse_seed, default=DEFAULT_SEED, metavar="S", help="bootstrap seed (0)")
    p.add_argument("--alpha", type=float, default=0.05, metavar="A", help="1 - confidence level (0.05)")
    p.add_argument("--runs", nargs="?", const="", default=None, metavar="NAME,NAME,...",
                   help="each LOG is one run of the same model and task (two checkpoints, seeds, prompt versions): "
                        "name its rows after the run (the given names, else the run's file or folder name) and "
                        "compare the runs paired on their items (McNemar's exact test, paired SE)")
    add_json_flag(p)
    p.set_defaults(func=_compare)

    p = sub.add_parser("ranks", help="confidence sets for every model's rank, tie groups (tiers) and the top-k set",
                       description="Marginal and simultaneous confidence sets for the rank of every model (Mogstad, "
                                   "Romano, Shaikh & Wilhelm 2024, as R's csranks: stepdown max-t, parametric "
                                   "bootstrap) from the paired, clustered SEs of compare; tiers, the top set and "
                                   "the top-k set. The sets of the other method (paired / independent) are shown "
                                   "beside for comparison.")
    _add_log_args(p, "+")
    p.add_argument("--level", type=float, default=0.95, metavar="L", help="coverage of every set (0.95)")
    p.add_argument("--method", choices=("paired", "independent"), default="paired",
                   help="paired: the variance of each difference from the shared items (default); independent: "
                        "each model's own SE")
    p.add_argument("--items", choices=("shared", "all"), default="shared",
                   help="shared (default): when item sets differ, rank on the items every ranked model answered "
                        "(rows of other items counted in a note); all: each model over its own items")
    p.add_argument("--draws", type=int, default=1000, metavar="R", help="parametric bootstrap draws (1000)")
    p.add_argument("--seed", type=parse_seed, default=DEFAULT_SEED, metavar="S", help="seed of the draws (0)")
    p.add_argument("--top", type=int, default=None, metavar="K",
                   help="also print the top-K set: the models that may be among the best K")
    add_json_flag(p)
    p.set_defaults(func=_ranks)

    p = sub.add_parser("variance", help="where the noise comes from: variance components, signal-to-noise ratio, "
                                        "rank stability between runs",
                       description="Variance components of items, models, the repetition factor (--over: seeds, "
                                   "Inspect epochs, prompts, checkpoints, conditions), model x repetition and item x "
                                   "model, from a linear mixed model fitted as lme4's lmer (REML); the share of each; "
                                   "the signal-to-noise ratio (AI2's 'Signal and Noise', Heineman et al. 2025); the "
                                   "probability that two runs order two models the same way; items or repetitions "
                                   "needed for a target.")
    add_input(p, "log", nargs="+", metavar="LOG", help="canonical log or any read_log input (Inspect logs with "
                                                         "epochs, harness runs with several seeds)")
    p.add_argument("--over", required=True, metavar="COL",
                   help="the repetition column: trial (epochs, repeated samples), condition, or a column such as "
                        "seed, prompt, checkpoint (such a column of the source keeps its name in the log)")
    p.add_argument("--by", default="model", metavar="COL", help="the compared units (model)")
    _add_read_args(p, "decomposed")
    goal = p.add_mutually_exclusive_group()
    goal.add_argument("--target-snr", type=float, metavar="T", help="the items and repetitions needed for SNR T")
    goal.add_argument("--target-agreement", type=float, metavar="P",
                      help="the items and repetitions needed for two runs to order two models the same way with "
                           "probability P (e.g. 0.95)")
    p.add_argument("--no-item-model", dest="item_model", action="store_false",
                   help="leave (1|item:model) out of the model (it then counts in the residual noise)")
    p.add_argument("--sensitivity", action="store_true",
                   help="also the prompt sensitivity over --over (templates): each model's score quantiles across "
                        "templates and Kendall's W / pairwise concordance of the rankings, with item-bootstrap CIs")
    p.add_argument("--bootstrap", type=int, default=1000, metavar="B",
                   help="--sensitivity: item-bootstrap resamples for the CIs (1000; 0 = none)")
    p.add_argument("--seed", type=parse_seed, default=0, metavar="S", help="--sensitivity: bootstrap seed (0)")
    add_json_flag(p)
    p.set_defaults(func=_variance)

    p = sub.add_parser("power", help="minimum detectable difference or items needed for a paired comparison",
                       description="Normal approximation for a paired two-sided test (Miller 2024 Eq. 9-10): "
                                   "MDE = (z_a + z_b) sd_diff sqrt(deff / n); n = (z_a + z_b)^2 sd_diff^2 deff / "
                                   "effect^2. From --sd-diff, or from a log (each pair's observed SD and design "
                                   "effect).")
    _add_log_args(p, "*")
    p.add_argument("--sd-diff", type=float, metavar="SD", help="SD of the per-item score differences")
    p.add_argument("--n-items", type=int, metavar="N", help="items in the comparison (gives the MDE)")
    p.add_argument("--effect", type=float, metavar="D", help="difference to detect (gives the items needed)")
    p.add_argument("--design-effect", type=float, default=1.0, metavar="X",
                   help="variance inflation from clustering with --sd-diff (1)")
    p.add_argument("--alpha", type=float, default=0.05, metavar="A", help="two-sided level (0.05)")
    p.add_argument("--power", type=float, default=0.8, metavar="P", help="power (0.8)")
    add_json_flag(p)
    p.set_defaults(func=_power)


def _load(args: argparse.Namespace, cmd: str):
    import pandas as pd

    from mrcstats.backends import keep_value
    from mrcstats.errors import InputError
    from mrcstats.io import open_log

    mapping = map_arg(args, cmd)
    if getattr(args, "runs", None) is not None:
        if args.model_name:
            raise InputError("--runs names each run's rows after the run: --model does not apply (give run names "
                             "with --runs NAME,NAME)")
        from mrcstats.io.runs import read_runs

        log = read_runs(args.log, names=parse_list(args.runs, "--runs") if args.runs else None, format=args.fmt,
                        mapping=mapping or None, threshold=args.threshold)
    else:
        log = open_log(args.log, format=args.fmt, mapping=mapping or None, model=model_arg(args.model_name),
                       threshold=args.threshold)       # io decides: a dataset folder opens lazily (DuckDB)
    if isinstance(log, pd.DataFrame):
        for why, n in (log.attrs.get("skipped") or {}).items():
            if n:
                info(f"mrcstats {cmd}: {plural(n, 'row')} skipped while reading: {why}")
    if args.condition is not None:        # a frame filtered in memory, a dataset lazily (its row pass counts)
        log, counts = keep_value(log, "condition", args.condition,
                                 reason=f"condition other than {args.condition!r} (--condition)")
        if not counts.get(args.condition):
            shown = ", ".join(repr(c) for c in sorted(counts)[:20])
            raise InputError(f"--condition {args.condition!r} matches no row; conditions: {shown}")
        left = {c: n for c, n in sorted(counts.items()) if c != args.condition}
        if left:   # said, never silent: the rows of other conditions are left out
            shown = ", ".join(f"{c!r}: {n}" for c, n in left.items())
            info(f"mrcstats {cmd}: --condition {args.condition!r} keeps {counts[args.condition]} of "
                 f"{sum(counts.values())} rows; left out {plural(sum(left.values()), 'row')} of other conditions "
                 f"({shown})")
    return log


def _run_compare(args: argparse.Namespace, cmd: str, bootstrap: int = 0, seed=None, adjust: str = "holm",
                 alpha: float = 0.05):
    from mrcstats.stats.compare import compare

    models = parse_list(args.models, "--models") if args.models else None
    return compare(_load(args, cmd), models=models, cluster=args.cluster, alpha=alpha, adjust=adjust,
                   bootstrap=bootstrap, seed=seed, outcome=args.outcome)


def _compare(args: argparse.Namespace) -> int:
    res = _run_compare(args, "compare", bootstrap=args.bootstrap, seed=args.seed, adjust=args.adjust,
                       alpha=args.alpha)
    return output(args, res.to_dict(), res.summary())


def _ranks(args: argparse.Namespace) -> int:
    from mrcstats.stats.ranks import ranks

    models = parse_list(args.models, "--models") if args.models else None
    res = ranks(_load(args, "ranks"), level=args.level, cluster=args.cluster, method=args.method, draws=args.draws,
                seed=args.seed, models=models, outcome=args.outcome, items=args.items)
    obj, text = res.to_dict(), res.summary()
    if args.top is not None:
        top = list(res.top_k(args.top))
        obj["top_k"] = {"k": args.top, "models": top}
        text += f"\ntop-{args.top} set (may be among the best {args.top}): {', '.join(top)}"
    return output(args, obj, text)


def _variance(args: argparse.Namespace) -> int:
    from mrcstats.stats.variance import variance

    if args.condition is not None and args.over == "condition":
        from mrcstats.errors import InputError

        raise InputError("--condition keeps one condition, --over condition decomposes over them: give one of them")
    log = _load(args, "variance")
    res = variance(log, over=args.over, by=args.by, outcome=args.outcome,
                   item_model=args.item_model, target_snr=args.target_snr, target_agreement=args.target_agreement)
    if not args.sensitivity:
        return output(args, res.to_dict(), res.summary())
    from mrcstats.stats.sensitivity import sensitivity

    sens = sensitivity(log, over=args.over, by=args.by, outcome=args.outcome, bootstrap=args.bootstrap,
                       seed=args.seed)
    return output(args, {**res.to_dict(), "sensitivity": sens.to_dict()}, res.summary() + "\n\n" + sens.summary())


def _power(args: argparse.Namespace) -> int:
    from mrcstats.errors import InputError
    from mrcstats.stats.power import power

    if (args.n_items is None) == (args.effect is None) and not (args.log and args.effect is None):
        raise InputError("give exactly one of --n-items (for the minimum detectable difference) or --effect "
                         "(for the items needed)")
    if args.log:
        if args.sd_diff is not None:
            raise InputError("give either a LOG (each pair's observed SD) or --sd-diff, not both")
        src = _run_compare(args, "power")
    elif args.sd_diff is None:
        raise InputError("give --sd-diff SD (the SD of per-item differences) or a LOG to take it from")
    else:
        src = args.sd_diff
    res = power(src, n_items=args.n_items, effect=args.effect, alpha=args.alpha, power=args.power,
                design_effect=args.design_effect)
    return output(args, res.to_dict(), res.summary())
