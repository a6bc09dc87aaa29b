"""A multiple-choice response log with known broken items (for screening/DIF docs and recovery tests).

:func:`choice_log` draws ``models`` models with abilities ``theta_j ~ N(0, 1)`` (named ``m00, m01, ...``,
assigned round-robin to ``families`` families ``f0, f1, ...``, stored in the column ``family``) answering
``items`` items (``q0000, ...``) with ``options`` options ``A, B, ...``. Model ``j`` picks item ``i``'s true
key with the 2PL probability::

    logit P_ij = a_i (theta_j - b_i) + delta * [item i is a DIF item and model j is in family f0]
    a_i ~ LogNormal(0.3, 0.3^2),  b_i ~ N(0, 1)

and otherwise a distractor in item-specific shares (Dirichlet(1, ..., 1)), independent of ability; a share
``invalid_rate`` of answers is empty (``pred`` <NA>, ``correct`` <NA>). The ``miskeyed`` items get a wrong
``gold``: a distractor, uniformly. ``correct = (pred == gold)``. Deterministic given ``seed``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from mrcstats._seeds import rng as seed_rng
from mrcstats.errors import InputError

__all__ = ["SimulatedChoices", "choice_log"]


@dataclass(frozen=True)
class SimulatedChoices:
    """``log``: the canonical log (with ``family``); ``truth``: ``miskeyed`` and ``dif_items`` (item ids),
    ``dif_family``, the true keys and the generating arguments."""

    log: pd.DataFrame
    truth: dict[str, Any] = field(default_factory=dict)


def choice_log(seed: int = 0, *, models: int = 24, items: int = 400, options: int = 4, families: int = 3,
               miskeyed: int = 12, dif_items: int = 0, dif_delta: float = 3.0,
               invalid_rate: float = 0.02, skills: int = 1, skill_corr: float = 0.6) -> SimulatedChoices:
    """Simulate the log described in the module docstring.

    ``skills > 1``: a misfitting log, as real benchmarks are - item ``i`` measures skill ``i mod skills`` and
    model ``j`` has one ability per skill, ``theta_j ~ N(0, R)`` with correlation ``skill_corr`` between skills,
    so a unidimensional 2PL fits the clean items only approximately (``truth["theta"]``: the first skill).
    """
    if models < 3 or items < 2 or not (2 <= options <= 26) or families < 1:
        raise InputError("choice_log: need models >= 3, items >= 2, 2 <= options <= 26 and families >= 1")
    if miskeyed + dif_items > items:
        raise InputError("choice_log: miskeyed + dif_items must not exceed items")
    from scipy.special import expit

    if skills < 1 or not (-1 < skill_corr < 1):
        raise InputError("choice_log: need skills >= 1 and -1 < skill_corr < 1")
    rng = seed_rng(seed)
    theta = rng.normal(0, 1, models)
    a = rng.lognormal(0.3, 0.3, items)
    b = rng.normal(0, 1, items)
    th_items = np.broadcast_to(theta[:, None], (models, items))
    if skills > 1:
        # one ability per skill: the first is theta, the others correlated with it (skill_corr)
        extra = rng.normal(0, 1, (models, skills - 1))
        th_all = np.column_stack([theta, skill_corr * theta[:, None] + np.sqrt(1 - skill_corr ** 2) * extra])
        th_items = th_all[:, np.arange(items) % skills]
    fam = np.arange(models) % families
    letters = np.array([chr(65 + k) for k in range(options)])
    key = rng.integers(options, size=items)
    order = rng.permutation(items)
    bad = np.sort(order[:miskeyed])
    dif = np.sort(order[miskeyed:miskeyed + dif_items])
    eta = a[None, :] * (th_items - b[None, :])
    eta[np.ix_(fam == 0, dif)] += dif_delta
    right = rng.random((models, items)) < expit(eta)
    shares = rng.dirichlet(np.ones(options - 1), size=items)
    dist = np.array([rng.choice(options - 1, size=models, p=shares[i]) for i in range(items)]).T  # (J, I)
    distractor = dist + (dist >= key[None, :])
    choice = np.where(right, key[None, :], distractor)
    gold = key.copy()
    for i in bad:
        other = [k for k in range(options) if k != key[i]]
        gold[i] = other[int(rng.integers(len(other)))]
    invalid = rng.random((models, items)) < invalid_rate
    pred = np.where(invalid, None, letters[choice]).astype(object)
    mod = np.array([f"m{j:02d}" for j in range(models)])
    itm = np.array([f"q{i:04d}" for i in range(items)])
    corr = pd.array(np.where(invalid, None, choice == gold[None, :]).ravel(), dtype="boolean")
    log = pd.DataFrame({"model": np.repeat(mod, items), "item": np.tile(itm, models),
                        "correct": corr, "gold": np.tile(letters[gold], models), "pred": pred.ravel(),
                        "family": np.repeat(np.array([f"f{f}" for f in fam]), items)})
    from mrcstats.io.schema import validate_log

    log = validate_log(log)
    truth = {"miskeyed": [str(v) for v in itm[bad]], "dif_items": [str(v) for v in itm[dif]], "dif_family": "f0",
             "true_key": {str(i): str(k) for i, k in zip(itm, letters[key], strict=True)},
             "theta": {str(m): float(t) for m, t in zip(mod, theta, strict=True)},
             "seed": seed, "models": models, "items": items, "options": options, "families": families,
             "dif_delta": dif_delta}
    return SimulatedChoices(log, truth)
