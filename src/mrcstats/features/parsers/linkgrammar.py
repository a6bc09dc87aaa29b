"""Offline constituency trees from link-grammar (Debian ``python3-link-grammar``).

Per sentence (sentences from :func:`mrcstats.features.tokens.split_sentences`):

1. if the sentence has at most ``strict_max_words`` words, parse it with no null links
   (``max_null_count=0``);
2. if that finds no linkage and the sentence has at most ``null_max_words`` words,
   parse again allowing a few null links (``min_null_count=1``, ``max_null_count``);
   unlinked words stay in the tree as leaves;
   (a linkage counts only if its constituent tree keeps every word: link-grammar's
   ``constituent_tree()`` sometimes drops words, then the next linkage is tried);
3. if that still fails (or the sentence is too long for a step), the sentence gets a
   flat tree, ROOT over one preterminal per NLTK token, and counts in ``fallbacks`` --
   a text never gets a density from only part of its sentences.

The work is bounded by these word counts and null-link limit, not by the clock, so a
sentence's tree does not depend on machine load. (A wall-clock bound of 1 s per pass
gave 460 fallbacks on RACE-h test under load and 444 idle.) On RACE-h test no strict
parse of more than 80 words succeeds, the slowest strict parse up to 80 words takes
about 0.7 s, and the slowest null-link parse up to 38 words with at most 8 null links
about 3.5 s, while 39-45 words can take 15 s and more. ``max_parse_time`` (30 s) is
only a safety net against pathological input that these bounds never reach in practice.

The best linkage's ``constituent_tree()`` has no part-of-speech nodes and no ROOT
(``(S (NP the dog.n) barks.v .)``); :func:`mrcstats.features.trees.wrap_leaves` gives
every word a preterminal and :func:`~mrcstats.features.trees.normalize` adds ROOT, so
its node counts follow Stanza's convention.

The module is built for Debian's system CPython; ``scripts/post_install.sh`` links just
that package into the project venv.
"""
from __future__ import annotations

import re

from mrcstats.errors import DependencyError
from mrcstats.features.parsers import ParsedText, parsed_from_trees
from mrcstats.features.tokens import SPLITTER_VERSION, split_sentences, tokenize
from mrcstats.features.trees import Tree, flat_tree, leaves, normalize, parse_brackets, wrap_leaves

__all__ = ["LinkGrammarParser", "import_linkgrammar"]

_INSTALL_HINT = ("apt-get install python3-link-grammar link-grammar-dictionaries-en, then "
                 "`bash scripts/post_install.sh .venv/bin/python` to link it into the venv")
_NULL_WORD = re.compile(r"^\{(.+)\}$")
_WALLS = ("LEFT-WALL", "RIGHT-WALL")
_MAX_LINKAGES = 10


def import_linkgrammar():
    """Import the ``linkgrammar`` module, silencing its messages (it prints to stdout)."""
    try:
        import linkgrammar as lg
    except ImportError as exc:
        raise DependencyError(f"the link-grammar parser is not importable ({exc}): {_INSTALL_HINT}") from None
    # The library reports through a handler that defaults to printing on stdout, which
    # would break --json; keep errors only, on stderr.
    lg.LG_Error.set_handler(_quiet_handler)
    return lg


def _quiet_handler(errinfo, data) -> None:  # pragma: no cover - called from C
    import sys

    # errors such as "sentence too long" end in a counted flat fallback; only fatal ones are shown
    label = getattr(errinfo, "severity_label", "")
    if label == "Fatal":
        print(f"link-grammar: {label}: {getattr(errinfo, 'text', '').strip()}", file=sys.stderr)


def _clean_leaf(leaf: str) -> str:
    m = _NULL_WORD.match(leaf)
    return m.group(1) if m else leaf


def _clean(tree: Tree) -> Tree:
    return Tree(tree.label, tuple(_clean_leaf(k) if isinstance(k, str) else _clean(k) for k in tree.children))


class LinkGrammarParser:
    """Constituent trees from link-grammar with null links, length bounds and a flat fallback."""

    name = "link-grammar"

    def __init__(self, *, max_parse_time: int = 30, max_null_count: int = 8, null_max_words: int = 38,
                 strict_max_words: int = 80, linkage_limit: int = 20, short_length: int = 10,
                 null_short_length: int = 4, language: str = "en") -> None:
        lg = import_linkgrammar()
        self._lg = lg
        try:
            self._dict = lg.Dictionary(language)
        except Exception as exc:  # noqa: BLE001 - LG_DictionaryError
            raise DependencyError(f"link-grammar cannot open its {language!r} dictionary ({exc}): "
                                  f"{_INSTALL_HINT}") from None
        self.max_parse_time = int(max_parse_time)
        self.max_null_count = int(max_null_count)
        self.null_max_words = int(null_max_words)
        self.strict_max_words = int(strict_max_words)
        common = {"max_parse_time": self.max_parse_time, "linkage_limit": int(linkage_limit),
                  "short_length": int(short_length)}
        self._strict = lg.ParseOptions(max_null_count=0, **common)
        # the null-link pass is most of the cost: shorter links make it ~3x faster for the same densities
        self._nulls = lg.ParseOptions(min_null_count=1, max_null_count=self.max_null_count,
                                      **{**common, "short_length": int(null_short_length)})
        self._version = (f"link-grammar {lg.__version__}; dict {self._dict.linkgrammar_get_dict_version()}; "
                         f"strict up to {self.strict_max_words} words; "
                         f"nulls<={self.max_null_count} up to {self.null_max_words} words; "
                         f"safety time {self.max_parse_time}s; limit {linkage_limit}; short {short_length}/{null_short_length}; complete trees; "
                         f"{SPLITTER_VERSION}")

    @property
    def version(self) -> str:
        return self._version

    def _linkage_tree(self, sentence, options) -> Tree | None:
        """The normalised tree of the best linkage whose constituent tree keeps every word.

        link-grammar's ``constituent_tree()`` occasionally drops words (about one
        linkage in a hundred on RACE-h); such a tree would count part of a sentence, so
        the next linkages (by cost) are tried, up to ``_MAX_LINKAGES``.
        """
        lg = self._lg
        try:
            linkages = sentence.parse(options)
            if len(linkages) == 0:
                return None
            for k, linkage in enumerate(linkages):
                if k >= _MAX_LINKAGES:
                    break
                n_words = sum(1 for w in linkage.words() if w not in _WALLS)
                trees = parse_brackets(linkage.constituent_tree(1))
                if len(trees) == 1 and len(leaves(trees[0])) == n_words:
                    return normalize(wrap_leaves(_clean(trees[0])), strip_empty=None)
        except lg.LG_TimerExhausted:
            return None
        except Exception:  # noqa: BLE001 - a tree we cannot read: treat as a failed parse
            return None
        return None

    def parse_sentence(self, text: str) -> tuple[Tree, bool]:
        """The normalised tree of one sentence and whether it is the flat fallback."""
        lg = self._lg
        tree = None
        n_words = len(text.split())
        if n_words > max(self.strict_max_words, self.null_max_words):
            return flat_tree(tokenize(text)), True
        try:
            sentence = lg.Sentence(text, self._dict, self._strict)
        except Exception:  # noqa: BLE001
            sentence = None
        if sentence is not None:
            if n_words <= self.strict_max_words:
                tree = self._linkage_tree(sentence, self._strict)
            if tree is None and n_words <= self.null_max_words:
                tree = self._linkage_tree(sentence, self._nulls)
        if tree is not None:
            return tree, False
        return flat_tree(tokenize(text)), True

    def parse_text(self, text: str) -> ParsedText:
        trees: list[Tree] = []
        fallbacks = 0
        for s in split_sentences(text):
            tree, fell_back = self.parse_sentence(s)
            if tree.children:  # a sentence of no tokens adds nothing
                trees.append(tree)
                fallbacks += fell_back
        return parsed_from_trees(trees, fallbacks)
