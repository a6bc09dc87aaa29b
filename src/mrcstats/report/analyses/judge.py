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
from mrcstats.stats.judge import (
    COMBINE,
    HUMAN_CI_RULE,
    PPI_METHODS,
    PPI_RULES,
    TARGETS,
    calibration,
    judge,
    panel_scores,
)

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
        "ppi": Key((str,), "crossfit", choices=PPI_METHODS, help="the PPI weight: crossfit (PPI++ with a "
                                                                   "cross-fitted lambda), tuned (PPI++) or plain"),
        "combine": Key((str, _NONE), None, choices=COMBINE, help="the panel's score: majority or mean"),
        "bootstrap": Key((int,), 1000, help="resamples of the labelled rows for the bootstrap CIs"),
        "item": Key((str, _NONE), "item", help="log column naming the item: the judge's bias per model (GLMMs with "
                                               "item random intercepts); null: not fitted"),
        "bins": Key((int,), 10, help="calibration figure: bins of the judge's score (each distinct score its own "
                                     "bin when there are at most this many)"),
    }

    def check(self, opts: dict[str, Any], err: Any, base: Any) -> None:
        j = opts.get("judge")
        if isinstance(j, list) and (not j or not all(isinstance(x, str) for x in j)):
            raise err("judge", "give the judge's column, or a list of columns (one per judge)")

    def run(self, ctx: Context, a: AnalysisSpec) -> Output:
        data = ctx.rows(a)
        judges = a.get("judge")
        res = judge(data, human=a.get("human"), judge=judges if isinstance(judges, str) else list(judges),
                    model=a.get("model"), level=a.get("level"), target=a.get("target"), ppi=a.get("ppi"),
                    combine=a.get("combine"), bootstrap=a.get("bootstrap"), seed=ctx.seed, item=a.get("item"),
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
        self._calibration(out, a, data, res, judges if isinstance(judges, list) else [judges], conf)
        # PPI
        parts = [(r.judge, r.table) for r in pan.per_judge] if pan else []
        parts.append((f"panel ({pan.combine})" if pan else res.judge, res.table))
        ppi = pd.concat([tb.assign(judge=j) for j, tb in parts], ignore_index=True)
        p = pd.DataFrame({
            "Model": ppi["model"], "Judge": ppi["judge"], "N": ppi["n"], "Labelled": ppi["n_labelled"],
            "Judge only": ppi["judge_mean"], "Judge CI": [_ci(lo, hi) for lo, hi in zip(ppi.judge_low, ppi.judge_high)],
            "Human only": ppi["human_mean"], "Human CI": [_ci(lo, hi) for lo, hi in zip(ppi.human_low, ppi.human_high)],
            "PPI": ppi["ppi_mean"], "PPI CI": [_ci(lo, hi) for lo, hi in zip(ppi.ppi_low, ppi.ppi_high)],
            "PPI rule": ppi["ppi_method"]})
        p = p.sort_values(["Model"], kind="stable")
        out.table(Table(p, caption=f"Each model's mean score on the human scale: the judge's mean over all rows "
                        f"(biased when the judge is), the humans' over the labelled rows, and the prediction-powered "
                        f"mean ({PPI_RULES[res.ppi]}; {HUMAN_CI_RULE}; target: {res.target}) with {conf} CIs"
                        + (", for each judge and for the panel." if pan else "."), label=f"a{a.index}_judge_ppi",
                        stub=2, formats={"N": "{:.0f}", "Labelled": "{:.0f}", "Judge only": "{:.3f}",
                                         "Human only": "{:.3f}", "PPI": "{:.3f}"}))
        self._bias(out, a, res, conf)
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
        out.headline["judge"] = {"judge": res.judge, "ppi": res.ppi, "models": res.table[["model", "ppi_mean", "ppi_low",
                                                                          "ppi_high"]].to_dict(orient="records")}
        out.methods.append(
            f"LLM judge against human labels{filter_note(a.get('filter'))}: agreement on the rows both scored "
            "(Cohen's κ with the Fleiss–Cohen–Everitt SE, Krippendorff's α and Gwet's AC1 with Gwet's SEs); each "
            "model's prediction-powered mean (Angelopoulos et al. 2023): the judge's mean over all rows plus the mean "
            f"human − judge difference on the labelled rows weighted by λ, rule {PPI_RULES[res.ppi]} (PPI++: "
            "Angelopoulos, Duchi & Zrnic 2023; cross-fitting: Zrnic & Candès 2024); the judge's bias per model as binomial GLMMs of "
            "over-rating and disagreement on the model with item random intercepts (Laplace, as lme4's glmer) and "
            "their likelihood-ratio tests"
            + ("; for several judges the correlation of their errors (judge − human) on the labelled rows with "
               "percentile bootstrap CIs over the rows, and the effective number of independent judges "
               "k / (1 + (k − 1)ρ̄) (Kish's design effect; ρ̄ the mean pairwise correlation)." if pan else "."))
        return out

    @staticmethod
    def _calibration(out: Output, a: AnalysisSpec, data: pd.DataFrame, res: Any, judges: list, conf: str) -> None:
        """The confusion matrix (a judge with a few discrete scores) or the binned calibration figure of the judge
        (the panel's score for several judges) against the humans on the labelled rows."""
        human = res.human
        y = pd.to_numeric(data[human], errors="coerce").to_numpy(dtype=float)
        fs = np.column_stack([pd.to_numeric(data[j], errors="coerce").to_numpy(dtype=float) for j in judges])
        f = fs[:, 0] if len(judges) == 1 else panel_scores(fs, res.panel.combine)[0]
        lab = ~np.isnan(y)
        who = res.judge if len(judges) == 1 else f"the panel ({res.panel.combine} of the judges)"
        vals = np.unique(np.concatenate([f[lab], y[lab]]))
        if len(vals) <= 7 and res.agreement.level in ("nominal", "ordinal"):
            tab = pd.crosstab(pd.Categorical(y[lab], categories=vals), pd.Categorical(f[lab], categories=vals),
                              dropna=False)
            names = [f"{v:g}" for v in vals]
            tab.index, tab.columns = names, names
            out.figure(F.confusion_matrix_plot(tab, xlabel=f"judge: {who}", ylabel=f"human: {human}"),
                       f"a{a.index}_judge_confusion",
                       f"Human label (rows) against the score of {who} (columns) on the {int(lab.sum()):,} labelled "
                       "rows; counts in the cells (the diagonal: agreement).")
            return
        cal = calibration(f[lab], y[lab], bins=a.get("bins"), alpha=res.alpha)
        out.figure(F.calibration_plot(cal, xlabel=f"judge score: {who} (bin mean)", ylabel=f"human label '{human}' (mean, "
                                      f"{conf} CI)"), f"a{a.index}_judge_calibration",
                   f"Calibration of {who} on the {int(lab.sum()):,} labelled rows: the judge's score cut into "
                   f"{len(cal)} bins, per bin the mean judge score against the mean human score with its {conf} CI "
                   "(Wilson for 0/1 labels, else normal); marker size by the bin's rows. A calibrated judge's points "
                   "lie on the dashed diagonal.")

    @staticmethod
    def _bias(out: Output, a: AnalysisSpec, res: Any, conf: str) -> None:
        """The judge's bias per model: each judge's (and the panel's) GLMM rates and the LRTs of no model effect."""
        pan = res.panel
        parts = [(r.judge, r.bias) for r in pan.per_judge] if pan else []
        parts.append((f"panel ({pan.combine})" if pan else res.judge, res.bias))
        parts = [(j, b) for j, b in parts if b is not None]
        if not parts:
            return
        words = {"over": "over-rating", "disagree": "disagreement"}
        rows, tests = [], []
        for j, b in parts:
            for r in b.table.itertuples(index=False):
                rows.append({"Judge": j, "Outcome": words[r.outcome], "Model": r.model,
                             "Observed": f"{r.count}/{r.n}" if r.n else "0/0", "Rate": r.rate, "GLMM": r.marginal,
                             "CI": _ci(r.marginal_low, r.marginal_high)})
            for t in b.tests.itertuples(index=False):
                tests.append(f"{j}, {words[t.outcome]}: χ²({t.df}) = {_n(t.chisq)}, {_p(t.p)}")
        item = parts[0][1].item
        shifts = [(j, b) for j, b in parts if b.shift is not None]
        if shifts:
            srows, stests = [], []
            for j, b in shifts:
                for r in b.shift.itertuples(index=False):
                    srows.append({"Judge": j, "Model": r.model, "Rows": r.n, "Observed": r.mean_diff,
                                  "LMM": r.estimate, "CI": _ci(r.ci_low, r.ci_high)})
                t = b.shift_test or {}
                stests.append(f"{j}: F({t.get('num_df')}, {_n(t.get('den_df', math.nan), 1)}) = "
                              f"{_n(t.get('F', math.nan))}, {_p(t.get('p', math.nan))}")
            out.table(Table(pd.DataFrame(srows), caption=(
                f"The judge's bias per model on the score's scale: judge − human on the labelled rows, observed mean "
                f"and the model's shift at an average item from the LMM (judge − human) ~ 0 + model + (1 | {item}) "
                f"(REML) with {conf} t-intervals (Satterthwaite df). F tests of no model effect: "
                + "; ".join(stests) + "."), label=f"a{a.index}_judge_shift", stub=2,
                formats={"Rows": "{:.0f}", "Observed": "{:.3f}", "LMM": "{:.3f}"}))
        if not rows:
            for _, b in parts:
                for nt in b.notes:
                    out.note(nt)
            return
        out.table(Table(pd.DataFrame(rows), caption=(
            f"The judge's bias per model on the labelled rows: over-rating (judge above the human, on the rows where "
            f"it can be: for 0/1 labels its false-positive rate) and disagreement (judge ≠ human); observed counts, "
            f"and the model's marginal rate over the items from a binomial GLMM outcome ~ 0 + model + (1 | {item}) "
            f"with {conf} Wald CIs. Likelihood-ratio tests of no model effect: " + "; ".join(tests) + "."),
            label=f"a{a.index}_judge_bias", stub=3, formats={"Rate": "{:.3f}", "GLMM": "{:.3f}"}))
        for _, b in parts:
            for nt in b.notes:
                out.note(nt)
        out.headline["judge_bias"] = {j: b.tests[["outcome", "chisq", "df", "p"]].to_dict(orient="records")
                                      for j, b in parts}


def _p(p: float) -> str:
    from mrcstats.report.format import format_p

    t = format_p(p)
    return f"p {t}" if t[:1] in "<>" else f"p = {t}"
