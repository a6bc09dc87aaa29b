"""``probability``: P(correct) per factor level at kσ of a feature from given (published) fixed effects."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from mrcstats.report.analyses.base import Analysis, AnalysisSpec, Context, Key, Output, compare_published
from mrcstats.report.format import typographic_minus
from mrcstats.report.tables import Table, format_number


class Probability(Analysis):
    type = "probability"
    title = "Probabilities"
    keys: ClassVar[dict[str, Key]] = {"fixef": Key((dict,), None, required=True), "feature": Key((str,), None, required=True),
            "factor": Key((str,), None, required=True), "levels": Key((list,), None, required=True),
            "coding": Key((str,), "sum", choices=("sum", "treatment")), "sigmas": Key((list,), [-2, 0, 2, 4]),
            "raw": Key((str,), None), "raw_mean": Key((float, int), None), "raw_sd": Key((float, int), None),
            "label": Key((str,), None), "labels": Key((dict,), {})}

    def check(self, opts: dict[str, Any], err: Any, base: Any) -> None:
        try:
            opts["fixef"] = {str(k): float(v) for k, v in opts["fixef"].items()}
        except (TypeError, ValueError):
            raise err("fixef", "expected a mapping of term names to numbers") from None

    def run(self, ctx: Context, a: AnalysisSpec) -> Output:
        from mrcstats.errors import InputError

        rm, rsd = a.get("raw_mean"), a.get("raw_sd")
        raw = a.get("raw")
        if raw:
            if raw not in ctx.data.columns:
                raise InputError(f"raw: no column {raw!r} in the data")
            vals = ctx.data.drop_duplicates("item")[raw].astype(float)
            rm, rsd = float(vals.mean()), float(vals.std(ddof=1))
        label = a.get("label") or a.get("feature")
        title = a.get("title") or f"Predicted probabilities at {label} from given fixed effects"
        t = probability_table(a.get("fixef"), a.get("feature"), a.get("factor"), [str(v) for v in a.get("levels")],
                              coding=a.get("coding"), sigmas=a.get("sigmas"), raw_mean=rm, raw_sd=rsd,
                              feature_label=label, labels=a.get("labels"),
                              caption=f"{title}: P(correct) per {a.get('factor')} at "
                                      f"{', '.join(format_number(float(x), 0) for x in a.get('sigmas'))} SD of {label}"
                                      + (f" (raw {raw} in brackets)" if raw else "") + ".",
                              label=f"a{a.index}_probability")
        out = Output(title)
        out.table(t)
        if a.get("published"):
            pf = t.to_frame()
            ours = pf.set_index(pf.columns[0])
            ours.columns = [f"{float(x):g}" for x in a.get("sigmas")]
            ours.index = ours.index.astype(str)
            compare_published(out, title, ours, a.get("published"), a.get("tolerance"), f"a{a.index}_probability",
                              unit="columns: SD from the mean",
                              not_compared=a.get("not_compared"))
        out.headline.setdefault("probability", {})[title] = t.to_frame().to_dict(orient="records")
        out.methods.append(
            f"P(correct) = logistic(β0 + Σ_j C[m, j] β_j + k·(β_x + Σ_j C[m, j] β_x:j)) from the given fixed effects "
            f"with contr.{a.get('coding')} contrasts for {a.get('factor')} (levels "
            f"{', '.join(map(str, a.get('levels')))}); Grand Mean = logistic of the mean log-odds over levels.")
        return out


def _sigma_label(s: float) -> str:
    s = float(s)
    txt = f"{s:g}"
    return typographic_minus(txt) + "σ"


def probability_table(fixef: Mapping[str, float] | Any, feature: str, factor: str, levels: Sequence[str],
                      coding: str = "sum", sigmas: Sequence[float] = (-2, 0, 2, 4),
                      raw_mean: float | None = None, raw_sd: float | None = None, feature_label: str | None = None,
                      labels: Mapping[str, str] | None = None, caption: str = "", label: str = "sigma",
                      digits: int = 2) -> Table:
    """Probability-at-σ table (seed 003 Tables 1-2) from the fixed effects of a fitted GLMM.

    ``fixef`` may be the mapping or a result with ``.fixef``. With ``raw_mean`` and
    ``raw_sd`` each column header also shows the raw feature value, ``kσ (mean + k·sd)``.
    ``labels`` renames the factor levels for display.
    """
    from mrcstats.models.predict import probability_frame

    if not isinstance(fixef, Mapping):
        fixef = dict(fixef.fixef)
    pf = probability_frame(fixef, feature, factor, levels, coding, sigmas)
    names = dict(labels or {})
    first = feature_label or feature
    pf[factor] = [names.get(v, v) for v in pf[factor]]
    cols = {factor: first}
    for s in sigmas:
        h = _sigma_label(s)
        if raw_mean is not None and raw_sd is not None:
            h += f" ({typographic_minus(f'{raw_mean + float(s) * raw_sd:.{digits}f}')})"
        cols[float(s)] = h
    pf = pf.rename(columns=cols)
    fmts = {h: f"{{:.{digits}f}}" for k, h in cols.items() if k != factor}
    note = (f"Population-level predictions from the fixed effects ({coding} contrasts for {factor}); "
            "random effects at zero.")
    return Table(pf, caption=caption, label=label, formats=fmts, notes=(note,))
