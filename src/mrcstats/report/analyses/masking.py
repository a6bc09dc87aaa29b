"""``masking``: accuracy against masking rate per condition and the NA/EA/KI indicators (seed 000)."""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from mrcstats.errors import InputError
from mrcstats.io import read_log
from mrcstats.report import figures as F
from mrcstats.report.analyses.base import (
    Analysis,
    AnalysisSpec,
    Context,
    Key,
    NotReproduced,
    Output,
    compare_published,
)
from mrcstats.report.tables import Formatter, Table, is_missing
from mrcstats.stats.masking import masking_indicators


class Masking(Analysis):
    type = "masking"
    title = "Masking"
    keys: ClassVar[dict[str, Key]] = {"baseline": Key((str,), None, help="a baseline log (UQA in seed 000) for EA and KI"),
            "acc0": Key((float, int), None, help="mask-free accuracy (fraction) to normalise by"),
            "models": Key((list,), None),
            "cluster": Key((str,), "cluster", help="column the interval is clustered on (item when absent)")}

    def check(self, opts: dict[str, Any], err: Any, base: Path) -> None:
        if opts.get("baseline"):
            bp = Path(opts["baseline"])
            bp = bp if bp.is_absolute() else base / bp
            if not bp.exists():
                raise err("baseline", f"{bp} does not exist")
            opts["baseline"] = str(bp)
        if opts.get("acc0") is not None and not 0 < float(opts["acc0"]) <= 1:
            raise err("acc0", f"a fraction in (0, 1] (0.8984 for 89.84 %), got {opts['acc0']}")

    def run(self, ctx: Context, a: AnalysisSpec) -> Output:
        log = ctx.rows(a)
        if "masking_rate" not in log.columns or log["masking_rate"].isna().all():
            raise InputError("the log has no masking rates (column masking_rate); a masking analysis needs them")
        if a.get("models"):
            log = log[log["model"].astype(str).isin(a.get("models"))]
        base = read_log(a.get("baseline")) if a.get("baseline") else None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = masking_indicators(log, baseline=base, acc0=a.get("acc0"), cluster=a.get("cluster"))
        acc = res.accuracy.to_frame()
        out = Output("Masking: accuracy against masking rate")
        models = sorted(acc["model"].unique())
        for start in range(0, len(models), 3):
            chunk = models[start:start + 3]
            wide = len(chunk) > 1
            fig, axes = F.new_figure("page" if wide else "column", 0.36 if wide else 0.75, 1, len(chunk),
                                     sharey=True, squeeze=False)
            for ax, m in zip(axes[0], chunk):
                F.masking_curves(acc[acc["model"] == m], ax=ax, title=str(m))
            ntr = int(acc[acc["model"].isin(chunk)]["n_trials"].max())
            out.figure(fig, f"masking_curves_{start // 3 + 1}",
                       f"Accuracy of {', '.join(chunk)} against the masking rate per masking condition: mean over "
                       f"{ntr} {'trials' if ntr != 1 else 'trial'}; band = {res.accuracy.ci_words()}, the interval "
                       "of the accuracy tables (seed 000 Figs. 2-6).")
        av = res.averages[res.averages["kind"] == "weighted"]
        mt = masking_indicator_table(av, caption="MR-weighted average accuracy (percent) per masking condition and "
                                     "the NA, EA and KI indicators of regular masking (seed 000 Table 3)"
                                     + ("" if res.has_baseline else "; EA and KI need a baseline log "
                                        "(UQA in the seed) and are empty here (–)") + ".",
                                     label="masking_indicators")
        out.table(mt)
        if not res.has_baseline and a.get("published"):
            out.not_reproduced.append(NotReproduced(
                "EA and KI (seed 000 Table 3)", "they compare each masking rate with a background-knowledge "
                "baseline (the UQA outputs in the seed); no baseline log was given"))
        if a.get("published"):
            vis = mt.to_frame()
            ours = vis.set_index(vis.columns[0])
            ours.index = ours.index.astype(str)
            compare_published(out, "Masking indicators (seed 000 Table 3)", ours, a.get("published"),
                              a.get("tolerance"), "masking_indicators", unit="Acc in percent, NA as a ratio",
                              not_compared=a.get("not_compared"))
        tab = res.to_frame()
        cond = "regular" if "regular" in set(tab["condition"]) else tab["condition"].iloc[0]
        ind = tab[tab["condition"] == cond]
        cols = [c for c in ("na", "ea", "ki") if c in ind.columns and ind[c].notna().any()]
        if cols:
            out.figure(F.indicator_plot(ind, group="model", indicators=cols), "masking_indicators",
                       f"{', '.join(c.upper() for c in cols)} against the masking rate ({cond} masking; seed 000 "
                       "Fig. 7).")
        for n in res.notes:
            out.note(n)
        out.headline["masking"] = {f"{r.model}/{r.condition}": {"acc": r.acc, "na": r.na, "ea": r.ea, "ki": r.ki}
                                   for r in av.itertuples(index=False)}
        out.methods += [
            ("Acc(MR) = mean over trials of the per-trial accuracy over all items (invalid answers count as not "
             f"correct); standard deviation over trials; {res.accuracy.ci_words()}."),
            "NA_r = Acc_r / Acc_0; EA_r = Acc_0·√(NA_r·NA^U_r); KI_r = (NA^U_r − NA_r)/(1 − NA_r) (undefined where "
            "NA_r ≥ 1); MR-weighted averages ⟨X⟩ = Σ MR·X / Σ MR (seed 000 §2.3, App. D)"
            + (f"; Acc_0 = {a.get('acc0')}" if a.get("acc0") is not None else "; Acc_0 = accuracy at MR = 0") + "."]
        return out


def masking_indicator_table(frame: pd.DataFrame, caption: str = "", label: str = "masking_indicators",
                            percent: bool = True) -> Table:
    """Seed 000 Table 3: Acc per masking condition and the NA/EA/KI indicators.

    ``frame``: one row per (dataset or model, condition) with ``acc`` (MR-weighted
    average accuracy) and optionally ``na``, ``ea``, ``ki`` (e.g. the masking
    helper's weighted-average frame). Columns: one Acc per condition (strict,
    regular, partial, lenient order when present), then NA, EA and KI of the
    ``regular`` condition (the seed's choice), or of the only condition.
    """
    f = frame.copy()
    key = next((c for c in ("dataset", "model", "source") if c in f.columns), None)
    if key is None or "condition" not in f.columns or "acc" not in f.columns:
        raise InputError("masking_indicator_table: need columns (dataset|model), condition and acc; "
                         f"found {list(f.columns)}")
    order = [c for c in ("strict", "regular", "partial", "lenient") if c in set(f["condition"])]
    order += sorted(set(f["condition"]) - set(order))
    scale = 100.0 if percent else 1.0
    rows = []
    for k, g in f.groupby(key, sort=False):
        g = g.set_index("condition")
        row: dict[str, Any] = {key.capitalize(): str(k)}
        for c in order:
            row[f"Acc {c}"] = float(g["acc"].get(c, np.nan)) * scale
        ref = "regular" if "regular" in g.index else g.index[0]
        for ind, sc in (("na", 1.0), ("ea", scale), ("ki", 1.0)):
            if ind in g.columns:
                v = g.loc[ref, ind]
                row[ind.upper()] = np.nan if is_missing(v) else float(v) * sc
        rows.append(row)
    df = pd.DataFrame(rows)
    fmts: dict[str, Formatter] = {c: "{:.2f}" for c in df.columns if c.startswith("Acc") or c == "EA"}
    fmts.update({c: "{:.4f}" for c in ("NA", "KI") if c in df.columns})
    notes = ("MR-weighted averages ⟨X⟩ = Σ MR·X(MR) / Σ MR; NA, EA, KI for regular masking.",)
    return Table(df, caption=caption, label=label, formats=fmts, notes=notes)
