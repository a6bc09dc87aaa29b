"""Readers for harness samples, Inspect AI logs, ELAGENT files and JSON tables; detection by content."""
from __future__ import annotations

import json

import pytest

from mrcstats.errors import InputError, SchemaError
from mrcstats.io import read_log
from mrcstats.io.detect import detect_format, load_source


def _harness_lines():
    gen = [
        {"doc_id": 0, "doc": {"question": "1+1?"}, "target": "2", "resps": [["The answer is 2"]],
         "filtered_resps": ["2"], "filter": "strict-match", "exact_match": 1.0},
        {"doc_id": 1, "doc": {"question": "2+2?"}, "target": "4", "resps": [["no idea"]],
         "filtered_resps": ["[invalid]"], "filter": "strict-match", "exact_match": 0.0},
        {"doc_id": 0, "doc": {"question": "1+1?"}, "target": "2", "resps": [["The answer is 2"]],
         "filtered_resps": ["2"], "filter": "flexible-extract", "exact_match": 1.0},
        {"doc_id": 1, "doc": {"question": "2+2?"}, "target": "4", "resps": [["no idea"]],
         "filtered_resps": ["5"], "filter": "flexible-extract", "exact_match": 0.0},
    ]
    return "\n".join(json.dumps(r) for r in gen) + "\n"


def test_harness_generation(tmp_path):
    p = tmp_path / "samples_gsm8k_2024-05-01T10-00-00.123.jsonl"
    p.write_text(_harness_lines())
    assert detect_format(load_source(p)) == "harness"
    with pytest.raises(InputError, match="--model"):
        read_log(p)
    log = read_log(p, model="llama")
    assert len(log) == 4 and set(log["condition"]) == {"strict-match", "flexible-extract"}
    assert log["item"].tolist()[0] == "gsm8k:0"
    assert log["correct"].isna().tolist() == [False, True, False, False]
    assert log["correct"].tolist()[3] is False or log["correct"].tolist()[3] == False


def test_harness_multiple_choice(tmp_path):
    recs = [{"doc_id": i, "target": i % 2, "resps": [[[-1.0, False]], [[-2.0, False]]],
             "filtered_resps": [[-1.0 - i, False], [-1.5, False]], "filter": "none", "acc": float(i % 2 == 0),
             "acc_norm": 1.0} for i in range(3)]
    p = tmp_path / "samples_arc_easy_2024-01-01T00-00-00.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in recs))
    log = read_log(p, model="m")
    assert log["pred"].tolist() == ["0", "1", "1"]
    assert log["correct"].tolist() == [True, False, True]
    assert (log["condition"] == "none").all()   # the filter name in every file (issue 23.7)


def _inspect_log(values):
    return {"version": 2, "status": "success", "eval": {"task": "mmlu", "model": "openai/gpt-4o"},
            "samples": [{"id": i, "epoch": 1, "input": "Q?", "target": "A",
                         "output": {"choices": [{"message": {"role": "assistant",
                                                             "content": [{"type": "text", "text": "ANSWER: A"}]}}]},
                         "scores": {"choice": {"value": v, "answer": "A"}}} for i, v in enumerate(values)]}


def test_inspect(tmp_path):
    p = tmp_path / "log.json"
    p.write_text(json.dumps(_inspect_log(["C", "I", "N", 1])))
    assert detect_format(load_source(p)) == "inspect"
    log = read_log(p)
    assert set(log["model"]) == {"openai/gpt-4o"}
    assert log["correct"].isna().tolist() == [False, False, True, False]
    assert log["correct"].fillna(False).tolist() == [True, False, False, True]
    assert log["response"].iloc[0] == "ANSWER: A" and (log["trial"] == 0).all()
    assert log["item"].tolist() == ["mmlu:0", "mmlu:1", "mmlu:2", "mmlu:3"]
    # N (no answer) is an invalid answer: score and correct are missing (the headline still maps it to 0, as
    # Inspect's value_to_float does; io.inspect_ai.inspect_outcome)
    assert log["score"].isna().tolist() == [False, False, True, False]
    assert log["score"].fillna(0.0).tolist() == [1.0, 0.0, 0.0, 1.0]
    p.write_text(json.dumps(_inspect_log(["C", "P"])))  # partial credit: a graded score, correct left null
    log = read_log(p)
    assert log["score"].tolist() == [1.0, 0.5] and log["correct"].isna().all()
    p.write_text(json.dumps(_inspect_log(["C", "maybe"])))
    with pytest.raises(InputError, match=r"sample 2 \(id 1\): scorer 'choice' gives 'maybe'"):
        read_log(p)


def test_elagent_small(tmp_path):
    d = tmp_path / "task 5"
    d.mkdir()
    p = d / "acc_neg.json"
    p.write_text(json.dumps({"accuracy": "1/3", "invalid": "1/3", "data": [
        {"prompt": "p", "output": "[A]", "result": "right", "gold_choice": "A", "out_choice": "A"},
        {"prompt": "p", "output": "[B]", "result": "wrong", "gold_choice": "A", "out_choice": "B"},
        {"prompt": "p", "output": "?", "result": "invalid", "gold_choice": "A", "out_choice": None}]}))
    assert detect_format(load_source(p)) == "elagent"
    log = read_log(p, model="gpt-4")
    assert log["correct"].isna().sum() == 1 and set(log["condition"]) == {"neg"} and set(log["task"]) == {"task 5"}
    assert log["item"].tolist() == ["task 5/0", "task 5/1", "task 5/2"]
    nested = tmp_path / "acc_baseline_3_1.json"
    nested.write_text(json.dumps({"+": {"*": {"accuracy": "1/2", "invalid": "0/2", "data": [
        ["What is 1+1?", 2.0, 2, "[2]"], ["What is 1*3?", 3.5, "Invalid", "?"]]}}}))
    log = read_log(nested, model="gpt-4")
    assert log["item"].tolist() == ["3_1/+/*/0", "3_1/+/*/1"]     # qualified by operators and digits
    assert log["correct"].tolist()[0] is True or log["correct"].iloc[0] == True
    assert log["correct"].isna().tolist() == [False, True]


def test_elagent_items_are_qualified_by_task_and_digit_length(tmp_path):
    """One question, one item id: Task 1 files of other digit lengths ask other expressions (distinct ids), the
    precedence moves and CoT1 ask the same ones (shared ids); Task 5 and Task 6 positions are distinct."""
    def task1(name, n):
        (tmp_path / "task 1").mkdir(exist_ok=True)
        (tmp_path / "task 1" / name).write_text(json.dumps({"+": {"*": {"accuracy": "0/1", "invalid": "0/1", "data": [
            ["What is the value of 1 + 2 * 3 ?", 7.0, 7, "[7]"]] * n}}}))

    task1("acc_baseline_3_1.json", 2)
    task1("acc_two_3_1_cot1.json", 2)
    task1("acc_baseline_3_2.json", 2)
    for t in ("task 5", "task 6"):
        (tmp_path / t).mkdir()
        (tmp_path / t / "acc_x.json").write_text(json.dumps({"accuracy": "1/1", "invalid": "0/1", "data": [
            {"prompt": "p", "output": "[A]", "result": "right", "gold_choice": "A", "out_choice": "A"}]}))
    log = read_log(tmp_path, format="elagent", model="gpt-4")
    by_cond = log.groupby("condition")["item"].apply(list).to_dict()
    assert by_cond["baseline_3_1"] == by_cond["two_3_1_cot1"] == ["task 1/3_1/+/*/0", "task 1/3_1/+/*/1"]
    assert by_cond["baseline_3_2"] == ["task 1/3_2/+/*/0", "task 1/3_2/+/*/1"]
    assert set(log.loc[log["task"] == "task 5", "item"]) == {"task 5/0"}
    assert log["item"].nunique() == 6


@pytest.mark.shared
def test_elagent_shared_item_count(shared_data):
    """The shared ELAGENT results ask 1,450 questions of Tasks 1, 5, 6 (200 x 5 digit lengths, 250, 200)."""
    root = shared_data / "elagent" / "results"
    n = sum(read_log(root / t, format="elagent", model="gpt-4")["item"].nunique()
            for t in ("task 1/length3", "task 5", "task 6"))
    assert n == 1450


def _data_blocks(o):
    if isinstance(o, dict) and "data" in o:
        return [o]
    if isinstance(o, dict):
        return [b for v in o.values() if isinstance(v, dict) for b in _data_blocks(v)]
    return []


@pytest.mark.shared
def test_elagent_shared_matches_file_accuracy(shared_data):
    import re

    root = shared_data / "elagent" / "results"
    for f in sorted(root.rglob("acc_*.json")):
        log = read_log(f, model="gpt-4-1106-preview")
        obj = json.loads(f.read_text())
        blocks = _data_blocks(obj)
        right = sum(int(re.match(r"(\d+)/", b["accuracy"]).group(1)) for b in blocks)
        invalid = sum(int(re.match(r"(\d+)/", b["invalid"]).group(1)) for b in blocks)
        assert int(log["correct"].fillna(False).sum()) == right, f
        assert int(log["correct"].isna().sum()) == invalid, f


def test_json_and_jsonl_tables(tmp_path):
    recs = [{"model": "m", "item": "a", "correct": True, "meta": {"k": 1}},
            {"model": "m", "item": "b", "correct": False, "meta": {"k": 2}}]
    j = tmp_path / "t.json"
    j.write_text(json.dumps(recs))
    log = read_log(j)
    assert log["meta.k"].tolist() == [1, 2]
    jl = tmp_path / "t.jsonl"
    jl.write_text("\n".join(json.dumps(r) for r in recs))
    assert detect_format(load_source(jl)) == "jsonl"
    assert read_log(jl)["correct"].tolist() == [True, False]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"model": "m", "item": "a", "correct": 1}\n{"model": oops}\n')
    with pytest.raises(InputError, match="line 2"):
        read_log(bad)


def test_format_override(tmp_path):
    p = tmp_path / "x.txt"
    p.write_text("model\titem\tcorrect\nm\ta\t1\n")
    assert detect_format(load_source(p)) == "tsv"
    with pytest.raises(SchemaError, match="missing required column"):
        read_log(p, format="csv")
    assert len(read_log(p, format="tsv")) == 1


def test_inspect_eval_archive(tmp_path):
    import zipfile

    log = _inspect_log(["C", "I"])
    p = tmp_path / "run.eval"
    with zipfile.ZipFile(p, "w") as zf:
        zf.writestr("header.json", json.dumps({k: v for k, v in log.items() if k != "samples"}))
        for s in log["samples"]:
            zf.writestr(f"samples/{s['id']}_epoch_{s['epoch']}.json", json.dumps(s))
    assert detect_format(load_source(p)) == "inspect"
    out = read_log(p)
    assert out["correct"].tolist() == [True, False] and set(out["model"]) == {"openai/gpt-4o"}
