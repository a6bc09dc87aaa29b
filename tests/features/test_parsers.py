"""Parsers: link-grammar (skips when not importable), stanza (missing models, mocked), auto, cache."""
from __future__ import annotations

import importlib.util
import sys
import types

import pytest

from mrcstats.errors import DependencyError
from mrcstats.features.cache import ParseCache, cache_key
from mrcstats.features.parsers import ParsedText, ParserSpec, make_parser, resolve_parser
from mrcstats.features.trees import count_nodes, parse_tree

HAS_LG = importlib.util.find_spec("linkgrammar") is not None
needs_lg = pytest.mark.skipif(not HAS_LG, reason="linkgrammar not importable (apt-get install python3-link-grammar "
                                                  "link-grammar-dictionaries-en; bash scripts/post_install.sh)")


@pytest.fixture(scope="module")
def lg_parser():
    if not HAS_LG:
        pytest.skip("linkgrammar not importable")
    return make_parser(ParserSpec("link-grammar"))


@needs_lg
def test_linkgrammar_seed_sentence(lg_parser):
    r = lg_parser.parse_text("The quick brown fox jumped over the lazy dog.")
    assert (r.sentences, r.fallbacks, r.leaves) == (1, 0, 10)
    t = parse_tree(r.trees[0])
    c = count_nodes(t)
    assert t.label == "ROOT" and c.preterminal == c.leaves == 10
    assert c.nodes == r.nodes
    assert 2.3 < r.nodes / r.leaves < 3.5  # plausible, Stanza-like convention


@needs_lg
def test_linkgrammar_sentences_and_null_links(lg_parser):
    r = lg_parser.parse_text("Men lie eight times more about themselves than they do other people.\n"
                             "Truth about lying: lying's a cooperative act.")
    assert r.sentences == 2 and r.fallbacks == 0
    assert r.leaves >= 20


@needs_lg
def test_linkgrammar_null_links_then_flat_fallback(lg_parser):
    s = "Things seemed always to go from almost incredibly bad to worse."  # no linkage without nulls
    r = lg_parser.parse_text(s)
    assert r.fallbacks == 0 and r.sentences == 1
    strict_only = make_parser(ParserSpec("link-grammar", (("null_max_words", 0),)))
    r = strict_only.parse_text(s)
    assert r.fallbacks == 1 and r.sentences == 1
    assert r.nodes == 1 + 2 * r.leaves  # ROOT over one preterminal per NLTK token
    assert r.leaves == 12
    assert strict_only.version != lg_parser.version  # options are part of the cache key


@needs_lg
def test_linkgrammar_bounds_by_length_not_time(lg_parser):
    assert lg_parser.max_parse_time >= 30  # a safety net only: results must not depend on load
    s = "The cat sat on the mat."
    assert lg_parser.parse_text(s).fallbacks == 0
    short_only = make_parser(ParserSpec("link-grammar", (("strict_max_words", 3), ("null_max_words", 3))))
    r = short_only.parse_text(s)  # too long for either pass: flat, without parsing
    assert r.fallbacks == 1 and r.nodes == 1 + 2 * r.leaves
    assert short_only.version != lg_parser.version


@needs_lg
def test_linkgrammar_trees_keep_every_word(lg_parser):
    # link-grammar's constituent tree for this sentence's best linkage drops 10 of 11 words
    r = lg_parser.parse_text("One reason that many colleges adopt the website is to   _")
    assert r.leaves == 11


@needs_lg
def test_linkgrammar_is_quiet_on_stdout(capfd):
    make_parser(ParserSpec("link-grammar")).parse_text("A test.")
    assert capfd.readouterr().out == ""


@needs_lg
def test_linkgrammar_not_from_all_of_dist_packages():
    # only the linkgrammar package is exposed, not Debian's whole dist-packages
    assert not any(p.rstrip("/").endswith("dist-packages") and p.startswith("/usr/lib/python3")
                   for p in sys.path)


def test_linkgrammar_missing_module_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "linkgrammar", None)  # makes `import linkgrammar` fail
    with pytest.raises(DependencyError, match="python3-link-grammar"):
        make_parser(ParserSpec("link-grammar"))


def test_stanza_missing_models_names_download_command(tmp_path):
    with pytest.raises(DependencyError, match=r"mrcstats models download --dir .*nomodels"):
        make_parser(ParserSpec("stanza", (("models_dir", str(tmp_path / "nomodels")),)))


def _fake_models(d):
    (d / "en").mkdir(parents=True)
    (d / "resources.json").write_text('{"version": "1.0"}')
    for proc in ("tokenize", "pos", "constituency"):
        (d / "en" / proc).mkdir()
        (d / "en" / proc / "m.pt").write_bytes(b"")


def _fake_stanza(monkeypatch, trees):
    class Sent:
        def __init__(self, t):
            self.constituency = t

    class Pipeline:
        def __init__(self, **kw):
            self.kw = kw

        def __call__(self, text):
            return types.SimpleNamespace(sentences=[Sent(t) for t in trees])

    mod = types.SimpleNamespace(Pipeline=Pipeline, download=lambda *a, **k: None)
    monkeypatch.setitem(sys.modules, "stanza", mod)
    return mod


def test_stanza_parser_with_mocked_pipeline(tmp_path, monkeypatch):
    from mrcstats.features.parsers.stanza import models_present

    d = tmp_path / "res"
    _fake_models(d)
    assert models_present(d)
    fox = ("(ROOT (S (NP (DT The) (JJ quick) (JJ brown) (NN fox)) (VP (VBD jumped) (PP (IN over) "
           "(NP (DT the) (JJ lazy) (NN dog)))) (. .)))")
    _fake_stanza(monkeypatch, [fox, fox])
    from mrcstats.features.parsers import stanza as sp

    monkeypatch.setattr(sp, "_stanza_version", lambda: "0.0-test")
    p = make_parser(ParserSpec("stanza", (("models_dir", str(d)),)))
    r = p.parse_text("anything")
    assert (r.nodes, r.leaves, r.sentences) == (52, 20, 2)
    assert p.version.startswith("stanza 0.0-test; models 1.0 ")


def test_stanza_not_installed_error(tmp_path, monkeypatch):
    from mrcstats.features.parsers import stanza as sp

    d = tmp_path / "res"
    _fake_models(d)
    monkeypatch.setattr(sp, "_stanza_version", lambda: None)
    with pytest.raises(DependencyError, match=r"mrcstats\[stanza\]"):
        make_parser(ParserSpec("stanza", (("models_dir", str(d)),)))


def test_auto_prefers_stanza_when_models_present(tmp_path, monkeypatch, capsys):
    import importlib.util as iu

    d = tmp_path / "res"
    _fake_models(d)
    real = iu.find_spec
    monkeypatch.setattr(iu, "find_spec", lambda name, *a: object() if name == "stanza" else real(name, *a))
    assert resolve_parser("auto", models_dir=str(d)) == "stanza"
    assert "auto -> stanza" in capsys.readouterr().err
    if HAS_LG:
        assert resolve_parser("auto", models_dir=str(tmp_path / "none")) == "link-grammar"
        assert "auto -> link-grammar" in capsys.readouterr().err


def test_auto_without_any_parser(tmp_path, monkeypatch):
    import importlib.util as iu

    monkeypatch.setattr(iu, "find_spec", lambda name, *a: None)
    with pytest.raises(DependencyError, match="--parser none"):
        resolve_parser("auto", models_dir=str(tmp_path))


def test_models_download_wraps_stanza(tmp_path, monkeypatch):
    from mrcstats.features.parsers import stanza as sp

    calls = []
    mod = _fake_stanza(monkeypatch, [])
    mod.download = lambda lang, model_dir, **kw: (calls.append((lang, model_dir, kw)), _fake_models(tmp_path / "m"))
    assert sp.download_models(tmp_path / "m") == tmp_path / "m"
    assert calls[0][0] == "en" and calls[0][2]["processors"] == "tokenize,pos,constituency"

    def boom(*a, **k):
        raise ConnectionError("no network")

    mod.download = boom
    with pytest.raises(DependencyError, match="no network"):
        sp.download_models(tmp_path / "other")


def test_cache_roundtrip_and_key(tmp_path):
    c = ParseCache(tmp_path, "link-grammar", "v1")
    k = c.key("Some text.")
    assert k == cache_key("link-grammar", "v1", "Some text.")
    assert k != cache_key("link-grammar", "v2", "Some text.") != cache_key("stanza", "v1", "Some text.")
    assert c.get(k) is None
    p = ParsedText(7, 3, 1, 0, ("(ROOT (X a) (X b) (X c))",))
    c.put(k, p)
    assert c.get(k) == p
    # a torn/corrupt entry is a miss, not an error
    path = next(tmp_path.rglob(f"{k}.json"))
    path.write_text("{not json")
    assert c.get(k) is None
    assert not [q for q in tmp_path.rglob("*.tmp")]
