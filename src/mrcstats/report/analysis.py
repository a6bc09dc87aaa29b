"""Shared command-line scaffolding of the seed reproductions in ``analyses/``."""
from __future__ import annotations

import argparse
from pathlib import Path


def analysis_parser(doc: str, repo: Path, out_name: str) -> argparse.ArgumentParser:
    """Parser with the arguments every seed script takes: the shared data folder and ``--out``.

    ``data`` defaults to ``../shared/data`` beside the repository, ``--out`` to
    ``reports/<out_name>``; scripts add their own options to the returned parser.
    """
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("data", nargs="?", default=str(repo.parent / "shared" / "data"),
                    help="the shared data folder (default: ../shared/data beside the repository)")
    ap.add_argument("--out", default=str(repo / "reports" / out_name), help="output folder")
    return ap


def display_path(p: str | Path, repo: Path) -> str:
    """``p`` relative to ``repo`` when inside it, so headline files stay machine-independent."""
    try:
        return str(Path(p).resolve().relative_to(repo))
    except ValueError:
        return str(p)
