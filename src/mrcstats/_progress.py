"""Progress bars on stderr (never stdout, so ``--json`` output stays clean)."""
from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any


def progress(iterable: Iterable | None = None, *, total: int | None = None, desc: str = "",
             disable: bool | None = None, unit: str = "it") -> Any:
    """Return a tqdm progress bar writing to stderr.

    ``disable=None`` shows the bar only when stderr is a terminal, so logs and
    tests stay quiet; pass ``disable=False`` to force it.
    """
    from tqdm.auto import tqdm

    if disable is None:
        disable = not sys.stderr.isatty()
    return tqdm(iterable, total=total, desc=desc, disable=disable, file=sys.stderr, unit=unit,
                dynamic_ncols=True, leave=False)
