"""CLI subcommands for screening items and DIF (argument parsing only).

* ``mrcstats screen LOG [--fdr 0.1] [--top N] [--items-out CSV] [--review CSV] [--json]``
  -> ``{"items": [{"item", "score", "flag", "suggested_key", "evidence": {...}}], "notes": [...], ...}`` with
  every item of the log (:func:`mrcstats.stats.screen.screen`);
* ``mrcstats screen LOG --validate K [--seed S] [--json]`` -> ``{"k", "seed", "metrics": [{"signal", "auc",
  "precision_at_k"}], "injected": [...], ...}`` (:func:`mrcstats.stats.screen.screen_validate`);
* ``mrcstats dif LOG --group model=COLUMN | --group MAP.csv [--strata 5] [--adjust BH] [--json]``
  -> ``{"items": [{"item", "group", "favours", "delta_mh", "ets", "mh_chisq", ...}], "groups", ...}``
  (:func:`mrcstats.stats.dif.dif`);
* ``mrcstats relabel LOG --verdicts CSV --out FIXED.parquet [--reviewer NAME] [--json]`` -> ``{"changed",
  "dropped", "kept", "verdicts": [...], "effect": [{"model", "accuracy_before", "accuracy_after", ...}]}``
  (:func:`mrcstats.io.relabel.apply_verdicts`); with ``--validate K [--seed S]``: ``{"k", "group", "metrics": [{"method",
  "auc", "precision_at_k"}], ...}`` (:func:`mrcstats.stats.dif.dif_validate`).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from mrcstats._seeds import parse_seed
from mrcstats.cli._common import (
    add_input,
    add_json_flag,
    add_log_options,
    add_output,
    info,
    output,
    read_log_args,
)
from mrcstats.errors import InputError


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return v


def register(sub: argparse._SubParsersAction) -> None:
    """Add this area's subcommands to the mrcstats parser."""
    p = sub.add_parser("screen", help="rank items by how likely their key is wrong (or they are ill-posed), with evidence",
                       description="Screen every item of a log: the posterior probability that its key is wrong "
                                   "(and that it has several or no correct options) under a model of the options "
                                   "the models chose - 2PL choice of the correct option, difficulty learned from the "
                                   "log, error rates per cluster - with the evidence (answers per option, accuracy, "
                                   "point-biserial, 2PL slope, Rasch fit, the strong models' choice). Items whose "
                                   "Bayesian FDR (q) is <= --fdr are flagged, with the likely error type and key. "
                                   "--review CSV writes the flagged items for a person's verdicts (then `mrcstats "
                                   "relabel`); --validate K moves K keys and reports the ROC AUC and precision at K.")
    add_input(p, "log", nargs="+", metavar="LOG", help="canonical log or any read_log input (pred and gold help)")
    add_log_options(p)
    p.add_argument("--fdr", type=float, default=0.1, help="flag items with Bayesian FDR (q-value) <= this (0.1)")
    p.add_argument("--irt-model", default="2pl", choices=("1pl", "2pl"), help="abilities from this IRT model (2pl)")
    p.add_argument("--shrinkage", type=float, default=30.0, metavar="N",
                   help="weight, in items, of the log's overall error rates in each cluster's (30; 0: clusters apart)")
    p.add_argument("--seed", type=parse_seed, default=0, metavar="S", help="--validate: seed of the moved keys (0)")
    p.add_argument("--validate", type=_positive, metavar="K", help="move K keys and measure the screen's power")
    p.add_argument("--top", type=int, default=20, metavar="N", help="rows shown in the text table (20)")
    add_output(p, "--items-out", metavar="CSV", help="also write the full item table to this CSV")
    add_output(p, "--review", metavar="CSV", suffixes=(".csv",),
               help="write the flagged items (at least --top rows) with empty verdict columns for a person to fill; "
                    "apply them with `mrcstats relabel LOG --verdicts CSV --out FIXED.parquet`")
    add_json_flag(p)
    p.set_defaults(func=_screen)

    p = sub.add_parser("relabel", help="apply a person's verdicts on screened items to a log (new keys, dropped items)",
                       description="Apply the verdicts of a review file (from `mrcstats screen --review`; columns "
                                   "item, verdict = keep|rekey|drop, new_key, reviewer, date, reason) to a log: new "
                                   "keys recompute correct from pred, dropped items lose their rows, nothing else "
                                   "changes. The provenance (file, its SHA-256, who, when, why) is kept in the new "
                                   "log's metadata and printed by every command that reads it. Prints each model's "
                                   "accuracy and rank before and after.")
    add_input(p, "log", nargs="+", metavar="LOG", help="the log the review was made on")
    add_log_options(p)
    add_input(p, "--verdicts", required=True, metavar="CSV", help="the review file with a person's verdicts")
    add_output(p, "--out", required=True, metavar="FIXED.parquet", suffixes=(".parquet",),
               help="the relabelled log (Parquet: its metadata keeps the provenance)")
    p.add_argument("--reviewer", default="", metavar="NAME", help="who reviewed, for rows whose reviewer is empty")
    add_json_flag(p)
    p.set_defaults(func=_relabel)

    p = sub.add_parser("dif", help="differential item functioning between model groups (Mantel-Haenszel, logistic)",
                       description="DIF of every item between groups of models (e.g. families): Mantel-Haenszel "
                                   "over total-score strata (R mantelhaen.test; ETS A/B/C) and logistic-regression "
                                   "likelihood ratios (uniform, non-uniform; as difR's difLogistic), p-values "
                                   "adjusted over all items x groups. --validate K makes K items easier for one "
                                   "group and reports the detection AUC.")
    add_input(p, "log", nargs="+", metavar="LOG", help="canonical log or any read_log input")
    add_log_options(p)
    add_input(p, "--group", required=True, metavar="model=COLUMN|CSV",
                   help="the log column naming each model's group (model=family), or a CSV with columns model,group")
    p.add_argument("--strata", type=_positive, default=5, help="total-score strata for Mantel-Haenszel (5)")
    p.add_argument("--adjust", default="BH", metavar="METHOD", help="p-value adjustment: holm, bonferroni, BH, none (BH)")
    p.add_argument("--no-logistic", dest="logistic", action="store_false", help="Mantel-Haenszel only")
    p.add_argument("--validate", type=_positive, metavar="K", help="inject DIF into K items and measure detection")
    p.add_argument("--focal", metavar="GROUP", help="--validate: the group made to find the items easier (random)")
    p.add_argument("--seed", type=parse_seed, default=0, metavar="S", help="seed of --validate (0)")
    p.add_argument("--top", type=int, default=20, metavar="N", help="rows shown in the text table (20)")
    add_output(p, "--out", metavar="CSV", help="also write the full DIF table to this CSV")
    add_json_flag(p)
    p.set_defaults(func=_dif)


def _screen(args: argparse.Namespace) -> int:
    from mrcstats.stats.screen import review_table, screen, screen_validate

    if not (0 < args.fdr < 1):
        raise InputError(f"--fdr must lie strictly between 0 and 1, got {args.fdr}")
    log = read_log_args(args, args.log, "screen")
    if args.validate:
        v = screen_validate(log, args.validate, seed=args.seed, fdr=args.fdr, irt_model=args.irt_model,
                            shrinkage=args.shrinkage, progress=None)
        return output(args, v.to_dict(), v.summary())
    res = screen(log, fdr=args.fdr, irt_model=args.irt_model, shrinkage=args.shrinkage, progress=None)
    if args.items_out:
        args.items_out.write_csv(res.items)
        info(f"mrcstats screen: item table written to {args.items_out}")
    if args.review:
        rev = review_table(res, log, top=0 if res.items["flag"].any() else args.top)
        args.review.write_csv(rev)
        info(f"mrcstats screen: {len(rev)} items to review written to {args.review} (fill verdict: keep, rekey "
             f"with new_key, or drop; then `mrcstats relabel ... --verdicts {args.review} --out FIXED.parquet`)")
    return output(args, res.to_dict(), res.summary(args.top) if not args.json else None)


def _relabel(args: argparse.Namespace) -> int:
    from mrcstats.io import write_log
    from mrcstats.io.relabel import apply_verdicts
    from mrcstats.stats.review import relabel_effect

    log = read_log_args(args, args.log, "relabel")
    res = apply_verdicts(log, args.verdicts, reviewer=args.reviewer)
    write_log(res.log, args.out)          # the one log writer: attrs in the Parquet metadata as read_log wants them
    info(f"mrcstats relabel: {len(res.log)} rows written to {args.out}")
    eff = relabel_effect(log, res.log)
    obj = {**res.to_dict(), "out": str(args.out), "effect": eff.to_dict(orient="records")}
    text = res.summary() + "\n\nAccuracy before and after (each model's own items; rank 1 = best)\n" + \
        eff.to_string(index=False, float_format=lambda v: f"{v:.4f}")
    return output(args, obj, text)


def _groups(spec: str, model_col: str = "model"):
    import pandas as pd

    path = Path(spec)
    if spec.lower().endswith((".csv", ".tsv")) or path.is_file():
        if not path.is_file():
            raise InputError(f"--group: no such mapping file {spec!r}")
        sep = "\t" if spec.lower().endswith(".tsv") else ","
        try:
            g = pd.read_csv(path, sep=sep, dtype=str)
        except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as exc:
            raise InputError(f"--group: cannot read {spec!r} as a CSV with columns model,group ({exc})") from None
        if g.shape[1] < 2:
            raise InputError(f"--group: {spec!r} needs two columns: model, group (found {list(g.columns)})")
        return g
    if "=" in spec:
        left, right = spec.split("=", 1)
        if left != model_col or not right:
            raise InputError(f"--group expects {model_col}=COLUMN (e.g. model=family) or a CSV file, got {spec!r}")
        return right
    return spec


def _dif(args: argparse.Namespace) -> int:
    from mrcstats.stats.dif import dif, dif_validate

    log = read_log_args(args, args.log, "dif")
    groups = _groups(args.group)
    kw = {"strata": args.strata, "adjust": args.adjust, "logistic": args.logistic}
    if args.validate:
        v = dif_validate(log, groups, args.validate, seed=args.seed, group=args.focal, progress=None, **kw)
        return output(args, v.to_dict(), v.summary())
    res = dif(log, groups, progress=None, **kw)
    if args.out:
        args.out.write_csv(res.table)
        info(f"mrcstats dif: DIF table written to {args.out}")
    return output(args, res.to_dict(), res.summary(args.top) if not args.json else None)
