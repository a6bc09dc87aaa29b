"""Estimated marginal means and pairwise contrasts of a fitted GLMM, as R's emmeans.

:func:`emmeans` follows emmeans 1.8 (``ref_grid`` -> ``emmeans`` -> ``summary.emmGrid``)
for a ``GlmerResult`` of any family (:mod:`mrcstats.models.family`) from either engine:

* **Reference grid** (``ref_grid``): every factor of the fixed part at each of its levels
  (``factor(k)`` of a number counts as a factor; logical columns too); every numeric
  covariate at its mean over the rows used in the fit (``cov.reduce = mean``) — of the
  column itself, so ``log(x)`` is evaluated at ``log(mean(x))`` and ``scale(x)`` with the
  fit's centre and scale; a covariate with two or fewer distinct values is kept at those
  values (emmeans's ``cov.keep = "2"``); ``at={"x": [0, 1], "LLM": ["a", "b"]}`` sets a
  covariate's values or restricts a factor's levels. Each grid row gets its row ``x_g`` of the
  fixed-effects design (:meth:`DesignInfo.model_matrix`, the same code as ``predict``).
* **Marginal means** (``emmeans(m, specs, by)``, ``weights = "equal"``): for each combination
  of the ``specs`` and ``by`` variables, ``l = mean_g x_g`` over the grid rows with that
  combination (equal weights over the other variables), ``emmean = l'β``,
  ``SE = sqrt(l' V l)`` with ``V = vcov(m)``; ``df = Inf``; ``asymp.LCL/UCL = emmean ∓ z_{.975} SE``.
* **Response scale** (``type = "response"``): ``prob = plogis(emmean)`` (Poisson: ``rate = exp(emmean)``;
  the family's ``linkinv``), ``SE = SE_link · dμ/dη`` (delta method), interval ``linkinv`` of the link-scale
  interval ("Intervals are back-transformed from the logit scale").
* **Pairs** (``pairs(em, adjust)`` = ``pairs.emmGrid``/``contrast(method = "pairwise")``):
  within each ``by`` group, level i minus level j for i < j in grid order, labelled
  ``"a - b"`` (levels containing ``- + / *`` in parentheses, numeric levels prefixed with
  the variable name, emmeans's ``parens`` and ``enhance.levels``); ``z.ratio = estimate / SE``;
  p values two-sided normal, adjusted within each ``by`` group: ``tukey`` =
  ``ptukey(sqrt(2)|z|, k, df = Inf, lower = FALSE)`` with k the number of means,
  ``holm``/``bonferroni`` = ``p.adjust`` over the family, ``sidak`` = 1 - (1 - p)^n, ``none``;
  a family of one contrast is not adjusted (emmeans's ``.adj.p.value``). On the response scale
  a logit model's contrasts are odds ratios: ``odds.ratio = exp(estimate)`` (a log model's: ``ratio``),
  ``SE = odds.ratio · SE_link``, ``null = 1``, ``z.ratio`` and p from the log scale, labels
  ``"a / b"``.

Linear mixed models (:func:`mrcstats.lmer`, emmeans's ``lmer.df = "satterthwaite"``): each mean and each contrast
l'β gets its own denominator df, Satterthwaite's (lmerTest's ``contest1D``) or Kenward-Roger's (pbkrtest, with its
adjusted covariance in place of ``vcov``); intervals ``lower.CL/upper.CL`` use
``t_{df}``, pairs give ``t.ratio`` and ``p`` from ``t_{df}``, Tukey's adjustment ``ptukey(..., df)``.

Rank-deficient fits: a grid row's linear function that is not estimable (emmeans's
``estimability::is.estble``: its squared projection on the null space of the training X
exceeds 1e-8 of its squared norm) gives NA, and so do contrasts involving it.

References: Searle, Speed & Milliken (1980), *Population marginal means in the linear model*,
Am. Stat. 34(4); Lenth (2016), *Least-squares means: the R package lsmeans*, J. Stat. Softw.
69(1); R package emmeans 1.8.4 (``ref_grid``, ``emmeans``, ``contrast.emmGrid``,
``summary.emmGrid``, ``.adj.p.value``).
"""
from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from mrcstats._dist import norm_ppf, norm_sf, t_ppf, t_sf
from mrcstats._pformat import format_pval
from mrcstats._repr import Result
from mrcstats._words import plural
from mrcstats.errors import InputError
from mrcstats.models._checks import check_level
from mrcstats.models.design import is_numeric_column
from mrcstats.models.family import BINOMIAL, Family, RecordsFamily
from mrcstats.models.family_table import family_labels, require
from mrcstats.models.formula import ModelSpec

if TYPE_CHECKING:  # pragma: no cover
    from mrcstats.models.results import GlmerResult

ADJUST_METHODS = ("tukey", "holm", "bonferroni", "sidak", "none")
_PARENS = re.compile(r"-|\+|/|\*")  # emmeans's default get_emm_option("parens")[1]
_GRID_LIMIT = 1_000_000
_ESTBLE_TOL = 1e-8  # estimability::is.estble


# ----------------------------------------------------------------------------- reference grid


@dataclass(frozen=True)
class GridVariable:
    """One variable of the reference grid.

    ``values`` go into the design (level labels for factors, numbers for covariates);
    ``labels`` are how the levels print; ``numeric`` is emmeans's ``.is.num`` of the grid
    column (covariates and ``factor()`` of a number), which prefixes the variable name to the
    levels in contrast labels (``k1 - k2``).
    """

    name: str
    kind: str  # "factor" | "covariate"
    values: tuple[Any, ...]
    labels: tuple[str, ...]
    numeric: bool


@dataclass(frozen=True, eq=False)
class ReferenceGrid:
    """emmeans's ``ref_grid``: the variables and one design row per grid point (first variable fastest)."""

    variables: tuple[GridVariable, ...]
    X: np.ndarray            # grid rows x kept fixed-effect columns
    estimable: np.ndarray    # bool per grid row

    def variable(self, name: str) -> GridVariable:
        for v in self.variables:
            if v.name == name:
                return v
        raise KeyError(name)  # pragma: no cover


def _fixed_variables(m: GlmerResult | ModelSpec) -> dict[str, list]:
    """column -> the formula Variables that use it, in order of first use."""
    spec = m if isinstance(m, ModelSpec) else m.info.spec  # type: ignore[union-attr]
    out: dict[str, list] = {}
    for t in spec.terms:
        for v in t.variables:
            out.setdefault(v.column, [])
            if v not in out[v.column]:
                out[v.column].append(v)
    return out


def _used_rows(m: GlmerResult) -> pd.DataFrame:
    """The data rows used in the fit (emmeans's ``recover_data``: the data after ``na.omit``)."""
    if m.frame is None:
        raise InputError("emmeans() needs the data the model was fitted on, and this fit kept none (m.frame is None)")
    from mrcstats.io.columns import as_frame

    frame = as_frame(m.frame)           # a fit on Columns (read without pandas) kept those
    spec = m.info.spec  # type: ignore[union-attr]
    cols = [c for c in spec.columns if c in frame.columns]
    w = (m.fit_options or {}).get("weights")
    if isinstance(w, str) and w in frame.columns:
        cols.append(w)
    miss = np.zeros(len(frame), dtype=bool)
    for c in cols:
        miss |= np.asarray(frame[c].isna(), dtype=bool)
    return frame.loc[~miss] if miss.any() else frame


def _as_list(v: Any) -> list:
    if isinstance(v, (str, bytes)) or not isinstance(v, (Sequence, np.ndarray, pd.Series, pd.Index)):
        return [v]
    return list(v)


def reference_grid(m: GlmerResult, at: Mapping[str, Any] | None = None) -> ReferenceGrid:
    """The reference grid of a fit, as emmeans's ``ref_grid(m, at = at)`` (see the module docstring)."""
    require(m, "emmeans")
    _check_model(m)
    info = m.info
    data = _used_rows(m)
    fvars = _fixed_variables(m)
    at = dict(at or {})
    unknown = [k for k in at if k not in fvars]
    if unknown:
        raise InputError(f"at={{...}}: {unknown} {'is' if len(unknown) == 1 else 'are'} not a variable of the fixed "
                         f"part of {m.formula!r}; variables: {list(fvars)}")
    _refuse_nesting(m, data, fvars)
    variables: list[GridVariable] = []
    for col, vs in fvars.items():
        coerced = [v for v in vs if v.transform in ("factor", "as.factor")]
        s = data[col]
        is_factor = bool(coerced) or not is_numeric_column(s)
        if coerced and len(coerced) < len(vs):
            raise InputError(f"emmeans: column {col!r} is used both as a factor ({coerced[0].label}) and as a number "
                             "in the formula; emmeans of such a model is not supported")
        if is_factor:
            label = vs[0].label
            levels = tuple(info.xlevels.get(label, ()))  # type: ignore[union-attr]
            if not levels:  # pragma: no cover - every factor of the fixed part has levels
                raise InputError(f"emmeans: no levels recorded for factor {label!r}")
            if col in at:
                want = [str(x) if not isinstance(x, (bool, np.bool_)) else ("TRUE" if x else "FALSE")
                        for x in _as_list(at[col])]
                want = [_fmt_level(x, s) for x in want]
                bad = [x for x in want if x not in levels]
                if bad or not want:
                    raise InputError(f"at={{{col!r}: ...}}: {bad or 'no levels'} not among the levels of {col!r} "
                                     f"{list(levels)}")
                levels = tuple(x for x in levels if x in set(want))  # R keeps the levels' order
            variables.append(GridVariable(col, "factor", levels, levels, numeric=bool(coerced) and is_numeric_column(s)))
            continue
        x = np.asarray(s, dtype=float)
        if col in at:
            try:
                vals = tuple(float(v) for v in _as_list(at[col]))
            except (TypeError, ValueError):
                raise InputError(f"at={{{col!r}: {at[col]!r}}}: {col!r} is a numeric covariate; give numbers") from None
            if not vals or not all(math.isfinite(v) for v in vals):
                raise InputError(f"at={{{col!r}: {at[col]!r}}}: give one or more finite numbers")
        else:
            lo, hi = float(np.min(x)), float(np.max(x))
            two = bool(np.all((x == lo) | (x == hi)))  # at most two distinct values: kept (cov.keep = "2")
            vals = tuple(dict.fromkeys((lo, hi))) if two else (float(np.mean(x)),)
        variables.append(GridVariable(col, "covariate", vals, tuple(_fmt_num(v) for v in vals), numeric=True))
    size = math.prod(len(v.values) for v in variables) if variables else 1
    if size > _GRID_LIMIT:
        raise InputError(f"emmeans: the reference grid would have {size:,} rows (levels: "
                         f"{ {v.name: len(v.values) for v in variables} }); restrict it with at={{...}}")
    # expand.grid: the first variable varies fastest
    combos = list(itertools.product(*[v.values for v in reversed(variables)]))
    grid = pd.DataFrame({v.name: [c[len(variables) - 1 - i] for c in combos] for i, v in enumerate(variables)})
    if not variables:
        grid = pd.DataFrame(index=range(1))
    X = info.model_matrix(grid) if variables else np.ones((1, len(m.fixef)))  # type: ignore[union-attr]
    estimable = np.ones(len(grid), dtype=bool)
    if info.dropped_columns:  # type: ignore[union-attr]
        estimable = _estimable(m, data, grid)
    return ReferenceGrid(tuple(variables), np.asarray(X, dtype=float), estimable)


def _refuse_nesting(m: GlmerResult, data: pd.DataFrame, fvars: Mapping[str, list]) -> None:
    """A factor without its own main effect that appears only crossed with other factors
    (``f/h`` = ``f + f:h``) is nested; emmeans then averages over the cells that occur
    (``.find_nests``), which is not implemented here."""
    spec = m.info.spec  # type: ignore[union-attr]
    factors = {c for c, vs in fvars.items()
               if any(v.transform in ("factor", "as.factor") for v in vs) or not is_numeric_column(data[c])}
    mains = {t.variables[0].column for t in spec.terms if len(t.variables) == 1}
    for t in spec.terms:
        cols = [v.column for v in t.variables]
        fac = [c for c in cols if c in factors]
        for c in fac:
            if c not in mains and len(fac) > 1:
                raise InputError(f"emmeans(): factor {c!r} appears in {t.label!r} without its own main effect, a "
                                 f"nested structure (as in 'a/b'); emmeans of nested factors is not supported — "
                                 f"write the model with crossed factors ('a * b') to use emmeans()")


def _fmt_level(x: str, s: pd.Series) -> str:
    """A level given in ``at=`` as the design labels it (numbers as R prints them)."""
    if is_numeric_column(s):
        try:
            from mrcstats.models.design import r_number_text

            return r_number_text(float(x))
        except ValueError:
            return x
    return x


def _fmt_num(v: float) -> str:
    return f"{v:.15g}"


def _estimable(m: GlmerResult, data: pd.DataFrame, grid: pd.DataFrame) -> np.ndarray:
    """``estimability::is.estble`` of each grid row against the null space of the full training X."""
    from mrcstats.models.design import r_model_matrix

    info = m.info
    Xf, _, _, _ = r_model_matrix(info.spec, data, info.contrasts, info.xlevels, info.scaling, where="data")  # type: ignore[union-attr]
    Lf, _, _, _ = r_model_matrix(info.spec, grid, info.contrasts, info.xlevels, info.scaling, where="grid")  # type: ignore[union-attr]
    r = np.linalg.qr(Xf, mode="r")
    _, sv, vt = np.linalg.svd(r)
    rank = int(np.sum(sv > 1e-7 * sv[0])) if sv.size else 0
    N = vt[rank:].T
    chk = Lf @ N
    return np.sum(chk * chk, axis=1) < _ESTBLE_TOL * np.sum(Lf * Lf, axis=1)


def _check_model(m: GlmerResult) -> None:
    if getattr(m, "info", None) is None:
        raise InputError("emmeans() needs the design of the fit (formula terms, levels, contrasts); m.info is None")


# ----------------------------------------------------------------------------- specs


def _names(x: Any, what: str) -> tuple[str, ...]:
    if x is None:
        return ()
    parts = re.split(r"\s*[+:*]\s*", x.strip()) if isinstance(x, str) else [str(p).strip() for p in _as_list(x)]
    parts = [p for p in parts if p]
    if not parts and what == "specs":
        raise InputError("emmeans(): specs names no variable; give e.g. specs='LLM'")
    return tuple(parts)


def _resolve(name: str, fvars: Mapping[str, list], what: str, formula: str) -> str:
    if name in fvars:
        return name
    for col, vs in fvars.items():
        if any(v.label == name for v in vs):
            return col
    raise InputError(f"emmeans(): {what} {name!r} is not a variable of the fixed part of {formula!r}; "
                     f"variables: {list(fvars)}")


# ----------------------------------------------------------------------------- results


def _fmt_cell(v: float, digits: int = 4) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "nonEst"
    if isinstance(v, float) and math.isinf(v):
        return "Inf" if v > 0 else "-Inf"
    if v == 0:
        return "0"
    return f"{v:.{digits}g}"


def _text_table(df: pd.DataFrame, by: Sequence[str], pcols: Sequence[str] = ()) -> str:
    def block(d: pd.DataFrame) -> list[str]:
        cols = [c for c in d.columns if c not in by]
        cells = {c: [(format_pval(v) if c in pcols else _fmt_cell(v)) if isinstance(v, (float, np.floating))
                     else str(v) for v in d[c]] for c in cols}
        w = {c: max([len(c)] + [len(x) for x in cells[c]]) for c in cols}
        first = {c: not isinstance(d[c].iloc[0], (float, np.floating)) for c in cols} if len(d) else {}
        lines = [" " + " ".join(c.ljust(w[c]) if first.get(c) else c.rjust(w[c]) for c in cols)]
        for i in range(len(d)):
            lines.append(" " + " ".join(cells[c][i].ljust(w[c]) if first.get(c) else cells[c][i].rjust(w[c])
                                        for c in cols))
        return lines

    if not by:
        return "\n".join(block(df))
    out: list[str] = []
    keys = list(dict.fromkeys(tuple(r) for r in df[list(by)].itertuples(index=False)))
    for k in keys:
        sel = np.ones(len(df), dtype=bool)
        for b, v in zip(by, k):
            sel &= (df[b] == v).to_numpy()
        out.append(", ".join(f"{b} = {v}" for b, v in zip(by, k)) + ":")
        out.extend(block(df.loc[sel]))
        out.append("")
    return "\n".join(out).rstrip("\n")


@dataclass(frozen=True, eq=False, repr=False)
class EmmeansResult(Result, RecordsFamily):
    """Estimated marginal means (emmeans's ``summary(emmeans(m, specs, by = by, type = type))``).

    ``estimate``/``se`` are on the link (logit) scale whatever ``type``; ``to_frame()`` gives
    emmeans's columns: the ``specs`` and ``by`` variables, ``emmean`` (link) or ``prob``
    (response), ``SE``, ``df`` (= inf), ``asymp.LCL``, ``asymp.UCL``. ``L`` holds the linear
    functions of the fixed effects (one row per mean), ``V`` = L vcov(m) L'.
    """

    specs: tuple[str, ...]
    by: tuple[str, ...]
    type: str
    grid: pd.DataFrame
    estimate: np.ndarray
    se: np.ndarray
    L: np.ndarray
    V: np.ndarray
    level: float
    averaged_over: tuple[str, ...]
    covariates: Mapping[str, tuple[float, ...]]
    numeric: tuple[str, ...]
    notes: tuple[str, ...]
    family: Family                    # required: the fit's (emmeans() passes m.family)
    formula: str = ""
    df: np.ndarray | None = None      # per mean (lmer fits: Satterthwaite or Kenward-Roger); None = Inf
    df_fun: Any = field(default=None, repr=False)   # contrast rows in β -> df (for pairs)

    STORED_FAMILY = BINOMIAL          # means stored before results recorded their family (RecordsFamily)
    NOTES_FIELD = "notes"

    @property
    def link(self) -> str:
        """The link's R name, the family's (``logit``, ``log``, ``identity``)."""
        return self.family.link

    @property
    def est_name(self) -> str:
        return family_labels(self.family).response_col if self.type == "response" else "emmean"

    def to_frame(self) -> pd.DataFrame:
        if self.df is not None:       # emmeans on an lmer fit: t quantiles, columns lower.CL / upper.CL
            q = t_ppf(0.5 + self.level / 2, self.df)
            df = self.grid.copy()
            df["emmean"] = self.estimate
            df["SE"] = self.se
            df["df"] = self.df
            df["lower.CL"] = self.estimate - q * self.se
            df["upper.CL"] = self.estimate + q * self.se
            return df.reset_index(drop=True)
        z = norm_ppf(0.5 + self.level / 2)
        lo, hi = self.estimate - z * self.se, self.estimate + z * self.se
        df = self.grid.copy()
        if self.type == "response":
            fam = self.family
            df[family_labels(fam).response_col] = fam.linkinv(self.estimate)
            df["SE"] = np.abs(fam.mu_eta(self.estimate)) * self.se
            lo, hi = fam.linkinv(lo), fam.linkinv(hi)
        else:
            df["emmean"] = self.estimate
            df["SE"] = self.se
        df["df"] = math.inf
        df["asymp.LCL"] = lo
        df["asymp.UCL"] = hi
        return df.reset_index(drop=True)

    def records(self) -> list[dict[str, Any]]:
        """One dict per mean (the CLI's ``"emmeans"`` list)."""
        return self.to_frame().to_dict(orient="records")

    def to_dict(self) -> dict[str, Any]:
        return {"specs": list(self.specs), "by": list(self.by), "type": self.type, "level": self.level,
                "averaged_over": list(self.averaged_over),
                "covariates": {k: list(v) for k, v in self.covariates.items()},
                "notes": list(self.notes), "emmeans": self.records()}

    def summary(self) -> str:
        return _text_table(self.to_frame(), self.by) + "\n\n" + "\n".join(self.notes)

    def __str__(self) -> str:
        return self.summary()

    def pairs(self, adjust: str = "tukey") -> PairsResult:
        """Pairwise contrasts (:func:`pairs`)."""
        return pairs(self, adjust=adjust)


@dataclass(frozen=True, eq=False, repr=False)
class PairsResult(Result, RecordsFamily):
    """Pairwise contrasts of marginal means (emmeans's ``summary(pairs(em, adjust = adjust))``).

    ``estimate``/``se``/``z`` are on the link scale (log odds ratios); ``p`` is adjusted within
    each ``by`` group by ``adjust`` (the method actually used: a family of one contrast is
    ``"none"``). ``to_frame()``: ``contrast``, the ``by`` variables, ``estimate`` (link) or
    ``odds.ratio`` with ``null`` = 1 (response), ``SE``, ``df`` (= inf), ``z.ratio``, ``p.value``.
    """

    contrast: tuple[str, ...]
    by: tuple[str, ...]
    by_grid: pd.DataFrame
    type: str
    estimate: np.ndarray
    se: np.ndarray
    z: np.ndarray
    p: np.ndarray
    p_unadjusted: np.ndarray
    adjust: str
    family_size: int
    n_contrasts: int
    notes: tuple[str, ...]
    family: Family                    # required: the means' (pairs() passes em.family)
    C: np.ndarray = field(repr=False, default_factory=lambda: np.zeros((0, 0)))
    df: np.ndarray | None = None      # per contrast (lmer fits); None = Inf (z tests)

    STORED_FAMILY = BINOMIAL          # contrasts stored before results recorded their family (RecordsFamily)
    NOTES_FIELD = "notes"

    @property
    def est_name(self) -> str:
        return family_labels(self.family).ratio_col if self.type == "response" else "estimate"

    def to_frame(self) -> pd.DataFrame:
        df = pd.DataFrame({"contrast": list(self.contrast)})
        for b in self.by:
            df[b] = self.by_grid[b].to_numpy()
        if self.type == "response" and self.df is None:
            df[family_labels(self.family).ratio_col] = np.exp(self.estimate)
            df["SE"] = np.maximum(np.exp(self.estimate), np.finfo(float).eps) * self.se
            df["df"] = math.inf
            df["null"] = 1.0
        else:
            df["estimate"] = self.estimate
            df["SE"] = self.se
            df["df"] = math.inf if self.df is None else self.df
        df["z.ratio" if self.df is None else "t.ratio"] = self.z    # lmer fits: t tests with their own df
        df["p.value"] = self.p
        return df

    def records(self) -> list[dict[str, Any]]:
        """One dict per contrast (the CLI's ``"pairs"`` list)."""
        return self.to_frame().to_dict(orient="records")

    def to_dict(self) -> dict[str, Any]:
        return {"by": list(self.by), "type": self.type, "adjust": self.adjust, "family_size": self.family_size,
                "notes": list(self.notes), "pairs": self.records()}

    def summary(self) -> str:
        return _text_table(self.to_frame(), self.by, pcols=("p.value",)) + "\n\n" + "\n".join(self.notes)

    def __str__(self) -> str:
        return self.summary()


# ----------------------------------------------------------------------------- public


def emmeans(m: GlmerResult, specs: str | Sequence[str] = "LLM", by: str | Sequence[str] | None = None,
            type: str = "link", at: Mapping[str, Any] | None = None, level: float = 0.95,
            lmer_df: str = "satterthwaite") -> EmmeansResult:
    """Estimated marginal means of a binomial GLMM, as R's ``emmeans(m, specs, by = by, type = type, at = at)``.

    Parameters
    ----------
    m : a fitted :class:`GlmerResult` (native or lme4 engine), or a model with ``emmeans_view(type)`` giving the
        linear model its means are of (a :class:`~mrcstats.models.clmm.ClmmResult`: the latent scale).
    specs : the variable(s) whose levels the means are for: ``"LLM"``, ``["LLM", "cond"]``,
        ``"LLM:cond"``, or emmeans's one-sided formula ``"~ LLM | cond"`` (``|`` gives ``by``).
    by : variable(s) to group by (the means are computed for each combination; ``pairs`` then
        compares within each group).
    type : ``"link"`` (logit scale, column ``emmean``) or ``"response"`` (probability, ``prob``).
    at : ``{"x": [0, 1]}`` covariate values or ``{"LLM": ["a", "b"]}`` factor levels for the grid.
    level : confidence level of the asymptotic intervals.
    lmer_df : for a linear mixed model (:func:`mrcstats.lmer`): ``"satterthwaite"`` (each mean's df as lmerTest's
        ``contest1D``; emmeans's ``lmer.df = "satterthwaite"``) or ``"kenward-roger"`` (pbkrtest's adjusted
        covariance and ``Lb_ddf``, emmeans's ``lmer.df = "kenward-roger"``). The intervals then use t quantiles
        (``lower.CL``, ``upper.CL``) and ``pairs`` gives ``t.ratio`` with each contrast's own df.

    Returns
    -------
    EmmeansResult

    Formulas: see the module docstring (emmeans 1.8.4's ``ref_grid``/``emmeans``/``summary.emmGrid``).
    """
    require(m, "emmeans")
    if type not in ("link", "response"):
        raise InputError(f"emmeans(): type must be 'link' or 'response', got {type!r}")
    view = getattr(m, "emmeans_view", None)
    if callable(view):           # a model whose means live on another scale (clmm: the latent variable)
        m = view(type)
    _check_model(m)
    level = check_level(level, "emmeans():")
    sp, bv = resolve_specs(m.info.spec, specs, by)  # type: ignore[union-attr]
    rg = reference_grid(m, at)
    facs = sp + bv
    names = [v.name for v in rg.variables]
    sizes = [len(v.values) for v in rg.variables]
    # grid index of each row per variable (first variable fastest)
    idx = np.indices(tuple(reversed(sizes))).reshape(len(sizes), -1)[::-1] if sizes else np.zeros((0, 1), int)
    fac_pos = [names.index(f) for f in facs]
    fac_sizes = [sizes[p] for p in fac_pos]
    # mean index: first of facs fastest
    key = np.zeros(idx.shape[1], dtype=np.int64)
    for p, k in zip(reversed(fac_pos), reversed(fac_sizes)):
        key = key * k + idx[p]
    nmeans = int(np.prod(fac_sizes)) if fac_sizes else 1
    counts = np.bincount(key, minlength=nmeans).astype(float)
    L = np.zeros((nmeans, rg.X.shape[1]))
    np.add.at(L, key, rg.X)
    L /= counts[:, None]
    est_ok = np.ones(nmeans, dtype=bool)
    np.logical_and.at(est_ok, key, rg.estimable)
    beta = m.fixef.to_numpy(dtype=float)
    Vb = m.vcov.to_numpy(dtype=float)
    df_fun = None
    if callable(getattr(m, "contrast_df", None)):      # an lmer fit: t tests with Satterthwaite / KR df
        key = str(lmer_df).lower().replace("_", "-")
        if key not in ("satterthwaite", "kenward-roger"):
            raise InputError(f"emmeans(): lmer_df must be 'satterthwaite' or 'kenward-roger', got {lmer_df!r}")
        ddf = "Kenward-Roger" if key == "kenward-roger" else "Satterthwaite"
        if ddf == "Kenward-Roger":
            Vb = m.vcov_kr().to_numpy(dtype=float)          # emmeans: the adjusted covariance with KR df

        def df_fun(Lc, _m=m, _d=ddf):
            return _m.contrast_df(Lc, ddf=_d)
    est = L @ beta
    Vm = L @ Vb @ L.T
    se = np.sqrt(np.maximum(np.diag(Vm), 0.0))
    est[~est_ok] = np.nan
    se[~est_ok] = np.nan
    # the mean's labels, first spec fastest
    combos = list(itertools.product(*[range(k) for k in reversed(fac_sizes)]))
    grid = pd.DataFrame({f: [_display(rg.variables[fac_pos[i]], c[len(facs) - 1 - i]) for c in combos]
                         for i, f in enumerate(facs)})
    averaged = tuple(v.name for v in rg.variables if v.name not in facs and len(v.values) > 1)
    covs = {v.name: v.values for v in rg.variables if v.kind == "covariate"}
    notes = []
    dfs = None
    if df_fun is not None:
        dfs = np.full(nmeans, np.nan)
        if est_ok.any():
            dfs[est_ok] = df_fun(L[est_ok])
        notes.append(f"Degrees-of-freedom method: {key}")
    if averaged:
        notes.append(f"Results are averaged over the levels of: {', '.join(averaged)}")
    if df_fun is not None:
        pass
    elif type == "link":
        notes.append(f"Results are given on the {m.family.link} (not the response) scale.")
    notes.append(f"Confidence level used: {level:g}")
    if type == "response" and df_fun is None:
        notes.append(f"Intervals are back-transformed from the {m.family.link} scale")
    if _in_interaction(m, facs):
        notes.append("NOTE: Results may be misleading due to involvement in interactions")
    if not est_ok.all():
        notes.append(f"{plural(int((~est_ok).sum()), 'mean')} not estimable in this rank-deficient fit (NA)")
    return EmmeansResult(specs=sp, by=bv, type=type, grid=grid, estimate=est, se=se, L=L, V=Vm, level=level,
                         averaged_over=averaged, covariates=covs,
                         numeric=tuple(v.name for v in rg.variables if v.numeric and v.name in facs),
                         notes=tuple(notes), formula=m.formula, family=m.family, df=dfs,
                         df_fun=df_fun)


def _in_interaction(m: GlmerResult, facs: Sequence[str]) -> bool:
    """emmeans's ``.some.term.contains``: a term has all of ``facs`` and more variables."""
    for t in m.info.spec.terms:  # type: ignore[union-attr]
        cols = {v.column for v in t.variables}
        if set(facs) <= cols and len(cols) > len(facs):
            return True
    return False


def resolve_specs(spec: ModelSpec, specs: Any, by: Any = None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The ``specs`` and ``by`` columns of :func:`emmeans` for a formula (checked before any fit).

    ``specs``: ``"LLM"``, ``["LLM", "cond"]``, ``"LLM:cond"`` or ``"~ LLM | cond"``; names may be
    columns or variable labels (``factor(k)``).
    """
    if isinstance(specs, str) and "|" in specs:
        if by is not None:
            raise InputError(f"emmeans(): specs {specs!r} has '|' and by= is given too; use one of them")
        specs, by = specs.split("|", 1)
    if isinstance(specs, str):
        specs = specs.strip().lstrip("~")
    fvars = _fixed_variables(spec)
    sp = tuple(dict.fromkeys(_resolve(s, fvars, "specs", spec.formula) for s in _names(specs, "specs")))
    bv = tuple(dict.fromkeys(_resolve(s, fvars, "by", spec.formula) for s in _names(by, "by")))
    both = set(sp) & set(bv)
    if both:
        raise InputError(f"emmeans(): {sorted(both)} cannot be both in specs and in by")
    return sp, bv


def _display(v: GridVariable, i: int) -> Any:
    return v.values[i] if v.kind == "covariate" else v.labels[i]


def _label(v: Any) -> str:
    if isinstance(v, float):
        return _fmt_num(v)
    return str(v)


def pairs(em: EmmeansResult, adjust: str = "tukey") -> PairsResult:
    """Pairwise contrasts of marginal means, as R's ``pairs(em, adjust = adjust)``.

    Within each ``by`` group, mean i minus mean j for i < j (grid order). ``adjust``:
    ``"tukey"`` (emmeans's default: ``ptukey(sqrt(2)|z|, nmeans, Inf, lower.tail = FALSE)``,
    the studentized range with infinite df), ``"holm"``, ``"bonferroni"`` (``p.adjust`` over
    the group's contrasts), ``"sidak"`` or ``"none"``. When ``em`` is on the response scale the
    contrasts print as odds ratios (``exp`` of the log-odds difference, SE by the delta method;
    tests on the log scale), as emmeans reports them.
    """
    if not isinstance(em, EmmeansResult):
        raise InputError(f"pairs() takes the result of mrcstats.emmeans(), got {type(em).__name__}")
    adj = str(adjust).lower()
    if adj not in ADJUST_METHODS:
        raise InputError(f"pairs(): adjust must be one of {list(ADJUST_METHODS)}, got {adjust!r}")
    g = em.grid
    spec_labels = [" ".join((f"{s}{_label(r[s])}" if s in em.numeric else _label(r[s])) for s in em.specs)
                   for _, r in g.iterrows()]
    if any(_PARENS.search(x) for x in spec_labels):
        spec_labels = [f"({x})" if _PARENS.search(x) else x for x in spec_labels]
    nmeans = len(g)
    if em.by:
        bykeys = [tuple(r) for r in g[list(em.by)].itertuples(index=False)]
        groups = list(dict.fromkeys(bykeys))
        rows_by = [[i for i, k in enumerate(bykeys) if k == grp] for grp in groups]
    else:
        groups, rows_by = [()], [list(range(nmeans))]
    k = len(rows_by[0])
    if k < 2:
        raise InputError(f"pairs(): {list(em.specs)} has a single level in the reference grid; nothing to compare")
    labels: list[str] = []
    C_rows: list[np.ndarray] = []
    by_rows: list[tuple] = []
    fam: list[int] = []
    for gi, rows in enumerate(rows_by):
        for a, b in itertools.combinations(range(len(rows)), 2):
            c = np.zeros(nmeans)
            c[rows[a]], c[rows[b]] = 1.0, -1.0
            C_rows.append(c)
            labels.append(f"{spec_labels[rows[a]]} - {spec_labels[rows[b]]}")
            by_rows.append(groups[gi])
            fam.append(gi)
    C = np.vstack(C_rows)
    ok = np.isfinite(em.estimate)
    est = C @ np.where(ok, em.estimate, 0.0)
    se = np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", C, em.V, C), 0.0))
    bad = (np.abs(C) > 0) @ (~ok) > 0
    est[bad] = np.nan
    se[bad] = np.nan
    with np.errstate(divide="ignore", invalid="ignore"):
        z = est / se
    dfc = None
    if em.df_fun is not None:                 # lmer: each contrast's own df, t tests (emmeans's lmer.df)
        dfc = np.full(len(C), np.nan)
        if (~bad).any():
            dfc[~bad] = em.df_fun(C[~bad] @ em.L)
        p_raw = 2.0 * t_sf(np.abs(z), dfc)
    else:
        p_raw = 2.0 * norm_sf(np.abs(z))
    n_contr = k * (k - 1) // 2
    used = "none" if n_contr == 1 else adj
    p = np.array(p_raw, dtype=float)
    fam_arr = np.asarray(fam)
    for gi in range(len(rows_by)):
        sel = fam_arr == gi
        p[sel] = _adjust(p_raw[sel], z[sel], used, k, n_contr, None if dfc is None else dfc[sel])
    if em.type == "response":
        labels = [x.replace(" - ", " / ") for x in labels]
    by_grid = pd.DataFrame(by_rows, columns=list(em.by)) if em.by else pd.DataFrame(index=range(len(labels)))
    notes = [n for n in em.notes if n.startswith(("Results are averaged", "Degrees-of-freedom"))]
    if dfc is not None:
        pass
    elif em.type == "link":
        notes.append(f"Results are given on the {family_labels(em.family).contrast_scale} (not the response) scale.")
    if used == "tukey" and k >= 3:
        notes.append(f"P value adjustment: tukey method for comparing a family of {k} estimates")
    elif used not in ("none", "tukey"):
        notes.append(f"P value adjustment: {used} method for {n_contr} tests")
    if em.type == "response" and dfc is None:
        notes.append(f"Tests are performed on the {family_labels(em.family).contrast_scale} scale")
    return PairsResult(contrast=tuple(labels), by=em.by, by_grid=by_grid, type=em.type, estimate=est, se=se, z=z,
                       p=p, p_unadjusted=p_raw, adjust=used, family_size=k, n_contrasts=n_contr, notes=tuple(notes),
                       C=C, family=em.family, df=dfc)


def _adjust(p: np.ndarray, z: np.ndarray, method: str, k: int, n: int, df: np.ndarray | None = None) -> np.ndarray:
    """emmeans's ``.adj.p.value`` for one family (``n`` contrasts of ``k`` means; df = Inf unless given)."""
    if method == "none":
        return p
    if method == "tukey":
        from scipy.stats import studentized_range

        out = np.full(p.shape, np.nan)
        ok = np.isfinite(z)
        out[ok] = studentized_range.sf(math.sqrt(2.0) * np.abs(z[ok]), k, np.inf if df is None else df[ok])
        return np.clip(out, 0.0, 1.0)
    if method == "sidak":
        return 1.0 - (1.0 - p) ** n
    if method == "bonferroni":
        return np.minimum(1.0, n * p)
    # holm: R's p.adjust(p, "holm", n = n), NAs kept in place
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    if ok.size:
        o = ok[np.argsort(p[ok], kind="stable")]
        adj = np.minimum(1.0, np.maximum.accumulate((n - np.arange(o.size)) * p[o]))
        out[o] = adj
    return out
