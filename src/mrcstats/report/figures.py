"""Publication figures (matplotlib, vector) in one colour-blind-safe style.

Every function takes tidy frames (the ``to_frame()`` of a result object, or a
canonical log) and returns a :class:`matplotlib.figure.Figure` sized for a
two-column paper (:data:`COLUMN_WIDTH` or :data:`PAGE_WIDTH` inches wide).
Groups (models, conditions) get one colour of the Okabe-Ito palette (Okabe & Ito
2008; distinguishable with the common colour-vision deficiencies) together with
their own line style and marker, so the figures also survive black-and-white
printing; every axis is labelled with its unit and every multi-group figure has
a legend. :func:`save_figure` writes PDF/SVG
deterministically (no creation date, a fixed SVG hash salt).

Figures (seed numbers in brackets): LOESS of P(correct) against a scaled
feature per model with the GLMM curve overlaid [003 Fig. 1]; random-effects
caterpillar with conditional-variance intervals [003 Fig. 3]; P_d histogram
[003 Fig. 4]; accuracy–masking-rate curves per condition with trial intervals
[000 Figs. 2-6]; NA/EA/KI against MR [000 Fig. 7]; confusion matrices and
error-type bars [004 Tables 14-15, Fig. 2]; recovered fixed effects against the
simulated truth (demo).
"""
from __future__ import annotations

import contextlib
import io
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mrcstats._files import atomic_path
from mrcstats.errors import InputError

#: one column of a two-column paper (ACL/NeurIPS ≈ 3.3 in), and the full text width
COLUMN_WIDTH = 3.35
PAGE_WIDTH = 6.9

#: the Okabe-Ito palette (black, orange, sky blue, bluish green, vermillion, blue, reddish purple, yellow)
PALETTE = ("#000000", "#E69F00", "#56B4E9", "#009E73", "#D55E00", "#0072B2", "#CC79A7", "#F0E442")
#: kept for callers that want grey levels (single-series fills)
GREYS = ("0.0", "0.5", "0.3", "0.65", "0.15", "0.8")
LINESTYLES = ("-", "--", ":", "-.", (0, (5, 1, 1, 1)), (0, (1, 1)))
MARKERS = ("o", "s", "^", "D", "v", "x")

_RC = {
    "font.size": 7.5, "axes.titlesize": 8, "axes.labelsize": 7.5, "xtick.labelsize": 7, "ytick.labelsize": 7,
    "legend.fontsize": 6.5, "legend.frameon": False, "axes.spines.top": False, "axes.spines.right": False,
    "axes.linewidth": 0.6, "lines.linewidth": 1.1, "lines.markersize": 3.2, "xtick.major.width": 0.6,
    "ytick.major.width": 0.6, "figure.dpi": 100, "savefig.dpi": 300, "pdf.fonttype": 42, "svg.fonttype": "none",
    "svg.hashsalt": "mrcstats", "font.family": "DejaVu Sans", "axes.grid": False, "hatch.linewidth": 0.5,
}


def _mpl():
    """matplotlib, imported lazily; figures are built with ``matplotlib.figure.Figure`` (no pyplot state)."""
    import matplotlib

    return matplotlib


@contextlib.contextmanager
def figure_style() -> Iterator[None]:
    """The mrcstats figure style as a matplotlib rc context."""
    with _mpl().rc_context(_RC):
        yield


def style_for(i: int) -> dict[str, Any]:
    """Colour (Okabe-Ito), line style and marker of the ``i``-th group: all three differ between groups."""
    return {"color": PALETTE[i % len(PALETTE)], "linestyle": LINESTYLES[i % len(LINESTYLES)],
            "marker": MARKERS[i % len(MARKERS)]}


def new_figure(width: str | float = "column", aspect: float = 0.72, nrows: int = 1, ncols: int = 1,
               **kw: Any):
    """A figure ``width`` inches wide ("column", "page" or a number), height = width·aspect."""
    _mpl()
    from matplotlib.figure import Figure

    w = {"column": COLUMN_WIDTH, "page": PAGE_WIDTH}.get(width, width) if isinstance(width, str) else float(width)
    with figure_style():
        fig = Figure(figsize=(w, w * aspect))
        axes = fig.subplots(nrows, ncols, **kw)
    return fig, axes


def save_figure(fig, path: str | Path, formats: Sequence[str] | None = None) -> list[Path]:
    """Write ``fig`` as vector PDF/SVG (or PNG) deterministically; returns the paths.

    ``path`` with a suffix writes that one file; without one, ``formats``
    (default pdf and svg) are written beside each other.
    """
    p = Path(path)
    if formats is None:
        formats = [p.suffix.lstrip(".")] if p.suffix else ["pdf", "svg"]
        stem = p.with_suffix("") if p.suffix else p
    else:
        stem = p.with_suffix("") if p.suffix else p
    out = []
    for fmt in formats:
        target = Path(f"{stem}.{fmt}")
        with atomic_path(target) as tmp, figure_style():
            fig.savefig(tmp, format=fmt, bbox_inches="tight", pad_inches=0.02, metadata=_metadata(fmt))
        out.append(target)
    return out


def _metadata(fmt: str) -> dict[str, Any] | None:
    if fmt == "pdf":
        return {"CreationDate": None, "Creator": "mrcstats", "Producer": "matplotlib"}
    if fmt == "svg":
        return {"Date": None, "Creator": "mrcstats"}
    if fmt == "png":
        return {"Software": "mrcstats"}
    return None


def figure_pdf_bytes(fig) -> bytes:
    """The figure as deterministic one-page vector PDF bytes (for embedding in reports)."""
    buf = io.BytesIO()
    with figure_style():
        fig.savefig(buf, format="pdf", bbox_inches="tight", pad_inches=0.02, metadata=_metadata("pdf"))
    return buf.getvalue()


def figure_png_bytes(fig, dpi: int = 200) -> bytes:
    buf = io.BytesIO()
    with figure_style():
        fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight", pad_inches=0.02, metadata=_metadata("png"))
    return buf.getvalue()


#: artist -> the labels of its points (items, levels), for the hover of the HTML report
_POINT_LABELS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def point_labels(artist: Any, labels: Iterable[Any]) -> Any:
    """Attach one label per plotted point of ``artist`` (a Line2D or a scatter); the interactive HTML report
    (:mod:`mrcstats.report.html`) shows it when the point is hovered. Returns ``artist``."""
    _POINT_LABELS[artist] = [str(v) for v in labels]
    return artist


def labels_of(artist: Any) -> list[str] | None:
    """The point labels attached by :func:`point_labels`, or None."""
    return _POINT_LABELS.get(artist)


#: axes -> explicit hover points ``(x, y, text)`` in data coordinates, for the HTML report
_HOVER_POINTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def hover_points(ax: Any, xs: Iterable[float], ys: Iterable[float], texts: Iterable[str]) -> None:
    """Give the HTML report's hover of ``ax`` these points and their complete tooltip texts (nothing is drawn;
    the PDF is unchanged). An axes with explicit hover points gets no automatic ones: use it where a point's
    tooltip needs more than the plotted value, e.g. both models, the difference and its interval of a cell of
    :func:`pairwise_matrix_plot`."""
    _HOVER_POINTS.setdefault(ax, []).extend((float(x), float(y), str(t)) for x, y, t in zip(xs, ys, texts))


def hover_points_of(ax: Any) -> list[tuple[float, float, str]] | None:
    """The explicit hover points attached by :func:`hover_points`, or None."""
    return _HOVER_POINTS.get(ax)


def plain(text: Any, limit: int | None = None) -> str:
    """``text`` (a model name, a column value, a caption from a spec) as literal figure text: every ``$`` escaped,
    so matplotlib never parses it as mathtext (``$x^{$`` would crash, ``cost $x^2$ tier`` render as "cost x² tier").
    The one helper every figure passes data through, exactly once per text; ``limit`` shortens a very long
    label (legend entries, tick labels) to that many characters with a trailing "…".
    """
    s = str(text)
    if limit is not None and len(s) > limit:
        s = s[: limit - 1] + "…"
    return s.replace("$", r"\$")


#: longest legend entry or tick label drawn (longer names end in "…"; tables keep them whole)
LABEL_LIMIT = 60


def _require(frame: pd.DataFrame, cols: Sequence[str], what: str) -> None:
    miss = [c for c in cols if c not in frame.columns]
    if miss:
        raise InputError(f"{what}: columns {miss} not found among {list(frame.columns)}")


def _legend(ax, **kw) -> None:
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles, labels, **kw)


# --------------------------------------------------------------------------- seed 003


def loess_plot(data: pd.DataFrame, x: str, y: str = "correct", by: str = "model", frac: float = 0.6,
               glmm: pd.DataFrame | None = None, xlabel: str | None = None, ax=None, order: Sequence[str] | None = None,
               labels: Mapping[str, str] | None = None):
    """LOESS of P(correct) against ``x`` per ``by`` group (statsmodels ``lowess``, ``it=0``), GLMM curves overlaid.

    ``glmm``: a frame with columns ``by``, ``x`` and ``p`` (population-level
    predicted probability, e.g. from the fixed effects), drawn thin and dashed in
    the group's grey. Invalid answers (null ``y``) count as not correct.
    """
    from statsmodels.nonparametric.smoothers_lowess import lowess

    _require(data, [x, y, by], "loess_plot")
    if ax is None:
        fig, ax = new_figure("column", 0.75)
    else:
        fig = ax.figure
    groups = list(order) if order is not None else sorted(pd.unique(data[by].astype(str)))
    names = dict(labels or {})
    with figure_style():
        for i, g in enumerate(groups):
            d = data[data[by].astype(str) == g]
            xv = pd.to_numeric(d[x], errors="coerce").to_numpy(dtype=float)
            yv = d[y].astype("boolean").fillna(False).to_numpy(dtype=float)
            keep = np.isfinite(xv)
            if keep.sum() < 3:
                continue
            # it=0: no robustifying iterations; with 0/1 outcomes they treat the minority class as outliers
            # and drag the curve to 0 or 1
            fit = lowess(yv[keep], xv[keep], frac=frac, it=0, return_sorted=True)
            st = style_for(i)
            ax.plot(fit[:, 0], fit[:, 1], color=st["color"], linestyle=st["linestyle"], marker=st["marker"],
                    markevery=max(len(fit) // 8, 1), label=plain(names.get(g, g), LABEL_LIMIT), linewidth=1.3)
            if glmm is not None:
                gg = glmm[glmm[by].astype(str) == g].sort_values(x)
                ax.plot(gg[x], gg["p"], color=st["color"], linestyle=(0, (2, 1.5)), linewidth=0.8, alpha=0.9)
        ax.set_xlabel(plain(xlabel or f"{x} (SD from the mean)"))
        ax.set_ylabel("P(correct) (probability)")
        ax.set_ylim(-0.02, 1.02)
        if glmm is not None:
            ax.plot([], [], color="0.4", linestyle=(0, (2, 1.5)), linewidth=0.8,
                    label="GLMM, fixed effects (thin dashed, model's colour)")
        _legend(ax, loc="lower left")
    return fig


def caterpillar_plot(ranef: pd.DataFrame, level: str = "level", mode: str = "mode", condvar: str = "condvar",
                     n: int | None = 100, seed: int = 0, z: float = 1.959963984540054, title: str | None = None,
                     width: str | float = "page"):
    """Random-effects caterpillar: conditional modes sorted, ±z·sqrt(condVar) intervals.

    ``n``: draw a random sample of that many levels (seeded; the seed shows 100),
    ``None`` for all.
    """
    _require(ranef, [level, mode], "caterpillar_plot")
    r = ranef.copy()
    if n is not None and len(r) > n:
        r = r.sample(n=n, random_state=seed)
    r = r.sort_values(mode).reset_index(drop=True)
    fig, ax = new_figure(width, 0.42 if width == "page" else 0.8)
    with figure_style():
        xs = np.arange(len(r))
        if condvar in r.columns:
            half = z * np.sqrt(r[condvar].to_numpy(dtype=float))
            ax.errorbar(xs, r[mode], yerr=half, fmt="none", ecolor="0.55", elinewidth=0.6, capsize=0)
        (pts,) = ax.plot(xs, r[mode], "o", color="0.0", markersize=2.2)
        point_labels(pts, r[level])
        ax.axhline(0, color="0.3", linewidth=0.5, linestyle=":")
        ax.set_xlabel("grouping level (sorted by conditional mode)")
        ax.set_ylabel("conditional mode (log-odds)")
        ax.set_xticks([])
        if title:
            ax.set_title(plain(title))
    return fig


def pd_histogram(values: Sequence[float] | pd.Series, bins: int | Sequence[float] = 30, cutoffs: Sequence[float] = (),
                 xlabel: str = "discriminatory power P_d (natural-log units)"):
    """Histogram of P_d over clusters (seed 003 Fig. 4), cutoffs as vertical dotted lines."""
    v = pd.to_numeric(pd.Series(values), errors="coerce").dropna().to_numpy(dtype=float)
    fig, ax = new_figure("column", 0.65)
    with figure_style():
        ax.hist(v, bins=bins, color=PALETTE[2], edgecolor="0.1", linewidth=0.4)
        for c in cutoffs:
            ax.axvline(c, color="0.0", linestyle=":", linewidth=0.7)
        ax.set_xlabel(plain(xlabel))
        ax.set_ylabel("clusters (count)")
        if len(v):
            ax.set_title(f"n = {len(v)}, mean = {v.mean():.3f}, max = {v.max():.3f}", fontsize=7)
    return fig


def fixef_truth_plot(coef: pd.DataFrame, truth: Mapping[str, float], z: float = 1.959963984540054,
                     labels: Mapping[str, str] | None = None):
    """Recovered fixed effects (±z·SE) against the simulated truth, one row per term (``labels`` renames)."""
    _require(coef, ["term", "estimate", "se"], "fixef_truth_plot")
    c = coef.reset_index(drop=True)
    fig, ax = new_figure("column", 0.2 + 0.12 * len(c))
    with figure_style():
        ys = np.arange(len(c))[::-1]
        ax.errorbar(c["estimate"], ys, xerr=z * c["se"], fmt="o", color=PALETTE[5], ecolor=PALETTE[5],
                    elinewidth=0.8, capsize=1.5, label="estimate ± 1.96 SE")
        tv = [truth.get(t, np.nan) for t in c["term"]]
        ax.plot(tv, ys, "x", color=PALETTE[4], markersize=5, label="truth")
        ax.set_yticks(ys)
        ax.set_yticklabels([plain(dict(labels or {}).get(t, t), LABEL_LIMIT) for t in c["term"]])
        ax.axvline(0, color="0.6", linewidth=0.5, linestyle=":")
        ax.set_xlabel("fixed effect (log-odds)")
        _legend(ax, loc="best")
    return fig


# --------------------------------------------------------------------------- seed 000


def masking_curves(frame: pd.DataFrame, x: str = "masking_rate", y: str = "acc", group: str = "condition",
                   lo: str | None = "ci_low", hi: str | None = "ci_high", sd: str | None = "sd", ax=None,
                   title: str | None = None, order: Sequence[str] | None = None, percent: bool = True):
    """Accuracy against masking rate, one line per ``group`` (masking condition), with trial intervals.

    Intervals: ``lo``/``hi`` columns when present (e.g. the 95% CI over trials),
    else ``y ± sd`` when an ``sd`` column is present, else none.
    """
    _require(frame, [x, y, group], "masking_curves")
    if ax is None:
        fig, ax = new_figure("column", 0.75)
    else:
        fig = ax.figure
    default = [g for g in ("lenient", "partial", "regular", "strict") if g in set(frame[group].astype(str))]
    groups = list(order) if order is not None else default + sorted(set(frame[group].astype(str)) - set(default))
    scale = 100.0 if percent else 1.0
    with figure_style():
        for i, g in enumerate(groups):
            d = frame[frame[group].astype(str) == g].sort_values(x)
            xv = pd.to_numeric(d[x]).to_numpy(dtype=float)
            yv = pd.to_numeric(d[y]).to_numpy(dtype=float) * scale
            st = style_for(i)
            ax.plot(xv, yv, label=plain(g, LABEL_LIMIT), **st)
            if lo and hi and lo in d.columns and hi in d.columns:
                ax.fill_between(xv, pd.to_numeric(d[lo]).to_numpy(dtype=float) * scale,
                                pd.to_numeric(d[hi]).to_numpy(dtype=float) * scale, color=st["color"], alpha=0.15,
                                linewidth=0)
            elif sd and sd in d.columns:
                s = pd.to_numeric(d[sd]).to_numpy(dtype=float) * scale
                ax.fill_between(xv, yv - s, yv + s, color=st["color"], alpha=0.15, linewidth=0)
        ax.set_xlabel("masking rate MR (%)")
        ax.set_ylabel("accuracy (%)" if percent else "accuracy")
        if title:
            ax.set_title(plain(title))
        _legend(ax, loc="lower left")
    return fig


_INDICATOR_UNITS = {"na": "NA (ratio to Acc at MR = 0)", "ea": "EA (accuracy, %)", "ki": "KI (ratio)"}


def indicator_plot(frame: pd.DataFrame, x: str = "masking_rate", group: str | None = None,
                   indicators: Sequence[str] = ("na", "ea", "ki")):
    """NA, EA and KI against masking rate (seed 000 Fig. 7): one panel per indicator."""
    present = [i for i in indicators if i in frame.columns]
    if not present:
        raise InputError(f"indicator_plot: none of {list(indicators)} among {list(frame.columns)}")
    fig, axes = (new_figure("page", 0.3, 1, len(present)) if len(present) > 1 else new_figure("column", 0.6))
    axes = np.atleast_1d(axes)
    groups = [None] if group is None else sorted(pd.unique(frame[group].astype(str)))
    with figure_style():
        for ax, ind in zip(axes, present):
            for i, g in enumerate(groups):
                d = frame if g is None else frame[frame[group].astype(str) == g]
                d = d.sort_values(x)
                ax.plot(pd.to_numeric(d[x]), pd.to_numeric(d[ind], errors="coerce"),
                        label=plain(g, LABEL_LIMIT) if g is not None else ind.upper(), **style_for(i))
            ax.set_xlabel("masking rate MR (%)")
            ax.set_ylabel(_INDICATOR_UNITS.get(ind, ind.upper()))
            ax.set_title(ind.upper())
        _legend(axes[0], loc="best")
        fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- seed 004


def confusion_matrix_plot(matrix: pd.DataFrame, title: str | None = None, xlabel: str = "predicted",
                          ylabel: str = "gold", ax=None):
    """A confusion matrix as a grey heat map with the counts printed in each cell."""
    m = matrix.astype(float)
    if ax is None:
        fig, ax = new_figure("column", 0.8)
    else:
        fig = ax.figure
    with figure_style():
        vmax = max(float(np.nanmax(m.to_numpy())), 1.0) if m.size else 1.0
        # no colour bar: the counts are printed in the cells (and pdfrw cannot embed its indexed-colour image)
        # cells as vector patches, not an image: matplotlib writes an image of few grey levels as an indexed-colour
        # image whose palette bytes the PDF embedding (pdfrw -> reportlab) cannot always encode
        ax.pcolormesh(np.arange(m.shape[1] + 1) - 0.5, np.arange(m.shape[0] + 1) - 0.5, m.to_numpy(), cmap="Greys",
                      vmin=0, vmax=vmax * 1.15)
        ax.set_xlim(-0.5, m.shape[1] - 0.5)
        ax.set_ylim(m.shape[0] - 0.5, -0.5)
        for (r, c), v in np.ndenumerate(m.to_numpy()):
            ax.text(c, r, f"{v:g}", ha="center", va="center", fontsize=7,
                    color="white" if v > vmax * 0.6 else "black")
        ax.set_xticks(range(m.shape[1]))
        ax.set_xticklabels([plain(c, LABEL_LIMIT) for c in m.columns], rotation=30, ha="right")
        ax.set_yticks(range(m.shape[0]))
        ax.set_yticklabels([plain(i, LABEL_LIMIT) for i in m.index])
        ax.set_xlabel(plain(xlabel))
        ax.set_ylabel(plain(ylabel))
        ax.spines[:].set_visible(False)
        if title:
            ax.set_title(plain(title))
    return fig


def error_type_bars(frame: pd.DataFrame, ylabel: str = "responses (count)", title: str | None = None):
    """Grouped bars: error types (rows of ``frame``) × conditions (columns), hatched for greyscale (seed 004 Fig. 2)."""
    f = frame.astype(float)
    fig, ax = new_figure("column", 0.7)
    hatches = ("", "////", "....", "xxxx", "\\\\\\\\", "oo")
    with figure_style():
        n = f.shape[1]
        width = 0.8 / max(n, 1)
        xs = np.arange(f.shape[0])
        for j, col in enumerate(f.columns):
            ax.bar(xs + (j - (n - 1) / 2) * width, f[col], width=width, color=PALETTE[(j + 1) % len(PALETTE)],
                   edgecolor="0.0", linewidth=0.4, hatch=hatches[j % len(hatches)], label=plain(col, LABEL_LIMIT))
        ax.set_xticks(xs)
        ax.set_xticklabels([plain(i, LABEL_LIMIT) for i in f.index], rotation=25, ha="right")
        ax.set_ylabel(plain(ylabel))
        if title:
            ax.set_title(plain(title))
        _legend(ax, loc="best")
    return fig


def bar_plot(frame: pd.DataFrame, x: str, y: str, err: str | None = None, ylabel: str | None = None,
             title: str | None = None, percent: bool = True):
    """Simple bars of ``y`` by ``x`` with optional error bars (accuracy per condition)."""
    _require(frame, [x, y], "bar_plot")
    scale = 100.0 if percent else 1.0
    fig, ax = new_figure("column", 0.65)
    with figure_style():
        xs = np.arange(len(frame))
        ax.bar(xs, frame[y].astype(float) * scale, color="0.6", edgecolor="0.0", linewidth=0.4,
               yerr=(frame[err].astype(float) * scale) if err and err in frame.columns else None,
               error_kw={"elinewidth": 0.6, "capsize": 1.5})
        ax.set_xticks(xs)
        ax.set_xticklabels([plain(v, LABEL_LIMIT) for v in frame[x]], rotation=30, ha="right")
        ax.set_ylabel(plain(ylabel or (f"{y} (%)" if percent else y)))
        if title:
            ax.set_title(plain(title))
    return fig


def pairwise_matrix_plot(diff: pd.DataFrame, significant: pd.DataFrame | None = None, title: str | None = None,
                         percent: bool = True, ax=None, value_label: str | None = None, vmax: float | None = None,
                         low: pd.DataFrame | None = None, high: pd.DataFrame | None = None,
                         p: pd.DataFrame | None = None, p_label: str = "adjusted p"):
    """Pairwise differences (row model minus column model) as a diverging grey map; ``*`` marks significant cells.

    ``diff``: a square models × models frame (NaN on the diagonal); ``significant``: a boolean frame of the same
    shape (e.g. adjusted p < α). Rows and columns keep the given order (e.g. the ranking). Any symmetric pairwise
    measure fits (judges' error correlations): ``value_label`` names it on the colour bar, ``vmax`` fixes the
    colour scale to ``[−vmax, vmax]`` (default: the largest |value|).

    Every off-diagonal cell is a hover point of the HTML report naming both models (row and column), the
    value and, when given, its interval (``low``/``high``, frames like ``diff``, row minus column) and its
    p-value (``p``, printed by :func:`mrcstats._pformat.format_pval`, named ``p_label``).
    """
    m = diff.astype(float)
    k = m.shape[0]
    scale = 100.0 if percent else 1.0
    if ax is None:
        side = min(max(2.6, 0.32 * k + 1.2), 6.9)
        fig, ax = new_figure(side, 0.9 if k > 3 else 0.8)
    else:
        fig = ax.figure
    with figure_style():
        vals = m.to_numpy() * scale
        if vmax is None:
            vmax = float(np.nanmax(np.abs(vals))) if np.isfinite(vals).any() else 1.0
        vmax = vmax or 1.0
        # vector quads and a stepped colour map (no raster images: the report embeds figures as vector PDF)
        cmap = _mpl().colormaps["RdGy_r"].resampled(11)
        im = ax.pcolormesh(np.arange(k + 1) - 0.5, np.arange(k + 1) - 0.5, np.ma.masked_invalid(vals), cmap=cmap,
                           vmin=-vmax, vmax=vmax)
        ax.set_xlim(-0.5, k - 0.5)
        ax.set_ylim(k - 0.5, -0.5)
        ax.set_aspect("equal")
        fs = 7 if k <= 8 else (5.5 if k <= 14 else 4)
        if k <= 24:
            for (r, c), v in np.ndenumerate(vals):
                if r == c or not np.isfinite(v):
                    continue
                star = "*" if significant is not None and bool(significant.iat[r, c]) else ""
                txt = f"{round(v, 1) + 0.0:.1f}" if percent else f"{round(v, 2) + 0.0:.2f}"
                ax.text(c, r, txt + star, ha="center", va="center",
                        fontsize=fs, color="white" if abs(v) > 0.6 * vmax else "black")
        elif significant is not None:
            rr, cc = np.nonzero(significant.to_numpy(dtype=bool))
            ax.scatter(cc, rr, marker="*", s=4, color="black", linewidths=0)
        _pairwise_hover(ax, m, scale, percent, value_label, low, high, p, p_label)
        ax.set_xticks(range(k))
        ax.set_xticklabels([plain(c, LABEL_LIMIT) for c in m.columns], rotation=45, ha="right", fontsize=fs + 0.5)
        ax.set_yticks(range(k))
        ax.set_yticklabels([plain(i, LABEL_LIMIT) for i in m.index], fontsize=fs + 0.5)
        ax.spines[:].set_visible(False)
        ax.tick_params(length=0)
        cb = fig.colorbar(im, ax=ax, fraction=0.046, pad=0.03)
        cb.set_label(value_label or ("row − column" + (" (points)" if percent else "")), fontsize=6.5)
        cb.ax.tick_params(labelsize=6)
        if title:
            ax.set_title(plain(title))
    return fig


def _pairwise_hover(ax: Any, m: pd.DataFrame, scale: float, percent: bool, value_label: str | None,
                    low: pd.DataFrame | None, high: pd.DataFrame | None, p: pd.DataFrame | None,
                    p_label: str) -> None:
    """The hover points of :func:`pairwise_matrix_plot`: both models, the value, its interval and p per cell."""
    from mrcstats._pformat import format_pval

    def num(v: float) -> str:
        return f"{v * scale:.4g}" if np.isfinite(v) else "NA"

    what = value_label or ("row − column" + (" (points)" if percent else ""))
    xs, ys, texts = [], [], []
    for (r, c), v in np.ndenumerate(m.to_numpy()):
        if r == c or not np.isfinite(v):
            continue
        rm, cm = plain(m.index[r]), plain(m.columns[c])
        lines = [f"{rm} − {cm}" if value_label is None else f"{rm} · {cm}", f"{what}: {num(v)}"]
        if low is not None and high is not None:
            lines.append(f"interval: [{num(float(low.iat[r, c]))}, {num(float(high.iat[r, c]))}]")
        if p is not None:
            lines.append(f"{p_label}: {format_pval(p.iat[r, c])}")
        xs.append(c)
        ys.append(r)
        texts.append("\n".join(lines))
    hover_points(ax, xs, ys, texts)
def calibration_plot(frame: pd.DataFrame, x: str = "judge_mean", y: str = "human_mean", lo: str = "ci_low",
                     hi: str = "ci_high", n: str = "n", xlabel: str = "judge score (bin mean)",
                     ylabel: str = "human score (mean, CI)", title: str | None = None):
    """A calibration plot: per bin the mean judge score against the mean human score with its CI (vertical bars),
    marker area by the bin's rows, and the diagonal a calibrated judge's points lie on."""
    _require(frame, [x, y, lo, hi, n], "calibration_plot")
    fig, ax = new_figure("column", 0.85)
    with figure_style():
        xs, ys = frame[x].to_numpy(dtype=float), frame[y].to_numpy(dtype=float)
        both = np.concatenate([xs, ys, frame[lo].to_numpy(dtype=float), frame[hi].to_numpy(dtype=float)])
        both = both[np.isfinite(both)]
        a, b = (float(both.min()), float(both.max())) if both.size else (0.0, 1.0)
        pad = 0.05 * (b - a or 1.0)
        ax.plot([a - pad, b + pad], [a - pad, b + pad], color="0.6", linewidth=0.7, linestyle="--")
        ax.vlines(xs, frame[lo].to_numpy(dtype=float), frame[hi].to_numpy(dtype=float), color="0.25", linewidth=0.9)
        sizes = frame[n].to_numpy(dtype=float)
        art = ax.scatter(xs, ys, s=8 + 40 * sizes / max(float(sizes.max()), 1.0), color="0.0", zorder=3)
        point_labels(art, [f"{int(k)} rows" for k in sizes])
        ax.set_xlim(a - pad, b + pad)
        ax.set_ylim(a - pad, b + pad)
        ax.set_xlabel(plain(xlabel))
        ax.set_ylabel(plain(ylabel))
        ax.grid(color="0.9", linewidth=0.5)
        ax.set_axisbelow(True)
        if title:
            ax.set_title(plain(title))
    return fig


def rank_sets_plot(frame: pd.DataFrame, label: str = "model", rank: str = "rank",
                   marginal: tuple[str, str] = ("marginal_lo", "marginal_hi"),
                   simultaneous: tuple[str, str] = ("simultaneous_lo", "simultaneous_hi"),
                   other: tuple[str, str] | None = None, other_label: str | None = None, title: str | None = None):
    """A leaderboard figure: one row per model (top to bottom in the frame's order), its point rank (dot), its
    marginal rank set (thick bar) and simultaneous rank set (thin line); ``other``: a second pair of columns
    drawn as a light bar above (e.g. the sets with independent statistics)."""
    _require(frame, [label, rank, *marginal, *simultaneous, *(other or ())], "rank_sets_plot")
    k = len(frame)
    fig, ax = new_figure("column", min(max(0.3, 0.075 * k + 0.2), 2.6))
    with figure_style():
        ys = np.arange(k)[::-1].astype(float)
        if other is not None:
            ax.hlines(ys + 0.28, frame[other[0]].to_numpy(dtype=float) - 0.4,
                      frame[other[1]].to_numpy(dtype=float) + 0.4, color="0.7", linewidth=1.2,
                      label=other_label or "other")
        ax.hlines(ys, frame[simultaneous[0]].to_numpy(dtype=float) - 0.4,
                  frame[simultaneous[1]].to_numpy(dtype=float) + 0.4, color="0.25", linewidth=0.8,
                  label="simultaneous set")
        ax.hlines(ys, frame[marginal[0]].to_numpy(dtype=float) - 0.4, frame[marginal[1]].to_numpy(dtype=float) + 0.4,
                  color="0.0", linewidth=3.0, label="marginal set")
        art = ax.plot(frame[rank].to_numpy(dtype=float), ys, "o", color="white", markeredgecolor="0.0",
                      markersize=3.5, label="rank")[0]
        point_labels(art, [f"{m}: rank {int(r)}, marginal [{int(a)}, {int(b)}], simultaneous [{int(c)}, {int(d)}]"
                           for m, r, a, b, c, d in zip(frame[label], frame[rank], frame[marginal[0]],
                                                       frame[marginal[1]], frame[simultaneous[0]],
                                                       frame[simultaneous[1]])])
        ax.set_yticks(ys)
        ax.set_yticklabels([plain(v, LABEL_LIMIT) for v in frame[label]], fontsize=7 if k <= 20 else 5)
        ax.set_xlim(0.4, k + 0.6)
        ax.set_ylim(-0.7, k - 0.3 + (0.3 if other is not None else 0))
        ax.set_xlabel("rank (1 = best)")
        ax.grid(axis="x", color="0.9", linewidth=0.5)
        ax.set_axisbelow(True)
        _legend(ax, fontsize=6)
        if title:
            ax.set_title(plain(title))
    return fig


def forest_plot(frame: pd.DataFrame, label: str = "model", est: str = "accuracy", lo: str = "ci_low",
                hi: str = "ci_high", xlabel: str = "accuracy (%)", percent: bool = True, title: str | None = None):
    """Estimates with their confidence intervals, one row per label, top to bottom in the frame's order."""
    _require(frame, [label, est, lo, hi], "forest_plot")
    scale = 100.0 if percent else 1.0
    k = len(frame)
    fig, ax = new_figure("column", min(max(0.25, 0.075 * k + 0.18), 2.4))
    with figure_style():
        ys = np.arange(k)[::-1]
        e = frame[est].to_numpy(dtype=float) * scale
        lo_ = frame[lo].to_numpy(dtype=float) * scale
        hi_ = frame[hi].to_numpy(dtype=float) * scale
        ax.hlines(ys, lo_, hi_, color="0.25", linewidth=0.9)
        ax.plot(e, ys, "s", color="0.0", markersize=3)
        ax.set_yticks(ys)
        ax.set_yticklabels([plain(v, LABEL_LIMIT) for v in frame[label]], fontsize=7 if k <= 20 else 5)
        ax.set_xlabel(plain(xlabel))
        ax.set_ylim(-0.7, k - 0.3)
        ax.grid(axis="x", color="0.9", linewidth=0.5)
        ax.set_axisbelow(True)
        if title:
            ax.set_title(plain(title))
    return fig


def _plain_log_axis(axis) -> None:
    """Log axis with plain-number labels at 1-2-5 steps and no minor labels."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    lo, hi = axis.get_view_interval()
    ticks = [m * 10.0 ** e for e in range(-3, 4) for m in (1, 2, 5) if lo <= m * 10.0 ** e <= hi]
    if len(ticks) >= 2:
        axis.set_major_locator(FixedLocator(ticks))
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def item_map_plot(items: pd.DataFrame, a: str = "a", b: str = "b", title: str | None = None):
    """Item map: IRT difficulty b (x) against discrimination a (y, log scale), one point per fitted item."""
    _require(items, [a, b], "item_map_plot")
    f = items[[a, b]].apply(pd.to_numeric, errors="coerce")
    f = f[np.isfinite(f[a]) & np.isfinite(f[b]) & (f[a] > 0)]
    fig, ax = new_figure("column", 0.72)
    with figure_style():
        pts = ax.scatter(f[b], f[a], s=4 if len(f) > 2000 else 9, color=PALETTE[0],
                         alpha=0.5 if len(f) > 500 else 0.9, linewidths=0)
        if "item" in items.columns:
            point_labels(pts, items.loc[f.index, "item"])
        ax.set_yscale("log")
        _plain_log_axis(ax.yaxis)
        ax.set_xlabel("difficulty b (ability units)")
        ax.set_ylabel("discrimination a (log scale)")
        ax.set_title(plain(title or f"{len(f):,} items"), fontsize=7)
    return fig


def pd_vs_a_plot(items: pd.DataFrame, pd_col: str = "pd", a: str = "a", rho: float | None = None):
    """Seed 003's discriminatory power P_d (y) against the IRT discrimination a (x, log scale)."""
    _require(items, [pd_col, a], "pd_vs_a_plot")
    f = items[[pd_col, a]].apply(pd.to_numeric, errors="coerce")
    f = f[np.isfinite(f[pd_col]) & np.isfinite(f[a]) & (f[a] > 0)]
    fig, ax = new_figure("column", 0.72)
    with figure_style():
        pts = ax.scatter(f[a], f[pd_col], s=4 if len(f) > 2000 else 9, color=PALETTE[1],
                         alpha=0.5 if len(f) > 500 else 0.9, linewidths=0)
        if "item" in items.columns:
            point_labels(pts, items.loc[f.index, "item"])
        ax.set_xscale("log")
        _plain_log_axis(ax.xaxis)
        ax.set_xlabel("IRT discrimination a (log scale)")
        ax.set_ylabel("P_d (natural-log units)")
        if rho is not None and np.isfinite(rho):
            ax.set_title(f"Spearman rho = {rho:.2f}, {len(f):,} items", fontsize=7)
    return fig


def subset_error_plot(results: pd.DataFrame, metric: str = "mae", ylabel: str | None = None):
    """Held-out error (or tau) against subset size k, one line per method x estimator, t intervals as bars."""
    _require(results, ["method", "estimator", "k", metric], "subset_error_plot")
    fig, ax = new_figure("column", 0.8)
    lo, hi = f"{metric}_ci_low", f"{metric}_ci_high"
    with figure_style():
        for i, ((m, e), g) in enumerate(results.groupby(["method", "estimator"], sort=True)):
            g = g.sort_values("k")
            st = style_for(i)
            yerr = None
            if lo in g.columns and hi in g.columns and g[lo].notna().any():
                yerr = np.vstack([g[metric] - g[lo], g[hi] - g[metric]])
            ax.errorbar(g["k"], g[metric], yerr=yerr, label=plain(f"{m} / {e}", LABEL_LIMIT), capsize=1.5, markersize=3,
                        linewidth=0.9, **st)
        ax.set_xscale("log")
        ks = sorted(results["k"].unique())
        ax.set_xticks(ks)
        ax.set_xticklabels([str(k) for k in ks])
        ax.minorticks_off()
        ax.set_xlabel("subset size k (items)")
        ax.set_ylabel(plain(ylabel or ("mean absolute error of accuracy" if metric == "mae" else metric)))
        _legend(ax, fontsize=5.5, ncol=2)
    return fig


def cat_trace_plot(trace: pd.DataFrame, curve: pd.DataFrame, actual: float | None = None):
    """An adaptive run: ability (± 2 SE) per step, and the predicted accuracy with its interval per item count."""
    _require(trace, ["step", "ability", "ability_se"], "cat_trace_plot")
    _require(curve, ["items", "predicted", "lo", "hi"], "cat_trace_plot")
    fig, (ax1, ax2) = new_figure("page", 0.35, ncols=2)
    with figure_style():
        st = style_for(0)
        ax1.fill_between(trace["step"], trace["ability"] - 2 * trace["ability_se"],
                         trace["ability"] + 2 * trace["ability_se"], color=st["color"], alpha=0.2, linewidth=0)
        ax1.plot(trace["step"], trace["ability"], color=st["color"], linewidth=0.9)
        ax1.set_xlabel("items asked")
        ax1.set_ylabel("ability θ (EAP)")
        ax2.fill_between(curve["items"], curve["lo"], curve["hi"], color=st["color"], alpha=0.2, linewidth=0)
        ax2.plot(curve["items"], curve["predicted"], color=st["color"], linewidth=0.9, marker="o", markersize=2.5)
        if actual is not None:
            ax2.axhline(actual, color="0.3", linestyle="--", linewidth=0.8)
        ax2.set_xlabel("items asked")
        ax2.set_ylabel("predicted full accuracy")
    return fig
