"""Item response theory: 1PL (Rasch) and 2PL by marginal maximum likelihood.

Models are the respondents, items the items. For model ``j`` and item ``i`` with ``s_ij``
correct answers out of ``n_ij`` trials (``n_ij = 0``: not answered)::

    eta_ij = a_i theta_j + d_i,   P(correct) = 1 / (1 + exp(-eta_ij)),   b_i = -d_i / a_i
    theta_j ~ N(0, 1)                                   (2PL: a_i free; 1PL: a_i = a for all i)
    logLik = sum_j log  integral prod_i Binom(s_ij | n_ij, P_ij(theta)) phi(theta) dtheta

(Bock & Aitkin 1981, Psychometrika 46: 443-459; the slope-intercept form of R's ``mirt``).
The 1PL with a common slope ``a`` and ``theta ~ N(0, 1)`` is the Rasch model with fixed
item effects and a random model effect of SD ``a``: it is the binomial GLMM
``correct ~ 0 + item + (1 | model)`` with ``fixef(item_i) = d_i`` and ``sigma_model = a``
(lme4's ``glmer``; with ``nAGQ = Q`` both evaluate the same adaptive Gauss-Hermite rule, so
the estimates agree to the optimiser's tolerance). The crossed model
``correct ~ 1 + (1 | item) + (1 | model)`` is a different model (item difficulties drawn
from a normal distribution and shrunk towards their mean); its item conditional modes
are not the MML difficulties.

**Integration.** Adaptive Gauss-Hermite quadrature per model (Liu & Pierce 1994; lme4's
``nAGQ``): nodes ``theta_jq = m_j + sqrt(2) s_j x_q`` around the posterior mode ``m_j`` with
``s_j`` the inverse square root of the posterior curvature. With thousands of items per
model the posterior is very sharp and a fixed grid (BILOG, girth) would miss it.

**Estimation.** Each iteration evaluates the posterior of every ability on its adaptive
nodes (the E-step of Bock-Aitkin EM), rescales the ability scale so that the posterior means
average 0 and the second moments 1 (a parameter-expanded step, PX-EM; Liu, Rubin & Wu 1998,
Biometrika 85: 755-770 -- it removes EM's slow convergence along the scale direction when
there are few models and many items), then takes a Newton step with the observed
information (Louis 1982): the full matrix up to 1,200 parameters (quadratic convergence; the
Rasch/GLMM check), otherwise each item's own 2 x 2 block, vectorised over items, with the
EM (complete-data information) step as the fall-back for an item whose step does not raise
its own objective (checked with the nodes held fixed). The step is halved until the
marginal objective does not fall, and when successive steps point the same way the
iteration extrapolates along them while the objective keeps rising. Converged when the
largest parameter change is below ``tol`` or the objective has stopped changing (relative
1e-12) for five iterations.

**Discrimination prior (2PL).** ``log a_i ~ N(mu_a, prior_sd^2)`` with ``mu_a`` estimated
(empirical Bayes: the discriminations are shrunk towards their geometric mean, and the
scale stays set by ``theta ~ N(0, 1)``); default ``prior_sd = 1``. It keeps an item whose
pattern is perfectly separated by the models' abilities (common with ~30 models) at a
finite slope; the estimates are then posterior modes, and ``loglik`` is the marginal
log-likelihood at them (not its maximum). ``prior_sd=None`` gives plain ML with the bound
``0.001 <= a_i <= 100``. The 1PL has no prior.

**Standard errors** come from the observed information (Louis 1982, JRSS B 44: 226-233:
complete-data information minus the posterior variance of the complete-data score, plus
the prior's curvature): the full matrix up to 1,200 parameters (``se_method = "full"``;
the Rasch SEs then equal lme4's), else each item's own block, ignoring covariances between
items (``"item blocks"``: the full matrix has ``(2 I)^2`` entries); ``se_b`` by the delta method.

**Abilities** are EAP (posterior mean and SD over the adaptive nodes).
``aic = -2 logLik + 2 k``, ``bic = -2 logLik + k log(J)`` with ``k = 2 I`` (2PL) or ``I + 1``
(1PL) and ``J`` the number of models (mirt's convention).
"""
from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from mrcstats._repr import Result
from mrcstats._words import plural
from mrcstats.errors import InputError

__all__ = ["IrtFit", "ResponseMatrix", "fit_irt", "response_matrix", "score_abilities"]

_A_MIN, _A_MAX = 1e-3, 100.0


# --------------------------------------------------------------------------- data

@dataclass(frozen=True)
class ResponseMatrix:
    """Models x items counts from a canonical log.

    ``s`` (correct) and ``n`` (answers) are ``J x I`` float arrays over *all* items that at
    least two models answered; ``fit_mask`` marks the items an IRT fit can use (some but not
    all answers correct; the others have infinite ML difficulty). ``skipped`` counts items
    left out entirely and items kept but not fitted, by reason; ``notes`` says how invalid
    answers were treated.
    """

    models: tuple[str, ...]
    items: tuple[str, ...]
    s: np.ndarray
    n: np.ndarray
    fit_mask: np.ndarray
    skipped: Mapping[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def p(self) -> np.ndarray:
        """Classical difficulty per item: share of correct answers over all models and trials."""
        return self.s.sum(axis=0) / self.n.sum(axis=0)

    @property
    def accuracy(self) -> np.ndarray:
        """Per model: the mean over its answered items of the item's share correct."""
        with np.errstate(invalid="ignore", divide="ignore"):
            frac = np.where(self.n > 0, self.s / np.where(self.n > 0, self.n, 1), np.nan)
        return np.nanmean(frac, axis=1)

    def subset_models(self, idx: Sequence[int] | np.ndarray) -> ResponseMatrix:
        """The same items for the models at positions ``idx`` (``fit_mask`` recomputed)."""
        idx = np.asarray(idx)
        s, n = self.s[idx], self.n[idx]
        return ResponseMatrix(tuple(self.models[i] for i in idx), self.items, s, n, _fit_mask(s, n),
                              dict(self.skipped), self.notes)


def _fit_mask(s: np.ndarray, n: np.ndarray) -> np.ndarray:
    st, nt = s.sum(axis=0), n.sum(axis=0)
    answered_by = (n > 0).sum(axis=0)
    return (st > 0) & (st < nt) & (answered_by >= 2)


def response_matrix(log: pd.DataFrame, *, model: str = "model", item: str = "item",
                    correct: str = "correct", min_models: int = 3, where: str = "irt") -> ResponseMatrix:
    """Models x items correct/answer counts of a canonical log.

    Every row counts (all trials and conditions pooled); an invalid answer (``<NA>``) counts
    as not correct, as in :func:`mrcstats.stats.discrimination.discrimination`. Items answered
    by one model only are left out and counted. Fewer than ``min_models`` models is an error.
    """
    if not isinstance(log, pd.DataFrame):
        raise InputError(f"{where}: expected a canonical log (pandas DataFrame), got {type(log).__name__}")
    for col in (model, item, correct):
        if col not in log.columns:
            raise InputError(f"{where}: the log has no column {col!r} "
                             f"(columns: {', '.join(map(str, log.columns[:15]))})")
    if len(log) == 0:
        raise InputError(f"{where}: the log has no rows")
    from mrcstats.io.schema import require_binary

    require_binary(log, where, correct)
    try:
        corr = log[correct].astype("boolean")
    except (TypeError, ValueError):
        raise InputError(f"{where}: column {correct!r} must hold true/false correctness values "
                         "(<NA> for invalid answers)") from None
    n_invalid = int(corr.isna().sum())
    m_codes, m_levels = pd.factorize(log[model].astype(str), sort=True)
    i_codes, i_levels = pd.factorize(log[item].astype(str), sort=True)
    J, I = len(m_levels), len(i_levels)
    if J < min_models:
        raise InputError(f"{where}: the log has {plural(J, 'model')} ({', '.join(m_levels[:5])}); item response models "
                         f"need at least {min_models} models answering the same items")
    y = corr.fillna(False).to_numpy(dtype=float)
    flat = m_codes.astype(np.int64) * I + i_codes
    s = np.bincount(flat, weights=y, minlength=J * I).reshape(J, I)
    n = np.bincount(flat, minlength=J * I).reshape(J, I).astype(float)
    answered_by = (n > 0).sum(axis=0)
    keep = answered_by >= 2
    skipped: dict[str, int] = {}
    if (~keep).any():
        skipped["items answered by one model only (left out)"] = int((~keep).sum())
    s, n = s[:, keep], n[:, keep]
    items = tuple(str(v) for v in np.asarray(i_levels)[keep])
    if len(items) == 0:
        raise InputError(f"{where}: no item was answered by two or more models; an item response model needs "
                         "the same items answered by several models")
    mask = _fit_mask(s, n)
    st, nt = s.sum(axis=0), n.sum(axis=0)
    if (st == nt).any():
        skipped["items every model answered correctly (not fitted: difficulty -Inf)"] = int((st == nt).sum())
    if (st == 0).any():
        skipped["items no model answered correctly (not fitted: difficulty +Inf)"] = int((st == 0).sum())
    notes = []
    if n_invalid:
        notes.append(f"{n_invalid} invalid answer(s) (<NA>) counted as not correct")
    if "condition" in log.columns and log["condition"].nunique() > 1:
        notes.append(f"{log['condition'].nunique()} conditions pooled; filter the log to one condition to fit it alone")
    return ResponseMatrix(tuple(str(v) for v in m_levels), items, s, n, mask, skipped, tuple(notes))


# --------------------------------------------------------------------------- numerics

def _expit(x: np.ndarray) -> np.ndarray:
    """The logistic function without overflow warnings (scipy's expit)."""
    from scipy.special import expit

    return expit(x)


def _gh(q: int) -> tuple[np.ndarray, np.ndarray]:
    x, w = np.polynomial.hermite.hermgauss(q)
    return x, w


def _loglik_rows(theta: np.ndarray, a: np.ndarray, d: np.ndarray, s: np.ndarray, n: np.ndarray,
                 sa: np.ndarray | None = None, sd_: np.ndarray | None = None, full: bool = False) -> np.ndarray:
    """sum_i s eta - n log(1 + e^eta) for each theta_j (J,) -> (J,).

    ``sum_i s_ij eta_ij = theta_j (s a)_j + (s d)_j`` in closed form; only the softplus term is
    elementwise (``full``: every ``n_ij = 1``, so no weighting is needed)."""
    eta = np.multiply.outer(theta, a)
    eta += d
    np.logaddexp(0.0, eta, out=eta)
    sp = eta.sum(axis=1) if full else np.einsum("ji,ji->j", n, eta)
    if sa is None:
        sa, sd_ = s @ a, s @ d
    return theta * sa + sd_ - sp


def _modes(theta0: np.ndarray, a: np.ndarray, d: np.ndarray, s: np.ndarray, n: np.ndarray,
           mean: float = 0.0, sd: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Posterior modes of theta_j and the posterior curvature there.

    Safeguarded Newton (Numerical Recipes' rtsafe), vectorised over models: the score
    ``g(theta) = sum_i a_i (s_ij - n_ij P_ij) - (theta - mean) / sd^2`` falls monotonically, so a
    bracket is kept and a Newton step leaving it is replaced by bisection (with steep items a
    plain Newton iteration can cycle between two points)."""
    a2 = a * a
    lim = 50.0 * sd + abs(mean)
    lo = np.full(len(theta0), mean - lim)
    hi = np.full(len(theta0), mean + lim)
    th = np.clip(theta0, lo + 1e-9, hi - 1e-9).astype(float)
    h = np.ones_like(th)
    for _ in range(200):
        eta = th[:, None] * a[None, :] + d[None, :]
        p = _expit(eta)
        g = (s - n * p) @ a - (th - mean) / sd ** 2
        h = (n * p * (1 - p)) @ a2 + 1.0 / sd ** 2
        lo = np.where(g > 0, th, lo)
        hi = np.where(g <= 0, th, hi)
        new = th + g / h
        out = ~((new > lo) & (new < hi))
        new = np.where(out, 0.5 * (lo + hi), new)
        step = np.abs(new - th)
        th = new
        if np.max(np.minimum(step, hi - lo)) < 1e-11:
            break
    eta = th[:, None] * a[None, :] + d[None, :]
    p = _expit(eta)
    h = (n * p * (1 - p)) @ a2 + 1.0 / sd ** 2
    return th, h


def _estep(theta0: np.ndarray, a: np.ndarray, d: np.ndarray, s: np.ndarray, n: np.ndarray,
           x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Adaptive GH nodes (J, Q), posterior weights (J, Q), per-model log marginal (J,), modes."""
    m, h = _modes(theta0, a, d, s, n)
    sc = np.sqrt(2.0 / h)
    nodes = m[:, None] + sc[:, None] * x[None, :]
    lw = np.empty_like(nodes)
    sa, sd_ = s @ a, s @ d
    full = bool(np.all(n == 1.0))
    for q in range(len(x)):
        lw[:, q] = _loglik_rows(nodes[:, q], a, d, s, n, sa, sd_, full)
    lw += np.log(w)[None, :] + (x * x)[None, :] + np.log(sc)[:, None] - 0.5 * nodes ** 2 - 0.5 * math.log(2 * math.pi)
    mx = lw.max(axis=1, keepdims=True)
    ew = np.exp(lw - mx)
    tot = ew.sum(axis=1, keepdims=True)
    lm = (mx + np.log(tot))[:, 0]
    return nodes, ew / tot, lm, m


def _node_terms(nodes: np.ndarray, post: np.ndarray, a: np.ndarray, d: np.ndarray, s: np.ndarray,
                n: np.ndarray):
    """Per quadrature node q, the E-step's terms both information sums take (expected, :func:`_item_sums`;
    Louis' full, :func:`_full_information`): the nodes θ_jq, the posterior weights w_jq, the residuals
    r = s − n·p and the binomial variances v = n·p·(1 − p), with p = expit(θ_jq·a_i + d_i)
    (Bock & Aitkin 1981; Louis 1982)."""
    for q in range(nodes.shape[1]):
        th = nodes[:, q]
        p = _expit(th[:, None] * a[None, :] + d[None, :])
        yield th, post[:, q], s - n * p, n * p * (1 - p)


def _item_sums(nodes: np.ndarray, post: np.ndarray, a: np.ndarray, d: np.ndarray, s: np.ndarray,
               n: np.ndarray, louis: bool = False) -> dict[str, np.ndarray]:
    """Expected complete-data score and information per item in (a, d) coordinates."""
    I = len(a)
    g_a, g_d = np.zeros(I), np.zeros(I)
    h_aa, h_ad, h_dd = np.zeros(I), np.zeros(I), np.zeros(I)
    if louis:
        # posterior second moments of the per-(model, item) complete-data score
        e_ua, e_ud = np.zeros_like(s), np.zeros_like(s)
        e_uaa, e_uad, e_udd = np.zeros(I), np.zeros(I), np.zeros(I)
        # the common slope's score sums over items: its posterior variance needs the totals
        e_tot, e_tot2 = np.zeros(s.shape[0]), np.zeros(s.shape[0])
    for th, wq, r, v in _node_terms(nodes, post, a, d, s, n):
        wt = wq * th
        g_d += wq @ r
        g_a += wt @ r
        h_dd += wq @ v
        h_ad += wt @ v
        h_aa += (wt * th) @ v
        if louis:
            ua = r * th[:, None]
            e_ua += wq[:, None] * ua
            e_ud += wq[:, None] * r
            e_uaa += wq @ (ua * ua)
            e_uad += wq @ (ua * r)
            e_udd += wq @ (r * r)
            tot = (ua * a[None, :]).sum(axis=1)
            e_tot += wq * tot
            e_tot2 += wq * tot * tot
    out = {"g_a": g_a, "g_d": g_d, "h_aa": h_aa, "h_ad": h_ad, "h_dd": h_dd}
    if louis:
        # sum_j Var_j(u_ij) = sum_j E_j[u u'] - E_j[u] E_j[u]'
        out["v_aa"] = e_uaa - (e_ua * e_ua).sum(axis=0)
        out["v_ad"] = e_uad - (e_ua * e_ud).sum(axis=0)
        out["v_dd"] = e_udd - (e_ud * e_ud).sum(axis=0)
        out["v_common"] = np.array(float((e_tot2 - e_tot * e_tot).sum()))
    return out


# --------------------------------------------------------------------------- result

@dataclass(frozen=True, repr=False)
class IrtFit(Result):
    """A fitted 1PL or 2PL model (see the module docstring for the definitions).

    ``items``: one row per fitted item with ``a, b, d, se_a, se_b, se_d``; ``abilities``:
    one row per model with ``theta`` (EAP), ``sd`` (posterior SD) and ``mode``;
    ``loglik`` the marginal log-likelihood, ``n_par`` the number of parameters.
    ``not_fitted``: items without variation (every / no answer correct) with their share
    correct; ``skipped`` and ``notes`` from :func:`response_matrix`.
    """

    model: str
    items: pd.DataFrame
    abilities: pd.DataFrame
    loglik: float
    n_par: int
    n_models: int
    n_obs: int
    iterations: int
    converged: bool
    quadrature: int
    prior_sd: float | None
    prior_mean: float | None
    not_fitted: pd.Series
    skipped: Mapping[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    se_method: str = "full"

    @property
    def aic(self) -> float:
        return -2.0 * self.loglik + 2.0 * self.n_par

    @property
    def bic(self) -> float:
        return -2.0 * self.loglik + self.n_par * math.log(self.n_models)

    def prob(self, theta: Sequence[float] | np.ndarray) -> np.ndarray:
        """P(correct) for each ability (rows) and fitted item (columns)."""
        th = np.atleast_1d(np.asarray(theta, dtype=float))
        a, d = self.items["a"].to_numpy(), self.items["d"].to_numpy()
        return _expit(th[:, None] * a[None, :] + d[None, :])

    def information(self, theta: Sequence[float] | np.ndarray) -> pd.DataFrame:
        """Item information ``I_i(theta) = a_i^2 P (1 - P)``: abilities down, items across."""
        th = np.atleast_1d(np.asarray(theta, dtype=float))
        p = self.prob(th)
        a = self.items["a"].to_numpy()
        return pd.DataFrame(a[None, :] ** 2 * p * (1 - p), index=pd.Index(th, name="theta"),
                            columns=self.items["item"])

    def test_information(self, theta: Sequence[float] | np.ndarray) -> pd.Series:
        """Test information ``sum_i I_i(theta)``; ``1 / sqrt`` of it is the ML standard error of theta."""
        info = self.information(theta)
        return pd.Series(info.to_numpy().sum(axis=1), index=info.index, name="information")

    def to_frame(self) -> pd.DataFrame:
        return self.items.copy()

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "loglik": self.loglik, "aic": self.aic, "bic": self.bic,
                "n_par": self.n_par, "iterations": self.iterations, "converged": self.converged,
                "items": self.items[["item", "a", "b", "se_a", "se_b"]].to_dict(orient="records"),
                "abilities": self.abilities[["model", "theta", "sd"]].to_dict(orient="records"),
                "prior_sd": self.prior_sd, "skipped": dict(self.skipped), "notes": list(self.notes)}

    def summary(self) -> str:
        lines = [f"{self.model.upper()} by marginal ML (adaptive Gauss-Hermite, {self.quadrature} nodes): "
                 f"{len(self.items)} items x {self.n_models} models, logLik {self.loglik:.4f}, "
                 f"AIC {self.aic:.2f}, BIC {self.bic:.2f}, {self.iterations} EM iterations"
                 + ("" if self.converged else " (NOT converged)")]
        if self.model == "2pl":
            lines.append("  discrimination prior: " + ("none (a in [0.001, 100])" if self.prior_sd is None else
                         f"log a ~ N({self.prior_mean:.3f} (estimated), {self.prior_sd:g}^2)"))
        a, b = self.items["a"], self.items["b"]
        lines.append(f"  a: median {a.median():.3f} [{a.min():.3f}, {a.max():.3f}]; "
                     f"b: median {b.median():.3f} [{b.min():.3f}, {b.max():.3f}]")
        th = self.abilities.sort_values("theta", ascending=False)
        top = ", ".join(f"{m} {t:.2f}" for m, t in zip(th["model"].head(5), th["theta"].head(5)))
        lines.append(f"  abilities (EAP) highest: {top}")
        for why, k in self.skipped.items():
            lines.append(f"  {k} {why}")
        lines.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(lines)


# --------------------------------------------------------------------------- fitting

def fit_irt(data: pd.DataFrame | ResponseMatrix, model: str = "2pl", *, quadrature: int = 21,
            prior_sd: float | None = 1.0, tol: float = 1e-8, max_iter: int = 2000,
            progress: bool | None = None, model_col: str = "model", item_col: str = "item",
            correct_col: str = "correct", quiet: bool = False) -> IrtFit:
    """Fit a 1PL or 2PL item response model by marginal maximum likelihood (EM, adaptive GH).

    ``data``: a canonical log (models answer items; trials pooled as binomial counts) or a
    :class:`ResponseMatrix`. ``model``: ``"1pl"`` (``"rasch"``) or ``"2pl"``. ``prior_sd``:
    SD of the normal prior on ``log a_i`` (2PL; ``None`` = plain ML). Converged when the
    largest parameter change of an iteration is below ``tol``.
    """
    key = str(model).lower()
    if key in ("rasch", "1pl"):
        key = "1pl"
    elif key != "2pl":
        raise InputError(f"irt: model must be '1pl' (Rasch) or '2pl', got {model!r}")
    if not (isinstance(quadrature, (int, np.integer)) and 3 <= quadrature <= 101):
        raise InputError(f"irt: quadrature must be a whole number of nodes between 3 and 101, got {quadrature!r}")
    if prior_sd is not None and not (prior_sd > 0 and math.isfinite(prior_sd)):
        raise InputError(f"irt: prior_sd must be a positive number or None (no prior), got {prior_sd!r}")
    rm = data if isinstance(data, ResponseMatrix) else response_matrix(
        data, model=model_col, item=item_col, correct=correct_col)
    if len(rm.models) < 3:
        raise InputError(f"irt: {plural(len(rm.models), 'model')}; item response models need at least 3")
    mask = rm.fit_mask
    if mask.sum() < 2:
        raise InputError(f"irt: only {plural(int(mask.sum()), 'item')} have both correct and incorrect answers; "
                         "an item response model needs at least 2")
    s, n = rm.s[:, mask], rm.n[:, mask]
    J, I = s.shape
    x, w = _gh(int(quadrature))
    # starting values: item logits of the share correct, model logits standardised
    pi = (s.sum(0) + 0.5) / (n.sum(0) + 1.0)
    d = np.log(pi / (1 - pi))
    a = np.ones(I)
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = (s.sum(1) + 0.5) / (n.sum(1) + 1.0)
    th0 = np.log(acc / (1 - acc))
    th0 = (th0 - th0.mean()) / (th0.std() if th0.std() > 0 else 1.0)
    use_prior = key == "2pl" and prior_sd is not None
    psd = prior_sd if use_prior else None
    par = np.concatenate([np.zeros(I), d])
    from mrcstats._progress import progress as _bar

    bar = _bar(total=max_iter, desc=f"irt {key}", disable=progress if progress is None else not progress,
               unit="iter")
    converged = False
    it = 0
    n_full = 2 * I if key == "2pl" else I + 1
    flat = 0
    last_step = None
    ev = _evaluate(key, par, th0, s, n, x, w, psd)
    try:
        while it < max_iter:
            it += 1
            # PX step (Liu, Rubin & Wu 1998): the posterior mean and variance of theta become 0 and 1
            px = _px(key, par, ev)
            if px is not None:
                ev_px = _evaluate(key, px, ev["modes"], s, n, x, w, psd)
                if ev_px["obj"] > ev["obj"]:
                    par_px, ev = px, ev_px
                else:
                    par_px = par
            else:
                par_px = par
            newton, emstep = _directions(key, par_px, ev, s, n, psd)
            if key == "2pl":
                newton = _safeguard_items(par_px, newton, emstep, ev, s, n, psd)
            full = _full_direction(key, par_px, ev, s, n, psd) if n_full <= _FULL_MAX else None
            accepted = None
            for direction in ((full, newton, emstep) if full is not None else (newton, emstep)):
                t_ = 1.0
                for _ in range(12):
                    cand = par_px + t_ * direction
                    cand[:I] = np.clip(cand[:I], math.log(_A_MIN), math.log(_A_MAX))
                    ev_c = _evaluate(key, cand, ev["modes"], s, n, x, w, psd)
                    if np.isfinite(ev_c["obj"]) and ev_c["obj"] >= ev["obj"] - 1e-13 * abs(ev["obj"]):
                        accepted = (cand, ev_c)
                        break
                    t_ *= 0.5
                if accepted is not None:
                    break
            if accepted is None:  # no ascent direction left: at the optimum to numerical precision
                change = 0.0
            else:
                change = float(np.max(np.abs(accepted[0] - par)))
                gain = accepted[1]["obj"] - ev["obj"]
                step_vec = accepted[0] - par
                par, ev = accepted
                # the iteration converges linearly along a slow direction (abilities against items):
                # when two successive steps point the same way, extrapolate along it while it pays
                if last_step is not None and change > tol:
                    cosv = float(step_vec @ last_step) / (np.linalg.norm(step_vec) * np.linalg.norm(last_step) + 1e-300)
                    if cosv > 0.9:
                        best = None
                        for tau in (2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0):
                            cand = par + tau * step_vec
                            cand[:I] = np.clip(cand[:I], math.log(_A_MIN), math.log(_A_MAX))
                            ev_x = _evaluate(key, cand, ev["modes"], s, n, x, w, psd)
                            if np.isfinite(ev_x["obj"]) and ev_x["obj"] > (best[1]["obj"] if best else ev["obj"]):
                                best = (cand, ev_x)
                            else:
                                break
                        if best is not None:
                            gain = best[1]["obj"] - (ev["obj"] - gain)
                            step_vec = best[0] - (par - step_vec)
                            par, ev = best
                last_step = step_vec
                # the objective is flat to rounding: parameter moves below tol are no longer measurable
                flat = flat + 1 if gain <= 1e-12 * abs(ev["obj"]) else 0
            bar.update(1)
            if change < tol or flat >= 5:
                converged = True
                break
    finally:
        bar.close()
    th0 = ev["modes"]
    mu_a = float(par[:I].mean()) if use_prior else None
    a = np.exp(par[:I]) if key == "2pl" else np.full(I, math.exp(par[0]))
    d = par[I:]
    nodes, post, lm, modes = _estep(th0, a, d, s, n, x, w)
    loglik = float(lm.sum()) + _log_binom(s, n)
    se_method = "full"
    full_cov = None
    if n_full <= _FULL_MAX:
        ev_f = {"nodes": nodes, "post": post}
        _, info = _full_information(key, par, ev_f, s, n, psd)
        try:
            full_cov = np.linalg.inv(info)
        except np.linalg.LinAlgError:
            full_cov = None
    if full_cov is not None:
        dg = np.diag(full_cov).copy()
        dg[dg < 0] = np.nan
        if key == "2pl":
            v_aa, v_dd = dg[:I], dg[I:]
            v_ad = full_cov[np.arange(I), np.arange(I) + I]
        else:
            v_aa, v_dd = np.full(I, dg[0]), dg[1:]
            v_ad = full_cov[0, 1:]
    else:
        # each item's own block of the observed information (Louis), cross-item terms ignored
        se_method = "item blocks"
        st = _item_sums(nodes, post, a, d, s, n, louis=True)
        # second derivative of eta wrt alpha is a theta: complete-data Hessian term r a theta
        i_aa = a * a * st["h_aa"] - a * st["g_a"] - a * a * st["v_aa"]
        i_ad = a * st["h_ad"] - a * st["v_ad"]
        i_dd = st["h_dd"] - st["v_dd"]
        if key == "2pl":
            if use_prior:
                i_aa = i_aa + 1.0 / prior_sd ** 2
            det = i_aa * i_dd - i_ad ** 2
            with np.errstate(invalid="ignore", divide="ignore"):
                v_aa = np.where(det > 0, i_dd / det, np.nan)
                v_dd = np.where(det > 0, i_aa / det, np.nan)
                v_ad = np.where(det > 0, -i_ad / det, np.nan)
        else:
            with np.errstate(invalid="ignore", divide="ignore"):
                v_dd = np.where(i_dd > 0, 1.0 / i_dd, np.nan)
                tot = float((a * a * st["h_aa"] - a * st["g_a"]).sum() - st["v_common"])
                v_common = 1.0 / tot if tot > 0 else np.nan
            v_aa = np.full(I, v_common)
            v_ad = np.zeros(I)
    b = -d / a
    se_alpha = np.sqrt(v_aa)
    se_a = a * se_alpha
    se_d = np.sqrt(v_dd)
    with np.errstate(invalid="ignore"):
        se_b = np.sqrt(np.maximum(b * b * v_aa + v_dd / (a * a) + 2.0 * b / a * v_ad, 0.0))
    items_fit = np.asarray(rm.items)[mask]
    items = pd.DataFrame({"item": items_fit, "a": a, "b": b, "d": d, "se_a": se_a, "se_b": se_b, "se_d": se_d})
    eap = (post * nodes).sum(1)
    post_sd = np.sqrt(np.maximum((post * nodes ** 2).sum(1) - eap ** 2, 0.0))
    abilities = pd.DataFrame({"model": list(rm.models), "theta": eap, "sd": post_sd, "mode": modes})
    p_all = rm.p
    not_fitted = pd.Series(p_all[~mask], index=pd.Index(np.asarray(rm.items)[~mask], name="item"), name="p")
    n_par = 2 * I if key == "2pl" else I + 1
    if not converged and not quiet:
        print(f"irt: EM stopped after {max_iter} iterations without reaching tol = {tol:g}", file=sys.stderr)
    return IrtFit(key, items, abilities, loglik, n_par, J, int(n.sum()), it, converged, int(quadrature),
                  prior_sd if key == "2pl" else None, mu_a if use_prior else None, not_fitted,
                  dict(rm.skipped), rm.notes, se_method)


def _unpack(key: str, par: np.ndarray, I: int) -> tuple[np.ndarray, np.ndarray]:
    alpha = par[:I] if key == "2pl" else np.full(I, par[0])
    return alpha, par[I:]


def _evaluate(key: str, par: np.ndarray, modes: np.ndarray, s: np.ndarray, n: np.ndarray, x: np.ndarray,
              w: np.ndarray, prior_sd: float | None) -> dict[str, Any]:
    """E-step at ``par``: nodes, posterior weights, modes and the objective
    (marginal log-likelihood plus the log prior of the slopes, up to a constant)."""
    I = s.shape[1]
    alpha, d = _unpack(key, par, I)
    nodes, post, lm, m = _estep(modes, np.exp(alpha), d, s, n, x, w)
    obj = float(lm.sum())
    if prior_sd is not None:
        obj -= float(((alpha - alpha.mean()) ** 2).sum()) / (2 * prior_sd ** 2)
    return {"nodes": nodes, "post": post, "lm": lm, "modes": m, "obj": obj}


def _px(key: str, par: np.ndarray, ev: dict[str, Any]) -> np.ndarray | None:
    """Rescale so that the mean posterior mean is 0 and the mean posterior second moment 1."""
    nodes, post = ev["nodes"], ev["post"]
    mean_t = float((post * nodes).sum(1).mean())
    var_t = float((post * nodes ** 2).sum(1).mean()) - mean_t ** 2
    if abs(mean_t) < 1e-4 and abs(var_t - 1) < 1e-4:
        return None
    sd_t = math.sqrt(max(var_t, 1e-12))
    I = (len(par)) // 2
    alpha, d = _unpack(key, par, I)
    a = np.exp(alpha)
    out = par.copy()
    out[I:] = d + a * mean_t
    out[:I] = alpha + math.log(sd_t)
    return out


_FULL_MAX = 1200  # parameters up to which the full observed information is formed


def _full_information(key: str, par: np.ndarray, ev: dict[str, Any], s: np.ndarray, n: np.ndarray,
                      prior_sd: float | None) -> tuple[np.ndarray, np.ndarray]:
    """Gradient and full observed information (Louis 1982) of the objective in
    ``(log a_1..I, d_1..I)`` (2PL) or ``(log a, d_1..I)`` (1PL), cross-item terms included."""
    I = s.shape[1]
    alpha, d = _unpack(key, par, I)
    a = np.exp(alpha)
    nodes, post = ev["nodes"], ev["post"]
    J, Q = nodes.shape
    P = 2 * I if key == "2pl" else I + 1
    Z = np.empty((J, Q, P))
    comp = np.zeros((P, P))
    g = np.zeros(P)
    for q, (th, wq, r, v) in enumerate(_node_terms(nodes, post, a, d, s, n)):
        ra = r * (a[None, :] * th[:, None])
        if key == "2pl":
            Z[:, q, :I] = ra
            Z[:, q, I:] = r
        else:
            Z[:, q, 0] = ra.sum(axis=1)
            Z[:, q, 1:] = r
        wt = wq * th
        h_aa = (wt * th) @ v
        h_ad = wt @ v
        h_dd = wq @ v
        g_a = wt @ r
        if key == "2pl":
            idx = np.arange(I)
            comp[idx, idx] += a * a * h_aa - a * g_a
            comp[idx, idx + I] += a * h_ad
            comp[idx + I, idx] += a * h_ad
            comp[idx + I, idx + I] += h_dd
        else:
            idx = np.arange(1, I + 1)
            comp[0, 0] += float((a * a * h_aa - a * g_a).sum())
            comp[0, idx] += a * h_ad
            comp[idx, 0] += a * h_ad
            comp[idx, idx] += h_dd
    mean_u = np.einsum("jq,jqp->jp", post, Z)
    g = mean_u.sum(axis=0)
    Z -= mean_u[:, None, :]
    Z *= np.sqrt(post)[:, :, None]
    Zf = Z.reshape(J * Q, P)
    info = comp - Zf.T @ Zf
    if key == "2pl" and prior_sd is not None:
        g[:I] -= (alpha - alpha.mean()) / prior_sd ** 2
        info[:I, :I] += (np.eye(I) - 1.0 / I) / prior_sd ** 2
    return g, info


def _full_direction(key: str, par: np.ndarray, ev: dict[str, Any], s: np.ndarray, n: np.ndarray,
                    prior_sd: float | None) -> np.ndarray | None:
    I = s.shape[1]
    g, info = _full_information(key, par, ev, s, n, prior_sd)
    try:
        c = np.linalg.cholesky(info)
    except np.linalg.LinAlgError:
        return None
    step = np.linalg.solve(c.T, np.linalg.solve(c, g))
    if key == "2pl":
        out = step
    else:
        out = np.concatenate([np.full(I, step[0]), step[1:]])
    out[:I] = np.clip(out[:I], -1.0, 1.0)
    out[I:] = np.clip(out[I:], -2.0, 2.0)
    return out


def _item_gain(par: np.ndarray, new: np.ndarray, cols: np.ndarray, ev: dict[str, Any], s: np.ndarray,
               n: np.ndarray, prior_sd: float | None) -> np.ndarray:
    """Change of the objective when only item ``i`` (for each i in ``cols``) moves from ``par``
    to ``new``, the quadrature nodes held fixed (2PL): ``sum_j log sum_q w_jq L_ij(new)/L_ij(old)``."""
    I = s.shape[1]
    nodes, post = ev["nodes"], ev["post"]
    a0, d0 = np.exp(par[:I][cols]), par[I:][cols]
    a1, d1 = np.exp(new[:I][cols]), new[I:][cols]
    sc, nc = s[:, cols], n[:, cols]
    acc = np.zeros_like(sc)
    for q in range(nodes.shape[1]):
        th = nodes[:, q, None]
        e0 = th * a0[None, :] + d0[None, :]
        e1 = th * a1[None, :] + d1[None, :]
        diff = sc * (e1 - e0) - nc * (np.logaddexp(0.0, e1) - np.logaddexp(0.0, e0))
        acc += post[:, q, None] * np.exp(np.minimum(diff, 700.0))
    gain = np.log(acc).sum(axis=0)
    if prior_sd is not None:
        mu = float(par[:I].mean())
        gain -= ((new[:I][cols] - mu) ** 2 - (par[:I][cols] - mu) ** 2) / (2 * prior_sd ** 2)
    return gain


def _safeguard_items(par: np.ndarray, newton: np.ndarray, emstep: np.ndarray, ev: dict[str, Any],
                     s: np.ndarray, n: np.ndarray, prior_sd: float | None) -> np.ndarray:
    """Per-item step control for the 2PL: items whose Newton step is large are checked on their
    own objective change (nodes fixed) and halved, or given the EM step, until it does not fall."""
    I = s.shape[1]
    step = newton.copy()
    big = np.flatnonzero(np.maximum(np.abs(newton[:I]), np.abs(newton[I:])) > 0.05)
    if len(big) == 0:
        return step
    cols = big
    t_ = np.ones(len(cols))
    use_em = np.zeros(len(cols), bool)
    for round_ in range(10):
        dirn_a = np.where(use_em, emstep[:I][cols], newton[:I][cols])
        dirn_d = np.where(use_em, emstep[I:][cols], newton[I:][cols])
        new = par.copy()
        new[:I][cols] = np.clip(par[:I][cols] + t_ * dirn_a, math.log(_A_MIN), math.log(_A_MAX))
        new[I:][cols] = par[I:][cols] + t_ * dirn_d
        g = _item_gain(par, new, cols, ev, s, n, prior_sd)
        bad = ~(g >= -1e-10)
        if not bad.any():
            break
        # halve; after three halvings of the Newton step switch that item to the EM step
        switch = bad & ~use_em & (t_ <= 0.125)
        use_em = use_em | switch
        t_ = np.where(switch, 1.0, np.where(bad, t_ * 0.5, t_))
        if round_ == 9:
            t_ = np.where(bad, 0.0, t_)
    step[:I][cols] = np.where(t_ > 0, t_ * np.where(use_em, emstep[:I][cols], newton[:I][cols]), 0.0)
    step[I:][cols] = np.where(t_ > 0, t_ * np.where(use_em, emstep[I:][cols], newton[I:][cols]), 0.0)
    return step


def _directions(key: str, par: np.ndarray, ev: dict[str, Any], s: np.ndarray, n: np.ndarray,
                prior_sd: float | None) -> tuple[np.ndarray, np.ndarray]:
    """Per-item Newton direction with the observed information (Louis) and the EM
    (Fisher-scoring, complete-data information) direction, both in ``(log a, d)``."""
    I = s.shape[1]
    alpha, d = _unpack(key, par, I)
    a = np.exp(alpha)
    st = _item_sums(ev["nodes"], ev["post"], a, d, s, n, louis=True)
    ga, gd = a * st["g_a"], st["g_d"]
    c_aa, c_ad, c_dd = a * a * st["h_aa"], a * st["h_ad"], st["h_dd"]            # complete-data (expected)
    o_aa = a * a * st["h_aa"] - a * st["g_a"] - a * a * st["v_aa"]                # observed (Louis)
    o_ad = a * st["h_ad"] - a * st["v_ad"]
    o_dd = st["h_dd"] - st["v_dd"]
    if key == "2pl":
        if prior_sd is not None:
            ga = ga - (alpha - alpha.mean()) / prior_sd ** 2
            c_aa = c_aa + 1.0 / prior_sd ** 2
            o_aa = o_aa + 1.0 / prior_sd ** 2

        def solve(haa, had, hdd, ok):
            det = haa * hdd - had * had
            good = ok & (det > 1e-12 * np.maximum(haa * hdd, 1e-300)) & (haa > 0) & (hdd > 0)
            det = np.where(good, det, 1.0)
            da = np.where(good, (hdd * ga - had * gd) / det, 0.0)
            dd = np.where(good, (haa * gd - had * ga) / det, 0.0)
            return da, dd, good

        da_e, dd_e, _ = solve(c_aa, c_ad, c_dd, np.ones(I, bool))
        da_n, dd_n, good = solve(o_aa, o_ad, o_dd, np.ones(I, bool))
        da_n = np.where(good, da_n, da_e)
        dd_n = np.where(good, dd_n, dd_e)
        clip = lambda v, m: np.clip(v, -m, m)
        return (np.concatenate([clip(da_n, 1.0), clip(dd_n, 2.0)]),
                np.concatenate([clip(da_e, 1.0), clip(dd_e, 2.0)]))

    def arrow(haa_tot, had, hdd):
        hdd_s = np.where(hdd > 1e-300, hdd, 1e-300)
        schur = haa_tot - (had * had / hdd_s).sum()
        if not schur > 0:
            return None
        da0 = (ga.sum() - (had * gd / hdd_s).sum()) / schur
        dd = (gd - had * da0) / hdd_s
        out = np.concatenate([np.full(I, np.clip(da0, -1.0, 1.0)), np.clip(dd, -2.0, 2.0)])
        return out

    em = arrow(c_aa.sum(), c_ad, c_dd)
    o_tot = float((a * a * st["h_aa"] - a * st["g_a"]).sum() - st["v_common"])
    nt = arrow(o_tot, o_ad, o_dd) if np.all(o_dd > 0) else None
    return (nt if nt is not None else em), em


def _log_binom(s: np.ndarray, n: np.ndarray) -> float:
    """sum log C(n, s): the binomial coefficients R's binomial() log-likelihood includes."""
    if not np.any(n > 1):
        return 0.0
    from scipy.special import gammaln

    return float((gammaln(n + 1) - gammaln(s + 1) - gammaln(n - s + 1)).sum())


def marginal_loglik(a: np.ndarray, d: np.ndarray, s: np.ndarray, n: np.ndarray, quadrature: int = 41) -> float:
    """Marginal log-likelihood of item parameters ``(a, d)`` on counts ``s, n`` (models x items),
    ``theta ~ N(0, 1)``, adaptive Gauss-Hermite; used to compare fits from other programs."""
    x, w = _gh(quadrature)
    a, d = np.asarray(a, float), np.asarray(d, float)
    _, _, lm, _ = _estep(np.zeros(s.shape[0]), a, d, s, n, x, w)
    return float(lm.sum()) + _log_binom(s, n)


def score_abilities(fit: IrtFit, s: np.ndarray, n: np.ndarray, items: Sequence[int] | np.ndarray | None = None,
                    quadrature: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """EAP abilities (and posterior SDs) of new respondents from counts on some fitted items.

    ``s``, ``n``: ``R x K`` counts on the fitted items at positions ``items`` of ``fit.items``
    (all of them when ``None``); the item parameters stay fixed.
    """
    a = fit.items["a"].to_numpy()
    d = fit.items["d"].to_numpy()
    if items is not None:
        idx = np.asarray(items, dtype=int)
        a, d = a[idx], d[idx]
    s = np.atleast_2d(np.asarray(s, float))
    n = np.atleast_2d(np.asarray(n, float))
    x, w = _gh(quadrature or fit.quadrature)
    nodes, post, _, _ = _estep(np.zeros(s.shape[0]), a, d, s, n, x, w)
    eap = (post * nodes).sum(1)
    sd = np.sqrt(np.maximum((post * nodes ** 2).sum(1) - eap ** 2, 0.0))
    return eap, sd
