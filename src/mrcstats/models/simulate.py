"""Responses simulated from a fitted GLMM, as lme4's ``simulate.merMod`` (``use.u = FALSE``) and glmmTMB's
``simulate`` (new random effects each time).

For each simulation the random effects are drawn anew, b_j = T u_j with u_j ~ N(0, I) per level of each term
(T the term's relative covariance factor from θ, lme4's Λ_θ), η = Xβ + offset + Zb, μ = g⁻¹(η), and the response is
drawn by the family (:attr:`~mrcstats.models.family.Family.simulate`): Binomial(trials, μ) as a proportion,
Poisson(μ), or for the beta-binomial p ~ Beta(μφ, (1-μ)φ) then Binomial(trials, p) (glmmTMB's ``rbetabinom`` with
φ its ``sigma``). The parametric bootstrap of :mod:`mrcstats.models.confint` draws its responses here.

References: lme4 1.1-31 ``R/lmer.R`` (``simulate.merMod``); glmmTMB 1.1 ``simulate.glmmTMB``, ``rbetabinom``;
Bates et al. (2015) J. Stat. Softw. 67(1) sec. 2.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from mrcstats._repr import Result
from mrcstats.errors import InputError
from mrcstats.models.family_table import require

if TYPE_CHECKING:
    import pandas as pd


def simulate_response(design: Any, theta: np.ndarray, beta: np.ndarray, rng: np.random.Generator,
                      dispersion: float | None = None) -> np.ndarray:
    """One response vector on the design's scale from (θ, β, φ) with new random effects (module docstring)."""
    eta = design.X @ beta
    if design.offset is not None:
        eta = eta + design.offset
    o = 0
    for r in design.re:
        T = r.factor(theta[o:o + r.ntheta])
        o += r.ntheta
        b = rng.standard_normal((r.nlevels, r.q)) @ T.T
        if r.Z is None:
            eta = eta + b[r.codes, 0]
        else:
            eta = eta + np.einsum("ic,ic->i", r.Z, b[r.codes])
    fam = design.family
    return fam.simulate(fam.mean(eta), design.weights, rng, dispersion)


@dataclass(frozen=True, repr=False)
class Simulations(Result):
    """``nsim`` simulated responses of a fit: ``values`` has one row per observation and one column per simulation
    (lme4's ``sim_1``, ``sim_2``, …), on the design's scale (a proportion of the trials for binomial responses)."""

    family: str
    values: np.ndarray
    seed: int | None = None

    def to_frame(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self.values, columns=[f"sim_{i + 1}" for i in range(self.values.shape[1])])

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "seed": self.seed, "nsim": int(self.values.shape[1]),
                "values": self.values.T.tolist()}

    def summary(self) -> str:
        n, k = self.values.shape
        return f"{k} simulated responses of {n} observations ({self.family}; seed {self.seed})"


def simulate(m: Any, nsim: int = 1, seed: int | None = None) -> Simulations:
    """``nsim`` responses simulated from the fitted model ``m`` with new random effects each time, as lme4's
    ``simulate(m, nsim, seed, use.u = FALSE)`` (glmmTMB's ``simulate`` for the beta-binomial); see the module
    docstring. Refused up front for fits whose family cannot simulate (``family_table.require``)."""
    require(m, "simulate")
    try:
        nsim = int(nsim)
    except (TypeError, ValueError):
        raise InputError(f"simulate: nsim must be a whole number, got {nsim!r}") from None
    if nsim < 1:
        raise InputError(f"simulate: nsim must be at least 1, got {nsim}")
    design = model_design(m, "simulate")
    rng = np.random.default_rng(seed)
    theta, beta = m.theta.to_numpy(), m.fixef.to_numpy()
    vals = np.column_stack([simulate_response(design, theta, beta, rng, m.dispersion) for _ in range(nsim)])
    return Simulations(m.family.name, vals, seed)


def model_design(fit: Any, who: str) -> Any:
    """The design a fit was made from: kept with the fit, or rebuilt from its frame and options (plumbing for the
    entries that took the fit and asked its capabilities: confint, simulate)."""
    from mrcstats.models.design import build_design

    d = getattr(fit, "design", None)
    if d is not None:
        return d
    if fit.frame is None or fit.info is None:
        raise InputError(f"{who}: this fit kept no data; refit with mrcstats.glmer()")
    fo = fit.fit_options or {}
    return build_design(fit.info.spec.with_family(fit.family), fit.frame, contrasts=fo.get("contrasts") or None,
                        levels=fo.get("levels") or None, weights=fo.get("weights"))


__all__ = ["Simulations", "model_design", "simulate", "simulate_response"]
