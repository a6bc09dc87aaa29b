"""mrcstats._compat: every branch of a version-dependent import runs here, and no module of ``src/`` imports
another package's private module (``pyarrow._compute``, ``scipy.special._ufuncs``, ...)."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from mrcstats import _compat

SRC = Path(__file__).resolve().parents[1] / "src" / "mrcstats"
zstandard = pytest.importorskip("zstandard")

DATA = b"mrcstats " * 1000
#: two frames back to back: Inspect's writers may flush more than one
FRAMES = zstandard.ZstdCompressor().compress(DATA[:4000]) + zstandard.ZstdCompressor().compress(DATA[4000:])


def test_zstd_zstandard_fallback(monkeypatch):
    monkeypatch.setitem(sys.modules, "compression", None)      # as on Python < 3.14: the import fails
    monkeypatch.setitem(sys.modules, "compression.zstd", None)
    assert _compat._stdlib_zstd() is None
    assert _compat.zstd_decompress(FRAMES) == DATA
    assert _compat.zstd_errors() == (zstandard.ZstdError,)
    with pytest.raises(_compat.zstd_errors()):
        _compat.zstd_decompress(FRAMES[:-9] + b"garbage!!")


@pytest.mark.skipif(sys.version_info < (3, 14), reason="compression.zstd is Python >= 3.14 (PEP 784)")
def test_zstd_standard_library():   # pragma: no cover - Python >= 3.14
    assert _compat._stdlib_zstd() is not None
    assert _compat.zstd_decompress(FRAMES) == DATA
    with pytest.raises(_compat.zstd_errors()):
        _compat.zstd_decompress(FRAMES[:-9] + b"garbage!!")


#: ``import a._b``, ``from a._b import``, ``from a.b._c import`` (``a`` not mrcstats: our own private modules
#: are ours), and ``importlib.import_module("a._b")``
_PRIVATE = re.compile(r"^\s*(?:from|import)\s+(?!mrcstats\b)([A-Za-z_][\w.]*\._[a-z]\w*)"
                      r"|import_module\(\s*[\"'](?!mrcstats\b)([\w.]*\._[a-z]\w*)", re.MULTILINE)


def test_no_private_module_of_another_package_is_imported():
    found = []
    for f in sorted(SRC.rglob("*.py")):
        for m in _PRIVATE.finditer(f.read_text(encoding="utf-8")):
            line = f.read_text(encoding="utf-8").count("\n", 0, m.start()) + 1
            found.append(f"{f.relative_to(SRC.parent)}:{line}: {(m.group(1) or m.group(2))}")
    assert not found, "private modules of other packages imported (use a public API, or _compat):\n" + \
        "\n".join(found)


def test_the_private_import_check_finds_them():
    for text in ("from pyarrow._compute import call_function", "    import pyarrow._compute as mod",
                 "from scipy.special._ufuncs import _binom_cdf", 'importlib.import_module("numpy._core")'):
        assert _PRIVATE.search(text), text
    for text in ("from mrcstats._seeds import rng", "import pyarrow.compute as pc", "from scipy import special"):
        assert not _PRIVATE.search(text), text
