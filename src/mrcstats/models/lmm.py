"""Linear mixed models as lme4's ``lmer`` (REML or ML), with lmerTest's Satterthwaite t-tests: the entry.

Model (Bates, Mächler, Bolker & Walker 2015, J. Stat. Softw. 67(1), sec. 3): y = Xβ + ZΛθ u + ε,
u ~ N(0, σ²I), ε ~ N(0, σ²I). The pieces, in import order:

* :mod:`~mrcstats.models.lmm_fit`: lme4's penalised least squares, the profiled (RE)ML deviance d(θ), its exact
  gradient and the optimiser (L-BFGS-B, then Newton steps);
* :mod:`~mrcstats.models.lmm_tests`: lmerTest's Satterthwaite df (Kuznetsova, Brockhoff & Christensen 2017,
  J. Stat. Softw. 82(13)), pbkrtest's Kenward-Roger (Kenward & Roger 1997), the F tests and anova tables;
* :mod:`~mrcstats.models.lmm_results`: :class:`LmerResult`, :func:`fit_lmm` (the result from the optimum) and
  lme4's profile intervals.

This module is :func:`lmer` and re-exports the public names of the three.
"""
from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mrcstats.errors import InputError
from mrcstats.io.columns import Columns
from mrcstats.models._checks import require_table
from mrcstats.models.family import GAUSSIAN
from mrcstats.models.formula import ModelSpec, parse_formula
from mrcstats.models.lmm_fit import LmmSystem
from mrcstats.models.lmm_results import LmerResult, fit_lmm, profile_confint
from mrcstats.models.lmm_tests import KenwardRoger, LmerAnova, anova_contrasts

if TYPE_CHECKING:
    import pandas as pd


def lmer(formula: str | ModelSpec, data: pd.DataFrame | Columns, reml: bool = True,
         contrasts: Mapping[str, str] | None = None, levels: Mapping[str, Any] | None = None,
         weights: Any = None) -> LmerResult:
    """Fit a linear mixed model as lme4's ``lmer(formula, data, REML = reml)`` and test the fixed effects as
    lmerTest's ``summary`` (Satterthwaite's df).

    Parameters
    ----------
    formula : R/lme4 formula text (``"score ~ x * LLM + (1 | item)"``); random intercepts, slopes (``(1 + x | g)``),
        uncorrelated terms (``||``), crossed and nested terms as :func:`mrcstats.glmer` takes them.
    data : pandas DataFrame, or :class:`~mrcstats.io.columns.Columns` (a table read without pandas, as the
        command line reads one plain CSV/TSV/Parquet file); the response is a numeric column.
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
    require_table(data, "lmer")
    spec = formula if isinstance(formula, ModelSpec) else parse_formula(formula)
    design = build_design(spec.with_family(GAUSSIAN), data, contrasts=contrasts, levels=levels)
    from mrcstats.models.optimize import blas_controller

    ctl = blas_controller()
    if ctl is None:  # pragma: no cover
        return fit_lmm(design, reml=reml, t0=t0)
    with ctl.limit(limits=1, user_api="blas"):
        return fit_lmm(design, reml=reml, t0=t0)


__all__ = ["KenwardRoger", "LmerAnova", "LmerResult", "LmmSystem", "anova_contrasts", "fit_lmm", "lmer",
           "profile_confint"]
