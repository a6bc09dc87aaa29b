"""Token counts and sentence splitting that need no downloaded NLTK data.

* Tokens: ``nltk.word_tokenize(text, preserve_line=True)``, the seed's token count
  (``003_17297ae0d00b444c``, section 3.3 and limitations). With ``preserve_line=True``
  NLTK skips its Punkt sentence splitter, so no ``punkt`` download is needed.
* Sentences: an *untrained* :class:`nltk.tokenize.punkt.PunktSentenceTokenizer` (no
  model file) given a short hand-written list of abbreviations (:data:`ABBREVIATIONS`,
  so "Mr. Smith" stays one sentence), applied to each non-blank line; so a newline that
  joins pieces (passage, question, options) is always a sentence boundary.
"""
from __future__ import annotations

import functools
import re

__all__ = ["ABBREVIATIONS", "SPLITTER_VERSION", "clean_text", "count_tokens", "split_sentences", "tokenize"]

_WS_RE = re.compile(r"[ \t\f\v\u00a0\u2000-\u200b\u3000]+")


@functools.lru_cache(maxsize=1)
def _word_tokenize():
    from nltk.tokenize import word_tokenize

    return word_tokenize


#: common English abbreviations (lower case, without the final period) given to Punkt by hand,
#: so "Mr. Smith" or "Loews Corp. that ..." is not cut; no trained model is downloaded. Words
#: that also end sentences ("no.", "sat.", "etc.") are left out on purpose.
ABBREVIATIONS = frozenset((
    "mr", "mrs", "ms", "dr", "prof", "st", "jr", "sr", "messrs", "mme", "mlle", "capt", "sgt", "lt", "gov",
    "sen", "inc", "corp", "co", "ltd", "llc", "bros", "dept", "univ", "vs", "e.g", "i.e", "cf",
    "a.m", "p.m", "u.s", "u.k", "u.n", "u.s.a", "d.c", "jan", "feb", "aug", "sept", "oct", "nov",
))


#: changes whenever :func:`split_sentences` can split differently (part of parse cache keys)
SPLITTER_VERSION = "punkt-untrained+abbrev-1"


@functools.lru_cache(maxsize=1)
def _punkt():
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

    params = PunktParameters()
    params.abbrev_types = set(ABBREVIATIONS)
    return PunktSentenceTokenizer(params)


def tokenize(text: str) -> list[str]:
    """``nltk.word_tokenize(text, preserve_line=True)``."""
    return _word_tokenize()(text, preserve_line=True)


def count_tokens(text: str) -> int:
    """Number of NLTK word tokens in ``text`` (see :func:`tokenize`)."""
    return len(tokenize(text))


def clean_text(text: str) -> str:
    """Collapse runs of spaces/tabs (RACE pads blanks as ``"   _  "``); keep newlines."""
    return "\n".join(_WS_RE.sub(" ", line).strip() for line in text.splitlines())


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences: each non-blank line, then untrained Punkt within it."""
    out: list[str] = []
    punkt = _punkt()
    for line in clean_text(text).split("\n"):
        if line:
            out.extend(s.strip() for s in punkt.tokenize(line) if s.strip())
    return out
