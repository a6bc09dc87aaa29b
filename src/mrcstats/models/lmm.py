"""Linear mixed models as lme4's ``lmer`` (REML or ML), with lmerTest's Satterthwaite t-tests.

Model (Bates, Mächler, Bolker & Walker 2015, J. Stat. Softw. 67(1), sec. 3): y = Xβ + ZΛθ u + ε,
u ~ N(0, σ²I), ε ~ N(0, σ²I), Λθ block-diagonal (per random-effects term and level, the term's
lower-triangular factor T, as :class:`~mrcstats.models.design.ReTerm`). lme4's penalised least squares
(PLS) for fixed θ solves

    [M      ΛᵀZᵀX] [u]   [ΛᵀZᵀy]        M = ΛᵀZᵀZΛ + I = L Lᵀ,
    [XᵀZΛ   XᵀX  ] [β] = [Xᵀy  ],       RXᵀRX = XᵀX − XᵀZΛ M⁻¹ ΛᵀZᵀX,

with the penalised residual sum of squares r²(θ) = ‖y − Xβ̂ − ZΛû‖² + ‖û‖² = yᵀy − ûᵀΛᵀZᵀy − β̂ᵀXᵀy, and
the profiled deviance (lme4 ``mkLmerDevfun``; eq. 34 and 41 of the paper)

    ML:    d(θ) = log|L|² + n (1 + log(2π r²/n))
    REML:  d(θ) = log|L|² + log|RX|² + (n − p)(1 + log(2π r²/(n − p))),

σ̂² = r²/n (ML) or r²/(n − p) (REML); Var(β̂) = σ̂² (RXᵀRX)⁻¹ (lme4's ``vcov``). Everything after one pass
over the rows (the cross-products ZᵀZ, ZᵀX, Zᵀy, XᵀX, Xᵀy, yᵀy) is in the dimension of the random
effects: the first term (most levels) is block-diagonal in M, one q₁ x q₁ block per level (closed forms
for q₁ ≤ 2; stored component-major, levels last, so every per-level operation runs over contiguous vectors),
the other terms are eliminated through a dense Schur complement S, as the GLMM kernels
(:class:`~mrcstats.models.deviance.GeneralModel`) do — MixedModels.jl's blocked Cholesky factor with a
diagonal (crossed intercepts) or block-diagonal (slopes) first block. θ minimises d by L-BFGS-B on the exact
gradient (:meth:`LmmSystem.grad_parts`: ∂log|L|² from the diagonal blocks of M⁻¹ΛᵀZᵀZ, ∂r² by the envelope
theorem, ∂log|RX|² from ∂RXᵀRX; lme4: derivative-free BOBYQA), polished by Newton steps whose Hessian is
forward differences of that gradient.

Satterthwaite degrees of freedom as lmerTest 3.1 (``as_lmerModLmerTest``, ``contest1D``; Kuznetsova,
Brockhoff & Christensen 2017, J. Stat. Softw. 82(13)): with the variance parameters φ = (θ, σ) and the
unprofiled deviance D(φ) (lmerTest's ``devfun_vp``: log|L|² + r²/σ² + n log(2πσ²), REML adding
log|RX|² − p log(2πσ²)), A = 2 H⁻¹ (H the Hessian of D at φ̂; eigenvalues ≤ 1e-8 left out, as lmerTest),
C(φ) = σ² (RXᵀRX(θ))⁻¹ and for each coefficient (contrast l) ν = 2 (lᵀCl)² / (gᵀ A g), g_k = lᵀ ∂C/∂φ_k l;
lmerTest differentiates numerically (numDeriv's Richardson ``hessian`` and ``jacobian``); here the Jacobian of
C is exact (−σ² R⁻¹ ∂RXᵀRX R⁻¹, 2σ R⁻¹) and the Hessian's θθ block central differences of the exact gradient
(its σ row exact), the same numbers to about 1e-7 relative from a tenth of the deviance evaluations.
p = 2 P(T_ν > |t|).

The pieces: :mod:`~mrcstats.models.lmm_fit` (the PLS system, its profiled deviance and the optimiser),
:mod:`~mrcstats.models.lmm_tests` (Satterthwaite, Kenward-Roger, anova), :mod:`~mrcstats.models.lmm_results`
(:class:`LmerResult`, :func:`fit_lmm`, the profile intervals); this module is the entry (:func:`lmer`) and
re-exports their public names.
"""
from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import pandas as pd

from mrcstats.errors import InputError
from mrcstats.models.family import GAUSSIAN
from mrcstats.models.formula import ModelSpec
from mrcstats.models.lmm_fit import LmmSystem
from mrcstats.models.lmm_results import LmerResult, fit_lmm, profile_confint
from mrcstats.models.lmm_tests import KenwardRoger, LmerAnova, anova_contrasts


def lmer(formula: str | ModelSpec, data: pd.DataFrame, reml: bool = True,
         contrasts: Mapping[str, str] | None = None, levels: Mapping[str, Any] | None = None,
         weights: Any = None) -> LmerResult:
    """Fit a linear mixed model as lme4's ``lmer(formula, data, REML = reml)`` and test the fixed effects as
    lmerTest's ``summary`` (Satterthwaite's df).

    Parameters
    ----------
    formula : R/lme4 formula text (``"score ~ x * LLM + (1 | item)"``); random intercepts, slopes (``(1 + x | g)``),
        uncorrelated terms (``||``), crossed and nested terms as :func:`mrcstats.glmer` takes them.
    data : pandas DataFrame; the response is a numeric column.
    reml : REML (lme4's default) or maximum likelihood (``reml=False``, for likelihood-ratio tests).
    contrasts, levels : as :func:`mrcstats.glmer`.

    Returns
    -------
    LmerResult

    References
    ----------
    Bates et al. (2015), J. Stat. Softw. 67(1), sec. 3 (PLS, profiled deviance); Kuznetsova et al. (2017),
    J. Stat. Softw. 82(13) (lmerTest's Satterthwaite df).
    """
    from mrcstats.models.design import build_design

    t0 = time.perf_counter()
    if weights is not None:
        raise InputError("lmer: prior weights are not supported yet; fit without --weights")
    if not isinstance(formula, (str, ModelSpec)):
        raise InputError(f"lmer: formula must be R formula text such as 'score ~ x + (1 | item)', got "
                         f"{type(formula).__name__}")
    if not isinstance(data, pd.DataFrame):
        raise InputError(f"lmer: data must be a pandas DataFrame, got {type(data).__name__}")
    design = build_design(formula, data, contrasts=contrasts, levels=levels, family=GAUSSIAN)
    from mrcstats.models.optimize import _blas_controller

    ctl = _blas_controller()
    if ctl is None:  # pragma: no cover
        return fit_lmm(design, reml=reml, t0=t0)
    with ctl.limit(limits=1, user_api="blas"):
        return fit_lmm(design, reml=reml, t0=t0)


__all__ = ["KenwardRoger", "LmerAnova", "LmerResult", "LmmSystem", "anova_contrasts", "fit_lmm", "lmer",
           "profile_confint"]
