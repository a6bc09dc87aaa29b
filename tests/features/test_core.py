"""features(): columns, tokens, wh-words, scaling (vs R), trees parser, cache, order, skips."""
from __future__ import annotations

import json
import math
import subprocess

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcstats.errors import InputError
from mrcstats.features import compute_features, feature_columns, features, items_from_frame, scale
from mrcstats.features.items import parse_options
from mrcstats.features.parsers import ParsedText
from mrcstats.features.tokens import count_tokens, split_sentences
from mrcstats.features.wh import wh_word, wh_word_clause

FOX = ("(ROOT (S (NP (DT The) (JJ quick) (JJ brown) (NN fox)) (VP (VBD jumped) (PP (IN over) "
       "(NP (DT the) (JJ lazy) (NN dog)))) (. .)))")
BOY = ("(ROOT (S (NP (DT The) (NN boy)) (VP (VBD saw) (NP (DT the) (NN man)) (PP (IN with) "
       "(NP (DT the) (NN telescope)))) (. .)))")


def _log() -> pd.DataFrame:
    rows = []
    for model in ("m1", "m2"):
        rows += [
            {"model": model, "item": "a", "cluster": "p1", "passage": "The cat sat. It was happy.",
             "question": "According to the text, what did the cat do?", "options": '["sat", "ran", "slept"]'},
            {"model": model, "item": "b", "cluster": "p1", "passage": "The cat sat. It was happy.",
             "question": "The cat was   _  .", "options": "happy\nsad"},
            {"model": model, "item": "c", "cluster": "p2", "passage": "Dogs bark loudly at night.",
             "question": "Why do dogs bark?", "options": ["fear", "joy"]},
        ]
    return pd.DataFrame(rows)


def test_none_parser_columns_tokens_and_wh():
    df = features(_log(), parser="none", verbose=False)
    assert list(df.columns) == feature_columns(syntax=False)
    assert list(df["item"]) == ["a", "b", "c"]
    assert list(df["cluster"]) == ["p1", "p1", "p2"]
    assert list(df["wh_word"]) == ["what", "other", "why"]
    assert list(df["wh_word_clause"]) == ["what", "other", "why"]
    q = "According to the text, what did the cat do?"
    assert df.loc[0, "tokens_question"] == len(__import__("nltk").word_tokenize(q, preserve_line=True))
    whole = "The cat sat. It was happy.\n" + q + "\nsat\nran\nslept"
    assert df.loc[0, "tokens"] == count_tokens(whole)
    assert df.loc[0, "tokens_options"] == 3
    assert df.loc[1, "tokens_options"] == 2


class FakeParser:
    """Counts: one sentence per text, nodes = 3 * words (deterministic, no dependencies)."""

    name = "fake"
    version = "1"

    def parse_text(self, text: str) -> ParsedText:
        n = len(text.split())
        return ParsedText(3 * n + 1, n, 1, int("fallback" in text))


@pytest.fixture
def fake_parser(monkeypatch):
    from mrcstats.features import core

    monkeypatch.setattr(core, "make_parser", lambda spec: FakeParser())
    monkeypatch.setattr(core, "resolve_parser", lambda name, **kw: "link-grammar")
    return FakeParser


def test_syntax_columns_sum_over_pieces(fake_parser, tmp_path):
    res = compute_features(_log(), parser="link-grammar", cache=tmp_path / "c", verbose=False)
    df = res.frame
    assert list(df.columns) == feature_columns()
    a = df.iloc[0]
    # passage 6 words, question 8 words, options 1 word each (three units)
    assert a["nodes_passage"] == 19 and a["leaves_passage"] == 6
    assert a["nodes_options"] == 3 * 4 and a["leaves_options"] == 3
    assert a["nodes"] == a["nodes_passage"] + a["nodes_question"] + a["nodes_options"]
    assert a["density"] == a["nodes"] / a["tokens"]
    assert a["density_leaves"] == a["nodes"] / a["leaves"]
    assert a["density_question"] == a["nodes_question"] / a["tokens_question"]
    # the passage text is shared by a and b: parsed once
    assert res.texts == res.parsed == 12
    again = compute_features(_log(), parser="link-grammar", cache=tmp_path / "c", verbose=False)
    assert (again.parsed, again.cache_hits) == (0, 12)
    pd.testing.assert_frame_equal(again.to_frame(), res.to_frame())
    assert again.to_frame().attrs == res.to_frame().attrs


def test_parse_fallbacks_counted(fake_parser):
    log = _log()
    log.loc[log["item"] == "c", "passage"] = "a fallback sentence"
    df = features(log, parser="link-grammar", verbose=False)
    assert list(df["parse_fallbacks"]) == [0, 0, 1]


def test_scaled_matches_definition(fake_parser):
    df = features(_log(), parser="link-grammar", verbose=False)
    x = df["tokens"].astype(float)
    np.testing.assert_allclose(df["scaled_tok"], (x - x.mean()) / x.std(ddof=1))
    d = df["density"]
    np.testing.assert_allclose(df["scaled_con"], (d - d.mean()) / d.std(ddof=1))


def test_scale_agrees_with_r(rscript):
    x = [164.0, 893.0, 420.5, float("nan"), 300.0, 512.0]
    r_vec = "c(" + ",".join("NA" if math.isnan(v) else repr(v) for v in x) + ")"
    out = subprocess.run([rscript, "-e", f"cat(sprintf('%.17g', as.vector(scale({r_vec}))), sep='\\n')"],
                         capture_output=True, text=True, check=True).stdout.split()
    want = [float("nan") if v == "NA" else float(v) for v in out]
    np.testing.assert_allclose(scale(x), want, rtol=1e-14, equal_nan=True)


def test_scale_degenerate():
    assert np.isnan(scale([1.0])).all()
    assert np.isnan(scale([2.0, 2.0, 2.0])).all()


def test_trees_parser_seed_examples(tmp_path):
    p = tmp_path / "trees.csv"
    pd.DataFrame({"item": ["fox", "boy"], "tree": [FOX, BOY]}).to_csv(p, index=False)
    df = features(str(p), parser="trees", verbose=False)
    assert list(df["density_leaves"]) == [2.6, 25 / 9]
    assert list(df["nodes"]) == [26, 25] and list(df["leaves"]) == [10, 9]
    assert list(df["tokens"]) == [10, 9]  # tokens come from the leaves


def test_trees_parser_pieces_and_question_from_leaves():
    q = "(ROOT (SBARQ (WHNP (WP What)) (SQ (VBD happened)) (. ?)))"
    df = features(pd.DataFrame({"item": ["x"], "tree_passage": [FOX + " " + BOY], "tree_question": [q]}),
                  parser="trees", verbose=False)
    row = df.iloc[0]
    assert row["nodes_passage"] == 51 and row["leaves_passage"] == 19
    assert row["nodes"] == 51 + 10 and row["tokens"] == 19 + 3
    assert row["wh_word"] == "what"
    assert pd.isna(row["tokens_options"])


def test_trees_parser_needs_trees_and_reports_bad_ones():
    with pytest.raises(InputError, match="no tree"):
        features(pd.DataFrame({"item": ["x"], "question": ["Why?"]}), parser="trees", verbose=False)
    with pytest.raises(InputError, match="item 'x', column 'tree'"):
        features(pd.DataFrame({"item": ["x"], "tree": ["(S (NP x)"]}), parser="trees", verbose=False)


def test_empty_and_undecodable_items_skipped_with_count():
    log = pd.DataFrame({"item": ["ok", "empty", "bad"], "question": ["What is it?", "   ", "bad \udc80 text"]},
                       dtype=object)
    with pytest.warns(UserWarning, match="1 empty text.*1 undecodable text"):
        res = compute_features(log, parser="none", verbose=False)
    assert list(res.frame["item"]) == ["ok"]
    assert res.skipped == {"empty text": 1, "undecodable text": 1}


def test_bad_inputs_raise_one_clear_error():
    with pytest.raises(InputError, match="no 'item' column"):
        features(pd.DataFrame({"question": ["x"]}), parser="none")
    with pytest.raises(InputError, match="no text columns"):
        features(pd.DataFrame({"item": ["x"], "correct": [True]}), parser="none")
    with pytest.raises(InputError, match="unknown parser"):
        features(_log(), parser="spacy")
    with pytest.raises(InputError, match="jobs"):
        features(_log(), parser="none", jobs=0)


def test_items_from_frame_first_text_wins_and_order():
    log = pd.DataFrame({"item": ["b", "a", "b"], "question": [None, "Q a", "Q b"]})
    its = items_from_frame(log)
    assert [(i.item, i.question) for i in its.items] == [("b", "Q b"), ("a", "Q a")]


@pytest.mark.parametrize("value,want", [
    (["x", "y"], ("x", "y")), ('["x", "y"]', ("x", "y")), ("['x', 'y']", ("x", "y")),
    ("x\ny\n", ("x", "y")), ("just one", ("just one",)), (None, None), (float("nan"), None),
    (np.array(["x"]), ("x",)),
])
def test_parse_options(value, want):
    assert parse_options(value) == want


def test_sentences_split_at_newlines_without_data():
    assert split_sentences("First one. Second one.\nThird without stop\n\n  Fourth?  ") == [
        "First one.", "Second one.", "Third without stop", "Fourth?"]


@pytest.mark.parametrize("q,rule,clause", [
    ("What does the author mainly intend to tell us?", "what", "what"),
    ("According to the passage, which of the following is TRUE?", "which", "which"),
    ("In which year did she leave?", "which", "which"),
    ("The writer tells us how to cook rice.", "how", "other"),
    ("In the journey, the author was most disappointed at seeing   _  .", "other", "other"),
    ("WHO wrote it?", "who", "who"),
    ("Somewhat odd, whatever.", "other", "other"),
])
def test_wh_words(q, rule, clause):
    assert wh_word(q) == rule
    assert wh_word_clause(q) == clause


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_wh_word_is_first_match_or_other(q):
    import re

    got = wh_word(q)
    m = re.search(r"\b(what|when|which|why|where|who|whom|whose|how)\b", q, re.IGNORECASE)
    assert got == (m.group(1).lower() if m else "other")
    assert wh_word_clause(q) in {"what", "when", "which", "why", "where", "who", "whom", "whose", "how", "other"}


def test_json_roundtrip_of_result(fake_parser):
    res = compute_features(_log(), parser="link-grammar", verbose=False)
    from mrcstats._jsonout import dumps

    d = json.loads(dumps(res.to_dict()))
    assert d["items"] == 3 and d["columns"] == feature_columns()
    assert "3 items" in res.summary()


def test_top_level_features_callable_after_submodule_import():
    import mrcstats
    from mrcstats.features import items_from_race  # noqa: F401  binds mrcstats.features to the subpackage

    df = mrcstats.features(pd.DataFrame({"item": ["a"], "question": ["Whose idea?"]}), parser="none")
    assert df["wh_word"].tolist() == ["whose"]


def test_sentence_split_keeps_titles_and_company_abbreviations():
    assert split_sentences("Mr. Vinken is chairman of Elsevier N.V., the Dutch group. Lorillard Inc., "
                           "a unit of Loews Corp. that makes cigarettes, stopped. Dr. Smith said no. Then he left.") == [
        "Mr. Vinken is chairman of Elsevier N.V., the Dutch group.",
        "Lorillard Inc., a unit of Loews Corp. that makes cigarettes, stopped.",
        "Dr. Smith said no.", "Then he left."]
