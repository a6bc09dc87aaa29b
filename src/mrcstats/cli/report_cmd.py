"""CLI subcommands for the report area (argument parsing only; logic lives in the API).

``demo`` is a temporary command (io area) until the report area turns it into the PDF report:
it simulates a log with :func:`mrcstats.tasks.simulate.simulate_log` and writes the log and an
accuracy summary under ``--outdir``.
"""
from __future__ import annotations

import argparse

from mrcstats.cli._common import add_json_flag, info, output


def register(sub: argparse._SubParsersAction) -> None:
    """Add this area's subcommands to the mrcstats parser."""
    d = sub.add_parser("demo", help="simulate a demo log with known truth and summarise it",
                       description="Simulate a demo response log (3 models, passages with several questions, "
                                   "4 masking conditions x 21 masking rates x trials) and write "
                                   "OUTDIR/demo_log.parquet, OUTDIR/demo_summary.md and OUTDIR/demo_summary.json.")
    d.add_argument("--outdir", default="reports", help="output folder (default: reports)")
    d.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    add_json_flag(d)
    d.set_defaults(func=_demo)


def _demo(args: argparse.Namespace) -> int:
    from pathlib import Path

    from mrcstats._files import write_text_atomic
    from mrcstats._jsonout import dumps
    from mrcstats.io import log_stats, write_log
    from mrcstats.stats.accuracy import summarize
    from mrcstats.tasks.simulate import simulate_log

    out = Path(args.outdir)
    log = simulate_log(seed=args.seed)
    log_path = write_log(log, out / "demo_log.parquet")
    by_model = summarize(log, by=["model"])
    by_cond = summarize(log, by=["condition"])
    at_zero = summarize(log[log["masking_rate"] == 0], by=["model"])
    result = {"log": str(log_path), "ingest": log_stats(log), "truth": log.attrs["truth"],
              "by_model": by_model.to_dict()["groups"], "by_condition": by_cond.to_dict()["groups"],
              "by_model_unmasked": at_zero.to_dict()["groups"]}
    md = "\n".join([
        "# mrcstats demo", "",
        f"Simulated log: `{log_path}` ({len(log)} rows, seed {args.seed}). True model: "
        f"`{log.attrs['truth']['formula_paper']}` plus a masking-rate slope per condition.", "",
        "## Accuracy by model (all masking rates)", "", "```", by_model.summary(), "```", "",
        "## Accuracy by model at masking rate 0", "", "```", at_zero.summary(), "```", "",
        "## Accuracy by masking condition", "", "```", by_cond.summary(), "```", "",
    ])
    write_text_atomic(out / "demo_summary.md", md)
    write_text_atomic(out / "demo_summary.json", dumps(result, indent=2) + "\n")
    info(f"wrote {log_path}, {out / 'demo_summary.md'}, {out / 'demo_summary.json'}")
    return output(args, result, md)
