"""Hypothesis strategies for hostile inputs: logs and tables with nasty values, encodings, line endings,
duplicate names, corrupted bytes, and the in-process CLI runner the fuzz tests share.

A generated *structured* file (:func:`log_files`) knows how many data rows it holds, so a test can check
that every accepted run accounts for each of them (accepted + reported skipped = input rows). A
*corrupted* file (:func:`corrupt`) has random bytes flipped, inserted or cut; only the exit code and
the absence of a traceback are checked there.
"""
from __future__ import annotations

import contextlib
import csv
import gzip
import io
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st

from mrcstats.cli import main

#: examples per command (the suite's size; MRCSTATS_FUZZ_EXAMPLES overrides it); the whole suite stays well under 60 s on an idle machine
EXAMPLES = int(os.environ.get("MRCSTATS_FUZZ_EXAMPLES", "30"))

FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])


@dataclass
class Run:
    code: int
    out: str
    err: str


def run_cli(argv: list[str]) -> Run:
    """``mrcstats.cli.main(argv)`` in this process with stdout/stderr captured. Any exception escaping
    ``main`` (a traceback for the user) fails the test that called it."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse errors
            code = exc.code if isinstance(exc.code, int) else 2
    return Run(int(code), out.getvalue(), err.getvalue())


def check_clean(r: Run, argv: list[str]) -> None:
    """Exit 0 or 2, and no traceback on either stream."""
    event(f"{argv[0]} exit {r.code}")
    if os.environ.get("MRCSTATS_FUZZ_SHOW"):
        last = r.err.strip().splitlines()[-1][:90] if r.err.strip() else ""
        event(f"{argv[0]}: {last}")
    assert r.code in (0, 2), f"exit {r.code} for {argv}: {r.err[-2000:]}"
    assert "Traceback" not in r.err and "Traceback" not in r.out, f"traceback for {argv}: {r.err[-2000:]}"
    if r.code == 2:
        assert "error" in r.err, f"exit 2 without a message for {argv}"


# ----------------------------------------------------------------------------- cell values
_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",), max_codepoint=0x2FFF), max_size=6)
CELL = st.one_of(
    st.sampled_from(["", "NA", "nan", "NaN", "inf", "-inf", "1e20", "1e30", "9223372036854775808", "-1", "0",
                     "1", "2", "0.5", "1.0", "true", "False", "yes", "invalid", "null", "None", " 1 ", "1,5",
                     "\u00e9", "\u200b", "=cmd|' /C calc'!A0", "'", '"', "\t"]),
    st.integers(-3, 3).map(str), st.floats(allow_nan=True, allow_infinity=True).map(repr), _TEXT,
)
CORRECT = st.one_of(st.sampled_from(["1", "0", "true", "false", "", "invalid"]), CELL)
TRIAL = st.one_of(st.sampled_from(["0", "1", "2", ""]), CELL)
RATE = st.one_of(st.sampled_from(["0", "10", "50", "100", ""]), CELL)
NAME = st.one_of(st.sampled_from(["a", "b", "m1", "gpt-4", ""]), _TEXT)
COLUMNS = ("model", "item", "correct", "trial", "condition", "masking_rate", "cluster", "question")


@dataclass
class LogFile:
    """A structured file: its bytes, suffix, and the number of data rows it holds."""

    data: bytes
    suffix: str
    n_rows: int
    columns: list[str]


_CLEAN = {"model": st.sampled_from(["a", "b", "c"]), "correct": st.sampled_from(["1", "0", "true", "false", "", "invalid"]),
          "trial": st.sampled_from(["0", "1", ""]), "condition": st.sampled_from(["", "x"]),
          "masking_rate": st.sampled_from(["0", "50", "100", ""]),
          "question": st.sampled_from(["Who wrote it?", "Why did the man leave the town early?", "", "x",
                                       "What is 2+2? \u00e9\u200b"])}
_HOSTILE = {"correct": CORRECT, "trial": TRIAL, "masking_rate": RATE, "model": NAME}


@st.composite
def log_rows(draw, min_rows: int = 1, max_rows: int = 12, clean: bool = False) -> tuple[list[str], list[list]]:
    """A header (canonical names; unless ``clean``, sometimes one dropped, renamed, duplicated or added)
    and rows of values, each cell hostile (NaN, 1e30, text, ...) with a probability drawn per file
    (0 for ``clean``), so that both refused and accepted files are common."""
    cols = list(COLUMNS)
    if not clean:
        op = draw(st.sampled_from(["none"] * 5 + ["drop", "dup", "rename", "extra"]))
        if op == "drop":
            cols.remove(draw(st.sampled_from(cols)))
        elif op == "dup":
            cols.append(draw(st.sampled_from(cols)))
        elif op == "rename":
            i = draw(st.integers(0, len(cols) - 1))
            cols[i] = draw(st.sampled_from(["Model", "item ", "correct\r", "", "model.1", "x"]))
        elif op == "extra":
            cols.append(draw(st.sampled_from(["score", "notes", "\u00e9", "1"])))
    hostile = 0 if clean else draw(st.sampled_from([0, 0, 2, 5, 20, 50]))  # percent of hostile cells
    n = draw(st.integers(min_rows, max_rows))
    n_items = draw(st.sampled_from([n, n, max(1, n // 2)]))  # sometimes repeated keys
    paired = draw(st.booleans())  # models a and b answer the same items (McNemar, P_d, GLMM groups)
    rows = []
    for i in range(n):
        row = []
        for c in cols:
            if hostile and draw(st.integers(0, 99)) < hostile:
                v = draw(_HOSTILE.get(c.strip().lower(), CELL))
            elif paired and c in ("model", "item", "trial", "condition", "masking_rate", "cluster"):
                v = {"model": "ab"[i % 2], "item": str(i // 2), "trial": "0", "condition": "",
                     "masking_rate": "0", "cluster": str(i // 4)}[c]
            elif c == "item":
                v = str(draw(st.integers(0, n_items - 1)) if n_items < n else i)
            elif c == "cluster":
                v = str(i // 3)
            else:
                v = draw(_CLEAN.get(c, CELL))
            row.append(v)
        rows.append(row)
    return cols, rows


def _py(v: str):
    """A CSV cell as the JSON value a careless writer would emit."""
    if v in ("", "null", "None"):
        return None
    if v in ("true", "false"):
        return v == "true"
    try:
        f = float(v)
    except ValueError:
        return v
    if math.isfinite(f) and f.is_integer() and abs(f) < 2**53 and "." not in v and "e" not in v.lower():
        return int(f)
    return f


@st.composite
def log_files(draw, clean: bool = False, formats=("csv", "tsv", "jsonl", "json", "parquet")) -> LogFile:
    """A log file in a random format, encoding, line ending and compression."""
    cols, rows = draw(log_rows(clean=clean))
    fmt = draw(st.sampled_from(formats))
    if fmt in ("csv", "tsv"):
        buf = io.StringIO()
        w = csv.writer(buf, delimiter="," if fmt == "csv" else "\t",
                       lineterminator=draw(st.sampled_from(["\n", "\r\n", "\r"])))
        w.writerow(cols)
        w.writerows(rows)
        text = buf.getvalue()
        enc = draw(st.sampled_from(["utf-8", "utf-8", "utf-8-sig", "utf-16"]))
        data = text.encode(enc, errors="replace") if enc != "utf-16" else text.encode("utf-16")
    elif fmt in ("jsonl", "json"):
        recs = []
        for r in rows:
            pairs = [(c, _py(v)) for c, v in zip(cols, r)]
            # a repeated column name becomes a repeated key (json.dumps of a dict cannot show that)
            body = ", ".join(f"{json.dumps(c)}: {json.dumps(v, allow_nan=True)}" for c, v in pairs)
            recs.append("{" + body + "}")
        text = ("\n".join(recs) + "\n") if fmt == "jsonl" else "[" + ",\n".join(recs) + "]"
        data = text.encode("utf-8")
    else:
        import pandas as pd

        if len(set(cols)) != len(cols):
            cols = list(dict.fromkeys(cols))
            rows = [r[: len(cols)] for r in rows]
        df = pd.DataFrame(rows, columns=cols)
        for c in df.columns:  # typed columns where the text allows, as a real writer would
            conv = pd.to_numeric(df[c], errors="coerce")
            if conv.notna().all() and draw(st.booleans()):
                df[c] = conv
        b = io.BytesIO()
        df.to_parquet(b, index=False)
        data = b.getvalue()
        fmt = "parquet"
    if fmt != "parquet" and draw(st.integers(0, 9)) == 0:
        data = gzip.compress(data, mtime=0)
    return LogFile(data, {"csv": ".csv", "tsv": ".tsv", "jsonl": ".jsonl", "json": ".json",
                          "parquet": ".parquet"}[fmt], len(rows), cols)


@st.composite
def corrupt(draw, f: LogFile) -> bytes:
    """``f``'s bytes with a few random edits: flipped, inserted or deleted bytes, or a cut."""
    data = bytearray(f.data)
    for _ in range(draw(st.integers(1, 3))):
        if not data:
            break
        op = draw(st.sampled_from(["flip", "insert", "delete", "cut", "nul", "cr"]))
        i = draw(st.integers(0, len(data) - 1))
        if op == "flip":
            data[i] = draw(st.integers(0, 255))
        elif op == "insert":
            data[i:i] = draw(st.binary(min_size=1, max_size=4))
        elif op == "delete":
            del data[i]
        elif op == "cut":
            del data[i:]
        elif op == "nul":
            data[i:i] = b"\x00"
        else:
            data[i:i] = b"\r"
    return bytes(data)


def write(tmp: Path, name: str, data: bytes) -> Path:
    p = tmp / name
    p.write_bytes(data)
    return p


def skipped_total(obj: dict) -> int:
    return sum(int(v) for v in (obj.get("skipped") or {}).values())
