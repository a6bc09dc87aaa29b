"""Helpers shared by the CLI command modules."""
from __future__ import annotations

import argparse
import sys
from typing import Any

from mrcstats._jsonout import emit_json
from mrcstats.errors import InputError


def add_json_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true",
                   help="print exactly one JSON object on stdout (messages go to stderr)")


def info(msg: str) -> None:
    """A human-readable message on stderr (never stdout)."""
    print(msg, file=sys.stderr)


def output(args: argparse.Namespace, obj: Any, text: str | None = None) -> int:
    """Print ``obj`` as JSON with ``--json``, else ``text`` on stdout; return exit code 0."""
    if getattr(args, "json", False):
        emit_json(obj)
    else:
        print(text if text is not None else obj)
    return 0


def parse_kv(items: list[str] | None, flag: str) -> dict[str, str]:
    """Parse repeated ``NAME=VALUE`` flags into a dict (later ones win)."""
    out: dict[str, str] = {}
    for it in items or []:
        if "=" not in it:
            raise InputError(f"{flag} expects NAME=VALUE, got {it!r}")
        k, v = it.split("=", 1)
        if not k:
            raise InputError(f"{flag} expects NAME=VALUE, got {it!r}")
        out[k.strip()] = v.strip()
    return out


def parse_list(text: str | None, flag: str, cast=str) -> list:
    """Parse a comma-separated list flag (``--cutoffs 0,5,10``)."""
    if text is None:
        return []
    try:
        return [cast(x.strip()) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise InputError(f"{flag}: cannot read {text!r} as a comma-separated list ({exc})") from None
