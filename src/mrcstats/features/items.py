"""Items to measure: from a canonical log's text columns, RACE JSON files, or a table of trees.

An :class:`Item` holds the pieces of one multiple-choice question: ``passage``,
``question`` and ``options`` (each may be absent), or bracketed trees for the
``trees`` parser (``tree`` for the whole item and/or ``tree_passage``,
``tree_question``, ``tree_options``).

Sources:

* a DataFrame (a canonical log, or a CSV/Parquet item table) with an ``item`` column:
  one item per distinct ``item`` in order of first appearance, its texts from the first
  row that has them; ``cluster`` defaults to the item;
* RACE JSON files (``highNNNNN.txt`` with ``article``, ``questions``, ``options``,
  ``answers``), a file or a folder of them: one item per question,
  ``item = "<file stem>:<question index from 0>"``, ``cluster = "<file stem>"``, in file
  name order, then question order.

Items whose text is empty or undecodable are skipped and counted by reason in
:attr:`ItemSet.skipped` (never silently dropped).
"""
from __future__ import annotations

import ast
import json
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mrcstats.errors import InputError

__all__ = [
    "PIECES",
    "TREE_COLUMNS",
    "Item",
    "ItemSet",
    "items_from_frame",
    "items_from_race",
    "load_items",
    "parse_options",
]

PIECES: tuple[str, ...] = ("passage", "question", "options")
TREE_COLUMNS: tuple[str, ...] = ("tree", "tree_passage", "tree_question", "tree_options")
RACE_SUFFIXES = (".txt", ".json")
TABLE_SUFFIXES = (".csv", ".tsv", ".parquet", ".pq")

SKIP_EMPTY = "empty text"
SKIP_UNDECODABLE = "undecodable text"
SKIP_UNREADABLE = "unreadable RACE file"


@dataclass(frozen=True)
class Item:
    """One MCQ: its id, cluster, texts per piece and/or bracketed trees."""

    item: str
    cluster: str
    passage: str | None = None
    question: str | None = None
    options: tuple[str, ...] | None = None
    trees: tuple[tuple[str, str], ...] = ()  # (column, bracketed trees) pairs

    def piece_text(self, piece: str) -> str | None:
        """The text of one piece; options are joined by newlines."""
        if piece == "options":
            return None if self.options is None else "\n".join(self.options)
        return getattr(self, piece)

    def text(self) -> str:
        """The whole MCQ: passage, question and options joined by newlines."""
        parts = [p for p in (self.passage, self.question) if p is not None]
        parts.extend(self.options or ())
        return "\n".join(parts)

    def tree(self, column: str) -> str | None:
        return dict(self.trees).get(column)


@dataclass
class ItemSet:
    """Items in input order and what was skipped: ``{reason: count}`` and example ids."""

    items: list[Item]
    skipped: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def skip(self, reason: str, where: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1
        ex = self.examples.setdefault(reason, [])
        if len(ex) < 3:
            ex.append(where)

    def describe_skipped(self) -> str:
        """One line naming each skip reason, its count and up to three examples."""
        return "; ".join(f"{n} {reason} (e.g. {', '.join(self.examples.get(reason, []))})"
                         for reason, n in self.skipped.items())


def _missing(v: Any) -> bool:
    if v is None:
        return True
    try:
        import pandas as pd

        if v is pd.NA:
            return True
    except ImportError:  # pragma: no cover
        pass
    return isinstance(v, float) and math.isnan(v)


def _decodable(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates from a bad decode
        return False
    return "\ufffd" not in s


def parse_options(value: Any) -> tuple[str, ...] | None:
    """Options from a list, its JSON/Python text (``"['a', 'b']"``) or newline-separated text."""
    if _missing(value):
        return None
    if hasattr(value, "tolist") and not isinstance(value, str):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return tuple("" if _missing(v) else str(v) for v in value)
    s = str(value)
    if s.strip().startswith("["):
        for loader in (json.loads, ast.literal_eval):
            try:
                obj = loader(s.strip())
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
            if isinstance(obj, (list, tuple)):
                return tuple("" if _missing(v) else str(v) for v in obj)
    return tuple(line for line in s.split("\n") if line.strip())


def _check_item(items: ItemSet, it: Item, where: str) -> None:
    texts = [t for t in (it.passage, it.question, *(it.options or ())) if t is not None]
    texts += [t for _, t in it.trees]
    if any(not _decodable(t) for t in texts):
        items.skip(SKIP_UNDECODABLE, where)
    elif not any(t.strip() for t in texts):
        items.skip(SKIP_EMPTY, where)
    else:
        items.items.append(it)


def items_from_frame(df, *, source: str = "table") -> ItemSet:
    """One item per distinct ``item`` value of ``df``, in order of first appearance.

    Texts come from ``passage``/``question``/``options``, trees from ``tree`` and
    ``tree_<piece>``; each from the first row of the item where it is present.
    Raises :class:`InputError` without an ``item`` column or without any text/tree column.
    """
    if "item" not in df.columns:
        raise InputError(f"{source}: no 'item' column (columns: {', '.join(map(str, df.columns))}); "
                         "give one id per item in a column named 'item'")
    text_cols = [c for c in (*PIECES, *TREE_COLUMNS) if c in df.columns]
    if not text_cols:
        raise InputError(f"{source}: no text columns; features need at least one of "
                         f"{', '.join(PIECES + TREE_COLUMNS)} (ingest the log with its texts, or pass "
                         "RACE files with --items)")
    cols = ["item", *(["cluster"] if "cluster" in df.columns else []), *text_cols]
    firsts: dict[str, dict[str, Any]] = {}
    for row_no, rec in enumerate(df[cols].itertuples(index=False, name=None)):
        row = dict(zip(cols, rec))
        if _missing(row["item"]):
            raise InputError(f"{source}: row {row_no + 1} has no item id; fill the 'item' column")
        key = str(row["item"])
        got = firsts.setdefault(key, {"_row": row_no + 1})
        for c in cols[1:]:
            if c not in got and not _missing(row[c]):
                got[c] = row[c]
    out = ItemSet([])
    for key, got in firsts.items():
        cluster = got.get("cluster")
        trees = tuple((c, str(got[c])) for c in TREE_COLUMNS if c in got)
        it = Item(item=key, cluster=key if cluster is None else str(cluster),
                  passage=str(got["passage"]) if "passage" in got else None,
                  question=str(got["question"]) if "question" in got else None,
                  options=parse_options(got["options"]) if "options" in got else None,
                  trees=trees)
        _check_item(out, it, f"{source} item {key!r} (row {got['_row']})")
    return out


def _race_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in RACE_SUFFIXES)
        if not files:
            raise InputError(f"{path}: no RACE files (*.txt or *.json) in this folder")
        return files
    return [path]


def items_from_race(paths: str | os.PathLike | Iterable[str | os.PathLike]) -> ItemSet:
    """Items from RACE JSON files or folders (see the module docstring for ids and order)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files: list[Path] = []
    for p in paths:
        p = Path(p)
        if not p.exists():
            raise InputError(f"{p}: no such file or folder")
        files.extend(_race_files(p))
    out = ItemSet([])
    for f in files:
        from mrcstats.io.files import read_json

        if not os.access(f, os.R_OK):
            raise InputError(f"{f}: cannot read (permission denied)")
        try:
            obj = read_json(f)
        except InputError as exc:  # not UTF-8, not JSON, empty, an LFS pointer: counted, not fatal
            out.skip(SKIP_UNREADABLE, f"{f.name} ({str(exc).split(': ', 1)[-1]})")
            continue
        if not isinstance(obj, dict) or not {"article", "questions", "options"} <= obj.keys():
            raise InputError(f"{f}: not a RACE file (expected a JSON object with 'article', 'questions', "
                             "'options' and 'answers'); pass RACE files, or a CSV with an 'item' column")
        questions, options = obj["questions"], obj["options"]
        if not isinstance(questions, list) or not isinstance(options, list) or len(questions) != len(options):
            raise InputError(f"{f}: 'questions' and 'options' must be lists of the same length "
                             f"(got {type(questions).__name__} and {type(options).__name__})")
        stem = f.stem
        article = obj["article"] if isinstance(obj["article"], str) else ""
        for qi, (q, opts) in enumerate(zip(questions, options)):
            it = Item(item=f"{stem}:{qi}", cluster=stem, passage=article,
                      question=q if isinstance(q, str) else "", options=parse_options(opts) or ())
            _check_item(out, it, f"{f.name} question {qi}")
    return out


def load_items(path: str | os.PathLike) -> ItemSet:
    """Items from ``path``: a CSV/TSV/Parquet item table, or RACE JSON file(s) or folder."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file or folder")
    if p.is_file() and p.suffix.lower() in TABLE_SUFFIXES:
        from mrcstats.io.files import read_string_table

        df = read_string_table(p, missing=("",))
        return items_from_frame(df, source=str(p))
    if p.is_file() and p.suffix.lower() not in RACE_SUFFIXES:
        raise InputError(f"{p}: unknown item file type {p.suffix!r}; give a .csv/.tsv/.parquet item table "
                         "or RACE .txt/.json files (or a folder of them)")
    return items_from_race(p)
