"""CLI subcommands for screening items and DIF (argument parsing only).

* ``mrcstats screen LOG [--fdr 0.1] [--seed S] [--top N] [--items-out CSV] [--json]``
  -> ``{"items": [{"item", "score", "flag", "suggested_key", "evidence": {...}}], "notes": [...], ...}`` with
  every item of the log (:func:`mrcstats.stats.screen.screen`);
* ``mrcstats screen LOG --validate K [--seed S] [--json]`` -> ``{"k", "seed", "metrics": [{"signal", "auc",
  "precision_at_k"}], "injected": [...], ...}`` (:func:`mrcstats.stats.screen.screen_validate`);
* ``mrcstats dif LOG --group model=COLUMN | --group MAP.csv [--strata 5] [--adjust BH] [--json]``
  -> ``{"items": [{"item", "group", "favours", "delta_mh", "ets", "mh_chisq", ...}], "groups", ...}``
  (:func:`mrcstats.stats.dif.dif`); with ``--validate K [--seed S]``: ``{"k", "group", "metrics": [{"method",
  "auc", "precision_at_k"}], ...}`` (:func:`mrcstats.stats.dif.dif_validate`).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from mrcstats._seeds import parse_seed
from mrcstats.cli._common import add_json_flag, add_log_options, info, output, read_log_args
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
    p = sub.add_parser("screen", help="rank items by how likely they are broken (mis-keyed, ill-posed), with evidence",
                       description="Screen every item of a log: accuracy, rest-score point-biserial, signed 2PL "
                                   "slope with the abilities fixed, Rasch infit/outfit and, with pred/gold, the "
                                   "option the strongest models converge on and the log-likelihood change if it "
                                   "were the key. One combined score (higher = more suspect) with BH q-values "
                                   "against a simulated null recentred on the log's own items (empirical null); "
                                   "items with q <= --fdr are flagged. --validate K "
                                   "moves K keys to a distractor some model chose and reports the ROC AUC and "
                                   "precision at K of every signal.")
    p.add_argument("log", nargs="+", metavar="LOG", help="canonical log or any read_log input (pred and gold help)")
    add_log_options(p)
    p.add_argument("--fdr", type=float, default=0.1, help="flag items with estimated FDR (q-value) <= this (0.1)")
    p.add_argument("--irt-model", default="2pl", choices=("1pl", "2pl"), help="abilities from this IRT model (2pl)")
    p.add_argument("--seed", type=parse_seed, default=0, metavar="S", help="seed of the injected copies and the null (0)")
    p.add_argument("--calibration", default="empirical", choices=("empirical", "simulated"),
                   help="p-values: the simulated null recentred on the log's items (empirical) or as simulated")
    p.add_argument("--validate", type=_positive, metavar="K", help="move K keys and measure the screen's power")
    p.add_argument("--top", type=int, default=20, metavar="N", help="rows shown in the text table (20)")
    p.add_argument("--items-out", metavar="CSV", help="also write the full item table to this CSV")
    add_json_flag(p)
    p.set_defaults(func=_screen)

    p = sub.add_parser("dif", help="differential item functioning between model groups (Mantel-Haenszel, logistic)",
                       description="DIF of every item between groups of models (e.g. families): Mantel-Haenszel "
                                   "over total-score strata (R mantelhaen.test; ETS A/B/C) and logistic-regression "
                                   "likelihood ratios (uniform, non-uniform; as difR's difLogistic), p-values "
                                   "adjusted over all items x groups. --validate K makes K items easier for one "
                                   "group and reports the detection AUC.")
    p.add_argument("log", nargs="+", metavar="LOG", help="canonical log or any read_log input")
    add_log_options(p)
    p.add_argument("--group", required=True, metavar="model=COLUMN|CSV",
                   help="the log column naming each model's group (model=family), or a CSV with columns model,group")
    p.add_argument("--strata", type=_positive, default=5, help="total-score strata for Mantel-Haenszel (5)")
    p.add_argument("--adjust", default="BH", metavar="METHOD", help="p-value adjustment: holm, bonferroni, BH, none (BH)")
    p.add_argument("--no-logistic", dest="logistic", action="store_false", help="Mantel-Haenszel only")
    p.add_argument("--validate", type=_positive, metavar="K", help="inject DIF into K items and measure detection")
    p.add_argument("--focal", metavar="GROUP", help="--validate: the group made to find the items easier (random)")
    p.add_argument("--seed", type=parse_seed, default=0, metavar="S", help="seed of --validate (0)")
    p.add_argument("--top", type=int, default=20, metavar="N", help="rows shown in the text table (20)")
    p.add_argument("--out", metavar="CSV", help="also write the full DIF table to this CSV")
    add_json_flag(p)
    p.set_defaults(func=_dif)


def _screen(args: argparse.Namespace) -> int:
    from mrcstats.stats.screen import screen, screen_validate

    if not (0 < args.fdr < 1):
        raise InputError(f"--fdr must lie strictly between 0 and 1, got {args.fdr}")
    log = read_log_args(args, args.log, "screen")
    if args.validate:
        v = screen_validate(log, args.validate, seed=args.seed, fdr=args.fdr, irt_model=args.irt_model,
                            progress=None, calibration=args.calibration)
        return output(args, v.to_dict(), v.summary())
    res = screen(log, fdr=args.fdr, irt_model=args.irt_model, seed=args.seed, progress=None,
                 calibration=args.calibration)
    if args.items_out:
        res.items.to_csv(args.items_out, index=False)
        info(f"mrcstats screen: item table written to {args.items_out}")
    return output(args, res.to_dict(), res.summary(args.top) if not args.json else None)


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
        res.table.to_csv(args.out, index=False)
        info(f"mrcstats dif: DIF table written to {args.out}")
    return output(args, res.to_dict(), res.summary(args.top) if not args.json else None)
