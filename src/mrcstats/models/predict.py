"""Predictions from a fitted GLMM, as lme4's ``predict.merMod``.

``predict(m)`` gives the fitted linear predictor for the rows used in the fit;
``predict(m, newdata)`` rebuilds X with the training levels, contrasts and
``scale()`` centring (R's ``predvars``) and adds the conditional modes of the
random intercepts named in ``re_form``: ``None`` = all (lme4's ``re.form = NULL``),
``"~0"`` or ``"NA"`` = none, ``"~(1 | passage)"`` = those listed. Levels not seen in
the fit are an error unless ``allow_new_levels=True`` (then their effect is 0, lme4's
``allow.new.levels = TRUE``). ``type="response"`` applies the family's inverse link (R's
``family$linkinv``: the inverse logit for binomial fits, exp for Poisson).
Rows with a missing predictor give NaN (R's ``na.pass``).

:func:`probability_frame` predicts from fixed effects given without a fit (e.g. a paper's
coefficients, seed 003 Tables 1-2): population-level P(correct) per factor level at chosen
values of one covariate,

    P(correct | level m, x = k) = plogis(β0 + Σ_j C[m, j] β_j + k (β_x + Σ_j C[m, j] β_{x:j}))

with ``C`` the factor's contrast matrix (:func:`mrcstats.models.design.contrast_matrix`); the
"Grand Mean" row is plogis of the mean log-odds over levels (= plogis(β0 + k β_x) under sum contrasts).
"""
from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from mrcstats.errors import InputError
from mrcstats.models.design import contrast_matrix, factor_levels
from mrcstats.models.family import BINOMIAL
from mrcstats.models.family_table import require

if TYPE_CHECKING:  # pragma: no cover
    from mrcstats.models.results import GlmerResult


#: the binomial family's R link functions (``binomial()$linkinv``, ``$mu.eta``)
linkinv = BINOMIAL.linkinv
mu_eta = BINOMIAL.mu_eta


def _re_terms(m: GlmerResult, re_form: str | None) -> list[str]:
    names = list(m.ranef)
    if re_form is None:
        return names
    text = re_form.strip()
    if text in ("NA", "~0", "~ 0", "0"):
        return []
    wanted = re.findall(r"\(\s*1\s*\|\s*([^)]+?)\s*\)", text)
    if not wanted:
        raise InputError(f"re_form {re_form!r}: use None (all random effects), '~0' (none) or e.g. '~(1 | passage)'")
    out = []
    for w in wanted:
        w = re.sub(r"\s+", "", w)
        if w not in names:
            raise InputError(f"re_form {re_form!r}: {w!r} is not a random-effects term of the model ({names})")
        out.append(w)
    return out


def _group_labels(frame: pd.DataFrame, factors: list[str]) -> np.ndarray:
    parts = []
    for col in factors:
        if col not in frame.columns:
            raise InputError(f"newdata: grouping column {col!r} is missing")
        codes, lv = factor_levels(frame[col], None, f"newdata column {col!r}")
        parts.append(np.asarray(lv, dtype=object)[codes])
    if len(parts) == 1:
        return parts[0]
    out = parts[0].astype(str)
    for p in parts[1:]:
        out = np.char.add(np.char.add(out, ":"), p.astype(str))
    return out.astype(object)


def _term_columns(r, data: pd.DataFrame):
    from mrcstats.models.design import r_model_matrix
    from mrcstats.models.formula import ModelSpec, Response

    sub = ModelSpec(formula=r.text, response=Response(text=""), terms=r.terms, intercept=r.intercept)
    Z, _a, cn, _i = r_model_matrix(sub, data, {}, None, None, "newdata")
    return Z, cn


def predict(m: GlmerResult, newdata: pd.DataFrame | None = None, re_form: str | None = None,
            type: str = "link", allow_new_levels: bool = False) -> np.ndarray:
    """Linear predictor (``type="link"``) or probability (``"response"``) per row of ``newdata``."""
    require(m, "predict")
    if type not in ("link", "response"):
        raise InputError(f"type must be 'link' or 'response', got {type!r}")
    if m.info is None:
        raise InputError("predict() needs the design information of the fit (info is None)")
    from mrcstats.io.columns import as_frame

    data = as_frame(m.frame) if newdata is None else newdata     # a fit on Columns kept those
    if data is None:
        raise InputError("predict(): this fit kept no data; pass newdata")
    spec = m.info.spec
    needed = set(spec.fixed_columns)
    terms = _re_terms(m, re_form)
    random = {r.name: list(r.factors) for r in spec.random}
    for t in terms:
        needed.update(random[t])
        for r in spec.random:
            if r.name == t:
                needed.update(r.slopes)
    missing = [c for c in needed if c not in data.columns]
    if missing:
        raise InputError(f"newdata: column(s) {sorted(missing)} used by the model are missing")
    ok = np.ones(len(data), dtype=bool)
    for c in needed:
        ok &= ~np.asarray(data[c].isna(), dtype=bool)
    eta = np.full(len(data), np.nan)
    if not ok.any():
        return eta
    sub = data.loc[ok] if not ok.all() else data
    X = m.info.model_matrix(sub)
    e = X @ m.fixef.to_numpy()
    for t in terms:
        lab = _group_labels(sub, random[t])
        frame = m.ranef[t]
        idx = pd.Index(frame.index.astype(str))
        pos = idx.get_indexer(pd.Index(np.asarray(lab, dtype=str)))
        new = pos < 0
        if new.any() and not allow_new_levels:
            raise InputError(f"newdata: level(s) {sorted(set(np.asarray(lab)[new].tolist()))[:5]} of {t!r} were not "
                             "in the fit; pass allow_new_levels=True to predict them with a zero random effect")
        safe = np.where(new, 0, pos)
        for r in spec.random:
            if r.name != t:
                continue
            if r.is_scalar:
                col = frame["mode"] if "mode" in frame.columns else frame["(Intercept)"]
                e = e + np.where(new, 0.0, col.to_numpy()[safe])
                continue
            # Z of the term's left-hand side on newdata: Σ_c z_ic b_j[c]
            Z, cn = _term_columns(r, sub)
            for c, name in enumerate(cn):
                e = e + np.where(new, 0.0, Z[:, c] * frame[name].to_numpy()[safe])
    eta[ok] = e
    if type == "response":
        return m.family.linkinv(eta)
    return eta


def plogis(x: np.ndarray | float) -> np.ndarray:
    """The inverse logit ``1 / (1 + exp(-x))`` (R's ``plogis``), as a float array."""
    return 1.0 / (1.0 + np.exp(-np.asarray(x, dtype=float)))


def _term(fixef: Mapping[str, float], *parts: str) -> float:
    """Look up an interaction term in either order (``x:LLM1`` or ``LLM1:x``)."""
    for perm in itertools.permutations(parts):
        name = ":".join(perm)
        if name in fixef:
            return float(fixef[name])
    raise InputError(f"probability table: term {':'.join(parts)!r} not among the fixed effects {list(fixef)}")


def probability_frame(fixef: Mapping[str, float], feature: str, factor: str, levels: Sequence[str],
                      coding: str = "sum", sigmas: Sequence[float] = (-2, 0, 2, 4),
                      intercept: str = "(Intercept)") -> pd.DataFrame:
    """Predicted P(correct) per factor level (rows) at ``feature = k`` for k in ``sigmas`` (columns).

    Formula in the module docstring; the last row, "Grand Mean", is plogis of the mean log-odds over levels.
    """
    fixef = {str(k): float(v) for k, v in dict(fixef).items()}
    coding = coding.removeprefix("contr.")
    if intercept not in fixef:
        raise InputError(f"probability table: no {intercept!r} among the fixed effects {list(fixef)}")
    c, suffixes = contrast_matrix(levels, coding)
    b0 = fixef[intercept]
    bx = _term(fixef, feature)
    bl = np.array([_term(fixef, f"{factor}{s}") for s in suffixes])
    bxl = np.array([_term(fixef, feature, f"{factor}{s}") for s in suffixes])
    k = np.asarray(sigmas, dtype=float)
    eta = (b0 + c @ bl)[:, None] + k[None, :] * (bx + c @ bxl)[:, None]
    eta = np.vstack([eta, eta.mean(axis=0, keepdims=True)])
    out = pd.DataFrame(plogis(eta), columns=[float(s) for s in sigmas])
    out.insert(0, factor, [str(lv) for lv in levels] + ["Grand Mean"])
    return out
