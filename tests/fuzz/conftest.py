"""The fuzz suite's case count and time, printed at the end of every session that ran fuzz tests."""
from __future__ import annotations

import time

_START: list[float] = []


def pytest_collection_finish(session) -> None:
    _START.append(time.monotonic())


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    from ._gen import CASES, SCALE

    total = sum(CASES.values())
    if not total:
        return
    secs = time.monotonic() - _START[0] if _START else float("nan")
    failed = len(terminalreporter.stats.get("failed", []))
    terminalreporter.write_sep("-", f"fuzz: {total:,} cases (scale {SCALE:g}) in {secs:.0f} s, "
                                    f"{failed} failed test(s)")
    for kind, n in sorted(CASES.items()):
        terminalreporter.write_line(f"  {kind:<28} {n:>7,}")
