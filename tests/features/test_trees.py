"""Penn bracket parsing, normalisation and node counting (incl. hypothesis properties)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcstats.errors import InputError
from mrcstats.features.trees import (
    ROOT,
    Tree,
    count_nodes,
    flat_tree,
    leaves,
    normalize,
    parse_brackets,
    parse_tree,
    to_brackets,
    wrap_leaves,
)

FOX = ("(ROOT (S (NP (DT The) (JJ quick) (JJ brown) (NN fox)) (VP (VBD jumped) (PP (IN over) "
       "(NP (DT the) (JJ lazy) (NN dog)))) (. .)))")
BOY = ("(ROOT (S (NP (DT The) (NN boy)) (VP (VBD saw) (NP (DT the) (NN man)) (PP (IN with) "
       "(NP (DT the) (NN telescope)))) (. .)))")


def test_seed_examples_count_exactly():
    fox = count_nodes(normalize(parse_tree(FOX)))
    assert (fox.nodes, fox.leaves, fox.preterminal, fox.phrasal) == (26, 10, 10, 6)
    assert fox.density_leaves == 2.6
    boy = count_nodes(normalize(parse_tree(BOY)))
    assert (boy.nodes, boy.leaves) == (25, 9)
    assert boy.density_leaves == 25 / 9


def test_treebank_unlabelled_root_and_empty_elements():
    gold = "( (S (NP-SBJ (-NONE- *-1)) (VP (VBD went) (NP (-NONE- *T*))) (. .)) )"
    t = normalize(parse_tree(gold))
    assert t.label == ROOT
    assert to_brackets(t) == "(ROOT (S (VP (VBD went)) (. .)))"
    assert count_nodes(t).nodes == 7


def test_only_empty_elements_gives_none():
    assert normalize(parse_tree("(-NONE- *)")) is None
    assert normalize(parse_tree("( (S (-NONE- *)) )")) is None


def test_link_grammar_style_tree_gets_preterminals_and_root():
    lg = "(S (NP the boy.n) (VP saw.v-d (NP me)) .)"
    t = normalize(wrap_leaves(parse_tree(lg)), strip_empty=None)
    c = count_nodes(t)
    # ROOT S NP VP NP = 5 phrasal, 5 preterminals, 5 leaves
    assert (c.phrasal, c.preterminal, c.leaves, c.nodes) == (5, 5, 5, 15)
    assert leaves(t) == ["the", "boy.n", "saw.v-d", "me", "."]


def test_bare_leaf_in_phrase_gets_preterminal():
    t = normalize(parse_tree("(ROOT (S (NP the dog) (VP (VBZ barks))))"))
    assert to_brackets(t) == "(ROOT (S (NP (X the) (X dog)) (VP (VBZ barks))))"


def test_several_trees_and_newlines():
    trees = parse_brackets(FOX + "\n\n" + BOY)
    assert len(trees) == 2
    assert sum(count_nodes(normalize(t)).nodes for t in trees) == 51


@pytest.mark.parametrize("bad", ["(S (NP x)", "(S x))", "word (S x)", "(S x) trailing"])
def test_malformed_brackets_raise_input_error(bad):
    with pytest.raises(InputError, match="bracket"):
        parse_brackets(bad)


def test_flat_tree_counts():
    c = count_nodes(flat_tree(["a", "b", "c"]))
    assert (c.nodes, c.leaves) == (7, 3)


# ---------------------------------------------------------------- properties
_label = st.sampled_from(["S", "NP", "VP", "PP", "SBAR", "ADJP", "NN", "DT", "-LRB-", "PRP$", "."])
_leaf = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Zs", "Cc", "Zl", "Zp"),
                                       blacklist_characters="()"), min_size=1, max_size=6)


def _trees(max_leaves: int = 25):
    return st.recursive(
        st.builds(lambda lab, w: Tree(lab, (w,)), _label, _leaf),
        lambda kids: st.builds(lambda lab, ch: Tree(lab, tuple(ch)), _label,
                               st.lists(st.one_of(kids, _leaf), min_size=1, max_size=4)),
        max_leaves=max_leaves)


@settings(max_examples=100, deadline=None)
@given(_trees())
def test_roundtrip_brackets(tree):
    assert parse_tree(to_brackets(tree)) == tree


@settings(max_examples=100, deadline=None)
@given(_trees())
def test_counts_add_up(tree):
    c = count_nodes(tree)
    assert c.nodes == c.phrasal + c.preterminal + c.leaves
    assert c.leaves == len(leaves(tree))
    assert c.preterminal <= c.leaves


@settings(max_examples=100, deadline=None)
@given(_trees())
def test_normalized_convention(tree):
    t = normalize(tree, strip_empty=None)
    c = count_nodes(t)
    assert t.label == ROOT
    assert c.preterminal == c.leaves  # every leaf under its own preterminal
    assert leaves(t) == leaves(tree)  # words and their order are kept
    assert normalize(t, strip_empty=None) == t  # idempotent
    assert c.nodes >= 2 * c.leaves + 1


@settings(max_examples=100, deadline=None)
@given(_trees(), st.integers(min_value=0, max_value=3))
def test_empty_elements_removed_everywhere(tree, k):
    def inject(t: Tree, depth: int) -> Tree:
        kids = list(t.children)
        if depth == 0:
            kids.append(Tree("-NONE-", ("*T*",)))
        return Tree(t.label, tuple(inject(c, depth - 1) if isinstance(c, Tree) else c for c in kids))

    with_none = inject(tree, k)
    assert normalize(with_none) == normalize(tree, strip_empty=None)
