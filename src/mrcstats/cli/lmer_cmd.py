"""CLI subcommand ``lmer`` (argument parsing only; logic lives in :mod:`mrcstats.models.lmm`)."""
from __future__ import annotations

import argparse

from mrcstats.cli._common import (
    add_emmeans_args,
    add_json_flag,
    add_log_options,
    add_model_args,
    emmeans_block,
    model_output,
    output,
    parse_model_args,
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
    p.add_argument("--anova", action="store_true",
                   help="type III F tests per fixed-effect term, as lmerTest's anova(m, type = 3) (JSON key 'anova')")
    p.add_argument("--ddf", choices=["satterthwaite", "kenward-roger"], default="satterthwaite",
                   help="denominator df of --anova and --emmeans: satterthwaite (lmerTest's default) or "
                        "kenward-roger (pbkrtest; REML fits, n x n matrices: at most 5,000 rows)")
    p.add_argument("--confint", choices=["profile", "Wald", "satterthwaite"], default=None,
                   help="confidence intervals as lme4's confint(m, method) (satterthwaite: t intervals of the "
                        "fixed effects; JSON key 'confint')")
    add_emmeans_args(p)
    add_log_options(p)
    add_json_flag(p)
    p.set_defaults(func=_lmer)


def _lmer(args: argparse.Namespace) -> int:
    from mrcstats._blas import keep_freed_memory, pin_blas

    pin_blas()            # before numpy loads: the fit then needs no threadpoolctl scan
    keep_freed_memory()
    from mrcstats.models.lmm import lmer

    spec, contrasts, levels = parse_model_args(args, "lmer")
    # one plain table is read without pandas, the columns the formula names (--anova, --confint and --emmeans
    # work on those too; --by names a formula variable)
    data = read_data_args(args, "lmer", columns=list(spec.columns))
    m = lmer(spec, data, reml=not args.ml, contrasts=contrasts or None, levels=levels or None)
    obj, text = model_output(args, m, "lmer")
    if args.anova:
        a = m.anova(type=3, ddf=args.ddf)
        obj["anova"] = a.to_dict()
        text.append("\n" + a.summary())
    if args.confint:
        ci = m.confint(args.confint)
        obj["confint"] = ci.to_dict()
        text.append("\n" + ci.summary())
    emmeans_block(args, m, obj, text)
    return output(args, obj, "\n".join(text))
