"""The front door of the mixed models: :func:`glmer` chooses the engine and the backend, once.

``formula`` text is parsed here, once, into a frozen :class:`~mrcstats.models.formula.ModelSpec`
(response, fixed terms, random-effects terms, family, weights) that the in-memory fit
(:mod:`.native`), the out-of-core path (:mod:`.outofcore`) and the R engine (:mod:`.r_engine`) take;
:func:`choose` is the one place where ``engine`` (native / lme4: who fits) and ``backend``
(memory / duckdb / dask: where the rows are read) are decided. The numerics are
:mod:`.optimize` (lme4's ``optimizeGlmer`` objective, Hessian, ``checkConv``).
"""
from __future__ import annotations

import dataclasses
import os
import time
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mrcstats.errors import InputError
from mrcstats.io.columns import Columns, as_frame, in_memory, is_columns
from mrcstats.models._checks import require_table
from mrcstats.models.family import Family, get_family
from mrcstats.models.family_table import require
from mrcstats.models.formula import ModelSpec, parse_formula
from mrcstats.models.native import fit_design, fit_rows, require_binary_response  # noqa: F401  (fit_design: its old home)
from mrcstats.models.optimize import (  # noqa: F401  (re-exported: the names' old home)
    GRAD_TOL,
    HESS_TOL,
    SINGULAR_TOL,
    blas_controller,
    check_conv,
    deviance_function,
    glm_start,
    make_model,
    optimize_laplace,
    ranef_frames,
    refit_optimum,
    varcorr_frame,
    vcov_from_hessian,
)
from mrcstats.models.results import GlmerResult

if TYPE_CHECKING:
    import pandas as pd

ENGINES = ("native", "lme4")
BACKENDS = ("memory", "duckdb", "dask")

# Imported where they are used (the gaussian family's lmer, the duckdb/dask backends): the binomial fit in
# memory, what ``mrcstats glmer`` runs, does not pay for lmm's and the grid's scipy imports
# (tests/cli/test_startup.py). Still importable from here, their old home.
_LAZY = {"lmer": "mrcstats.models.lmm", "glmer_outofcore": "mrcstats.models.outofcore"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'mrcstats.models.fit' has no attribute {name!r}")


def _dataset_log(data: Any) -> bool:
    """A log dataset (:func:`mrcstats.backends.dataset_pass` gives its row pass); an in-memory table is not
    one, and is answered without loading the backends (nor pandas)."""
    if in_memory(data):
        return False
    from mrcstats.backends import dataset_pass

    return dataset_pass(data) is not None


def choose(engine: str, backend: str | None, data: Any, scheduler: Any = None) -> tuple[str, str]:
    """The (engine, backend) of a fit: the one place they are decided.

    ``engine`` is who fits (``native`` or ``lme4``); ``backend`` is where the rows are read:
    ``memory`` for a pandas frame, ``duckdb`` for a log dataset (a
    :class:`~mrcstats.io.dataset.LogDataset`: :func:`glmer` has a folder path opened by
    :func:`mrcstats.io.open_log`, which decides), ``dask`` for a ``dask.dataframe`` or when a
    ``scheduler`` is given. ``engine="duckdb"``/``"dask"`` is the old spelling of ``backend``
    (deprecated, still accepted)."""
    if engine in ("duckdb", "dask"):
        warnings.warn(f"glmer(engine={engine!r}) is deprecated: engine is native or lme4; use backend={engine!r}",
                      DeprecationWarning, stacklevel=3)
        if backend not in (None, engine):
            raise InputError(f"engine={engine!r} and backend={backend!r} disagree; pass backend only")
        engine, backend = "native", engine
    if engine not in ENGINES:
        raise InputError(f"engine {engine!r}: use 'native' or 'lme4'")
    if backend is None:
        if scheduler is not None:
            backend = "dask"
        elif in_memory(data):
            backend = "memory"
        elif type(data).__name__ == "DataFrame":            # a dask.dataframe
            backend = "dask"
        elif _dataset_log(data):                             # a log dataset (io opened its folder)
            backend = "duckdb"
        else:                                                # anything else is refused as data below
            backend = "memory"
    if backend not in BACKENDS:
        raise InputError(f"backend {backend!r}: use one of {', '.join(BACKENDS)}")
    if scheduler is not None and backend != "dask":
        raise InputError("scheduler goes with backend 'dask'")
    if backend != "memory" and engine != "native":
        raise InputError(f"backend {backend!r} (a dataset folder or a cluster) fits natively; use engine='native'")
    return engine, backend


def glmer(formula: str | ModelSpec, data: pd.DataFrame | Columns, family: str | Family = "binomial",
          contrasts: Mapping[str, str] | None = None, nagq: int = 1, engine: str = "native",
          weights: Any = None, levels: Mapping[str, Any] | None = None,
          lme4_defaults: bool = False, backend: str | None = None, scheduler: Any = None,
          method: str = "auto", vcov: str = "hessian", invalid: str = "wrong") -> GlmerResult:
    """Fit a GLMM as lme4's ``glmer(formula, data, family = family, nAGQ = nagq)``.

    Parameters
    ----------
    formula : R/lme4 formula text (``"correct ~ scaled_tok * LLM + (1 | passage)"``) or a parsed spec.
    data : pandas DataFrame (a canonical log or any table), or :class:`~mrcstats.io.columns.Columns` (a
        table read without pandas, :func:`mrcstats.io.arrow_columns.read_delimited_columns`: the same fit).
    family : ``"binomial"`` (logit link; 0/1, proportions with weights, ``cbind(k, n - k)``) or
        ``"poisson"`` (log link; non-negative integer counts), as R spells them, or a
        :class:`~mrcstats.models.family.Family`.
    contrasts : ``{"LLM": "sum"}`` for ``contr.sum``; treatment contrasts otherwise.
    nagq : 1 = Laplace; 0 = lme4's nAGQ = 0; 2..25 = adaptive Gauss-Hermite (one grouping factor).
    engine : ``"native"`` (:mod:`mrcstats.models.native`) or ``"lme4"`` (R through rpy2, same result
        class). ``"duckdb"``/``"dask"`` here are deprecated aliases of ``backend=``.
    backend : where the rows are read: ``"memory"`` (a pandas frame), ``"duckdb"`` (a log dataset
        folder, streamed) or ``"dask"`` (partitions on a cluster, ``scheduler``); None chooses from
        ``data`` (see :func:`choose`). duckdb/dask collapse the rows to binomial counts
        (:mod:`mrcstats.models.outofcore`).
    scheduler : ``backend="dask"``: a scheduler address or a ``distributed.Client``.
    method : out-of-core only: ``"auto"`` or ``"cells"`` (see :func:`~mrcstats.models.outofcore.glmer_outofcore`).
    weights : prior weights, a column name or an array (R's ``weights=``).
    levels : ``{"LLM": ["gpt4", ...]}`` level orders (default: sorted by code point).
    lme4_defaults : lme4 engine only: keep lme4's default ``tolPwrss`` (to reproduce published numbers).
    vcov : ``"hessian"`` (default; lme4's default ``vcov(m)`` for a GLMM: 2 H⁻¹ of the deviance in (θ, β))
        or ``"RX"`` (lme4's ``vcov(m, use.hessian = FALSE)``): the covariance behind ``se``, ``z`` and ``p``,
        the same rule in both engines; the result's ``vcov_method`` names it and ``vcov_other`` keeps the
        other one (:meth:`~mrcstats.models.results.GlmerResult.use_vcov`).
    invalid : the invalid answers of a log (rows whose response ``correct`` is empty): ``"wrong"`` (default)
        counts them as not correct, as ``summary``, ``compare``, ``irt`` and the CLI do; ``"exclude"`` leaves
        their rows out (R's ``na.omit``). The package's one rule, :func:`mrcstats.io.schema.apply_invalid`;
        ``messages`` counts them. Other response columns keep R's ``na.omit``. Out of core (a dataset
        folder) the rows are left out, so ``"wrong"`` refuses a dataset holding invalid answers.

    Returns
    -------
    GlmerResult
        ``fit_seconds`` is the wall time of this whole call from the data frame (model frame,
        encoding of text columns, fit, standard errors); text columns are encoded once into
        categoricals kept in ``frame``, so refits (drop1, anova, confint) skip that work.

    References
    ----------
    Bates, Mächler, Bolker & Walker (2015), J. Stat. Softw. 67(1): eq. (30)-(31) (the
    Laplace deviance), sec. 5.3 (PIRLS); lme4 1.1-31 ``glmer``, ``vcov.merMod``, ``checkConv``.
    """
    t0 = time.perf_counter()        # fit_seconds: the whole call, from the data frame to the result
    if vcov not in ("hessian", "RX"):
        raise InputError(f"vcov must be 'hessian' or 'RX' (lme4's use.hessian = TRUE/FALSE), got {vcov!r}")
    from mrcstats.io.fields import INVALID_WORDS

    if invalid not in INVALID_WORDS:
        raise InputError(f"invalid must be 'wrong' (invalid answers count as not correct) or 'exclude' (left "
                         f"out), got {invalid!r}")
    if vcov == "RX":
        res = glmer(formula, data, family, contrasts, nagq, engine, weights, levels, lme4_defaults, backend,
                    scheduler, method, invalid=invalid)
        return res.use_vcov("RX") if hasattr(res, "use_vcov") else res
    if not isinstance(formula, (str, ModelSpec)):
        raise InputError(f"glmer: formula must be R formula text such as 'correct ~ x + (1 | cluster)', got "
                         f"{type(formula).__name__}")
    fam = get_family(family)
    if isinstance(data, (str, os.PathLike)):     # a path: io decides how it is opened (a dataset folder lazily)
        from mrcstats.io.opening import open_log

        data = open_log(data, table=True)
    engine, backend = choose(engine, backend, data, scheduler)
    spec = formula if isinstance(formula, ModelSpec) else parse_formula(formula)
    spec = dataclasses.replace(spec.with_family(fam), weights=weights if isinstance(weights, str) else spec.weights)
    if fam.response == "continuous":          # lme4: glmer(family = gaussian) is lmer()
        if engine != "native" or nagq != 1 or backend != "memory":
            raise InputError("family 'gaussian' is a linear mixed model (lmer): the native engine in memory, no nagq")
        from mrcstats.models.lmm import lmer

        data = as_frame(data)
        return lmer(spec, data, contrasts=contrasts, levels=levels, weights=weights)  # type: ignore[return-value]
    if backend != "memory" or _dataset_log(data):
        require(fam, "fit.outofcore")
        if weights is not None or lme4_defaults:
            raise InputError("the out-of-core path (a dataset folder, backend duckdb/dask) fits natively without "
                             "weights or lme4 options; read the rows into a data frame for those")
        from mrcstats.models.outofcore import glmer_outofcore

        return glmer_outofcore(spec, data, backend=backend, scheduler=scheduler, contrasts=contrasts,
                               levels=levels, nagq=nagq, method=method, invalid=invalid)
    require_table(data, "glmer")
    n_invalid = 0
    if not is_columns(data) and not spec.response.is_cbind and spec.response.column == "correct":
        from mrcstats.io.schema import apply_invalid

        require_binary_response(fam, data, "glmer")   # a graded row (score, no correct) is not an invalid answer: refuse first
        data, n_invalid = apply_invalid(data, invalid)
    res = fit_rows(spec, data, contrasts=contrasts, nagq=nagq, engine=engine, weights=weights,
                   levels=levels, lme4_defaults=lme4_defaults, t0=t0)
    if n_invalid:
        from mrcstats.io.schema import invalid_sentence

        msg = f"{invalid_sentence(n_invalid, invalid)} (invalid={invalid!r})"
        res = dataclasses.replace(res, messages=(*res.messages, msg))
    return res
