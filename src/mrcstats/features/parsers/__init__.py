"""Constituency parsers behind :func:`mrcstats.features.features`.

Every parser turns one text (a passage, a question or one option) into a
:class:`ParsedText`: the normalised trees of its sentences (see
:mod:`mrcstats.features.trees` for the counting convention) and their node and leaf
counts. Parsers are built from a picklable :class:`ParserSpec` so worker processes
can rebuild them (``--jobs``).

* ``stanza``: Stanza's tokenize, pos and constituency processors (the seed's parser;
  optional extra ``mrcstats[stanza]``, models from ``mrcstats models download``).
* ``link-grammar``: Debian's ``python3-link-grammar``, offline, a few ms a sentence.
* ``trees``: bracketed trees given by the user; the "text" is the bracket string.
* ``none``: no syntax columns.
* ``auto``: ``stanza`` when its models are present (checked without importing torch),
  else ``link-grammar``.
"""
from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass, field
from typing import Any, Protocol

from mrcstats.errors import DependencyError, InputError
from mrcstats.features.trees import Tree, count_nodes, normalize, parse_brackets, to_brackets

__all__ = [
    "PARSERS",
    "ParsedText",
    "Parser",
    "ParserSpec",
    "TreesParser",
    "make_parser",
    "parsed_from_trees",
    "resolve_parser",
]

PARSERS = ("stanza", "link-grammar", "trees", "none", "auto")


@dataclass(frozen=True)
class ParsedText:
    """Parse of one text: sentence trees (bracketed, normalised) and their counts.

    ``fallbacks`` counts sentences the parser could not parse, given a flat tree
    (ROOT over one preterminal per token) so that every sentence still counts.
    """

    nodes: int
    leaves: int
    sentences: int
    fallbacks: int = 0
    trees: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "leaves": self.leaves, "sentences": self.sentences,
                "fallbacks": self.fallbacks, "trees": list(self.trees)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ParsedText:
        return cls(int(d["nodes"]), int(d["leaves"]), int(d["sentences"]), int(d.get("fallbacks", 0)),
                   tuple(d.get("trees", ())))


def parsed_from_trees(trees: list[Tree], fallbacks: int = 0) -> ParsedText:
    """Sum :func:`count_nodes` over already-normalised sentence trees."""
    nodes = leaves = 0
    for t in trees:
        c = count_nodes(t)
        nodes += c.nodes
        leaves += c.leaves
    return ParsedText(nodes, leaves, len(trees), fallbacks, tuple(to_brackets(t) for t in trees))


class Parser(Protocol):
    """What the feature pipeline needs from a parser."""

    name: str

    @property
    def version(self) -> str: ...  # part of the cache key

    def parse_text(self, text: str) -> ParsedText: ...


@dataclass(frozen=True)
class ParserSpec:
    """A picklable recipe for a parser: its name and keyword options."""

    name: str
    options: tuple[tuple[str, Any], ...] = field(default=())

    def kwargs(self) -> dict[str, Any]:
        return dict(self.options)


class TreesParser:
    """Given Penn-style trees: the "text" of a unit is one or more bracketed trees.

    Trees are normalised (ROOT, preterminals, ``-NONE-`` removed) and counted; the
    tokens are their leaves.
    """

    name = "trees"
    version = "1"

    def parse_text(self, text: str) -> ParsedText:
        trees = [t for t in (normalize(x) for x in parse_brackets(text)) if t is not None]
        return parsed_from_trees(trees)


def make_parser(spec: ParserSpec) -> Parser:
    """Build the parser a spec names (``stanza``, ``link-grammar`` or ``trees``)."""
    if spec.name == "trees":
        return TreesParser()
    if spec.name == "link-grammar":
        from mrcstats.features.parsers.linkgrammar import LinkGrammarParser

        return LinkGrammarParser(**spec.kwargs())
    if spec.name == "stanza":
        from mrcstats.features.parsers.stanza import StanzaParser

        return StanzaParser(**spec.kwargs())
    raise InputError(f"unknown parser {spec.name!r}; choose one of {', '.join(PARSERS)}")


def linkgrammar_available() -> bool:
    """True when the ``linkgrammar`` module can be found (see scripts/post_install.sh)."""
    return importlib.util.find_spec("linkgrammar") is not None


def resolve_parser(name: str, *, models_dir: str | None = None, verbose: bool = True) -> str:
    """Turn ``auto`` into a concrete parser name and check the choice is usable.

    ``auto``: ``stanza`` when it is installed and its English models are present in
    ``models_dir`` (checked on disk, without importing torch), else ``link-grammar``;
    the choice is said on stderr when ``verbose``.
    """
    if name not in PARSERS:
        raise InputError(f"unknown parser {name!r}; choose one of {', '.join(PARSERS)}")
    if name != "auto":
        return name
    from mrcstats.features.parsers.stanza import models_present, resources_dir

    d = resources_dir(models_dir)
    if importlib.util.find_spec("stanza") is not None and models_present(d):
        chosen, why = "stanza", f"Stanza models found in {d}"
    elif linkgrammar_available():
        chosen = "link-grammar"
        why = ("stanza is not installed" if importlib.util.find_spec("stanza") is None
               else f"no Stanza models in {d}")
    else:
        raise DependencyError(
            "--parser auto found no usable parser: install Stanza (pip install 'mrcstats[stanza]', then "
            "`mrcstats models download`) or link-grammar (apt-get install python3-link-grammar "
            "link-grammar-dictionaries-en, then `bash scripts/post_install.sh .venv/bin/python`), "
            "or use --parser none")
    if verbose:
        print(f"mrcstats features: parser auto -> {chosen} ({why})", file=sys.stderr)
    return chosen
