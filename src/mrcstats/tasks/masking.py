"""Masking generator for MskQA / MskCal (Sato & Matsuzaki, seed ``000_c27602a462156830``, sections 2.2 and 3).

Steps (seed section 2.2):

1. **Morpheme list.** Tag the text and keep the content words -- NOUN, PROPN, VERB,
   ADJ, ADV -- never function words (determiners, pronouns, prepositions,
   conjunctions, auxiliaries, modals, particles, numerals: a closed-class lexicon
   overrides any tagger). Tokens holding digits or math symbols and
   one-letter variables are kept as they are (the AQuA and MskCal settings). The
   list holds *unique lemmas*; it is the base of the masking rate.
2. **Sampling.** ``k = round(n * MR / 100)`` lemmas (Python ``round``, half to
   even) are drawn with ``random.Random(seed).sample`` from the n maskable lemmas.
3. **Codes and meta-information.** Every lemma of the list has a fixed code
   ``r001``, ``r002``, ... in order of first appearance (so a word keeps its code
   across masking rates, as in the maskcode outputs); each occurrence of a drawn
   lemma becomes ``<r0NN>``. A pluggable meta-information generator gives each
   code a category and a meaning: :class:`RuleMeta` (offline: part of speech and
   a coarse category, no meaning) or :class:`LMMeta` (an LM through
   :func:`mrcstats.query.lm_meta`, which passes the query client in).

Conditions (seed section 3):

* ``regular``  -- codes keep whatever meta-information the generator produced
  (codes without a meaning are "solid" masks);
* ``partial``  -- partial lifting: codes whose meaning is missing are restored to
  the original word (with :class:`RuleMeta`, which gives no meanings, that is all of them);
* ``strict``   -- meaning blanked for every code (part of speech and category kept);
* ``lenient``  -- verbs are never masked, nor words sharing a verb's lemma; the
  masking rate counts the remaining lemmas.

POS tagging (``tagger``): ``stanza`` when the package and its English models are
installed; ``linkgrammar`` (the Debian link-grammar parser, whose dictionary
subscripts ``.n .v .a .e`` give the part of speech) when importable; otherwise
``rules``, a lexicon-and-suffix tagger that needs no data. The closed-class
lexicon always decides what is a function word. Lemmas come from Stanza, or from
a small rule-based lemmatiser (irregular verbs, -s/-es/-ies/-ed/-ing).
"""
from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import pandas as pd

from mrcstats._repr import Result
from mrcstats.errors import DependencyError, InputError

__all__ = ["CONDITIONS", "CONTENT_POS", "LMMeta", "MaskResult", "MetaInfo", "RuleMeta", "Token",
           "build_prompt", "lemmatize", "mask_text", "tag"]

CONTENT_POS = ("NOUN", "PROPN", "VERB", "ADJ", "ADV")
CONDITIONS = ("regular", "partial", "strict", "lenient")

# ----------------------------------------------------------------------------- lexicon
_FUNCTION = {
    "DET": "a an the this that these those each every either neither some any no all both another such what "
           "whatever which whichever whose",
    "PRON": "i me my mine myself you your yours yourself yourselves he him his himself she her hers herself it "
            "its itself we us our ours ourselves they them their theirs themselves one ones who whom whoever "
            "someone somebody something anyone anybody anything everyone everybody everything nobody nothing "
            "none",
    "ADP": "of in on at by for with about against between into through during before after above below to from "
           "up down over under again further off out per via within without upon onto toward towards among "
           "amongst across along around behind beside besides beyond despite except inside outside near like "
           "unlike since until till throughout versus than as",
    "CCONJ": "and or but nor yet so plus",
    "SCONJ": "if because although though while whereas unless whether that when where why how whenever "
             "wherever once",
    "AUX": "be am is are was were been being have has had having do does did doing done will would shall should "
           "can could may might must ought 's 're 've 'd 'll 'm ca wo",
    "PART": "not n't 't to",
    "ADV_F": "there here then also very too just only even still already not never always often however thus "
             "therefore hence",
    "NUM": "zero one two three four five six seven eight nine ten eleven twelve hundred thousand million billion",
}
FUNCTION_WORDS: dict[str, str] = {w: pos for pos, ws in _FUNCTION.items() for w in ws.split()}

_IRREGULAR = {
    "was": "be", "were": "be", "is": "be", "are": "be", "am": "be", "been": "be", "being": "be",
    "has": "have", "had": "have", "having": "have", "did": "do", "does": "do", "done": "do",
    "went": "go", "gone": "go", "said": "say", "made": "make", "took": "take", "taken": "take", "got": "get",
    "gotten": "get", "gave": "give", "given": "give", "came": "come", "saw": "see", "seen": "see",
    "knew": "know", "known": "know", "found": "find", "told": "tell", "thought": "think", "became": "become",
    "left": "leave", "felt": "feel", "brought": "bring", "began": "begin", "begun": "begin", "kept": "keep",
    "held": "hold", "wrote": "write", "written": "write", "stood": "stand", "heard": "hear", "meant": "mean",
    "met": "meet", "ran": "run", "paid": "pay", "sat": "sit", "spoke": "speak", "spoken": "speak",
    "led": "lead", "grew": "grow", "grown": "grow", "lost": "lose", "fell": "fall", "fallen": "fall",
    "sent": "send", "built": "build", "understood": "understand", "drew": "draw", "drawn": "draw",
    "broke": "break", "broken": "break", "spent": "spend", "won": "win", "sold": "sell", "bought": "buy",
    "chose": "choose", "chosen": "choose", "sought": "seek", "taught": "teach", "caught": "catch",
    "fought": "fight", "threw": "throw", "thrown": "throw", "drove": "drive", "driven": "drive",
    "rose": "rise", "risen": "rise", "ate": "eat", "eaten": "eat", "wore": "wear", "worn": "wear",
    "children": "child", "men": "man", "women": "woman", "people": "people", "feet": "foot", "teeth": "tooth",
    "mice": "mouse", "data": "data", "news": "news", "series": "series", "better": "good", "best": "good",
    "worse": "bad", "worst": "bad",
}
_VERB_WORDS = """say make take get give come see know find tell think become leave feel bring begin keep hold write
stand hear mean meet run pay sit speak lead grow lose fall send build understand draw break spend
win sell buy choose go use want need try call ask work seem show turn start play move live believe
happen include continue set learn change follow stop create open walk offer remember love consider
appear wait serve die expect stay reach kill remain suggest raise pass require report decide pull
announce obtain sue involve claim touch drop suspend calculate determine answer establish elect
explain declare dissolve assume entitle respect"""
_VERBS = frozenset(_VERB_WORDS.split())
_NOUN_SUF = ("tion", "sion", "ment", "ness", "ity", "ance", "ence", "ship", "hood", "ism", "ist", "er", "or",
             "age", "ery", "dom", "ure", "cy")
_ADJ_SUF = ("ous", "ful", "ive", "able", "ible", "al", "ic", "less", "ish", "ary", "ant", "ent", "est", "ian")
#: stems that drop a final e before -ing/-ed (making -> make, involved -> involve)
_E_ENDINGS = ("v", "c", "z", "at", "iz", "ur", "bl", "pl", "dg", "uc", "ag", "os", "as", "ut", "id", "ar")
_TOKEN = re.compile(r"[A-Za-z]+(?=n['’]t\b)|n['’]t\b|['’](?:ll|re|ve|s|d|m|t)\b|[A-Za-z]+(?:-[A-Za-z]+)*"
                    r"|\d+(?:[.,]\d+)*|\S")
_MATH = re.compile(r"[\d+\-*/=<>^%√∑∫×÷±≈≠≤≥()\[\]{}]")


@dataclass(frozen=True)
class Token:
    """One token with its character span, universal POS tag and lemma."""

    text: str
    start: int
    end: int
    pos: str
    lemma: str


# ----------------------------------------------------------------------------- lemmas and tagging
def lemmatize(word: str, pos: str) -> str:
    """Rule-based English lemma (irregular forms, then -ies/-es/-s, -ied/-ed, -ing).

    >>> lemmatize("obtained", "VERB"), lemmatize("parties", "NOUN"), lemmatize("running", "VERB")
    ('obtain', 'party', 'run')
    """
    w = word.lower().replace("’", "'")
    if pos == "PROPN":
        return word
    if w in _IRREGULAR:
        return _IRREGULAR[w]
    if pos in ("NOUN", "VERB"):
        if len(w) > 4 and w.endswith("ies"):
            return w[:-3] + "y"
        if len(w) > 4 and w.endswith(("sses", "shes", "ches", "xes", "zes")):
            return w[:-2]
        if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is", "ous")):
            return w[:-1]
    if pos == "VERB":
        for suf in ("ing", "ed"):
            if len(w) > len(suf) + 1 and w.endswith(suf):
                stem = w[: -len(suf)]
                if suf == "ed" and stem.endswith("i"):
                    return stem[:-1] + "y"
                if len(stem) > 2 and stem[-1] == stem[-2] and stem[-1] not in "lsz":
                    return stem[:-1]
                if stem in _VERBS:
                    return stem
                if stem + "e" in _VERBS or stem.endswith(_E_ENDINGS):
                    return stem + "e"
                return stem
    return w


def _rule_pos(words: Sequence[str], i: int, sent_start: bool) -> str:
    w = words[i]
    lw = w.lower().replace("’", "'")
    if lw in FUNCTION_WORDS and not (w.isupper() and len(w) > 1):
        return FUNCTION_WORDS[lw]
    if w.isupper() and len(w) > 1 and w.isalpha():
        return "PROPN"
    if not re.fullmatch(r"[A-Za-z][A-Za-z'’-]*", w):
        return "NUM" if re.fullmatch(r"\d+(?:[.,]\d+)*", w) else ("PUNCT" if not w[0].isalnum() else "X")
    prev = words[i - 1].lower() if i else ""
    if w[0].isupper() and not sent_start:
        return "PROPN"
    if lw.endswith("ly") and len(lw) > 4:
        return "ADV"
    if lemmatize(lw, "VERB") in _VERBS or lw in _VERBS:
        if prev in ("the", "a", "an") and lw in _VERBS:
            return "NOUN"
        return "VERB"
    if prev in ("to", "will", "would", "can", "could", "should", "may", "might", "must", "not", "did", "do",
                "does"):
        return "VERB"
    if lw.endswith(("ing", "ed")) and prev in FUNCTION_WORDS and FUNCTION_WORDS[prev] in ("AUX", "PRON"):
        return "VERB"
    if lw.endswith(_ADJ_SUF) and not lw.endswith(_NOUN_SUF[:8]):
        return "ADJ"
    return "NOUN"


def _tokens(text: str) -> list[tuple[str, int, int]]:
    return [(m.group(0), m.start(), m.end()) for m in _TOKEN.finditer(text)]


def _sent_starts(toks: list[tuple[str, int, int]]) -> list[bool]:
    out, start = [], True
    for w, _, _ in toks:
        out.append(start)
        start = w in (".", "!", "?", ":", "\n") or (start and not w[0].isalnum())
    return out


def _tag_rules(text: str) -> list[Token]:
    toks = _tokens(text)
    words = [w for w, _, _ in toks]
    starts = _sent_starts(toks)
    out = []
    for i, (w, s, e) in enumerate(toks):
        pos = _rule_pos(words, i, starts[i])
        out.append(Token(w, s, e, pos, lemmatize(w, pos)))
    return out


_LG: dict[str, Any] = {}


def _quiet(f: Callable[[], Any]) -> Any:
    """Run ``f`` with file descriptors 1 and 2 silenced (link-grammar prints locale notes from C)."""
    import os
    import sys

    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            os.dup2(null.fileno(), 2)
            return f()
    finally:
        for fd, old in zip((1, 2), saved):
            os.dup2(old, fd)
            os.close(old)


#: link-grammar POS pass: longest sentence parsed, most null links allowed (deterministic bounds)
_LG_MAX_WORDS = 38
_LG_MAX_NULLS = 8

_LG_POS = {"n": "NOUN", "s": "NOUN", "p": "NOUN", "g": "NOUN", "v": "VERB", "w": "VERB", "q": "VERB",
           "a": "ADJ", "e": "ADV", "b": "PROPN", "m": "PROPN", "f": "PROPN", "l": "PROPN", "t": "PROPN"}


def _tag_linkgrammar(text: str) -> list[Token]:
    try:
        import linkgrammar as lg
    except ImportError as exc:
        raise DependencyError("link-grammar is not importable (apt-get install python3-link-grammar; "
                              "scripts/post_install.sh links it into the venv)") from exc
    base = _tag_rules(text)
    if "en" not in _LG:
        import atexit

        _LG["en"] = _quiet(lambda: lg.Dictionary("en"))
        atexit.register(_LG.clear)  # free it before the interpreter tears the module down
    d = _LG["en"]
    out: list[Token] = []
    # parse sentence by sentence; align linkage words to our tokens in order
    sent: list[Token] = []

    def flush() -> None:
        if not sent:
            return
        words = " ".join(t.text for t in sent)
        tags: list[str | None] = [None] * len(sent)
        # Bounded by sentence length and null links, not by wall-clock time, so tags never depend
        # on machine load (the limits of mrcstats.features.parsers.linkgrammar; 30 s is only a
        # safety net): longer sentences keep their rule-based tags.
        lk = None
        if len(sent) <= _LG_MAX_WORDS:
            po = lg.ParseOptions(verbosity=0, max_parse_time=30, linkage_limit=100, min_null_count=0,
                                 max_null_count=min(len(sent), _LG_MAX_NULLS))
            try:
                linkages = lg.Sentence(words, d, po).parse()
                lk = next(iter(linkages), None)
            except Exception:  # noqa: BLE001 - the parser's own errors; fall back to rules
                lk = None
        if lk is not None:
            j = 0
            for lw in list(lk.words())[1:-1]:
                if lw.startswith("[") and lw.endswith("]"):  # a null-linked word: no tag
                    surface, sub = lw[1:-1], None
                else:
                    m = re.match(r"^(.*?)(?:\[[^\]]*\])?(?:\.([a-z])[^ ]*)?$", lw)
                    surface, sub = (m.group(1), m.group(2)) if m else (lw, None)
                hit = next((k for k in range(j, min(j + 3, len(sent)))
                            if sent[k].text.lower() == surface.lower()
                            or (surface and surface.lower().startswith(sent[k].text.lower()))), None)
                if hit is None:
                    continue
                j = hit
                tok = sent[j].text
                if sub in _LG_POS:
                    g = _LG_POS[sub]
                    tags[j] = g if g != "PROPN" or tok[0].isupper() else "NOUN"
                elif "CAPITALIZED-WORDS" in lw:
                    tags[j] = "PROPN"
                j += 1
        for t, g in zip(sent, tags):
            if t.pos not in CONTENT_POS + ("X",) or g is None or not t.text[0].isalpha():
                out.append(t)
            else:
                out.append(Token(t.text, t.start, t.end, g, lemmatize(t.text, g)))
        sent.clear()

    for t in base:
        sent.append(t)
        if t.text in (".", "!", "?") or text[t.end: t.end + 1] == "\n":
            flush()
    flush()
    return out


_STANZA: dict[str, Any] = {}


def _tag_stanza(text: str) -> list[Token]:
    try:
        import stanza
    except ImportError as exc:
        raise DependencyError("stanza is not installed (pip install 'mrcstats[stanza]')") from exc
    if "en" not in _STANZA:
        try:
            _STANZA["en"] = stanza.Pipeline("en", processors="tokenize,pos,lemma", download_method=None,
                                            verbose=False)
        except Exception as exc:
            raise DependencyError(f"stanza English models are not installed ({exc}); "
                                  "run `mrcstats models download` or use --tagger rules") from exc
    doc = _STANZA["en"](text)
    out = []
    for s in doc.sentences:
        for w in s.words:
            tok = w.parent
            pos = w.upos
            if w.text.lower() in FUNCTION_WORDS and pos in CONTENT_POS:
                pos = FUNCTION_WORDS[w.text.lower()]
            out.append(Token(w.text, tok.start_char, tok.end_char, pos, w.lemma or w.text))
    return out


def tag(text: str, tagger: str = "auto") -> tuple[list[Token], str]:
    """POS-tag ``text``; returns the tokens and the name of the tagger used.

    ``auto`` tries ``stanza`` (package and English models installed), then
    ``linkgrammar``, then ``rules`` (always available, no data needed).
    """
    if tagger not in ("auto", "stanza", "linkgrammar", "rules"):
        raise InputError(f"tagger must be auto, stanza, linkgrammar or rules, got {tagger!r}")
    if tagger == "auto":
        for name, f in (("stanza", _tag_stanza), ("linkgrammar", _tag_linkgrammar)):
            try:
                return f(text), name
            except DependencyError:
                continue
        return _tag_rules(text), "rules"
    f = {"stanza": _tag_stanza, "linkgrammar": _tag_linkgrammar, "rules": _tag_rules}[tagger]
    return f(text), tagger


# ----------------------------------------------------------------------------- meta-information
@dataclass(frozen=True)
class MetaInfo:
    """Meta-information of one masked lemma (one row of the metadata table)."""

    part_of_speech: str
    category: str = ""
    meaning: str = ""


class MetaGenerator(Protocol):
    """Anything that maps ``[(lemma, pos, words)]`` and the text to ``{lemma: MetaInfo}``."""

    def __call__(self, items: Sequence[tuple[str, str, tuple[str, ...]]], text: str) -> dict[str, MetaInfo]: ...


class RuleMeta:
    """Offline meta-information: part of speech and a coarse category, no meaning."""

    def __call__(self, items: Sequence[tuple[str, str, tuple[str, ...]]], text: str) -> dict[str, MetaInfo]:
        return {lemma: MetaInfo(pos, _category(lemma, pos), "") for lemma, pos, _ in items}


def _category(lemma: str, pos: str) -> str:
    lw = lemma.lower()
    if pos == "PROPN":
        return "Proper Name"
    if pos == "NOUN":
        if lw.endswith(("er", "or", "ist", "ian", "ant")):
            return "Person or Agent"
        if lw.endswith(_NOUN_SUF[:12]):
            return "Abstract Concept"
        return "Entity"
    if pos == "ADJ":
        return "Attribute"
    if pos == "ADV":
        return "Manner or Degree"
    return ""


_LM_PROMPT = """For each word below, give its part of speech, a coarse category and a short abstract meaning \
that does not repeat the word, as used in the text. Answer with one JSON object per line: \
{{"word": str, "part_of_speech": str, "category": str, "meaning": str}}.

## Text
{text}

## Words
{words}"""


@dataclass
class LMMeta:
    """Meta-information from a language model (a thin optional hook).

    ``client`` is anything with ``complete(payload) -> outcome`` where
    ``outcome.status == "ok"`` and ``outcome.response`` is the text;
    :func:`mrcstats.query.lm_meta` builds one with the query adapter's
    :class:`~mrcstats.query.client.ChatClient` for an OpenAI-compatible endpoint
    (``tasks`` never imports ``query``: the client is passed in).
    Words the model leaves out keep the rule-based part of speech and category
    with no meaning (so partial lifting restores them).
    """

    model: str
    client: Any = None
    temperature: float = 0.0
    fallback: RuleMeta = field(default_factory=RuleMeta)

    def _client(self) -> Any:
        if self.client is None:
            raise InputError("LMMeta needs a client; for an OpenAI-compatible endpoint build it with "
                             "mrcstats.query.lm_meta(model, base_url=..., api_key=...)")
        return self.client

    def __call__(self, items: Sequence[tuple[str, str, tuple[str, ...]]], text: str) -> dict[str, MetaInfo]:
        out = self.fallback(items, text)
        if not items:
            return out
        prompt = _LM_PROMPT.format(text=text, words="\n".join(f"- {words[0]}" for _, _, words in items))
        payload = {"model": self.model, "temperature": self.temperature,
                   "messages": [{"role": "user", "content": prompt}]}
        res = self._client().complete(payload)
        if getattr(res, "status", "failed") != "ok" or not getattr(res, "response", None):
            return out
        by_word = {w.lower(): lemma for lemma, _, words in items for w in words}
        for line in str(res.response).splitlines():
            line = line.strip().rstrip(",")
            if not line.startswith("{"):
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            lemma = by_word.get(str(rec.get("word", "")).lower())
            if lemma is None:
                continue
            pos = str(rec.get("part_of_speech") or out[lemma].part_of_speech)
            out[lemma] = MetaInfo(pos, str(rec.get("category") or ""), str(rec.get("meaning") or ""))
        return out


# ----------------------------------------------------------------------------- masking
@dataclass(frozen=True, repr=False)
class MaskResult(Result):
    """A masked text and its metadata table.

    ``table`` columns: code (``r001``), part_of_speech, category, meaning, lemma,
    words (the surface forms replaced), masked (whether the code appears in the
    text; partial lifting restores codes without a meaning).
    """

    text: str
    masked_text: str
    table: pd.DataFrame
    rate: float
    condition: str
    seed: int
    n_candidates: int
    k: int
    tagger: str

    def metadata(self) -> str:
        """The seed's metadata block: ``part_of_speech | category | meaning | code`` (masked codes only)."""
        rows = ["part_of_speech | category | meaning | code"]
        for r in self.table[self.table["masked"]].itertuples(index=False):
            rows.append(f"{r.part_of_speech} | {r.category} | {r.meaning} | {r.code}")
        return "\n".join(rows)

    def to_frame(self) -> pd.DataFrame:
        return self.table.copy()

    def to_dict(self) -> dict[str, Any]:
        return {"masked_text": self.masked_text, "rate": self.rate, "condition": self.condition,
                "seed": self.seed, "n_candidates": self.n_candidates, "k": self.k, "tagger": self.tagger,
                "metadata": [{"code": r.code, "part_of_speech": r.part_of_speech, "category": r.category,
                              "meaning": r.meaning, "lemma": r.lemma, "words": list(r.words)}
                             for r in self.table[self.table["masked"]].itertuples(index=False)]}

    def summary(self) -> str:
        return (f"{self.masked_text}\n\n## Metadata ({self.k} of {self.n_candidates} content lemmas masked, "
                f"MR {self.rate:g}%, {self.condition}, seed {self.seed}, tagger {self.tagger})\n{self.metadata()}")


def _maskable(t: Token) -> bool:
    return (t.pos in CONTENT_POS and t.text.lower() not in FUNCTION_WORDS and len(t.text) > 1
            and not _MATH.search(t.text) and t.text[0].isalpha())


def mask_text(text: str, rate: float, condition: str = "regular", seed: int = 0, *, tagger: str = "auto",
              meta: MetaGenerator | Callable[..., dict[str, MetaInfo]] | None = None,
              tokens: Iterable[Token] | None = None, keep: Iterable[str] = ()) -> MaskResult:
    """Mask ``rate`` percent of the content-word lemmas of ``text`` (seed section 2.2).

    Parameters
    ----------
    text : the text to mask.
    rate : masking rate MR in percent (0..100).
    condition : regular, partial, strict or lenient (module docstring).
    seed : seed of the lemma sample (``random.Random(seed)``): same seed, same masks.
    tagger : auto, stanza, linkgrammar or rules (see :func:`tag`).
    meta : meta-information generator; default :class:`RuleMeta`.
    tokens : pre-tagged tokens (skips the tagger).
    keep : words never masked (e.g. the variable names of a calculation, ``("NR", "P")``).

    Returns
    -------
    MaskResult with ``k = round(n * rate / 100)`` lemmas masked out of the n maskable ones.
    """
    if not isinstance(text, str):
        raise InputError(f"text must be a string, got {type(text).__name__}")
    try:
        rate = float(rate)
    except (TypeError, ValueError):
        raise InputError(f"--rate must be a number (percent), got {rate!r}") from None
    if not 0 <= rate <= 100:
        raise InputError(f"--rate is a percentage in 0..100, got {rate:g}")
    if condition not in CONDITIONS:
        raise InputError(f"--condition must be one of {', '.join(CONDITIONS)}, got {condition!r}")
    if tokens is None:
        toks, used = tag(text, tagger)
    else:
        toks, used = list(tokens), "given"
    kept = {w.lower() for w in keep}
    cand = [t for t in toks if _maskable(t) and t.text.lower() not in kept]
    lemma_key = [t.lemma.lower() if t.pos != "PROPN" else t.lemma for t in cand]
    order: dict[str, int] = {}
    pos_of: dict[str, str] = {}
    words_of: dict[str, list[str]] = {}
    for t, key in zip(cand, lemma_key):
        if key not in order:
            order[key] = len(order)
            pos_of[key] = t.pos
            words_of[key] = []
        if t.text not in words_of[key]:
            words_of[key].append(t.text)
    lemmas = list(order)
    width = max(3, len(str(len(lemmas))))
    code_of = {lem: f"r{i + 1:0{width}d}" for i, lem in enumerate(lemmas)}
    maskable = lemmas
    if condition == "lenient":
        verb_lemmas = {t.lemma.lower() for t in toks if t.pos == "VERB"}
        maskable = [lem for lem in lemmas if pos_of[lem] != "VERB" and lem.lower() not in verb_lemmas]
    n = len(maskable)
    k = round(n * rate / 100)
    chosen = set(random.Random(seed).sample(maskable, k)) if k else set()
    gen = meta if meta is not None else RuleMeta()
    items = [(lem, pos_of[lem], tuple(words_of[lem])) for lem in lemmas if lem in chosen]
    info = gen(items, text) if items else {}
    rows = []
    for lem in lemmas:
        if lem not in chosen:
            continue
        mi = info.get(lem, MetaInfo(pos_of[lem]))
        meaning = "" if condition == "strict" else mi.meaning
        masked = not (condition == "partial" and not mi.meaning.strip())
        rows.append({"code": code_of[lem], "part_of_speech": mi.part_of_speech, "category": mi.category,
                     "meaning": meaning, "lemma": lem, "words": tuple(words_of[lem]), "masked": masked})
    table = pd.DataFrame(rows, columns=["code", "part_of_speech", "category", "meaning", "lemma", "words",
                                        "masked"])
    active = {r["lemma"]: r["code"] for r in rows if r["masked"]}
    pieces, last = [], 0
    for t, key in zip(cand, lemma_key):
        if key in active:
            pieces.append(text[last:t.start])
            pieces.append(f"<{active[key]}>")
            last = t.end
    pieces.append(text[last:])
    return MaskResult(text=text, masked_text="".join(pieces), table=table, rate=rate, condition=condition,
                      seed=seed, n_candidates=n, k=k, tagger=used)


_PROMPT = """The following is a text and metadata related to the code terms within the text. Answer the \
question concisely according to the instructions.

## Instructions
- Choose the answer from the options and respond with the corresponding number.
- Respond in JSON format as {{'basis': str, 'answer': int}}
- Use only the text as a reference for the basis

## Text
{text}

## Question
{question}

## Options
{options}

## Metadata
{metadata}"""


def build_prompt(text: str, question: str, options: Sequence[str], metadata: str) -> str:
    """A decoding prompt in the seed's format (Appendix A.2): text, question, numbered options, metadata.

    ``options`` are shown as ``['1. ...', '2. ...']``; ``metadata`` is
    :meth:`MaskResult.metadata` of the masking that produced the texts.
    """
    opts = "[" + ", ".join(repr(f"{i}. {o}") for i, o in enumerate(options, 1)) + "]"
    return _PROMPT.format(text=text, question=question, options=opts, metadata=metadata)
