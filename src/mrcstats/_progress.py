"""Progress bars on stderr (never stdout, so ``--json`` output stays clean)."""
from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any, Self


def progress(iterable: Iterable | None = None, *, total: int | None = None, desc: str = "",
             disable: bool | None = None, unit: str = "it") -> Any:
    """Return a tqdm progress bar writing to stderr.

    ``disable=None`` shows the bar only when stderr is a terminal, so logs and
    tests stay quiet; pass ``disable=False`` to force it. A disabled bar is a
    :class:`_Quiet` (the iterable, and no-op ``update``/``close``/``set_postfix_str``),
    so commands that show no bar never import tqdm (about 0.1 s).
    """
    if disable is None:
        disable = not sys.stderr.isatty()
    if disable:
        return _Quiet(iterable)
    from tqdm.auto import tqdm

    return tqdm(iterable, total=total, desc=desc, disable=disable, file=sys.stderr, unit=unit,
                dynamic_ncols=True, leave=False)


class _Quiet:
    """A disabled progress bar: iterates its iterable; every bar method does nothing."""

    def __init__(self, iterable: Iterable | None) -> None:
        self._iterable = iterable

    def __iter__(self) -> Any:
        return iter(self._iterable if self._iterable is not None else ())

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, n: float = 1) -> None:
        return None

    def close(self) -> None:
        return None

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        return None

    def set_description(self, desc: str | None = None, refresh: bool = True) -> None:
        return None
