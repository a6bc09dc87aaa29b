"""CLI subcommands for the tasks area (argument parsing only; logic lives in the API)."""
from __future__ import annotations

import argparse
import sys

from mrcstats._seeds import parse_seed
from mrcstats.cli._common import add_input, add_output


def register(sub: argparse._SubParsersAction) -> None:
    """Add this area's subcommands to the mrcstats parser."""
    p = sub.add_parser("elagent", help="ELAGENT tasks: generate task files, verify result files, score logs",
                       description="ELAGENT (seed 004) task generators with gold answers, a gold checker for "
                                   "result files (Tasks 1, 2, 5, 6), and scorers.")
    esub = p.add_subparsers(dest="elagent_command", metavar="SUBCOMMAND")

    g = esub.add_parser("generate", help="write a seeded TASKFILE.jsonl with gold answers",
                        description="Generate ELAGENT items (task1: redefined precedence; task2: choose the "
                                    "precedence; task5: deduction worlds; task6: predicate types) as a task file "
                                    "for `mrcstats query`. Deterministic given --seed.")
    g.add_argument("task", choices=["task1", "task2", "task5", "task6", "1", "2", "5", "6"])
    g.add_argument("--n", type=int, help="items (task1: expressions, each in every --moves condition); default "
                                         "200 (250 for task5)")
    g.add_argument("--seed", type=parse_seed, default=0)
    g.add_argument("--operators", type=int, default=3, help="task1/2: 2 or 3 distinct operators (default 3)")
    g.add_argument("--digits", type=int, help="task1/2: digits per operand, 1-5 (default 2 for task1, 1 for task2)")
    g.add_argument("--moves", default="none,one,two", help="task1: move conditions (default none,one,two)")
    g.add_argument("--move", default="two", help="task2: one or two (default two)")
    g.add_argument("--example", default="none", choices=["none", "shot", "cot"],
                   help="task1: prepend a worked example (shot) or a step-by-step one (cot)")
    g.add_argument("--variant", default="origin", help="task5: origin, random, neg, quant or derive")
    g.add_argument("--type", dest="ptype", default="TS", help="task6: NTNS, TNS, NTS or TS")
    add_output(g, "--out", required=True, metavar="TASKFILE.jsonl")
    g.set_defaults(func=_generate)

    v = esub.add_parser("verify", help="recompute the gold of every Task 1, 2, 5 and 6 item from its prompt",
                        description="Recompute the gold of every stored Task 1, 2, 5 and 6 item of ELAGENT result files "
                                    "(acc_*.json; also task files and query logs, *.jsonl) and compare: items, "
                                    "agree, ambiguous ([prompt, stored, fitting choices]) and disagree "
                                    "([prompt, stored, computed]).")
    add_input(v, "files", nargs="+", metavar="RESULTS.json")
    v.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    v.set_defaults(func=_verify)

    s = esub.add_parser("score", help="accuracy / exact match / BLEU / morph F1 of a log, per model and condition",
                        description="Score a response log (any format `mrcstats ingest` reads, e.g. a query "
                                    "log) per group.")
    add_input(s, "log", nargs="+", metavar="LOG")
    from mrcstats.cli._common import add_log_options

    add_log_options(s)
    s.add_argument("--metrics", default="accuracy", help="comma list of accuracy, exact, bleu, morph")
    from mrcstats.cli._common import add_by_option

    add_by_option(s, "model,condition")
    s.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    s.set_defaults(func=_score)
    p.set_defaults(func=lambda args: (p.print_help(sys.stderr), 2)[1])


def _generate(args: argparse.Namespace) -> int:
    from mrcstats.cli._common import info, parse_list
    from mrcstats.tasks.elagent.generate import generate, write_taskfile

    task = args.task if args.task.startswith("task") else f"task{args.task}"
    opts: dict = {}
    if task == "task1":
        opts = {"operators": args.operators, "digits": args.digits or 2,
                "moves": parse_list(args.moves, "--moves"), "example": args.example}
    elif task == "task2":
        opts = {"operators": args.operators, "digits": args.digits or 1, "move": args.move}
    elif task == "task5":
        opts = {"variant": args.variant}
    else:
        opts = {"ptype": args.ptype}
    rows = generate(task, args.n, seed=args.seed, **opts)
    write_taskfile(rows, args.out)
    info(f"elagent generate: wrote {len(rows)} {task} items to {args.out}")
    return 0


def _verify(args: argparse.Namespace) -> int:
    from mrcstats.cli._common import output
    from mrcstats.tasks.elagent.verify import verify_files

    res = verify_files(args.files)
    return output(args, res.to_dict(), res.summary())


def _score(args: argparse.Namespace) -> int:
    from mrcstats.cli._common import by_columns, output, parse_list, read_log_args
    from mrcstats.tasks.elagent.scoring import score_log

    log = read_log_args(args, args.log, "elagent score")
    table = score_log(log, parse_list(args.metrics, "--metrics"), by_columns(args))
    return output(args, {"groups": table, "skipped": log.attrs.get("skipped", {})}, table.to_string(index=False))
