"""Response distributions of the mixed models: a family is data, not a branch.

A :class:`Family` holds what every piece of the engine asks about the response distribution, as R's
``family`` objects (``binomial()``, ``poisson()``) and statsmodels' ``genmod.families`` do:

* the link: ``linkfun`` (g), ``linkinv`` (g⁻¹, clamped as R's C code), ``mu_eta`` (dμ/dη), as R's
  ``family$linkfun``, ``$linkinv``, ``$mu.eta``;
* the variance function ``variance`` V(μ) (``family$variance``; the one spelling of V: a kernel that needs
  the weighted w V(μ) multiplies it by w) and its derivative ``dvariance`` V'(μ);
* the deviance kernels' pieces for a canonical link, where the log-likelihood of a row with prior
  weight w is ``w (y η − b(η)) + c(y)``: the cumulant ``cumulant`` b(η), the mean ``mean`` b'(η) = μ
  (unclamped, in place), and W = w b''(η) = w V(μ), b''' = V'(μ) V(μ). The Laplace deviance of lme4
  (Bates et al. 2015, J. Stat. Softw. 67(1), eq. 30-31) is then
  ``2 Σ w (b(η) − yη) − 2 const + ‖u‖² + log|L|²`` with ``const`` = Σ c(y) (``loglik_const``), and
  the deviance-residual sum ``2 Σ w (b(η) − yη) + saturated`` (``saturated`` = 2 Σ w (y θ(y) − b(θ(y)))
  at the saturated θ(y));
* the start (``start_mean``: the mean the GLM start's IRLS begins from, glm's ``mustart`` idea), the
  check that there is something to estimate (``check_mean``), ``simulate`` (R's ``simulate`` of the
  family: one response vector given μ and the weights), the response the design reads (``response``:
  ``"binomial"`` 0/1, proportions with weights, ``cbind(k, n − k)`` or a two-level factor; ``"count"``
  non-negative integers);
* ``capabilities``: which interval methods, simulations, emmeans and tests its fits support
  (:data:`mrcstats.models.family_table.CAPABILITIES`, asked through ``family_table.require``).

How reports and emmeans name its scales ("logit scale", the ``prob`` column) is not here: that is presentation,
:data:`mrcstats.models.family_table.LABELS` (``family_table.family_labels(fam)``). A family travels on the model spec
(``ModelSpec.family``, set by the front door :func:`mrcstats.models.fit.glmer`), never beside it.

Sufficient statistics: with a canonical link the likelihood depends on the rows of one covariate pattern
only through Σ w y and Σ w (``canonical``), which the out-of-core path uses for the binomial counts.

Adding a family is one instance below, its rows in :mod:`mrcstats.models.family_table` (link and response,
capabilities, labels) and its parity test against R (docs/architecture.md, "How to add ...").
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from mrcstats.errors import InputError
from mrcstats.models.family_table import CAPABILITIES, Capabilities

_THRESH = 30.0
_EPS = float(np.finfo(float).eps)


@dataclass(frozen=True, eq=False)
class Family:
    """A response distribution with its link (see the module docstring for each field)."""

    name: str                      # R's family$family
    link: str                      # R's family$link
    response: str                  # which response the design reads: "binomial" or "count"
    linkfun: Callable              # μ -> η
    linkinv: Callable              # η -> μ as R (clamped)
    mu_eta: Callable               # dμ/dη as R
    variance: Callable             # (μ, out=None) -> V(μ), R's family$variance (into out when given)
    dvariance: Callable            # (μ, out=None) -> V'(μ)
    cumulant: Callable             # (η, out=None, tmp=None) -> b(η)
    mean: Callable                 # (η, out=None) -> b'(η) = μ, unclamped
    saturated: Callable            # (y, w) -> 2 Σ w (y θ(y) − b(θ(y)))
    saturated_rows: Callable       # (y, w) -> the same per row
    loglik_const: Callable         # (y, trials, prior_w, counts) -> (Σ c(y), messages)
    start_mean: Callable           # (y, w) -> the mean the GLM start begins from
    check_mean: Callable           # (ȳ, nobs) -> None, or why there is nothing to estimate
    boundary_message: Callable     # (μ) -> None, or a message about fitted values on the boundary
    simulate: Callable             # (μ, weights, rng, φ) -> y on the design's scale (φ: the dispersion or None)
    canonical: bool = True
    loglik_rows: Callable | None = None  # (y, trials, η, φ) -> (ℓ, ∂ℓ/∂η, ∂²ℓ/∂η²) per row: the Laplace fit
    loglik_kernel: Callable | None = None  # (y, trials) -> f(η, φ, derivs=True): loglik_rows on fixed data, built once
    cumulant_mu: Callable | None = None  # (η, μ) -> b(η) when μ = b'(η) is at hand (cheaper); None: cumulant
    start_dispersion: float = 1.0  # φ's start (families with a dispersion parameter)
    capabilities: Capabilities | None = None  # what its fits support (family_table.CAPABILITIES[name])

    def __post_init__(self) -> None:
        if self.capabilities is None or self.capabilities.kind != self.name:   # a new family declares its own
            object.__setattr__(self, "capabilities", CAPABILITIES.get(self.name))

    def __str__(self) -> str:
        return self.name

    def __reduce__(self) -> str | tuple[Any, ...]:
        """A registered family pickles as its name (its kernels include lambdas, which pickle cannot store), so a
        fit of any registered family can be stored and read back; any other family pickles field by field."""
        if FAMILIES.get(self.name) is self:
            return (get_family, (self.name,))
        return super().__reduce__()

    def cumulant_at(self, eta: np.ndarray, mu: np.ndarray) -> np.ndarray:
        """b(η) (a new array) where μ = b'(η) is already computed (the modes' last PIRLS pass)."""
        return self.cumulant(eta) if self.cumulant_mu is None else self.cumulant_mu(eta, mu)

    @property
    def r_call(self) -> str:
        """The R expression of this family, e.g. ``binomial(link = "logit")``."""
        return f'{self.name}(link = "{self.link}")'


# ----------------------------------------------------------------------------- binomial, logit link


def _logit(mu):
    if isinstance(mu, float):
        return math.log(mu / (1 - mu))
    mu = np.asarray(mu, float)
    return np.log(mu / (1 - mu))


def _logit_linkinv(eta):
    """R's ``binomial()$linkinv`` (C ``logit_linkinv``: clamped beyond |η| > 30)."""
    eta = np.asarray(eta, dtype=float)
    with np.errstate(over="ignore", invalid="ignore"):
        tmp = np.where(eta < -_THRESH, _EPS,
                       np.where(eta > _THRESH, 1.0 / _EPS, np.exp(np.clip(eta, -_THRESH, _THRESH))))
        return tmp / (1.0 + tmp)


def _logit_mu_eta(eta):
    """R's ``binomial()$mu.eta`` (C ``logit_mu_eta``)."""
    eta = np.asarray(eta, dtype=float)
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(np.clip(eta, -_THRESH, _THRESH))
        return np.where(np.abs(eta) > _THRESH, _EPS, e / ((1.0 + e) * (1.0 + e)))


def _softplus(eta: np.ndarray, out: np.ndarray | None = None, tmp: np.ndarray | None = None) -> np.ndarray:
    """log(1 + exp(η)) = log1p(exp(−|η|)) + max(η, 0), overflow-free (into ``out``; ``tmp``: scratch)."""
    a = np.abs(eta, out=out)
    np.negative(a, out=a)
    np.exp(a, out=a)
    np.log1p(a, out=a)
    if tmp is None:
        a += np.maximum(eta, 0)
    else:
        np.maximum(eta, 0, out=tmp)
        a += tmp
    return a


def _softplus_at_mean(eta: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """b(η) = log(1 + exp(η)) from μ = expit(η) already computed: −log(1 − μ) for η ≤ 0 and η − log(μ) for
    η > 0 (the logarithm of the factor that is at least 1/2, so no digits are lost): one logarithm
    instead of :func:`_softplus`'s exponential and log1p. Equal to :func:`_softplus` within a few ulp
    of b(η) per row (tests/models/test_family.py)."""
    pos = eta > 0
    a = np.where(pos, mu, 1.0 - mu)
    np.log(a, out=a)
    np.negative(a, out=a)
    a += np.where(pos, eta, 0.0)
    return a


def _expit(eta: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """1 / (1 + exp(−η)) (into ``out`` or a new array; faster than scipy's expit)."""
    with np.errstate(over="ignore"):
        o = np.negative(eta, out=out)
        np.exp(o, out=o)
    o += 1.0
    np.reciprocal(o, out=o)
    return o


def _binom_var(mu, out=None):
    return np.multiply(mu, 1.0 - mu, out=out)


def _binom_dvar(mu, out=None):
    t = np.multiply(mu, -2.0, out=out)
    t += 1.0
    return t


def _binom_sat_parts(y):
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(y > 0, y * np.log(np.where(y > 0, y, 1)), 0.0)
        b = np.where(y < 1, (1 - y) * np.log(np.where(y < 1, 1 - y, 1)), 0.0)
    return a, b


def _binom_saturated(y, w) -> float:
    """2 Σ w [y log y + (1−y) log(1−y)] (0 for 0/1 responses)."""
    if bool(np.all((y == 0) | (y == 1))):
        return 0.0
    a, b = _binom_sat_parts(y)
    return float(2 * np.sum(w * (a + b)))


def _binom_saturated_rows(y, w):
    a, b = _binom_sat_parts(y)
    return 2 * w * a + 2 * w * b


def _binom_const(y, trials, prior_w, counts):
    """``binomial()$aic``'s constant: Σ (wt/m) log C(m, k), with m trials and k = round(m y) successes."""
    if not (counts or prior_w is not None):
        return 0.0, []
    from scipy.special import gammaln

    msgs = []
    wts = trials if prior_w is None else trials * prior_w
    m = trials if np.any(trials > 1) else wts
    k = np.round(m * y)
    if np.any(np.abs(m * y - k) > 1e-7 * np.maximum(1, m)):
        msgs.append("non-integer #successes in a binomial glm!")
    m = np.round(m)
    with np.errstate(invalid="ignore", divide="ignore"):
        fac = np.where(m > 0, wts / np.where(m > 0, m, 1), 0.0)
    return float(np.sum(fac * (gammaln(m + 1) - gammaln(k + 1) - gammaln(m - k + 1)))), msgs


def _binom_start(y, w) -> float:
    return (float(np.sum(w * y)) + 0.5) / (float(w.sum()) + 1.0)


def _binom_check(ybar: float, nobs: int) -> str | None:
    if 0.0 < ybar < 1.0:
        return None
    return (f"every response is {'a success' if ybar == 1.0 else 'a failure'} ({nobs} rows): "
            "a binomial model has nothing to estimate")


def _binom_boundary(mu) -> str | None:
    if np.any((mu < 1e-10) | (mu > 1 - 1e-10)):
        return ("fitted probabilities numerically 0 or 1 occurred (possible complete separation "
                "of a fixed effect; estimates and SEs of the separated terms are not reliable)")
    return None


def _binom_simulate(mu, weights, rng: np.random.Generator, dispersion: float | None = None) -> np.ndarray:
    """y ~ Binomial(trials, μ) / trials (the weights are the trials), Bernoulli draws for one trial."""
    n = np.round(weights).astype(np.int64)
    if np.all(n == 1):
        return (rng.random(len(mu)) < mu).astype(float)
    s = rng.binomial(np.maximum(n, 0), mu)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, s / np.where(n > 0, n, 1), 0.0)


BINOMIAL = Family(
    name="binomial", link="logit", response="binomial", linkfun=_logit, linkinv=_logit_linkinv,
    mu_eta=_logit_mu_eta, variance=_binom_var, dvariance=_binom_dvar, cumulant=_softplus, mean=_expit,
    saturated=_binom_saturated, saturated_rows=_binom_saturated_rows, loglik_const=_binom_const,
    start_mean=_binom_start, check_mean=_binom_check, boundary_message=_binom_boundary, simulate=_binom_simulate,
    cumulant_mu=_softplus_at_mean)


# ----------------------------------------------------------------------------- Poisson, log link


def _log(mu):
    if isinstance(mu, float):
        return math.log(mu)
    return np.log(np.asarray(mu, float))


def _exp_clamped(eta):
    """R's ``poisson()$linkinv`` and ``$mu.eta``: pmax(exp(η), .Machine$double.eps)."""
    with np.errstate(over="ignore"):
        return np.maximum(np.exp(np.asarray(eta, float)), _EPS)


def _exp(eta, out=None, tmp=None):
    with np.errstate(over="ignore"):
        return np.exp(eta, out=out)


def _pois_var(mu, out=None):
    if out is None:
        return np.array(mu, dtype=float, copy=True)
    np.copyto(out, mu)
    return out


def _pois_dvar(mu, out=None):
    if out is None:
        return np.ones_like(mu)
    out.fill(1.0)
    return out


def _pois_saturated_rows(y, w):
    with np.errstate(divide="ignore", invalid="ignore"):
        return 2 * w * (np.where(y > 0, y * np.log(np.where(y > 0, y, 1)), 0.0) - y)


def _pois_const(y, trials, prior_w, counts):
    """``poisson()$aic``'s constant: −Σ wt log(y!)."""
    from scipy.special import gammaln

    w = np.ones_like(y) if prior_w is None else prior_w
    return float(-np.sum(w * gammaln(y + 1))), []


def _pois_check(ybar: float, nobs: int) -> str | None:
    if ybar > 0:
        return None
    return f"every response is 0 ({nobs} rows): a Poisson model has nothing to estimate"


def _pois_simulate(mu, weights, rng: np.random.Generator, dispersion: float | None = None) -> np.ndarray:
    return rng.poisson(mu).astype(float)


POISSON = Family(
    name="poisson", link="log", response="count", linkfun=_log, linkinv=_exp_clamped, mu_eta=_exp_clamped,
    variance=_pois_var, dvariance=_pois_dvar, cumulant=_exp, mean=_exp,
    saturated=lambda y, w: float(np.sum(_pois_saturated_rows(y, w))), saturated_rows=_pois_saturated_rows,
    loglik_const=_pois_const, start_mean=lambda y, w: float(np.sum(w * y)) / float(np.sum(w)),
    check_mean=_pois_check, boundary_message=lambda mu: None, simulate=_pois_simulate)


# ----------------------------------------------------------------------------- Gaussian, identity link


def _identity(x, out=None):
    if isinstance(x, float):
        return x
    if out is None:
        return np.array(x, dtype=float, copy=True)
    np.copyto(out, x)
    return out


def _zeros(mu, out=None):
    if out is None:
        return np.zeros_like(np.asarray(mu, float))
    out.fill(0.0)
    return out


def _half_square(eta, out=None, tmp=None):
    out = np.multiply(eta, eta, out=out)
    out *= 0.5
    return out


GAUSSIAN = Family(
    name="gaussian", link="identity", response="continuous", linkfun=_identity,
    linkinv=lambda eta: np.asarray(eta, float), mu_eta=lambda eta: np.ones_like(np.asarray(eta, float)),
    variance=_pois_dvar, dvariance=_zeros, cumulant=_half_square, mean=_identity,
    saturated=lambda y, w: float(np.sum(w * y * y)),
    saturated_rows=lambda y, w: w * y * y, loglik_const=lambda y, trials, prior_w, counts: (0.0, []),
    start_mean=lambda y, w: float(np.sum(w * y)) / float(np.sum(w)),
    check_mean=lambda ybar, nobs: None if np.isfinite(ybar) else "the response has no finite mean",
    boundary_message=lambda mu: None, simulate=lambda mu, weights, rng, dispersion=None: mu + rng.standard_normal(len(mu)))
"""The linear mixed model's family (:func:`mrcstats.models.lmm.lmer`): the design reads a continuous
response; the fit is lme4's profiled (RE)ML, not the Laplace kernels (their σ is fixed at 1)."""


# ----------------------------------------------------------------------------- beta-binomial, logit link


#: the largest trial count n the beta-binomial kernel sums term by term (above it, or for non-integer n: scipy's
#: digamma/trigamma/betaln per row)
BETABINOM_RECURRENCE_MAX = 512


class _BetaBinomRows:
    """glmmTMB's ``betabinomial`` row log-likelihood for fixed data (k successes of n trials), as a function of
    (η, φ): k ~ BetaBinomial(n, μφ, (1-μ)φ), μ = logit⁻¹(η), Var(k) = nμ(1-μ)(1 + (n-1)/(φ+1));

        ℓ = log C(n, k) + log B(k + a, n - k + b) - log B(a, b),   a = μφ, b = (1-μ)φ,

    and its η-derivatives ∂ℓ/∂μ = φ (ψ(k+a) - ψ(a) - ψ(n-k+b) + ψ(b)), ∂²ℓ/∂μ² = φ² (ψ'(k+a) - ψ'(a) + ψ'(n-k+b)
    - ψ'(b)) times dμ/dη = μ(1-μ) (chain rule). For integer counts the differences are finite sums (the
    recurrences Γ(x+1) = xΓ(x), ψ(x+1) = ψ(x) + 1/x, ψ'(x+1) = ψ'(x) - 1/x²; Abramowitz & Stegun 6.1.15, 6.3.5,
    6.4.6): log Γ(k+a) - log Γ(a) = Σ_{j<k} log(a+j), ψ(k+a) - ψ(a) = Σ_{j<k} 1/(a+j), ψ'(k+a) - ψ'(a) =
    -Σ_{j<k} 1/(a+j)², and log B(k+a, n-k+b) - log B(a, b) = Σ_{j<k} log(a+j) + Σ_{j<n-k} log(b+j) - Σ_{j<n} log(φ+j).
    The rows are sorted by k (and by n - k) once, so term j of a sum is one slice of the rows with k > j; the
    φ-sum is a table over n. Above ``BETABINOM_RECURRENCE_MAX`` trials (or non-integer n) scipy's
    betaln/digamma/polygamma per row compute the same numbers."""

    def __init__(self, y, trials, method: str = "auto"):
        """``method``: "auto" (the sums where they apply), or "scipy" (the per-row special functions)."""
        from scipy.special import gammaln

        n = np.asarray(trials, float)
        k = np.round(np.asarray(y, float) * n)
        self.n, self.k = n, k
        self.const = gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)
        self.sums = bool(method != "scipy" and len(n) and np.all(n == np.round(n)) and np.all(n >= 0) and np.all((k >= 0) & (k <= n))
                         and n.max() <= BETABINOM_RECURRENCE_MAX)
        if self.sums:
            self.ni = n.astype(np.int64)
            self.sides = []
            for c in (k.astype(np.int64), (n - k).astype(np.int64)):
                order = np.argsort(-c, kind="stable")
                # rows with c > j are the first cnt[j] of ``order``
                cnt = np.searchsorted(-c[order], -np.arange(int(c.max(initial=0))), side="left")
                self.sides.append((order, cnt))

    def __call__(self, eta, phi, derivs: bool = True):
        """(ℓ, ∂ℓ/∂η, ∂²ℓ/∂η²) per row at η and φ (``derivs=False``: (ℓ, None, None))."""
        mu = _expit(np.asarray(eta, float))
        a, b = mu * phi, (1 - mu) * phi
        if not self.sums:
            return self._scipy(mu, a, b, phi, derivs)
        ll = self.const.copy()
        s1, s2 = [], []
        for (order, cnt), shape in zip(self.sides, (a, b)):
            xs = shape[order]
            L = np.zeros(len(xs))
            S1 = np.zeros(len(xs)) if derivs else None
            S2 = np.zeros(len(xs)) if derivs else None
            # Σ_{j≥1} log(x+j) as the logarithm of products of up to `chunk` factors (each in [1, φ + n]: no
            # overflow below 1e300), the j = 0 term (x may be tiny) on its own
            chunk = 8 if phi + len(cnt) < 1e30 else 1
            P = np.empty(len(xs))
            v = np.empty(len(xs))
            m0 = 0
            for j, m in enumerate(cnt):
                vj = np.add(xs[:m], j, out=v[:m])
                if j == 0 or chunk == 1:
                    L[:m] += np.log(vj)
                else:
                    if (j - 1) % chunk == 0:
                        if j > 1:
                            L[:m0] += np.log(P[:m0])
                        m0 = m
                        P[:m] = 1.0
                    P[:m] *= vj
                if derivs:
                    np.reciprocal(vj, out=vj)
                    S1[:m] += vj
                    vj *= vj
                    S2[:m] += vj
            if chunk > 1 and len(cnt) > 1:
                L[:m0] += np.log(P[:m0])
            ll[order] += L
            if derivs:
                t1, t2 = np.empty(len(xs)), np.empty(len(xs))
                t1[order], t2[order] = S1, S2
                s1.append(t1)
                s2.append(t2)
        tab = np.concatenate([[0.0], np.cumsum(np.log(phi + np.arange(int(self.ni.max(initial=0)))))])
        ll -= tab[self.ni]
        if not derivs:
            return ll, None, None
        dmu = phi * (s1[0] - s1[1])
        d2mu = -phi * phi * (s2[0] + s2[1])
        m1 = mu * (1 - mu)
        return ll, dmu * m1, d2mu * m1 * m1 + dmu * m1 * (1 - 2 * mu)

    def _scipy(self, mu, a, b, phi, derivs):
        from scipy.special import betaln, digamma, polygamma

        n, k = self.n, self.k
        ll = self.const + betaln(k + a, n - k + b) - betaln(a, b)
        if not derivs:
            return ll, None, None
        dmu = phi * (digamma(k + a) - digamma(n - k + b) - digamma(a) + digamma(b))
        d2mu = phi * phi * (polygamma(1, k + a) + polygamma(1, n - k + b) - polygamma(1, a) - polygamma(1, b))
        m1 = mu * (1 - mu)
        return ll, dmu * m1, d2mu * m1 * m1 + dmu * m1 * (1 - 2 * mu)


def _betabinom_rows(y, trials, eta, phi):
    """glmmTMB's ``betabinomial`` (ℓ, ∂ℓ/∂η, ∂²ℓ/∂η²) per row (:class:`_BetaBinomRows`; a fit that evaluates
    many (η, φ) on the same data builds the kernel once through ``Family.loglik_kernel``)."""
    return _BetaBinomRows(y, trials)(eta, phi)


def _betabinom_simulate(mu, weights, rng: np.random.Generator, dispersion: float | None = None) -> np.ndarray:
    """glmmTMB's ``simulate`` of ``betabinomial`` (its ``rbetabinom``): per row p ~ Beta(μφ, (1-μ)φ), then
    k ~ Binomial(n, p) with n the trials (the weights), as the proportion k / n; φ is the dispersion (glmmTMB's
    ``sigma``), required."""
    if dispersion is None or not np.isfinite(dispersion) or dispersion <= 0:
        raise ValueError(f"the beta-binomial needs its dispersion φ > 0 to simulate, got {dispersion!r}")
    mu = np.clip(np.asarray(mu, float), _EPS, 1 - _EPS)     # Beta's shapes must be positive
    p = rng.beta(mu * dispersion, (1 - mu) * dispersion)
    n = np.round(weights).astype(np.int64)
    s = rng.binomial(np.maximum(n, 0), p)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, s / np.where(n > 0, n, 1), 0.0)


BETABINOMIAL = dataclasses.replace(BINOMIAL, name="betabinomial", canonical=False, loglik_rows=_betabinom_rows,
                                   loglik_kernel=_BetaBinomRows, start_dispersion=10.0,
                                   simulate=_betabinom_simulate)
"""k correct of n (pass@k designs) with overdispersion beside the random effects, as glmmTMB's
``betabinomial``; fitted by :mod:`mrcstats.models.laplace`, the dispersion φ is glmmTMB's ``sigma``."""


# ----------------------------------------------------------------------------- the registry

#: every family by R's spelling (``binomial``, ``binomial(logit)``, ``binomial(link = "logit")``)
FAMILIES: dict[str, Family] = {f.name: f for f in (BINOMIAL, POISSON, GAUSSIAN, BETABINOMIAL)}


def get_family(family: str | Family) -> Family:
    """The :class:`Family` for a name as R writes it (``"poisson"``, ``"poisson(log)"``,
    ``'poisson(link = "log")'``) or a Family itself; an unknown name or link is an InputError."""
    if isinstance(family, Family):
        return family
    if not isinstance(family, str):
        raise InputError(f"family must be a name such as 'binomial' or 'poisson', got {type(family).__name__}")
    text = family.replace(" ", "").replace("'", '"')
    name, _, rest = text.partition("(")
    fam = FAMILIES.get(name)
    if fam is None:
        raise InputError(f"family {family!r} is not supported; use one of {', '.join(FAMILIES)}")
    link = rest.rstrip(")").removeprefix("link=").strip('"')
    if link and link != fam.link:
        raise InputError(f"family {family!r}: only the {fam.link} link is supported for {fam.name}")
    return fam



# ----------------------------------------------------------------------------- results that record their family


class RecordsFamily:
    """Base of the result records that carry the family they were fitted with (a required ``family`` field,
    set where the record is built: the engines from ``design.family``, emmeans/pairs from the fit's).

    A record pickled before the field existed (when such a record could only be of ``STORED_FAMILY``: the GLMMs
    and their emmeans were binomial-logit, lmer Gaussian) is read back with that family, and its ``NOTES_FIELD``
    (``messages`` or ``notes``) ends with a note saying so, rather than failing or claiming it silently."""

    __slots__ = ()
    #: the only family a record of this class could have had before it stored its own
    STORED_FAMILY: ClassVar[Family]
    #: the field of text notes the record prints (``summary()``) and the note goes to
    NOTES_FIELD: ClassVar[str] = "messages"

    def __setstate__(self, state: dict[str, Any]) -> None:
        if "family" not in state:
            fam = type(self).STORED_FAMILY
            note = (f"{type(self).__name__} stored before results recorded their family: read as {fam.name} "
                    f"({fam.link} link), the only family it could have had then; refit to record it")
            state = {**state, "family": fam,
                     self.NOTES_FIELD: (*state.get(self.NOTES_FIELD, ()), note)}
        self.__dict__.update(state)      # (a frozen dataclass: its __setattr__ refuses)


__all__ = ["BETABINOMIAL", "BINOMIAL", "FAMILIES", "GAUSSIAN", "POISSON", "Family", "RecordsFamily", "get_family"]
