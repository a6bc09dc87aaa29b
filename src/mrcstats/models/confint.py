"""Confidence intervals for a GLMM, as lme4's ``confint.merMod`` (lme4 1.1-31); which methods a fit's family
supports is :data:`mrcstats.models.family_table.CAPABILITIES` (the beta-binomial: Wald and boot).

Rows: ``.sig01``, ``.sig02``, … for the random-effects standard deviations and
correlations, per term in lme4's θ order (the lower triangle column by column, an SD on
the diagonal and a correlation below it: ``(1 + x | g)`` gives SD(Intercept), Corr, SD(x)),
then the fixed effects.

* ``Wald``: β̂ ± z_{1-α/2} SE (``confint.default`` on ``fixef``/``vcov``), NA for ``.sig`` rows.
* ``profile``: lme4's ``profile.merMod`` + ``confint.thpr``: for each parameter on the
  SD/correlation scale, the deviance minimised over all other parameters at a sequence
  of values chosen by lme4's ``nextpar`` rule (steps of δ = c/8 in ζ, c = √χ²_{0.99, npar},
  at most 10 times the previous step), ζ = sign(x - x̂) √(D(x) - D̂); then
  ``backSpline(interpSpline(ζ ~ x))`` evaluated at ζ = ±z_{1-α/2} (R's ``splines``), an end
  outside the profiled range set to the parameter's bound (0 for an SD, ±1 for a
  correlation) as lme4 does. Where lme4's profile breaks down (a non-monotonic or failed profile, or a
  fixed effect's end at ±∞: typically a singular fit, where the SD/correlation scale is degenerate) a fixed
  effect's bounds are computed directly: ζ(b) from the deviance minimised over (θ, β₋ⱼ) in lme4's own θ
  parameterisation with βⱼ = b, each root of ζ(b) = ±z_{1-α/2} bracketed by steps of 1, 2, 4, … 128 SE and
  found by Brent's method; a bound that cannot be found this way, and an SD/correlation whose profile broke
  down, is refused: NA with one message saying why (``refused``), never ±∞; the other bounds are returned
  with a warning in ``messages``, as lme4 returns its fixed-effect bounds and warns about the variance
  parameters of a singular fit.
* ``boot``: lme4's ``bootMer`` parametric bootstrap — responses simulated from the fitted
  model (new random effects, ``use.u = FALSE``; :mod:`mrcstats.models.simulate`: for the beta-binomial
  p ~ Beta(μφ, (1-μ)φ) then Binomial(n, p), as glmmTMB's ``simulate``), the model refitted from the estimates
  by the family's own likelihood (the beta-binomial's Laplace approximation with its dispersion φ),
  percentile intervals as ``boot::boot.ci(type = "perc")`` (``norm.inter`` interpolation);
  replicates run in parallel processes, each from its own ``SeedSequence(seed).spawn``
  stream, so results do not depend on the number of workers. Failed refits are counted
  and reported (``n_failed``), their rows left out as bootMer's NA rows are.

References: Bates et al. (2015) J. Stat. Softw. 67(1) sec. 5.6; lme4 ``R/profile.R``
(``profile.merMod``, ``confint.thpr``, ``confint.merMod``), ``R/bootMer.R``; R ``splines``
(``interpSpline``, ``backSpline``); Davison & Hinkley (1997), ``boot::norm.inter``.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from mrcstats._dist import chi2_ppf, norm_ppf
from mrcstats._repr import Result
from mrcstats._seeds import check_seed
from mrcstats.errors import InputError, ModelError
from mrcstats.models._checks import check_level
from mrcstats.models.family_table import require
from mrcstats.models.simulate import model_design

METHODS = ("Wald", "profile", "boot")


@dataclass(frozen=True, repr=False)
class ConfintResult(Result):
    """Intervals in lme4's layout: ``intervals`` has one row per parameter (``.sig01``…,
    then fixed effects) and the columns ``"2.5 %"``/``"97.5 %"`` (R's ``format.perc``).

    ``n_failed``/``nsim``/``seed``: bootstrap refits that failed, replicates asked, seed;
    ``messages``: warnings (non-monotonic profiles, failed refits); ``seconds``: wall time.
    """

    method: str
    level: float
    intervals: pd.DataFrame
    messages: tuple[str, ...] = ()
    nsim: int | None = None
    n_failed: int = 0
    seed: int | None = None
    seconds: float = float("nan")
    replicates: pd.DataFrame | None = field(default=None, repr=False)
    refused: tuple[str, ...] = ()

    def to_frame(self) -> pd.DataFrame:
        return self.intervals.copy()

    def to_dict(self) -> dict[str, Any]:
        """``{"method", "level", "intervals": {row: [lower, upper]}}`` plus bootstrap counts."""
        iv = {str(k): [_num(v) for v in row] for k, row in zip(self.intervals.index, self.intervals.to_numpy())}
        out: dict[str, Any] = {"method": self.method, "level": self.level, "intervals": iv}
        if self.method == "boot":
            out.update(nsim=self.nsim, n_failed=self.n_failed, seed=self.seed)
        if self.messages:
            out["messages"] = list(self.messages)
        if self.refused:
            out["refused"] = list(self.refused)
        return out

    def summary(self) -> str:
        t = self.intervals
        w = max([len(str(i)) for i in t.index] + [1])
        head = " " * w + "".join(c.rjust(12) for c in t.columns)
        lines = [f"Confidence intervals ({self.method}, level {self.level:g})", head]
        for name, row in zip(t.index, t.to_numpy()):
            lines.append(str(name).ljust(w) + "".join(("NA" if not np.isfinite(v) else f"{v:.7g}").rjust(12)
                                                       for v in row))
        if self.method == "boot":
            lines.append(f"{self.nsim} bootstrap samples, {self.n_failed} failed refits")
        lines.extend(self.messages)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def _num(v: float) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def format_perc(a: np.ndarray) -> list[str]:
    """R's ``format.perc(a, 3)``: ``"2.5 %"``, ``"97.5 %"``."""
    out = []
    for p in a:
        s = f"{100 * p:.3g}"
        out.append(f"{s} %")
    return out


# ----------------------------------------------------------------------------- parameter scales


class ProfileScale:
    """Maps lme4's profile scale (SDs and correlations, then β) to (θ, β) and back.

    For each term Σ = T Tᵀ; SDs on the diagonal positions of θ, correlations at the
    off-diagonal ones (lme4's ``Cv_to_Sv``/``Sv_to_Cv``)."""

    def __init__(self, re, p: int):
        self.re = list(re)
        self.p = p
        self.sizes = [r.ntheta for r in self.re]
        self.nth = int(sum(self.sizes))
        self.is_sd = np.concatenate([r.lower == 0 for r in self.re]) if self.re else np.zeros(0, bool)
        self.linear = all(r.q == 1 for r in self.re)

    def to_sdcor(self, theta: np.ndarray) -> np.ndarray:
        out, o = [], 0
        for r in self.re:
            T = r.factor(theta[o:o + r.ntheta])
            o += r.ntheta
            S = T @ T.T
            sd = np.sqrt(np.diag(S))
            for i, j in r._tri():
                if i == j:
                    out.append(sd[i])
                else:
                    out.append(S[i, j] / (sd[i] * sd[j]) if sd[i] > 0 and sd[j] > 0 else 0.0)
        return np.array(out)

    def to_theta(self, s: np.ndarray) -> np.ndarray:
        if self.linear:
            return np.asarray(s[:self.nth], float)
        out, o = [], 0
        for r in self.re:
            v = s[o:o + r.ntheta]
            o += r.ntheta
            if r.q == 1:
                out.append(v)
                continue
            sd = np.zeros(r.q)
            R = np.eye(r.q)
            for k, (i, j) in enumerate(r._tri()):
                if i == j:
                    sd[i] = v[k]
                else:
                    R[i, j] = R[j, i] = v[k]
            # T = diag(sd) chol(R): Σ = D R D (the factor of a PSD R, rows scaled)
            try:
                L = np.linalg.cholesky(R)
            except np.linalg.LinAlgError:
                w = np.linalg.eigvalsh(R)
                if w.min() < -1e-10:
                    raise ModelError("correlation matrix not positive semi-definite") from None
                L = np.linalg.cholesky(R + 1e-12 * np.eye(r.q))
            T = sd[:, None] * L
            out.append(np.array([T[i, j] for i, j in r._tri()]))
        return np.concatenate(out) if out else np.zeros(0)

    def jac(self, s: np.ndarray) -> np.ndarray:
        """dθ/ds (identity for scalar terms; central differences otherwise)."""
        if self.linear:
            return np.eye(self.nth)
        J = np.empty((self.nth, self.nth))
        for k in range(self.nth):
            h = 1e-7
            e = np.zeros(len(s))
            e[k] = h
            J[:, k] = (self.to_theta(s + e) - self.to_theta(s - e)) / (2 * h)
        return J

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        lo = np.concatenate([np.where(self.is_sd, 0.0, -1.0), np.full(self.p, -np.inf)])
        hi = np.concatenate([np.where(self.is_sd, np.inf, 1.0), np.full(self.p, np.inf)])
        return lo, hi


def sig_names(n: int) -> list[str]:
    return [f".sig{k + 1:02d}" for k in range(n)]


# ----------------------------------------------------------------------------- entry


def confint(m, method: str = "profile", level: float = 0.95, nsim: int = 1000, seed: int | None = None,
            parm: Any = None, *, workers: int | None = None, progress_bar: bool | None = None) -> ConfintResult:
    """Confidence intervals of a fitted :class:`~mrcstats.models.GlmerResult` as lme4's
    ``confint(m, parm, level, method)``; see the module docstring for the methods."""
    import time

    t0 = time.perf_counter()
    meth = {"wald": "Wald", "profile": "profile", "boot": "boot"}.get(str(method).lower())
    if meth is None:
        raise InputError(f"confint method {method!r}: use one of {', '.join(METHODS)}")
    require(m, f"confint.{meth}")
    level = check_level(level, "confint")
    if m.nagq != 1 and meth != "Wald":
        raise InputError(f"confint method {meth!r} is implemented for Laplace fits (nagq = 1); this fit has "
                         f"nagq = {m.nagq}; use method='Wald'")
    names = sig_names(len(m.theta)) + list(m.fixef.index)
    rows = profile_which(parm, names, len(m.theta))
    a = (1 - level) / 2
    cols = format_perc(np.array([a, 1 - a]))
    if meth == "Wald":
        z = norm_ppf(np.array([a, 1 - a]))
        ci = np.full((len(names), 2), np.nan)
        fe, se = m.fixef.to_numpy(), m.se.to_numpy()
        ci[len(m.theta):] = fe[:, None] + se[:, None] * z[None, :]
        tab = pd.DataFrame(ci, index=names, columns=cols).iloc[rows]
        return ConfintResult("Wald", level, tab, seconds=time.perf_counter() - t0)
    design = model_design(m, "confint")
    if meth == "profile":
        tab, msgs, refused = _profile(m, design, rows, names, level)
        return ConfintResult("profile", level, pd.DataFrame(tab, index=[names[i] for i in rows], columns=cols),
                             tuple(msgs), seconds=time.perf_counter() - t0, refused=tuple(refused))
    nsim = int(nsim)
    if nsim < 2:
        raise InputError(f"nsim must be at least 2, got {nsim}")
    reps, failed, msgs = _bootstrap(m, design, nsim, seed, workers, progress_bar)
    ok = reps[~np.isnan(reps).any(axis=1)]
    if ok.shape[0] == 0:
        raise ModelError(f"all {nsim} bootstrap refits failed")
    ci = np.array([_norm_inter(ok[:, j], np.array([a, 1 - a])) for j in range(reps.shape[1])])
    tab = pd.DataFrame(ci, index=names, columns=cols).iloc[rows]
    if failed:
        msgs = [f"{failed} of {nsim} bootstrap refits failed; intervals use the other {nsim - failed}"] + msgs
    return ConfintResult("boot", level, tab, tuple(msgs), nsim=nsim, n_failed=failed, seed=seed,
                         seconds=time.perf_counter() - t0,
                         replicates=pd.DataFrame(reps, columns=names))


def profile_which(parm, names: list[str], nsig: int) -> list[int]:
    """lme4's ``get.which``: None = all; names; ``"theta_"``/``"beta_"``; 1-based integers."""
    if parm is None:
        return list(range(len(names)))
    if isinstance(parm, str):
        parm = [parm]
    out = []
    for p in parm:
        if isinstance(p, (int, np.integer)) and not isinstance(p, bool):
            if not 1 <= p <= len(names):
                raise InputError(f"parm {p}: parameter numbers run from 1 to {len(names)}")
            out.append(int(p) - 1)
        elif p == "theta_":
            out.extend(range(nsig))
        elif p == "beta_":
            out.extend(range(nsig, len(names)))
        elif p in names:
            out.append(names.index(p))
        else:
            raise InputError(f"parm {p!r} is not a parameter of the model; parameters: {names}")
    return list(dict.fromkeys(out))


def _setup(design):
    from mrcstats.models.deviance import ResponseData
    from mrcstats.models.optimize import deviance_function, make_model

    d = ResponseData.from_design(design)
    model = make_model(d, design.re)
    return d, model, deviance_function(model)


# ----------------------------------------------------------------------------- profile


def _profile(m, design, rows: list[int], names: list[str], level: float,
             maxpts: int = 100, alphamax: float = 0.01, delta_cutoff: float = 1 / 8, maxmult: float = 10.0,
             devtol: float = 1e-9):
    from mrcstats.models.optimize import blas_controller

    ctl = blas_controller()
    if ctl is not None:
        with ctl.limit(limits=1, user_api="blas"):
            return _profile_inner(m, design, rows, names, level, maxpts, alphamax, delta_cutoff, maxmult, devtol)
    return _profile_inner(m, design, rows, names, level, maxpts, alphamax, delta_cutoff, maxmult,
                          devtol)  # pragma: no cover


def _profile_inner(m, design, rows, names, level, maxpts, alphamax, delta_cutoff, maxmult, devtol):
    from scipy import optimize

    d, _model, f = _setup(design)
    P = ProfileScale(design.re, d.p)
    nth = P.nth
    theta_hat = m.theta.to_numpy()
    beta_hat = m.fixef.to_numpy()
    opt = np.concatenate([P.to_sdcor(theta_hat), beta_hat])
    base = -2.0 * m.loglik
    lo, hi = P.bounds()
    nptot = len(opt)
    cutoff = profile_cutoff(alphamax, nptot)
    delta = cutoff * delta_cutoff
    msgs: list[str] = []
    # the native optimum may lie a hair below lme4's; use the better of the two as the base
    D0 = f(P.to_theta(opt[:nth]), opt[nth:], grad=False, keep=True)[0]
    base = min(base, D0)

    def dev_grad(s):
        th = P.to_theta(s[:nth])
        D, g = f(th, s[nth:])
        gs = np.concatenate([P.jac(s[:nth]).T @ g[:nth], g[nth:]])
        return D, gs

    def zeta(w, xx, start):
        mask = np.ones(nptot, bool)
        mask[w] = False

        def fun(z):
            s = np.empty(nptot)
            s[w] = xx
            s[mask] = z
            D, g = dev_grad(s)
            return D, g[mask]

        bnds = list(zip(np.where(np.isfinite(lo[mask]), lo[mask], None), np.where(np.isfinite(hi[mask]), hi[mask],
                                                                                    None)))
        z0 = np.clip(start, lo[mask], hi[mask])
        try:
            r = optimize.minimize(fun, z0, jac=True, method="L-BFGS-B", bounds=bnds,
                                  options={"maxiter": 3000, "ftol": 1e-14, "gtol": 1e-8, "maxcor": 30})
        except (ModelError, np.linalg.LinAlgError, FloatingPointError):
            return np.full(nptot + 1, np.nan)
        dev = float(r.fun) - base
        if not np.isfinite(dev):
            return np.full(nptot + 1, np.nan)
        if dev <= 0:
            dev = devtol
        full = np.empty(nptot)
        full[w] = xx
        full[mask] = r.x
        return np.concatenate([[math.copysign(1.0, xx - opt[w]) * math.sqrt(dev)], full])

    def step(w, xx, prev):
        start = np.delete(prev, w)
        if not np.all(np.isfinite(start)):
            start = np.delete(opt, w)
        return zeta(w, xx, start)

    def fillmat(mat, n_rows, w, lower, upper):
        return fill_profile_rows(mat, w, lower, upper, step, delta, cutoff, maxpts, maxmult)

    a = (1 - level) / 2
    zq = norm_ppf(np.array([a, 1 - a]))
    out = np.full((len(rows), 2), np.nan)
    opt_row = np.concatenate([[0.0], opt])
    refused: list[str] = []
    for k, w in enumerate(rows):
        nmsg = len(msgs)
        pw = opt[w]
        lowcut, upcut = lo[w], hi[w]
        shift = 1e-3 if pw == 0 else pw * 1.01
        srow = zeta(w, shift, np.delete(opt, w))
        pres = np.tile(opt_row, (maxpts, 1))
        nres = pres.copy()
        pres[1] = srow
        nres[0] = srow
        up = fillmat(pres, maxpts, w, lowcut, upcut)
        dn = fillmat(nres, maxpts, w, lowcut, upcut) if pw > lowcut else nres[:2]
        x, z = profile_xz(up, dn, w)
        try:
            ci = back_spline_predict(x, z, zq)
        except ValueError:
            # confint.thpr: a non-monotonic profile falls back to approxfun(ζ, x) (ties = mean,
            # NA outside the range) unless ζ decreases by more than non.mono.tol everywhere
            msgs.append(f"non-monotonic profile for {names[w]}")
            if len(z) > 1 and np.all(np.diff(z) < -1e-2):
                out[k] = np.nan
                continue
            msgs.append(f"bad spline fit for {names[w]}: falling back to linear interpolation")
            zu, inv = np.unique(z, return_inverse=True)
            xm = np.bincount(inv, weights=x) / np.bincount(inv)
            ci = np.interp(zq, zu, xm, left=np.nan, right=np.nan) if len(zu) > 1 else np.array([np.nan, np.nan])
        if np.isnan(ci[0]):
            ci[0] = lowcut
        if np.isnan(ci[1]):
            ci[1] = upcut
        nonmono = len(msgs) > nmsg
        broke = not np.all(np.isfinite(ci)) or (nonmono and (w >= nth or np.any(np.abs(ci) == 1.0) and not P.is_sd[w]))
        if broke and w >= nth:
            ci, why = _direct_bounds(f, theta_hat, beta_hat, w - nth, m.se.to_numpy()[w - nth], base, zq,
                                     np.concatenate([r.lower for r in design.re]))
            for side, reason in why:
                refused.append(f"{names[w]}: no {side} profile bound ({reason})")
            msgs.append(f"{names[w]}: lme4's profile broke down; bounds from the deviance minimised directly "
                        "with the coefficient fixed")
        elif broke:
            ci = np.array([np.nan, np.nan])
            refused.append(f"{names[w]}: no profile interval: its profile on the SD/correlation scale broke down "
                           "(a singular fit, see the messages); use method='boot' for the random-effect parameters")
        out[k] = ci
    if refused:     # lme4 returns the other bounds and warns; so do we (NA bounds with the reason in ``refused``)
        what = sorted({r.partition(":")[0] for r in refused}, key=names.index)
        msgs.insert(0, f"{'a singular fit: ' if m.singular else ''}no profile bound for {', '.join(what)} "
                       f"(NA, the reasons under 'refused'); the other bounds are the profile's")
    return out, msgs, refused


def _nextpar(mat, cc, r, lower, upper, delta, maxmult, minstep=1e-6):
    """lme4's ``nextpar`` (``profile.merMod``): the next value of column ``cc`` after row ``r``, a step of
    ``delta`` in ζ extrapolated from the last two rows, at least ``minstep``, at most ``maxmult`` times the last
    step, kept within [lower, upper]."""
    pvals = mat[r - 1:r + 1, cc]
    zz = mat[r - 1:r + 1, 0]
    num = pvals[1] - pvals[0]
    denom = zz[1] - zz[0]
    if not np.isfinite(denom) or denom == 0:
        step = minstep
    else:
        step = delta * num / denom
        if step < 0:
            step = minstep
        elif abs(step) > maxmult * abs(num):
            step = math.copysign(maxmult * abs(num), step)
    return min(upper, max(lower, pvals[1] + math.copysign(1.0, num) * step))


def profile_xz(up: np.ndarray, dn: np.ndarray, w: int) -> tuple[np.ndarray, np.ndarray]:
    """The profile of parameter ``w`` from both directions' rows: (values, ζ), finite, unique, increasing."""
    allr = np.vstack([up, dn])
    allr = allr[np.all(np.isfinite(allr[:, [0, w + 1]]), axis=1)]
    allr = np.unique(allr, axis=0)
    x, z = allr[:, w + 1], allr[:, 0]
    order = np.argsort(x, kind="stable")
    x, z = x[order], z[order]
    keep = np.concatenate([[True], np.diff(x) > 0])
    return x[keep], z[keep]


def profile_cutoff(alphamax: float, nptot: int) -> float:
    """lme4's ``profile`` cutoff on the ζ scale: √qchisq(1 − alphamax, nptot), nptot = number of parameters
    (the glmer and lmer profiles both stop stepping there)."""
    return math.sqrt(float(chi2_ppf(1 - alphamax, nptot)))


def fill_profile_rows(mat, w, lower, upper, zeta, delta, cutoff, maxpts, maxmult):
    """lme4's ``fillmat``: rows [ζ, parameters] from row 1 on, stepping parameter ``w`` by :func:`_nextpar` until
    |ζ| passes ``cutoff``, a bound, or ``maxpts`` rows; ``zeta(w, x, previous row's parameters)`` gives a row."""
    cc = w + 1
    i = 1                                  # 0-based index of the last filled row
    while (i < maxpts - 1 and lower < mat[i, cc] < upper
           and (not np.isfinite(mat[i, 0]) or abs(mat[i, 0]) <= cutoff)):
        npar = _nextpar(mat, cc, i, lower, upper, delta, maxmult)
        mat[i + 1] = zeta(w, npar, mat[i, 1:])
        i += 1
    return mat[:i + 1]


def _direct_bounds(f, theta_hat, beta_hat, j: int, se: float, base: float, zq: np.ndarray, lower: np.ndarray,
                   max_doublings: int = 7):
    """Both profile bounds of β_j from ζ(b) = sign(b - β̂_j) √(min_{θ, β₋ⱼ} D(θ, β | β_j = b) - D̂), the
    minimisation in lme4's θ parameterisation (θ on the diagonal ≥ 0); a root of ζ = z is bracketed by steps of
    1, 2, 4, ... 2^max_doublings SE from β̂_j and found by Brent's method. Returns ([lower, upper], refusals)."""
    from scipy import optimize

    k = len(theta_hat)
    p = len(beta_hat)
    mask = np.ones(k + p, bool)
    mask[k + j] = False
    bnds = [(0.0 if lo == 0 else None, None) for lo in lower] + [(None, None)] * (p - 1)
    step = se if np.isfinite(se) and se > 0 else max(1.0, abs(beta_hat[j]))
    start = {"z": np.concatenate([theta_hat, np.delete(beta_hat, j)])}

    def zeta(b: float) -> float:
        def fun(z):
            x = np.empty(k + p)
            x[mask] = z
            x[k + j] = b
            D, g = f(x[:k], x[k:])
            return D, g[mask]

        r = optimize.minimize(fun, start["z"], jac=True, method="L-BFGS-B", bounds=bnds,
                              options={"maxiter": 3000, "ftol": 1e-14, "gtol": 1e-8, "maxcor": 30})
        start["z"] = r.x
        return math.copysign(1.0, b - beta_hat[j]) * math.sqrt(max(float(r.fun) - base, 0.0))

    out = np.array([np.nan, np.nan])
    why = []
    for side, (zt, sgn) in enumerate(((zq[0], -1.0), (zq[1], 1.0))):
        start["z"] = np.concatenate([theta_hat, np.delete(beta_hat, j)])
        prev = float(beta_hat[j])
        found = None
        try:
            for d in range(max_doublings + 1):
                b = float(beta_hat[j]) + sgn * step * 2 ** d
                if abs(zeta(b)) >= abs(zt):
                    found = (prev, b)
                    break
                prev = b
            if found is None:
                flat = (f"the profile deviance stays within the cutoff up to {2 ** max_doublings} standard "
                        "errors from the estimate: the likelihood is flat in this direction")
                why.append(("lower" if side == 0 else "upper", flat))
                continue
            lo_b, hi_b = sorted(found)
            out[side] = optimize.brentq(lambda b, zt=zt: zeta(b) - zt, lo_b, hi_b, xtol=1e-8 * step)
        except (ModelError, np.linalg.LinAlgError, FloatingPointError, ValueError) as exc:
            why.append(("lower" if side == 0 else "upper", f"the deviance could not be minimised: {exc}"))
    return out, why


def back_spline_predict(x: np.ndarray, z: np.ndarray, zq: np.ndarray) -> np.ndarray:
    """R's ``predict(backSpline(interpSpline(z ~ x)), zq)$y``: the natural cubic interpolating
    spline z(x), inverted piecewise with the knot values and slopes (``backSpline.npolySpline``);
    NA outside the range of z (``predict.polySpline`` via ``cut``)."""
    from scipy import interpolate

    if len(x) < 4:
        raise ValueError("too few points for a cubic spline")
    spl = interpolate.CubicSpline(x, z, bc_type="natural")
    kk = z
    slope = spl(x, 1)
    adiff = np.diff(kk)
    if np.all(adiff < 0):
        rev = True
    elif np.all(adiff > 0):
        rev = False
    else:
        raise ValueError("spline must be monotone")
    nk = len(x)
    kdiff = np.diff(x)
    b = np.zeros((nk, 4))
    b[:, 0] = x
    b[:, 1] = 1.0 / slope
    for i in range(nk - 1):
        A = np.array([[adiff[i] ** 2, adiff[i] ** 3], [2 * adiff[i], 3 * adiff[i] ** 2]])
        rhs = np.array([kdiff[i] - adiff[i] * b[i, 1], b[i + 1, 1] - b[i, 1]])
        b[i, 2:4] = np.linalg.solve(A, rhs)
    b[nk - 1, 1:] = np.nan
    if nk > 2:
        b[0, 3] = b[nk - 2, 3] = 0.0
        A = np.array([[adiff[0], adiff[0] ** 2], [1.0, 2 * adiff[0]]])
        b[0, 1:3] = np.linalg.solve(A, np.array([kdiff[0], 1.0 / slope[1]]))
        b[nk - 2, 2] = (kdiff[-1] - adiff[-1] * b[nk - 2, 1]) / adiff[-1] ** 2
    if b[0, 2] > 0:
        b[0, 2] = 0.0
        b[0, 1] = kdiff[0] / adiff[0]
    if b[nk - 2, 2] < 0:
        b[nk - 2, 2] = 0.0
        b[nk - 2, 1] = kdiff[-1] / adiff[-1]
    knots = kk
    if rev:
        knots, b = knots[::-1], b[::-1]
    out = np.full(len(zq), np.nan)
    for j, v in enumerate(zq):
        # R: i <- cut(v, knots) (right-closed intervals), v == knots[1] -> 1
        if v == knots[0]:
            i = 0
        elif v < knots[0] or v > knots[-1] or not np.isfinite(v):
            continue
        else:
            i = int(np.searchsorted(knots, v, side="left")) - 1
        dx = v - knots[i]
        out[j] = b[i, 0] + dx * (b[i, 1] + dx * (b[i, 2] + dx * b[i, 3]))
    return out


# ----------------------------------------------------------------------------- bootstrap


def _norm_inter(t: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """``boot:::norm.inter``: order statistics at (R+1)α, interpolated on the normal scale."""
    t = np.sort(t[np.isfinite(t)])
    R = len(t)
    rk = (R + 1) * alpha
    k = np.trunc(rk).astype(int)
    out = np.empty(len(alpha))
    for j in range(len(alpha)):
        if k[j] == rk[j]:
            out[j] = t[min(max(k[j], 1), R) - 1]
        elif k[j] <= 0:
            out[j] = t[0]
        elif k[j] >= R:
            out[j] = t[R - 1]
        else:
            t1 = norm_ppf(alpha[j])
            t2 = norm_ppf(k[j] / (R + 1))
            t3 = norm_ppf((k[j] + 1) / (R + 1))
            tk, tk1 = t[k[j] - 1], t[k[j]]
            out[j] = tk + (t1 - t2) / (t3 - t2) * (tk1 - tk)
    return out


_BOOT: dict[str, Any] = {}


def _boot_init(design, theta, beta, dispersion=None):
    _BOOT["design"] = design
    _BOOT["theta"] = np.asarray(theta, float)
    _BOOT["beta"] = np.asarray(beta, float)
    _BOOT["dispersion"] = dispersion


def _boot_one(seed_seq) -> np.ndarray | None:
    """One bootstrap replicate: a response simulated from the estimates (:func:`~mrcstats.models.simulate.
    simulate_response`, new random effects) and the model refitted from them -- by the family's own likelihood:
    lme4's Laplace deviance for a canonical family, the Laplace approximation of the row log-likelihood with the
    dispersion for the beta-binomial: :func:`refit_replicate`). None when the refit fails or there is nothing to
    estimate."""
    from mrcstats.models.simulate import simulate_response

    design, theta, beta, phi = _BOOT["design"], _BOOT["theta"], _BOOT["beta"], _BOOT["dispersion"]
    rng = np.random.default_rng(seed_seq)
    return refit_replicate(design, simulate_response(design, theta, beta, rng, phi), theta, beta, phi)


def refit_replicate(design, y: np.ndarray, theta: np.ndarray, beta: np.ndarray,
                    dispersion: float | None = None) -> np.ndarray | None:
    """The bootstrap's refit of ``design`` to the response ``y`` from the estimates (θ, β, φ): lme4's Laplace
    deviance for a canonical family, the Laplace approximation of the row log-likelihood with the dispersion
    (:func:`~mrcstats.models.laplace.laplace_optimum`) for the beta-binomial. Returns the replicate on the profile
    scale (SDs and correlations, then β), or None when the refit fails or there is nothing to estimate."""
    import dataclasses

    try:
        des = dataclasses.replace(design, y=np.asarray(y, float))
        w = np.asarray(des.weights, float)
        if des.family.check_mean(float(np.sum(w * des.y)) / float(w.sum()), des.nobs):
            return None
        lower = np.concatenate([r.lower for r in des.re])
        if des.family.loglik_rows is not None:
            x = _refit_laplace(des, lower, theta, beta, dispersion)
        else:
            from mrcstats.models.deviance import ResponseData
            from mrcstats.models.optimize import make_model, refit_optimum

            model = make_model(ResponseData.from_design(des), des.re)
            x, _fv, _ok = refit_optimum(model, lower, np.concatenate([theta, beta]))
    except (ModelError, np.linalg.LinAlgError, FloatingPointError, ValueError):
        return None
    if not np.all(np.isfinite(x)):
        return None
    P = ProfileScale(design.re, len(beta))
    return np.concatenate([P.to_sdcor(x[:len(theta)]), x[len(theta):len(theta) + len(beta)]])


def _refit_laplace(design, lower: np.ndarray, theta: np.ndarray, beta: np.ndarray, phi: float) -> np.ndarray:
    """(θ, β, log φ) refitted by the Laplace approximation (the beta-binomial) from the estimates."""
    from mrcstats.models.laplace import LaplaceModel, laplace_optimum

    r = laplace_optimum(LaplaceModel(design), np.concatenate([theta, beta, [math.log(phi)]]), lower, ftol=1e-11)
    return r.x


def _boot_chunk(seeds) -> list:
    from mrcstats.models.optimize import blas_controller

    ctl = blas_controller()
    if ctl is None:  # pragma: no cover
        return [_boot_one(s) for s in seeds]
    with ctl.limit(limits=1, user_api="blas"):
        return [_boot_one(s) for s in seeds]


def _bootstrap(m, design, nsim: int, seed: int | None, workers: int | None, progress_bar: bool | None):
    from mrcstats._progress import progress

    theta, beta = m.theta.to_numpy(), m.fixef.to_numpy()
    require(m, "simulate")
    ss = np.random.SeedSequence(check_seed(seed))
    seeds = ss.spawn(nsim)
    ncol = len(theta) + len(beta)
    reps = np.full((nsim, ncol), np.nan)
    if workers is None:
        workers = max(1, min(os.cpu_count() or 1, 8))
    chunk = max(1, min(25, nsim // (4 * workers) or 1))
    batches = [list(range(i, min(nsim, i + chunk))) for i in range(0, nsim, chunk)]
    bar = progress(total=nsim, desc="bootstrap refits", disable=None if progress_bar is None else not progress_bar)
    try:
        if workers <= 1:
            _boot_init(design, theta, beta, m.dispersion)
            for b in batches:
                for i, r in zip(b, _boot_chunk([seeds[i] for i in b])):
                    if r is not None:
                        reps[i] = r
                bar.update(len(b))
        else:
            import multiprocessing as mp
            from concurrent.futures import ProcessPoolExecutor, as_completed

            ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else None
            with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_boot_init,
                                     initargs=(design, theta, beta, m.dispersion)) as ex:
                futs = {ex.submit(_boot_chunk, [seeds[i] for i in b]): b for b in batches}
                for fut in as_completed(futs):
                    b = futs[fut]
                    for i, r in zip(b, fut.result()):
                        if r is not None:
                            reps[i] = r
                    bar.update(len(b))
    finally:
        bar.close()
    failed = int(np.isnan(reps).any(axis=1).sum())
    return reps, failed, []
