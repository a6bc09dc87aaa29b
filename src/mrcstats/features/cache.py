"""Content-addressed on-disk cache of parses.

Key: SHA-256 of ``parser name``, ``parser version`` (which includes the options that
change trees) and the text, so a changed text, parser or version is a miss and an
unchanged one is a hit whatever the item is called. One JSON file per entry,
``DIR/<parser>/<key[:2]>/<key>.json``, written atomically (temporary file in the same
directory, then ``os.replace``), so concurrent runs and interrupted runs never leave a
torn entry; an unreadable entry is treated as a miss and rewritten.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from mrcstats._files import atomic_path
from mrcstats.features.parsers import ParsedText

__all__ = ["ParseCache", "cache_key", "default_cache_dir"]


def default_cache_dir() -> Path:
    """``$MRCSTATS_CACHE`` or ``$XDG_CACHE_HOME/mrcstats`` (``~/.cache/mrcstats``), plus ``/features``."""
    env = os.environ.get("MRCSTATS_CACHE")
    if env:
        return Path(env).expanduser() / "features"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mrcstats" / "features"


def cache_key(parser: str, version: str, text: str) -> str:
    """Hex SHA-256 over the parser name, its version and the text (NUL-separated)."""
    h = hashlib.sha256()
    for part in (parser, version, text):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()


class ParseCache:
    """Parses of texts by one parser version, stored under ``root``."""

    def __init__(self, root: str | os.PathLike, parser: str, version: str) -> None:
        self.root = Path(root)
        self.parser = parser
        self.version = version
        self.dir = self.root / re.sub(r"[^A-Za-z0-9_.-]", "_", parser)

    def key(self, text: str) -> str:
        return cache_key(self.parser, self.version, text)

    def _path(self, key: str) -> Path:
        return self.dir / key[:2] / f"{key}.json"

    def get(self, key: str) -> ParsedText | None:
        try:
            with open(self._path(key), encoding="utf-8") as fh:
                return ParsedText.from_dict(json.load(fh))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, key: str, parsed: ParsedText) -> None:
        path = self._path(key)
        with atomic_path(path) as tmp:
            tmp.write_text(json.dumps(parsed.to_dict(), separators=(",", ":")), encoding="utf-8")
