"""``accuracy``: accuracy laid out rows × columns with a 95% interval per cell (seed 004 tables)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from mrcstats.errors import InputError
from mrcstats.report.analyses.base import (
    Analysis,
    AnalysisSpec,
    Context,
    Key,
    Output,
    cluster_words,
    compare_published,
    words,
)
from mrcstats.report.tables import MISSING, PairTable, Table, format_number, is_missing
from mrcstats.stats.accuracy import summarize


class Accuracy(Analysis):
    type = "accuracy"
    title = "Accuracy"
    keys: ClassVar[dict[str, Key]] = {
        "rows": Key((str, list), "condition"), "cols": Key((str,), "model"), "percent": Key((bool,), True),
        "order": Key((dict,), {}, help="{column: [values in display order]}"),
        "cluster": Key((str,), "cluster", help="column the interval is clustered on"),
        "sd": Key((bool,), False, help="also show the SD over trials"),
        "labels": Key((dict,), {}, help="display names of row/column values")}

    def run(self, ctx: Context, a: AnalysisSpec) -> Output:
        rows = [a.get("rows")] if isinstance(a.get("rows"), str) else list(a.get("rows"))
        cols, cluster = a.get("cols"), a.get("cluster")
        data = ctx.rows(a)
        ntrials = int(data["trial"].nunique())
        res = summarize(data, by=[*rows, cols], cluster=cluster, trials="mean" if ntrials > 1 else "pool")
        agg = res.to_frame()
        order = dict(a.get("order") or {})
        keys = [c for c in [*rows, cols] if c in order]
        if keys:
            rank = {c: {str(v): i for i, v in enumerate(order[c])} for c in keys}
            agg = agg.sort_values(by=keys, key=lambda s: s.astype(str).map(rank[s.name]).fillna(len(rank[s.name])),
                                  kind="mergesort").reset_index(drop=True)
        repeated = res.ci_method == "clustered wilson"
        lo, hi = "ci_low", "ci_high"
        how = res.ci_words() + (f", clustered by {cluster_words(data, cluster)}" if repeated else "")
        title = a.get("title") or f"Accuracy by {', '.join(rows)} and {cols}"
        trials = (f"mean over {ntrials} trials (= pooled accuracy)" if ntrials > 1 else "one trial per cell")
        labels = dict(a.get("labels") or {})
        if labels:
            for c in [*rows, cols]:
                agg[c] = agg[c].map(lambda v: labels.get(str(v), v))
        heads = {c: words(c).capitalize() for c in rows}
        t = accuracy_table(agg.rename(columns=heads), [heads[c] for c in rows], cols, mean="accuracy", lo=lo, hi=hi,
                           sd="sd" if a.get("sd") and ntrials > 1 else None, percent=a.get("percent"),
                           caption=f"{title}: accuracy in percent ({trials}; invalid answers count as not correct) "
                                   f"with its {how}.",
                           label=f"a{a.index}_accuracy_{'_'.join(rows)}_{cols}")
        out = Output(title)
        out.table(t)
        if a.get("published"):
            scale = 100.0 if a.get("percent") else 1.0
            ours = (agg.assign(_r=agg[rows].astype(str).agg(" / ".join, axis=1), _v=agg["accuracy"] * scale)
                    .pivot_table(index="_r", columns=cols, values="_v", aggfunc="first"))
            ours.columns = [str(c) for c in ours.columns]
            compare_published(out, title, ours, a.get("published"), a.get("tolerance"), f"a{a.index}_accuracy",
                              unit="percent" if a.get("percent") else "",
                              not_compared=a.get("not_compared"))
        out.methods.append(
            "Accuracy per cell = correct / all responses (invalid = not correct)"
            + (f", the mean over {ntrials} trials of the per-trial accuracy" if ntrials > 1 else "")
            + f"; {how}" + (" (Wilson's formula at the effective sample size p(1 − p)/SE², at most n, SE the "
                            "cluster-robust standard error with the small-sample factor G/(G − 1), G = clusters, "
                            "and a t critical value on G − 1 df; Miller 2024, Eq. 4; Korn and Graubard 1998; "
                            "Cameron, Gelbach and Miller 2008)." if repeated else
                            " as R's prop.test(k, n, correct = FALSE)."))
        for n in res.notes:
            out.note(n[0].upper() + n[1:] + ".")
        return out


def accuracy_table(frame: pd.DataFrame, rows: str | Sequence[str], cols: str, mean: str = "accuracy",
                   sd: str | None = "sd", percent: bool = True, digits: int = 1, caption: str = "",
                   label: str = "accuracy", row_order: Sequence[Any] | None = None,
                   col_order: Sequence[Any] | None = None, lo: str | None = None, hi: str | None = None,
                   notes: Sequence[str] = ()) -> Table:
    """Accuracy laid out rows × columns (seed 004 Tables 6-7, 11-12): ``mean [lo, hi]`` and/or ``± SD``.

    ``frame`` holds one row per cell with the ``mean`` column (fraction), optionally the interval
    bounds ``lo``/``hi`` and the ``sd``; cells are shown in percent by default. The raw export keeps
    the fractions (times 100 with ``percent``) in ``<col>``, ``<col> low``, ``<col> high`` and
    ``<col> SD`` columns.
    """
    rows = [rows] if isinstance(rows, str) else list(rows)
    need = [*rows, cols, mean] + ([sd] if sd else []) + ([lo, hi] if lo and hi else [])
    miss = [c for c in need if c not in frame.columns]
    if miss:
        raise InputError(f"accuracy_table: columns {miss} not found among {list(frame.columns)}")

    def piv_of(col: str) -> pd.DataFrame:
        return frame.pivot_table(index=rows, columns=cols, values=col, aggfunc="first", sort=False, dropna=False)

    piv = piv_of(mean)
    extra = {k: piv_of(c).reindex(index=piv.index, columns=piv.columns)
             for k, c in (("SD", sd), ("low", lo if hi else None), ("high", hi if lo else None)) if c}
    if row_order is not None:
        piv = piv.reindex(row_order)
        extra = {k: v.reindex(row_order) for k, v in extra.items()}
    if col_order is not None:
        piv = piv.reindex(columns=col_order)
        extra = {k: v.reindex(columns=col_order) for k, v in extra.items()}
    scale = 100.0 if percent else 1.0
    out = piv.reset_index()
    out.columns = [str(c) for c in out.columns]
    data_cols = [str(c) for c in piv.columns]
    raw = out[[str(r) for r in rows]].copy()
    for c, cs in zip(piv.columns, data_cols):
        raw[cs] = piv[c].to_numpy() * scale
        for k in ("low", "high", "SD"):
            if k in extra:
                raw[f"{cs} {k}"] = extra[k][c].to_numpy() * scale
    visible = raw[[*[str(r) for r in rows], *data_cols]].copy().astype({c: object for c in data_cols})
    nan = [np.nan] * len(raw)
    for cs in data_cols:
        visible[cs] = list(zip(raw[cs], raw[f"{cs} low"] if "low" in extra else nan,
                               raw[f"{cs} high"] if "high" in extra else nan,
                               raw[f"{cs} SD"] if "SD" in extra else nan))

    def num(v: float) -> str:
        return format_number(float(v), digits) if not is_missing(v) else MISSING

    def fmt(v: Any) -> str:
        mv, lv, hv, sv = v
        if is_missing(mv):
            return MISSING
        txt = num(mv)
        if not is_missing(lv) and not is_missing(hv):
            txt += f" [{num(lv)}, {num(hv)}]"
        if not is_missing(sv):
            txt += f" ± {num(sv)}"
        return txt

    what = ("mean" if "SD" in extra else "accuracy") + (" [95% CI]" if "low" in extra else "") + \
        (" ± SD over trials" if "SD" in extra else "") + (" (percent)" if percent else "")
    return PairTable(visible, caption=caption, label=label, formats={c: fmt for c in data_cols}, stub=len(rows),
                      raw=raw, notes=(f"Cells: {what}.", *notes) if extra else tuple(notes))
