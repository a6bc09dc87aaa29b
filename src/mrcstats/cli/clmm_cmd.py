"""CLI subcommand ``clmm`` (argument parsing only; logic lives in :mod:`mrcstats.models.clmm`)."""
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
    """Add ``clmm`` to the mrcstats parser."""
    p = sub.add_parser(
        "clmm", help="cumulative-link mixed model for ordered ratings (LLM-judge scores), as ordinal::clmm",
        description="Fit a cumulative-link mixed model as R's ordinal::clmm(formula, data, link = LINK) "
                    "(Laplace approximation, flexible thresholds named 1|2, 2|3, ...) to an ordered rating: "
                    "consecutive whole numbers, or labels ordered with --levels RATING=low,mid,high. Random "
                    "intercepts, crossed allowed: 'rating ~ x + (1 | item) + (1 | model)'. DATA: any table or "
                    "log mrcstats ingest reads.")
    add_model_args(p, "score ~ LLM + (1 | item)")
    p.add_argument("--link", choices=("logit", "probit"), default="logit",
                   help="cumulative link: logit (proportional odds, default) or probit")
    p.add_argument("--ranef", action="store_true", help="conditional modes and variances of the random effects")
    p.add_argument("--probs", action="store_true",
                   help="population-level category probabilities of every row used (JSON key 'probs')")
    add_log_options(p)
    add_emmeans_args(p)
    add_json_flag(p)
    p.set_defaults(func=_clmm)


def _clmm(args: argparse.Namespace) -> int:
    from mrcstats._blas import keep_freed_memory, pin_blas

    pin_blas()            # before numpy loads: the fit then needs no threadpoolctl scan
    keep_freed_memory()   # freed arrays reused, not fresh pages per PIRLS step
    from mrcstats.models.clmm import clmm

    spec, contrasts, levels = parse_model_args(args, "clmm")
    data = read_data_args(args, "clmm")
    m = clmm(spec, data, link=args.link, contrasts=contrasts or None, levels=levels or None)
    obj, text = model_output(args, m, "clmm")
    if args.probs:
        pr = m.predict()
        obj["probs"] = {"levels": list(m.levels), "rows": pr.to_numpy().tolist()}
        text.append(f"\nCategory probabilities (population level; the first 10 of {len(pr)} rows, all with "
                    f"--json)\n{pr.head(10).to_string()}\nmean over the rows\n{pr.mean().to_frame().T.to_string(index=False)}")
    emmeans_block(args, m, obj, text)
    return output(args, obj, "\n".join(text))
