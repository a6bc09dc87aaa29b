"""``mrcstats`` command line: argument parsing only.

Each area registers its subcommands from its own module (``cli/<area>_cmd.py``)
through ``register(subparsers)``; handlers call the typed Python API and return
an exit code. Heavy libraries are imported inside handlers, never at import
time, so ``mrcstats --help`` and ``mrcstats query`` start fast.

Errors: a :class:`mrcstats.errors.MrcstatsError` becomes one line on stderr and
exit code 2, with no traceback.

Paths: an argument naming files or folders that are read is declared with
:func:`~mrcstats.cli._common.add_input`, one that is written with
:func:`~mrcstats.cli._common.add_output`; :func:`main` checks every output against the
inputs before the handler runs (:func:`~mrcstats.cli._common.check_outputs`), and the
handler gets a :class:`mrcstats._files.OutputPath` that writes atomically.
"""
from __future__ import annotations

import argparse
import importlib
import sys
import warnings
from collections.abc import Sequence

from mrcstats import __version__
from mrcstats.cli._common import check_outputs
from mrcstats.errors import MrcstatsError

#: command modules, in the order their subcommands appear in ``--help``
COMMAND_MODULES = (
    "io_cmd",        # ingest, summary
    "features_cmd",  # features, models download
    "glmm_cmd",      # glmer
    "lmer_cmd",      # lmer
    "clmm_cmd",      # clmm
    "stats_cmd",     # fisher, chisq, mcnemar, discrim
    "masking_cmd",   # masking, mskcal, mask
    "query_cmd",     # query
    "tasks_cmd",     # elagent ...
    "report_cmd",    # report, demo
    "compare_cmd",   # compare, ranks, variance, power
    "irt_cmd",       # irt, subset, subset-eval
    "screen_cmd",    # screen, dif
    "agreement_cmd",  # agreement, judge
    "cat_cmd",       # cat calibrate, cat run
)


#: the module that registers each command (tests/cli/test_startup.py checks it against the modules): a command
#: line that names its command first builds that command's parser only (the others' registration is start-up
#: time the command does not need)
COMMANDS = {
    "ingest": "io_cmd", "summary": "io_cmd", "export": "io_cmd", "features": "features_cmd",
    "models": "features_cmd", "glmer": "glmm_cmd", "lmer": "lmer_cmd", "clmm": "clmm_cmd", "fisher": "stats_cmd",
    "chisq": "stats_cmd", "discrim": "stats_cmd", "mcnemar": "stats_cmd", "masking": "masking_cmd",
    "mskcal": "masking_cmd", "mask": "masking_cmd", "query": "query_cmd", "elagent": "tasks_cmd",
    "report": "report_cmd", "demo": "report_cmd", "compare": "compare_cmd", "ranks": "compare_cmd",
    "variance": "compare_cmd", "power": "compare_cmd",
    "irt": "irt_cmd", "subset": "irt_cmd", "subset-eval": "irt_cmd", "screen": "screen_cmd", "dif": "screen_cmd",
    "relabel": "screen_cmd",
    "agreement": "agreement_cmd", "judge": "agreement_cmd", "cat": "cat_cmd",
}


class _Parser(argparse.ArgumentParser):
    """argparse with exit code 2 and a one-line message (argparse's own convention)."""

    def error(self, message: str) -> None:  # pragma: no cover - exercised via CLI tests
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``mrcstats`` parser: every command, or only ``command``'s module's (:data:`COMMANDS`)."""
    parser = _Parser(prog="mrcstats", description="Item-level statistics for LLM evaluation logs.")
    parser.add_argument("--version", action="version", version=f"mrcstats {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in (COMMANDS[command],) if command in COMMANDS else COMMAND_MODULES:
        module = importlib.import_module(f"mrcstats.cli.{name}")
        module.register(sub)
    return parser


def _showwarning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"mrcstats: warning: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``mrcstats`` console script; returns the exit code."""
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(words[0] if words else None)    # the command named first: its parser only
    args = parser.parse_args(words)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    warnings.showwarning = _showwarning
    try:
        check_outputs(args)     # the one output rule: every declared output path, before anything runs
        code = args.func(args)
    except MrcstatsError as exc:
        print(f"mrcstats {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"mrcstats {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `mrcstats summary ... | head`
        return 0
    return int(code or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
