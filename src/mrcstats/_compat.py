"""The version-dependent imports of the package, each in one place with its fallback.

Every branch is run by tests/test_compat.py (a fallback is forced by hiding the newer module). Only public
APIs are used (tests/test_compat.py also refuses an import of another package's private module anywhere in
``src/``): the binomial CDF of McNemar's exact test is ``scipy.special.betainc`` and Arrow's kernels come
from ``pyarrow.compute`` (see :mod:`mrcstats.stats.contingency`, :mod:`mrcstats.io.arrow_columns`).

* zstd: the standard library's ``compression.zstd`` (Python >= 3.14, PEP 784), else the ``zstandard``
  package (a dependency) -- :func:`zstd_decompress`, :func:`zstd_errors`.
"""
from __future__ import annotations

import io

__all__ = ["zstd_decompress", "zstd_errors"]


def _stdlib_zstd():  # type: ignore[no-untyped-def]
    """``compression.zstd`` or None (Python < 3.14)."""
    try:
        from compression import zstd  # type: ignore[import-not-found]
    except ImportError:
        return None
    return zstd


def zstd_decompress(raw: bytes) -> bytes:
    """Decompress every zstd frame of ``raw`` (frames read one after another, as ``zstd -d`` does)."""
    zstd = _stdlib_zstd()
    if zstd is not None:
        return zstd.decompress(raw)
    import zstandard

    with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw), read_across_frames=True) as r:
        return r.read()


def zstd_errors() -> tuple[type[BaseException], ...]:
    """The exceptions a damaged zstd stream raises, from whichever decompressor :func:`zstd_decompress` uses."""
    zstd = _stdlib_zstd()
    if zstd is not None:
        return (zstd.ZstdError,)
    import zstandard

    return (zstandard.ZstdError,)
