"""One BLAS thread for the model fits, set the cheap way when the command line can (issue 28).

The fits run BLAS single-threaded: their matrices are small or matrix-vector products, and threaded
OpenBLAS is many times slower on a loaded machine. In a library call this is done with threadpoolctl
around the fit (:func:`mrcstats.models.optimize.blas_controller`), whose first use scans the loaded
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


#: glibc's mallopt parameters (malloc.h): M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3


def keep_freed_memory() -> bool:
    """Let this command-line process reuse the memory of freed arrays instead of mapping fresh pages for each
    (glibc's ``mallopt``; the same as ``MALLOC_MMAP_THRESHOLD_=256MiB MALLOC_TRIM_THRESHOLD_=512MiB
    MALLOC_TOP_PAD_=64MiB`` in the environment). A fit's penalised IRLS makes and frees a few arrays of the
    data's length per step; with glibc's defaults each above 128 KiB is a fresh ``mmap`` whose pages fault in
    on first touch (on a 70,000-row fit about 8% of its time). Freed memory then stays with the process until
    it exits, which a command does soon. Nothing is changed when the user set any ``MALLOC_`` variable, off
    glibc, or when ``mallopt`` is not there; returns whether it was set."""
    if not sys.platform.startswith("linux") or any(k.startswith("MALLOC_") for k in os.environ):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):       # pragma: no cover - not glibc
        return False
    return all(mallopt(p, v) == 1 for p, v in ((_M_MMAP_THRESHOLD, 256 << 20), (_M_TRIM_THRESHOLD, 512 << 20),
                                              (_M_TOP_PAD, 64 << 20)))
