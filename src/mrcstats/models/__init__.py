"""Generalized and linear mixed models, lme4-exact.

Seams as in lme4's ``modular.R``: :mod:`.formula` (parse) -> :mod:`.design` (model
frame, X, random-effect terms; the response read as its :mod:`.family` says) -> :mod:`.deviance`
(the Laplace / AGQ deviance of any canonical family) -> :mod:`.fit` (optimizer, Hessian, checks) ->
:mod:`.results` (:class:`GlmerResult`); :mod:`.lmm` fits linear mixed models (``lmer``: profiled
REML/ML, Satterthwaite t-tests); :mod:`.clmm` fits cumulative-link mixed models for ordered
ratings (``mrcstats.clmm``, as ``ordinal::clmm``; the function is ``mrcstats.models.clmm.clmm``).
:mod:`.r_engine` fits the same call through lme4; :mod:`.compare` has ``anova``,
``drop1`` and ``gvif``.
"""
from __future__ import annotations

import importlib
from typing import Any

__all__ = ["ClmmResult", "GlmerResult", "anova", "build_design", "drop1", "emmeans", "glmer", "gvif", "lmer", "pairs",
           "parse_formula"]

_LAZY = {      # imported on first use: the CLI asks models.family for its choices without loading the rest
    "GlmerResult": "mrcstats.models.results",
    "glmer": "mrcstats.models.fit",
    "lmer": "mrcstats.models.lmm",
    "ClmmResult": "mrcstats.models.clmm",
    "parse_formula": "mrcstats.models.formula",
    "build_design": "mrcstats.models.design",
    "anova": "mrcstats.models.compare",
    "drop1": "mrcstats.models.compare",
    "gvif": "mrcstats.models.compare",
    "emmeans": "mrcstats.models.emmeans",
    "pairs": "mrcstats.models.emmeans",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'mrcstats.models' has no attribute {name!r}")
