"""``mrcstats ingest`` / ``summary`` end to end through the console entry point."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from mrcstats.cli import main


def _run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture()
def long_csv(tmp_path):
    rng = np.random.default_rng(0)
    n_models, n_items = 4, 60
    df = pd.DataFrame({
        "model": np.repeat([f"m{i}:x.y" for i in range(n_models)], n_items),
        "question_id": np.tile([f"q{j:03d}" for j in range(n_items)], n_models),
        "src": np.tile([f"p{j // 3}" for j in range(n_items)], n_models),
        "correct": (rng.random(n_models * n_items) < 0.6).astype(int),
    })
    p = tmp_path / "long.csv"
    df.to_csv(p, index=False)
    return p, df


def test_ingest_json_shape_and_exact_accuracy(capsys, tmp_path, long_csv):
    p, df = long_csv
    out_path = tmp_path / "log.parquet"
    code, out, err = _run(capsys, "ingest", str(p), "--map", "item=question_id", "--map", "cluster=src",
                          "--out", str(out_path), "--json")
    assert code == 0, err
    obj = json.loads(out)
    assert set(obj) == {"rows", "models", "items", "clusters", "conditions", "accuracy", "invalid", "skipped"}
    assert obj["rows"] == len(df) and obj["items"] == 60 and obj["clusters"] == 20
    assert obj["conditions"] == [""]
    want = df.groupby("model")["correct"].mean()
    for m, acc in obj["accuracy"].items():
        assert acc == want[m]  # exact proportion
    assert obj["invalid"] == {m: 0 for m in want.index}
    assert obj["skipped"] == {}
    # the written log reads back and summarises
    code, out, err = _run(capsys, "summary", str(out_path), "--json")
    assert code == 0, err
    groups = json.loads(out)["groups"]
    assert [g["model"] for g in groups] == sorted(want.index)
    assert set(groups[0]) == {"model", "n", "accuracy", "accuracy_valid", "invalid", "ci_low", "ci_high",
                              "ci_method", "ci_df", "se_cluster", "clusters"}
    assert groups[0]["accuracy"] == want[groups[0]["model"]]


def test_ingest_text_output(capsys, long_csv):
    p, _ = long_csv
    code, out, _ = _run(capsys, "ingest", str(p), "--map", "item=question_id")
    assert code == 0 and "240 rows" in out and "skipped: none" in out


def test_no_correctness_column_exits_2(capsys, tmp_path):
    p = tmp_path / "x.csv"
    p.write_text("model,item,answer_text\nm,a,foo\n")
    code, out, err = _run(capsys, "ingest", str(p), "--json")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert "'correct'" in err and "--map" in err and "Traceback" not in err


def test_duplicates_cli(capsys, tmp_path):
    p = tmp_path / "d.csv"
    p.write_text("model,item,correct\nm,a,1\nm,a,0\nm,b,1\n")
    code, _, err = _run(capsys, "ingest", str(p))
    assert code == 2 and "duplicate" in err and "--on-duplicate" in err
    code, out, err = _run(capsys, "ingest", str(p), "--on-duplicate", "last", "--json")
    obj = json.loads(out)
    assert code == 0 and obj["rows"] == 2 and sum(obj["skipped"].values()) == 1
    assert obj["accuracy"] == {"m": 0.5}


def test_bad_inputs_one_line(capsys, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"model,item,correct\nm,\xff,1\n")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    nonbin = tmp_path / "nb.csv"
    nonbin.write_text("model,item,correct\nm,a,2\n")
    js = tmp_path / "x.jsonl"
    js.write_text('{"model": "m", "item": "a", "correct": 1}\n')
    for args, needle in [([str(bad)], "byte offset"), ([str(empty)], "empty"),
                         ([str(nonbin)], "row 1, column 'correct'"),
                         ([str(nonbin), str(js)], "mixed formats"),
                         ([str(tmp_path / "missing.csv")], "no such file")]:
        code, out, err = _run(capsys, "ingest", *args)
        assert code == 2, (args, err)
        assert out == "" and needle in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.shared
def test_mskqa_summary_by_condition_rate(capsys, shared_data, tmp_path):
    folder = shared_data / "mskqa" / "output" / "RQA"
    out_path = tmp_path / "rqa.parquet"
    code, out, err = _run(capsys, "ingest", str(folder), "--out", str(out_path), "--json")
    assert code == 0, err
    assert json.loads(out)["rows"] == 100 * 21 * 4 * 10
    code, out, err = _run(capsys, "summary", str(out_path), "--by", "condition,masking_rate", "--json")
    assert code == 0, err
    groups = json.loads(out)["groups"]
    assert len(groups) == 4 * 21 and all(g["n"] == 1000 for g in groups)
    log = pd.read_parquet(out_path)
    want = log.groupby(["condition", "masking_rate"])["correct"].apply(lambda s: s.fillna(False).sum() / len(s))
    for g in groups:
        assert g["accuracy"] == want[(g["condition"], g["masking_rate"])]



@pytest.mark.parametrize("kind", ["binary", "graded", "threshold", "graded dataset", "binary dataset"])
def test_ingest_accuracy_is_summarys(capsys, tmp_path, kind):
    """One summary per log kind: ingest's per-model ``accuracy`` is the number ``summary`` prints (the mean
    score of a graded log, not a 0.0 from its empty correct column), to the bit."""
    rng = np.random.default_rng(7)
    n = 60
    df = pd.DataFrame({"model": np.repeat(["a", "b"], n), "item": [f"q{i}" for i in range(n)] * 2})
    if kind.startswith("binary"):
        df["correct"] = pd.array(rng.choice([1, 0, None], 2 * n, p=[0.5, 0.4, 0.1]), dtype="Int64")
    else:
        df["score"] = np.where(rng.random(2 * n) < 0.1, np.nan, rng.random(2 * n).round(3))
    p = tmp_path / "log.csv"
    df.to_csv(p, index=False)
    extra = ["--threshold", "0.5"] if kind == "threshold" else []
    args = [str(p), *extra]
    if kind.endswith("dataset"):
        assert _run(capsys, "ingest", str(p), "--dataset", str(tmp_path / "ds"))[0] == 0
        args = [str(tmp_path / "ds")]
        code, out, _ = _run(capsys, "ingest", str(p), "--dataset", str(tmp_path / "ds2"), "--json")
    else:
        code, out, _ = _run(capsys, "ingest", *args, "--json")
    assert code == 0
    ing = json.loads(out)
    code, out, _ = _run(capsys, "summary", *args, "--json")
    assert code == 0
    summ = json.loads(out)
    assert ing["accuracy"] == {g["model"]: g["accuracy"] for g in summ["groups"]}
    assert ing["invalid"] == {g["model"]: g["invalid"] for g in summ["groups"]}
    assert ing.get("outcome", "correct") == summ.get("outcome", "correct")
    if kind != "binary" and not kind.startswith("binary"):
        assert ing["outcome"] == "score" and min(ing["accuracy"].values()) > 0.2
    if kind == "threshold":
        assert ing["threshold"] == 0.5 and set(ing["accuracy_threshold"]) == {"a", "b"}
