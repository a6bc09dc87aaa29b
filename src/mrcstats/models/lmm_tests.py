"""lmerTest's and pbkrtest's tests of an lmer fit's fixed effects: Satterthwaite's degrees of freedom, Kenward-Roger's
adjusted covariance and df, the F tests of contrasts and the type I / III anova table.

Satterthwaite degrees of freedom as lmerTest 3.1 (``as_lmerModLmerTest``, ``contest1D``; Kuznetsova,
Brockhoff & Christensen 2017, J. Stat. Softw. 82(13)): with the variance parameters φ = (θ, σ) and the
unprofiled deviance D(φ) (lmerTest's ``devfun_vp``: log|L|² + r²/σ² + n log(2πσ²), REML adding
log|RX|² − p log(2πσ²)), A = 2 H⁻¹ (H the Hessian of D at φ̂; eigenvalues ≤ 1e-8 left out, as lmerTest),
C(φ) = σ² (RXᵀRX(θ))⁻¹ and for each coefficient (contrast l) ν = 2 (lᵀCl)² / (gᵀ A g), g_k = lᵀ ∂C/∂φ_k l;
lmerTest differentiates numerically (numDeriv's Richardson ``hessian`` and ``jacobian``); here the Jacobian of
C is exact (−σ² R⁻¹ ∂RXᵀRX R⁻¹, 2σ R⁻¹) and the Hessian's θθ block central differences of the exact gradient
(its σ row exact), the same numbers to about 1e-7 relative from a tenth of the deviance evaluations.
p = 2 P(T_ν > |t|). Kenward & Roger (1997) as pbkrtest: :class:`KenwardRoger`.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import linalg as sla
from scipy import special

from mrcstats._pformat import format_pval_columns
from mrcstats._repr import Result
from mrcstats.errors import InputError, ModelError
from mrcstats.models.design import reterms_matrix
from mrcstats.models.family_table import require
from mrcstats.models.formula import ModelSpec

if TYPE_CHECKING:
    import pandas as pd

    from mrcstats.models.lmm_fit import LmmSystem
    from mrcstats.models.lmm_results import LmerResult



def satterthwaite(sys_: LmmSystem, e: Mapping[str, Any], th: np.ndarray, sigma: float,
                  V: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """Satterthwaite's df of each coefficient at the optimum (see the module docstring): A = 2 H⁻¹ of the variance
    parameters φ = (θ, σ) (eigenvalues ≤ 1e-8 left out), J the Jacobian of vec C(φ) (p² x len(φ)),
    ν_j = 2 V_jj² / (g_jᵀ A g_j). Returns (A, J, ν, messages about the Hessian)."""
    p = V.shape[0]
    messages = []
    H = sys_.varpar_hessian(th, sigma)
    evals, evecs = np.linalg.eigh(H)
    pos = evals > 1e-8
    if np.any(evals < -1e-8):
        messages.append(f"Model failed to converge with {int(np.sum(evals < -1e-8))} negative eigenvalue(s) of "
                        "the Hessian of the variance parameters")
    if np.any(np.abs(evals) <= 1e-8):
        messages.append("Model may not have converged with eigenvalue(s) of the variance parameters' Hessian "
                        "close to zero")
    A = 2.0 * (evecs[:, pos] / evals[pos]) @ evecs[:, pos].T
    J = sys_.covbeta_jacobian(e, sigma)                   # p² x len(varpar)
    df = np.empty(p)
    for j in range(p):
        g = J[j * p + j]
        df[j] = 2.0 * V[j, j] ** 2 / float(g @ A @ g)
    return A, J, df, messages




def ddf_method(ddf: str) -> str:
    """``"Satterthwaite"`` or ``"Kenward-Roger"`` from lmerTest's spellings of ``ddf``."""
    key = str(ddf).lower().replace("_", "-").replace(" ", "-")
    if key in ("satterthwaite", "sat", "satt"):
        return "Satterthwaite"
    if key in ("kenward-roger", "kr", "kenwardroger"):
        return "Kenward-Roger"
    raise InputError(f"lmer: ddf must be 'Satterthwaite' or 'Kenward-Roger', got {ddf!r}")


def _ftable(F: float, ndf: int, ddf: float, sigma2: float) -> dict[str, float]:
    """lmerTest's ``mk_Ftable``."""
    p = float(special.fdtrc(ndf, ddf, F)) if ndf > 0 and math.isfinite(F) else math.nan
    return {"Sum Sq": F * sigma2 * ndf, "Mean Sq": F * sigma2, "NumDF": float(ndf), "DenDF": float(ddf),
            "F value": F, "Pr(>F)": p}


def _fstat_ddf(nu: np.ndarray, tol: float = 1e-8) -> float:
    """lmerTest's ``get_Fstat_ddf``."""
    nu = np.asarray(nu, float)
    if len(nu) == 1:
        return float(nu[0])
    if np.all(np.abs(np.diff(nu)) < tol):
        return float(np.mean(nu))
    if np.any(nu <= 2):
        return 2.0
    E = float(np.sum(nu / (nu - 2)))
    return 2 * E / (E - len(nu))


def _zapsmall(x: np.ndarray, digits: int = 7) -> np.ndarray:
    """R's ``zapsmall``: round to ``digits`` significant digits of the largest entry."""
    x = np.asarray(x, float)
    mx = float(np.max(np.abs(x))) if x.size else 0.0
    if not mx > 0:
        return x
    return np.round(x, max(0, digits - math.ceil(math.log10(mx))))


def _doolittle(x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """lmerTest's ``doolittle(x)$L`` (unit lower-triangular factor, entries below eps zeroed)."""
    n = x.shape[0]
    L = np.eye(n)
    U = np.zeros((n, n))
    for i in range(n):
        U[i] = x[i] - L[i, :i] @ U[:i]
        for j in range(i + 1, n):
            v = x[j, i] - L[j, :i] @ U[:i, i]
            L[j, i] = 0.0 if abs(U[i, i]) < eps else v / U[i, i]
    L[np.abs(L) < eps] = 0.0
    return L


def _term_matrix(spec: ModelSpec, terms, intercept: bool, frame: pd.DataFrame, info, contrasts):
    from dataclasses import replace

    from mrcstats.models.design import r_model_matrix

    sub = replace(spec, terms=tuple(terms), intercept=intercept)
    X, assign, names, _ = r_model_matrix(sub, frame, contrasts, info.xlevels, info.scaling, where="anova")
    return np.asarray(X), list(assign), list(names)


def anova_contrasts(m: LmerResult, type: int = 3) -> dict[str, np.ndarray]:
    """Per fixed-effect term its hypothesis matrix (rows: contrasts of the fit's coefficients), as lmerTest's
    ``get_contrasts_type1`` / ``get_contrasts_type3``."""
    require(m, "anova.F")
    info, frame = m.info, m.frame
    if info is None or frame is None:
        raise InputError("lmer anova needs the fit's design and data; refit with mrcstats.lmer")
    if info.dropped_columns:
        raise InputError(f"lmer anova: the fixed-effect model matrix is rank deficient (dropped "
                         f"{', '.join(info.dropped_columns)}); anova of such a fit is not supported — drop the "
                         "aliased terms from the formula")
    spec = info.spec
    labels = list(spec.term_labels)
    if not labels:
        return {}
    Xo = info.model_matrix(frame)
    assign = np.asarray(info.assign)
    p = Xo.shape[1]
    if type == 1 or p <= 1 or len(labels) <= 1:
        XtX = Xo.T @ Xo
        Lt = _doolittle(XtX).T if p > 1 else np.ones((1, 1))
        return {lab: Lt[assign == i + 1] for i, lab in enumerate(labels)}
    codings = list(info.contrasts.values())
    if codings and all(c == "contr.treatment" for c in codings):
        X, xassign, xnames = Xo, list(info.assign), list(info.column_names)
    else:
        X, xassign, xnames = _term_matrix(spec, spec.terms, spec.intercept, frame, info, {})
    # the rank-deficient design of every term coded by indicators (lmerTest's get_rdX)
    blocks, rnames = [], []
    if spec.intercept:
        blocks.append(np.ones((len(frame), 1)))
        rnames.append("(Intercept)")
    for t in spec.terms:
        Xt, _a, nt = _term_matrix(spec, [t], False, frame, info, {})
        blocks.append(Xt)
        rnames.extend(nt)
    rdX = np.hstack(blocks)
    XtX = X.T @ X
    cho = sla.cho_factor(XtX)
    L = _zapsmall(sla.cho_solve(cho, X.T @ rdX).T)          # t(ginv(X) %*% rdX): rdX params x X coefficients
    cols = {lab: np.flatnonzero(np.asarray(xassign) == i + 1) for i, lab in enumerate(labels)}
    numeric = {v.label for t in spec.terms for v in t.variables if v.label not in info.xlevels}
    tvars = {t.label: {v.label for v in t.variables} for t in spec.terms}
    order = {t.label: t.order for t in spec.terms}
    for lab in sorted(labels, key=lambda s: -order[s]):             # stable: R's order(decreasing = TRUE)
        contains = [o for o in labels if tvars[lab] < tvars[o] and tvars[lab] & numeric == tvars[o] & numeric]
        if contains:
            Xc = L[:, np.concatenate([cols[o] for o in contains])]
            Y = L[:, cols[lab]]
            coef, *_ = np.linalg.lstsq(Xc, Y, rcond=None)
            L[:, cols[lab]] = _zapsmall(Y - Xc @ coef)
    try:
        L = L[[rnames.index(c) for c in xnames]]
    except ValueError:  # pragma: no cover - the two codings name their columns alike
        raise ModelError("lmer anova: the treatment-coded columns are not among the indicator columns") from None
    out = {lab: L[:, cols[lab]].T for lab in labels}
    if X is not Xo:
        mp = _zapsmall(sla.cho_solve(cho, X.T @ Xo))              # ginv(X) %*% Xorig
        out = {lab: Lk @ mp for lab, Lk in out.items()}
    return {lab: Lk[np.abs(Lk).sum(axis=1) > 1e-8] for lab, Lk in out.items()}


KR_MAX_ROWS = 5000   # pbkrtest's Kenward-Roger works with n x n matrices; so does this one


class KenwardRoger:
    """Kenward & Roger (1997, Biometrics 53(3)) as pbkrtest 0.5 computes it (``vcovAdj_internal``, ``Lb_ddf``,
    ``.KR_adjust``), on the REML fit: Σ = Σ_r γ_r G_r (γ: the random-effect (co)variances σ²(TTᵀ)_ij of each term
    and σ²; G_r = Z_s (I ⊗ E_ij) Z_sᵀ, and I for σ²), Φ = vcov(m), P_r = −XᵀΣ⁻¹G_rΣ⁻¹X,
    Q_rs = XᵀΣ⁻¹G_rΣ⁻¹G_sΣ⁻¹X, the information I_rs = tr(Σ⁻¹G_rΣ⁻¹G_s) − 2 tr(ΦQ_rs) + tr(ΦP_rΦP_s), W = 2 I⁻¹,
    the adjusted covariance Φ_A = Φ + 2Φ [Σ_rs W_rs (Q_rs − P_rΦP_s)] Φ; for a hypothesis L (q rows)
    Θ = Lᵀ(LΦLᵀ)⁻¹L, A₁ = Σ W_rs tr(ΘΦP_rΦ) tr(ΘΦP_sΦ), A₂ = Σ W_rs tr(ΘΦP_rΦΘΦP_sΦ), and the F statistic's
    scale and denominator df from them (pbkrtest's formulas). Dense in the rows, as pbkrtest."""

    def __init__(self, m: LmerResult):
        design = m.design
        if design is None:
            raise InputError("lmer: Kenward-Roger needs the fit's design; refit with mrcstats.lmer")
        if not m.reml:
            raise InputError("lmer: Kenward-Roger's method is only available for REML fits (as lmerTest); refit "
                             "without --ml")
        n = design.nobs
        if n > KR_MAX_ROWS:
            raise InputError(f"lmer: Kenward-Roger works with {n} x {n} matrices (as pbkrtest); this fit has "
                             f"{n} rows, the limit is {KR_MAX_ROWS}; use Satterthwaite's df")
        X = np.asarray(design.X, float)
        Z, offs = reterms_matrix(design.re, n)
        s2 = m.sigma ** 2
        th = m.theta.to_numpy()
        o = 0
        gam, G = [], []
        for k, t in enumerate(design.re):
            T = t.factor(th[o:o + t.ntheta])
            o += t.ntheta
            C = s2 * T @ T.T
            Zs = Z[:, offs[k]:offs[k + 1]].toarray()
            for i, j in t._tri():
                gam.append(C[i, j])
                Gm = Zs[:, i::t.q] @ Zs[:, j::t.q].T
                G.append(Gm + Gm.T if i != j else Gm)
        gam.append(s2)
        G.append(np.eye(n))
        Sigma = sum(g * Gm for g, Gm in zip(gam, G))
        Si = sla.cho_solve(sla.cho_factor(Sigma), np.eye(n))
        Phi = m.vcov.to_numpy()
        TT = Si @ X
        HH = [Gm @ Si for Gm in G]
        OO = [H @ X for H in HH]
        r = len(G)
        PP = [-(O.T @ TT) for O in OO]
        PP = [0.5 * (P + P.T) for P in PP]                         # forceSymmetric
        QQ = {(a, b): OO[a].T @ Si @ OO[b] for a in range(r) for b in range(a, r)}
        IE2 = np.empty((r, r))
        for a in range(r):
            for b in range(a, r):
                kt = float(np.sum(HH[a].T * HH[b]))
                IE2[a, b] = IE2[b, a] = (kt - 2 * float(np.sum(Phi * QQ[a, b]))
                                         + float(np.sum((Phi @ PP[a]) * (PP[b] @ Phi))))
        condi = float(np.min(np.abs(np.linalg.eigvalsh(IE2))))
        W = 2 * (np.linalg.inv(IE2) if condi > 1e-10 else np.linalg.pinv(IE2))
        W = 0.5 * (W + W.T)
        UU = np.zeros_like(Phi)
        for a in range(r - 1):
            for b in range(a + 1, r):
                UU += W[a, b] * (QQ[a, b] - PP[a] @ Phi @ PP[b])
        UU = UU + UU.T
        for a in range(r):
            UU += W[a, a] * (QQ[a, a] - PP[a] @ Phi @ PP[a])
        self.Phi, self.P, self.W = Phi, PP, W
        self.PhiA = Phi + 2 * Phi @ UU @ Phi
        self.beta = m.fixef.to_numpy()

    def _adjust(self, L: np.ndarray) -> tuple[float, float, float]:
        """(df2, F scaling, q) of pbkrtest's ``.KR_adjust`` / ``Lb_ddf``."""
        Phi = self.Phi
        Theta = L.T @ np.linalg.solve(L @ Phi @ L.T, L)
        TP = Theta @ Phi
        U = [TP @ P @ Phi for P in self.P]
        A1 = A2 = 0.0
        r = len(U)
        for a in range(r):
            for b in range(a, r):
                e = 1.0 if a == b else 2.0
                A1 += e * self.W[a, b] * float(np.trace(U[a])) * float(np.trace(U[b]))
                A2 += e * self.W[a, b] * float(np.sum(U[a] * U[b].T))
        q = float(np.linalg.matrix_rank(L))
        B = (A1 + 6 * A2) / (2 * q)
        g = ((q + 1) * A1 - (q + 4) * A2) / ((q + 2) * A2)
        den = 3 * q + 2 * (1 - g)
        c1, c2, c3 = g / den, (q - g) / den, (q + 2 - g) / den
        V0 = 1 + c1 * B
        V1 = 1 - c2 * B
        V2 = 1 - c3 * B
        V0 = 0.0 if abs(V0) < 1e-10 else V0
        x = 1 - A2 / q
        ratio = 1.0 if abs(x) < 1e-14 and abs(V1) < 1e-14 else x / V1
        rho = ratio ** 2 * V0 / V2 / q
        df2 = 4 + (q + 2) / (q * rho - 1)
        scale = 1.0 if abs(df2 - 2) < 0.01 else df2 * (1 - A2 / q) / (df2 - 2)
        return df2, scale, q

    def ddf(self, L: np.ndarray) -> float:
        return self._adjust(np.atleast_2d(L))[0]

    def ftest(self, L: np.ndarray) -> tuple[float, float, float, float]:
        """(F value, ddf, NumDF, F unscaled): lmerTest's ``contestMD(ddf = "Kenward-Roger")`` via KRmodcomp."""
        L = np.atleast_2d(L)
        df2, scale, q = self._adjust(L)
        Lb = L @ self.beta
        FU = float(Lb @ np.linalg.solve(L @ self.PhiA @ L.T, Lb)) / q
        return FU * scale, df2, q, FU


@dataclass(frozen=True, eq=False, repr=False)
class LmerAnova(Result):
    """lmerTest's ``anova(m, type, ddf)`` table: per term ``Sum Sq``, ``Mean Sq``, ``NumDF``, ``DenDF``,
    ``F value``, ``Pr(>F)``."""

    table: pd.DataFrame
    type: int
    ddf: str
    formula: str

    def to_frame(self) -> pd.DataFrame:
        return self.table.reset_index(names="term")

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "ddf": self.ddf,
                "terms": [{"term": str(r["term"]), **{k: float(r[k]) for k in self.table.columns}}
                          for r in self.to_frame().to_dict(orient="records")]}

    def summary(self) -> str:
        roman = {1: "I", 3: "III"}[self.type]
        head = f"Type {roman} Analysis of Variance Table with {self.ddf}'s method"
        body = format_pval_columns(self.table, ["Pr(>F)"]).to_string(float_format=lambda v: f"{v:.6g}") if len(self.table) else "(no terms)"
        return f"{head}\n{body}"

    def __str__(self) -> str:
        return self.summary()


# ----------------------------------------------------------------------------- contrasts (lmerTest's contest)


def contrast_df(m: LmerResult, L: np.ndarray, ddf: str = "Satterthwaite") -> np.ndarray:
    """Denominator df of each row l of ``L`` (one-df contrasts lᵀβ), lmerTest's ``contest1D``:
    Satterthwaite ν = 2 (lᵀVl)² / (gᵀAg), g_k = lᵀ (∂V/∂φ_k) l; or Kenward-Roger's (pbkrtest's ``Lb_ddf``,
    :class:`KenwardRoger`)."""
    require(m, "anova.F")
    L = np.atleast_2d(np.asarray(L, float))
    if ddf_method(ddf) == "Kenward-Roger":
        kr = m.kenward_roger
        return np.array([kr.ddf(row[None, :]) for row in L])
    V = m.vcov.to_numpy()
    A = m.vcov_varpar
    out = np.empty(len(L))
    for i, l in enumerate(L):
        g = np.array([l @ J @ l for J in m.jac_varpar])
        out[i] = 2.0 * float(l @ V @ l) ** 2 / float(g @ A @ g)
    return out


def contest(m: LmerResult, L: np.ndarray, ddf: str = "Satterthwaite") -> dict[str, float]:
    """The F test of H0: Lβ = 0, lmerTest's ``contestMD`` (Kuznetsova et al. 2017, sec. 3.2): with VL = L V Lᵀ =
    P D Pᵀ (eigenvalues above √eps·d₁ kept, q of them), F = Σ (p_mᵀLβ)²/d_m / q; the denominator df from
    the q one-df Satterthwaite dfs ν_m: E = Σ ν_m/(ν_m − 2), ddf = 2E/(E − q) (2 if any ν_m ≤ 2; their mean
    if they agree to 1e-8; ν₁ when q = 1). ``ddf="Kenward-Roger"``: pbkrtest's ``KRmodcomp`` (F from the
    adjusted covariance, scaled; its df) as lmerTest. Returns ``Sum Sq``, ``Mean Sq``, ``NumDF``,
    ``DenDF``, ``F value``, ``Pr(>F)``."""
    require(m, "anova.F")
    L = np.atleast_2d(np.asarray(L, float))
    sigma2 = m.sigma ** 2
    if ddf_method(ddf) == "Kenward-Roger":         # lmerTest's mk_Ftable(FtestU, ..., Fscale = F.scaling)
        F, df2, q, FU = m.kenward_roger.ftest(L)
        out = _ftable(F, int(q), df2, sigma2)
        out["Sum Sq"], out["Mean Sq"] = FU * sigma2 * q, FU * sigma2
        return out
    beta = m.fixef.to_numpy()
    V = m.vcov.to_numpy()
    d, P = np.linalg.eigh(L @ V @ L.T)
    d, P = d[::-1], P[:, ::-1]
    tol = max(math.sqrt(np.finfo(float).eps) * d[0], 0.0)
    q = int(np.sum(d > tol))
    if q == 0:
        return _ftable(math.nan, 0, math.nan, sigma2)
    PtL = (P.T @ L)[:q]
    nu = contrast_df(m, PtL)
    F = float(np.sum((PtL @ beta) ** 2 / d[:q]) / q)
    return _ftable(F, q, _fstat_ddf(nu), sigma2)


def anova(m: LmerResult, type: int | str = 3, ddf: str = "Satterthwaite") -> LmerAnova:
    """lmerTest's ``anova(m, type = type, ddf = ddf)``: one F test per fixed-effect term (see :func:`contest`),
    the term's hypothesis matrix from lmerTest's ``get_contrasts_type3`` (type 3: contrasts in treatment
    coding, each term orthogonalised against the terms containing it, mapped to the fit's own coding; SAS's
    type III) or ``get_contrasts_type1`` (type 1: rows of the normalised Doolittle factor of XᵀX, sequential).
    ``ddf``: ``"Satterthwaite"`` (default) or ``"Kenward-Roger"`` (pbkrtest, :class:`KenwardRoger`)."""
    require(m, "anova.F")
    t = {"3": 3, "III": 3, "1": 1, "I": 1}.get(str(type).upper())
    if t is None:
        raise InputError(f"lmer anova: type must be 1 or 3 (lmerTest's type = 1 or 3), got {type!r}")
    name = ddf_method(ddf)
    Ls = anova_contrasts(m, t)
    rows = {lab: contest(m, L, ddf=name) for lab, L in Ls.items()}
    import pandas as pd

    cols = ["Sum Sq", "Mean Sq", "NumDF", "DenDF", "F value", "Pr(>F)"]
    table = pd.DataFrame.from_dict(rows, orient="index", columns=cols) if rows else pd.DataFrame(columns=cols)
    return LmerAnova(table=table, type=t, ddf=name, formula=m.formula)


__all__ = ["KR_MAX_ROWS", "KenwardRoger", "LmerAnova", "anova", "anova_contrasts", "contest", "contrast_df",
           "ddf_method", "satterthwaite"]
