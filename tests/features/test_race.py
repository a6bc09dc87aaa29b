"""RACE-h test split from the shared data: ids, token counts, wh-words; link-grammar on a few passages."""
from __future__ import annotations

import importlib.util
import json
import re

import nltk
import pandas as pd
import pytest

from mrcstats.features import compute_features, features, items_from_race

pytestmark = pytest.mark.shared


@pytest.fixture(scope="module")
def race_dir(shared_data):
    d = shared_data / "race_h_test"
    if not d.is_dir():
        pytest.skip(f"{d} not found")
    return d


def test_race_h_rows_ids_tokens_and_wh(race_dir):
    df = features(race_dir, parser="none", verbose=False)
    assert len(df) == 3498
    files = sorted(race_dir.glob("*.txt"))
    assert len(files) == 1045
    want_ids, questions = [], []
    for f in files:
        obj = json.loads(f.read_text(encoding="utf-8"))
        for i, q in enumerate(obj["questions"]):
            want_ids.append(f"{f.stem}:{i}")
            questions.append(q)
    assert list(df["item"]) == want_ids
    assert list(df["cluster"]) == [i.split(":")[0] for i in want_ids]
    assert df["cluster"].nunique() == 1045
    assert "high17038:0" in set(df["item"])
    assert list(df["tokens_question"]) == [len(nltk.word_tokenize(q, preserve_line=True)) for q in questions]
    rule = re.compile(r"\b(what|when|which|why|where|who|whom|whose|how)\b", re.IGNORECASE)
    assert list(df["wh_word"]) == [(m.group(1).lower() if (m := rule.search(q)) else "other") for q in questions]
    assert (df["tokens"] >= df["tokens_passage"] + df["tokens_question"]).all()
    assert df["scaled_tok"].mean() == pytest.approx(0, abs=1e-12)
    assert df["scaled_tok"].std(ddof=1) == pytest.approx(1)


@pytest.mark.skipif(importlib.util.find_spec("linkgrammar") is None, reason="linkgrammar not importable")
@pytest.mark.slow
def test_race_link_grammar_jobs_and_cache_give_identical_tables(race_dir, tmp_path):
    files = sorted(race_dir.glob("*.txt"))[:3]
    items = items_from_race(files)
    one = compute_features(items, parser="link-grammar", jobs=1, cache=tmp_path / "c", verbose=False)
    two = compute_features(items, parser="link-grammar", jobs=2, cache=tmp_path / "c2", verbose=False)
    pd.testing.assert_frame_equal(one.to_frame(), two.to_frame())
    again = compute_features(items, parser="link-grammar", jobs=2, cache=tmp_path / "c", verbose=False)
    assert again.parsed == 0 and again.cache_hits == one.texts
    pd.testing.assert_frame_equal(one.to_frame(), again.to_frame())
    df = one.frame
    assert df["density_leaves"].between(2.3, 3.6).all()  # plausible, Stanza-like values
    assert (df["leaves"] > 0).all() and (df["parse_fallbacks"] >= 0).all()
