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

from mrcstats._repr import Result
from mrcstats.errors import InputError
from mrcstats.models.irt import IrtFit, ResponseMatrix, fit_irt, response_matrix

__all__ = ["IrtAnalysis", "corr_with_rest", "irt", "point_biserial", "rest_scores"]

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
    the fitted items. ``lrt``: ``{"chisq", "df", "p"}`` (2PL only).
    """

    fit: IrtFit
    fit_1pl: IrtFit | None
    items: pd.DataFrame
    rank_correlations: pd.DataFrame
    lrt: Mapping[str, float] | None
    skipped: Mapping[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def abilities(self) -> pd.DataFrame:
        return self.fit.abilities

    def to_frame(self) -> pd.DataFrame:
        return self.items.copy()

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
                "skipped": dict(self.skipped), "notes": list(self.notes)}

    def summary(self) -> str:
        lines = [self.fit.summary()]
        if self.lrt is not None:
            lines.append(f"  LRT 1PL vs 2PL: chisq = {self.lrt['chisq']:.2f}, df = {self.lrt['df']}, "
                         f"p = {self.lrt['p']:.3g}")
        rc = self.rank_correlations
        if len(rc):
            lines.append("Spearman rank correlations over the fitted items:")
            lines.append(rc.round(3).to_string())
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
        test = {"chisq": stat, "df": df, "p": float(chi2.sf(max(stat, 0.0), df))}
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
    return IrtAnalysis(fit, fit1, tab, rc, test, dict(rm.skipped), rm.notes)
