"""Model frame and design matrices for a parsed formula, as R's ``model.frame`` /
``model.matrix`` and lme4's ``glFormula``/``mkReTrms`` build them.

* rows with a missing value in any formula variable (or the weights) are dropped,
  as ``na.omit`` does, and counted in ``Design.messages``;
* factors (strings, categoricals, logicals, ``factor(x)``) get levels sorted by code
  point (R under ``LC_COLLATE=C``; numbers numerically) unless ``levels`` gives them;
  pandas categoricals keep their category order;
* the data are read through :class:`mrcstats.io.columns.Columns`, a pandas frame's columns converted when
  used, or a table read without pandas (the command line's ``glmer``); both give the same design;
* contrasts: ``contr.treatment`` by default, ``contr.sum`` with ``contrasts={"f": "sum"}``;
  a factor in a term is coded by contrasts when the term without it is in the model
  (the intercept counts), by indicators otherwise — R's rule in ``model.matrix``;
* column names as R prints them (``LLM1``, ``scaled_tok:LLM1``, ``periodp2``, ``GenderM``),
  the first variable of an interaction varying fastest; ``assign`` maps columns to terms;
* a rank-deficient X loses its aliased columns with lme4's message;
* random-effect terms are ordered as lme4's ``mkReTrms`` (decreasing number of levels); a
  term's Z columns are the model matrix of its left-hand side (``(1 + x | g)``: ``(Intercept)``, ``x``).
"""
from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from mrcstats.errors import InputError, ModelError
from mrcstats.io.columns import Column, Columns, as_columns, column_from_series, is_columns
from mrcstats.models._checks import require_table
from mrcstats.models.family import Family
from mrcstats.models.formula import NAME_RE, ModelSpec, Response, Variable, unquote

if TYPE_CHECKING:
    import pandas as pd

CONTRAST_NAMES = {"sum": "contr.sum", "contr.sum": "contr.sum", "treatment": "contr.treatment",
              "contr.treatment": "contr.treatment"}


@dataclass(frozen=True)
class DesignInfo:
    """What is needed to rebuild X for new data (``predict``) and to refit (``drop1``).

    ``contrasts`` and ``xlevels`` are keyed by the variable label (``LLM``,
    ``factor(k)``) as R's ``attr(X, "contrasts")`` and ``m@frame`` levels are;
    ``scaling`` keeps ``scale(x)``'s centre and scale (R's ``predvars``).
    """

    spec: ModelSpec
    column_names: tuple[str, ...]
    assign: tuple[int, ...]
    contrasts: Mapping[str, str]
    xlevels: Mapping[str, tuple[str, ...]]
    scaling: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    dropped_columns: tuple[str, ...] = ()

    @property
    def term_labels(self) -> tuple[str, ...]:
        return self.spec.term_labels

    def model_matrix(self, data: pd.DataFrame | Columns) -> np.ndarray:
        """X for new data with the training levels, contrasts and scaling (no NA allowed)."""
        cols, _, names, _ = r_model_matrix(self.spec, data, self.contrasts, self.xlevels, self.scaling,
                                          where="newdata")
        keep = [names.index(c) for c in self.column_names]
        return cols[:, keep]


@dataclass(frozen=True, eq=False)
class ReTerm:
    """One random-effects term ``(lhs | g)`` in lme4's parameterisation (``mkReTrms``).

    ``codes[i]`` is row i's level index into ``levels``; ``Z`` (n x q, ``None`` for a
    random intercept) holds the left-hand side's model-matrix columns named ``cnames``
    (lme4's ``cnms``). The term type is lme4's unstructured covariance: the relative
    covariance factor of one level is the lower-triangular q x q matrix T filled column
    by column from θ (``theta_names`` as ``getME(m, "theta")``), lower bound 0 on its
    diagonal, start at the identity; b_j = T u_j with u_j ~ N(0, I). A new term type
    (e.g. an IRT 2PL loading) implements the same few methods: ``ntheta``,
    ``theta_names``, ``lower``, ``start``, ``factor``, ``factor_derivs``.
    """

    name: str
    codes: np.ndarray
    levels: tuple[str, ...]
    cnames: tuple[str, ...] = ("(Intercept)",)
    Z: np.ndarray | None = None

    @property
    def nlevels(self) -> int:
        return len(self.levels)

    @property
    def q(self) -> int:
        return len(self.cnames)

    @property
    def is_scalar(self) -> bool:
        """A random intercept ``(1 | g)`` (the engine's fast paths)."""
        return self.Z is None

    @property
    def ntheta(self) -> int:
        return self.q * (self.q + 1) // 2

    def _tri(self) -> list[tuple[int, int]]:
        """(row, col) of θ's entries in T: the lower triangle column by column."""
        return [(i, j) for j in range(self.q) for i in range(j, self.q)]

    @property
    def theta_names(self) -> tuple[str, ...]:
        c = self.cnames
        return tuple(f"{self.name}.{c[i]}" if i == j else f"{self.name}.{c[i]}.{c[j]}" for i, j in self._tri())

    @property
    def theta_name(self) -> str:
        return self.theta_names[0]

    @property
    def lower(self) -> np.ndarray:
        return np.array([0.0 if i == j else -np.inf for i, j in self._tri()])

    @property
    def start(self) -> np.ndarray:
        return np.array([1.0 if i == j else 0.0 for i, j in self._tri()])

    def factor(self, theta: np.ndarray) -> np.ndarray:
        """T (q x q lower triangular) from this term's θ."""
        T = np.zeros((self.q, self.q))
        for k, (i, j) in enumerate(self._tri()):
            T[i, j] = theta[k]
        return T

    def factor_derivs(self, theta: np.ndarray) -> list[np.ndarray]:
        """dT/dθ_m for each of this term's θ entries (constant for this term type)."""
        out = []
        for i, j in self._tri():
            E = np.zeros((self.q, self.q))
            E[i, j] = 1.0
            out.append(E)
        return out

    def zcol(self, c: int) -> np.ndarray | None:
        """Column c of Z (None stands for a column of ones)."""
        return None if self.Z is None else self.Z[:, c]


@dataclass(frozen=True, eq=False)
class Design:
    """Arrays for the fit: X (n x p), y, weights, random terms, and the response's ``family``.

    Binomial: y is a proportion and ``weights`` the number of trials times any prior weights
    (R's ``weights(m)`` for binomial fits); ``loglik_const`` is sum(log choose(n, k)) for
    cbind/weighted responses (R's ``binomial()$aic`` term), 0 for 0/1 responses. Poisson: y the
    counts, ``weights`` the prior weights (1), ``loglik_const`` = -Σ w log(y!) (``poisson()$aic``).
    """

    info: DesignInfo
    X: np.ndarray
    y: np.ndarray
    weights: np.ndarray
    re: tuple[ReTerm, ...]
    frame: Any          # the model frame: a pandas frame for pandas data, else Columns
    n_dropped: int = 0
    messages: tuple[str, ...] = ()
    loglik_const: float = 0.0
    offset: np.ndarray | None = None

    @property
    def family(self) -> Family:
        """The family of the model (carried by its spec, ``info.spec.family``)."""
        return self.info.spec.family

    @property
    def nobs(self) -> int:
        return int(self.X.shape[0])

    @property
    def column_names(self) -> tuple[str, ...]:
        return self.info.column_names

    @property
    def ngroups(self) -> dict[str, int]:
        return {r.name: r.nlevels for r in self.re}


# ----------------------------------------------------------------------------- helpers


def r_number_text(v: Any) -> str:
    """R's ``as.character`` of a number (15 significant digits, no trailing .0)."""
    if isinstance(v, (bool, np.bool_)):
        return "TRUE" if v else "FALSE"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    x = float(v)
    if math.isfinite(x) and x == int(x) and abs(x) < 1e15:
        return str(int(x))
    s = f"{x:.15g}"
    return s


def is_numeric_column(s: Column | pd.Series) -> bool:
    """A number column (bool is not: it is a factor with levels FALSE/TRUE)."""
    if isinstance(s, Column):
        return s.numeric
    import pandas as pd

    return pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s.dtype)


def factor_levels(s: Column | pd.Series, given: list[str] | tuple[str, ...] | None,
                  what: str) -> tuple[np.ndarray, tuple[str, ...]]:
    """Integer codes and level labels of a column (a :class:`~mrcstats.io.columns.Column` or a pandas
    Series) used as a factor (no missing values).

    Levels: given ones; else a categorical's categories (unused dropped); else
    FALSE/TRUE for logicals, numbers in numeric order, text by code point.
    """
    col = s if isinstance(s, Column) else column_from_series(s)
    if col.kind == "bool":
        codes = col.values.astype(np.int64)
        lv = ["FALSE", "TRUE"]
    elif col.coded:
        codes = col.values
        lv = list(col.levels)
    else:
        uniq, codes = np.unique(col.values, return_inverse=True)
        lv = [r_number_text(u) for u in uniq]
    if given is None:
        used = np.bincount(codes, minlength=len(lv)) > 0
        if not used.all():
            remap = np.cumsum(used) - 1
            codes = remap[codes]
            lv = list(itertools.compress(lv, used))
        return codes, tuple(lv)
    given = [str(g) for g in given]
    if len(set(given)) != len(given):
        raise InputError(f"levels for {what}: {given} has duplicates")
    pos = {g: i for i, g in enumerate(given)}
    present = np.bincount(codes, minlength=len(lv)) > 0
    extra = [x for x, u in zip(lv, present) if u and x not in pos]
    if extra:
        raise InputError(f"levels for {what}: values {extra[:5]} are not among the given levels {given}; "
                         "list every level, e.g. --levels LLM=a,b,c")
    m = np.array([pos.get(x, -1) for x in lv], dtype=np.int64)
    return m[codes], tuple(given)


def _encode_text_columns(frame: pd.DataFrame, levels: Mapping | None) -> pd.DataFrame:
    """Text columns of a pandas model frame as categoricals with code-point sorted levels, encoded once here:
    the design and every refit on ``frame`` (drop1, anova, confint) then work on integer codes."""
    import pandas as pd

    out = None
    for c in frame.columns:
        s = frame[c]
        if (levels and c in levels) or pd.api.types.is_numeric_dtype(s.dtype) \
                or isinstance(s.dtype, pd.CategoricalDtype):      # (bool is a numeric dtype to pandas)
            continue
        col = column_from_series(s)
        if out is None:
            out = frame.copy(deep=False)
        out[c] = pd.Categorical.from_codes(col.values, categories=pd.Index(list(col.levels), dtype=object))
    return frame if out is None else out


def _variable_values(var: Variable, data: Columns, where: str) -> tuple[str, Column]:
    """('numeric' or 'factor', the column) for a variable, transforms applied later."""
    if var.column not in data.columns:
        raise InputError(f"{where}: column {var.column!r} used in the formula is not in the data "
                         f"(columns: {list(data.columns)[:20]})")
    s = data[var.column]
    if var.transform in ("factor", "as.factor"):
        return "factor", s
    if var.transform in ("scale", "log", "exp", "sqrt"):
        if not s.numeric:
            raise InputError(f"{where}: {var.label} needs a numeric column, {var.column!r} is {s.dtype}")
        return "numeric", s
    if s.numeric:
        return "numeric", s
    return "factor", s


def contrast_matrix(levels: Sequence[str], coding: str = "sum") -> tuple[np.ndarray, list[str]]:
    """R's contrast matrix of a factor with ``levels`` and the column suffixes lme4 gives the terms.

    ``sum`` (``contr.sum``): level i < k is e_i, the last level is −1 in every column; suffixes ``1..k-1``.
    ``treatment`` (``contr.treatment``): the first level is the reference (all 0); suffixes are the other
    level names. The same matrices build X in :func:`build_design`.
    """
    k = len(levels)
    kind = "contr." + coding.removeprefix("contr.")
    if k < 2:
        raise InputError(f"contrast_matrix: a factor needs at least two levels, got {list(levels)}")
    if kind not in ("contr.sum", "contr.treatment"):
        raise InputError(f"contrast_matrix: coding must be 'sum' or 'treatment', got {coding!r}")
    suffixes = [str(i + 1) for i in range(k - 1)] if kind == "contr.sum" else [str(lv) for lv in levels[1:]]
    return _contrast_matrix(kind, k), suffixes


def _contrast_matrix(kind: str, k: int) -> np.ndarray:
    if kind == "contr.sum":
        m = np.zeros((k, k - 1))
        m[: k - 1] = np.eye(k - 1)
        m[k - 1] = -1.0
        return m
    m = np.zeros((k, k - 1))
    m[1:] = np.eye(k - 1)
    return m


def r_model_matrix(spec: ModelSpec, data: pd.DataFrame | Columns, contrasts: Mapping[str, str],
                  xlevels: Mapping[str, tuple[str, ...]] | None, scaling: Mapping[str, tuple[float, float]] | None,
                  where: str, full_data: pd.DataFrame | Columns | None = None, levels_arg: Mapping | None = None):
    """(X, assign, names, info dicts) following R's model.matrix rules (``data``: a pandas frame or Columns;
    ``full_data``: the rows before ``na.omit``, whose mean and SD ``scale()`` uses)."""
    data = as_columns(data)
    n = len(data)
    fixed_vars: dict[Variable, None] = {}
    for t in spec.terms:
        for v in t.variables:
            fixed_vars[v] = None
    numeric: dict[Variable, np.ndarray] = {}
    factors: dict[Variable, tuple[np.ndarray, tuple[str, ...]]] = {}
    used_contrasts: dict[str, str] = {}
    out_levels: dict[str, tuple[str, ...]] = {}
    out_scaling: dict[str, tuple[float, float]] = {}
    for v in fixed_vars:
        kind, s = _variable_values(v, data, where)
        if kind == "numeric":
            x = s.floats()
            if v.transform == "scale":
                if scaling is not None and v.label in scaling:
                    c, sc = scaling[v.label]
                else:
                    src = as_columns(full_data)[v.column] if full_data is not None else s
                    allv = src.floats()
                    allv = allv[~np.isnan(allv)]
                    c = float(allv.mean())
                    sc = float(np.sqrt(np.sum((allv - c) ** 2) / max(1, allv.size - 1)))
                    if sc == 0:
                        raise ModelError(f"{where}: scale({v.column}) has zero variance; drop the term")
                out_scaling[v.label] = (c, sc)
                x = (x - c) / sc
            elif v.transform == "log":
                with np.errstate(all="ignore"):
                    x = np.log(x)
            elif v.transform == "exp":
                x = np.exp(x)
            elif v.transform == "sqrt":
                with np.errstate(all="ignore"):
                    x = np.sqrt(x)
            if not np.all(np.isfinite(x)):
                bad = int(np.flatnonzero(~np.isfinite(x))[0])
                raise InputError(f"{where}: {v.label} is not finite at {_row_text(data, bad)}; "
                                 "remove or fix such rows")
            numeric[v] = x
        else:
            given = None
            if xlevels is not None and v.label in xlevels:
                given = xlevels[v.label]
            elif levels_arg and v.column in levels_arg:
                given = levels_arg[v.column]
            codes, lv = factor_levels(s, given, f"{where}: column {v.column!r}")
            factors[v] = (codes, lv)
            out_levels[v.label] = lv
            kind_c = "contr.treatment"
            for key in (v.label, v.column):
                if key in contrasts:
                    kind_c = contrasts[key]
                    break
            if kind_c not in ("contr.sum", "contr.treatment"):
                kind_c = CONTRAST_NAMES.get(kind_c, kind_c)
                if kind_c not in ("contr.sum", "contr.treatment"):
                    raise InputError(f"contrasts for {v.column!r}: {kind_c!r} is not supported (use sum or treatment)")
            used_contrasts[v.label] = kind_c

    term_sets = {frozenset(t.variables) for t in spec.terms}
    if spec.intercept:
        term_sets.add(frozenset())
    blocks: list[np.ndarray] = []
    names: list[str] = []
    assign: list[int] = []
    if spec.intercept:
        blocks.append(np.ones(n))
        names.append("(Intercept)")
        assign.append(0)
    for ti, t in enumerate(spec.terms, start=1):
        cols: list = [None]          # None stands for a column of ones
        cnames = [""]
        for v in t.variables:
            if v in numeric:
                vc, vn = [numeric[v]], [v.label]
            else:
                codes, lv = factors[v]
                k = len(lv)
                use_contr = frozenset(t.variables) - {v} in term_sets
                if use_contr:
                    if k < 2:
                        raise ModelError(f"{where}: factor {v.column!r} has only one level ({lv[0] if lv else ''!r}) "
                                         "after removing missing rows; contrasts need 2 or more levels — drop it "
                                         "from the formula or check the data")
                    cm = _contrast_matrix(used_contrasts[v.label], k)
                    vc = [cm[codes, j] for j in range(k - 1)]
                    if used_contrasts[v.label] == "contr.sum":
                        vn = [f"{v.label}{j + 1}" for j in range(k - 1)]
                    else:
                        vn = [f"{v.label}{lv[j + 1]}" for j in range(k - 1)]
                else:
                    vc = [(codes == j).astype(float) for j in range(k)]
                    vn = [f"{v.label}{lv[j]}" for j in range(k)]
            # earlier variables vary fastest
            cols = [b if a is None else a * b for b in vc for a in cols]
            cnames = [f"{a}:{b}" if a else b for b in vn for a in cnames]
        blocks.extend(np.ones(n) if c is None else c for c in cols)
        names.extend(cnames)
        assign.extend([ti] * len(cnames))
    # built column by column into Xᵀ (C order), so X = Xᵀ.T is Fortran-ordered and the
    # engine's Xᵀ needs no copy
    XT = np.empty((len(blocks), n))
    for j, c in enumerate(blocks):
        XT[j] = c
    X = XT.T
    return X, assign, names, (used_contrasts, out_levels, out_scaling)


def rank_columns(X: np.ndarray, tol: float = 1e-7) -> list[int]:
    """Columns kept by a Gram-Schmidt pass in order (R's ``qr`` with ``dqrdc2`` pivoting)."""
    if X.shape[1] == 0:
        return []
    # work on the cross-product for speed on tall X
    G = X.T @ X
    p = G.shape[0]
    keep: list[int] = []
    norms = np.sqrt(np.maximum(np.diag(G), 0))
    for j in range(p):
        if norms[j] == 0:
            continue
        if keep:
            Gk = G[np.ix_(keep, keep)]
            g = G[keep, j]
            try:
                coef = np.linalg.solve(Gk, g)
            except np.linalg.LinAlgError:  # pragma: no cover
                coef = np.linalg.lstsq(Gk, g, rcond=None)[0]
            resid2 = G[j, j] - g @ coef
        else:
            resid2 = G[j, j]
        if resid2 > 0 and math.sqrt(resid2) > tol * norms[j]:
            keep.append(j)
    return keep


def _arith(tokens: tuple[str, ...], data: Columns, where: str) -> np.ndarray:
    """Evaluate a cbind() argument: names, numbers, + - * / and parentheses (no eval)."""
    pos = 0

    def peek():
        return tokens[pos] if pos < len(tokens) else None

    def atom():
        nonlocal pos
        t = peek()
        if t is None:
            raise InputError(f"{where}: incomplete cbind() argument {' '.join(tokens)!r}")
        pos += 1
        if t == "(":
            v = expr()
            pos += 1
            return v
        if t == "-":
            return -atom()
        if NAME_RE.fullmatch(t):
            col = unquote(t)
            if col not in data.columns:
                raise InputError(f"{where}: column {col!r} used in cbind() is not in the data")
            s = data[col]
            if not s.numeric and s.kind != "bool":
                raise InputError(f"{where}: cbind() needs numeric counts, column {col!r} is {s.dtype}")
            return s.floats()
        return np.full(len(data), float(t))

    def term():
        nonlocal pos
        v = atom()
        while peek() in ("*", "/"):
            op = tokens[pos]
            pos += 1
            w = atom()
            v = v * w if op == "*" else v / w
        return v

    def expr():
        nonlocal pos
        v = term()
        while peek() in ("+", "-"):
            op = tokens[pos]
            pos += 1
            w = term()
            v = v + w if op == "+" else v - w
        return v

    return expr()


def _numeric_response(spec: ModelSpec, data: Columns, where: str, model: str, holds: str) -> np.ndarray:
    """The response of a one-column family as floats (``model``/``holds`` word the messages)."""
    r = spec.response
    if r.is_cbind:
        raise InputError(f"{where}: {r.text}: cbind() responses are for the binomial family; a {model} takes one "
                         f"column of {holds}")
    col = r.column
    if col not in data.columns:
        raise InputError(f"{where}: response column {col!r} is not in the data (columns: {list(data.columns)[:20]})")
    s = data[col]
    if not s.numeric and s.kind != "bool":
        raise InputError(f"{where}: response {col!r} must hold {holds} for a {model}, {_not_numbers(s, col, data)}")
    return s.floats()


def _row_text(data: Columns, i: int) -> str:
    """Row ``i`` of ``data`` as messages name it (:meth:`~mrcstats.io.columns.Columns.row_text`), preceded by the
    file's name when the rows are those of one plain table file (``attrs``: one source, a table format)."""
    from mrcstats.io.formats import TABLE_FORMATS

    text = data.row_text(i)
    sources = data.attrs.get("sources") or ()
    if len(sources) == 1 and data.attrs.get("format") in TABLE_FORMATS and text.startswith("data row"):
        text = f"{sources[0]}, {text}"
    return text


def _is_number(text: str) -> bool:
    try:
        float(text)
    except (TypeError, ValueError):
        return False
    return True


def _not_numbers(s: Column, col: str, data: Columns) -> str:
    """Why the text or categorical column ``s`` (``col``) of ``data`` is not numbers, and how to fix it: its first
    cell that is not a number, by row (:func:`_row_text`), column and value; a column
    of numbers stored as text or categories (no such cell) is told to be converted."""
    if s.coded:
        bad = np.array([not _is_number(v) for v in s.levels] + [False])    # (the last slot: a missing cell, -1)
        rows = np.flatnonzero(bad[s.values])
        if rows.size:
            i = int(rows[0])
            return (f"but it holds text: {_row_text(data, i)}, column {col!r}, has "
                    f"{s.levels[s.values[i]]!r}. Put a number in that cell (leave it empty for a missing value) "
                    f"and read the data again")
    return (f"but it is {s.dtype} (numbers stored as text or categories): convert the column to numbers "
            f"(pandas: df[{col!r}] = pd.to_numeric(df[{col!r}]))")


def _count_response(spec: ModelSpec, data: Columns, where: str, levels_arg: Mapping | None):
    """(y, ones, False) for a count family (Poisson): a numeric column of non-negative whole numbers."""
    col = spec.response.column
    y = _numeric_response(spec, data, where, "count model", "counts (non-negative whole numbers)")
    bad = np.flatnonzero(~np.isfinite(y) | (y < 0) | (y != np.round(y)))
    if bad.size:
        raise InputError(f"{where}: response {col!r} must hold counts (non-negative whole numbers); "
                         f"{_row_text(data, bad[0])} has {y[bad[0]]:g}")
    return y, np.ones(len(y)), False


def _continuous_response(spec: ModelSpec, data: Columns, where: str, levels_arg: Mapping | None):
    """(y, ones, False) for the Gaussian family (lmer): a numeric column of finite numbers."""
    col = spec.response.column
    y = _numeric_response(spec, data, where, "linear mixed model", "numeric values")
    bad = np.flatnonzero(~np.isfinite(y))
    if bad.size:
        raise InputError(f"{where}: response {col!r} is not finite at {_row_text(data, bad[0])} ({y[bad[0]]})")
    return y, np.ones(len(y)), False


def _response(spec: ModelSpec, data: Columns, where: str, levels_arg: Mapping | None):
    """(y proportion, trials, is_counts) for the binomial family, R's ``binomial()$initialize`` rules."""
    r = spec.response
    if r.is_cbind:
        s = _arith(r.successes, data, where)  # type: ignore[arg-type]
        f = _arith(r.failures, data, where)  # type: ignore[arg-type]
        bad = np.flatnonzero((s < 0) | (f < 0))
        if bad.size:
            raise InputError(f"{where}: {r.text} has a negative count at {_row_text(data, bad[0])} "
                             f"(successes {s[bad[0]]:g}, failures {f[bad[0]]:g})")
        n = s + f
        with np.errstate(invalid="ignore", divide="ignore"):
            y = np.where(n > 0, s / np.where(n > 0, n, 1), 0.0)
        return y, n, True
    col = r.column
    if col not in data.columns:
        raise InputError(f"{where}: response column {col!r} is not in the data (columns: {list(data.columns)[:20]})")
    s = data[col]
    if s.kind == "bool":
        return s.floats(), np.ones(len(data)), False
    if s.numeric:
        y = s.floats()
        bad = np.flatnonzero((y < 0) | (y > 1))
        if bad.size:
            raise InputError(f"{where}: response {col!r} must be 0/1 (or a proportion with weights); "
                             f"{_row_text(data, bad[0])} has {y[bad[0]]:g}. Use cbind(successes, failures) for counts")
        return y, np.ones(len(data)), False
    given = (levels_arg or {}).get(col)
    codes, lv = factor_levels(s, given, f"{where}: response {col!r}")
    if len(lv) != 2:
        raise InputError(f"{where}: response {col!r} must have two levels (the first is failure), "
                         f"found {len(lv)}: {list(lv)[:6]}")
    return (codes > 0).astype(float), np.ones(len(data)), False


def _group_codes(factors: tuple[str, ...], data: Columns, where: str) -> tuple[np.ndarray, tuple[str, ...]]:
    parts = []
    for col in factors:
        if col not in data.columns:
            raise InputError(f"{where}: grouping column {col!r} is not in the data (columns: {list(data.columns)[:20]})")
        parts.append(factor_levels(data[col], None, f"{where}: grouping column {col!r}"))
    if len(parts) == 1:
        return parts[0]
    # R's f1:f2 - levels ordered with the first factor varying slowest, unused dropped
    key = np.zeros(len(data), dtype=np.int64)
    for c, lv in parts:
        key = key * len(lv) + c
    uniq, codes = np.unique(key, return_inverse=True)
    labels = []
    for u in uniq:
        idx = []
        for c, lv in reversed(parts):
            idx.append(lv[u % len(lv)])
            u //= len(lv)
        labels.append(":".join(reversed(idx)))
    return codes.astype(np.int64), tuple(labels)


def _slope_term(r, frame: Columns, codes: np.ndarray, lv: tuple[str, ...], data: Columns,
                where: str) -> ReTerm:
    """A term with a left-hand side beyond ``1``: Z is the model matrix of the left-hand side
    (R's ``model.matrix(~ lhs)``, treatment contrasts), checked so that its covariance can
    be estimated."""
    sub = ModelSpec(formula=r.text, response=Response(text=""), terms=r.terms, intercept=r.intercept)
    Z, _assign, cn, _info = r_model_matrix(sub, frame, {}, None, None, where, full_data=data)
    Z = np.ascontiguousarray(Z)
    q, nl = Z.shape[1], len(lv)
    if q > nl:
        raise InputError(f"random-effects term {r.text}: {q} columns ({', '.join(cn)}) but only {nl} levels of "
                         f"{r.name!r}; a {q} x {q} covariance cannot be estimated from {nl} groups — use fewer "
                         "slope columns (a factor with fewer levels, or a numeric variable)")
    keep = rank_columns(Z)
    if len(keep) < q:
        bad = [cn[j] for j in range(q) if j not in keep]
        raise InputError(f"random-effects term {r.text}: column(s) {bad} are linear combinations of the others; "
                         "remove them from the term")
    if r.intercept:
        cnt = np.bincount(codes, minlength=nl).astype(float)
        for c in range(1, q):
            x = Z[:, c]
            mean = np.bincount(codes, weights=x, minlength=nl) / np.maximum(cnt, 1)
            dev = x - mean[codes]
            if float(np.max(np.abs(dev))) <= 1e-10 * max(1.0, float(np.max(np.abs(x)))):
                raise InputError(f"random-effects term {r.text}: {cn[c]!r} is constant within every level of "
                                 f"{r.name!r}, so its random slope is confounded with the random intercept; "
                                 f"drop it from the term (keep it as a fixed effect) or use (1 | {r.name})")
    return ReTerm(r.name, codes, lv, tuple(cn), Z)


def _order_reterms(terms: list[ReTerm]) -> list[ReTerm]:
    """lme4 ``mkReTrms``: if any term has more levels than the one before it, reorder
    by ``rev(order(nl))`` (decreasing levels; ties in reverse order of appearance)."""
    nl = [t.nlevels for t in terms]
    if any(b > a for a, b in itertools.pairwise(nl)):
        asc = sorted(range(len(nl)), key=lambda i: (nl[i], i))
        return [terms[i] for i in reversed(asc)]
    return terms


def reterms_matrix(re: Sequence[ReTerm], n: int):
    """Z (n x q, sparse CSC) of the random-effects terms in lme4's column order (term by term, level-major,
    a term's columns together) and each term's first column (offsets, length len(re) + 1)."""
    from scipy import sparse

    sizes = [t.nlevels * t.q for t in re]
    offs = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
    rows, cols, vals = [], [], []
    ar = np.arange(n)
    for k, t in enumerate(re):
        codes = np.asarray(t.codes, np.int64)
        for c in range(t.q):
            rows.append(ar)
            cols.append(offs[k] + codes * t.q + c)
            vals.append(np.ones(n) if t.Z is None else np.asarray(t.Z[:, c], float))
    Z = sparse.csc_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n, int(offs[-1])))
    return Z, offs


# ----------------------------------------------------------------------------- public


def build_design(spec: ModelSpec, data: pd.DataFrame | Columns, *,
                 contrasts: Mapping[str, str] | None = None,
                 levels: Mapping[str, Any] | None = None, weights: str | np.ndarray | None = None,
                 allow_slopes: bool = False, where: str = "data") -> Design:
    """Build the design of a parsed model ``spec`` of the family it carries (``spec.family``, set by
    :meth:`~mrcstats.models.formula.ModelSpec.with_family`; a spec without one is an InputError, never a silent
    binomial).

    ``contrasts`` maps a column (or variable label) to ``"sum"``/``"treatment"``;
    ``levels`` maps a column to its level order; ``weights`` is a column name or an
    array of prior weights (R's ``weights=``). The response is read as the family says
    (``family.response``: ``"binomial"`` or ``"count"``).

    ``data`` is a pandas frame (the design's ``frame`` is then the pandas model frame, text columns as
    categoricals) or :class:`~mrcstats.io.columns.Columns` read without pandas (``frame`` is then Columns);
    the arrays are the same either way.
    """
    if not isinstance(spec, ModelSpec):
        raise InputError(f"build_design: expected a parsed model (mrcstats.models.formula.parse_formula(text)"
                         f".with_family(...)), got {type(spec).__name__}")
    family = spec.require_family()
    require_table(data, "build_design")
    from_pandas = not is_columns(data)
    src = as_columns(data)
    if not spec.random:
        raise ModelError(f"formula {spec.formula!r}: no random-effects term such as (1 | g); "
                         "glmer needs at least one (use a GLM otherwise)")
    contr = {}
    for k, v in (contrasts or {}).items():
        kk = CONTRAST_NAMES.get(str(v))
        if kk is None:
            raise InputError(f"contrasts for {k!r}: {v!r} is not supported (use sum or treatment)")
        contr[k] = kk
    known = set(spec.fixed_columns) | {v.label for t in spec.terms for v in t.variables}
    for k in contr:
        if k not in known:
            raise InputError(f"contrasts given for {k!r}, which is not a variable of the fixed part "
                             f"{sorted(known)}")

    cols = list(spec.columns)
    missing = [c for c in cols if c not in data.columns]
    if missing:
        raise InputError(f"{where}: column(s) {missing} used in the formula are not in the data "
                         f"(columns: {list(data.columns)[:20]})")
    wvec = None
    if weights is not None:
        if isinstance(weights, str):
            if weights not in data.columns:
                raise InputError(f"{where}: weights column {weights!r} is not in the data")
            wcol = src[weights]
            if not wcol.numeric:
                raise InputError(f"{where}: weights column {weights!r} must be numeric, it is {wcol.dtype}")
            wvec = wcol.floats()
        else:
            wvec = np.asarray(weights, dtype=float)
            if wvec.shape != (len(data),):
                raise InputError(f"weights: expected {len(data)} values, got {wvec.shape}")
    # na.omit on the formula variables (and weights)
    miss = np.zeros(len(data), dtype=bool)
    for c in cols:
        miss |= np.asarray(data[c].isna(), dtype=bool) if from_pandas else src[c].missing()
    if wvec is not None:
        miss |= np.isnan(wvec)
    messages: list[str] = []
    n_dropped = int(miss.sum())
    if from_pandas:
        frame = data.loc[~miss, cols] if n_dropped else data[cols]
        if frame.attrs:     # a log's attrs (skipped rows, source) would be deep-copied by every pandas step here
            frame.attrs = {}
        frame = _encode_text_columns(frame, levels)
        view = Columns.from_pandas(frame)
        if src.index is None:     # rows numbered by position: keep them, and the file, for messages (row_text)
            view = dataclasses.replace(view, index=np.flatnonzero(~miss) if n_dropped else None,
                                       attrs=dict(getattr(data, "attrs", None) or {}))
    else:
        view = frame = src.select(cols).take(~miss) if n_dropped else src.select(cols)
    if wvec is not None:
        wvec = wvec[~miss]
        if np.any(wvec < 0):
            raise InputError(f"{where}: weights must be non-negative")
    if n_dropped:
        messages.append(f"{n_dropped} row{'s' if n_dropped != 1 else ''} with missing values in "
                        f"{', '.join(cols)}{' or the weights' if weights is not None else ''} dropped (na.omit)")
    if len(frame) == 0:
        raise InputError(f"{where}: no rows left after removing rows with missing values in {cols}")

    y, trials, counts = _RESPONSES[family.response](spec, view, where, levels)
    X, assign, names, (used_contr, xlevels, scaling) = r_model_matrix(
        spec, view, contr, None, None, where, full_data=src, levels_arg=levels)
    keep = rank_columns(X)
    dropped: tuple[str, ...] = ()
    if len(keep) < X.shape[1]:
        dropped = tuple(names[j] for j in range(X.shape[1]) if j not in keep)
        k = len(dropped)
        messages.append(f"fixed-effect model matrix is rank deficient so dropping {k} column"
                        f"{'s' if k > 1 else ''} / coefficient{'s' if k > 1 else ''} ({', '.join(dropped)})")
        X = np.asfortranarray(X[:, keep])
        names = [names[j] for j in keep]
        assign = [assign[j] for j in keep]

    wts = trials if wvec is None else trials * wvec
    # family()$aic = 2 Σ w (b(η) − yη) − 2 const: the constant part (binomial: the log binomial coefficients)
    const, cmsgs = family.loglik_const(y, trials, wvec, counts)
    messages.extend(cmsgs)

    re_terms = []
    group_cache: dict[tuple[str, ...], tuple[np.ndarray, tuple[str, ...]]] = {}
    for r in spec.random:
        if r.factors not in group_cache:
            group_cache[r.factors] = _group_codes(r.factors, view, where)
        codes, lv = group_cache[r.factors]
        if r.is_scalar:
            re_terms.append(ReTerm(r.name, codes, lv))
        else:
            re_terms.append(_slope_term(r, view, codes, lv, src, where))
    re_terms = _order_reterms(re_terms)
    nobs = len(frame)
    for t in re_terms:
        if t.nlevels < 2:
            raise ModelError(f"grouping factor {t.name!r} has a single level ({t.levels[0]!r}); "
                             "grouping factors must have > 1 sampled level")
        if t.nlevels >= nobs:
            raise ModelError(f"number of levels of grouping factor {t.name!r} ({t.nlevels}) must be < number of "
                             f"observations ({nobs}); each group needs more than one row")
        if t.nlevels * t.q >= nobs:   # lme4's check.nobs.vs.nRE = "stop"
            raise InputError(f"random-effects term for {t.name!r} ({', '.join(t.cnames)}): number of observations "
                             f"(={nobs}) <= number of random effects (={t.nlevels * t.q}); the random-effects "
                             "parameters are unidentifiable — simplify the term")

    info = DesignInfo(spec=spec, column_names=tuple(names), assign=tuple(assign), contrasts=used_contr,
                      xlevels=xlevels, scaling=scaling, dropped_columns=dropped)
    return Design(info=info, X=X, y=np.ascontiguousarray(y, dtype=float), weights=np.ascontiguousarray(wts, float),
                  re=tuple(re_terms), frame=frame, n_dropped=n_dropped, messages=tuple(messages),
                  loglik_const=const)


#: the response reader of each ``Family.response`` kind
_RESPONSES = {"binomial": _response, "count": _count_response, "continuous": _continuous_response}
