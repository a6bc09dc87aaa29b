"""Small wording helpers for text a person reads (reports, notes, CLI messages)."""
from __future__ import annotations

from typing import Any

#: irregular plurals of the nouns the package counts
_IRREGULAR = {"analysis": "analyses", "index": "indices", "matrix": "matrices", "entry": "entries",
              "category": "categories", "query": "queries", "family": "families", "property": "properties"}


def plural(n: Any, word: str, fmt: str = "") -> str:
    """``"1 row"``, ``"3 rows"``, ``"6,931 answers"`` (``fmt=","``): a count and its noun, never "row(s)"."""
    try:
        one = float(n) == 1
    except (TypeError, ValueError):
        one = False
    many = _IRREGULAR.get(word) or (word[:-1] + "ies" if word.endswith("y") and word[-2:-1] not in "aeiou"
                                    else word + ("es" if word.endswith(("s", "x", "ch", "sh")) else "s"))
    return f"{n:{fmt}} {word if one else many}"
