"""Streaming ingest of CSV/TSV/JSONL into a dataset (issue 24 item 12): bounded memory, same rules and messages.

Before the fix (da0790c) ``ingest --dataset`` loaded every CSV/JSONL whole (a 417 MB JSONL peaked at 4.7 GB):
``test_large_files_are_never_loaded_whole`` failed there. The memory itself is measured by
``benchmarks/bench_ingest_stream.py`` (2 GB inputs), never in a test.
"""
from __future__ import annotations

import gzip
import json
import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mrcstats.errors import InputError
from mrcstats.io import read_log
from mrcstats.io.ingest import write_dataset
from mrcstats.io.schema import CORE_COLUMNS, KEY_COLUMNS

CORE = list(CORE_COLUMNS)


def _frame(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"model": rng.choice(["GPT-4o", "gpt-4o", "模型"], n), "item": [f"q{i:05d}" for i in range(n)],
                         "cluster": [f"c{i // 4}" for i in range(n)], "trial": rng.integers(0, 3, n),
                         "correct": rng.choice(["1", "0", "true", "invalid", ""], n),
                         "response": rng.choice(["a,b", "line\nbreak", "\"q\"", "", "N/A"], n),
                         "rating": rng.normal(size=n).round(3)})


def _write(df: pd.DataFrame, path, fmt: str):
    if fmt == "csv":
        df.to_csv(path, index=False)
    elif fmt == "tsv":
        df.to_csv(path, index=False, sep="\t")
    else:
        recs = [json.dumps({k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()}) for r in
                df.to_dict("records")]
        path.write_text("\n".join(recs[:3] + [""] + recs[3:]) + "\n")   # a blank line: line numbers still right
    return path


def _core(log) -> pd.DataFrame:
    df = log.to_log() if hasattr(log, "to_log") else log
    return df[CORE].sort_values(list(KEY_COLUMNS)).reset_index(drop=True)


@pytest.mark.parametrize("fmt", ["csv", "tsv", "jsonl", "csv.gz"])
def test_streamed_equals_whole_file(tmp_path, fmt):
    df = _frame(2500)
    src = _write(df, tmp_path / f"in.{fmt.split('.')[0]}", fmt.split(".")[0])
    if fmt.endswith(".gz"):
        gz = tmp_path / "in.csv.gz"
        gz.write_bytes(gzip.compress(b"\xef\xbb\xbf" + src.read_bytes()))   # gzip and a BOM
        src.unlink()
        src = gz
    streamed = write_dataset(src, tmp_path / "s", stream_bytes=0, chunk_rows=333)
    assert len(streamed.files) >= 8 * 3 - 2            # several chunks per model
    whole = read_log(src)
    pd.testing.assert_frame_equal(_core(streamed), _core(whole))
    got = streamed.to_log()
    assert str(got["rating"].dtype) == "string"        # other columns are text in a streamed file
    assert sorted(got["response"].dropna()) == sorted(whole["response"].dropna())


def test_large_files_are_never_loaded_whole(tmp_path, monkeypatch):
    from mrcstats.io import source

    src = _write(_frame(3000), tmp_path / "in.csv", "csv")
    jl = _write(_frame(3000), tmp_path / "in.jsonl", "jsonl")

    def refuse(path, *a, **k):
        raise AssertionError(f"{path} loaded whole")

    monkeypatch.setattr(source, "load_source", refuse)
    monkeypatch.setattr("mrcstats.io.detect.load_source", refuse)
    for f in (src, jl):
        ds = write_dataset(f, tmp_path / f"ds_{f.suffix[1:]}", stream_bytes=1000, chunk_rows=500)
        assert len(ds) == 3000


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
@pytest.mark.parametrize("bad", ["correct", "trial", "dup_within", "model"])
def test_errors_name_the_row_counted_from_the_top(tmp_path, fmt, bad):
    df = _frame(2000)
    if bad == "correct":
        df.loc[1234, "correct"] = "maybe"
    elif bad == "trial":
        df["trial"] = df["trial"].astype(object)
        df.loc[1501, "trial"] = "1.5"
    elif bad == "dup_within":
        df.loc[1401, ["model", "item", "trial"]] = df.loc[1400, ["model", "item", "trial"]].to_numpy()
    else:
        df.loc[1999, "model"] = ""
    if fmt == "jsonl" and bad == "model":
        df.loc[1999, "model"] = None
    src = _write(df, tmp_path / f"in.{fmt}", fmt)
    with pytest.raises(InputError) as whole:
        read_log(src)
    with pytest.raises(InputError) as streamed:
        write_dataset(src, tmp_path / "ds", stream_bytes=0, chunk_rows=300)
    assert str(streamed.value) == str(whole.value)
    assert not (tmp_path / "ds").exists() and sorted(p.name for p in tmp_path.iterdir()) == [src.name]


def test_jsonl_syntax_error_names_the_line(tmp_path):
    src = _write(_frame(1000), tmp_path / "in.jsonl", "jsonl")
    lines = src.read_text().splitlines()
    lines[700] = lines[700][:-1]       # line 701 is cut short
    src.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as whole:
        read_log(src)
    with pytest.raises(InputError) as streamed:
        write_dataset(src, tmp_path / "ds", stream_bytes=0, chunk_rows=128)
    assert str(streamed.value) == str(whole.value) and "line 701" in str(whole.value)


def test_duplicate_across_chunks_is_refused_and_first_reads_whole(tmp_path):
    df = _frame(1000)
    df.loc[900, ["model", "item", "trial"]] = df.loc[10, ["model", "item", "trial"]].to_numpy()
    src = _write(df, tmp_path / "in.csv", "csv")
    with pytest.raises(InputError, match=r"duplicate .*occurs 2 times.*--on-duplicate first\|last"):
        write_dataset(src, tmp_path / "ds", stream_bytes=0, chunk_rows=100)
    ds = write_dataset(src, tmp_path / "ds", stream_bytes=0, chunk_rows=100, on_duplicate="first")
    pd.testing.assert_frame_equal(_core(ds), _core(read_log(src, on_duplicate="first")))
    assert ds.skipped == read_log(src, on_duplicate="first").attrs["skipped"]


def test_a_field_missing_from_later_records(tmp_path):
    recs = [{"model": "m", "item": str(i), "correct": i % 2, **({"note": "x"} if i < 50 else {})} for i in range(100)]
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(map(json.dumps, recs)) + "\n")
    ds = write_dataset(src, tmp_path / "ds", stream_bytes=0, chunk_rows=30)
    assert ds.to_log()["note"].isna().sum() == 50
    src.write_text("\n".join(map(json.dumps, recs[::-1])) + "\n")   # the field only from row 51 on
    with pytest.raises(InputError, match=r"column 'note' first appears after data row 30"):
        write_dataset(src, tmp_path / "ds2", stream_bytes=0, chunk_rows=30)


def _where(msg: str) -> tuple[int, str]:
    m = re.search(r", row (\d+), column '(\w+)'", msg)
    assert m, msg
    return int(m.group(1)), m.group(2)


def _unquote(msg: str) -> str:
    return re.sub(r"got '([^']*)'", r"got \1", msg)


_CELL = st.sampled_from(["0", "1", "true", "", "invalid", "maybe", "2"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(st.sampled_from(["a", "B", "b"]), st.integers(0, 30), st.sampled_from(["0", "1", "",
                                                                                                        "x"]), _CELL),
                     min_size=1, max_size=60),
       chunk=st.integers(1, 25), fmt=st.sampled_from(["csv", "jsonl"]))
def test_streaming_property(tmp_path_factory, rows, chunk, fmt):
    """Any small table: the streamed dataset equals the whole-file read, or both refuse it with one message."""
    d = tmp_path_factory.mktemp("s")
    df = pd.DataFrame(rows, columns=["model", "item", "trial", "correct"]).astype({"item": str})
    src = _write(df, d / f"in.{fmt}", fmt)
    try:
        whole = read_log(src)
    except InputError as exc:
        with pytest.raises(InputError) as streamed:
            write_dataset(src, d / "ds", stream_bytes=0, chunk_rows=chunk)
        if "duplicate" in str(exc):       # found across chunks at the end: the same key, its own wording
            assert "duplicate" in str(streamed.value)
            return
        # a chunk may meet a bad row of another column first (the whole file is checked column by column),
        # and a value is shown as a chunk's parser typed it ('2' in a column of words, 2 in one of numbers)
        w = _where(str(exc))
        if "duplicate" in str(streamed.value):  # a key repeated inside a chunk that ends before the bad row
            m = re.search(r" at rows (\d+) and (\d+)", str(streamed.value))
            assert m and int(m.group(2)) <= w[0], (exc, streamed.value)
            return
        s = _where(str(streamed.value))
        assert s[0] <= w[0] and (s != w or _unquote(str(streamed.value)) == _unquote(str(exc))), (exc, streamed.value)
        return
    pd.testing.assert_frame_equal(_core(write_dataset(src, d / "ds", stream_bytes=0, chunk_rows=chunk)), _core(whole))


_ID = st.one_of(st.integers(-4, 4).map(lambda d: 2**53 + d), st.integers(-4, 4).map(lambda d: -(2**53) + d),
                st.integers(2**63 - 2, 2**64 + 2), st.integers(0, 9), st.sampled_from([1.5, 2.0, 0.1, -3.25]),
                st.sampled_from(["q1", "9007199254740993", "x"]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ids=st.lists(_ID, min_size=1, max_size=30, unique_by=lambda v: (type(v), v)), chunk=st.integers(1, 12),
       missing=st.booleans())
def test_integer_ids_keep_their_digits(tmp_path_factory, ids, chunk, missing):
    """JSON integer ids near and above 2**53 beside non-integers (and a missing cluster): the digits written are
    the item read, and the streamed dataset equals the whole-file read (no float round trip in either)."""
    d = tmp_path_factory.mktemp("ids")
    recs = [{"model": "m", "item": v, "cluster": None if missing and i == 0 else v, "correct": i % 2}
            for i, v in enumerate(ids)]
    src = d / "in.jsonl"
    src.write_text("\n".join(map(json.dumps, recs)) + "\n")
    want = [str(v) if isinstance(v, (int, str)) else (str(int(v)) if v.is_integer() else repr(v)) for v in ids]
    if len(set(want)) < len(want):          # "2.0" and 2 are one item (and "9007199254740993" twice): refused
        with pytest.raises(InputError, match="duplicate"):
            read_log(src)
        return
    whole = read_log(src)
    assert sorted(whole["item"]) == sorted(want)
    streamed = write_dataset(src, d / "ds", stream_bytes=0, chunk_rows=chunk)
    pd.testing.assert_frame_equal(_core(streamed), _core(whole))
    # a JSON document of records and one of columns read the same
    (d / "doc.json").write_text(json.dumps(recs))
    (d / "cols.json").write_text(json.dumps({k: [r[k] for r in recs] for k in recs[0]}))
    for doc in ("doc.json", "cols.json"):
        pd.testing.assert_frame_equal(_core(read_log(d / doc)), _core(whole))
