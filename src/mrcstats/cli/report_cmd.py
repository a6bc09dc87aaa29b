"""CLI subcommands for the report area (argument parsing only; logic lives in :mod:`mrcstats.report`).

* ``mrcstats report SPEC.yaml --out reports/NAME.pdf`` — run the spec's analyses, write the PDF and,
  beside it, ``NAME_tables/`` (LaTeX booktabs, Markdown, CSV, HTML) and ``NAME_figures/`` (vector PDF);
* ``mrcstats demo --outdir reports`` — simulate a demo log with known truth and write ``demo.pdf``;
* ``mrcstats demo --models M --items N --out DIR`` — a leaderboard-shaped log with known truth as a
  partitioned Parquet dataset (:func:`mrcstats.tasks.leaderboard.leaderboard_log`).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from mrcstats._seeds import parse_seed
from mrcstats.cli._common import add_input, add_json_flag, add_output, info, output


def register(sub: argparse._SubParsersAction) -> None:
    """Add this area's subcommands to the mrcstats parser."""
    r = sub.add_parser("report", help="build a PDF report (tables, figures, methods) from a YAML spec",
                       description="Read the logs named in SPEC, run its analyses and write a PDF report with a "
                                   "data summary, a Methods section, tables and figures; the tables are also "
                                   "written beside the PDF as LaTeX (booktabs), Markdown, CSV and HTML. "
                                   "The spec format: docs/report.md.")
    add_input(r, "spec", help="the report spec (YAML)")
    add_output(r, "--out", suffixes=(".pdf",), required=True, help="the PDF to write, e.g. reports/NAME.pdf")
    r.add_argument("--format", default="pdf", choices=["pdf", "html"],
                   help="pdf (default): the PDF; html: also NAME.html beside it, one self-contained interactive "
                        "page (sortable tables, figures with hover; the PDF's numbers; no network when viewed)")
    r.add_argument("--strict", action="store_true",
                   help="stop at the first analysis that fails (exit code 2, nothing written); by default a failing "
                        "analysis is skipped with a note in the report and a line on stderr, and the report is written")
    add_json_flag(r)
    r.set_defaults(func=_report)

    d = sub.add_parser("demo", help="simulate a demo log with known truth and write reports/demo.pdf",
                       description="Simulate a RACE-like log with known truth (3 models, passages with several "
                                   "questions, 4 masking conditions x masking rates x 2 trials), then write "
                                   "OUTDIR/demo_log.parquet, OUTDIR/demo.yaml (its report spec) and OUTDIR/demo.pdf "
                                   "(GLMM fixed and random effects against the truth, Fisher tests, discrimination, "
                                   "masking curves, methods). Native engine only: no R needed.")
    add_output(d, "--outdir", kind="folder", default="reports", help="output folder (default: reports)")
    d.add_argument("--seed", type=parse_seed, default=0, help="random seed of the simulation (default: 0)")
    g = d.add_argument_group("leaderboard-sized log (instead of the report)",
                             "with --models/--items/--out: write a leaderboard-shaped log with known truth "
                             "(Rasch-like: model ability - item difficulty + cluster effect) as a partitioned "
                             "Parquet dataset, in chunks (bounded memory), for the scale benchmarks")
    g.add_argument("--models", type=int, metavar="M", help="number of models")
    g.add_argument("--items", type=int, metavar="N", help="number of items")
    add_output(g, "--out", kind="folder", metavar="DIR", help="the dataset folder to write")
    g.add_argument("--trials", type=int, default=1, metavar="T", help="trials per model and item (1)")
    g.add_argument("--items-per-cluster", type=int, default=4, metavar="K", help="items per cluster (4)")
    g.add_argument("--invalid-rate", type=float, default=0.01, metavar="P", help="share of invalid answers (0.01)")
    g.add_argument("--chunk-rows", type=int, default=1_000_000, metavar="R", help="rows per chunk (1,000,000)")
    add_json_flag(d)
    d.set_defaults(func=_demo)


def _report(args: argparse.Namespace) -> int:
    from mrcstats._files import check_output_path
    from mrcstats.report.build import build_report

    if args.format == "html":   # (--out itself: checked before the command ran, cli._common.check_outputs)
        check_output_path(str(Path(args.out).with_suffix(".html")), suffixes=(".html",), inputs=[args.spec])
    res = build_report(args.spec, args.out, html=args.format == "html", on_error="raise" if args.strict else "skip")
    info(res.summary())
    for f in res.failed:
        info(f"mrcstats report: {args.spec}: {f} (the analysis was skipped with a note; --strict stops instead)")
    return output(args, res.to_dict(), str(res.pdf))


def _demo(args: argparse.Namespace) -> int:
    if args.models is not None or args.items is not None or args.out is not None:
        return _demo_leaderboard(args)
    from mrcstats.report.demo import run_demo

    res = run_demo(args.outdir, seed=args.seed)
    info(res.summary())
    html = f"\nwrote {res.report.html}" if res.report.html is not None else ""
    return output(args, res.to_dict(), _headline_text(res.headline) + f"\nwrote {res.report.pdf}" + html)


def _headline_text(h: dict) -> str:
    from mrcstats._pformat import p_clause

    lines = []
    for name, g in (h.get("glmm") or {}).items():
        lines.append(f"GLMM {name}: estimate (truth)")
        for t, v in g["estimate"].items():
            tv = g["truth"].get(t)
            lines.append(f"  {t:<28} {v: .3f}" + (f"  ({tv: .3f})" if tv is not None else ""))
        w = g.get("wald_truth") or {}
        lines.append(f"  max |estimate - truth| = {g['max_abs_error']:.3f}; largest |z| against the truth "
                     f"{max((abs(v) for v in g.get('z_truth', {}).values()), default=float('nan')):.2f}; joint Wald chi2({w.get('df')}) = "
                     f"{w.get('chi2', float('nan')):.2f}, {p_clause(w.get('p'))}")
    return "\n".join(lines)


def _demo_leaderboard(args: argparse.Namespace) -> int:
    from mrcstats.errors import InputError
    from mrcstats.tasks.leaderboard import leaderboard_log

    if args.models is None or args.items is None or args.out is None:
        raise InputError("a leaderboard log needs all of --models M --items N --out DIR")
    res = leaderboard_log(args.out, models=args.models, items=args.items, trials=args.trials,
                          items_per_cluster=args.items_per_cluster, seed=args.seed,
                          invalid_rate=args.invalid_rate, chunk_rows=args.chunk_rows)
    return output(args, res.to_dict(), res.summary())
