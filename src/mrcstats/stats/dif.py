"""Differential item functioning (DIF) between groups of models (families): Mantel-Haenszel and logistic regression.

Models are the respondents, grouped (e.g. by family); each group in turn is the *focal* group against all other
models (the *reference*; with two groups, the first in sorted order against the second). An item shows DIF when
the focal models answer it right more (or less) often than models of the same ability in the reference group -
the signature of contamination or a family-specific artefact.

**Ability.** ``total``: the model's share correct over all items (invalid answers count as not correct, as in
:func:`mrcstats.models.irt.response_matrix`); strata are ``strata`` quantile groups of ``total`` over models.
For the logistic method the matching variable is the *rest score* (the share correct on the other items,
:func:`mrcstats.stats.irt.rest_scores`).

**Mantel-Haenszel** (Holland & Thayer 1988; R ``mantelhaen.test(x)`` with ``x[, , k] = [[A, B], [C, D]]``: rows
focal / reference, columns correct / wrong, counts over trials, per stratum ``k``)::

    chisq = (|sum_k (A_k - E_k)| - 1/2)^2 / sum_k V_k,   E_k = n_1k m_1k / T_k,
    V_k = n_1k n_2k m_1k m_2k / (T_k^2 (T_k - 1))       (continuity correction as R: only if |sum (A - E)| >= 1/2)
    OR_MH = sum_k A_k D_k / T_k / sum_k B_k C_k / T_k   (> 1: easier for the focal group)

Strata with fewer than two answers are dropped (R stops on them). ``se_log_or``: the Robins-Breslow-Greenland
(1986) standard error. ``delta_mh = 2.35 ln OR_MH`` (ETS delta scale; positive = easier for the focal group;
ETS writes ``-2.35 ln alpha_MH`` with ``alpha_MH`` the reference-over-focal odds ratio: the same number).
ETS classes (Zwick 2012, ETS RR-12-08): **A** when ``|delta| < 1`` or the MH test is not significant at 5%;
**C** when ``|delta| >= 1.5`` and ``|delta|`` is significantly above 1 (``(|delta| - 1) / se_delta > 1.645``);
**B** otherwise.

**Logistic regression** (Swaminathan & Rogers 1990; R ``difR::difLogistic``'s likelihood ratios, computed
with ``glm(cbind(s, n - s) ~ ..., family = binomial)``): ``M0: 1 + rest``, ``M1: M0 + group``,
``M2: M1 + rest:group``; ``lr_uniform = D0 - D1`` (df 1), ``lr_nonuniform = D1 - D2`` (df 1),
``lr_both = D0 - D2`` (df 2), with ``D`` the residual deviances; ``beta_group`` is ``M1``'s group coefficient
(log-odds, positive = easier for the focal group than its ability predicts).

P-values of all items x focal groups are adjusted together (:func:`mrcstats.stats.multiplicity.p_adjust`).
Rows are ranked by the MH chi-square (then the logistic ``lr_both``), the largest first; ``favours`` names the
group the item is easier for (``delta_mh`` is infinite when a group has no wrong, or no right, answers).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from mrcstats._pformat import format_pval_columns
from mrcstats._repr import Result
from mrcstats._seeds import rng as seed_rng
from mrcstats._words import plural
from mrcstats.errors import InputError

__all__ = ["DifResult", "DifValidation", "dif", "dif_validate", "mantel_haenszel", "resolve_groups"]


# --------------------------------------------------------------------------- groups

def resolve_groups(log: pd.DataFrame, groups: Any, model_col: str = "model") -> dict[str, str]:
    """``{model: group}`` from a log column name, a mapping, or a two-column frame (model, group).

    Every model of the log needs a group; a model mapped to two groups is an error.
    """
    if isinstance(groups, str):
        col = groups.split("=", 1)[1] if groups.startswith(f"{model_col}=") else groups
        if col not in log.columns:
            raise InputError(f"dif: the log has no column {col!r} to group the models by (columns: "
                             f"{', '.join(map(str, log.columns[:20]))}); give --group {model_col}=COLUMN or a "
                             "mapping CSV with columns model,group")
        if col == model_col:    # every model its own group: each model against the rest
            names = log[model_col].dropna().astype(str).unique()
            return resolve_groups(log, {m: m for m in names}, model_col)
        pairs = log[[model_col, col]].dropna().astype(str).drop_duplicates()
        multi = pairs.groupby(model_col)[col].nunique()
        if (multi > 1).any():
            m = multi[multi > 1].index[0]
            raise InputError(f"dif: model {m!r} has more than one value in column {col!r} "
                             f"({', '.join(sorted(pairs.loc[pairs[model_col] == m, col]))}); a model must belong "
                             "to one group")
        mapping = dict(zip(pairs[model_col], pairs[col], strict=True))
    elif isinstance(groups, pd.DataFrame):
        if groups.shape[1] < 2:
            raise InputError("dif: a group table needs two columns: model, group")
        g = groups.iloc[:, :2].dropna().astype(str)
        dup = g.iloc[:, 0].duplicated(keep=False) & ~g.duplicated(keep=False)
        if dup.any():
            raise InputError(f"dif: model {g.iloc[:, 0][dup].iloc[0]!r} appears with two groups in the group table")
        mapping = dict(zip(g.iloc[:, 0], g.iloc[:, 1], strict=True))
    elif isinstance(groups, Mapping):
        mapping = {str(k): str(v) for k, v in groups.items()}
    else:
        raise InputError(f"dif: groups must be a log column name, a mapping model -> group or a table, "
                         f"got {type(groups).__name__}")
    models = sorted(log[model_col].astype(str).unique())
    missing = [m for m in models if m not in mapping]
    if missing:
        raise InputError(f"dif: {plural(len(missing), 'model')} have no group (e.g. {missing[0]!r}); map every model "
                         "of the log to a group")
    used = {m: mapping[m] for m in models}
    if len(set(used.values())) < 2:
        raise InputError(f"dif: all models are in one group ({next(iter(used.values()))!r}); DIF needs at least "
                         "two groups")
    return used


# --------------------------------------------------------------------------- Mantel-Haenszel

def mantel_haenszel(A: np.ndarray, B: np.ndarray, C: np.ndarray, D: np.ndarray, correct: bool = True
                    ) -> dict[str, np.ndarray]:
    """Mantel-Haenszel test and common odds ratio of ``R x K`` stacks of 2 x 2 tables (R ``mantelhaen.test``).

    ``A, B``: focal correct / wrong; ``C, D``: reference correct / wrong, per row (item) and stratum. Strata
    with ``T < 2`` are left out. Returns ``chisq, p, or, se_log_or`` (Robins-Breslow-Greenland) and
    ``strata`` (used per row).
    """
    from scipy.stats import chi2

    A, B, C, D = (np.asarray(x, float) for x in (A, B, C, D))
    T = A + B + C + D
    use = T >= 2
    Tn = np.where(use, T, 1.0)
    n1, n2, m1, m2 = A + B, C + D, A + C, B + D
    with np.errstate(invalid="ignore", divide="ignore"):
        V = np.where(use, n1 * n2 * m1 * m2 / (Tn * Tn * (Tn - 1.0)), 0.0)
    # R: DELTA <- sum(x[1, 1, ] - s.x[1, ] * s.y[1, ] / n), summed in long double as R's sum(): the continuity
    # correction switches at |DELTA| = 1/2, which balanced tables hit exactly
    terms = np.where(use, A - n1 * m1 / Tn, 0.0)
    dlt = terms.astype(np.longdouble).sum(1).astype(float)
    yates = np.where(correct & (np.abs(dlt) >= 0.5), 0.5, 0.0)
    sv = V.sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        stat = (np.abs(dlt) - yates) ** 2 / sv
        R = np.where(use, A * D / Tn, 0.0)
        S = np.where(use, B * C / Tn, 0.0)
        Pk = np.where(use, (A + D) / Tn, 0.0)
        Qk = np.where(use, (B + C) / Tn, 0.0)
        Rs, Ss = R.sum(1), S.sum(1)
        orr = Rs / Ss
        var = ((Pk * R).sum(1) / (2 * Rs ** 2) + ((Pk * S + Qk * R).sum(1)) / (2 * Rs * Ss)
               + (Qk * S).sum(1) / (2 * Ss ** 2))
    p = np.where(np.isfinite(stat), chi2.sf(np.where(np.isfinite(stat), stat, 0.0), 1), np.nan)
    return {"chisq": stat, "p": p, "or": orr, "se_log_or": np.sqrt(var), "strata": use.sum(1)}


def _ets(delta: np.ndarray, se_delta: np.ndarray, p: np.ndarray) -> np.ndarray:
    ad = np.abs(delta)
    with np.errstate(invalid="ignore"):
        c = (ad >= 1.5) & ((ad - 1.0) / se_delta > 1.645)
        a = (ad < 1.0) | ~(p < 0.05)
    out = np.where(a, "A", np.where(c, "C", "B")).astype(object)
    out[np.isnan(delta)] = None
    return out


# --------------------------------------------------------------------------- result

@dataclass(frozen=True, repr=False)
class DifResult(Result):
    """DIF of every item for every focal group (see the module docstring).

    ``table``: one row per item x focal group, ranked: ``item, group, favours, n_focal, n_reference, strata,
    mh_chisq, mh_p, mh_p_adj, mh_or, se_log_or, delta_mh, ets, lr_uniform, lr_uniform_p, lr_nonuniform,
    lr_nonuniform_p, lr_both, lr_both_p, lr_p_adj, beta_group, beta_interaction, converged``.
    ``groups``: model -> group; ``strata_edges``: the total-score cut points.
    """

    table: pd.DataFrame
    groups: Mapping[str, str]
    strata_edges: tuple[float, ...]
    adjust: str
    skipped: Mapping[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def to_frame(self) -> pd.DataFrame:
        return self.table.copy()

    def to_dict(self) -> dict[str, Any]:
        counts = self.table["ets"].value_counts().to_dict()
        return {"items": self.table.to_dict(orient="records"), "groups": dict(self.groups),
                "strata_edges": list(self.strata_edges), "adjust": self.adjust,
                "ets_counts": {k: int(counts.get(k, 0)) for k in ("A", "B", "C")},
                "skipped": dict(self.skipped), "notes": list(self.notes)}

    def summary(self, n: int = 20) -> str:
        t = self.table
        counts = t["ets"].value_counts()
        g = pd.Series(self.groups).value_counts()
        lines = [f"DIF: {t['item'].nunique()} items x {t['group'].nunique()} focal group(s) "
                 f"({', '.join(f'{k}: {v} models' for k, v in g.items())}); ETS classes "
                 + ", ".join(f"{k} {int(counts.get(k, 0))}" for k in ("A", "B", "C"))
                 + f"; p-values adjusted by {self.adjust}"]
        cols = ["item", "group", "favours", "delta_mh", "ets", "mh_chisq", "mh_p_adj", "lr_uniform", "lr_nonuniform",
                "lr_p_adj", "beta_group"]
        lines.append(format_pval_columns(t.head(n)[cols], ["mh_p_adj", "lr_p_adj"]).to_string(
            index=False, float_format=lambda v: f"{v:.3g}"))
        lines += [f"note: {x}" for x in self.notes]
        return "\n".join(lines)


# --------------------------------------------------------------------------- the analysis

def dif(log: pd.DataFrame, groups: Any, *, strata: int = 5, adjust: str = "BH", logistic: bool = True,
        progress: bool | None = None, model_col: str = "model", item_col: str = "item",
        correct_col: str = "correct") -> DifResult:
    """Mantel-Haenszel and logistic-regression DIF of every item between groups of models (module docstring).

    ``groups``: a log column (``"family"`` or ``"model=family"``), a mapping model -> group or a two-column
    table; ``strata``: number of total-score strata for MH; ``adjust``: p-value adjustment over all rows.
    """
    from mrcstats._progress import progress as bar_of
    from mrcstats.models.irt import response_matrix
    from mrcstats.models.logistic import fit_logistic
    from mrcstats.stats.irt import rest_scores
    from mrcstats.stats.multiplicity import check_method, p_adjust

    if not isinstance(log, pd.DataFrame):
        raise InputError(f"dif: expected a canonical log (pandas DataFrame), got {type(log).__name__}")
    if not isinstance(strata, (int, np.integer)) or strata < 1:
        raise InputError(f"dif: strata must be a positive whole number, got {strata!r}")
    adjust = check_method(adjust)
    gmap = resolve_groups(log, groups, model_col)
    rm = response_matrix(log, model=model_col, item=item_col, correct=correct_col, where="dif")
    S, N = rm.s, rm.n                                   # models x items
    J, I = S.shape
    gl = np.array([gmap[m] for m in rm.models])
    levels = sorted(set(gl))
    focal_groups = levels[:1] if len(levels) == 2 else levels
    total = rm.accuracy
    k = int(min(strata, J))
    edges = np.unique(np.quantile(total, np.linspace(0, 1, k + 1)))
    stratum = np.clip(np.searchsorted(edges, total, side="right") - 1, 0, max(len(edges) - 2, 0))
    K = int(stratum.max()) + 1
    onehot = np.zeros((J, K))
    onehot[np.arange(J), stratum] = 1.0
    _, _, rest = rest_scores(rm)                        # models x items
    disable = None if progress is None else not progress
    bar = bar_of(total=len(focal_groups), desc="dif", disable=disable, unit="group")
    rows = []
    notes = list(rm.notes)
    try:
        for g in focal_groups:
            f = (gl == g).astype(float)
            r = 1.0 - f
            A = (S * f[:, None]).T @ onehot
            B = ((N - S) * f[:, None]).T @ onehot
            C = (S * r[:, None]).T @ onehot
            D = ((N - S) * r[:, None]).T @ onehot
            mh = mantel_haenszel(A, B, C, D)
            with np.errstate(divide="ignore", invalid="ignore"):
                delta = 2.35 * np.log(mh["or"])
            se_delta = 2.35 * mh["se_log_or"]
            out = {"item": list(rm.items), "group": g, "n_focal": int(f.sum()), "n_reference": int(r.sum()),
                   "strata": mh["strata"], "mh_chisq": mh["chisq"], "mh_p": mh["p"], "mh_or": mh["or"],
                   "se_log_or": mh["se_log_or"], "delta_mh": delta, "ets": _ets(delta, se_delta, mh["p"])}
            if logistic:
                x = rest.T                               # items x models
                x = np.where(np.isfinite(x), x, 0.0)
                s_, n_ = S.T, N.T
                ones = np.ones_like(x)
                G = np.broadcast_to(f, x.shape)
                X0 = np.stack([ones, x], axis=2)
                X1 = np.stack([ones, x, G], axis=2)
                X2 = np.stack([ones, x, G, x * G], axis=2)
                m0 = fit_logistic(X0, s_, n_, max_iter=50)
                m1 = fit_logistic(X1, s_, n_, max_iter=50, beta0=np.c_[m0.beta, np.zeros(I)])
                m2 = fit_logistic(X2, s_, n_, max_iter=50, beta0=np.c_[m1.beta, np.zeros(I)])
                from scipy.stats import chi2

                lu = np.maximum(m0.deviance - m1.deviance, 0.0)
                ln = np.maximum(m1.deviance - m2.deviance, 0.0)
                lb = np.maximum(m0.deviance - m2.deviance, 0.0)
                out |= {"lr_uniform": lu, "lr_uniform_p": chi2.sf(lu, 1), "lr_nonuniform": ln,
                        "lr_nonuniform_p": chi2.sf(ln, 1), "lr_both": lb, "lr_both_p": chi2.sf(lb, 2),
                        "beta_group": m1.beta[:, 2], "beta_interaction": m2.beta[:, 3],
                        "converged": m0.converged & m1.converged & m2.converged}
            rows.append(pd.DataFrame(out))
            bar.update(1)
    finally:
        bar.close()
    tab = pd.concat(rows, ignore_index=True)
    tab["mh_p_adj"] = p_adjust(tab["mh_p"].to_numpy(float), adjust)
    if logistic:
        tab["lr_p_adj"] = p_adjust(tab["lr_both_p"].to_numpy(float), adjust)
        nc = int((~tab["converged"]).sum())
        if nc:
            notes.append(f"{nc} logistic fit(s) did not converge (separated patterns: the likelihood ratio is a "
                         "lower bound)")
    else:
        for c in ("lr_uniform", "lr_uniform_p", "lr_nonuniform", "lr_nonuniform_p", "lr_both", "lr_both_p",
                  "lr_p_adj", "beta_group", "beta_interaction"):
            tab[c] = np.nan
        tab["converged"] = True
    if len(levels) == 2:
        other = levels[1]
        tab["favours"] = np.where(tab["delta_mh"] > 0, tab["group"], np.where(tab["delta_mh"] < 0, other, None))
    else:
        tab["favours"] = np.where(tab["delta_mh"] > 0, tab["group"],
                                  np.where(tab["delta_mh"] < 0, "reference (not " + tab["group"] + ")", None))
    o = np.lexsort((-tab["lr_both"].fillna(-1).to_numpy(float), -tab["mh_chisq"].fillna(-1).to_numpy(float)))
    cols = ["item", "group", "favours", "n_focal", "n_reference", "strata", "mh_chisq", "mh_p", "mh_p_adj", "mh_or",
            "se_log_or", "delta_mh", "ets", "lr_uniform", "lr_uniform_p", "lr_nonuniform", "lr_nonuniform_p",
            "lr_both", "lr_both_p", "lr_p_adj", "beta_group", "beta_interaction", "converged"]
    tab = tab.iloc[o][cols].reset_index(drop=True)
    if len(levels) > 2:
        notes.append(f"{len(levels)} groups: each is the focal group against all other models")
    return DifResult(tab, gmap, tuple(float(e) for e in edges), adjust, dict(rm.skipped), tuple(notes))


# --------------------------------------------------------------------------- validation by injection

@dataclass(frozen=True, repr=False)
class DifValidation(Result):
    """DIF injected into ``k`` items for one focal group (its wrong answers made right with probability
    ``rate``), the analysis rerun, and the ROC AUC / precision at ``k`` of the MH delta and the logistic
    uniform statistic (signed) at ranking the injected items first for that group (``metrics``)."""

    k: int
    seed: int
    group: str
    rate: float
    items: tuple[str, ...]
    metrics: pd.DataFrame
    result: DifResult

    def to_frame(self) -> pd.DataFrame:
        return self.metrics.copy()

    def to_dict(self) -> dict[str, Any]:
        return {"k": self.k, "seed": self.seed, "group": self.group, "rate": self.rate, "items": list(self.items),
                "metrics": self.metrics.to_dict(orient="records"), "notes": list(self.result.notes)}

    def summary(self) -> str:
        return (f"DIF validation: {self.k} items made easier for group {self.group!r} (wrong answers turned right "
                f"with probability {self.rate:g}; seed {self.seed})\n"
                + self.metrics.to_string(index=False, float_format=lambda v: f"{v:.4f}"))


def dif_validate(log: pd.DataFrame, groups: Any, k: int, seed: int = 0, *, rate: float = 0.8,
                 group: str | None = None, model_col: str = "model", item_col: str = "item",
                 correct_col: str = "correct", **kwargs: Any) -> DifValidation:
    """Inject DIF and measure detection: for ``k`` random items, each wrong (or invalid) answer of the focal
    group's models becomes right with probability ``rate``; ``group``: the focal group (default: a random one,
    seeded). Rerun :func:`dif` and score each item by its signed MH statistic (``sign(delta_mh) sqrt(mh_chisq)``)
    and signed logistic statistic (``sign(beta_group) * lr_uniform``) for that group."""
    from mrcstats.stats.screen import precision_at_k, roc_auc

    if not isinstance(k, (int, np.integer)) or k < 1:
        raise InputError(f"dif validate: K must be a positive whole number of items, got {k!r}")
    if not (0 < rate <= 1):
        raise InputError(f"dif validate: rate must lie in (0, 1], got {rate!r}")
    gmap = resolve_groups(log, groups, model_col)
    levels = sorted(set(gmap.values()))
    rng = seed_rng(seed)
    if group is None:
        group = levels[0] if len(levels) == 2 else levels[int(rng.integers(len(levels)))]
    elif group not in levels:
        raise InputError(f"dif validate: no group {group!r} (groups: {', '.join(levels)})")
    items = np.array(sorted(log[item_col].astype(str).unique()))
    if k > len(items):
        raise InputError(f"dif validate: K = {k} but the log has {len(items)} items")
    pick = set(rng.choice(items, int(k), replace=False))
    out = log.copy()
    models = {m for m, g in gmap.items() if g == group}
    hit = (out[item_col].astype(str).isin(pick) & out[model_col].astype(str).isin(models)).to_numpy()
    corr = out[correct_col].astype("boolean")
    wrong = hit & ~corr.fillna(False).to_numpy(bool)
    flip = wrong & (rng.random(len(out)) < rate)
    corr = corr.copy()
    corr[flip] = True
    out[correct_col] = corr
    res = dif(out, gmap, model_col=model_col, item_col=item_col, correct_col=correct_col, **kwargs)
    t = res.table
    levels_all = sorted(set(gmap.values()))
    if len(levels_all) == 2 and group != levels_all[0]:
        sub = t[t["group"] == levels_all[0]].copy()
        sign = -1.0
    else:
        sub = t[t["group"] == group].copy()
        sign = 1.0
    lab = sub["item"].isin(pick).to_numpy()
    mh = sign * np.sign(sub["delta_mh"].to_numpy(float)) * np.sqrt(sub["mh_chisq"].to_numpy(float))
    mh = np.where(np.isnan(mh), 0.0, mh)
    lr = sign * np.sign(sub["beta_group"].to_numpy(float)) * sub["lr_uniform"].to_numpy(float)
    metrics = pd.DataFrame([{"method": "mantel_haenszel", "auc": roc_auc(mh, lab), "precision_at_k":
                             precision_at_k(mh, lab, k)},
                            {"method": "logistic_uniform", "auc": roc_auc(lr, lab),
                             "precision_at_k": precision_at_k(lr, lab, k)}])
    return DifValidation(int(k), int(seed), str(group), float(rate), tuple(sorted(pick)), metrics, res)


