"""Public entry point :func:`glmer` (dispatches to the native or the lme4 engine)."""
from __future__ import annotations

from typing import Any, Mapping

import pandas as pd

from mrcstats.errors import InputError
from mrcstats.models.formula import ModelSpec
from mrcstats.models.results import GlmerResult


def glmer(formula: str | ModelSpec, data: pd.DataFrame, family: str = "binomial", contrasts: Mapping[str, str] | None = None,
          nagq: int = 1, engine: str = "native", weights: Any = None, levels: Mapping[str, Any] | None = None,
          lme4_defaults: bool = False) -> GlmerResult:
    """Fit a binomial GLMM as lme4's ``glmer(formula, data, family = binomial, nAGQ = nagq)``."""
    if family not in ("binomial", "binomial(logit)"):
        raise InputError(f"family {family!r} is not supported; only 'binomial' (logit link)")
    if engine == "lme4":
        from mrcstats.models.r_engine import fit_lme4

        return fit_lme4(formula, data, contrasts=contrasts, nagq=nagq, weights=weights, levels=levels,
                        lme4_defaults=lme4_defaults)
    if engine != "native":
        raise InputError(f"engine {engine!r}: use 'native' or 'lme4'")
    raise NotImplementedError("native engine: in progress")
