"""CLI subcommand ``glmer`` (argument parsing only; logic lives in :mod:`mrcstats.models`)."""
from __future__ import annotations

import argparse
from typing import Any

from mrcstats._seeds import DEFAULT_SEED, parse_seed
from mrcstats.cli._common import (
    add_emmeans_args,
    add_json_flag,
    add_log_options,
    add_model_args,
    emmeans_block,
    info,
    model_output,
    output,
    parse_model_args,
    read_data_args,
)


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``glmer`` to the mrcstats parser."""
    from mrcstats.io.formats import formats_phrase
    from mrcstats.models.family_table import FAMILY_TABLE

    p = sub.add_parser(
        "glmer", help="GLMM (binomial, Poisson, beta-binomial; random intercepts and slopes), lme4-exact",
        description="Fit a generalized linear mixed model as lme4's glmer(formula, data, "
                    "family = binomial|poisson; glmmTMB's betabinomial): native engine (lme4's Laplace/AGQ objective with the conditional "
                    "modes fully converged) or lme4 through rpy2. DATA: any table or log mrcstats ingest "
                    f"reads ({formats_phrase()}).")
    add_model_args(p, "correct ~ scaled_tok * LLM + (1 | passage)")
    reads = {"binomial": "0/1, proportions with --weights or cbind(k, n - k)", "count": "counts",
             "continuous": "numeric scores: a linear mixed model, as mrcstats lmer"}
    p.add_argument("--family", choices=tuple(FAMILY_TABLE), default="binomial",
                   help="response distribution: " + "; ".join(f"{name} ({link} link; {reads[response]})"
                                                              for name, (link, response) in FAMILY_TABLE.items())
                        + " (default binomial)")
    p.add_argument("--weights", metavar="COL", help="prior weights column (R's weights=)")
    p.add_argument("--invalid", choices=("wrong", "exclude"), default="wrong",
                   help="invalid answers (correct empty) count as not correct (wrong, default, as summary, compare "
                        "and irt) or are left out (exclude)")
    p.add_argument("--vcov", choices=("hessian", "RX"), default="hessian",
                   help="covariance behind the standard errors: hessian (default, lme4's vcov()) or RX "
                        "(lme4's vcov(use.hessian = FALSE)); both engines follow it")
    p.add_argument("--nagq", type=int, default=1, metavar="N",
                   help="1 = Laplace (default), 0 = lme4's nAGQ=0, 2..25 = adaptive Gauss-Hermite")
    p.add_argument("--engine", choices=("native", "lme4", "duckdb", "dask"), default="native",
                   help="fitting engine; duckdb/dask (and any dataset folder): the native fit on binomial counts "
                        "collapsed from the rows by one DuckDB or Dask pass (exact; logs larger than memory)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="--engine dask: the address of a running Dask scheduler (tcp://host:8786); default: "
                        "an in-process scheduler. mrcstats never starts or stops a cluster")
    p.add_argument("--lme4-defaults", action="store_true",
                   help="lme4 engine: keep lme4's default tolPwrss (reproduce published numbers)")
    p.add_argument("--drop1", action="store_true", help="likelihood-ratio tests dropping each term (drop1)")
    p.add_argument("--gvif", action="store_true", help="generalized variance-inflation factors (car::vif)")
    p.add_argument("--ranef", action="store_true", help="conditional modes and variances of the random effects")
    p.add_argument("--correlation", action="store_true",
                   help="print the correlation matrix of the fixed effects even above 12 of them (lme4 leaves it "
                        "out there: print(summary(m), correlation = TRUE))")
    p.add_argument("--compare", metavar="REDUCED FORMULA",
                   help="likelihood-ratio test against this reduced model (anova)")
    add_log_options(p)
    # estimated marginal means (emmeans) -- keep this block separate from other options
    add_emmeans_args(p, types="link scale (emmean) or response scale (binomial: prob, pairs as odds ratios; "
                              "poisson: rate, pairs as ratios)")

    p.add_argument("--confint", choices=("Wald", "profile", "boot"), metavar="METHOD",
                   help="confidence intervals as lme4's confint(m, method=): Wald, profile or boot")
    p.add_argument("--level", type=float, default=0.95, help="confidence level of --confint (default 0.95)")
    p.add_argument("--nsim", type=int, default=1000, metavar="N", help="bootstrap samples for --confint boot")
    p.add_argument("--seed", type=parse_seed, default=DEFAULT_SEED, metavar="S", help="random seed for --confint boot (0)")
    add_json_flag(p)
    p.set_defaults(func=_glmer)


def _glmer(args: argparse.Namespace) -> int:
    from mrcstats._blas import keep_freed_memory, pin_blas

    pin_blas()            # before numpy loads: the fit then needs no threadpoolctl scan
    keep_freed_memory()   # freed arrays reused, not fresh pages per PIRLS step
    from mrcstats.errors import InputError
    from mrcstats.models import glmer

    spec, contrasts, levels = parse_model_args(args, args.family)     # what the family cannot do is refused here
    if args.scheduler and args.engine != "dask":
        raise InputError("--scheduler goes with --engine dask")
    # io decides: a dataset folder lazily (one DuckDB/Dask pass collapses it), one plain table without pandas, or
    # a frame
    data = read_data_args(args, "glmer", columns=_columns_used(args, spec), lazy=True)
    from mrcstats.io.invalid import apply_invalid, invalid_sentence

    data, n_invalid = apply_invalid(data, args.invalid)
    invalid_note = f"{invalid_sentence(n_invalid, args.invalid)} (--invalid {args.invalid})" if n_invalid else ""
    # --engine duckdb|dask is the CLI's spelling of the backend; the front door (mrcstats.glmer) chooses the rest
    engine, backend = ("native", args.engine) if args.engine in ("duckdb", "dask") else (args.engine, None)
    kw = {"contrasts": contrasts or None, "nagq": args.nagq, "engine": engine, "backend": backend,
          "scheduler": args.scheduler, "weights": args.weights, "levels": levels or None,
          "lme4_defaults": args.lme4_defaults, "family": args.family, "vcov": args.vcov, "invalid": args.invalid}
    m = glmer(spec, data, **kw)
    if invalid_note:
        info(f"mrcstats glmer: {invalid_note}")
    obj, text = model_output(args, m, "glmer")
    if args.confint:
        boot = {"nsim": args.nsim, "seed": args.seed} if args.confint == "boot" else {}
        ci = m.confint(args.confint, level=args.level, **boot)
        for msg in ci.messages:
            info(f"mrcstats glmer: confint: {msg}")
        obj["confint"] = ci.to_dict()
        text.append("\n" + ci.summary())
        for msg in ci.refused:          # lme4 too returns the other bounds and warns (exit 0)
            info(f"mrcstats glmer: confint: no bound: {msg}")
    if args.drop1 or args.gvif or args.compare:
        from mrcstats.models import compare
    if args.drop1:
        d1 = compare.drop1(m, data)
        obj["drop1"] = d1.to_dict()
        text.append("\n" + d1.summary())
    if args.gvif:
        gv = compare.gvif(m)
        obj["gvif"] = gv.to_dict()
        text.append("\n" + gv.summary())
    if args.compare:
        m0 = glmer(args.compare, data, **kw)
        an = compare.anova(m0, m)
        obj["anova"] = an.to_dict()
        text.append("\n" + an.summary())
    emmeans_block(args, m, obj, text)
    return output(args, obj, "\n".join(text))


#: the glmer options whose work needs a pandas frame (besides the lme4 engine and a linear model)
FRAME_OPTIONS = ("confint", "drop1", "gvif", "compare", "emmeans")


def _columns_used(args: argparse.Namespace, spec: Any) -> list[str] | None:
    """The columns the fit uses when nothing asked for needs a pandas frame (the lme4 engine, a family whose fit
    reads no pandas-free table -- capability ``fit.columns`` --, any of :data:`FRAME_OPTIONS`), else None:
    :func:`mrcstats.io.open_log` then may read one plain table without pandas (:func:`mrcstats.io.arrow_columns.read_table_columns`, the same rows and cells as
    ``read_data``)."""
    from mrcstats.models.family_table import supports

    if args.engine != "native" or not supports(args.family, "fit.columns") or \
            any(getattr(args, o) for o in FRAME_OPTIONS):
        return None
    return [*spec.columns, *([args.weights] if args.weights else [])]
