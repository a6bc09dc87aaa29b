"""``judge``: an LLM judge (or a panel of judges) against human labels -- agreement, prediction-powered means, and
the judges' error correlation with the effective number of independent judges (:mod:`mrcstats.stats.judge`)."""
from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from mrcstats.report import figures as F
from mrcstats.report.analyses.base import Analysis, AnalysisSpec, Context, Key, Output, filter_note
from mrcstats.report.tables import Table
from mrcstats.stats.agreement import LEVELS
from mrcstats.stats.judge import COMBINE, TARGETS, judge

_NONE = type(None)


def _ci(lo: float, hi: float) -> str:
    return f"[{lo:.3f}, {hi:.3f}]" if math.isfinite(lo) and math.isfinite(hi) else "NA"


def _n(v: float, d: int = 2) -> str:
    return f"{v:.{d}f}" if math.isfinite(v) else ("∞" if v == math.inf else "NA")


class Judge(Analysis):
    type = "judge"
    title = "LLM judge against human labels"
    keys: ClassVar[dict[str, Key]] = {
        "human": Key((str,), None, required=True, help="log column of the human labels (empty = unlabelled)"),
        "judge": Key((str, list), None, required=True, help="log column of the judge's scores, or a list of them "
                                                            "(a panel of judges)"),
        "model": Key((str,), "model", help="log column naming the model"),
        "level": Key((str,), "nominal", choices=LEVELS, help="level of measurement of the labels"),
        "target": Key((str,), "population", choices=TARGETS),
        "tune": Key((bool,), False, help="power-tuned PPI++"),
        "combine": Key((str, _NONE), None, choices=COMBINE, help="the panel's score: majority or mean"),
        "bootstrap": Key((int,), 1000, help="resamples of the labelled rows for the bootstrap CIs"),
    }

    def check(self, opts: dict[str, Any], err: Any, base: Any) -> None:
        j = opts.get("judge")
        if isinstance(j, list) and (not j or not all(isinstance(x, str) for x in j)):
            raise err("judge", "give the judge's column, or a list of columns (one per judge)")

    def run(self, ctx: Context, a: AnalysisSpec) -> Output:
        data = ctx.rows(a)
        judges = a.get("judge")
        res = judge(data, human=a.get("human"), judge=judges if isinstance(judges, str) else list(judges),
                    model=a.get("model"), level=a.get("level"), target=a.get("target"), tune=a.get("tune"),
                    combine=a.get("combine"), bootstrap=a.get("bootstrap"), seed=ctx.seed,
                    source=f"{a.where} (judge)")
        out = Output(a.get("title") or self.title)
        pan = res.panel
        conf = f"{100 * (1 - res.alpha):g}%"
        n_lab = int(res.table["n_labelled"].sum())
        out.text(f"{int(res.table['n'].sum()):,} responses scored by "
                 + (f"{len(pan.judges)} judges ({', '.join(pan.judges)}; the panel's score is their {pan.combine})"
                    if pan else f"the judge {res.judge!r}")
                 + f", {n_lab:,} of them also labelled by humans ({res.human!r}).")
        # agreement
        agr = pan.agreement_table(res.agreement, name=f"panel ({pan.combine})") if pan else \
            res.agreement.table.assign(judge=res.judge)[["judge", *res.agreement.table.columns]]
        t = agr[["judge", "statistic", "weights", "estimate", "se", "ci_low", "ci_high", "n_items"]].rename(columns={
            "judge": "Judge", "statistic": "Statistic", "weights": "Weights", "estimate": "Estimate", "se": "SE",
            "ci_low": "CI low", "ci_high": "CI high", "n_items": "Items"})
        out.table(Table(t, caption=f"Agreement of each judge{' and of the panel' if pan else ''} with the human labels "
                        f"on the labelled rows ({res.agreement.level} level), with SEs and {conf} CIs (analytic where "
                        "the literature gives one, else a bootstrap over the rows).",
                        label=f"a{a.index}_judge_agreement", stub=3,
                        formats={"Estimate": "{:.3f}", "SE": "{:.3f}", "CI low": "{:.3f}", "CI high": "{:.3f}",
                                 "Items": "{:.0f}"}))
        # PPI
        parts = [(r.judge, r.table) for r in pan.per_judge] if pan else []
        parts.append((f"panel ({pan.combine})" if pan else res.judge, res.table))
        ppi = pd.concat([tb.assign(judge=j) for j, tb in parts], ignore_index=True)
        p = pd.DataFrame({
            "Model": ppi["model"], "Judge": ppi["judge"], "N": ppi["n"], "Labelled": ppi["n_labelled"],
            "Judge only": ppi["judge_mean"], "Judge CI": [_ci(lo, hi) for lo, hi in zip(ppi.judge_low, ppi.judge_high)],
            "Human only": ppi["human_mean"], "Human CI": [_ci(lo, hi) for lo, hi in zip(ppi.human_low, ppi.human_high)],
            "PPI": ppi["ppi_mean"], "PPI CI": [_ci(lo, hi) for lo, hi in zip(ppi.ppi_low, ppi.ppi_high)]})
        p = p.sort_values(["Model"], kind="stable")
        out.table(Table(p, caption=f"Each model's mean score on the human scale: the judge's mean over all rows "
                        f"(biased when the judge is), the humans' over the labelled rows, and the prediction-powered "
                        f"mean (PPI{'++' if res.tune else ''}; target: {res.target}) with {conf} CIs"
                        + (", for each judge and for the panel." if pan else "."), label=f"a{a.index}_judge_ppi",
                        stub=2, formats={"N": "{:.0f}", "Labelled": "{:.0f}", "Judge only": "{:.3f}",
                                         "Human only": "{:.3f}", "PPI": "{:.3f}"}))
        if pan:
            k = len(pan.judges)
            out.text(f"The judges' errors (judge − human) on the {pan.n_labelled:,} labelled rows have a mean pairwise "
                     f"correlation of {_n(pan.mean_rho, 3)} {_ci(pan.mean_rho_low, pan.mean_rho_high)}: the {k} judges "
                     f"are worth k / (1 + (k − 1)ρ̄) = {_n(pan.k_eff)} independent judges "
                     f"[{_n(pan.k_eff_low)}, {_n(pan.k_eff_high)}] ({conf} bootstrap CIs over the rows, "
                     f"B = {pan.bootstrap}).")
            v = pan.correlation.to_numpy(dtype=float, copy=True)
            np.fill_diagonal(v, np.nan)
            m = pd.DataFrame(v, index=pan.correlation.index, columns=pan.correlation.columns)
            out.figure(F.pairwise_matrix_plot(m, percent=False, value_label="error correlation (Pearson)", vmax=1.0),
                       f"a{a.index}_judge_correlation",
                       f"Correlation of the judges' errors (judge − human) on the {pan.n_labelled:,} labelled rows. "
                       "Judges whose errors correlate add little information to each other.")
            pr = pan.pairs.rename(columns={"judge_a": "Judge", "judge_b": "With", "r": "r", "ci_low": "CI low",
                                           "ci_high": "CI high", "n": "Rows"})
            out.table(Table(pr, caption=f"Pairwise error correlations with {conf} bootstrap CIs (B = {pan.bootstrap}, "
                            f"seed {ctx.seed}).", label=f"a{a.index}_judge_pairs", stub=2,
                            formats={"r": "{:.3f}", "CI low": "{:.3f}", "CI high": "{:.3f}", "Rows": "{:.0f}"}))
            out.headline["judge_panel"] = {"judges": list(pan.judges), "mean_rho": pan.mean_rho, "k_eff": pan.k_eff,
                                           "k_eff_ci": [pan.k_eff_low, pan.k_eff_high]}
        for nt in res.notes:
            out.note(nt)
        out.headline["judge"] = {"judge": res.judge, "models": res.table[["model", "ppi_mean", "ppi_low",
                                                                          "ppi_high"]].to_dict(orient="records")}
        out.methods.append(
            f"LLM judge against human labels{filter_note(a.get('filter'))}: agreement on the rows both scored "
            "(Cohen's κ with the Fleiss–Cohen–Everitt SE, Krippendorff's α and Gwet's AC1 with Gwet's SEs); each "
            "model's prediction-powered mean (Angelopoulos et al. 2023): the judge's mean over all rows plus the mean "
            "human − judge difference on the labelled rows, normal CI"
            + ("; for several judges the correlation of their errors (judge − human) on the labelled rows with "
               "percentile bootstrap CIs over the rows, and the effective number of independent judges "
               "k / (1 + (k − 1)ρ̄) (Kish's design effect; ρ̄ the mean pairwise correlation)." if pan else "."))
        return out
