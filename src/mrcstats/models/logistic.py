"""Many small binomial logistic regressions at once (one per item), by penalised Newton-Raphson (IRLS).

For each batch element ``b`` (an item, or an item x group pair) with counts ``s_bj`` correct out of
``n_bj`` over the respondents ``j``::

    eta_bj = x_bj' beta_b + offset_bj,   mu = 1 / (1 + exp(-eta))
    l_b(beta) = sum_j s_bj eta_bj - n_bj log(1 + exp(eta_bj))  -  1/2 sum_k lambda_k (beta_bk - m_k)^2

Without a penalty (``ridge=None``) this is R's ``glm(cbind(s, n - s) ~ x + offset(o), family = binomial)``
(Fisher scoring = Newton for the canonical logit link), and ``deviance`` is R's residual deviance
``2 sum_j [s log(s / (n mu)) + (n - s) log((n - s) / (n (1 - mu)))]`` so that likelihood-ratio
statistics are differences of deviances, as in R's ``anova(m0, m1, test = "Chisq")``. A ridge
(a normal prior ``beta_k ~ N(m_k, 1 / lambda_k)``) keeps perfectly separated patterns, common with
~30 models as respondents, at finite estimates (posterior modes).

The design is shared by the batch (``J x p``) or given per element (``B x J x p``); every step is
vectorised over the batch, with step halving per element until its objective does not fall.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["BatchLogit", "fit_logistic"]


@dataclass(frozen=True)
class BatchLogit:
    """Fitted coefficients ``beta`` (``B x p``), log-likelihood kernels ``loglik`` (``sum s eta - n log(1+e^eta)``,
    without the penalty), ``deviance`` (R's residual deviance), fitted probabilities ``mu`` (``B x J``),
    ``converged`` per element and the iterations used."""

    beta: np.ndarray
    loglik: np.ndarray
    deviance: np.ndarray
    mu: np.ndarray
    converged: np.ndarray
    iterations: int


def _xlogy(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    from scipy.special import xlogy

    return xlogy(x, y)


def _kernel(s: np.ndarray, n: np.ndarray, eta: np.ndarray) -> np.ndarray:
    return (s * eta - n * np.logaddexp(0.0, eta)).sum(axis=-1)


def fit_logistic(X: np.ndarray, s: np.ndarray, n: np.ndarray, *, offset: np.ndarray | None = None,
                 ridge: np.ndarray | float | None = None, prior_mean: np.ndarray | float = 0.0,
                 beta0: np.ndarray | None = None, tol: float = 1e-10, max_iter: int = 100) -> BatchLogit:
    """Fit ``B`` logistic regressions (see the module docstring).

    ``X``: ``J x p`` (shared) or ``B x J x p``; ``s``, ``n``: ``B x J`` counts (``n = 0``: no observation);
    ``offset``: ``B x J`` or ``J``; ``ridge``: penalty precision per coefficient (scalar or ``p``);
    converged when the largest Newton step is below ``tol``.
    """
    s = np.asarray(s, float)
    n = np.asarray(n, float)
    B, J = s.shape
    X = np.asarray(X, float)
    shared = X.ndim == 2
    p = X.shape[-1]
    off = np.zeros((B, J)) if offset is None else np.broadcast_to(np.asarray(offset, float), (B, J))
    lam = np.zeros(p) if ridge is None else np.broadcast_to(np.asarray(ridge, float), (p,)).copy()
    m = np.broadcast_to(np.asarray(prior_mean, float), (p,))
    beta = np.zeros((B, p)) if beta0 is None else np.array(beta0, float, copy=True)

    def linpred(bt: np.ndarray) -> np.ndarray:
        return (bt @ X.T if shared else np.matmul(X, bt[:, :, None])[:, :, 0]) + off

    def objective(bt: np.ndarray, eta: np.ndarray) -> np.ndarray:
        return _kernel(s, n, eta) - 0.5 * (lam * (bt - m) ** 2).sum(axis=1)

    eta = linpred(beta)
    obj = objective(beta, eta)
    active = np.ones(B, bool)
    it = 0
    for it in range(1, max_iter + 1):
        from scipy.special import expit

        mu = expit(eta)
        r = s - n * mu
        w = n * mu * (1.0 - mu)
        if shared:
            g = r @ X - lam * (beta - m)
            H = np.einsum("bj,jp,jq->bpq", w, X, X, optimize=True)
        else:
            g = np.matmul(r[:, None, :], X)[:, 0, :] - lam * (beta - m)
            H = np.matmul(np.swapaxes(X * w[:, :, None], 1, 2), X)
        H = H + np.eye(p) * lam + np.eye(p) * 1e-12
        try:
            step = np.linalg.solve(H, g[..., None])[..., 0]
        except np.linalg.LinAlgError:
            step = np.linalg.lstsq(H.reshape(-1, p), g.reshape(-1), rcond=None)[0].reshape(B, p) \
                if B == 1 else np.stack([np.linalg.pinv(h) @ gg for h, gg in zip(H, g, strict=True)])
        step[~active] = 0.0
        t = np.ones(B)
        new = beta + step
        eta_new = linpred(new)
        obj_new = objective(new, eta_new)
        for _ in range(30):
            bad = ~(obj_new >= obj - 1e-12 * np.abs(obj)) & active
            if not bad.any():
                break
            t = np.where(bad, t * 0.5, t)
            new = np.where(bad[:, None], beta + t[:, None] * step, new)
            eta_new = np.where(bad[:, None], linpred(new), eta_new)
            obj_new = np.where(bad, objective(new, eta_new), obj_new)
        size = np.max(np.abs(t[:, None] * step), axis=1)
        beta, eta, obj = new, eta_new, obj_new
        active = active & (size >= tol)
        if not active.any():
            break
    from scipy.special import expit

    mu = expit(eta)
    ll = _kernel(s, n, eta)
    with np.errstate(divide="ignore", invalid="ignore"):
        dev = 2.0 * (_xlogy(s, s) + _xlogy(n - s, n - s) - _xlogy(s, n * mu) - _xlogy(n - s, n * (1.0 - mu)))
    dev = np.where(n > 0, dev, 0.0).sum(axis=1)
    return BatchLogit(beta, ll, dev, mu, ~active, it)
