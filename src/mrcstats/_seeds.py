"""Independent, order-free random streams derived from one user seed.

``stream(seed, *labels)`` returns a :class:`numpy.random.Generator` seeded by
``numpy.random.SeedSequence(entropy=seed, spawn_key=(h(label_1), h(label_2), ...))`` with
``h`` a stable 32-bit hash (BLAKE2b of the label's text; Python's ``hash`` changes between
runs). Every random choice of an analysis takes its own stream named by what it decides --
e.g. ``("select", method, k, fold)`` -- so asking for one more option (another ``k``, another
method) never shifts the numbers drawn for another: the draws of a choice depend only on
the seed and its labels (NumPy's recommended way of making independent streams, NEP 19).
``seed=None`` draws fresh OS entropy (not reproducible).
"""
from __future__ import annotations

import hashlib

import numpy as np

__all__ = ["check_seed", "label_key", "stream"]


def label_key(label: object) -> int:
    """A stable 32-bit integer for ``label`` (its ``str``), the same in every run and process."""
    return int.from_bytes(hashlib.blake2b(str(label).encode("utf-8"), digest_size=4).digest(), "little")


def check_seed(seed: object) -> None:
    """Raise :class:`mrcstats.errors.InputError` unless ``seed`` is None or a whole number >= 0."""
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
        from mrcstats.errors import InputError

        raise InputError(f"seed must be a whole number >= 0 (or None for fresh entropy), got {seed!r}")


def stream(seed: int | None, *labels: object) -> np.random.Generator:
    """The random stream of the choice named by ``labels`` under ``seed`` (see the module docstring).

    Raises:
        InputError: a seed that is not a whole number >= 0 (where every seeded analysis parses its seed).
    """
    check_seed(seed)
    ss = np.random.SeedSequence(entropy=None if seed is None else int(seed),
                                spawn_key=tuple(label_key(x) for x in labels))
    return np.random.default_rng(ss)
