"""`mrcstats elagent verify`: Task 1/2 gold recomputed from the prompt for every stored item."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from mrcstats.cli import main
from mrcstats.errors import InputError
from mrcstats.tasks.elagent.generate import task1, task2
from mrcstats.tasks.elagent.results import iter_items
from mrcstats.tasks.elagent.verify import recompute, verify_files


def _files(shared_data: Path, task: str) -> list[Path]:
    files = sorted((shared_data / "elagent" / "results" / task).rglob("*.json"))
    if not files:
        pytest.skip(f"no ELAGENT {task} result files under {shared_data}")
    return files


@pytest.mark.shared
def test_task1_result_files_all_agree(shared_data):
    files = _files(shared_data, "task 1")
    n_stored = sum(1 for f in files for _ in iter_items(f))
    res = verify_files(files)
    assert res.items == n_stored > 0
    assert res.disagree == []
    assert res.ambiguous == []  # Task 1 is not multiple choice
    assert res.agree == res.items and res.skipped == {}


@pytest.mark.shared
def test_task2_result_files_agree_or_ambiguous(shared_data):
    files = _files(shared_data, "task 2")
    res = verify_files(files)
    assert res.items == sum(1 for f in files for _ in iter_items(f)) > 0
    assert res.disagree == []
    assert res.ambiguous, "the known ambiguous Task 2 items were not found"
    for prompt, stored, fitting in res.ambiguous:
        assert len(fitting) > 1 and stored in fitting
    assert res.agree + len(res.ambiguous) == res.items
    prompts = [p for p, _, _ in res.ambiguous]
    assert any("7 * 9 - 1 / 3 = 18.666666666666664" in p for p in prompts)


@pytest.mark.shared
def test_cli_verify_json_on_shared_files(shared_data, capsys):
    files = _files(shared_data, "task 2")
    code = main(["elagent", "verify", *map(str, files), "--json"])
    out = capsys.readouterr().out
    assert code == 0
    doc = json.loads(out)  # exactly one JSON object
    assert set(doc) >= {"items", "agree", "ambiguous", "disagree"}
    assert doc["disagree"] == [] and doc["ambiguous"]


def _as_result_file(rows: list[dict], path: Path, nest: int) -> Path:
    data = [[r["prompt"], r["gold"], "Invalid", "no answer"] for r in rows]
    block = {"accuracy": "0/1=0", "invalid": "1/1=1", "data": data}
    doc = block if nest == 0 else {"+": block, "overall_accuracy": "0/200"} if nest == 1 else {"+": {"*": block}}
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("nest", [0, 1, 2])
def test_generated_items_in_every_file_shape_agree(tmp_path, nest):
    rows = task1(20, digits=3, seed=nest, example="cot") + task1(10, operators=2, digits=1, moves=["none", "one"],
                                                                  example="shot", seed=nest)
    t1 = [dict(r, gold=round(float(r["gold"]), 1)) for r in rows]  # the files' round(x, 1) convention
    res = verify_files([_as_result_file(t1, tmp_path / "t1.json", nest),
                        _as_result_file(task2(20, seed=nest), tmp_path / "t2.json", nest)])
    assert (res.items, res.agree, res.disagree, res.ambiguous) == (100, 100, [], [])


def test_wrong_gold_is_reported(tmp_path):
    rows = task1(5, digits=2, seed=3, moves=["two"]) + task2(5, seed=3)
    bad = [dict(r, gold=(float(r["gold"]) + 1 if r["task"] == "task1" else "ABCD"[("ABCD".index(r["gold"]) + 1) % 4]))
           for r in rows]
    res = verify_files([_as_result_file(bad, tmp_path / "bad.json", 1)])
    assert res.agree == 0 and len(res.disagree) == 10
    _prompt, _stored, computed = res.disagree[0]
    assert computed == round(float(rows[0]["gold"]), 1)


def test_ambiguous_choice_is_detected():
    prompt = ("For the expression 2 + 2 * 2, the precedence of the operators is redefined. If 2 + 2 * 2 = 8, "
              "what is the redefined precedence of the operators? Please choose ...\n"
              "A. '+' > '*'\nB. '+' = '*'\nC. '*' > '+'\nD. '*' = '+'")
    rec = recompute(prompt)
    assert rec.task == 2 and rec.fitting == ("A", "B", "D") and rec.computed is None


def test_worked_example_is_skipped_and_stated_float_repr_read():
    prompt = ("[Example Question]: For the expression 3 * 9 + 4 - 9, the precedence of the operators is redefined. "
              "If 3 * 9 + 4 - 9 = 22, what is the redefined precedence of the operators?\nA. '*' = '+' = '-'\n"
              "B. '+' = '-' > '*'\n\n[Answer]: ... so the correct answer should be [A]\n\n"
              "For the expression 4 / 7 * 9 - 2, the precedence of the operators is redefined. If 4 / 7 * 9 - 2 = "
              "-3.839324278926909e-05, what is the redefined precedence of the operators?\n"
              "A. '/' > '*' > '-'\nB. '-' > '*' > '/'\nC. '*' > '-' > '/'\nD. '-' = '*' = '/'")
    rec = recompute(prompt)
    assert rec.task == 2 and rec.fitting == () and rec.computed is None  # none of these gives that value
    t1 = ("We redefine the priorities of elementary arithmetic operators as follows: '+' > '*'\n"
          "[Example Question]: What is the value of 1 + 2 * 3?\n[Answer]: [9]\n\n"
          "Based on the new priorities, what is the value of 741 * 758 + 370? You can ...")
    assert recompute(t1).computed == 835848.0
    assert recompute("What is the value of 9 - 5 + 6? Put it in brackets").computed == 10.0
    assert recompute("Emily is a cat. Who is Emily afraid of?") is None


def test_unreadable_files(tmp_path):
    p = tmp_path / "x.json"
    p.write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON at line 1"):
        verify_files([p])
    p.write_text(json.dumps({"a": 1}))
    with pytest.raises(InputError, match="no 'data' list"):
        verify_files([p])
    with pytest.raises(InputError, match="no such file"):
        verify_files([tmp_path / "missing.json"])


@pytest.mark.shared
def test_task5_task6_result_files(shared_data):
    files = sorted((shared_data / "elagent" / "results").glob("task [56]/*.json"))
    if not files:
        pytest.skip("no ELAGENT Task 5/6 result files")
    res = verify_files(files)
    assert res.items == sum(1 for f in files for _ in iter_items(f)) and res.disagree == []
    # the 'derive' set lists two persons of the answer kind in some items
    assert res.ambiguous and all("afraid of?" in p and len(f) == 2 and s in f for p, s, f in res.ambiguous)


def test_generated_task5_task6_verify(tmp_path):
    from mrcstats.tasks.elagent.generate import TASK5_VARIANTS, task5, task6

    rows = [r for v in TASK5_VARIANTS for r in task5(40, variant=v, seed=4)]
    rows += [r for t in ("NTNS", "TNS", "NTS", "TS") for r in task6(20, ptype=t, seed=4)]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = verify_files([path])
    assert (res.items, res.agree, res.ambiguous, res.disagree) == (280, 280, [], [])
    unknown = rows[-1]["prompt"].replace(rows[-1]["definition"], "X and Y glorp")
    assert recompute(unknown) is None
