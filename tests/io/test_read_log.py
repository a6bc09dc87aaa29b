"""read_log / validate_log / write_log on small generated files."""
from __future__ import annotations

import gzip

import pandas as pd
import pytest

from mrcstats.errors import InputError, SchemaError
from mrcstats.io import CANONICAL_COLUMNS, read_log, validate_log, write_log


def _csv(tmp_path, text, name="log.csv"):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_csv_minimal_defaults(tmp_path):
    p = _csv(tmp_path, "model,item,correct\nm1,001,1\nm1,002,0\nm2,001,\n")
    log = read_log(p)
    assert list(log.columns[:10]) == list(CANONICAL_COLUMNS[:10])
    assert log["item"].tolist() == ["001", "002", "001"]  # leading zeros kept
    assert log["cluster"].tolist() == log["item"].tolist()
    assert log["trial"].dtype == "int64" and (log["trial"] == 0).all()
    assert (log["condition"] == "").all()
    assert str(log["correct"].dtype) == "boolean"
    assert log["correct"].isna().tolist() == [False, False, True]
    assert log.attrs["skipped"] == {}


def test_map_and_parquet_roundtrip(tmp_path):
    p = _csv(tmp_path, "llm,question_id,src,acc,extra\nA,q1,s1,True,x\nA,q2,s1,False,y\nB,q1,s1,true,z\n")
    log = read_log(p, mapping={"model": "llm", "item": "question_id", "cluster": "src", "correct": "acc"})
    assert log["cluster"].tolist() == ["s1"] * 3
    assert log["extra"].tolist() == ["x", "y", "z"]
    out = write_log(log, tmp_path / "out.parquet")
    back = read_log(out)
    pd.testing.assert_frame_equal(log, back)


def test_gzip_bom_tsv(tmp_path):
    raw = "\ufeffmodel\titem\tcorrect\nm\ta\t1\nm\tb\t0\n".encode()
    p = tmp_path / "x.tsv.gz"
    p.write_bytes(gzip.compress(raw))
    log = read_log(p)
    assert log["model"].tolist() == ["m", "m"]
    assert log["correct"].tolist() == [True, False]


def test_missing_correct_column(tmp_path):
    p = _csv(tmp_path, "model,item,score_text\nm,a,good\n")
    with pytest.raises(SchemaError, match="correct.*columns found.*score_text.*--map"):
        read_log(p)


def test_derive_from_gold_pred(tmp_path):
    p = _csv(tmp_path, "model,item,gold,pred\nm,a,B,b\nm,b,3,3.0\nm,c,2,\n")
    log = read_log(p)
    assert log["correct"].tolist()[:2] == [True, True]
    assert log["correct"].isna().tolist() == [False, False, True]


def test_non_binary(tmp_path):
    p = _csv(tmp_path, "model,item,correct\nm,a,1\nm,b,0.5\n")
    with pytest.raises(SchemaError, match=r"log.csv, row 2, column 'correct'"):
        read_log(p)


def test_duplicates(tmp_path):
    p = _csv(tmp_path, "model,item,correct\nm,a,1\nm,a,0\nm,b,1\n")
    with pytest.raises(SchemaError, match="duplicate"):
        read_log(p)
    first = read_log(p, on_duplicate="first")
    assert first["correct"].tolist() == [True, True]
    last = read_log(p, on_duplicate="last")
    assert last["correct"].tolist() == [False, True]
    assert sum(last.attrs["skipped"].values()) == 1


def test_empty_and_bad_encoding(tmp_path):
    e = tmp_path / "e.csv"
    e.write_bytes(b"")
    with pytest.raises(InputError, match="empty"):
        read_log(e)
    b = tmp_path / "b.csv"
    b.write_bytes(b"model,item,correct\nm,caf\xe9,1\n")
    with pytest.raises(InputError, match=r"byte offset 24 \(line 2\)"):
        read_log(b)


def test_mixed_formats(tmp_path):
    a = _csv(tmp_path, "model,item,correct\nm,a,1\n")
    log = read_log(a)
    pq = write_log(log, tmp_path / "b.parquet")
    with pytest.raises(InputError, match="mixed formats"):
        read_log([a, pq])


def test_validate_log_plain_frame():
    df = pd.DataFrame({"model": ["m", "m"], "item": [1, 2], "correct": [True, False], "trial": [0, 1]})
    log = validate_log(df)
    assert log["item"].tolist() == ["1", "2"]
    assert str(log["trial"].dtype) == "int64"


def test_utf16_bom_header_only_ragged_and_bad_map(tmp_path):
    u = tmp_path / "u.csv"
    u.write_bytes("model,item,correct\nm,é,1\n".encode("utf-16"))
    assert read_log(u)["item"].tolist() == ["é"]
    h = _csv(tmp_path, "model,item,correct\n", "h.csv")
    with pytest.raises(InputError, match="no data rows"):
        read_log(h)
    r = _csv(tmp_path, "model,item,correct\nm,a,1\nm,b,1,extra,more\n", "r.csv")
    with pytest.raises(InputError, match="r.csv: cannot parse as CSV"):
        read_log(r)
    ok = _csv(tmp_path, "model,qid,correct\nm,a,1\n", "ok.csv")
    with pytest.raises(SchemaError, match="--map names column.*'question_id'.*columns found: 'model', 'qid'"):
        read_log(ok, mapping={"item": "question_id"})
    with pytest.raises(SchemaError, match=r"missing required column 'item'.*perhaps --map item=qid"):
        read_log(ok)


def test_masking_rate_checked(tmp_path):
    p = _csv(tmp_path, "model,item,correct,masking_rate\nm,a,1,35%\nm,b,0,\nm,c,1,NA\n")
    assert read_log(p)["masking_rate"].tolist()[0] == 35.0
    bad = _csv(tmp_path, "model,item,correct,masking_rate\nm,a,1,0.5\nm,b,1,150\n", "bad.csv")
    with pytest.raises(SchemaError, match="row 2, column 'masking_rate'.*outside 0-100"):
        read_log(bad)


def test_map_swaps_and_clashes(tmp_path):
    p = _csv(tmp_path, "item,qid,correct\nm1,q1,1\nm2,q2,0\n", "swap.csv")
    log = read_log(p, mapping={"item": "qid", "model": "item"})
    assert log["model"].tolist() == ["m1", "m2"] and log["item"].tolist() == ["q1", "q2"]
    p2 = _csv(tmp_path, "model,item,question_id,correct\nm,old,q1,1\n", "clash.csv")
    log = read_log(p2, mapping={"item": "question_id"})
    assert log["item"].tolist() == ["q1"] and log["item_original"].tolist() == ["old"]


def test_write_log_validates_once(tmp_path, monkeypatch):
    """A log read_log returned is written without a second validation, and the file is the one a fresh
    validation writes; a copy (not known to be validated) is validated again."""
    from mrcstats.io import reader, schema

    p = _csv(tmp_path, "model,item,correct,score\nm1,001,1,1\nm1,002,0,0\nm2,001,,\n")
    log = read_log(p)
    assert schema.is_validated(log) and not schema.is_validated(log.copy())
    calls = []
    monkeypatch.setattr(reader, "validate_log", lambda df: calls.append(1) or validate_log(df))
    for suffix in (".parquet", ".csv"):
        write_log(log, tmp_path / f"once{suffix}")
        assert calls == []
        write_log(log.copy(), tmp_path / f"again{suffix}")
        assert calls == [1]
        calls.clear()
        a, b = read_log(tmp_path / f"once{suffix}"), read_log(tmp_path / f"again{suffix}")
        pd.testing.assert_frame_equal(a, b)
    assert (tmp_path / "once.csv").read_bytes() == (tmp_path / "again.csv").read_bytes()


def test_each_reader_s_notes_are_kept_with_its_file_when_several_files_are_read(recwarn):
    """Several files read into one log keep what each reader said (rows skipped, a run that ended early), each
    note naming its file; a multi-file read dropped them (``attrs["notes"]`` was empty)."""
    from pathlib import Path

    d = Path(__file__).resolve().parents[1] / "conformance" / "inspect"
    one = read_log(d / "sigkill.eval")
    both = read_log([d / "failfast.eval", d / "sigkill.eval"])
    notes = both.attrs["notes"]
    assert [n for n in notes if n.startswith("sigkill.eval: ")] == one.attrs["notes"]
    assert any(n.startswith("failfast.eval: ") and "status 'error'" in n for n in notes)
    assert "sigkill.eval: skipped 8 sample-epoch(s): not run: Inspect run killed (no header.json)" in notes
    assert both.attrs["skipped"]["not run: Inspect run killed (no header.json)"] == 8


@pytest.mark.parametrize("text,has,hasnt", [
    # repeats inside one file, differing only in the answer: number the samples, or keep one re-run
    ("model,item,correct\nm,a,1\nm,a,0\nm,b,1\n", ["rows 1 and 2", "differ only in the answer",
                                                    "--map trial=COLUMN", "--on-duplicate first|last"],
     ["--model PATH=NAME"]),
    # a column that tells them apart: that column as the trial or condition
    ("model,item,correct,seed\nm,a,1,1\nm,b,1,1\nm,a,0,2\n", ["rows 1 and 3", "--map trial=seed",
                                                              "--map condition=seed"],
     ["--model PATH=NAME", "--on-duplicate first|last"]),
])
def test_duplicates_inside_one_file_suggest_what_can_help(tmp_path, text, has, hasnt):
    """Within one file, naming each file's model cannot tell rows apart: the message does not offer it (it did)."""
    p = _csv(tmp_path, text)
    with pytest.raises(SchemaError) as e:
        read_log(p)
    msg = str(e.value)
    assert all(h in msg for h in has), msg
    assert not any(h in msg for h in hasnt), msg


def test_duplicates_across_files_name_each_file_and_suggest_naming_its_model(tmp_path):
    (tmp_path / "a.csv").write_text("model,item,correct\nm,b,1\nm,a,0\n")
    (tmp_path / "b.csv").write_text("model,item,correct\nm,a,1\nm,c,1\n")
    with pytest.raises(SchemaError) as e:
        read_log([tmp_path / "a.csv", tmp_path / "b.csv"])
    msg = str(e.value)
    assert "rows 2 and 3 (a.csv row 2, b.csv row 1)" in msg and "--model PATH=NAME" in msg, msg
    assert "--on-duplicate first|last" not in msg


def _two_files_with_reader_attrs(tmp_path, monkeypatch, extra):
    """Two CSV logs ``a.csv``, ``b.csv`` read together, the reader of each recording ``extra[name]`` in its
    attrs (as the tool readers record invalidated samples, graded metrics, run settings)."""
    from mrcstats.io import reader

    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("model,item,correct\nm1,q1,1\nm1,q2,0\n")
    b.write_text("model,item,correct\nm2,q1,1\nm2,q2,1\n")
    orig = reader.read_source

    def fake(src, *args, **kw):
        df = orig(src, *args, **kw)
        df.attrs.update(extra[src.path.name])
        return df

    with monkeypatch.context() as mp:
        mp.setattr(reader, "read_source", fake)
        return read_log([a, b])


def test_multi_file_read_keeps_reader_attrs(tmp_path, monkeypatch):
    """Several files read together keep what each reader recorded (invalidated, graded_metrics, run_settings):
    merged over the files, with the per-file values in ``attrs["file_attrs"]``."""
    log = _two_files_with_reader_attrs(tmp_path, monkeypatch, {
        "a.csv": {"invalidated": 2, "graded_metrics": ["f1"], "run_settings": ("num_fewshot",)},
        "b.csv": {"invalidated": 1, "graded_metrics": ["bleu", "f1"]}})
    assert log.attrs["invalidated"] == 3
    assert log.attrs["graded_metrics"] == ["bleu", "f1"]
    assert tuple(log.attrs["run_settings"]) == ("num_fewshot",)
    assert log.attrs["file_attrs"] == {"a.csv": {"invalidated": 2, "graded_metrics": ["f1"],
                                                 "run_settings": ("num_fewshot",)},
                                       "b.csv": {"invalidated": 1, "graded_metrics": ["bleu", "f1"]}}


def test_file_attrs_stay_out_of_a_written_log(tmp_path, monkeypatch):
    """``attrs["file_attrs"]`` describes one read (each source file's own values, by the names of the files read
    then), not the log: ``write_log`` keeps it out of the Parquet metadata, while the merged values it came with
    (invalidated, graded_metrics, run_settings) travel, so the round trip gives them back without a stale
    per-file table naming files that are not the written file's sources (docs/log.md)."""
    import json

    import pyarrow.parquet as pq

    from mrcstats.io import write_log

    log = _two_files_with_reader_attrs(tmp_path, monkeypatch, {
        "a.csv": {"invalidated": 2, "graded_metrics": ["f1"]}, "b.csv": {"invalidated": 1}})
    assert "file_attrs" in log.attrs
    before = dict(log.attrs)
    out = write_log(log, tmp_path / "out.parquet")
    assert log.attrs == before                                    # the log in memory keeps them
    stored = json.loads(pq.read_schema(out).metadata[b"PANDAS_ATTRS"])
    assert "file_attrs" not in stored
    assert stored["invalidated"] == 3 and stored["graded_metrics"] == ["f1"]
    back = read_log(out)
    assert "file_attrs" not in back.attrs and back.attrs["sources"] == [str(out)]
    assert back.attrs["invalidated"] == 3 and back.attrs["graded_metrics"] == ["f1"]
