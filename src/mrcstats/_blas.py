"""One BLAS thread for the model fits, set the cheap way when the command line can (issue 28).

The fits run BLAS single-threaded: their matrices are small or matrix-vector products, and threaded
OpenBLAS is many times slower on a loaded machine. In a library call this is done with threadpoolctl
around the fit (:func:`mrcstats.models.optimize._blas_controller`), whose first use scans the loaded
libraries (10–20 ms, a fifth of a small fit). A command-line process that has not loaded numpy yet
can instead set ``OPENBLAS_NUM_THREADS=1`` before numpy loads OpenBLAS (:func:`pin_blas`); the fits then
skip threadpoolctl. A user's own ``OPENBLAS_NUM_THREADS`` (or ``OMP_NUM_THREADS``) is left alone, and the
fits then use threadpoolctl as in a library call.
"""
from __future__ import annotations

import os
import sys

PINNED = "MRCSTATS_BLAS_PINNED"      # "1": this process set OPENBLAS_NUM_THREADS=1 before numpy loaded


def pin_blas() -> bool:
    """Set ``OPENBLAS_NUM_THREADS=1`` when numpy is not loaded yet and the user set no thread count;
    returns whether BLAS is now pinned to one thread for this process."""
    if os.environ.get(PINNED) == "1":
        return True
    if "numpy" in sys.modules or "OPENBLAS_NUM_THREADS" in os.environ or "OMP_NUM_THREADS" in os.environ:
        return False
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    os.environ[PINNED] = "1"
    return True


def blas_pinned() -> bool:
    """Whether this process pinned BLAS to one thread before numpy loaded (:func:`pin_blas`)."""
    return os.environ.get(PINNED) == "1"
