"""``mrcstats glmer`` on one plain CSV/TSV reads it without pandas (:func:`mrcstats.io.arrow_columns.read_table_columns`)
and gives the same result, to the bit, as the pandas path (``--format csv`` takes that path): the same
rows dropped (na.omit), levels, contrasts, estimates, messages and JSON. A table the pandas-free reader
cannot promise (words in ``correct``, missing answers, a column only pandas can type) is read by pandas."""
from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from mrcstats.io.arrow_columns import read_table_columns
from mrcstats.io.columns import Columns
from mrcstats.io.detect import detect_format
from mrcstats.io.source import load_source

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _run(*argv: str) -> tuple[dict, str]:
    r = subprocess.run([sys.executable, "-m", "mrcstats", *argv], check=False, capture_output=True, text=True, timeout=300,
                       env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr[-1500:]
    out = json.loads(r.stdout)
    out.pop("fit_seconds")
    return out, r.stderr


def _table(path: Path, *, correct=lambda i, r: str(int(r.random() < 0.45)), sep=",", missing_x=()) -> Path:
    r = random.Random(5)
    rows = []
    for i in range(600):
        x = "" if i in missing_x else repr(round(r.gauss(0, 1), 6))
        rows.append(sep.join([f"m{i % 4}", f"{i // 4:04d}", x, ("lo", "mid", "hi")[i % 3], str(i % 2 == 0),
                              correct(i, r)]))
    path.write_text(sep.join(["model", "item", "x", "f", "flag", "correct"]) + "\n" + "\n".join(rows) + "\n")
    return path


def _detected(path):
    src = load_source(path)
    return src, detect_format(src)


FORMULA = "correct ~ x * f + flag + (1 | item) + (1 | model)"


@pytest.mark.parametrize("kind", ["csv", "tsv", "na", "words"])
def test_columns_path_equals_the_pandas_path(tmp_path, kind):
    sep = "\t" if kind == "tsv" else ","
    path = _table(tmp_path / f"t.{kind if kind == 'tsv' else 'csv'}", sep=sep,
                  missing_x=(3, 50, 51) if kind == "na" else (),
                  correct=(lambda i, r: "yes" if r.random() < 0.45 else "no") if kind == "words"
                  else (lambda i, r: str(int(r.random() < 0.45))))
    cols = read_table_columns(*_detected(path), ["correct", "x", "f", "flag", "item", "model"])
    assert (cols is None) == (kind == "words")      # words in correct: read_data's coerce_correct reads them
    if cols is not None:
        assert isinstance(cols, Columns) and cols["item"].levels[0] == "0000"     # ids keep leading zeros
    fast, err_fast = _run("glmer", str(path), "--formula", FORMULA, "--json", "--ranef")
    slow, err_slow = _run("glmer", str(path), "--formula", FORMULA, "--json", "--ranef", "--format", kind
                          if kind == "tsv" else "csv")
    assert fast == slow
    assert err_fast == err_slow
    if kind == "na":
        assert any("3 rows with missing values" in m for m in fast["messages"])


def test_missing_answers_go_through_the_invalid_rule(tmp_path):
    """An empty ``correct`` is an invalid answer (--invalid wrong/exclude): the pandas-free reader leaves such a
    table to read_data, so the rule and its note are the same."""
    path = _table(tmp_path / "t.csv", correct=lambda i, r: "" if i % 50 == 0 else str(int(r.random() < 0.45)))
    assert read_table_columns(*_detected(path), ["correct"]) is None
    for invalid in ("wrong", "exclude"):
        out, err = _run("glmer", str(path), "--formula", FORMULA, "--json", "--invalid", invalid)
        assert "12 invalid answers" in err, err
        assert out["nobs"] == (600 if invalid == "wrong" else 588)


@pytest.mark.parametrize("how", ["ingest", "pandas", "categorical"])
def test_parquet_columns_path_equals_the_pandas_path(tmp_path, how):
    """A Parquet file (a canonical log written by ``mrcstats ingest``, or a table written by pandas with text,
    bool, float and categorical columns) is read without pandas to the same fit as ``--format parquet``."""
    import pandas as pd

    csv = _table(tmp_path / "t.csv")
    pq_path = tmp_path / "t.parquet"
    if how == "ingest":
        r = subprocess.run([sys.executable, "-m", "mrcstats", "ingest", str(csv), "--out", str(pq_path)], check=False,
                           capture_output=True, text=True, timeout=300, env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"})
        assert r.returncode == 0, r.stderr[-800:]
    else:
        df = pd.read_csv(csv, dtype={"item": str})
        if how == "categorical":
            df["f"] = pd.Categorical(df["f"], categories=["mid", "lo", "hi"])    # not sorted: kept as given
        df.to_parquet(pq_path)
    cols = read_table_columns(*_detected(pq_path), ["correct", "x", "f", "flag", "item", "model"])
    assert cols is not None
    if how == "categorical":
        assert cols["f"].kind == "category" and cols["f"].levels == ("mid", "lo", "hi")
    fast, err_fast = _run("glmer", str(pq_path), "--formula", FORMULA, "--json", "--ranef")
    slow, err_slow = _run("glmer", str(pq_path), "--formula", FORMULA, "--json", "--ranef", "--format", "parquet")
    assert fast == slow
    assert err_fast == err_slow
