"""CLI subcommands for the stats area (argument parsing only; logic lives in the API)."""
from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    """Add this area's subcommands to the mrcstats parser."""
