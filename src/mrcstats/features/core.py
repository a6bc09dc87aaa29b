"""Item features: token counts, syntactic density and wh-words, per item and per piece.

Measures follow seed ``003_17297ae0d00b444c`` (section 3.3, appendix A, section 5):

* ``tokens``: ``len(nltk.word_tokenize(text, preserve_line=True))`` of the whole MCQ
  (passage, question and options joined by newlines); ``tokens_<piece>`` of each piece
  (the options joined by newlines). With ``parser="trees"`` the tokens are the leaves.
* ``nodes``: all nodes (ROOT, phrasal, preterminal, leaf) of the constituency trees of
  every sentence, summed over the pieces (each option parsed on its own); ``leaves``:
  the leaf nodes.
* ``density = nodes / tokens`` (the seed's measure) and ``density_leaves = nodes /
  leaves`` (the fix its limitations section recommends: both from the same parse).
* ``scaled_tok``, ``scaled_con``: z-scores of ``tokens`` and ``density`` over the items,
  ``(x - mean(x)) / sd(x)`` with the ``n - 1`` standard deviation, NAs skipped, as R's
  ``scale()`` (the seed's ``scaled_tok``/``scaled_con``).
* ``wh_word``, ``wh_word_clause``: see :mod:`mrcstats.features.wh`.
* ``parse_fallbacks``: sentences that got a flat tree (link-grammar could not parse them).

Parses are cached on disk by content (:mod:`mrcstats.features.cache`) and run in
``jobs`` worker processes; rows are in input order and hold no per-run values, so two
runs over the same input give identical tables.
"""
from __future__ import annotations

import os
import time
import warnings
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from mrcstats._repr import Result
from mrcstats.errors import InputError, MrcstatsError
from mrcstats.features.items import PIECES, Item, ItemSet, items_from_frame, load_items
from mrcstats.features.parsers import ParsedText, ParserSpec, make_parser, resolve_parser
from mrcstats.features.tokens import count_tokens
from mrcstats.features.trees import leaves, normalize, parse_brackets
from mrcstats.features.wh import wh_word, wh_word_clause

__all__ = ["FeatureResult", "compute_features", "feature_columns", "features", "scale"]


def feature_columns(syntax: bool = True) -> list[str]:
    """The output columns, in order (``syntax=False`` for ``parser="none"``)."""
    cols = ["item", "cluster", "wh_word", "wh_word_clause", "tokens",
            *(f"tokens_{p}" for p in PIECES)]
    if syntax:
        cols += ["nodes", "leaves", "density", "density_leaves"]
        for p in PIECES:
            cols += [f"nodes_{p}", f"leaves_{p}", f"density_{p}", f"density_leaves_{p}"]
        cols += ["parse_fallbacks"]
    cols += ["scaled_tok"] + (["scaled_con"] if syntax else [])
    return cols


def scale(x: Sequence[float] | np.ndarray | pd.Series) -> np.ndarray:
    """``(x - mean) / sd`` with the n - 1 sd over the non-missing values (R's ``scale()``).

    All NaN when fewer than two values are present or their sd is 0.
    """
    a = pd.to_numeric(pd.Series(x), errors="coerce").astype("float64").to_numpy()
    ok = ~np.isnan(a)
    if ok.sum() < 2:
        return np.full(a.shape, np.nan)
    sd = float(np.std(a[ok], ddof=1))
    if sd == 0.0:
        return np.full(a.shape, np.nan)
    return (a - float(np.mean(a[ok]))) / sd


@dataclass(frozen=True, repr=False)
class FeatureResult(Result):
    """Item features and how they were made.

    ``frame`` is one row per item (columns :func:`feature_columns`); ``skipped`` counts
    items left out by reason; ``parsed``/``cache_hits`` count distinct texts parsed now
    or read from the cache; ``parse_fallbacks`` counts flat-tree sentences over the distinct
    texts (a passage shared by several items counts once); ``seconds`` is the wall time of
    the parsing step.
    """

    frame: pd.DataFrame
    parser: str
    parser_version: str | None
    skipped: dict[str, int] = field(default_factory=dict)
    skipped_examples: dict[str, list[str]] = field(default_factory=dict)
    texts: int = 0
    parsed: int = 0
    cache_hits: int = 0
    parse_fallbacks: int = 0
    seconds: float = 0.0

    def to_frame(self) -> pd.DataFrame:
        """The feature table (a copy) with ``attrs`` parser, parser_version and skipped."""
        df = self.frame.copy()
        df.attrs = {"parser": self.parser, "parser_version": self.parser_version,
                    "skipped": dict(self.skipped)}
        return df

    def to_dict(self) -> dict[str, Any]:
        return {"parser": self.parser, "parser_version": self.parser_version, "items": len(self.frame),
                "skipped": dict(self.skipped), "texts": self.texts, "parsed": self.parsed,
                "cache_hits": self.cache_hits, "parse_fallbacks": self.parse_fallbacks,
                "seconds": self.seconds, "columns": list(self.frame.columns)}

    def summary(self) -> str:
        lines = [f"{len(self.frame)} items, parser {self.parser}"
                 + (f" ({self.parser_version})" if self.parser_version else "")]
        if self.texts:
            lines.append(f"{self.texts} distinct texts: {self.parsed} parsed, {self.cache_hits} from the cache, "
                         f"{self.seconds:.1f} s")
        if self.parser == "link-grammar":
            lines.append(f"{self.parse_fallbacks} sentences of the distinct texts had no linkage and got flat "
                         "trees (per item: parse_fallbacks)")
        if self.skipped:
            lines.append("skipped: " + ", ".join(f"{n} {r}" for r, n in self.skipped.items()))
        num = self.frame.select_dtypes("number")
        if len(num):
            desc = num[[c for c in ("tokens", "density", "density_leaves") if c in num]].describe()
            lines.append(desc.to_string())
        return "\n".join(lines)


# ---------------------------------------------------------------- parsing (workers)
_WORKER: dict[str, Any] = {}


def _init_worker(spec: ParserSpec) -> None:
    _WORKER["parser"] = make_parser(spec)


def _parse_chunk(chunk: list[tuple[int, str]]) -> list[tuple[int, dict[str, Any]]]:
    parser = _WORKER["parser"]
    return [(i, parser.parse_text(text).to_dict()) for i, text in chunk]


def _chunks(todo: list[tuple[int, str]], jobs: int) -> list[list[tuple[int, str]]]:
    # longest texts first so the workers finish together; ~8 chunks per worker at least
    todo = sorted(todo, key=lambda t: -len(t[1]))
    size = max(1, min(16, len(todo) // (8 * jobs) or 1))
    return [todo[i:i + size] for i in range(0, len(todo), size)]


def _parse_all(texts: list[str], spec: ParserSpec, parser, cache, jobs: int,
               show_progress: bool | None) -> tuple[list[ParsedText], int]:
    """Parse each distinct text once (cache first); return the parses and the cache hits."""
    from mrcstats._progress import progress

    out: list[ParsedText | None] = [None] * len(texts)
    keys: list[str | None] = [None] * len(texts)
    todo: list[tuple[int, str]] = []
    hits = 0
    for i, text in enumerate(texts):
        if cache is not None:
            keys[i] = cache.key(text)
            got = cache.get(keys[i])
            if got is not None:
                out[i] = got
                hits += 1
                continue
        todo.append((i, text))
    if todo:
        bar = progress(total=len(todo), desc=f"parsing ({spec.name})", unit="text",
                       disable=None if show_progress is None else not show_progress)

        def store(i: int, parsed: ParsedText) -> None:
            out[i] = parsed
            if cache is not None:
                cache.put(keys[i], parsed)  # type: ignore[arg-type]

        try:
            if jobs <= 1 or len(todo) < 2:
                for i, text in todo:
                    store(i, parser.parse_text(text))
                    bar.update(1)
            else:
                count_tokens("")  # import NLTK once here, so forked workers inherit it
                with ProcessPoolExecutor(max_workers=jobs, initializer=_init_worker, initargs=(spec,)) as ex:
                    futures = [ex.submit(_parse_chunk, c) for c in _chunks(todo, jobs)]
                    try:
                        for fut in as_completed(futures):
                            done = fut.result()
                            for i, d in done:
                                store(i, ParsedText.from_dict(d))
                            bar.update(len(done))
                    except BrokenProcessPool:
                        raise MrcstatsError(f"a {spec.name} worker process died (crash or out of memory); "
                                            "the parses finished so far are cached: rerun, or use --jobs 1 "
                                            "to see which text fails") from None
        finally:
            bar.close()
    return out, hits  # type: ignore[return-value]


# ---------------------------------------------------------------- assembling rows
def _ratio(a, b) -> float:
    if a is None or b is None or b == 0 or a is pd.NA or b is pd.NA:
        return float("nan")
    return a / b


def _coerce_items(source) -> ItemSet:
    if isinstance(source, ItemSet):
        return source
    if isinstance(source, pd.DataFrame):
        return items_from_frame(source, source="table")
    if isinstance(source, (str, os.PathLike)):
        return load_items(source)
    if isinstance(source, Sequence) and all(isinstance(x, Item) for x in source):
        return ItemSet(list(source))
    raise InputError(f"features() takes a DataFrame (log or item table), a path to items, or a list of "
                     f"Item; got {type(source).__name__}")


def compute_features(source, *, parser: str = "auto", jobs: int = 1, cache: str | os.PathLike | None = None,
                     models_dir: str | None = None, parser_options: dict[str, Any] | None = None,
                     progress: bool | None = None, verbose: bool = True) -> FeatureResult:
    """Features of every item of ``source`` with the full record of the run (see :func:`features`)."""
    if not isinstance(jobs, int) or jobs < 1:
        raise InputError(f"jobs must be a positive integer, got {jobs!r}")
    items = _coerce_items(source)
    if items.skipped:
        warnings.warn(f"skipped items: {items.describe_skipped()}", stacklevel=2)
    if not items.items:
        raise InputError("no items with text to measure" + (f" (skipped: {items.describe_skipped()})"
                                                             if items.skipped else ""))
    name = resolve_parser(parser, models_dir=models_dir, verbose=verbose)
    syntax = name != "none"
    opts = dict(parser_options or {})
    if name == "stanza" and models_dir is not None:
        opts.setdefault("models_dir", str(models_dir))
    spec = ParserSpec(name, tuple(sorted(opts.items())))

    if name == "trees":
        return _trees_features(items, spec)

    tok_cache: dict[str, int] = {}

    def ntok(text: str | None):
        if text is None:
            return pd.NA
        if text not in tok_cache:
            tok_cache[text] = count_tokens(text)
        return tok_cache[text]

    # the units to parse: passage, question, and each option on its own
    unit_index: dict[str, int] = {}
    units: list[str] = []

    def unit(text: str) -> int:
        if text not in unit_index:
            unit_index[text] = len(units)
            units.append(text)
        return unit_index[text]

    plan: list[dict[str, list[int] | None]] = []
    for it in items.items:
        plan.append({
            "passage": None if it.passage is None else [unit(it.passage)],
            "question": None if it.question is None else [unit(it.question)],
            "options": None if it.options is None else [unit(o) for o in it.options],
        })

    parsed: list[ParsedText] = []
    version = None
    hits = 0
    seconds = 0.0
    if syntax:
        p = make_parser(spec)
        version = p.version
        pc = None
        if cache is not None:
            from mrcstats.features.cache import ParseCache

            pc = ParseCache(cache, name, version)
        t0 = time.perf_counter()
        parsed, hits = _parse_all(units, spec, p, pc, jobs, progress)
        seconds = time.perf_counter() - t0

    rows = []
    total_fallbacks = sum(p.fallbacks for p in parsed)  # each distinct text once
    for it, pl in zip(items.items, plan):
        row: dict[str, Any] = {"item": it.item, "cluster": it.cluster,
                               "wh_word": pd.NA if it.question is None else wh_word(it.question),
                               "wh_word_clause": pd.NA if it.question is None else wh_word_clause(it.question),
                               "tokens": ntok(it.text())}
        for piece in PIECES:
            row[f"tokens_{piece}"] = ntok(it.piece_text(piece))
        if syntax:
            nodes = leaves_ = fallbacks = 0
            for piece in PIECES:
                ids = pl[piece]
                if ids is None:
                    row[f"nodes_{piece}"] = row[f"leaves_{piece}"] = pd.NA
                    continue
                n = sum(parsed[i].nodes for i in ids)
                lv = sum(parsed[i].leaves for i in ids)
                fallbacks += sum(parsed[i].fallbacks for i in ids)
                row[f"nodes_{piece}"], row[f"leaves_{piece}"] = n, lv
                nodes += n
                leaves_ += lv
            row["nodes"], row["leaves"], row["parse_fallbacks"] = nodes, leaves_, fallbacks
        rows.append(row)
    frame = _finish(rows, syntax)
    return FeatureResult(frame, name, version, dict(items.skipped), dict(items.examples), len(units) if syntax else 0,
                         len(units) - hits if syntax else 0, hits, total_fallbacks, seconds)


def _finish(rows: list[dict[str, Any]], syntax: bool) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    for c in ("item", "cluster", "wh_word", "wh_word_clause"):
        df[c] = df[c].astype("string")
    counts = ["tokens", *(f"tokens_{p}" for p in PIECES)]
    if syntax:
        counts += ["nodes", "leaves", "parse_fallbacks", *(f"{k}_{p}" for p in PIECES for k in ("nodes", "leaves"))]
    for c in counts:
        df[c] = df[c].astype("Int64")
    if syntax:
        for suffix in ("", *(f"_{p}" for p in PIECES)):
            n = df[f"nodes{suffix}"].astype("Float64")
            df[f"density{suffix}"] = (n / df[f"tokens{suffix}"].astype("Float64").replace(0, pd.NA)) \
                .astype("float64")
            df[f"density_leaves{suffix}"] = (n / df[f"leaves{suffix}"].astype("Float64").replace(0, pd.NA)) \
                .astype("float64")
    df["scaled_tok"] = scale(df["tokens"])
    if syntax:
        df["scaled_con"] = scale(df["density"])
    return df[feature_columns(syntax)].reset_index(drop=True)


def _trees_features(items: ItemSet, spec: ParserSpec) -> FeatureResult:
    """``parser="trees"``: counts and tokens from the given trees (tokens are the leaves)."""
    from mrcstats.features.parsers import TreesParser

    tp = TreesParser()
    rows = []
    for it in items.items:
        if not it.trees:
            raise InputError(f"item {it.item!r} has no tree: --parser trees needs a 'tree' column "
                             "(or tree_passage/tree_question/tree_options) of bracketed trees")
        row: dict[str, Any] = {"item": it.item, "cluster": it.cluster}
        per: dict[str, ParsedText | None] = {}
        for piece in PIECES:
            t = it.tree(f"tree_{piece}")
            per[piece] = None if t is None else _parse_given(tp, t, it.item, f"tree_{piece}")
        whole_t = it.tree("tree")
        if whole_t is not None:
            whole = _parse_given(tp, whole_t, it.item, "tree")
        else:
            got = [v for v in per.values() if v is not None]
            whole = ParsedText(sum(v.nodes for v in got), sum(v.leaves for v in got), sum(v.sentences for v in got))
        question = it.question
        if question is None and it.tree("tree_question") is not None:
            question = " ".join(w for t in parse_brackets(it.tree("tree_question")) if (n := normalize(t))
                                for w in leaves(n))
        row["wh_word"] = pd.NA if question is None else wh_word(question)
        row["wh_word_clause"] = pd.NA if question is None else wh_word_clause(question)
        row["tokens"], row["nodes"], row["leaves"], row["parse_fallbacks"] = \
            whole.leaves, whole.nodes, whole.leaves, 0
        for piece in PIECES:
            v = per[piece]
            row[f"tokens_{piece}"] = row[f"leaves_{piece}"] = pd.NA if v is None else v.leaves
            row[f"nodes_{piece}"] = pd.NA if v is None else v.nodes
        rows.append(row)
    return FeatureResult(_finish(rows, True), "trees", tp.version, dict(items.skipped), dict(items.examples))


def _parse_given(tp, text: str, item: str, column: str) -> ParsedText:
    try:
        return tp.parse_text(text)
    except InputError as exc:
        raise InputError(f"item {item!r}, column {column!r}: {exc}") from None


def features(source, *, parser: str = "auto", jobs: int = 1, cache: str | os.PathLike | None = None,
             models_dir: str | None = None, parser_options: dict[str, Any] | None = None,
             progress: bool | None = None, verbose: bool = True) -> pd.DataFrame:
    """Token counts, syntactic density and wh-words of each item, one row per item.

    Parameters
    ----------
    source : DataFrame, path, ItemSet or list of Item
        A canonical log or item table (``item`` plus ``passage``/``question``/``options``
        and/or ``tree`` columns), a CSV/Parquet item table, or RACE JSON files/folder.
    parser : {"auto", "stanza", "link-grammar", "trees", "none"}
        ``auto`` picks Stanza when its models are present, else link-grammar (said on stderr).
    jobs : int
        Worker processes for parsing (rows are the same whatever ``jobs`` is).
    cache : path or None
        Directory of the content-addressed parse cache; ``None`` parses everything.
    models_dir : path or None
        Stanza resources directory (see :func:`mrcstats.features.parsers.stanza.resources_dir`).
    parser_options : dict
        Extra keyword options of the parser (e.g. ``{"max_parse_time": 2}`` for link-grammar).
    progress : bool or None
        Progress bar on stderr (None: only when stderr is a terminal).

    Returns
    -------
    DataFrame
        Columns :func:`feature_columns`, items in input order; ``attrs`` hold the parser,
        its version and the skipped-item counts. Formulas: see the module docstring
        (seed ``003_17297ae0d00b444c``, section 3.3 and appendix A).
    """
    return compute_features(source, parser=parser, jobs=jobs, cache=cache, models_dir=models_dir,
                            parser_options=parser_options, progress=progress, verbose=verbose).to_frame()
