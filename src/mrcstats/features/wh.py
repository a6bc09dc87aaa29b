"""The wh-word of a question (seed ``003_17297ae0d00b444c``, section 5, table 3).

* :func:`wh_word`: the first match of ``\\b(what|when|which|why|where|who|whom|whose|how)\\b``
  in the question, case-insensitive, lower-cased; ``"other"`` when there is none (cloze
  questions with ``_`` usually).
* :func:`wh_word_clause`: the seed's variant, the wh-word that *opens the interrogative
  clause*: the question is cut into clauses at ``, ; : ( " --`` and the first clause that
  starts with a wh-word (optionally after one preposition, as in "In which year ...")
  gives it; so "According to the passage, what ..." gives ``"what"`` but "The writer
  tells us how ..." gives ``"other"``.
"""
from __future__ import annotations

import re

__all__ = ["OTHER", "WH_PATTERN", "WH_WORDS", "wh_word", "wh_word_clause"]

WH_WORDS = ("what", "when", "which", "why", "where", "who", "whom", "whose", "how")
WH_PATTERN = re.compile(r"\b(what|when|which|why|where|who|whom|whose|how)\b", re.IGNORECASE)
OTHER = "other"

_PREPOSITIONS = ("in|on|at|for|from|to|by|with|of|about|since|until|till|during|after|before|"
                 "under|over|through|into|among|between|against|toward|towards|upon|within|without|"
                 "according\\s+to|because\\s+of")
_CLAUSE_SPLIT = re.compile(r"[,;:()\"\u201c\u201d\u2014]|--|\s-\s")
_CLAUSE_START = re.compile(
    rf"^\W*(?:(?:{_PREPOSITIONS})\s+)?(what|when|which|why|where|who|whom|whose|how)\b", re.IGNORECASE)


def wh_word(question: str) -> str:
    """The first wh-word in ``question`` (lower-cased) or ``"other"``."""
    m = WH_PATTERN.search(question)
    return m.group(1).lower() if m else OTHER


def wh_word_clause(question: str) -> str:
    """The wh-word opening the first interrogative clause of ``question``, or ``"other"``."""
    for clause in _CLAUSE_SPLIT.split(question):
        m = _CLAUSE_START.match(clause.strip())
        if m:
            return m.group(1).lower()
    return OTHER
