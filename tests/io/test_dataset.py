"""Log datasets: streamed atomic writer, lazy DuckDB handle, schema/partition errors, summary in SQL."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mrcstats.errors import InputError
from mrcstats.io import read_log
from mrcstats.io.dataset import dataset_stats, is_dataset, open_dataset, partition_folder
from mrcstats.io.ingest import DatasetWriter, write_dataset
from mrcstats.io.schema import log_stats
from mrcstats.stats.accuracy import summarize
from mrcstats.tasks.simulate import simulate_log

KEYS = ["model", "item", "trial", "condition", "masking_rate"]


@pytest.fixture(scope="module")
def sim():
    return simulate_log(1, n_passages=6, questions_per_passage=2, masking_rates=(0, 50, 100)).log


def _sorted(df):
    return df.sort_values(KEYS).reset_index(drop=True)


def test_writer_roundtrip_and_lazy_read(sim, tmp_path):
    out = tmp_path / "ds"
    with DatasetWriter(out) as w:
        w.write(sim.iloc[:700], "first")
        w.write(sim.iloc[700:], "second")
    assert is_dataset(out) and not list(tmp_path.glob(".ds.tmp-*"))
    ds = open_dataset(out)
    assert len(ds) == len(sim) and ds.columns[0] == "model"
    back = read_log(out)                       # read_log on a dataset folder: loaded in memory
    pd.testing.assert_frame_equal(_sorted(sim), _sorted(back))
    assert dataset_stats(ds) == log_stats(sim)


def test_ingest_files_and_dataset_input(sim, tmp_path):
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    half = sim[sim["model"] != "gamma-70b"]
    half.to_parquet(a)
    sim[sim["model"] == "gamma-70b"].to_parquet(b)
    c = tmp_path / "c.csv"
    half.iloc[:50].to_csv(c, index=False)
    with pytest.raises(InputError, match="mixed formats"):
        write_dataset([a, c], tmp_path / "dx")
    csv = write_dataset([c], tmp_path / "dc")             # a non-Parquet source: read with its reader
    assert len(csv) == 50
    ds = write_dataset([a], tmp_path / "d1", chunk_rows=500)   # parquet streamed in 500-row chunks
    assert len(ds) == len(half)
    ds2 = write_dataset([tmp_path / "d1"], tmp_path / "d2", chunk_rows=333)   # a dataset as input
    pd.testing.assert_frame_equal(_sorted(ds.to_log()), _sorted(ds2.to_log()))
    ds3 = write_dataset([a, b], tmp_path / "d3", jobs=2)                      # two processes
    pd.testing.assert_frame_equal(_sorted(ds3.to_log()), _sorted(sim))


def test_mismatched_schema_names_file_and_leaves_nothing(sim, tmp_path):
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    sim.iloc[:500].to_parquet(a)
    sim.iloc[500:].assign(extra=1.0).to_parquet(b)
    with pytest.raises(InputError, match=r"b\.parquet: its columns differ.*extra column\(s\) 'extra'"):
        write_dataset([a, b], tmp_path / "out")
    with pytest.raises(InputError, match=r"b\.parquet: its columns differ"):
        write_dataset([a, b], tmp_path / "out", jobs=2)
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]


def test_existing_dataset_kept_when_ingest_fails(sim, tmp_path):
    out = tmp_path / "ds"
    write_dataset([_write(sim.iloc[:300], tmp_path / "ok.parquet")], out)
    bad = sim.iloc[300:400].copy()
    bad["correct"] = bad["correct"].astype("string").fillna("")
    bad.iloc[5, bad.columns.get_loc("correct")] = "maybe"
    with pytest.raises(InputError, match="bad.parquet.*row 6.*correctness"):
        write_dataset([_write(bad, tmp_path / "bad.parquet")], out)
    assert len(open_dataset(out)) == 300


def _write(df, path):
    df.to_parquet(path)
    return path


def test_duplicate_keys_across_chunks(sim, tmp_path):
    a = _write(sim.iloc[:400], tmp_path / "a.parquet")
    b = _write(sim.iloc[390:500], tmp_path / "b.parquet")
    with pytest.raises(InputError, match="duplicate .* across input files"):
        write_dataset([a, b], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_foreign_file_and_corrupt_partition_name_the_file(sim, tmp_path):
    out = tmp_path / "ds"
    write_dataset([_write(sim, tmp_path / "s.parquet")], out)
    beta = out / partition_folder("beta-13b")
    part = min(beta.glob("*.parquet"))
    pd.DataFrame({"item": ["x"], "other": [1]}).to_parquet(beta / "stray.parquet")
    with pytest.raises(InputError, match=r"stray\.parquet: its schema differs .*missing column"):
        open_dataset(out)
    (beta / "stray.parquet").unlink()
    part.write_bytes(b"PAR1 not really parquet")
    with pytest.raises(InputError, match=rf"{part.name}: cannot read this Parquet file"):
        open_dataset(out)
    with pytest.raises(InputError, match=rf"{part.name}"):
        read_log(out)


@pytest.mark.parametrize("by", [["model"], ["condition", "masking_rate"], [], ["cluster"]])
def test_summary_sql_equals_in_memory(sim, tmp_path, by):
    out = tmp_path / "ds"
    write_dataset([_write(sim, tmp_path / "s.parquet")], out, chunk_rows=777)
    a = summarize(sim, by=by).to_frame()
    b = summarize(open_dataset(out), by=by).to_frame()
    pd.testing.assert_frame_equal(a, b, rtol=1e-12, atol=0)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, 2**31 - 1), st.integers(1, 4), st.integers(1, 12), st.floats(0, 0.5))
def test_summary_sql_property(tmp_path_factory, seed, n_models, n_clusters, p_invalid):
    rng = np.random.default_rng(seed)
    rows = []
    for m in range(n_models):
        for c in range(n_clusters):
            for q in range(int(rng.integers(1, 5))):
                v = rng.random() < rng.random()
                rows.append({"model": f"m{m}", "item": f"c{c}q{q}", "cluster": f"c{c}",
                             "correct": pd.NA if rng.random() < p_invalid else bool(v)})
    df = pd.DataFrame(rows).astype({"correct": "boolean"})
    d = tmp_path_factory.mktemp("p")
    with DatasetWriter(d / "ds") as w:
        w.write(df)
    a = summarize(df, by="model").to_frame()
    b = summarize(open_dataset(d / "ds"), by="model").to_frame()
    pd.testing.assert_frame_equal(a, b, rtol=1e-12, atol=0)


def test_cli_ingest_dataset_and_summary(sim, tmp_path, capsys):
    from mrcstats.cli import main

    src = _write(sim, tmp_path / "s.parquet")
    assert main(["ingest", str(src), "--dataset", str(tmp_path / "ds"), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["rows"] == len(sim) and got["models"] == sorted(sim["model"].unique())
    assert main(["summary", str(tmp_path / "ds"), "--by", "model", "--json"]) == 0
    groups = json.loads(capsys.readouterr().out)["groups"]
    want = summarize(sim, by="model").to_dict()["groups"]
    assert [g["model"] for g in groups] == [g["model"] for g in want]
    for g, w in zip(groups, want, strict=True):
        text = {k for k, v in w.items() if isinstance(v, str)}          # model, ci_method (the interval's rule)
        assert {k: g[k] for k in text} == {k: w[k] for k in text}
        assert {k: v for k, v in g.items() if k not in text} == pytest.approx(
            {k: v for k, v in w.items() if k not in text}, rel=1e-12)
    assert main(["ingest", str(src), "--out", str(tmp_path / "ds2") + "/"]) == 0
    assert is_dataset(tmp_path / "ds2")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "x.txt").write_text("x")
    assert main(["ingest", str(src), "--dataset", str(tmp_path / "junk")]) == 2
    assert "not a log dataset" in capsys.readouterr().err


def test_compare_per_item_scores_from_sql(sim, tmp_path):
    from mrcstats.stats.compare import compare, per_item_scores

    write_dataset([_write(sim, tmp_path / "s.parquet")], tmp_path / "ds", chunk_rows=600)
    ds = open_dataset(tmp_path / "ds")
    with pytest.raises(InputError, match="conditions"):
        per_item_scores(ds)
    one = sim[(sim["condition"] == "strict") & (sim["masking_rate"] == 50)].reset_index(drop=True)
    sub = ds.filter(condition="strict", masking_rate=50)
    a = per_item_scores(one).sort_values(["model", "item"]).reset_index(drop=True)
    b = per_item_scores(sub)
    pd.testing.assert_frame_equal(a, b)
    assert b.attrs["invalid"] == a.attrs["invalid"]
    ra, rb = compare(one, cluster="cluster"), compare(sub, cluster="cluster")
    pd.testing.assert_frame_equal(ra.to_frame(), rb.to_frame(), rtol=1e-12)


def test_cli_compare_on_dataset(sim, tmp_path, capsys):
    from mrcstats.cli import main

    write_dataset([_write(sim[sim["masking_rate"] == 0], tmp_path / "s.parquet")], tmp_path / "ds")
    assert main(["compare", str(tmp_path / "ds"), "--condition", "regular", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["pairs"]) == 3
    assert main(["compare", str(tmp_path / "ds"), "--condition", "nope"]) == 2
    assert "matches no row" in capsys.readouterr().err


def test_discrimination_crosstab_from_sql(sim, tmp_path):
    from mrcstats.stats.discrimination import discrimination
    from mrcstats.stats.tables import condition_outcome_table, crosstab

    write_dataset([_write(sim, tmp_path / "s.parquet")], tmp_path / "ds", chunk_rows=900)
    ds = open_dataset(tmp_path / "ds")
    a, b = discrimination(sim), discrimination(ds)
    pd.testing.assert_series_equal(a.pd, b.pd, rtol=1e-12)
    pd.testing.assert_frame_equal(a.accuracy, b.accuracy, rtol=1e-12, check_names=False)
    ta, tb = a.cutoffs([0, 0.1]), b.cutoffs([0, 0.1])
    pd.testing.assert_frame_equal(ta.to_frame(), tb.to_frame(), rtol=1e-12)
    for rows, cols in (("condition", "correct"), ("masking_rate", "pred"), ("model", "condition")):
        x, y = crosstab(sim, rows, cols), crosstab(ds, rows, cols)
        pd.testing.assert_frame_equal(x.table, y.table, check_names=True)
        assert x.skipped == y.skipped
        assert x.to_dict() == y.to_dict()
    del condition_outcome_table


def test_summary_on_dask_equals_in_memory(sim, tmp_path):
    pytest.importorskip("distributed")
    from distributed import Client, LocalCluster

    write_dataset([_write(sim, tmp_path / "s.parquet")], tmp_path / "ds", chunk_rows=900)
    ds = open_dataset(tmp_path / "ds")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cl, \
            Client(cl) as client:
        for by in (["model"], ["condition", "masking_rate"], []):
            a = summarize(sim, by=by).to_frame()
            b = summarize(ds, by=by, backend="dask", scheduler=client).to_frame()
            pd.testing.assert_frame_equal(a, b, rtol=1e-12, atol=0)
    with pytest.raises(InputError, match="backend"):
        summarize(ds, backend="spark")


# ----------------------------------------------------------------------------- the DuckDB fast path


def _both(paths, tmp_path, name, **kw):
    """Ingest ``paths`` on the fast path and on the pandas path: (dataset, error message) for each."""
    out = []
    for fast in (True, False):
        try:
            ds = write_dataset(paths, tmp_path / f"{name}-{int(fast)}", fast=fast, **kw)
            out.append((ds, None))
        except InputError as exc:
            out.append((None, str(exc)))
    return out


def _same(fast, slow, by=("model",)):
    (a, ea), (b, eb) = fast, slow
    assert ea == eb
    if a is None:
        return
    pd.testing.assert_frame_equal(_sorted(a.to_log()), _sorted(b.to_log()))   # row order may differ
    ma, mb = (json.loads((d.path / "_mrcstats.json").read_text()) for d in (a, b))
    assert ma == mb
    assert sorted(p.name for p in a.path.iterdir()) == sorted(p.name for p in b.path.iterdir())
    pd.testing.assert_frame_equal(summarize(a, by=list(by)).to_frame(), summarize(b, by=list(by)).to_frame(),
                                  rtol=1e-12, atol=0)


def test_fast_path_equals_pandas_path(sim, tmp_path, monkeypatch):
    import mrcstats.io.ingest as dsmod

    calls = []
    orig = dsmod._write_fast
    monkeypatch.setattr(dsmod, "_write_fast", lambda w, b, con, **k: (calls.append(len(b)), orig(w, b, con, **k)))
    a = _write(sim.iloc[:500], tmp_path / "a.parquet")           # pandas' large_string, extra columns
    b = _write(sim.iloc[500:].reset_index(drop=True), tmp_path / "b.parquet")
    _same(*_both([a, b], tmp_path, "files"), by=("model", "condition"))
    assert calls and sum(calls) == 2
    calls.clear()
    core = sim[["model", "item", "trial", "correct"]]           # defaults filled: cluster, condition, ...
    _same(*_both([_write(core, tmp_path / "core.parquet")], tmp_path, "core"))
    # a dataset as input: fragments copied as they are, or rewritten when a default is filled in
    src = write_dataset([a, b], tmp_path / "src", fast=False)
    calls.clear()
    _same(*_both([src.path], tmp_path, "frag"))
    frag = min(src.path.glob(f"{partition_folder('alpha-7b')}/*.parquet"))
    t = pq.read_table(frag)
    t = t.set_column(t.schema.get_field_index("cluster"), "cluster",
                     pa.array([None] * t.num_rows, pa.string()))
    pq.write_table(t, frag)
    _same(*_both([src.path], tmp_path, "frag2"))
    assert sum(calls) == 2 * len(src.files)
    # fast and pandas units together, in one process and in two (the pandas units go to the processes)
    ints = sim.iloc[:300].reset_index(drop=True)
    ints = ints.assign(correct=ints["correct"].astype("Float64").fillna(0.0), model="ints")
    c = _write(ints, tmp_path / "c.parquet")
    d = _write(ints.assign(model="ints2"), tmp_path / "d.parquet")
    for jobs in (1, 2):
        _same(*_both([a, c, b, d], tmp_path, f"mixed{jobs}", jobs=jobs))


def _corrupt(sim, what):
    df = sim[["model", "item", "cluster", "trial", "condition", "masking_rate", "correct", "response"]].copy()
    if what == "null item":
        df.loc[7, "item"] = pd.NA
    elif what == "null model":
        df.loc[9, "model"] = pd.NA
    elif what == "negative trial":
        df["trial"] = df["trial"].astype("int64")
        df.loc[11, "trial"] = -1
    elif what == "huge trial":
        df.loc[3, "trial"] = 2**53
    elif what == "rate above 100":
        df.loc[5, "masking_rate"] = 150.0
    elif what == "duplicate":
        df = pd.concat([df, df.iloc[[4, 20]]], ignore_index=True)
    return df


@pytest.mark.parametrize("what", ["null item", "null model", "negative trial", "huge trial", "rate above 100",
                                  "duplicate"])
@pytest.mark.parametrize("on_duplicate", ["error", "last"])
def test_fast_path_same_errors(sim, tmp_path, what, on_duplicate):
    p = _write(_corrupt(sim, what), tmp_path / "bad.parquet")
    fast, slow = _both([p], tmp_path, "o", on_duplicate=on_duplicate, chunk_rows=400)
    assert fast[1] is not None or what == "duplicate"
    _same(fast, slow)


def test_fast_path_same_schema_error_and_nothing_written(sim, tmp_path):
    a = _write(sim.iloc[:500], tmp_path / "a.parquet")
    b = _write(sim.iloc[500:].assign(extra=1.0), tmp_path / "b.parquet")
    fast, slow = _both([a, b], tmp_path, "o")
    assert fast[1] and "b.parquet: its columns differ" in fast[1]
    _same(fast, slow)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".o")]


_NAMES = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=0, max_size=6)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["m/1", "a b", "ü-ß", "x=y%", "", "plain", "日本"]),
                          st.sampled_from(["i1", "i2", "i/3", None]), st.sampled_from(["c1", None]),
                          st.sampled_from([0, 1, None]), st.sampled_from(["", "cond", None]),
                          st.sampled_from([None, 0.0, 50.0, -0.0]), st.sampled_from([True, False, None])),
                min_size=1, max_size=25),
       st.sampled_from(["error", "first"]), _NAMES)
def test_fast_path_property(tmp_path_factory, rows, on_duplicate, extra_model):
    d = tmp_path_factory.mktemp("fp")
    cols = list(zip(*rows, strict=True))
    t = pa.table({"model": pa.array(cols[0], pa.string()), "item": pa.array(cols[1], pa.string()),
                  "cluster": pa.array(cols[2], pa.string()), "trial": pa.array(cols[3], pa.int64()),
                  "condition": pa.array(cols[4], pa.string()), "masking_rate": pa.array(cols[5], pa.float64()),
                  "correct": pa.array(cols[6], pa.bool_())})
    pq.write_table(t, d / "a.parquet")
    pq.write_table(t.set_column(0, "model", pa.array([extra_model] * len(t), pa.string())), d / "b.parquet")
    _same(*_both([d / "a.parquet", d / "b.parquet"], d, "o", on_duplicate=on_duplicate))
    # the same rows as a dataset folder (model from the partition folder, defaults still to fill in)
    import urllib.parse

    for m in sorted({r[0] for r in rows}):
        part = d / "frag" / f"model={urllib.parse.quote(m, safe='')}"
        part.mkdir(parents=True)
        sub = t.filter(pc.equal(t.column("model"), m)).drop_columns(["model"])
        pq.write_table(sub, part / "part-0.parquet")
    _same(*_both([d / "frag"], d, "f", on_duplicate=on_duplicate))


def test_fast_path_unreadable_page_same_error(sim, tmp_path):
    p = _write(sim[["model", "item", "trial", "correct", "response"]], tmp_path / "a.parquet")
    raw = bytearray(p.read_bytes())
    mid = len(raw) // 3
    raw[mid:mid + 64] = b"\xff" * 64          # a damaged data page; the footer still reads
    p.write_bytes(bytes(raw))
    fast, slow = _both([p], tmp_path, "o")
    assert fast[1] and "a.parquet" in fast[1]
    _same(fast, slow)


def test_fast_path_extra_columns(tmp_path):
    df = pd.DataFrame({"model": ["a", "a", "b/c"], "item": ["1", "2", "1"], "correct": [True, False, None],
                       "u16": pd.array([1, 2, 3], dtype="uint16"), "i32": pd.array([1, 2, 3], dtype="Int32"),
                       "f": [0.5, None, 2.0], "flag": pd.array([True, None, False], dtype="boolean"),
                       "note": pd.array(["x", None, "z"], dtype="string")})
    _same(*_both([_write(df, tmp_path / "x.parquet")], tmp_path, "x"))
    nulls = df.assign(i32=pd.array([1, None, 3], dtype="Int32"))       # pandas makes it float: pandas path
    _same(*_both([_write(nulls, tmp_path / "n.parquet")], tmp_path, "n"))


def test_narrow_integer_extra_columns_round_trip(tmp_path):
    """Int8 / UInt16 extra columns are stored narrow and the dataset description names their types."""
    df = pd.DataFrame({"model": ["a", "a", "b"], "item": ["i1", "i2", "i1"], "correct": [True, False, True],
                       "small": pd.array([1, 2, 3], dtype="Int8"), "u": pd.array([1, 2, None], dtype="UInt16")})
    with DatasetWriter(tmp_path / "ds") as w:
        w.write(df)
    ds = open_dataset(tmp_path / "ds")
    assert str(ds.schema.field("small").type) == "int8" and str(ds.schema.field("u").type) == "uint16"
    got = ds.to_log().sort_values(["model", "item"]).reset_index(drop=True)
    assert got["small"].tolist() == [1, 2, 3] and got["u"].isna().tolist() == [False, False, True]


@pytest.mark.parametrize("kw,name", [({"mapping": {"item": "question"}}, "mapping"), ({"model": "m1"}, "model")])
def test_read_log_dataset_refuses_mapping_and_model(sim, tmp_path, kw, name):
    """A dataset folder is already canonical: ``mapping=``/``model=`` cannot apply, so they are refused, not ignored."""
    out = tmp_path / "ds"
    with DatasetWriter(out) as w:
        w.write(sim.iloc[:100], "first")
    with pytest.raises(InputError, match=rf"{name}=.*dataset"):
        read_log(out, **kw)


def test_ingest_carries_file_notes(tmp_path, monkeypatch):
    """A reader's notes on a file reach the dataset's description and the logs and attrs read from it."""
    from mrcstats.io import reader

    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("model,item,correct\nm1,q1,1\nm1,q2,0\n")
    b.write_text("model,item,correct\nm2,q1,1\nm2,q2,1\n")
    orig = reader.read_source

    def noted(src, *args, **kw):
        df = orig(src, *args, **kw)
        df.attrs["notes"] = [f"1 sample-epoch(s) invalidated in {src.path.stem}"]
        return df

    monkeypatch.setattr(reader, "read_source", noted)
    ds = write_dataset([a, b], tmp_path / "ds")
    want = ["a.csv: 1 sample-epoch(s) invalidated in a", "b.csv: 1 sample-epoch(s) invalidated in b"]
    assert ds.meta["notes"] == want
    assert open_dataset(tmp_path / "ds").attrs["notes"] == want
    assert read_log(tmp_path / "ds").attrs["notes"] == want
