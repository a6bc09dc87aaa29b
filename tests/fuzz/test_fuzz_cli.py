"""Fuzz every command that reads a log or a table: exit 0 or 2, never a traceback or a hang, and no
silent row change (rows accepted + rows reported skipped = rows in the input).

Hostile inputs come from :mod:`tests.fuzz._gen`: nasty cell values (NaN, inf, 1e30, 2^63, text in
number columns, formulas, zero-width characters), duplicate and missing column names, UTF-8 with and
without BOM, UTF-16, CRLF and bare-CR line endings, gzip, JSON with repeated keys and NaN constants,
Parquet with typed columns, randomly corrupted bytes, and bad paths. The CLI runs in-process
(``mrcstats.cli.main``). Size: see :mod:`tests.fuzz._gen` (``MRCSTATS_FUZZ_SCALE``); derandomized, so CI
runs the same examples every time.
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ._gen import (
    LogFile,
    check_clean,
    check_unchanged,
    corrupt,
    fuzz,
    log_files,
    run_cli,
    skipped_total,
    snapshot,
    write,
)

pytestmark = pytest.mark.fuzz


def _ingest(p: Path, *extra: str):
    argv = ["ingest", str(p), "--json", *extra]
    before = snapshot(p.parent)
    r = run_cli(argv)
    check_clean(r, argv)
    check_unchanged(before, p.parent, str(argv))
    return r


@fuzz(150)
@given(f=log_files(clean=True), policy=st.sampled_from(["error", "first", "last"]), roundtrip=st.booleans())
def test_ingest_accounts_for_every_row(f: LogFile, policy: str, roundtrip: bool) -> None:
    with tempfile.TemporaryDirectory() as d:
        p = write(Path(d), "in" + f.suffix, f.data)
        r = _ingest(p, "--on-duplicate", policy)
        if r.code == 0:
            obj = json.loads(r.out)
            assert obj["rows"] + skipped_total(obj) == f.n_rows, (obj, f.n_rows)
            if not roundtrip:
                return
            # the written log reads back with the same rows
            out = Path(d) / "log.parquet"
            r2 = run_cli(["ingest", str(p), "--on-duplicate", policy, "--out", str(out), "--json"])
            assert r2.code == 0 and json.loads(r2.out)["rows"] == obj["rows"]
            r3 = _ingest(out)
            assert r3.code == 0 and json.loads(r3.out)["rows"] == obj["rows"]


@fuzz(150)
@given(f=log_files())
def test_ingest_hostile_values(f: LogFile) -> None:
    with tempfile.TemporaryDirectory() as d:
        p = write(Path(d), "in" + f.suffix, f.data)
        r = _ingest(p)
        if r.code == 0:
            obj = json.loads(r.out)
            assert obj["rows"] + skipped_total(obj) == f.n_rows


@fuzz(150)
@given(data=st.data())
def test_ingest_corrupted_bytes(data) -> None:
    f = data.draw(log_files(formats=("csv", "tsv", "jsonl", "json")))
    raw = data.draw(corrupt(f))
    with tempfile.TemporaryDirectory() as d:
        _ingest(write(Path(d), "in" + f.suffix, raw))


_LOG_ARGV = {
    "summary": ["summary", "{p}", "--json", "--on-duplicate", "first"],
    "discrim": ["discrim", "{p}", "--bootstrap", "20", "--seed", "1", "--json", "--on-duplicate", "first"],
    "mcnemar": ["mcnemar", "{p}", "--models", "a,b", "--json", "--on-duplicate", "last"],
    "masking": ["masking", "{p}", "--json"],
    "glmer": ["glmer", "{p}", "--formula", "correct ~ trial + (1 | cluster)", "--json"],
    "features": ["features", "{p}", "--parser", "none", "--no-cache", "--json"],
    "score": ["elagent", "score", "{p}", "--json"],
    "agreement": ["agreement", "{p}", "--item", "item", "--rater", "model", "--rating", "correct", "--level",
                  "ordinal", "--bootstrap", "20", "--json"],
    "judge": ["judge", "{p}", "--human", "correct", "--judge", "masking_rate", "--bootstrap", "0", "--json"],
    "screen": ["screen", "{p}", "--json", "--on-duplicate", "first"],
}


@pytest.mark.parametrize("cmd", sorted(_LOG_ARGV))
@fuzz(40)
@given(data=st.data())
def test_log_commands(cmd: str, data) -> None:
    """Every other command that reads a log, on the same generated files (clean, hostile and corrupted):
    clean exits; summary counts every accepted row (= ingest's rows)."""
    kind = data.draw(st.sampled_from(["clean", "clean", "hostile", "corrupt"]))
    f = data.draw(log_files(clean=kind == "clean"))
    raw = data.draw(corrupt(f)) if kind == "corrupt" and f.suffix != ".parquet" else f.data
    with tempfile.TemporaryDirectory() as d:
        p = write(Path(d), "in" + f.suffix, raw)
        argv = [a.replace("{p}", str(p)) for a in _LOG_ARGV[cmd]]
        before = snapshot(Path(d))
        r = run_cli(argv)
        check_clean(r, argv)
        check_unchanged(before, Path(d), str(argv))
        if cmd == "summary" and r.code == 0:
            ing = run_cli(["ingest", str(p), "--json", "--on-duplicate", "first"])
            assert ing.code == 0
            obj = json.loads(ing.out)
            assert sum(g["n"] for g in json.loads(r.out)["groups"]) == obj["rows"]
            if raw == f.data:
                assert obj["rows"] + skipped_total(obj) == f.n_rows


_BAD_COUNT = st.sampled_from(["", "-1", "1.5", "1e30", "inf", "nan", "x", "1000000000", "2e7", " 3 ", "1e3"])


@fuzz(100)
@given(nr=st.integers(1, 4), nc=st.integers(1, 4), data=st.data(), cmd=st.sampled_from(["fisher", "chisq"]),
       sim=st.booleans())
def test_count_tables(nr: int, nc: int, data, cmd: str, sim: bool) -> None:
    dup = data.draw(st.integers(0, 9)) == 0
    cols = [data.draw(st.sampled_from(["a", "b", "a", ""])) if dup else f"c{j}" for j in range(nc)]
    bad = data.draw(st.sampled_from([0, 0, 0, 5, 30]))  # percent of bad cells
    lines = ["," + ",".join(cols)]
    for i in range(nr):
        lines.append(f"r{i}," + ",".join(data.draw(_BAD_COUNT) if data.draw(st.integers(0, 99)) < bad
                                         else str(data.draw(st.integers(0, 40))) for _ in range(nc)))
    raw = ("\r\n" if data.draw(st.booleans()) else "\n").join(lines).encode()
    if data.draw(st.integers(0, 4)) == 0:
        raw = data.draw(corrupt(LogFile(raw, ".csv", nr, cols)))
    with tempfile.TemporaryDirectory() as d:
        p = write(Path(d), "t.csv", raw)
        argv = [cmd, str(p), "--json"] + (["--simulate", "--B", "50", "--seed", "1"] if cmd == "fisher" and sim
                                          else [])
        check_clean(run_cli(argv), argv)


@fuzz(60)
@given(data=st.data())
def test_mskcal_outputs(data) -> None:
    models = data.draw(st.lists(st.sampled_from(["m", "gpt", "a_b", ""]), min_size=1, max_size=2))
    rates = data.draw(st.lists(st.sampled_from(["0", "50", "100", "x", "1e30"]), min_size=1, max_size=3))
    cols = [f"answer_{m}_{r}" for m in models for r in rates]
    rows = [",".join(data.draw(st.sampled_from(["P = 62,500 yen", "", "[1.98 billion]", "NR = 3", "nan",
                                                 "\u00e9\u200b", '"a,b"'])) for _ in cols)
            for _ in range(data.draw(st.integers(1, 3)))]
    raw = ("\n".join([",".join(cols), *rows]) + "\n").encode()
    if data.draw(st.booleans()):
        raw = data.draw(corrupt(LogFile(raw, ".csv", len(rows), cols)))
    with tempfile.TemporaryDirectory() as d:
        p = write(Path(d), "answer_MskCal_1.csv", raw)
        argv = ["mskcal", str(p), "--json"]
        check_clean(run_cli(argv), argv)


_PATHS = st.sampled_from(["missing.csv", "dir", "emptydir", "a b.csv", "\u00fc\u00e9.csv", "x.parquet",
                          ".hidden.csv", "L" * 300 + ".csv", "in.csv/x.csv", "", " ", "dir/in.csv", "-"])
_OUTS = st.sampled_from(["ok.parquet", "ok.csv", "ok.tsv.gz", "x.txt", "x.xlsx", "dir", "in.csv/x.parquet",
                         "in.csv", "new/sub/ok.parquet", "\u00fc.parquet", "L" * 300 + ".parquet", "", "OK.PARQUET"])


@fuzz(120)
@given(path=_PATHS, out=_OUTS, cmd=st.sampled_from(["ingest", "summary", "glmer", "discrim", "fisher",
                                                    "features"]))
def test_paths(path: str, out: str, cmd: str) -> None:
    """Bad input and output paths: one clear line, exit 2; an input is never overwritten."""
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        text = b"model,item,correct\na,1,1\nb,1,0\n"
        (root / "in.csv").write_bytes(text)
        (root / "dir").mkdir()
        (root / "dir" / "in.csv").write_bytes(text)
        (root / "emptydir").mkdir()
        for name in ("a b.csv", "\u00fc\u00e9.csv", "x.parquet", ".hidden.csv"):
            (root / name).write_bytes(text)
        src = str(root / path) if path.strip() and path != "-" else path
        argv = {"ingest": ["ingest", src, "--out", str(root / out) if out else ""],
                "summary": ["summary", src], "glmer": ["glmer", src, "--formula", "correct ~ 1 + (1 | item)"],
                "discrim": ["discrim", src, "--bootstrap", "0"], "fisher": ["fisher", src],
                "features": ["features", src, "--parser", "none", "--no-cache", "--out", str(root / out)]}[cmd]
        before = snapshot(root)
        check_clean(run_cli(argv), argv)
        written = {out, f"{Path(out).stem}.pdf"}  # --out may replace a file that is not an input
        check_unchanged({k: v for k, v in before.items() if k not in written}, root, str(argv))


_VERDICT_CELL = st.sampled_from(["", "keep", "rekey", "drop", "KEEP", " drop ", "maybe", "A", "B", "Z", "a0", "i0",
                                 "i1", "nope", "=1+1", "\u200b", "1e30", "nan", "ann", "2026-11-27", "\"x,y\""])


@fuzz(80)
@given(data=st.data())
def test_relabel_hostile_verdicts(data) -> None:
    """relabel with hostile review files on a clean log: exit 0 or 2, never a traceback; the log and the review
    file unchanged; the output written whole (a log that reads back) or not at all."""
    rows = ["model,item,correct,gold,pred"]
    for j in range(3):
        for i in range(4):
            rows.append(f"m{j},i{i},{int((i + j) % 3 == 0)},A,{'A' if (i + j) % 3 == 0 else 'B'}")
    head = data.draw(st.sampled_from(["item,verdict,new_key,reviewer,reason", "item,verdict,new_key", "item,verdict",
                                      "verdict,new_key", "item,,verdict", "Item,Verdict,New_Key"]))
    n = len(head.split(","))
    lines = [head] + [",".join(data.draw(_VERDICT_CELL) for _ in range(n)) for _ in range(data.draw(st.integers(0, 5)))]
    with tempfile.TemporaryDirectory() as d:
        log = write(Path(d), "log.csv", ("\n".join(rows) + "\n").encode())
        ver = write(Path(d), "review.csv", ("\n".join(lines) + "\n").encode())
        before = snapshot(Path(d))
        out = Path(d) / "fixed.parquet"
        argv = ["relabel", str(log), "--verdicts", str(ver), "--out", str(out), "--json"]
        r = run_cli(argv)
        check_clean(r, argv)
        check_unchanged(before, Path(d), str(argv))
        if r.code == 0:
            from mrcstats.io import read_log

            assert "relabel" in read_log(out).attrs
        else:
            assert not out.exists()
