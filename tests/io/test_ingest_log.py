"""ingest_log (``mrcstats ingest --out``): a streamed file gives exactly the log the whole-file read writes."""
from __future__ import annotations

import gzip
import json

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mrcstats.errors import InputError
from mrcstats.io import log_stats, read_log, write_log
from mrcstats.io.ingest_log import ingest_log


def _whole(src, out, **kw):
    log = read_log(src, **kw)
    write_log(log, out)
    return log_stats(log)


def _same(a, b) -> None:
    """Same rows, columns, types, order, pandas metadata and attrs."""
    ta, tb = pq.read_table(a), pq.read_table(b)
    assert ta.schema.equals(tb.schema, check_metadata=True), (ta.schema, tb.schema)
    assert ta.equals(tb)
    fa, fb = pd.read_parquet(a), pd.read_parquet(b)
    pd.testing.assert_frame_equal(fa, fb)
    assert fa.attrs == fb.attrs


def _check(tmp_path, src, *, streamed=True, chunk_rows=7, out="s.parquet", **kw):
    res = ingest_log(src, tmp_path / out, stream_bytes=0, chunk_rows=chunk_rows, **kw)
    stats = _whole(src, tmp_path / f"w{out}", **kw)
    assert res.streamed is streamed
    assert res.stats == stats
    if out.endswith(".parquet"):
        _same(tmp_path / out, tmp_path / f"w{out}")
    else:
        opener = gzip.open if out.endswith(".gz") else open
        with opener(tmp_path / out, "rb") as fa, opener(tmp_path / f"w{out}", "rb") as fb:
            assert fa.read() == fb.read()
    return res


def _log(n: int = 60, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    i = np.arange(n)
    return pd.DataFrame({
        "model": np.array(["org/a", "b", "007"])[i % 3], "item": [f"{k // 3:03d}" for k in i],
        "trial": (i // 30) % 2, "condition": np.array(["", "masked"])[(i // 15) % 2],
        "correct": np.where(i % 11 == 0, "", rng.integers(0, 2, n).astype(str)),
        "response": [f'he said "{k}",\nthen left' if k % 9 == 0 else f"ans {k}" for k in i],
        "n_tokens": i * 10, "temp": np.round(rng.random(n), 4), "flag": i % 2 == 0, "note": ["ok"] * n})


def test_csv_several_models_quoted_line_breaks(tmp_path):
    _log().to_csv(tmp_path / "a.csv", index=False)
    _check(tmp_path, tmp_path / "a.csv")
    _check(tmp_path, tmp_path / "a.csv", out="s.csv")
    _check(tmp_path, tmp_path / "a.csv", out="s.tsv.gz")


def test_csv_missing_cells_in_a_later_chunk(tmp_path):
    # ints in the first chunks, an empty cell later: the whole file types the column float64 (a second pass);
    # a text column empty in the first chunk; a number column empty in one chunk
    df = _log()
    df["n_tokens"] = df["n_tokens"].astype(object)
    df.loc[50, "n_tokens"] = None
    df.loc[:20, "note"] = None
    df.loc[30:40, "temp"] = None
    df.to_csv(tmp_path / "a.csv", index=False)
    _check(tmp_path, tmp_path / "a.csv")


def test_csv_mixed_types_read_whole(tmp_path):
    # numbers then words in one column: the whole file keeps the numbers as written (text), chunks cannot
    df = _log()
    df["note"] = [f"{k:02d}" for k in range(len(df))]
    df.loc[55, "note"] = "n/a"
    df.to_csv(tmp_path / "a.csv", index=False)
    _check(tmp_path, tmp_path / "a.csv", streamed=False)


def test_graded_scores_after_binary_ones(tmp_path):
    # a score column alone: 0/1 in the first chunks, graded later -> correct <NA> throughout (a second pass)
    df = _log().drop(columns=["correct"])
    df["score"] = np.where(np.arange(len(df)) < 40, np.arange(len(df)) % 2, 0.25).astype(float)
    df.loc[3, "score"] = None
    df.to_csv(tmp_path / "g.csv", index=False)
    res = _check(tmp_path, tmp_path / "g.csv")
    assert res.stats["outcome"] == "score"
    _check(tmp_path, tmp_path / "g.csv", threshold=0.5)
    df["score"] = np.arange(len(df)) % 2      # all 0/1: binary
    df.to_csv(tmp_path / "b.csv", index=False)
    assert "outcome" not in _check(tmp_path, tmp_path / "b.csv").stats


def test_jsonl_nested_absent_keys_lists(tmp_path):
    rows = []
    for k in range(50):
        r = {"model": ["m1", "m2"][k % 2], "item": k // 2, "correct": [True, False, None][k % 3],
             "meta": {"src": "a", "len": k}, "choices": ["A", "B"] if k % 4 else ["C"]}
        if k >= 30:
            r["late"] = k          # a key only in later records (missing before: float64 in the whole file)
            r["meta"]["extra"] = "x"
        if k % 10 == 5:
            r["score_note"] = None
        rows.append(r)
    (tmp_path / "a.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n\n", encoding="utf-8")
    _check(tmp_path, tmp_path / "a.jsonl", format="jsonl")
    _check(tmp_path, tmp_path / "a.jsonl")          # detected


def test_mapping_and_model(tmp_path):
    df = _log()
    df.insert(0, "qid", df["model"] + ":" + df["item"])
    df = df.drop(columns=["model", "item"])
    df.to_csv(tmp_path / "a.csv", index=False)
    _check(tmp_path, tmp_path / "a.csv", mapping={"item": "qid"}, model="solo")


def _same_error(tmp_path, df: pd.DataFrame) -> str:
    """The streamed ingest refuses ``df`` (as a CSV) with the whole-file read's message and writes nothing."""
    df.to_csv(tmp_path / "a.csv", index=False)
    with pytest.raises(InputError) as whole:
        read_log(tmp_path / "a.csv")
    with pytest.raises(InputError) as streamed:
        ingest_log(tmp_path / "a.csv", tmp_path / "s.parquet", stream_bytes=0, chunk_rows=7)
    assert str(streamed.value) == str(whole.value)
    assert not (tmp_path / "s.parquet").exists()
    return str(streamed.value)


def test_duplicate_across_chunks_worded_as_whole(tmp_path):
    df = _log()
    df.loc[50, ["model", "item", "trial", "condition"]] = df.loc[2, ["model", "item", "trial", "condition"]]
    assert "duplicate" in _same_error(tmp_path, df)


def test_bad_value_in_a_later_chunk_names_its_row(tmp_path):
    df = _log()
    df.loc[44, "correct"] = "maybe"
    assert "row 45" in _same_error(tmp_path, df)


def test_small_file_is_read_whole(tmp_path):
    _log().to_csv(tmp_path / "a.csv", index=False)
    res = ingest_log(tmp_path / "a.csv", tmp_path / "s.parquet")
    assert not res.streamed


def test_cli_out_streams(tmp_path, monkeypatch, capsys):
    from mrcstats.cli import main
    from mrcstats.io import stream

    _log().to_csv(tmp_path / "a.csv", index=False)
    monkeypatch.setattr(stream, "STREAM_BYTES", 0)
    assert main(["ingest", str(tmp_path / "a.csv"), "--out", str(tmp_path / "s.parquet"), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got == json.loads(json.dumps(_whole(tmp_path / "a.csv", tmp_path / "w.parquet")))
    _same(tmp_path / "s.parquet", tmp_path / "w.parquet")


_CELLS = {
    "int": st.integers(-10**6, 10**6).map(str),
    "float": st.floats(-1e6, 1e6, allow_nan=False).map(repr),
    "bool": st.sampled_from(["True", "false"]),
    "word": st.sampled_from(["a", "x y", "07", "NA", "n/a"]),
    "empty": st.just(""),
}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kinds=st.lists(st.lists(st.sampled_from(sorted(_CELLS)), min_size=1, max_size=3), min_size=1, max_size=3),
       data=st.data(), chunk=st.integers(1, 9))
def test_property_streamed_equals_whole(tmp_path, kinds, data, chunk):
    """Extra columns whose cells change kind along the file: streamed (or read whole) = the whole-file log."""
    n = 20
    df = _log(n)[["model", "item", "correct"]]
    df["item"] = [f"i{k}" for k in range(n)]
    for j, allowed in enumerate(kinds):
        df[f"x{j}"] = [data.draw(_CELLS[data.draw(st.sampled_from(allowed))]) for _ in range(n)]
    df.to_csv(tmp_path / "p.csv", index=False)
    res = ingest_log(tmp_path / "p.csv", tmp_path / "s.parquet", stream_bytes=0, chunk_rows=chunk)
    assert res.stats == _whole(tmp_path / "p.csv", tmp_path / "w.parquet")
    _same(tmp_path / "s.parquet", tmp_path / "w.parquet")
