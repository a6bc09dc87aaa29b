"""Item statistics side by side: IRT discrimination and difficulty, P_d, classical p and r_pb.

:func:`irt` fits the item response model (:mod:`mrcstats.models.irt`) and puts beside each
item

* ``p``: classical difficulty, the share of correct answers over all models and trials;
* ``r_pb``: point-biserial discrimination, the Pearson correlation over models between the
  model's share correct on the item and its mean share correct on the *other* items
  (the corrected item-total correlation);
* ``pd``: seed 003's discriminatory power with the item as the cluster
  (:func:`mrcstats.stats.discrimination.discrimination`, eq. 4-7);
* ``a``, ``b`` (with SEs) from the 1PL/2PL fit,

their Spearman rank correlations over the fitted items, and, for the 2PL, the
likelihood-ratio test against the 1PL: ``chisq = 2 (logLik_2PL - logLik_1PL)`` on
``df = I - 1``. With the default discrimination prior the 2PL log-likelihood is taken at
the posterior mode, not the maximum, so the test is conservative (``prior_sd=None``
gives the plain LRT).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from mrcstats._pformat import p_clause
from mrcstats._repr import Result
from mrcstats.errors import InputError
from mrcstats.models.irt import IrtFit, ResponseMatrix, fit_irt, response_matrix

__all__ = ["IRT_MIN_RESPONDENTS", "LRT_MIN_RESPONDENTS", "IrtAnalysis", "TopItems", "corr_with_rest", "irt",
           "point_biserial", "rest_scores"]

#: Fewer respondents (models) than this and the item discriminations ``a`` (and their SEs) are
#: caveated: with J respondents an item's slope rests on J binary answers, so below ~30 the
#: 2PL slopes are dominated by the prior (or run to the bounds without it) and the Wald SEs are
#: unreliable (de Ayala 2009, *The Theory and Practice of IRT*, ch. 5; Drasgow 1989, sample-size
#: guidance for 2PL calibration, usually J >= 200; 30 is the floor below which the table is not
#: worth reading, not a sufficient size).
IRT_MIN_RESPONDENTS: int = 30
#: Fewer respondents than this and the 1PL-vs-2PL likelihood-ratio test is refused (``p`` is None):
#: its chi-square reference needs many respondents per item parameter, and with fewer
#: respondents than 10 the I - 1 extra slopes are fitted to a handful of answer patterns (a
#: p of 1e-120 on 6 respondents says nothing). Between this and :data:`IRT_MIN_RESPONDENTS` the
#: test is reported with a caveat.
LRT_MIN_RESPONDENTS: int = 10

_RANK_COLS = ("pd", "a", "b", "p", "r_pb")


def rest_scores(rm: ResponseMatrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per (model, item): the share correct ``y`` (0 where not answered), whether it was answered, and the
    model's mean share correct over its *other* answered items (the rest score)."""
    answered = rm.n > 0
    y = np.where(answered, rm.s / np.where(answered, rm.n, 1.0), 0.0)
    tot = y.sum(axis=1, keepdims=True)
    cnt = answered.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        rest = (tot - y) / (cnt - answered)
    return y, answered, rest


def corr_with_rest(y: np.ndarray, answered: np.ndarray, rest: np.ndarray) -> np.ndarray:
    """Pearson correlation over models (axis 0) of ``y`` with ``rest``, over the answered cells, per column."""
    w = answered.astype(float)
    m = w.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        my = (w * y).sum(0) / m
        mr = (w * np.nan_to_num(rest)).sum(0) / m
        dy, dr = (y - my) * w, (np.nan_to_num(rest) - mr) * w
        r = (dy * dr).sum(0) / np.sqrt((dy * dy).sum(0) * (dr * dr).sum(0))
    return r


def point_biserial(rm: ResponseMatrix) -> np.ndarray:
    """Corrected item-total correlation of every item (NaN where undefined)."""
    return corr_with_rest(*rest_scores(rm))


@dataclass(frozen=True, repr=False)
class IrtAnalysis(Result):
    """An IRT fit with the classical item statistics and P_d beside it.

    ``items``: one row per item (fitted or not): ``item, a, b, se_a, se_b, p, r_pb, pd,
    fitted``; items without variation have ``b = -Inf`` (all correct) or ``+Inf`` (none)
    and no ``a``. ``rank_correlations``: Spearman's rho among ``pd, a, b, p, r_pb`` over
    the fitted items. ``lrt``: ``{"chisq", "df", "p"}`` (2PL only; ``p`` None when refused).
    ``caveats``: what the data cannot support (fewer respondents than :data:`IRT_MIN_RESPONDENTS`
    for the discriminations, than :data:`LRT_MIN_RESPONDENTS` for the LRT); shown in
    :meth:`summary`, :meth:`to_dict` and as the ``caveat`` column of :meth:`to_frame`.
    """

    fit: IrtFit
    fit_1pl: IrtFit | None
    items: pd.DataFrame
    rank_correlations: pd.DataFrame
    lrt: Mapping[str, float] | None
    skipped: Mapping[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    caveats: tuple[str, ...] = ()

    @property
    def abilities(self) -> pd.DataFrame:
        return self.fit.abilities

    @property
    def item_caveat(self) -> str | None:
        """The caveat every item's ``a``/``se_a`` carries (None when the respondents suffice)."""
        n = self.fit.n_models
        if self.fit.model == "2pl" and n < IRT_MIN_RESPONDENTS:
            return (f"discrimination a from {n} respondents (fewer than {IRT_MIN_RESPONDENTS}): slopes and their SEs "
                    "are not reliable")
        return None

    def to_frame(self) -> pd.DataFrame:
        out = self.items.copy()
        out["caveat"] = self.item_caveat
        return out

    def top_items(self, k: int = 10, by: str = "a") -> TopItems:
        """The ``k`` fitted items with the largest ``by`` (``a``, ``pd``, ``r_pb``), with a caveat when the
        cut at ``k`` falls inside a tie (the order there is arbitrary) or the table repeats one value."""
        return TopItems.from_items(self.items[self.items["fitted"]], k, by, self.item_caveat if by == "a" else None)

    def to_dict(self) -> dict[str, Any]:
        """The ``mrcstats irt --json`` object."""
        cols = ["item", "a", "b", "se_a", "se_b", "p", "pd"]
        items = [{c: r[c] for c in cols} | {"r_pb": r["r_pb"]} for r in self.items.to_dict(orient="records")]
        return {"model": self.fit.model, "loglik": self.fit.loglik, "aic": self.fit.aic, "bic": self.fit.bic,
                "items": items,
                "abilities": self.fit.abilities[["model", "theta", "sd"]].to_dict(orient="records"),
                "lrt_1pl_vs_2pl": dict(self.lrt) if self.lrt is not None else None,
                "rank_correlations": {r: {c: self.rank_correlations.at[r, c] for c in self.rank_correlations.columns}
                                      for r in self.rank_correlations.index},
                "converged": self.fit.converged, "prior_sd": self.fit.prior_sd, "se_method": self.fit.se_method,
                "n_respondents": self.fit.n_models, "min_respondents": IRT_MIN_RESPONDENTS,
                "skipped": dict(self.skipped), "notes": list(self.notes), "caveats": list(self.caveats)}

    def summary(self) -> str:
        lines = [self.fit.summary()]
        if self.lrt is not None:
            p = "p not reported (too few respondents)" if self.lrt["p"] is None else p_clause(self.lrt["p"])
            lines.append(f"  LRT 1PL vs 2PL: chisq = {self.lrt['chisq']:.2f}, df = {self.lrt['df']}, {p}")
        rc = self.rank_correlations
        if len(rc):
            lines.append("Spearman rank correlations over the fitted items:")
            lines.append(rc.round(3).to_string())
        lines.extend(f"  caveat: {c}" for c in self.caveats)
        return "\n".join(lines)


@dataclass(frozen=True, repr=False)
class TopItems(Result):
    """The ``k`` items with the largest ``by``, and what the table cannot say (``caveats``).

    A tie at the cut (the k-th and the (k+1)-th value equal to 1e-9 relative) means which of the
    tied items are listed is arbitrary; a table whose rows all share one value ranks nothing.
    """

    by: str
    k: int
    table: pd.DataFrame
    n_tied_at_cut: int
    caveats: tuple[str, ...] = ()

    @classmethod
    def from_items(cls, items: pd.DataFrame, k: int, by: str, extra: str | None = None) -> TopItems:
        if by not in items.columns:
            raise InputError(f"top items: no column {by!r} (one of a, pd, r_pb, p, b)")
        srt = items.sort_values([by, "item"], ascending=[False, True], na_position="last")
        top = srt.head(k).reset_index(drop=True)
        vals = srt[by].to_numpy(dtype=float)
        caveats: list[str] = [extra] if extra else []
        n_tied = 0
        if len(vals) > k and k > 0 and np.isfinite(vals[k - 1]):
            cut = vals[k - 1]
            tied = np.isclose(vals, cut, rtol=1e-9, atol=0.0)
            if tied[k]:
                n_tied = int(tied.sum())
                caveats.append(f"{n_tied} items tie at {by} = {cut:.4g} across the cut at {k}: which of them are "
                               "listed is arbitrary (ordered by item id)")
        tv = top[by].to_numpy(dtype=float)
        if len(tv) > 1 and np.isfinite(tv).all() and np.allclose(tv, tv[0], rtol=1e-9, atol=0.0):
            caveats.append(f"all {len(tv)} listed items have the same {by} ({tv[0]:.4g}): the table ranks nothing")
        top["caveat"] = "; ".join(caveats) if caveats else None
        return cls(by, int(k), top, n_tied, tuple(caveats))

    def to_frame(self) -> pd.DataFrame:
        return self.table.copy()

    def to_dict(self) -> dict[str, Any]:
        rows = self.table.drop(columns=["caveat"]).to_dict(orient="records")
        return {"by": self.by, "k": self.k, "items": rows, "n_tied_at_cut": self.n_tied_at_cut,
                "caveats": list(self.caveats)}

    def summary(self) -> str:
        lines = [f"Top {self.k} items by {self.by}:",
                 self.table.drop(columns=["caveat"]).to_string(index=False)]
        lines.extend(f"  caveat: {c}" for c in self.caveats)
        return "\n".join(lines)


def irt(log: pd.DataFrame, model: str = "2pl", method: str = "mml", *, quadrature: int = 11,
        prior_sd: float | None = 1.0, lrt: bool = True, tol: float = 1e-6, progress: bool | None = None,
        model_col: str = "model", item_col: str = "item", correct_col: str = "correct") -> IrtAnalysis:
    """Fit a 1PL or 2PL model to a canonical log and tabulate the item statistics beside it.

    ``method`` must be ``"mml"`` (marginal maximum likelihood, the only one). See
    :mod:`mrcstats.models.irt` for the model, the prior and the quadrature.
    """
    if method != "mml":
        raise InputError(f"irt: method must be 'mml' (marginal maximum likelihood), got {method!r}")
    rm = response_matrix(log, model=model_col, item=item_col, correct=correct_col)
    fit = fit_irt(rm, model, quadrature=quadrature, prior_sd=prior_sd, tol=tol, progress=progress)
    fit1 = None
    test = None
    if fit.model == "2pl" and lrt:
        fit1 = fit_irt(rm, "1pl", quadrature=quadrature, tol=tol, progress=progress)
        from scipy.stats import chi2

        stat = 2.0 * (fit.loglik - fit1.loglik)
        df = fit.n_par - fit1.n_par
        p_lrt = float(chi2.sf(max(stat, 0.0), df)) if rm.s.shape[0] >= LRT_MIN_RESPONDENTS else None
        test = {"chisq": stat, "df": df, "p": p_lrt}
    from mrcstats.stats.discrimination import discrimination

    kept = log[log[item_col].astype(str).isin(set(rm.items))]
    disc = discrimination(kept, cluster=item_col, model=model_col, correct=correct_col, item=item_col)
    tab = pd.DataFrame({"item": list(rm.items), "p": rm.p, "r_pb": point_biserial(rm)})
    tab["pd"] = disc.pd.reindex(tab["item"]).to_numpy()
    par = fit.items.set_index("item")[["a", "b", "se_a", "se_b"]]
    tab = tab.join(par, on="item")
    tab["fitted"] = tab["item"].isin(par.index)
    # items without variation: infinite ML difficulty
    nf = ~tab["fitted"]
    tab.loc[nf, "b"] = np.where(tab.loc[nf, "p"] >= 1.0, -np.inf, np.inf)
    tab = tab[["item", "a", "b", "se_a", "se_b", "p", "r_pb", "pd", "fitted"]]
    rc = tab.loc[tab["fitted"], list(_RANK_COLS)].corr(method="spearman")
    n_resp = len(rm.models)
    caveats: list[str] = []
    if fit.model == "2pl" and n_resp < IRT_MIN_RESPONDENTS:
        caveats.append(f"only {n_resp} respondents (models), fewer than {IRT_MIN_RESPONDENTS} "
                       "needed for the discriminations: a and its SE are not "
                       "reliable; read P_d, p and r_pb instead")
    if test is not None and test["p"] is None:
        caveats.append(f"1PL-vs-2PL LRT p not reported: {n_resp} respondents, fewer than {LRT_MIN_RESPONDENTS}; "
                       "the chi-square reference does not hold")
    elif test is not None and n_resp < IRT_MIN_RESPONDENTS:
        caveats.append(f"1PL-vs-2PL LRT on {n_resp} respondents (fewer than {IRT_MIN_RESPONDENTS}) with df = "
                       f"{test['df']}: the chi-square p is approximate at best")
    return IrtAnalysis(fit, fit1, tab, rc, test, dict(rm.skipped), rm.notes, tuple(caveats))
