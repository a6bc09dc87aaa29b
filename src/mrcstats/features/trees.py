"""Penn-style bracketed constituency trees: parsing, normalisation and node counting.

A tree is a :class:`Tree` (a label and a tuple of children); a leaf is a plain ``str``.
Every parser's output is brought to one counting convention before counting
(:func:`normalize`):

* one ``ROOT`` node on top (Stanza's convention; the WSJ treebank's unlabelled outer
  bracket ``( (S ...) )`` becomes ``ROOT``; a tree without either is wrapped in one);
* every leaf under its own preterminal (part-of-speech) node; a leaf that sits directly
  in a phrase (link-grammar's constituent trees have no preterminals) gets one;
* ``-NONE-`` empty elements (gold treebank traces) are removed, and so are the phrases
  left empty by that removal.

:func:`count_nodes` then counts **all** nodes: ROOT, phrasal, preterminal and leaf
nodes. Syntactic density is ``nodes / tokens`` (seed ``003_17297ae0d00b444c``,
section 3.3 and appendix A: "The quick brown fox jumped over the lazy dog." has 26
nodes and 10 leaves, 2.60; "The boy saw the man with the telescope." with the PP
attached to the VP has 25 nodes and 9 leaves, 25/9).
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from mrcstats.errors import InputError

__all__ = [
    "ROOT",
    "Tree",
    "TreeCounts",
    "count_nodes",
    "flat_tree",
    "leaves",
    "normalize",
    "parse_brackets",
    "parse_tree",
    "to_brackets",
    "wrap_leaves",
]

ROOT = "ROOT"
#: a leaf wrapped by :func:`normalize` gets this label unless a caller gives one
DEFAULT_PRETERMINAL = "X"
_TOKEN_RE = re.compile(r"\(|\)|[^\s()]+")


@dataclass(frozen=True, slots=True)
class Tree:
    """A constituent: ``label`` and its ``children`` (sub-trees or leaf strings)."""

    label: str
    children: tuple[Tree | str, ...]

    def __str__(self) -> str:
        return to_brackets(self)


@dataclass(frozen=True, slots=True)
class TreeCounts:
    """Node counts of one tree or a sum over trees.

    ``nodes = phrasal + preterminal + leaves`` where ``phrasal`` includes ROOT.
    """

    nodes: int = 0
    leaves: int = 0
    phrasal: int = 0
    preterminal: int = 0

    def __add__(self, other: TreeCounts) -> TreeCounts:
        return TreeCounts(self.nodes + other.nodes, self.leaves + other.leaves,
                          self.phrasal + other.phrasal, self.preterminal + other.preterminal)

    @property
    def density_leaves(self) -> float:
        """``nodes / leaves`` (NaN without leaves)."""
        return self.nodes / self.leaves if self.leaves else float("nan")


def _error(text: str, pos: int, what: str) -> InputError:
    snippet = text[max(0, pos - 30): pos + 30].replace("\n", " ")
    return InputError(f"bad bracketed tree at character {pos}: {what} (near {snippet!r}); "
                      "expected Penn-style brackets like '(ROOT (S (NP (DT The) (NN dog)) (VP (VBZ barks))))'")


def parse_brackets(text: str) -> list[Tree]:
    """Parse one or more bracketed trees from ``text`` (e.g. a ``.mrg`` file or a CSV cell).

    Accepts labelled roots ``(ROOT ...)``, the treebank's unlabelled outer bracket
    ``( (S ...) )`` (label ``""``) and link-grammar's mixed phrases
    ``(S (NP the dog.n) runs.v)``. Raises :class:`InputError` on unbalanced brackets
    or text outside brackets.
    """
    tokens = [(m.group(), m.start()) for m in _TOKEN_RE.finditer(text)]
    trees: list[Tree] = []
    i = 0
    n = len(tokens)
    while i < n:
        tok, pos = tokens[i]
        if tok != "(":
            raise _error(text, pos, f"text {tok!r} outside any bracket")
        tree, i = _parse_at(tokens, i, text)
        trees.append(tree)
    return trees


def _parse_at(tokens: list[tuple[str, int]], i: int, text: str) -> tuple[Tree, int]:
    # iterative parse to survive very deep trees; tokens[i] is "("
    stack: list[tuple[str, list]] = []
    n = len(tokens)
    while i < n:
        tok, pos = tokens[i]
        if tok == "(":
            i += 1
            label = ""
            if i < n and tokens[i][0] not in ("(", ")"):
                label = tokens[i][0]
                i += 1
            stack.append((label, []))
            continue
        if tok == ")":
            if not stack:
                raise _error(text, pos, "unbalanced ')'")
            label, kids = stack.pop()
            node = Tree(label, tuple(kids))
            i += 1
            if not stack:
                return node, i
            stack[-1][1].append(node)
            continue
        if not stack:  # pragma: no cover - guarded by the caller
            raise _error(text, pos, f"text {tok!r} outside any bracket")
        stack[-1][1].append(tok)
        i += 1
    raise _error(text, len(text), "missing ')' at the end")


def parse_tree(text: str) -> Tree:
    """Parse exactly one bracketed tree (see :func:`parse_brackets`)."""
    trees = parse_brackets(text)
    if len(trees) != 1:
        raise InputError(f"expected one bracketed tree, found {len(trees)} in {text[:60]!r}")
    return trees[0]


def to_brackets(tree: Tree | str) -> str:
    """One-line bracketed form, the inverse of :func:`parse_tree`."""
    if isinstance(tree, str):
        return tree
    parts: list[str] = []
    _write(tree, parts)
    return "".join(parts)


def _write(tree: Tree, out: list[str]) -> None:
    out.append("(" + tree.label if tree.label else "(")
    for kid in tree.children:
        out.append(" ")
        if isinstance(kid, str):
            out.append(kid)
        else:
            _write(kid, out)
    out.append(")")


def _iter_nodes(tree: Tree) -> Iterator[Tree | str]:
    stack: list[Tree | str] = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, Tree):
            stack.extend(reversed(node.children))


def leaves(tree: Tree) -> list[str]:
    """The leaf strings, left to right."""
    return [node for node in _iter_nodes(tree) if isinstance(node, str)]


def is_preterminal(tree: Tree) -> bool:
    """A node whose only child is a leaf."""
    return len(tree.children) == 1 and isinstance(tree.children[0], str)


def count_nodes(tree: Tree) -> TreeCounts:
    """Count all nodes of ``tree``: phrasal (incl. ROOT), preterminal and leaf nodes.

    Counts the tree as given; call :func:`normalize` first to compare parsers.
    """
    n_leaves = n_pre = n_phr = 0
    for node in _iter_nodes(tree):
        if isinstance(node, str):
            n_leaves += 1
        elif is_preterminal(node):
            n_pre += 1
        else:
            n_phr += 1
    return TreeCounts(n_leaves + n_pre + n_phr, n_leaves, n_phr, n_pre)


def _strip_none(tree: Tree, empty_label: str) -> Tree | None:
    kids: list[Tree | str] = []
    for kid in tree.children:
        if isinstance(kid, Tree):
            if kid.label == empty_label:
                continue
            kept = _strip_none(kid, empty_label)
            if kept is not None:
                kids.append(kept)
        else:
            kids.append(kid)
    if not kids:
        return None
    return Tree(tree.label, tuple(kids))


def _add_preterminals(tree: Tree, label_of) -> Tree:
    if is_preterminal(tree):
        return tree
    kids = tuple(Tree(label_of(kid), (kid,)) if isinstance(kid, str) else _add_preterminals(kid, label_of)
                 for kid in tree.children)
    return Tree(tree.label, kids)


def wrap_leaves(tree: Tree, label_of=None) -> Tree:
    """Give *every* leaf its own preterminal, even a phrase's only child.

    For parsers whose trees carry no part-of-speech nodes (link-grammar's
    ``(NP me)`` is a one-word phrase, not a preterminal), so that their trees count
    like Stanza's ``(NP (PRP me))``.
    """
    label_of = label_of or (lambda leaf: DEFAULT_PRETERMINAL)
    return Tree(tree.label, tuple(Tree(label_of(kid), (kid,)) if isinstance(kid, str)
                                  else wrap_leaves(kid, label_of) for kid in tree.children))


def normalize(tree: Tree, *, strip_empty: str | None = "-NONE-", root: str = ROOT,
              leaf_label=None) -> Tree | None:
    """Bring a tree to the counting convention (one ROOT, preterminals, no empty elements).

    ``leaf_label(leaf) -> str`` names the preterminal given to a bare leaf (default
    ``"X"``). Returns ``None`` when nothing is left (a tree of empty elements only).
    """
    if strip_empty is not None:
        if tree.label == strip_empty:
            return None
        tree = _strip_none(tree, strip_empty)  # type: ignore[assignment]
        if tree is None:
            return None
    tree = _add_preterminals(tree, leaf_label or (lambda leaf: DEFAULT_PRETERMINAL))
    if tree.label == root:
        return tree
    if tree.label == "":
        # the treebank's unlabelled outer bracket plays the role of ROOT
        return Tree(root, tree.children)
    return Tree(root, (tree,))


def flat_tree(tokens: list[str], label: str = DEFAULT_PRETERMINAL) -> Tree:
    """The fallback tree: ROOT directly over one preterminal per token (``1 + 2n`` nodes)."""
    return Tree(ROOT, tuple(Tree(label, (tok,)) for tok in tokens))
