"""Hypothesis strategies for hostile inputs, the in-process CLI runner and the invariants every fuzz test checks.

Inputs: logs and tables with nasty values, encodings, line endings, duplicate names, corrupted bytes,
model names of every kind (:data:`NAMES`: case variants, CJK, ``$`` mathtext, HTML, Markdown, very long,
right-to-left, combining and zero-width characters), bad paths, and interruptions.

Invariants (checked by the helpers below, counted per case):

* no traceback: a command exits 0 or 2, an API call returns or raises :class:`mrcstats.errors.MrcstatsError`;
* no hang: every case runs under an alarm (:data:`HANG_SECONDS`);
* no silent row change: an accepted ingest accounts for each input row (rows + reported skipped = rows in);
* inputs never modified: every file of a case's folder hashed before and after (:func:`snapshot`);
* ``--json``: stdout is exactly one JSON object on success and empty on an error.

A generated *structured* file (:func:`log_files`) knows how many data rows it holds; a *corrupted* file
(:func:`corrupt`) has random bytes flipped, inserted or cut, and only the exit code, the absence of a
traceback and the untouched input are checked there.

Size: every test runs ``base x MRCSTATS_FUZZ_SCALE`` examples (default scale 1: about 10,000 cases a run;
``MRCSTATS_FUZZ_SCALE=10`` for a nightly run). Derandomized (CI runs the same cases every time) unless
``MRCSTATS_FUZZ_SEED`` is set (a nightly run can draw new cases with a new seed each night).
"""
from __future__ import annotations

import contextlib
import csv
import gzip
import hashlib
import io
import json
import math
import os
import signal
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import hypothesis
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st

from mrcstats.cli import main
from mrcstats.errors import MrcstatsError

#: multiplies every fuzz test's example count (nightly: 10)
SCALE = float(os.environ.get("MRCSTATS_FUZZ_SCALE", "1"))
#: a seed for new cases (unset: the same derandomized cases every run)
SEED = os.environ.get("MRCSTATS_FUZZ_SEED")
#: a case that takes longer than this is a hang
HANG_SECONDS = float(os.environ.get("MRCSTATS_FUZZ_HANG_SECONDS", "120"))
#: cases run, by kind (printed at the end of the session by tests/fuzz/conftest.py)
CASES: Counter = Counter()


def fuzz(base: int):
    """Hypothesis settings for a fuzz test of ``base`` examples (times :data:`SCALE`)."""
    conf = settings(max_examples=max(1, round(base * SCALE)), deadline=None, derandomize=SEED is None,
                    database=None, print_blob=True, suppress_health_check=list(HealthCheck))

    def deco(f):
        f = conf(f)
        return hypothesis.seed(int(SEED))(f) if SEED is not None else f
    return deco


#: the settings of the original suite (30 examples a test, times the scale)
FUZZ = fuzz(30)


class Hang(BaseException):
    """A case ran longer than :data:`HANG_SECONDS` (a BaseException: no ``except Exception`` swallows it)."""


@contextlib.contextmanager
def no_hang(seconds: float = HANG_SECONDS):
    """Raise :class:`Hang` in the main thread when the block runs longer than ``seconds`` (POSIX)."""
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_alarm(*_):
        raise Hang(f"no result after {seconds:g} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def api(kind: str, fn, *args, **kwargs):
    """Call an API entry point as one case: its result, or None when it refused the input with an
    :class:`MrcstatsError` (any other exception fails the test: a traceback for the user)."""
    CASES[kind] += 1
    with no_hang():
        try:
            return fn(*args, **kwargs)
        except MrcstatsError as exc:
            assert str(exc).strip(), f"{kind}: an error without a message"
            event(f"{kind}: refused")
            return None


def snapshot(folder: Path) -> dict[str, str]:
    """Every file below ``folder`` with its SHA-256 (inputs must be the same after a case)."""
    out = {}
    for p in sorted(Path(folder).rglob("*")):
        if p.is_file() and not p.is_symlink():
            out[str(p.relative_to(folder))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def check_unchanged(before: dict[str, str], folder: Path, what: str = "") -> None:
    after = snapshot(folder)
    changed = [k for k, v in before.items() if after.get(k) != v]
    assert not changed, f"input(s) modified or removed {what}: {changed}"


def check_json(r: Run, argv: list[str]) -> None:
    """``--json``: exactly one JSON object on stdout after success, nothing after an error."""
    if "--json" not in argv:
        return
    if r.code != 0:
        assert r.out == "", f"stdout after an error with --json: {r.out[:300]!r} for {argv}"
        return
    dec = json.JSONDecoder()
    obj, end = dec.raw_decode(r.out.lstrip())
    assert isinstance(obj, dict), f"--json printed a {type(obj).__name__}, not an object, for {argv}"
    assert not r.out.lstrip()[end:].strip(), f"more than one JSON value on stdout for {argv}: {r.out[end:][:200]!r}"
    for bad in ("NaN", "Infinity"):
        assert f": {bad}" not in r.out and f"[{bad}" not in r.out, f"bare {bad} in --json output for {argv}"


@dataclass
class Run:
    code: int
    out: str
    err: str


def run_cli(argv: list[str]) -> Run:
    """``mrcstats.cli.main(argv)`` in this process with stdout/stderr captured, under the hang alarm. Any
    exception escaping ``main`` (a traceback for the user) fails the test that called it."""
    out, err = io.StringIO(), io.StringIO()
    with no_hang(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse errors
            code = exc.code if isinstance(exc.code, int) else 2
    return Run(int(code), out.getvalue(), err.getvalue())


def check_clean(r: Run, argv: list[str]) -> None:
    """One CLI case: exit 0 or 2, no traceback on either stream, ``--json`` stdout one object."""
    CASES[f"cli {argv[0] if argv else ''}"] += 1
    check_json(r, argv)
    event(f"{argv[0]} exit {r.code}")
    if os.environ.get("MRCSTATS_FUZZ_SHOW"):
        last = r.err.strip().splitlines()[-1][:90] if r.err.strip() else ""
        event(f"{argv[0]}: {last}")
    assert r.code in (0, 2), f"exit {r.code} for {argv}: {r.err[-2000:]}"
    assert "Traceback" not in r.err and "Traceback" not in r.out, f"traceback for {argv}: {r.err[-2000:]}"
    if r.code == 2:
        assert "error" in r.err, f"exit 2 without a message for {argv}"


# ----------------------------------------------------------------------------- cell values
#: model and item names that broke something once, or could: case twins, CJK (long: 28 characters made
#: a partition folder name too long), mathtext, HTML, Markdown, path-like, very long, RTL, combining marks
NAMES: tuple[str, ...] = (
    "GPT-4o", "gpt-4o", "Gpt-4O", "\u6a21\u578b" * 14, "\u30e2\u30c7\u30eb", "$x^{$", "cost $x^2$ tier", "$$", "\\$",
    "<script>alert(1)</script>", "<b>b</b>", "a|b", "**bold**", "[l](javascript:x)", "`c`", "a/b", "..", ".",
    "model=x", "%2F", "a b", " lead", "trail ", "L" * 300, "\u05e2\u05d1\u05e8\u05d9\u05ea", "e\u0301", "\u00e9",
    "\u200bzw", "\U0001f600", "=1+1", "NA", "null", "0", "-1", "x,y", 'q"uote', "tab\there", "\u00df", "SS",
)
NAME_TEXT = st.one_of(st.sampled_from(NAMES),
                      st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=40))

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
NAME = st.one_of(st.sampled_from(["a", "b", "m1", "gpt-4", ""]), _TEXT, st.sampled_from(NAMES))
COLUMNS = ("model", "item", "correct", "trial", "condition", "masking_rate", "cluster", "question")


@dataclass
class LogFile:
    """A structured file: its bytes, suffix, and the number of data rows it holds."""

    data: bytes
    suffix: str
    n_rows: int
    columns: list[str]


_CLEAN = {"model": st.one_of(st.sampled_from(["a", "b", "c"]), st.sampled_from(NAMES)), "correct": st.sampled_from(["1", "0", "true", "false", "", "invalid"]),
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
            pairs = [(c, _py(v)) for c, v in zip(cols, r, strict=True)]
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
