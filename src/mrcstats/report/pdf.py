"""PDF reports without TeX: reportlab for text and tables, matplotlib vector figures embedded.

A :class:`ReportDocument` collects headings, paragraphs, :class:`~mrcstats.report.tables.Table`
objects and matplotlib figures (numbered captions), then :meth:`ReportDocument.build`
writes the PDF atomically. Output is deterministic for the same content:
reportlab runs with ``invariant=1`` (fixed dates and document ID), figures are
saved with no creation date and embedded as PDF form XObjects through pdfrw
(falling back to 200-dpi PNG if pdfrw is absent). Text uses DejaVu Sans, shipped
with matplotlib, so σ, χ², ± and − render without TeX or system fonts.
"""
from __future__ import annotations

import functools
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from mrcstats._files import atomic_path
from mrcstats.report.tables import Table

FONT = "DejaVuSans"
FONT_BOLD = "DejaVuSans-Bold"
FONT_MONO = "DejaVuSansMono"
_REGISTERED: list[bool] = []


def _register_fonts() -> None:
    if _REGISTERED:
        return
    import matplotlib
    from reportlab.lib.fonts import addMapping
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont

    ttf = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
    pdfmetrics.registerFont(TTFont(FONT, str(ttf / "DejaVuSans.ttf")))
    pdfmetrics.registerFont(TTFont(FONT_BOLD, str(ttf / "DejaVuSans-Bold.ttf")))
    pdfmetrics.registerFont(TTFont(FONT_MONO, str(ttf / "DejaVuSansMono.ttf")))
    pdfmetrics.registerFont(TTFont(FONT + "-Oblique", str(ttf / "DejaVuSans-Oblique.ttf")))
    addMapping(FONT, 0, 0, FONT)
    addMapping(FONT, 1, 0, FONT_BOLD)
    addMapping(FONT, 0, 1, FONT + "-Oblique")
    addMapping(FONT, 1, 1, FONT_BOLD)
    _REGISTERED.append(True)


def _styles() -> dict[str, Any]:
    from reportlab.lib.enums import TA_CENTER
    from reportlab.lib.styles import ParagraphStyle

    _register_fonts()
    base = ParagraphStyle("body", fontName=FONT, fontSize=9, leading=12, spaceAfter=5)
    return {
        "title": ParagraphStyle("title", parent=base, fontName=FONT_BOLD, fontSize=17, leading=21, spaceAfter=8,
                                alignment=TA_CENTER),
        "subtitle": ParagraphStyle("subtitle", parent=base, fontSize=9.5, alignment=TA_CENTER, spaceAfter=14),
        "h1": ParagraphStyle("h1", parent=base, fontName=FONT_BOLD, fontSize=13, leading=16, spaceBefore=10,
                             spaceAfter=6, keepWithNext=1),
        "h2": ParagraphStyle("h2", parent=base, fontName=FONT_BOLD, fontSize=10.5, leading=13, spaceBefore=7,
                             spaceAfter=4, keepWithNext=1),
        "body": base,
        "note": ParagraphStyle("note", parent=base, fontSize=7.5, leading=9.5, textColor="#333333"),
        "caption": ParagraphStyle("caption", parent=base, fontSize=8, leading=10, spaceBefore=3, spaceAfter=10),
        "code": ParagraphStyle("code", parent=base, fontName=FONT_MONO, fontSize=7, leading=8.6, spaceAfter=6,
                               leftIndent=6),
        "cell": ParagraphStyle("cell", parent=base, fontSize=7.5, leading=9, spaceAfter=0),
        "cellhead": ParagraphStyle("cellhead", parent=base, fontName=FONT_BOLD, fontSize=7.5, leading=9,
                                   spaceAfter=0),
    }


def _para_text(text: str) -> str:
    """Escape text for a reportlab Paragraph, keeping line breaks."""
    return escape(str(text)).replace("\n", "<br/>")


@dataclass
class ReportDocument:
    """An ordered list of report elements, built into a PDF by :meth:`build`.

    Methods add elements in order: :meth:`heading`, :meth:`paragraph`,
    :meth:`bullets`, :meth:`code`, :meth:`table`, :meth:`figure`, :meth:`page_break`.
    Tables and figures are numbered in order of appearance.
    """

    title: str
    subtitle: str = ""
    author: str = "mrcstats"
    _items: list[tuple[str, Any]] = field(default_factory=list)
    _ntab: int = 0
    _nfig: int = 0
    pages: int = 0

    def heading(self, text: str, level: int = 1) -> None:
        self._items.append(("h1" if level <= 1 else "h2", text))

    def paragraph(self, text: str, style: str = "body") -> None:
        self._items.append(("p", (text, style)))

    def bullets(self, lines: list[str]) -> None:
        for ln in lines:
            self._items.append(("p", ("• " + ln, "body")))

    def code(self, text: str) -> None:
        self._items.append(("code", text))

    def note(self, text: str) -> None:
        self._items.append(("p", (text, "note")))

    def table(self, table: Table, caption: str | None = None) -> int:
        """Add a table; returns its number."""
        self._ntab += 1
        self._items.append(("table", (table, caption if caption is not None else table.caption, self._ntab)))
        return self._ntab

    def figure(self, fig: Any, caption: str = "", width_in: float | None = None) -> int:
        """Add a matplotlib figure (rendered now, to vector PDF); returns its number."""
        from mrcstats.report.figures import figure_pdf_bytes, figure_png_bytes

        self._nfig += 1
        try:
            import pdfrw  # noqa: F401

            payload = ("pdf", figure_pdf_bytes(fig))
        except ImportError:  # pragma: no cover - pdfrw is a dependency
            payload = ("png", figure_png_bytes(fig))
        self._items.append(("figure", (payload, caption, self._nfig, width_in)))
        return self._nfig

    def page_break(self) -> None:
        self._items.append(("pagebreak", None))

    # ---- build
    def _flowables(self) -> list[Any]:
        from reportlab.platypus import KeepTogether, PageBreak, Paragraph, Preformatted, Spacer

        st = _styles()
        out: list[Any] = [Paragraph(_para_text(self.title), st["title"])]
        if self.subtitle:
            out.append(Paragraph(_para_text(self.subtitle), st["subtitle"]))
        pending: list[Any] = []  # headings waiting to be kept with what follows them

        def emit(flow: list[Any], keep: bool = True) -> None:
            if pending or keep:
                out.append(KeepTogether([*pending, *flow]) if keep else KeepTogether([*pending, flow[0]]))
                if not keep:
                    out.extend(flow[1:])
            else:
                out.extend(flow)
            pending.clear()

        for kind, val in self._items:
            if kind in ("h1", "h2"):
                pending.append(Paragraph(_para_text(val), st[kind]))
            elif kind == "p":
                text, style = val
                emit([Paragraph(_para_text(text), st[style])], keep=bool(pending))
            elif kind == "code":
                emit([Preformatted(str(val), st["code"])], keep=bool(pending))
            elif kind == "pagebreak":
                out.extend(pending)
                pending.clear()
                out.append(PageBreak())
            elif kind == "table":
                table, caption, num = val
                flow = [Paragraph(f"<b>Table {num}.</b> {_para_text(caption)}", st["caption"]),
                        *_table_flowable(table, st)]
                for n in table.notes:
                    flow.append(Paragraph(_para_text(n), st["note"]))
                flow.append(Spacer(1, 8))
                emit(flow, keep=len(table.data) <= 30)
            elif kind == "figure":
                payload, caption, num, width_in = val
                emit([_figure_flowable(payload, width_in),
                      Paragraph(f"<b>Figure {num}.</b> {_para_text(caption)}", st["caption"])])
        out.extend(pending)
        return out

    def build(self, path: str | Path) -> Path:
        """Write the PDF atomically; deterministic for the same content."""
        from reportlab.lib.pagesizes import A4
        from reportlab.lib.units import cm
        from reportlab.platypus import SimpleDocTemplate

        target = Path(path)
        story = self._flowables()

        def footer(canvas, doc):
            canvas.saveState()
            canvas.setFont(FONT, 7)
            canvas.setFillGray(0.35)
            canvas.drawRightString(A4[0] - 2 * cm, 1.2 * cm, f"{self.title} · page {doc.page}")
            canvas.restoreState()

        with atomic_path(target) as tmp:
            doc = SimpleDocTemplate(str(tmp), pagesize=A4, leftMargin=2 * cm, rightMargin=2 * cm, topMargin=1.8 * cm,
                                    bottomMargin=1.8 * cm, title=self.title, author=self.author,
                                    creator="mrcstats", producer="mrcstats (reportlab)", subject=self.subtitle,
                                    invariant=1)
            doc.build(story, onFirstPage=footer, onLaterPages=footer)
            self.pages = int(doc.page)
        return target


def _table_flowable(table: Table, st: dict[str, Any]) -> list[Any]:
    """Booktabs-looking reportlab table(s) that fit the text width.

    Column widths come from the text widths in the cell font: numbers never wrap and headers
    wrap only between words (never "Accura|cy"). When the natural widths do not fit, the font
    shrinks (7.5 → 6 pt); when even the narrowest layout does not fit, the columns are split over
    several tables that repeat the row labels ("continued").
    """
    from reportlab.lib.units import cm

    avail = 17.0 * cm
    head, body = table.header, table.cells()
    for size in (7.5, 7.0, 6.5, 6.0):
        nat, low = _column_widths(head, body, table.stub, size)
        if sum(low) <= avail:
            return [_rl_table(table, head, body, list(range(len(head))), _fit(nat, low, avail), size, st)]
    # split: the stub columns, then as many data columns as fit, repeated
    size = 6.0
    nat, low = _column_widths(head, body, table.stub, size)
    stub = list(range(table.stub))
    chunks: list[list[int]] = []
    cur: list[int] = []
    for j in range(table.stub, len(head)):
        if cur and sum(low[i] for i in stub + cur + [j]) > avail:
            chunks.append(cur)
            cur = []
        cur.append(j)
    if cur:
        chunks.append(cur)
    out = []
    for k, ch in enumerate(chunks):
        cols = stub + ch
        w = _fit([nat[i] for i in cols], [low[i] for i in cols], avail)
        if k:
            out.append(_continued(st, k + 1, len(chunks)))
        out.append(_rl_table(table, [head[i] for i in cols], [[r[i] for i in cols] for r in body],
                             list(range(len(cols))), w, size, st, stub=len(stub)))
    return out


def _continued(st: dict[str, Any], k: int, n: int):
    from reportlab.platypus import Paragraph

    return Paragraph(f"(continued, part {k} of {n})", st["note"])


def _column_widths(head: list[str], body: list[list[str]], stub: int, size: float) -> tuple[list[float], list[float]]:
    """Natural (one line) and smallest (headers and row labels broken between words) widths per column."""
    from reportlab.pdfbase.pdfmetrics import stringWidth

    pad = 7.0
    cap = 0.4 * _TEXT_WIDTH  # a longer word (a 300-character model name) is split inside its cell
    nat, low = [], []
    for j, h in enumerate(head):
        cells = [r[j] for r in body]
        cw = max([stringWidth(c, FONT, size) for c in cells] or [0.0])
        hw = stringWidth(h, FONT_BOLD, size)
        hword = max([stringWidth(w, FONT_BOLD, size) for w in h.split()] or [0.0])
        if j < stub:   # row labels may wrap between words too
            cword = max([stringWidth(w, FONT, size) for c in cells for w in c.split()] or [0.0])
            low.append(min(max(hword, cword, 6.0 * size * 0.6) + pad, cap))
        else:
            low.append(min(max(hword, cw) + pad, cap))
        nat.append(min(max(hw, cw) + pad, _TEXT_WIDTH))
    return nat, low


#: the width a table may take on the page (A4 less 2 cm margins), in points
_TEXT_WIDTH = 17.0 * 72 / 2.54


def _fit(nat: list[float], low: list[float], avail: float) -> list[float]:
    """Natural widths when they fit; else the smallest widths plus a share of the rest."""
    if sum(nat) <= avail:
        return nat
    if sum(low) > avail:  # even the smallest widths do not fit (very long labels): shrink them all
        return [lo * avail / sum(low) for lo in low]
    extra = avail - sum(low)
    want = [n - lo for n, lo in zip(nat, low)]
    tot = sum(want) or 1.0
    return [lo + extra * w / tot for lo, w in zip(low, want)]


def _rl_table(table: Table, head: list[str], body: list[list[str]], cols: list[int], widths: list[float],
              size: float, st: dict[str, Any], stub: int | None = None):
    from reportlab.lib.enums import TA_RIGHT
    from reportlab.lib.styles import ParagraphStyle
    from reportlab.platypus import Paragraph, TableStyle
    from reportlab.platypus import Table as RLTable

    nstub = table.stub if stub is None else stub
    cell = ParagraphStyle("cellx", parent=st["cell"], fontSize=size, leading=size * 1.2)
    cellh = ParagraphStyle("cellhx", parent=st["cellhead"], fontSize=size, leading=size * 1.2)
    right = ParagraphStyle("cellrx", parent=cell, alignment=TA_RIGHT)
    right_head = ParagraphStyle("cellheadrx", parent=cellh, alignment=TA_RIGHT)
    hrow = [Paragraph(_para_text(h), cellh if i < nstub else right_head) for i, h in enumerate(head)]
    brows = [[Paragraph(_para_text(c), cell if i < nstub else right) for i, c in enumerate(row)] for row in body]
    t = RLTable([hrow, *brows], colWidths=widths, repeatRows=1, hAlign="LEFT")
    style = [("LINEABOVE", (0, 0), (-1, 0), 1.0, "black"), ("LINEBELOW", (0, 0), (-1, 0), 0.5, "black"),
             ("LINEBELOW", (0, -1), (-1, -1), 1.0, "black"), ("VALIGN", (0, 0), (-1, -1), "TOP"),
             ("TOPPADDING", (0, 0), (-1, -1), 1.5), ("BOTTOMPADDING", (0, 0), (-1, -1), 1.5),
             ("LEFTPADDING", (0, 0), (-1, -1), 3), ("RIGHTPADDING", (0, 0), (-1, -1), 3)]
    if len(head) > nstub:
        style.append(("ALIGN", (nstub, 0), (-1, -1), "RIGHT"))
    for i in getattr(table, "rules", ()):  # rules between blocks (a side-by-side model table)
        style.append(("LINEABOVE", (0, i + 1), (-1, i + 1), 0.5, "black"))
    t.setStyle(TableStyle(style))
    return t


def _figure_flowable(payload: tuple[str, bytes], width_in: float | None):
    from reportlab.lib.units import inch

    kind, data = payload
    if kind == "pdf":
        return _PdfFigure(data, width_in * inch if width_in else None)
    from reportlab.lib.utils import ImageReader
    from reportlab.platypus import Image

    img = ImageReader(io.BytesIO(data))
    w, h = img.getSize()
    width = (width_in or w / 200) * inch
    return Image(io.BytesIO(data), width=width, height=width * h / w)


@functools.cache
def _pdf_figure_class():
    from reportlab.platypus import Flowable

    class PdfFigure(Flowable):
        """A one-page vector PDF (a matplotlib figure) drawn as a form XObject, scaled to fit."""

        def __init__(self, data: bytes, width: float | None) -> None:
            super().__init__()
            from pdfrw import PdfReader
            from pdfrw.buildxobj import pagexobj

            self.xobj = pagexobj(PdfReader(io.BytesIO(data)).pages[0])
            x0, y0, x1, y1 = (float(v) for v in self.xobj.BBox)
            self.w0, self.h0 = x1 - x0, y1 - y0
            self.target = width
            self.hAlign = "CENTER"
            self.scale = 1.0

        def wrap(self, avail_w, avail_h):
            w = self.target or self.w0
            self.scale = min(w, avail_w) / self.w0
            if self.h0 * self.scale > avail_h * 0.98 and avail_h > 50:
                self.scale = min(self.scale, avail_h * 0.98 / self.h0)
            self.width, self.height = self.w0 * self.scale, self.h0 * self.scale
            return self.width, self.height

        def draw(self):
            from pdfrw.toreportlab import makerl

            self.canv.saveState()
            self.canv.scale(self.scale, self.scale)
            self.canv.doForm(makerl(self.canv, self.xobj))
            self.canv.restoreState()

    return PdfFigure


def _PdfFigure(data: bytes, width: float | None):
    return _pdf_figure_class()(data, width)
