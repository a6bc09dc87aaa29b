"""The families of :mod:`mrcstats.models.family` by name, link and response, without numpy.

What the command line offers before any model is fitted (``mrcstats glmer --family`` choices and help):
building the parser must not import numpy (``mrcstats --help`` starts in well under 0.2 s). The records
themselves, with their kernels, are :data:`mrcstats.models.family.FAMILIES`; tests/cli/test_startup.py
checks that this table names exactly those, with the same links and responses.
"""
from __future__ import annotations

#: name -> (link, response the design reads), in the order of ``FAMILIES``
FAMILY_TABLE: dict[str, tuple[str, str]] = {
    "binomial": ("logit", "binomial"),
    "poisson": ("log", "count"),
    "gaussian": ("identity", "continuous"),
    "betabinomial": ("logit", "binomial"),
}
