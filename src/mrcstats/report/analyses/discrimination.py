"""``discrimination``: the discriminatory power P_d per cluster (seed 003 §3.4), histogram and cutoff table."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from mrcstats.errors import InputError
from mrcstats.report import figures as F
from mrcstats.report.analyses import _tests as T
from mrcstats.report.analyses.base import (
    Analysis,
    AnalysisSpec,
    Context,
    Key,
    Output,
    compare_published,
    words,
)
from mrcstats.report.format import typographic_minus
from mrcstats.report.tables import MISSING, Table, format_number, is_missing, result_dict
from mrcstats.stats.discrimination import discrimination


def _cutoff_frame(cut: Any) -> pd.DataFrame:
    """Our cutoff table keyed like the paper's: rows = model names, "Grand Mean", "Cluster count", "Item count";
    columns = the cutoffs (``"0"``, ``"5"``, ...)."""
    rows = {}
    for r in cut.to_dict()["cutoffs"]:
        col = f"{float(r['cutoff']):g}"
        for m, v in dict(r.get("accuracy") or {}).items():
            rows.setdefault(str(m), {})[col] = v
        rows.setdefault("Grand Mean", {})[col] = r.get("grand_mean")
        rows.setdefault("Cluster count", {})[col] = r.get("clusters")
        rows.setdefault("Item count", {})[col] = r.get("items")
    return pd.DataFrame(rows).T.astype(float)


class Discrimination(Analysis):
    type = "discrimination"
    title = "Discrimination"
    keys: ClassVar[dict[str, Key]] = {
            "cutoffs": Key((list,), None, help="P_d cutoffs; default 0 and the P_d quartiles, as the CLI"),
            "epsilon": Key((float, int), 1e-10),
            "cluster": Key((str,), "cluster"), "model": Key((str,), "model"), "bootstrap": Key((int,), 0),
            "bins": Key((int,), 30), "wh_column": Key((str,), "wh_word"), "n": Key((int,), 100)}

    def check(self, opts: dict[str, Any], err: Any, base: Any) -> None:
        if opts["cutoffs"] is None:
            return
        try:
            opts["cutoffs"] = [float(c) for c in opts["cutoffs"]]
        except (TypeError, ValueError):
            raise err("cutoffs", f"expected a list of numbers, got {opts['cutoffs']!r}") from None

    def run(self, ctx: Context, a: AnalysisSpec) -> Output:
        ddata = ctx.rows(a)
        res = discrimination(ddata, cluster=a.get("cluster"), model=a.get("model"), epsilon=float(a.get("epsilon")))
        pdv = res.pd.astype(float)
        cutoffs = a.get("cutoffs") if a.get("cutoffs") is not None else res.default_cutoffs()
        cut = res.cutoffs(cutoffs, bootstrap=a.get("bootstrap"), seed=ctx.seed)
        out = Output("Discrimination: P_d")
        out.figure(F.pd_histogram(pdv, bins=a.get("bins"), cutoffs=[c for c in cutoffs if c > 0]),
                   "pd_histogram", f"Distribution of the discriminatory power P_d over {len(pdv):,} clusters "
                   "(seed 003 Fig. 4); dotted lines: cutoffs.")
        out.table(pd_cutoff_table(cut, caption="Accuracy of each model on the clusters with P_d above each "
                                  "cutoff, grand mean, counts and Kendall's τ against the full ranking "
                                  "(seed 003 Table 5)" + (f"; 95% percentile intervals from {a.get('bootstrap')} "
                                  "cluster-bootstrap resamples" if a.get("bootstrap") else "") + ".",
                                  label="pd_cutoffs"))
        if a.get("published"):
            ours = _cutoff_frame(cut)
            compare_published(out, "P_d cutoff table (seed 003 Table 5)", ours, a.get("published"),
                              a.get("tolerance"), "pd_cutoffs", unit="columns: P_d cutoff",
                              not_compared=a.get("not_compared"))
        out.headline["pd"] = {"clusters": len(pdv), "mean": float(pdv.mean()) if len(pdv) else None,
                              "max": float(pdv.max()) if len(pdv) else None,
                              "cutoffs": [dict(r) for r in cut.to_dict()["cutoffs"]]}
        for why, k in dict(res.skipped).items():
            out.note(f"{k} {'cluster' if k == 1 else 'clusters'} without P_d: {why}.")
        wh = a.get("wh_column")
        if wh and wh in ddata.columns and len(pdv) >= 4:
            k = min(a.get("n"), len(pdv) // 2)
            s = pdv.sort_values(kind="mergesort")
            groups = {"Highest P_d": list(s.index[-k:][::-1]), "Lowest P_d": list(s.index[:k])}
            data = ddata if a.get("cluster") == "cluster" else ddata.assign(cluster=ddata[a.get("cluster")])
            T.wh_table(out, ctx.seed, data, groups, wh, True, 2000, "wh_pd",
                       f"{words(wh).capitalize()} of the items in the {k} most and {k} least discriminative clusters "
                       "(seed 003 Table 3, lower half); last row: ratio of column shares.",
                       f"{words(wh)}: most vs least discriminative clusters")
        out.methods += [
            (f"P_d per {a.get('cluster')} (seed 003 eq. 4-7): p_k = accuracy of model k on the cluster (invalid = not "
             f"correct), clipped to [ε, 1 − ε] with ε = {float(a.get('epsilon')):g}; symmetrised Bernoulli KL "
             "divergence (natural log) averaged over model pairs."),
            "Cutoff table: clusters with P_d strictly above the cutoff (a cluster on which every model scores alike has "
            "P_d = 0 and drops out already at the cutoff 0), their items, each model's accuracy and the grand mean "
            f"(cutoffs {', '.join(f'{c:g}' for c in cutoffs)}"
            + ("" if a.get("cutoffs") is not None else ": 0 and the quartiles of P_d, the default of the command "
               "line") + ")"
            + (f"; cluster-bootstrap intervals with B = {a.get('bootstrap')}." if a.get("bootstrap") else ".")]
        return out


def pd_cutoff_table(frame: pd.DataFrame | Any, caption: str = "", label: str = "pd_cutoffs",
                    labels: Mapping[str, str] | None = None) -> Table:
    """Seed 003 Table 5: accuracy of each model on the clusters with P_d above each cutoff.

    ``frame``: the discrimination helper's cutoff table — a DataFrame with a
    ``cutoff`` column, ``clusters`` and ``items`` counts, ``grand_mean``, optionally
    ``kendall_tau``, and one accuracy per model either as columns ``acc_<model>`` /
    ``accuracy.<model>`` or as an ``accuracy`` column of mappings — or a result
    object whose ``cutoff_frame()``/``cutoffs_frame()``/``to_frame()`` returns it.
    Models become rows and cutoffs columns, as in the seed.
    """
    if not isinstance(frame, pd.DataFrame):
        for meth in ("cutoff_frame", "cutoffs_frame", "cutoff_table"):
            if hasattr(frame, meth):
                frame = getattr(frame, meth)()
                break
        else:
            d = result_dict(frame)
            if "cutoffs" in d:
                frame = pd.DataFrame(d["cutoffs"])
            else:
                frame = frame.to_frame()
    f = frame.copy()
    if "cutoff" not in f.columns:
        raise InputError(f"pd_cutoff_table: no 'cutoff' column among {list(f.columns)}")
    acc: dict[str, list[float]] = {}
    if "accuracy" in f.columns and isinstance(f["accuracy"].iloc[0], Mapping):
        models = sorted({m for d in f["accuracy"] for m in d})
        for m in models:
            acc[m] = [d.get(m, np.nan) for d in f["accuracy"]]
    else:
        for c in f.columns:
            for pre in ("acc_", "accuracy.", "accuracy_"):
                if str(c).startswith(pre):
                    acc[str(c)[len(pre):]] = list(f[c])
    names = dict(labels or {})
    cut_cols = [f"P_d > {format_number(c, 0) if float(c).is_integer() else c}" for c in f["cutoff"]]
    cis: dict[str, list[Any]] = {}
    if "accuracy_ci" in f.columns:
        for m in acc:
            vals_ci = [(d or {}).get(m) if isinstance(d, Mapping) else None for d in f["accuracy_ci"]]
            if any(v is not None for v in vals_ci):
                cis[m] = [f"[{v[0]:.2f}, {v[1]:.2f}]" if v is not None else np.nan for v in vals_ci]
    rows = []
    for m, vals in acc.items():
        rows.append([names.get(m, m), *vals])
        if m in cis:
            rows.append([f"{names.get(m, m)} 95% CI", *cis[m]])
    if "grand_mean" in f.columns:
        rows.append(["Grand Mean", *f["grand_mean"]])
    for col, name in (("clusters", "Cluster count"), ("items", "Item count"), ("kendall_tau", "Kendall's τ")):
        if col in f.columns:
            vals = list(f[col])
            if col != "kendall_tau":
                vals = [int(v) for v in vals]
            rows.append([name, *vals])
    df = pd.DataFrame(rows, columns=["", *cut_cols], dtype=object)

    def fmt(v: Any) -> str:
        if is_missing(v):
            return MISSING
        if isinstance(v, int | np.integer) and not isinstance(v, bool):
            return f"{int(v):,}"
        if isinstance(v, str):
            return v
        return typographic_minus(f"{float(v):.2f}")

    return Table(df, caption=caption, label=label, formats={c: fmt for c in cut_cols})
