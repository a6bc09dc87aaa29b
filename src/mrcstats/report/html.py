"""The interactive HTML report: one self-contained file beside the PDF, with the PDF's numbers.

:class:`HtmlDocument` has the interface of :class:`mrcstats.report.pdf.ReportDocument` (``heading``,
``paragraph``, ``bullets``, ``code``, ``note``, ``table``, ``figure``, ``build``), and
:func:`mrcstats.report.build.build_report` hands every block to both documents, so the HTML shows the
same table objects and the same matplotlib figures as the PDF: nothing is recomputed here.

- Tables: the cells are :meth:`Table.cells` (the PDF's text, formatted by :mod:`mrcstats.report.format`);
  a click on a header sorts by that column, by the raw value behind the cell (``data-v``, the unrounded
  number) when the column is numeric, else by text; tables with more than 10 rows get a filter box.
- Figures: matplotlib's own SVG of the figure, inline, with one transparent hover target per plotted
  point carrying a ``<title>`` (series label such as the model, the point's label or axis category such as
  the item, the value, and the interval when the figure draws one: error bars, ``hlines`` or a band); a
  figure function can give an axes its own hover points with complete texts
  (:func:`mrcstats.report.figures.hover_points`: the pairwise matrix names both models, the difference, its
  interval and p). A set of more than :data:`MAX_TARGETS` points gets an evenly spaced sample of targets and
  the caption says so (how many of how many, per set); a curve without point labels gets
  :data:`MAX_LINE_TARGETS` evenly spaced targets along it.
- No network at view time: the CSS and the small script are inline; no fonts, images or scripts are
  fetched. Test hooks: ``#selftest`` (sorts the first sortable table and writes the outcome into
  ``<pre id="mrcstats-selftest">``) and ``#hover=N`` (moves the figure of the N-th hover target to the top and shows its tooltip: a screenshot
  of a hovered point without scrolling).
"""
from __future__ import annotations

import html
import io
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mrcstats._files import write_text_atomic

__all__ = ["Documents", "HtmlDocument", "figure_svg"]

#: hover targets per unlabelled curve (a longer one gets evenly spaced ones), and per set of points (scatter,
#: labelled line, bars, explicit hover points): a larger set gets an even sample, named in the caption
MAX_LINE_TARGETS = 60
MAX_TARGETS = 1000


def _sample(n: int, cap: int = MAX_TARGETS) -> np.ndarray:
    """Indices of at most ``cap`` of ``n`` points, evenly spaced (all of them when ``n <= cap``)."""
    if n <= cap:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, cap).round().astype(int))


# ----------------------------------------------------------------------------- figures


def _fmt(v: float) -> str:
    if v is None or not math.isfinite(v):
        return "NA"
    return f"{v:.4g}"


def _ticks(axis: Any) -> dict[float, str]:
    """Axis position -> its tick label, where the axis is categorical (text labels)."""
    out: dict[float, str] = {}
    for loc, lab in zip(axis.get_ticklocs(), axis.get_ticklabels()):
        text = lab.get_text()
        if text and not re.fullmatch(r"[−\-+]?[\d.,]+(e[−\-+]?\d+)?%?", text.strip()):
            out[round(float(loc), 9)] = text
    return out


def _rgb(c: Any) -> tuple[float, ...]:
    from matplotlib.colors import to_rgba_array

    arr = to_rgba_array(c)
    return tuple(np.round(arr[0, :3], 3)) if len(arr) else ()


@dataclass
class _Intervals:
    """The intervals an axes draws: vertical and horizontal segments (error bars, ``hlines``) and bands."""

    vert: dict[float, list[tuple[float, float, tuple]]] = field(default_factory=dict)
    horiz: dict[float, list[tuple[float, float, tuple]]] = field(default_factory=dict)
    bands: list[tuple[np.ndarray, tuple]] = field(default_factory=list)
    #: colours of the plotted series: a segment of such a colour belongs to that series only
    owned: set[tuple] = field(default_factory=set)

    @classmethod
    def of(cls, ax: Any) -> _Intervals:
        from matplotlib.collections import LineCollection, PathCollection, PolyCollection

        iv = cls()
        iv.owned = {_rgb(ln.get_color()) for ln in ax.lines}
        iv.owned |= {_rgb(c.get_facecolor()) for c in ax.collections
                     if isinstance(c, PathCollection) and len(c.get_facecolor())}
        for coll in ax.collections:
            if isinstance(coll, LineCollection):
                colours = coll.get_colors()
                for k, seg in enumerate(coll.get_segments()):
                    if len(seg) != 2:
                        continue
                    (x0, y0), (x1, y1) = seg
                    col = _rgb(colours[k % len(colours)]) if len(colours) else ()
                    if x0 == x1 and y0 != y1:
                        iv.vert.setdefault(round(float(x0), 9), []).append((min(y0, y1), max(y0, y1), col))
                    elif y0 == y1 and x0 != x1:
                        iv.horiz.setdefault(round(float(y0), 9), []).append((min(x0, x1), max(x0, x1), col))
            elif isinstance(coll, PolyCollection):
                fc = coll.get_facecolor()
                col = _rgb(fc) if len(fc) else ()
                iv.bands += [(np.asarray(path.vertices), col) for path in coll.get_paths()]
        return iv

    def _pick(self, cands: list[tuple[float, float, tuple]], v: float, col: tuple) -> tuple[float, float] | None:
        inside = [(lo, hi, c) for lo, hi, c in cands if lo <= v <= hi and (c == col or c not in self.owned)]
        if not inside:
            return None
        same = [t for t in inside if t[2] == col]
        lo, hi, _ = min(same or inside, key=lambda t: abs((t[0] + t[1]) / 2 - v))
        return float(lo), float(hi)

    def at(self, x: float, y: float, col: tuple) -> tuple[float, float] | None:
        """The interval drawn around the point (x, y) of a series of colour ``col``, if any."""
        got = self._pick(self.vert.get(round(x, 9), []), y, col)
        if got is not None:
            return got
        for verts, bcol in self.bands:
            if bcol != col:
                continue
            ys = verts[np.isclose(verts[:, 0], x), 1]
            if len(ys) >= 2 and ys.min() <= y <= ys.max():
                return float(ys.min()), float(ys.max())
        return self._pick(self.horiz.get(round(y, 9), []), x, col)


def _axes_targets(ax: Any, x0_pt: float, top_pt: float, facet: bool,
                  sampled: list[str]) -> list[tuple[float, float, str]]:
    """(x, y) in SVG points and the tooltip text of every hover target of one axes; a set of points sampled
    down to :data:`MAX_TARGETS` is added to ``sampled`` (``"1,000 of 2,345 points of “other items”"``)."""
    from matplotlib.collections import PathCollection
    from matplotlib.patches import Rectangle

    from mrcstats.report.figures import hover_points_of, labels_of

    out: list[tuple[float, float, str]] = []

    def pick(n: int, what: str) -> np.ndarray:
        idx = _sample(n)
        if len(idx) < n:
            sampled.append(f"{len(idx):,} of {n:,} points" + (f" of “{what}”" if what else ""))
        return idx

    explicit = hover_points_of(ax)
    if explicit is not None:
        for i in pick(len(explicit), ax.get_title() if facet else ""):
            px, py, text = explicit[i]
            dx, dy = ax.transData.transform((px, py))
            out.append((float(dx) - x0_pt, top_pt - float(dy), text))
        return out
    xlab, ylab = ax.get_xlabel() or "x", ax.get_ylabel() or "y"
    xt, yt = _ticks(ax.xaxis), _ticks(ax.yaxis)
    iv = _Intervals.of(ax)

    def add(px: float, py: float, series: str, label: str | None, col: tuple) -> None:
        if not (math.isfinite(px) and math.isfinite(py)):
            return
        rx, ry = round(float(px), 9), round(float(py), 9)
        dx, dy = ax.transData.transform((px, py))
        head = [s for s in (ax.get_title() if facet else "", series, label or yt.get(ry) or xt.get(rx)) if s]
        lines = [" · ".join(head)] if head else []
        if rx not in xt:
            lines.append(f"{xlab}: {_fmt(px)}")
        if ry not in yt:
            lines.append(f"{ylab}: {_fmt(py)}")
        got = iv.at(float(px), float(py), col)
        if got is not None:
            lines.append(f"interval: [{_fmt(got[0])}, {_fmt(got[1])}]")
        out.append((float(dx) - x0_pt, top_pt - float(dy), "\n".join(lines)))

    series_of: dict[int, str] = {}
    caps: set[int] = set()
    for c in ax.containers:  # error bars: the label is the container's; its caps are not points
        lines_ = getattr(c, "lines", None)
        if lines_ and lines_[0] is not None:
            series_of[id(lines_[0])] = c.get_label()
        if lines_ and len(lines_) > 1:
            caps |= {id(cap) for cap in lines_[1]}
    for line in ax.lines:
        if id(line) in caps:
            continue
        series = series_of.get(id(line), line.get_label())
        series = "" if series.startswith("_") else series
        xs, ys = (np.asarray(a, dtype=float) for a in line.get_data())
        no_marker = line.get_marker() in (None, "None", "")
        if xs.size < 1 or xs.size != ys.size or (xs.size == 2 and no_marker and (xs[0] == xs[1] or ys[0] == ys[1])):
            continue  # empty (a legend entry) or a reference line (axhline/axvline)
        labels = labels_of(line)
        idx = np.arange(xs.size)
        if labels is None:     # a curve: evenly spaced positions along it
            idx = _sample(xs.size, MAX_LINE_TARGETS)
        else:
            idx = pick(xs.size, series)
        col = _rgb(line.get_color())
        for i in idx:
            add(xs[i], ys[i], series, labels[i] if labels and i < len(labels) else None, col)
    for coll in ax.collections:
        if isinstance(coll, PathCollection):
            series = coll.get_label()
            series = "" if series.startswith("_") else series
            labels = labels_of(coll)
            fc = coll.get_facecolor()
            col = _rgb(fc) if len(fc) else ()
            offsets = np.asarray(coll.get_offsets(), dtype=float)
            for i in pick(len(offsets), series):
                px, py = offsets[i]
                add(px, py, series, labels[i] if labels and i < len(labels) else None, col)
    patches = list(ax.patches)
    for patch in (patches[i] for i in pick(len(patches), "bars")):  # bars and histogram bins
        if isinstance(patch, Rectangle) and patch.get_height() != 0:
            x0, w, h = patch.get_x(), patch.get_width(), patch.get_height()
            cx = x0 + w / 2
            dx, dy = ax.transData.transform((cx, patch.get_y() + h))
            series = "" if patch.get_label().startswith("_") else patch.get_label()
            cat = xt.get(round(cx, 9))
            head = " · ".join(s for s in (series, cat) if s)
            span = "" if cat else f"{xlab}: [{_fmt(x0)}, {_fmt(x0 + w)})\n"
            out.append((float(dx) - x0_pt, top_pt - float(dy), (head + "\n" if head else "") + span + f"{ylab}: {_fmt(h)}"))
    return out


def _targets(fig: Any, x0_pt: float, top_pt: float, sampled: list[str]) -> list[tuple[float, float, str]]:
    """Hover targets of every axes of ``fig`` (its dpi set to 72, the SVG's unit; the SVG's left edge at
    ``x0_pt`` and top at ``top_pt`` in figure points from the bottom left)."""
    facet = sum(1 for ax in fig.axes if ax.get_title()) > 1
    return [t for ax in fig.axes for t in _axes_targets(ax, x0_pt, top_pt, facet, sampled)]


def figure_svg(fig: Any) -> tuple[str, int, list[str]]:
    """The figure as inline SVG (matplotlib's renderer) with hover targets; returns (svg, targets, the sets
    of points whose targets are a sample, as ``"1,000 of 2,345 points of “series”"``)."""
    from mrcstats.report.figures import figure_style

    buf = io.StringIO()
    dpi = fig.dpi
    with figure_style():  # cropped as the PDF's figures are (bbox_inches="tight", pad 0.02 in)
        fig.savefig(buf, format="svg", bbox_inches="tight", pad_inches=0.02,
                    metadata={"Date": None, "Creator": "mrcstats"})
    try:
        fig.set_dpi(72)  # the SVG backend draws in points (72 per inch)
        bbox = fig.get_tightbbox().padded(0.02)
        sampled: list[str] = []
        targets = _targets(fig, float(bbox.x0) * 72, float(bbox.y1) * 72, sampled)
    finally:
        fig.set_dpi(dpi)
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]  # drop the XML declaration and DOCTYPE (inline in HTML)
    svg = re.sub(r"<metadata>.*?</metadata>", "", svg, count=1, flags=re.DOTALL)  # RDF licence boilerplate
    svg = re.sub(r'<svg ([^>]*?)width="[^"]*" height="[^"]*"', r'<svg \1', svg, count=1)
    vb = re.search(r'viewBox="[\d.]+ [\d.]+ ([\d.]+) [\d.]+"', svg)
    cap = f' style="max-width:{float(vb.group(1)) * 2:.0f}px"' if vb else ""  # at most twice its printed size
    svg = svg.replace("<svg ", f'<svg class="fig"{cap} ', 1)
    marks = "".join(f'<circle class="hit" cx="{x:.2f}" cy="{y:.2f}" r="5"><title>{html.escape(t)}</title></circle>'
                    for x, y, t in targets)
    svg = svg.replace("</svg>", f'<g class="hits">{marks}</g></svg>')
    return svg, len(targets), sampled


# ----------------------------------------------------------------------------- tables


def _sort_key(v: Any) -> str | None:
    """The raw value behind a cell as a sort key (numbers only; text sorts by its shown text)."""
    if isinstance(v, (bool, np.bool_)):
        return str(int(v))
    if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool):
        f = float(v)
        return "" if math.isnan(f) else repr(f)
    return None


def table_html(table: Any, number: int, caption: str) -> str:
    head = table.header
    raw = table.data
    rows = table.cells()
    filt = ('<input class="filter" type="search" placeholder="filter rows…" aria-label="filter rows">'
            if len(rows) > 10 else "")
    label = html.escape(str(getattr(table, "label", "")))
    out = [(f'<figure class="tbl" id="table-{number}" data-label="{label}"><figcaption><b>Table {number}.</b> '
            f'{html.escape(caption)}</figcaption>{filt}<div class="scroll"><table class="sortable">'),
           "<thead><tr>" + "".join(f'<th{" class=stub" if i < table.stub else ""} title="click to sort">'
                                   f"{html.escape(h)}</th>" for i, h in enumerate(head))
           + "</tr></thead><tbody>"]
    for r, cells in enumerate(rows):
        tds = []
        for c, text in enumerate(cells):
            tag = "th" if c < table.stub else "td"
            key = _sort_key(raw.iat[r, c]) if c < raw.shape[1] else None
            attr = f' data-v="{key}"' if key is not None else ""
            tds.append(f"<{tag}{attr}>{html.escape(text)}</{tag}>")
        out.append("<tr>" + "".join(tds) + "</tr>")
    out.append("</tbody></table></div>")
    if table.notes:
        out.append("".join(f'<p class="tnote">{html.escape(n)}</p>' for n in table.notes))
    out.append("</figure>")
    return "".join(out)


# ----------------------------------------------------------------------------- the document


_CSS = """
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0;color:#1b1b1b;
background:#fafafa}
main{max-width:1100px;margin:0 auto;padding:1.5rem 2rem 4rem;background:#fff}
h1.title{margin-bottom:.2rem}.subtitle{color:#555;margin-top:0}
nav.toc{font-size:.9rem;background:#f3f3f3;padding:.5rem 1rem;border-radius:6px;display:flex;flex-wrap:wrap;
gap:.2rem 1rem}
nav.toc a{white-space:nowrap}
details.methods>summary{cursor:pointer;color:#0550ae;margin:.5rem 0}
h2{border-bottom:1px solid #ddd;padding-bottom:.2rem;margin-top:2rem}
p.note{color:#555;font-size:.92rem}pre.code{background:#f5f5f5;padding:.5rem;overflow-x:auto}
figure{margin:1.2rem 0}figcaption{font-size:.92rem;margin-bottom:.3rem}
.scroll{overflow-x:auto}
table.sortable{border-collapse:collapse;font-size:.88rem;font-variant-numeric:tabular-nums}
table.sortable th,table.sortable td{padding:.2rem .6rem;border-bottom:1px solid #e5e5e5;text-align:right}
table.sortable tbody th,table.sortable thead th.stub{text-align:left}table.sortable tbody th{font-weight:normal}
table.sortable thead th{cursor:pointer;user-select:none;border-bottom:2px solid #333;background:#fff;
position:sticky;top:0}
table.sortable thead th[aria-sort=ascending]::after{content:" ▲"}
table.sortable thead th[aria-sort=descending]::after{content:" ▼"}
table.sortable tbody tr:hover{background:#f0f6ff}
input.filter{margin:.2rem 0 .4rem;padding:.2rem .4rem;width:16rem}
p.tnote{font-size:.85rem;color:#444;margin:.2rem 0}
svg.fig{max-width:100%;height:auto;display:block}
svg.fig .hit{fill:transparent;stroke:none;cursor:crosshair}
svg.fig .hit:hover,svg.fig .hit.on{fill:rgba(213,94,0,.35);stroke:#D55E00;stroke-width:1}
#tip{position:absolute;pointer-events:none;background:#222;color:#fff;font-size:12px;line-height:1.35;
padding:.35rem .5rem;border-radius:4px;white-space:pre;display:none;z-index:10;box-shadow:0 2px 6px #0004}
footer{margin-top:3rem;color:#777;font-size:.8rem}
"""

_JS = r"""
(function(){
"use strict";
function key(td){var v=td.getAttribute("data-v");if(v!==null&&v!==""){return [0,parseFloat(v)];}
 if(v===""){return [2,0];}return [1,td.textContent.trim().toLowerCase()];}
function cmp(a,b){if(a[0]!==b[0]){return a[0]-b[0];}return a[1]<b[1]?-1:a[1]>b[1]?1:0;}
function sortBy(table,col,dir){var tb=table.tBodies[0];var rows=Array.prototype.slice.call(tb.rows);
 rows.sort(function(r1,r2){var c=cmp(key(r1.cells[col]),key(r2.cells[col]));return dir==="descending"?-c:c;});
 rows.forEach(function(r){tb.appendChild(r);});
 Array.prototype.forEach.call(table.tHead.rows[0].cells,function(th,i){
  if(i===col){th.setAttribute("aria-sort",dir);}else{th.removeAttribute("aria-sort");}});}
window.mrcstatsSort=sortBy;
document.querySelectorAll("table.sortable").forEach(function(table){
 Array.prototype.forEach.call(table.tHead.rows[0].cells,function(th,i){th.addEventListener("click",function(){
  sortBy(table,i,th.getAttribute("aria-sort")==="ascending"?"descending":"ascending");});});});
document.querySelectorAll("input.filter").forEach(function(inp){inp.addEventListener("input",function(){
 var q=inp.value.toLowerCase();var t=inp.parentNode.querySelector("table");
 Array.prototype.forEach.call(t.tBodies[0].rows,function(r){
  r.style.display=r.textContent.toLowerCase().indexOf(q)>=0?"":"none";});});});
var tip=document.getElementById("tip");
function show(c){var t=c.querySelector("title");var r=c.getBoundingClientRect();
 tip.textContent=t?t.textContent:"";tip.style.display="block";
 tip.style.left=(window.scrollX+r.right+8)+"px";tip.style.top=(window.scrollY+r.top-4)+"px";c.classList.add("on");}
function hide(c){tip.style.display="none";c.classList.remove("on");}
var hits=document.querySelectorAll("svg.fig .hit");
hits.forEach(function(c){c.addEventListener("mouseenter",function(){show(c);});
 c.addEventListener("mouseleave",function(){hide(c);});});
var h=location.hash;var m=/hover=(\d+)/.exec(h);
if(m&&hits[+m[1]]){var c=hits[+m[1]];var f=c.closest("figure");var mn=document.querySelector("main");
 mn.insertBefore(f,mn.firstChild);show(c);}
if(h.indexOf("selftest")>=0){var out={errors:window.__mrcstatsErrors||[],tables:0,hits:hits.length};
 try{var tables=document.querySelectorAll("table.sortable");out.tables=tables.length;
  var t=null,col=-1;
  for(var k=0;k<tables.length&&!t;k++){var hr=tables[k].tHead.rows[0].cells;
   for(var j=0;j<hr.length;j++){if(tables[k].tBodies[0].rows.length>2&&
    tables[k].tBodies[0].rows[0].cells[j].getAttribute("data-v")){t=tables[k];col=j;break;}}}
  if(t){hr=t.tHead.rows[0].cells;hr[col].click();
   var vals=Array.prototype.map.call(t.tBodies[0].rows,function(r){return key(r.cells[col]);});
   var asc=vals.every(function(v,i){return i===0||cmp(vals[i-1],v)<=0;});hr[col].click();
   vals=Array.prototype.map.call(t.tBodies[0].rows,function(r){return key(r.cells[col]);});
   var desc=vals.every(function(v,i){return i===0||cmp(vals[i-1],v)>=0;});
   out.sorted={table:t.closest("figure").id,column:hr[col].textContent.replace(/ [▲▼]$/,""),
    ascending:asc,descending:desc,first:t.tBodies[0].rows[0].cells[col].textContent};}
 }catch(e){out.errors.push(String(e));}
 var pre=document.createElement("pre");pre.id="mrcstats-selftest";pre.textContent=JSON.stringify(out);
 document.body.appendChild(pre);}
})();
"""

_ERRHOOK = ("<script>window.__mrcstatsErrors=[];window.addEventListener('error',function(e){"
            "window.__mrcstatsErrors.push(String(e.message));});</script>")


@dataclass
class HtmlDocument:
    """A self-contained interactive HTML report, built from the same blocks as the PDF."""

    title: str
    subtitle: str = ""
    author: str = "mrcstats"
    _body: list[str] = field(default_factory=list)
    _toc: list[tuple[str, str]] = field(default_factory=list)
    _ntab: int = 0
    _nfig: int = 0
    _folded: bool = False
    hover_targets: int = 0

    #: sections shown folded (a click opens them), so the first view reaches the results
    FOLDED = ("Methods",)

    def heading(self, text: str, level: int = 1) -> None:
        if level <= 1:
            if self._folded:
                self._body.append("</details>")
                self._folded = False
            anchor = f"s{len(self._toc) + 1}"
            self._toc.append((anchor, text))
            self._body.append(f'<h2 id="{anchor}">{html.escape(text)}</h2>')
            if text in self.FOLDED:
                self._body.append(f'<details class="methods"><summary>show the {html.escape(text.lower())} '
                                  "(formulas, settings, software, rows left out)</summary>")
                self._folded = True
        else:
            self._body.append(f"<h3>{html.escape(text)}</h3>")

    def paragraph(self, text: str, style: str = "body") -> None:
        cls = ' class="note"' if style == "note" else ""
        self._body.append(f"<p{cls}>{html.escape(text)}</p>")

    def bullets(self, lines: list[str]) -> None:
        self._body.append("<ul>" + "".join(f"<li>{html.escape(ln)}</li>" for ln in lines) + "</ul>")

    def code(self, text: str) -> None:
        self._body.append(f'<pre class="code">{html.escape(text)}</pre>')

    def note(self, text: str) -> None:
        self.paragraph(text, "note")

    def table(self, table: Any, caption: str | None = None) -> int:
        self._ntab += 1
        self._body.append(table_html(table, self._ntab, caption if caption is not None else table.caption))
        return self._ntab

    def figure(self, fig: Any, caption: str = "", width_in: float | None = None) -> int:
        self._nfig += 1
        svg, n, sampled = figure_svg(fig)
        self.hover_targets += n
        hint = " Hover a point for its values." if n else ""
        if sampled:
            hint += (f" Hover targets on an evenly spaced sample (more than {MAX_TARGETS:,} points in a set): "
                     f"{'; '.join(sampled)}; the figure draws them all.")
        self._body.append(f'<figure class="fig" id="figure-{self._nfig}">{svg}<figcaption><b>Figure '
                          f'{self._nfig}.</b> {html.escape(caption)}<span class="note">{html.escape(hint)}</span>'
                          "</figcaption></figure>")
        return self._nfig

    def page_break(self) -> None:
        pass

    def render(self) -> str:
        if self._folded:
            self._body.append("</details>")
            self._folded = False
        toc = "".join(f'<a href="#{a}">{html.escape(t)}</a>' for a, t in self._toc)
        meta = json.dumps({"generator": "mrcstats", "tables": self._ntab, "figures": self._nfig})
        return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
                f"<meta name=\"generator\" content=\"mrcstats\"><title>{html.escape(self.title)}</title>"
                f"<style>{_CSS}</style>{_ERRHOOK}</head><body><main>"
                f"<h1 class=\"title\">{html.escape(self.title)}</h1>"
                + (f"<p class=\"subtitle\">{html.escape(self.subtitle)}</p>" if self.subtitle else "")
                + f"<nav class=\"toc\">{toc}</nav>" + "\n".join(self._body)
                + f"<footer>Written by {html.escape(self.author)}; the same numbers as the PDF report. "
                  "Click a column header to sort; hover a point in a figure.</footer>"
                + f"</main><div id=\"tip\"></div><script type=\"application/json\" id=\"mrcstats-meta\">{meta}"
                  f"</script><script>{_JS}</script></body></html>\n")

    def build(self, path: str | Path) -> Path:
        path = Path(path)
        write_text_atomic(path, self.render())
        return path


class Documents:
    """Hands every block to the PDF document and the HTML one, so both show the same tables and figures.

    ``build(out)`` writes the PDF to ``out`` and the HTML to ``html_path``; other attributes (``pages``)
    are the PDF document's.
    """

    def __init__(self, pdf: Any, html_doc: HtmlDocument, html_path: str | Path) -> None:
        self.pdf, self.html, self.html_path = pdf, html_doc, Path(html_path)

    def build(self, path: str | Path) -> Path:
        self.html.build(self.html_path)
        return self.pdf.build(path)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.pdf, name)
        if not callable(attr):
            return attr
        other = getattr(self.html, name)

        def both(*args: Any, **kw: Any) -> Any:
            other(*args, **kw)
            return attr(*args, **kw)

        return both
