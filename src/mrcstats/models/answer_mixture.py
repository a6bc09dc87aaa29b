"""A mixture model of the answers many models give to multiple-choice items: is the key right, and if not, how
is the item broken?

Every item ``i`` is one of four kinds (hypotheses ``h``); each explains the options the models chose:

* ``clean``: the key ``g_i`` is the one correct option;
* ``wrong_key``: another option ``k`` is the one correct option (``k`` unknown, uniform over the others);
* ``multiple_correct``: the key and one other option ``k`` are both correct;
* ``no_correct``: no option is correct.

**Choices given the kind.** With the correct set ``S`` (``{g}``, ``{k}``, ``{g, k}`` or empty), model ``j`` (ability
``theta_j``, held fixed) answers in ``S`` with the 2PL probability ``p_j = expit(a_i (theta_j - b_i))``; its other
answers fall on the options outside ``S`` with item-specific shares drawn from a symmetric Dirichlet of total
concentration ``alpha`` (a Dirichlet-multinomial over the pooled wrong answers: how strongly wrong answers
converge on one "trap" option is learned from the log); within ``S = {g, k}`` the answers split with a share
drawn from ``Beta(beta, beta)``, ``beta >= 4`` (a split, not a few models answering with the key); with ``S`` empty every answer is a wrong answer. The item's ``(a_i, b_i)`` are
integrated over a nonparametric prior: weights on a fixed grid of slopes x difficulties estimated from all items
(Kiefer-Wolfowitz NPMLE, Laird 1978), so "every strong model misses it" costs what hard items really cost in this
log. The likelihood of an item under ``h``::

    L_h(i) = mean_k sum_q w_q prod_j p_jq^{x_ijS} (1 - p_jq)^{m_ij - x_ijS} * DM(wrong answers | alpha) * BB(split | beta)

(``x_ijS``: model ``j``'s answers in ``S``; ``m_ij`` its answers; the mean over the candidate ``k`` of ``wrong_key``
and ``multiple_correct``.)

**Priors by cluster.** The kinds' prior shares ``pi_c`` are estimated per cluster (a benchmark's subject: key
errors cluster, e.g. MMLU's virology) and shrunk to the log's overall shares with ``shrinkage`` items' weight:
``pi_c = (sum_{i in c} r_i + lambda pi) / (n_c + lambda)``.

**Fit.** EM (Dempster, Laird & Rubin 1977) over the kinds, the candidate options and the grid nodes; ``alpha`` and
``beta`` by one-dimensional maximisation of the marginal likelihood at every step. The posterior ``P(h | answers)``
of every item is the result: ``1 - P(clean)`` is the local false-discovery rate's complement (Efron 2004), and the
Bayesian FDR of flagging a set is the mean of ``P(clean)`` over it (Müller, Parmigiani & Rice 2006).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln, log_expit

__all__ = ["HYPOTHESES", "AnswerMixture", "fit_answer_mixture"]

#: the kinds of item, in the order of :attr:`AnswerMixture.posterior`'s columns
HYPOTHESES: tuple[str, ...] = ("clean", "wrong_key", "multiple_correct", "no_correct")

#: the grid of item slopes x difficulties the nonparametric prior puts its weights on
#: the least Beta concentration of the split between two correct options: ``multiple_correct`` is an item whose
#: answers split between the key and another option, not one that a few models answer with the key
_MIN_SPLIT = 4.0
_SLOPES = np.array([0.4, 1.2, 3.0])
_DIFFICULTIES = np.linspace(-6.0, 6.0, 25)


@dataclass(frozen=True)
class AnswerMixture:
    """A fitted :func:`fit_answer_mixture`.

    ``posterior``: ``I x 4`` probabilities of :data:`HYPOTHESES` per item; ``key_posterior``: ``I x K``
    ``P(wrong_key with option k correct | answers)`` (zero at the key); ``pair_posterior``: ``I x K``
    ``P(multiple_correct with the key and option k | answers)``. ``prior``: the kinds' overall shares;
    ``cluster_prior``: per cluster (rows in ``clusters`` order); ``alpha``, ``beta``: the Dirichlet and Beta
    concentrations; ``grid``: ``(slope, difficulty, weight)`` rows of the prior on ``(a, b)``; ``loglik``: the
    marginal log-likelihood; ``iterations``, ``converged``.
    """

    posterior: np.ndarray
    key_posterior: np.ndarray
    pair_posterior: np.ndarray
    prior: np.ndarray
    clusters: tuple[str, ...]
    cluster_prior: np.ndarray
    alpha: float
    beta: float
    grid: np.ndarray
    loglik: float
    iterations: int
    converged: bool


def _logsumexp(x: np.ndarray, axis: int) -> np.ndarray:
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        return np.squeeze(m, axis) + np.log(np.sum(np.exp(x - m), axis=axis))


def _irt_tables(X: np.ndarray, g: np.ndarray, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Log-likelihood of the correct/incorrect split at every grid node: ``single[i, k, q]`` with ``S = {k}``,
    ``pair[i, k, q]`` with ``S = {g_i, k}`` (``-inf`` at ``k = g_i``)."""
    I = X.shape[0]
    aa, bb = np.meshgrid(_SLOPES, _DIFFICULTIES, indexing="ij")
    eta = aa.ravel()[None, :] * (theta[:, None] - bb.ravel()[None, :])       # J x Q
    lp, l1p = log_expit(eta), log_expit(-eta)
    base = X.sum(2) @ l1p                                                     # I x Q
    D = lp - l1p
    single = np.einsum("ijk,jq->ikq", X, D, optimize=True) + base[:, None, :]
    xg = X[np.arange(I), :, g]
    pair = single + (xg @ D)[:, None, :]
    pair[np.arange(I), g, :] = -np.inf
    return single, pair


def _dm_tables(tot: np.ndarray, offered: np.ndarray, g: np.ndarray, alpha: float, beta: float,
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Log Dirichlet-multinomial (and Beta-binomial split) terms of the answers outside the correct set, for
    ``S = {k}`` (``single``, ``I x K``), ``S = {g, k}`` (``pair``) and ``S`` empty (``none``, ``I``): sequence
    probabilities ``Gamma(alpha) / Gamma(alpha + W) prod_o Gamma(alpha / n + w_o) / Gamma(alpha / n)`` over the
    ``n`` offered options outside ``S``."""
    I = tot.shape[0]
    gi = np.arange(I)
    W = tot.sum(1)
    n = offered.sum(1).astype(float)
    lg_alpha = float(gammaln(np.array(alpha)))

    def part(n_out: np.ndarray) -> np.ndarray:
        a = alpha / np.maximum(n_out, 1.0)
        return np.where(offered, gammaln(a[:, None] + tot) - gammaln(a)[:, None], 0.0)

    t1 = part(n - 1)
    single = lg_alpha - gammaln(alpha + W[:, None] - tot) + (t1.sum(1, keepdims=True) - t1)
    t2 = part(n - 2)
    tg = tot[gi, g][:, None]
    pair = (lg_alpha - gammaln(alpha + W[:, None] - tot - tg) + (t2.sum(1, keepdims=True) - t2 - t2[gi, g][:, None])
            + gammaln(beta + tg) + gammaln(beta + tot) - gammaln(2 * beta + tg + tot)
            - (2 * float(gammaln(np.array(beta))) - float(gammaln(np.array(2 * beta)))))
    pair = np.where(offered & (n[:, None] >= 2), pair, -np.inf)
    pair[gi, g] = -np.inf
    t0 = part(n)
    none = lg_alpha - gammaln(alpha + W) + t0.sum(1)
    single = np.where(offered, single, -np.inf)
    return single, pair, none


def _kinds(s_irt: np.ndarray, p_irt: np.ndarray, dm: tuple[np.ndarray, np.ndarray, np.ndarray], g: np.ndarray,
           n_other: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per item the log-likelihood of each kind (``I x 4``), and the per-option terms of wrong_key and
    multiple_correct (``I x K``, before the mean over candidates)."""
    dms, dmp, dmn = dm
    I = len(g)
    gi = np.arange(I)
    s = s_irt + dms
    w = s.copy()
    w[gi, g] = -np.inf
    p = p_irt + dmp
    lo = np.log(np.maximum(n_other, 1.0))
    with np.errstate(invalid="ignore"):
        L = np.column_stack([s[gi, g], _logsumexp(w, 1) - lo, _logsumexp(p, 1) - lo, dmn])
    L[:, 1:3] = np.where(n_other[:, None] >= 1, L[:, 1:3], -np.inf)
    return L, w, p


def _scaled(t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``t = M + log E`` with ``M`` the maximum over the last axis (``-inf`` rows give ``E = 0``)."""
    M = t.max(axis=2)
    with np.errstate(invalid="ignore"):
        E = np.exp(t - np.where(np.isfinite(M), M, 0.0)[:, :, None])
    return M, np.where(np.isfinite(M)[:, :, None], E, 0.0)


def _softmax(x: np.ndarray) -> np.ndarray:
    """Row-wise ``exp(x) / sum(exp(x))``; a row of ``-inf`` gives zeros."""
    m = x.max(1, keepdims=True)
    e = np.exp(x - np.where(np.isfinite(m), m, 0.0))
    t = e.sum(1, keepdims=True)
    return np.where(t > 0, e / np.where(t > 0, t, 1.0), 0.0)


def _bounded_max(f, lo: float, hi: float, x0: float) -> float:
    from scipy.optimize import minimize_scalar

    r = minimize_scalar(lambda x: -f(x), bounds=(lo, hi), method="bounded", options={"xatol": 1e-4})
    return float(r.x) if f(float(r.x)) >= f(x0) else x0


def fit_answer_mixture(counts: np.ndarray, key: np.ndarray, theta: np.ndarray, *, offered: np.ndarray | None = None,
                       cluster: np.ndarray | None = None, shrinkage: float = 30.0, tol: float = 1e-8, post_tol: float = 1e-3,
                       max_iter: int = 200) -> AnswerMixture:
    """Fit the answer mixture (module docstring) by EM.

    ``counts``: ``I x J x K`` answers of model ``j`` to item ``i`` choosing option slot ``k``; ``key``: ``I`` the
    key's slot; ``theta``: ``J`` the models' abilities (held fixed, e.g. 2PL EAP); ``offered``: ``I x K`` the slots
    item ``i`` offers (default all); ``cluster``: ``I`` labels for the cluster priors (default one cluster);
    ``shrinkage``: the overall prior's weight in items (``lambda``). Converged when, over one accelerated cycle, the
    log-likelihood changes by less than ``tol`` relative or no item's ``P(clean)`` moves by ``post_tol`` (the
    grid weights of a nonparametric prior creep long after the posteriors have settled).
    """
    X = np.asarray(counts, float)
    g = np.asarray(key, int)
    th = np.asarray(theta, float)
    I, _J, K = X.shape
    off = np.ones((I, K), bool) if offered is None else np.asarray(offered, bool).copy()
    off[np.arange(I), g] = True
    tot = X.sum(1)
    n_other = off.sum(1) - 1.0
    labels = np.zeros(I, int) if cluster is None else np.unique(np.asarray(cluster).astype(str), return_inverse=True)[1]
    names = ("",) if cluster is None else tuple(np.unique(np.asarray(cluster).astype(str)))
    C = labels.max() + 1 if I else 1
    irt_s, irt_p = _irt_tables(X, g, th)
    # each (item, option) configuration's node likelihoods scaled by their maximum: the mixture over the grid
    # is then one matrix-vector product per step
    Ms, Es = _scaled(np.where(off[:, :, None], irt_s, -np.inf))
    Mp, Ep = _scaled(np.where(off[:, :, None], irt_p, -np.inf))
    del irt_s, irt_p
    Q = Es.shape[2]
    gi = np.arange(I)

    def step(lw: np.ndarray, lpc: np.ndarray, alpha: float, beta: float, tune: bool):
        """One EM step from (grid log-weights, cluster log-priors): the new ones, alpha, beta and the
        log-likelihood at the input."""
        wq = np.exp(lw)
        es, ep = Es @ wq, Ep @ wq                                   # I x K
        with np.errstate(divide="ignore"):
            s_irt, p_irt = Ms + np.log(es), Mp + np.log(ep)
        lpi = lpc[labels]
        if tune:
            def marginal(la: float, lb: float) -> float:
                L, _, _ = _kinds(s_irt, p_irt, _dm_tables(tot, off, g, np.exp(la), np.exp(lb)), g, n_other)
                return float(_logsumexp(L + lpi, 1).sum())

            alpha = float(np.exp(_bounded_max(lambda x: marginal(x, np.log(beta)), -5.0, 7.0, np.log(alpha))))
            beta = float(np.exp(_bounded_max(lambda x: marginal(np.log(alpha), x), np.log(_MIN_SPLIT), 7.0,
                                             np.log(beta))))
        L, w, p = _kinds(s_irt, p_irt, _dm_tables(tot, off, g, alpha, beta), g, n_other)
        Lp = L + lpi
        ll_i = _logsumexp(Lp, 1)
        post = np.exp(Lp - ll_i[:, None])
        # grid weights: responsibilities of the nodes under every (kind, option) configuration
        cw_s = post[:, 1:2] * _softmax(w)
        cw_s[gi, g] = post[:, 0]
        cw_p = post[:, 2:3] * _softmax(p)
        with np.errstate(divide="ignore", invalid="ignore"):
            us = np.where(es > 0, cw_s / es, 0.0)
            up = np.where(ep > 0, cw_p / ep, 0.0)
        r = (us.ravel() @ Es.reshape(-1, Q) + up.ravel() @ Ep.reshape(-1, Q)) * wq
        new_lw = np.log(np.maximum(r / r.sum(), 1e-300)) if r.sum() > 0 else lw
        S = np.zeros((C, 4))
        np.add.at(S, labels, post)
        prior = post.mean(0)
        new_lpc = np.log(np.maximum((S + shrinkage * prior) / (S.sum(1, keepdims=True) + shrinkage), 1e-300))
        return new_lw, new_lpc, alpha, beta, float(ll_i.sum()), (post, w, p, prior)

    def norm(lw: np.ndarray, lpc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        lw = np.maximum(lw, -700.0)
        lpc = np.maximum(lpc, -700.0)
        return lw - _logsumexp(lw, 0), lpc - _logsumexp(lpc, 1)[:, None]

    lw = np.full(Q, -np.log(Q))
    lpc = np.log(np.tile([0.9, 0.04, 0.03, 0.03], (C, 1)))
    alpha, beta = 1.0, _MIN_SPLIT
    prev, prev_clean, converged, it = -np.inf, np.full(I, np.inf), False, 0
    # EM accelerated by SQUAREM (Varadhan & Roland 2008, scheme S3) on (grid log-weights, cluster log-priors);
    # alpha and beta are re-maximised every fifth cycle
    for it in range(1, max_iter + 1):
        tune = it % 5 == 1
        lw1, lpc1, alpha, beta, ll0, _ = step(lw, lpc, alpha, beta, tune)
        lw2, lpc2, _, _, _, _ = step(lw1, lpc1, alpha, beta, False)
        x0, x1, x2 = (np.r_[lw, lpc.ravel()], np.r_[lw1, lpc1.ravel()], np.r_[lw2, lpc2.ravel()])
        r_, v_ = x1 - x0, x2 - 2 * x1 + x0
        nv = float(np.sqrt(v_ @ v_))
        a_s = -float(np.sqrt(r_ @ r_)) / nv if nv > 0 else -1.0
        a_s = min(a_s, -1.0)
        xs = x0 - 2 * a_s * r_ + a_s * a_s * v_
        lwx, lpcx = norm(xs[:Q], xs[Q:].reshape(C, 4))
        lw3, lpc3, _, _, ll3, out3 = step(lwx, lpcx, alpha, beta, False)
        if not np.isfinite(ll3) or ll3 < ll0:
            lw3, lpc3, _, _, ll3, out3 = step(lw2, lpc2, alpha, beta, False)
        lw, lpc = norm(lw3, lpc3)
        clean = out3[0][:, 0]
        if not tune and (abs(ll3 - prev) <= tol * abs(ll3) or np.max(np.abs(clean - prev_clean)) < post_tol):
            converged = True
            break
        prev, prev_clean = ll3, clean
    _, _, alpha, beta, ll, (post, w, p, prior) = step(lw, lpc, alpha, beta, True)
    pi_c = np.exp(lpc)
    grid = np.column_stack([*(v.ravel() for v in np.meshgrid(_SLOPES, _DIFFICULTIES, indexing="ij")), np.exp(lw)])
    key_post = post[:, 1:2] * _softmax(w)
    pair_post = post[:, 2:3] * _softmax(p)
    return AnswerMixture(post, key_post, pair_post, prior, names, pi_c, alpha, beta, grid, ll, it, converged)
