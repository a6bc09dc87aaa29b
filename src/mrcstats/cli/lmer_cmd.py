"""CLI subcommand ``lmer`` (argument parsing only; logic lives in :mod:`mrcstats.models.lmm`)."""
from __future__ import annotations

import argparse

from mrcstats.cli._common import (
    add_json_flag,
    add_log_options,
    add_model_args,
    model_output,
    output,
    parse_kv,
    parse_levels,
    read_data_args,
)


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``lmer`` to the mrcstats parser."""
    p = sub.add_parser(
        "lmer", help="linear mixed model (REML/ML) with Satterthwaite t-tests, as lme4 + lmerTest",
        description="Fit a linear mixed model as lme4's lmer(formula, data, REML = TRUE) for a numeric score "
                    "(partial credit, F1, BLEU, ...) and test each fixed effect as lmerTest's summary "
                    "(Satterthwaite degrees of freedom). DATA: any table or log mrcstats ingest reads.")
    add_model_args(p, "score ~ LLM + (1 | item)")
    p.add_argument("--ml", action="store_true", help="maximum likelihood instead of REML (lme4's REML = FALSE)")
    p.add_argument("--ranef", action="store_true", help="conditional modes and variances of the random effects")
    add_log_options(p)
    add_json_flag(p)
    p.set_defaults(func=_lmer)


def _lmer(args: argparse.Namespace) -> int:
    from mrcstats.models.lmm import lmer

    contrasts = parse_kv(args.contrasts, "--contrasts")
    levels = parse_levels(args.levels)
    data = read_data_args(args, "lmer")
    m = lmer(args.formula, data, reml=not args.ml, contrasts=contrasts or None, levels=levels or None)
    obj, text = model_output(args, m, "lmer")
    return output(args, obj, "\n".join(text))
