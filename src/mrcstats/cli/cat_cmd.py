"""CLI subcommands ``cat calibrate`` and ``cat run``: adaptive testing from an item bank (argument parsing only).

* ``mrcstats cat calibrate LOG... --out BANK.json [--irt-model 2pl|1pl] [--content COL] [--no-screen]
  [--tasks TASKFILE] [--folds K | --no-misfit] [--seed S]`` -> the bank file (:func:`mrcstats.stats.cat.calibrate`,
  with the K-fold model-misfit term);
* ``mrcstats cat run --bank BANK (--endpoint URL --model NAME --out LOG.jsonl [--tasks TASKFILE] |
  --replay LOG [--model NAME]) [--target-se S] [--max-items N] [--seed S] [--sampling-seed S] [--no-misfit]
  [--json]`` -> ``{"model",
  "items_asked", "ability", "ability_se", "predicted_accuracy", "predicted_accuracy_ci", "items": [...], ...}``
  (:func:`mrcstats.query.cat.run_cat_endpoint`, :func:`mrcstats.stats.cat.replay`).
"""
from __future__ import annotations

import argparse

from mrcstats._seeds import parse_seed
from mrcstats.cli._common import (
    add_format_option,
    add_input,
    add_json_flag,
    add_map_option,
    add_output,
    add_threshold_option,
    info,
    output,
    read_log_args,
)


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``cat calibrate`` and ``cat run`` to the mrcstats parser."""
    c = sub.add_parser("cat", help="adaptive testing: calibrate an item bank, run a model adaptively",
                       description="Computerised adaptive testing (docs/adaptive.md): `cat calibrate` fits the 2PL "
                                   "on a multi-model log and stores the item bank; `cat run` asks a model one item at a "
                                   "time (maximum information, content balancing, randomesque exposure control) "
                                   "through the query adapter or from an existing log (--replay) and predicts its "
                                   "full-benchmark accuracy with an interval that includes the calibration error.")
    csub = c.add_subparsers(dest="cat_command", metavar="ACTION", parser_class=type(c))

    p = csub.add_parser("calibrate", help="fit the 2PL on a multi-model log and write the item bank",
                        description="Fit the 2PL (or 1PL) with the models as respondents and write the item bank "
                                    "(parameters, SEs, texts where known, the ability-to-accuracy curve, provenance). "
                                    "Items the screen flags (wrong keys) are excluded, with a note.")
    add_input(p, "log", nargs="+", metavar="LOG", help="multi-model canonical log (or any read_log input)")
    add_format_option(p)
    add_map_option(p)
    add_threshold_option(p)
    add_output(p, "--out", required=True, metavar="BANK.json", help="the item bank file (JSON)")
    p.add_argument("--irt-model", default="auto", choices=("auto", "2pl", "1pl", "rasch"),
                   help="item response model (auto: the 2PL with 30 or more models, else the 1PL)")
    p.add_argument("--content", metavar="COL", help="item-level column to balance over (default: category, else "
                                                    "cluster when it groups items)")
    p.add_argument("--no-screen", dest="screen", action="store_false",
                   help="keep the items the screen would flag (faster; see `mrcstats screen`)")
    p.add_argument("--screen-fdr", type=float, default=0.1, metavar="Q", help="screen's FDR for flagging (0.1)")
    add_input(p, "--tasks", metavar="TASKFILE", help="a `mrcstats query` task file: the item texts kept in the bank")
    p.add_argument("--folds", type=int, metavar="K",
                   help="K-fold refit over the calibration models for the out-of-sample model-misfit term of the "
                        "intervals (default: mrcstats.stats.cat.MISFIT_FOLDS = 5; 0: none, several times faster)")
    p.add_argument("--no-misfit", dest="folds", action="store_const", const=0, help="same as --folds 0")
    p.add_argument("--seed", type=parse_seed, default=0, metavar="S",
                   help="seed of the misfit folds and their adaptive runs (0)")
    add_json_flag(p)
    p.set_defaults(func=_calibrate)

    p = csub.add_parser("run", help="run a model adaptively (endpoint or --replay LOG) and predict its accuracy",
                        description="Ask one item at a time, the most informative at the current ability (EAP), "
                                    "balanced over the bank's content groups, until the SE of the predicted accuracy "
                                    "reaches --target-se or --max-items are asked. With --endpoint the answers come "
                                    "through the query adapter (resumable --out log: rerun the same command to "
                                    "resume); with --replay from an existing log.")
    add_input(p, "--bank", required=True, metavar="BANK.json", help="item bank from `mrcstats cat calibrate`")
    p.add_argument("--endpoint", "--base-url", dest="endpoint", metavar="URL",
                   help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1")
    add_input(p, "--replay", nargs="+", metavar="LOG", help="answer from this log instead of an endpoint")
    add_format_option(p)
    add_map_option(p)
    p.add_argument("--model", metavar="NAME", help="model name (sent to the endpoint; with --replay: the log's model)")
    add_input(p, "--tasks", metavar="TASKFILE", help="task file with the prompts (default: the bank's texts)")
    add_output(p, "--out", metavar="LOG.jsonl", help="endpoint mode: the resumable JSONL log of the answers")
    p.add_argument("--api-key-env", metavar="VAR", help="environment variable holding the API key")
    p.add_argument("--target-se", type=float, metavar="S",
                   help="stop when the SE of the predicted accuracy is at most S (a share: 0.0075 ~ +-1.5 points)")
    p.add_argument("--max-items", type=int, default=100, metavar="N", help="stop after N items (100)")
    p.add_argument("--seed", type=parse_seed, default=0, metavar="S",
                   help="CAT seed: exposure control and the interval draws (0); keep it to resume. Not sent to "
                        "the endpoint (that is --sampling-seed)")
    p.add_argument("--sampling-seed", type=parse_seed, metavar="S",
                   help="endpoint mode: the model's sampling seed sent with each request (as `query --seed`; "
                        "default: none sent)")
    p.add_argument("--no-misfit", dest="misfit", action="store_false",
                   help="leave the bank's model-misfit variance out of the interval and the stopping rule")
    p.add_argument("--topk", type=int, default=5, metavar="K", help="randomesque: pick among the K most "
                                                                    "informative items (5; 1 = none)")
    p.add_argument("--level", type=float, default=0.95, help="interval level (0.95)")
    p.add_argument("--draws", type=int, default=400, metavar="M", help="simulation draws of the interval (400)")
    p.add_argument("--temperature", type=float, metavar="T")
    p.add_argument("--max-tokens", type=int, metavar="M")
    p.add_argument("--max-attempts", type=int, default=6, help="attempts per request before the run stops (6)")
    p.add_argument("--backoff", type=float, default=1.0, metavar="SECONDS", help="first retry delay (1)")
    p.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS", help="per-request timeout")
    add_output(p, "--trace-out", metavar="CSV", help="also write the items asked and the ability trace")
    add_json_flag(p)
    p.set_defaults(func=_run)


def _calibrate(args: argparse.Namespace) -> int:
    from mrcstats._files import sha256_of
    from mrcstats.stats.cat import calibrate

    log = read_log_args(args, args.log, "cat calibrate")
    texts = None
    if args.tasks:
        from mrcstats.query.taskfile import read_taskfile

        texts = {t.item: {"prompt": t.prompt, "gold": t.gold} for t in read_taskfile(args.tasks)}
    bank = calibrate(log, irt_model=args.irt_model, content=args.content, screen=args.screen,
                     screen_fdr=args.screen_fdr, texts=texts, data_sha256=sha256_of(*args.log), seed=args.seed,
                     **({} if args.folds is None else {"folds": args.folds}))
    bank.save(args.out)
    info(f"mrcstats cat calibrate: bank of {bank.n_items} items written to {args.out}")
    d = bank.to_dict()
    misfit = {k: v for k, v in d["misfit"].items() if k != "residuals"}
    return output(args, {k: d[k] for k in ("format", "irt_model", "n_items", "excluded", "provenance", "notes")}
                  | {"misfit": misfit, "out": str(args.out)}, bank.summary())


def _run(args: argparse.Namespace) -> int:
    from mrcstats.errors import InputError

    if (args.endpoint is None) == (args.replay is None):
        raise InputError("give either --endpoint URL (with --model and --out) or --replay LOG")
    kw = {"max_items": args.max_items, "target_se": args.target_se, "seed": args.seed, "topk": args.topk,
          "level": args.level, "draws": args.draws, "misfit": args.misfit}
    if args.replay is not None:
        from mrcstats.stats.cat import load_bank, replay

        bank = load_bank(args.bank)
        log = read_log_args(args, args.replay, "cat run")
        res = replay(bank, log, args.model, **kw)
    else:
        if not args.model or not args.out:
            raise InputError("--endpoint needs --model NAME and --out LOG.jsonl (the resumable log of the answers)")
        from mrcstats.query.cat import CatQueryConfig, run_cat_endpoint

        cfg = CatQueryConfig(bank=args.bank, model=args.model, base_url=args.endpoint, out=str(args.out),
                             tasks=args.tasks, api_key_env=args.api_key_env, temperature=args.temperature,
                             max_tokens=args.max_tokens, max_attempts=args.max_attempts, backoff_base=args.backoff,
                             timeout=args.timeout, sampling_seed=args.sampling_seed, **kw)
        res = run_cat_endpoint(cfg)
    if args.trace_out:
        args.trace_out.write_table(res.trace)
    return output(args, res.to_dict(), res.summary())
