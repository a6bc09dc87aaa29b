"""Token counts and sentence splitting that need no downloaded NLTK data.

* Tokens: ``nltk.word_tokenize(text, preserve_line=True)``, the seed's token count
  (``003_17297ae0d00b444c``, section 3.3 and limitations). With ``preserve_line=True``
  NLTK skips its Punkt sentence splitter, so no ``punkt`` download is needed.
* Sentences: an *untrained* :class:`nltk.tokenize.punkt.PunktSentenceTokenizer` (its
  default parameters, no model file), applied to each non-blank line; so a newline that
  joins pieces (passage, question, options) is always a sentence boundary.
"""
from __future__ import annotations

import functools
import re

__all__ = ["clean_text", "count_tokens", "split_sentences", "tokenize"]

_WS_RE = re.compile(r"[ \t\f\v\u00a0\u2000-\u200b\u3000]+")


@functools.lru_cache(maxsize=1)
def _word_tokenize():
    from nltk.tokenize import word_tokenize

    return word_tokenize


@functools.lru_cache(maxsize=1)
def _punkt():
    from nltk.tokenize.punkt import PunktSentenceTokenizer

    return PunktSentenceTokenizer()


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
