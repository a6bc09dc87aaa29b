"""Seeds: the one check of a user's seed, and independent, order-free random streams derived from it.

:func:`check_seed` is the one validator of a seed -- a whole number >= 0 (NumPy's ``SeedSequence`` takes
no negative entropy), or ``None`` for fresh OS entropy; every command-line ``--seed`` is parsed by
:func:`parse_seed` (an argparse ``type``, so a new command's ``--seed`` inherits it) and every generator of
the package is made by :func:`rng` or :func:`stream`, which call it: ``seed=-1`` or ``seed=1.5`` is one
:class:`~mrcstats.errors.InputError` (exit code 2), never NumPy's traceback.

``stream(seed, *labels)`` returns a :class:`numpy.random.Generator` seeded by
``numpy.random.SeedSequence(entropy=seed, spawn_key=(h(label_1), h(label_2), ...))`` with
``h`` a stable 32-bit hash (BLAKE2b of the label's text; Python's ``hash`` changes between
runs). Every random choice of an analysis takes its own stream named by what it decides --
e.g. ``("select", method, k, fold)`` -- so asking for one more option (another ``k``, another
method) never shifts the numbers drawn for another: the draws of a choice depend only on
the seed and its labels (NumPy's recommended way of making independent streams, NEP 19).
``seed=None`` draws fresh OS entropy (not reproducible).

Every command-line ``--seed`` that seeds a generator of the package defaults to :data:`DEFAULT_SEED` (0): a
command run twice without ``--seed`` gives the same numbers, and its JSON names the seed it used. (``query
--seed`` is not one: it is the sampling seed sent to the model's endpoint, none unless given.)

This module imports NumPy only when a generator is made: the command line's parsers import it at start-up.
"""
from __future__ import annotations

import argparse
import hashlib
from numbers import Integral
from typing import TYPE_CHECKING, Any

from mrcstats.errors import InputError

if TYPE_CHECKING:
    import numpy as np

__all__ = ["DEFAULT_SEED", "check_seed", "label_key", "parse_seed", "rng", "stream"]

#: the seed of every command-line ``--seed`` not given (a run without ``--seed`` is reproducible)
DEFAULT_SEED = 0


def check_seed(seed: Any, where: str = "seed") -> int | None:
    """``seed`` as an ``int`` (``None`` kept: fresh entropy); a negative number, a non-integer (``1.5``,
    ``"3"``) or a bool raises :class:`InputError` naming ``where`` and what to pass."""
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, Integral):
        raise InputError(f"{where} must be a whole number >= 0 (e.g. 0 or 12345), got {seed!r} "
                         f"({type(seed).__name__})")
    if seed < 0:
        raise InputError(f"{where} must be >= 0 (a seed is non-negative entropy), got {int(seed)}; "
                         f"pass e.g. {abs(int(seed))}")
    return int(seed)


def parse_seed(text: str) -> int:
    """The argparse ``type`` of every ``--seed``: the text of a whole number >= 0 (:func:`check_seed`'s rule)."""
    try:
        value = int(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0 (e.g. 0 or 12345), got {text!r}") from None
    try:
        return check_seed(value, "--seed")  # type: ignore[return-value]
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--seed ")) from None


def label_key(label: object) -> int:
    """A stable 32-bit integer for ``label`` (its ``str``), the same in every run and process."""
    return int.from_bytes(hashlib.blake2b(str(label).encode("utf-8"), digest_size=4).digest(), "little")


def rng(seed: Any, where: str = "seed") -> np.random.Generator:
    """``numpy.random.default_rng(seed)`` after :func:`check_seed` (a Generator passes through unchanged)."""
    import numpy as np

    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(check_seed(seed, where))


def stream(seed: int | None, *labels: object) -> np.random.Generator:
    """The random stream of the choice named by ``labels`` under ``seed`` (see the module docstring)."""
    import numpy as np

    ss = np.random.SeedSequence(entropy=check_seed(seed), spawn_key=tuple(label_key(x) for x in labels))
    return np.random.default_rng(ss)
