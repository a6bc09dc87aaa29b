"""Masking generator (mrcstats.tasks.masking): content words only, k = round(n*MR/100), seeded."""
from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcstats.errors import InputError
from mrcstats.tasks.masking import (
    FUNCTION_WORDS,
    LMMeta,
    MetaInfo,
    build_prompt,
    lemmatize,
    mask_text,
    tag,
)

TEXT = ("Daryl Hall is suing his musical partner John Oates and has obtained a restraining order against him "
        "as part of the sealed lawsuit. The case between the US duo, who are the most commercially successful "
        "duo in the history of pop music, reportedly involves a contract. The recall cost X = 8,000 * NR "
        "is 95,040,000 yen.")
CODE = re.compile(r"<r(\d{3})>")


def test_k_is_round_n_mr_and_seeded():
    for rate in (0, 5, 20, 37.5, 50, 100):
        r = mask_text(TEXT, rate, seed=1, tagger="rules")
        assert r.k == round(r.n_candidates * rate / 100)
        assert len(r.table) == r.k
    a = mask_text(TEXT, 40, seed=11, tagger="rules")
    b = mask_text(TEXT, 40, seed=11, tagger="rules")
    c = mask_text(TEXT, 40, seed=12, tagger="rules")
    assert a.masked_text == b.masked_text
    assert a.masked_text != c.masked_text or a.k == 0
    full = mask_text(TEXT, 100, seed=0, tagger="rules")
    assert mask_text(TEXT, 0, seed=0, tagger="rules").masked_text == TEXT
    # codes are fixed per lemma across rates
    codes_full = dict(zip(full.table["lemma"], full.table["code"], strict=True))
    for lemma, code in zip(a.table["lemma"], a.table["code"], strict=True):
        assert codes_full[lemma] == code


def test_numbers_math_and_function_words_are_kept():
    r = mask_text(TEXT, 100, seed=0, tagger="rules")
    for kept in ("8,000", "95,040,000", "=", "*", " is ", " the ", " his ", " and "):
        assert kept in r.masked_text
    assert set(r.table["part_of_speech"]) <= {"NOUN", "PROPN", "VERB", "ADJ", "ADV"}
    for words in r.table["words"]:
        for w in words:
            assert w.lower() not in FUNCTION_WORDS or w.isupper()
    # all occurrences of a lemma share one code ("duo" twice)
    assert r.masked_text.count("duo") == 0
    r2 = mask_text(TEXT, 100, seed=0, tagger="rules", keep=["NR", "X"])
    assert "X = 8,000 * NR" in r2.masked_text


def test_metadata_table_and_prompt():
    r = mask_text(TEXT, 50, seed=3, tagger="rules")
    md = r.metadata().splitlines()
    assert md[0] == "part_of_speech | category | meaning | code"
    assert all(re.fullmatch(r"(NOUN|PROPN|VERB|ADJ|ADV) \| [^|]* \| [^|]* \| r\d{3}", line) for line in md[1:])
    assert {f"r{c}" for c in CODE.findall(r.masked_text)} == set(r.table["code"])
    p = build_prompt(r.masked_text, "Who is suing?", ["Hall", "Oates"], r.metadata())
    assert p.startswith("The following is a text and metadata related to the code terms within the text.")
    assert "## Instructions" in p and "## Text" in p and "## Question" in p and "## Metadata" in p
    assert "['1. Hall', '2. Oates']" in p
    d = r.to_dict()
    assert d["k"] == r.k and len(d["metadata"]) == r.k


class HalfMeta:
    """Gives a meaning to every other lemma."""

    def __call__(self, items, text):
        return {lem: MetaInfo(pos, "Cat", f"meaning of {lem}" if i % 2 == 0 else "")
                for i, (lem, pos, _) in enumerate(items)}


def test_conditions():
    reg = mask_text(TEXT, 100, "regular", seed=0, tagger="rules", meta=HalfMeta())
    strict = mask_text(TEXT, 100, "strict", seed=0, tagger="rules", meta=HalfMeta())
    part = mask_text(TEXT, 100, "partial", seed=0, tagger="rules", meta=HalfMeta())
    assert (strict.table["meaning"] == "").all()
    assert (reg.table["meaning"] != "").any()
    assert strict.masked_text == reg.masked_text
    # partial lifting: codes without a meaning are restored to the original word
    restored = part.table[~part.table["masked"]]
    assert len(restored) and (restored["meaning"] == "").all()
    for words in restored["words"]:
        assert all(w in part.masked_text for w in words)
    assert set(part.table[part.table["masked"]]["code"]) == {f"r{c}" for c in CODE.findall(part.masked_text)}
    # lenient: no verbs, nor words sharing a verb's lemma
    toks, _ = tag(TEXT, "rules")
    verb_lemmas = {t.lemma.lower() for t in toks if t.pos == "VERB"}
    len_ = mask_text(TEXT, 100, "lenient", seed=0, tagger="rules")
    assert not (set(len_.table["lemma"]) & verb_lemmas)
    assert "VERB" not in set(len_.table["part_of_speech"])
    assert len_.n_candidates < reg.n_candidates


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(sorted(FUNCTION_WORDS) + ["house", "river", "quickly", "green", "walked",
                                                          "London", "42", "+", "x", "."]),
                min_size=1, max_size=30),
       st.integers(0, 100), st.integers(0, 10**6), st.sampled_from(["regular", "strict", "lenient"]))
def test_function_words_numbers_never_masked(words, rate, seed, cond):
    text = " ".join(words)
    r = mask_text(text, rate, cond, seed=seed, tagger="rules")
    unmasked = CODE.sub(" ", r.masked_text).split()
    # every function word, number and symbol survives
    kept = [w for w in words if w.lower() in FUNCTION_WORDS or not w.isalpha() or len(w) == 1]
    for w in kept:
        assert w in unmasked
    assert r.k == round(r.n_candidates * rate / 100)
    assert len(set(CODE.findall(r.masked_text))) == r.k


def test_lemmatizer():
    assert lemmatize("obtained", "VERB") == "obtain"
    assert lemmatize("suing", "VERB") == "sue"
    assert lemmatize("stopped", "VERB") == "stop"
    assert lemmatize("parties", "NOUN") == "party"
    assert lemmatize("was", "AUX") == "be"
    assert lemmatize("London", "PROPN") == "London"


def test_linkgrammar_tagger_when_available():
    pytest.importorskip("linkgrammar", reason="link-grammar not importable (scripts/post_install.sh links it)")
    toks, used = tag("The quick brown fox jumps over the lazy dog.", "linkgrammar")
    assert used == "linkgrammar"
    pos = {t.text: t.pos for t in toks}
    assert pos["fox"] == "NOUN" and pos["jumps"] == "VERB" and pos["the"] == "DET"


def test_auto_tagger_always_works():
    toks, used = tag("A small test.", "auto")
    assert used in ("stanza", "linkgrammar", "rules") and toks


@dataclass
class _Outcome:
    status: str
    response: str | None


class _FakeClient:
    def __init__(self):
        self.payloads = []

    def complete(self, payload):
        self.payloads.append(payload)
        return _Outcome("ok", '{"word": "lawsuit", "part_of_speech": "NOUN", "category": "Legal", '
                              '"meaning": "court case"}\nnot json\n')


def test_lm_meta_hook_with_fake_client():
    client = _FakeClient()
    r = mask_text(TEXT, 100, "partial", seed=0, tagger="rules", meta=LMMeta(model="m", client=client))
    row = r.table[r.table["lemma"] == "lawsuit"].iloc[0]
    assert row["meaning"] == "court case" and row["category"] == "Legal" and row["masked"]
    # other lemmas got no meaning -> restored by partial lifting
    assert r.table["masked"].sum() == 1
    assert client.payloads[0]["model"] == "m"
    with pytest.raises(InputError, match="base_url"):
        LMMeta(model="m")._client()


def test_bad_arguments():
    with pytest.raises(InputError, match="0..100"):
        mask_text(TEXT, 120)
    with pytest.raises(InputError, match="condition"):
        mask_text(TEXT, 10, "loose")
    with pytest.raises(InputError, match="tagger"):
        tag(TEXT, "spacy")
