"""API-level fuzz: the Python entry points on generated input, thousands of cheap cases.

Every case: an :class:`~mrcstats.errors.MrcstatsError` or a result, never another exception; under the hang
alarm; the input files untouched. Accepted reads account for each input row; grouping, escaping and
figure text keep names as data.
"""
from __future__ import annotations

import html
import json
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ._gen import (
    CASES,
    NAME_TEXT,
    NAMES,
    LogFile,
    api,
    check_unchanged,
    corrupt,
    fuzz,
    log_files,
    snapshot,
    write,
)

pytestmark = pytest.mark.fuzz


def _accounted(log: pd.DataFrame, n_rows: int) -> None:
    skipped = sum(int(v) for v in (log.attrs.get("skipped") or {}).values())
    assert len(log) + skipped == n_rows, (len(log), skipped, n_rows)


@fuzz(1500)
@given(f=log_files(), policy=st.sampled_from(["error", "first", "last"]))
def test_read_log_files(f: LogFile, policy: str) -> None:
    """read_log on generated files (every format, encoding, line ending, gzip, hostile cells and names)."""
    with tempfile.TemporaryDirectory() as d:
        p = write(Path(d), "in" + f.suffix, f.data)
        before = snapshot(Path(d))
        log = api("read_log", __import__("mrcstats").read_log, p, on_duplicate=policy)
        check_unchanged(before, Path(d))
        if log is not None:
            _accounted(log, f.n_rows)
            assert list(log.columns[:11]) == ["model", "item", "cluster", "trial", "condition", "masking_rate",
                                              "correct", "score", "response", "gold", "pred"]


@fuzz(1000)
@given(f=log_files(clean=True), fmt=st.sampled_from([None, "csv", "tsv", "json", "jsonl", "parquet"]))
def test_read_log_clean_files_roundtrip(f: LogFile, fmt) -> None:
    """A clean file reads (or is refused for a stated reason, e.g. a forced wrong format); what reads
    writes and reads back the same through write_log (Parquet and CSV)."""
    from mrcstats import read_log, write_log

    with tempfile.TemporaryDirectory() as d:
        p = write(Path(d), "in" + f.suffix, f.data)
        log = api("read_log", read_log, p, format=fmt, on_duplicate="first")
        if log is None:
            return
        _accounted(log, f.n_rows)
        out = Path(d) / "out.parquet"
        if api("write_log", write_log, log, out) is not None:
            back = api("read_log", read_log, out)
            assert back is not None and len(back) == len(log)
            assert back["model"].tolist() == log["model"].tolist()
            assert back["correct"].isna().sum() == log["correct"].isna().sum()


@fuzz(1000)
@given(data=st.data())
def test_read_log_corrupted_bytes(data) -> None:
    f = data.draw(log_files())
    raw = data.draw(corrupt(f))
    with tempfile.TemporaryDirectory() as d:
        p = write(Path(d), "in" + f.suffix, raw)
        before = snapshot(Path(d))
        api("read_log corrupt", __import__("mrcstats").read_log, p)
        check_unchanged(before, Path(d))


_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-2, 3), st.floats(allow_nan=True, allow_infinity=True),
                    st.sampled_from(["", "1", "0", "true", "x", "NaN", "1e30", " 2 "]), NAME_TEXT)


@st.composite
def frames(draw) -> pd.DataFrame:
    """A hand-built frame: canonical columns (sometimes missing) of any dtype."""
    n = draw(st.integers(0, 8))
    cols = {}
    for c in ("model", "item", "correct", "trial", "condition", "masking_rate", "cluster", "extra"):
        if c not in ("model", "item", "correct") and draw(st.booleans()):
            continue
        if c in ("model", "item", "correct") and draw(st.integers(0, 19)) == 0:
            continue
        vals = draw(st.lists(_VALUES, min_size=n, max_size=n))
        kind = draw(st.sampled_from(["object", "object", "string", "Float64", "Int64", "boolean", "category",
                                     "float"]))
        s = pd.Series(vals, dtype=object)
        try:
            s = s.astype(kind) if kind != "float" else pd.to_numeric(s, errors="coerce").astype(float)
        except (TypeError, ValueError, OverflowError, ArithmeticError):
            pass  # not every value fits every dtype: the column stays object
        cols[c] = s
    return pd.DataFrame(cols, index=pd.RangeIndex(n))


@fuzz(1200)
@given(df=frames(), policy=st.sampled_from(["error", "first", "last"]))
def test_validate_log_frames(df: pd.DataFrame, policy: str) -> None:
    from mrcstats import validate_log

    copy = df.copy(deep=True)
    out = api("validate_log", validate_log, df, on_duplicate=policy)
    pd.testing.assert_frame_equal(df, copy)  # the input frame is never modified
    if out is not None:
        _accounted(out, len(df))
        assert str(out["trial"].dtype) == "int64" and str(out["correct"].dtype) == "boolean"


@pytest.fixture(scope="module")
def small_logs(tmp_path_factory):
    """A canonical log with hostile names and an extra column, in memory and as a dataset."""
    from mrcstats.io import read_log
    from mrcstats.io.dataset import open_dataset
    from mrcstats.io.ingest import write_dataset

    d = tmp_path_factory.mktemp("fz")
    rng = np.random.default_rng(0)
    names = ["GPT-4o", "gpt-4o", "$x^{$", "<script>x</script>", "a|b"]
    rows = [{"model": m, "item": str(i), "correct": int(rng.integers(0, 2)), "trial": t, "condition": c,
             "cluster": f"c{i // 2}", "gold": "g", "score": 0.5, "note": "n"}
            for m in names for i in range(6) for t in (0, 1) for c in ("x", "y")]
    pd.DataFrame(rows).to_csv(d / "log.csv", index=False)
    log = read_log(d / "log.csv")
    ds = None
    if api("write_dataset", write_dataset, d / "log.csv", d / "ds") is not None:
        ds = open_dataset(d / "ds")
    return log, ds


_GROUP = st.sampled_from(["model", "item", "cluster", "trial", "condition", "masking_rate", "correct", "response",
                          "pred", "gold", "score", "Model", "MODEL", "note", "nope", "", " model", "model,condition"])


@fuzz(1200)
@given(by=st.one_of(_GROUP, st.lists(_GROUP, max_size=4), st.just(3), st.just([None])),
       invalid=st.sampled_from(["wrong", "exclude"]), trials=st.sampled_from(["pool", "mean"]),
       cluster=st.sampled_from(["cluster", "item", "correct", "nope"]), on_ds=st.integers(0, 19))
def test_summarize_grouping(small_logs, by, invalid, trials, cluster, on_ds) -> None:
    """summarize(by=...) accepts distinct known groupable columns and refuses the rest with one message,
    the same in memory and on a dataset; every accepted grouping counts each row once."""
    from mrcstats.errors import InputError
    from mrcstats.stats.accuracy import summarize

    log, ds = small_logs
    CASES["summarize"] += 1
    try:
        res = summarize(log, by=by, invalid=invalid, trials=trials, cluster=cluster)
        mem = None
    except InputError as exc:
        res, mem = None, str(exc)
    if res is not None:
        assert int(res.to_frame()["n"].sum()) == len(log)
        names = [by] if isinstance(by, str) else list(by)
        assert len(set(names)) == len(names) and not {"correct", "response", "pred", "score"} & set(names)
    if ds is not None and on_ds == 0:  # a sample on the dataset: the same answer or the same message
        CASES["summarize dataset"] += 1
        try:
            dres, dmsg = summarize(ds, by=by, invalid=invalid, trials=trials, cluster=cluster), None
        except InputError as exc:
            dres, dmsg = None, str(exc)
        assert dmsg == mem, (by, dmsg, mem)
        if res is not None:
            assert int(dres.to_frame()["n"].sum()) == len(log)


@fuzz(2000)
@given(text=st.one_of(NAME_TEXT, st.text(max_size=30), st.sampled_from(NAMES)))
def test_names_are_data_in_tables_and_figures(text: str) -> None:
    """Markdown, LaTeX and HTML cells give the name back; figure text is never mathtext."""
    from matplotlib.text import Text

    from mrcstats.report.figures import plain
    from mrcstats.report.tables import _md_split, latex_escape, latex_unescape, md_escape

    CASES["escape"] += 1
    md = md_escape(text)
    assert "<" not in md and ">" not in md and "\n" not in md
    one_line = text.replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
    assert _md_split("| " + md + " |") == [one_line.strip()]
    assert latex_unescape(latex_escape(text)) == text
    shown, is_math = Text(text=plain(text))._preprocess_math(plain(text))
    assert shown == text and not is_math
    assert html.unescape(html.escape(text)) == text


@fuzz(400)
@given(field=st.sampled_from(["correct", "model", "item", "trial", "condition", "masking_rate", "cluster"]),
       value=st.one_of(st.dictionaries(st.sampled_from(["value", "v", "a"]), st.booleans(), max_size=2),
                       st.lists(st.integers(0, 1), max_size=2)),
       row=st.integers(0, 3), fmt=st.sampled_from(["jsonl", "json"]))
def test_json_structured_values_refused(field: str, value, row: int, fmt: str) -> None:
    """A JSON object or array in a one-value field is refused naming the file, row and column (never a row
    that silently turns invalid)."""
    from mrcstats import read_log

    recs = [{"model": "a", "item": str(i), "correct": 1} for i in range(4)]
    recs[row][field] = value
    text = "\n".join(json.dumps(r) for r in recs) if fmt == "jsonl" else json.dumps(recs)
    with tempfile.TemporaryDirectory() as d:
        p = write(Path(d), f"in.{fmt}", text.encode())
        CASES["json structured"] += 1
        from mrcstats.errors import InputError

        with pytest.raises(InputError, match=rf"row {row + 1}, column '{field}'"):
            read_log(p)


@fuzz(400)
@given(vals=st.lists(st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True), st.integers(0, 3)),
                     min_size=1, max_size=6),
       kind=st.sampled_from(["float64", "float32", "int64", "string"]), column=st.sampled_from(["trial", "masking_rate"]))
def test_parquet_nan_and_null(vals, kind: str, column: str) -> None:
    """Parquet NaN (refused for a trial) is not null (an empty cell); accepted files keep every row."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from mrcstats import read_log

    n = len(vals)
    try:
        arr = pa.array([None if v is None else (str(v) if kind == "string" else v) for v in vals],
                       type=pa.string() if kind == "string" else getattr(pa, kind)())
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "in.parquet"
        pq.write_table(pa.table({"model": ["a"] * n, "item": [str(i) for i in range(n)], "correct": [True] * n,
                                 column: arr}), p)
        log = api("read_log parquet", read_log, p)
        has_nan = any(isinstance(v, float) and np.isnan(v) for v in vals) and kind.startswith("float")
        if column == "trial" and has_nan:
            assert log is None
        if log is not None:
            assert len(log) == n


@fuzz(300)
@given(f=log_files(formats=("csv", "tsv", "jsonl")), chunk=st.integers(1, 5), out=st.sampled_from(["parquet", "csv"]))
def test_ingest_out_streamed_equals_whole(f: LogFile, chunk: int, out: str) -> None:
    """ingest_log streamed in chunks (stream_bytes=0) writes exactly the whole-file log, or refuses what the
    whole-file read refuses (the message may name an earlier bad row), leaving no file."""
    import pyarrow.parquet as pq

    from mrcstats.io import read_log, write_log
    from mrcstats.io.ingest_log import ingest_log
    from mrcstats.io.schema import log_stats

    with tempfile.TemporaryDirectory() as d:
        p = write(Path(d), "in" + f.suffix, f.data)
        before = snapshot(Path(d))
        whole = api("read_log", read_log, p)
        res = api("ingest_log streamed", ingest_log, p, Path(d) / f"s.{out}", stream_bytes=0, chunk_rows=chunk)
        assert (whole is None) == (res is None), (whole is None, res)
        check_unchanged(before, Path(d), "ingest_log")
        if whole is None:
            assert not (Path(d) / f"s.{out}").exists()
            return
        write_log(whole, Path(d) / f"w.{out}")
        assert res.stats == log_stats(whole)
        if out == "csv":
            assert (Path(d) / "s.csv").read_bytes() == (Path(d) / "w.csv").read_bytes()
        else:
            a, b = pq.read_table(Path(d) / "s.parquet"), pq.read_table(Path(d) / "w.parquet")
            assert a.schema.equals(b.schema, check_metadata=True) and a.equals(b)
