"""The format registry (mrcstats.io.formats): one record per format, from which detection, dispatch and
every help text are derived."""
from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pandas as pd
import pytest

from mrcstats.cli import build_parser, main
from mrcstats.errors import InputError
from mrcstats.io import formats
from mrcstats.io.detect import detect_format, load_source
from mrcstats.io.formats import (
    EXTENSIONS,
    FORMATS,
    REGISTRY,
    formats_epilog,
    formats_markdown,
    formats_phrase,
)

DOCS = Path(__file__).resolve().parents[2] / "docs" / "formats.md"


def _help(argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main(argv)
    return out.getvalue()


def test_each_format_is_listed_once_with_a_reader_and_a_detector():
    assert len(FORMATS) == len(set(FORMATS)) == len(REGISTRY)
    for f in REGISTRY:
        assert callable(f.detect) and callable(f.read) and f.help and f.title
        assert f.extensions and all(e.startswith(".") and e == e.lower() for e in f.extensions)
    assert set(EXTENSIONS) == {e for f in REGISTRY for e in f.extensions}


def test_derived_help_lists_every_registered_format():
    epilog, phrase = formats_epilog(), formats_phrase()
    for f in REGISTRY:
        assert re.search(rf"^  {re.escape(f.name)} ", epilog, re.MULTILINE), f.name
        assert f.title in phrase, f.title
    text = _help(["ingest", "--help"])
    for f in REGISTRY:
        assert re.search(rf"^  {re.escape(f.name)} ", text, re.MULTILINE), f.name
        assert f.title in " ".join(text.split()), f.title
    subs = build_parser()._subparsers._group_actions[0].choices
    # the input format (dest "fmt"); `report --format pdf|html` names the report's output format instead
    with_format = {cmd for cmd, sub in subs.items()
                   if any("--format" in a.option_strings and a.dest == "fmt" for a in sub._actions)}
    assert {"ingest", "summary", "glmer", "export", "compare", "irt"} <= with_format
    for cmd in with_format:
        fmt = next(a for a in subs[cmd]._actions if "--format" in a.option_strings)
        assert tuple(fmt.choices) == FORMATS, cmd
        assert all(n in fmt.help for n in FORMATS), cmd
    glmer = " ".join(_help(["glmer", "--help"]).split())
    assert all(f.title in glmer for f in REGISTRY)


def test_docs_table_is_the_registry():
    text = DOCS.read_text(encoding="utf-8")
    table = text.split("<!-- formats:begin -->", 1)[1].split("<!-- formats:end -->", 1)[0].strip()
    assert table == formats_markdown(), "regenerate the table: python -c 'from mrcstats.io.formats import " \
                                        "formats_markdown; print(formats_markdown())'"


def test_specific_formats_come_before_the_tables_they_also_parse_as():
    order = {n: i for i, n in enumerate(FORMATS)}
    assert order["lighteval"] < order["parquet"]
    for tool in ("harness", "helm", "inspect", "elagent", "eee"):
        assert order[tool] < order["jsonl"] < order["json"]
    assert order["mskqa"] < order["tsv"] < order["csv"]


def test_dispatch_and_unknown_format(tmp_path):
    p = tmp_path / "log.csv"
    pd.DataFrame({"model": ["m"], "item": ["q1"], "correct": [1]}).to_csv(p, index=False)
    src = load_source(p)
    assert detect_format(src) == "csv" == formats.detect(src)
    from mrcstats.io.reader import read_source

    assert read_source(src, "csv")["correct"].tolist() == [True]
    with pytest.raises(InputError, match="unknown format 'xml'; choose one of lighteval, parquet"):
        read_source(src, "xml")


def test_a_zip_that_is_no_inspect_log_is_one_clear_error(tmp_path):
    import zipfile

    p = tmp_path / "x.zip.json"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("a.txt", "hello")
    with pytest.raises(InputError, match="not an Inspect AI .eval log"):
        detect_format(load_source(p))
