"""How every result and table shows itself: one plain ``__repr__`` and one ``_repr_html_``.

Every result class derives from :class:`Result` and is declared ``@dataclass(frozen=True, repr=False)``
(a dataclass would otherwise write its own field-by-field ``__repr__`` over this one). Nothing here
computes a number: the plain text is the object's own ``summary()``, the HTML is its own ``to_html()``
when it has one (the report tables, formatted by :mod:`mrcstats.report.format`) or else its
``to_frame()`` as a pandas HTML table, followed by ``summary()`` in a collapsible block. The
convention is that of R's print methods and of modelsummary's HTML tables in notebooks.
"""
from __future__ import annotations

import html
import shutil
from typing import Any

#: the plain ``repr`` shows at most this many lines of ``summary()``
MAX_LINES = 30
#: and cuts lines longer than the terminal (at least 60, at most 120 columns)
_MIN_WIDTH, _MAX_WIDTH = 60, 120
#: HTML tables show at most this many rows (head and tail, as pandas does)
MAX_ROWS = 30


def _width() -> int:
    return max(_MIN_WIDTH, min(_MAX_WIDTH, shutil.get_terminal_size((100, 24)).columns))


def _summary_text(obj: Any) -> str:
    try:
        text = obj.summary()
    except Exception as exc:  # noqa: BLE001 - a repr must never raise; say why instead
        return f"(summary() failed: {type(exc).__name__}: {exc})"
    return text if isinstance(text, str) else str(text)


def plain_repr(obj: Any, max_lines: int = MAX_LINES, width: int | None = None) -> str:
    """``<ClassName>`` then ``summary()``, at most ``max_lines`` lines of at most ``width`` columns."""
    width = width or _width()
    lines = _summary_text(obj).splitlines()
    shown = [ln if len(ln) <= width else ln[: width - 1] + "…" for ln in lines[:max_lines]]
    if len(lines) > max_lines:
        shown.append(f"… {len(lines) - max_lines} more lines: print(x.summary()) shows all")
    return "\n".join([f"<{type(obj).__name__}>", *shown])


def html_repr(obj: Any, max_rows: int = MAX_ROWS) -> str:
    """A self-contained HTML fragment: title, the table, and the text summary (collapsed)."""
    import pandas as pd

    name = html.escape(type(obj).__name__)
    parts = [f'<div class="mrcstats-result"><p><strong>{name}</strong></p>']
    table = ""
    try:
        if callable(getattr(obj, "to_html", None)):
            table = obj.to_html()
        else:
            frame = obj.to_frame()
            plain_index = isinstance(frame.index, pd.RangeIndex) and frame.index.name is None
            table = frame.to_html(max_rows=max_rows, index=not plain_index, border=0, na_rep="NA",
                                  float_format=lambda v: f"{v:.6g}")
    except Exception as exc:  # noqa: BLE001 - a repr must never raise; say why instead
        table = f"<p>(table unavailable: {html.escape(type(exc).__name__)}: {html.escape(str(exc))})</p>"
    parts.append(table)
    parts.append("<details><summary>summary()</summary><pre>"
                 f"{html.escape(_summary_text(obj))}</pre></details></div>")
    return "".join(parts)


class Result:
    """Base of every result and table: a short plain ``repr`` and an HTML one for notebooks.

    Subclasses provide ``summary() -> str`` and ``to_frame() -> DataFrame`` (and may provide
    ``to_html() -> str``); declare them ``@dataclass(frozen=True, repr=False)``.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return plain_repr(self)

    def _repr_html_(self) -> str:
        return html_repr(self)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # IPython's plain-text display
        p.text(f"<{type(self).__name__}>" if cycle else plain_repr(self))
