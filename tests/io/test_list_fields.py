"""Issue 25: MMLU-Pro's own JSON (a list of records whose ``options`` is a list) reads without a traceback:
list/object cells of free-text and extra columns are kept as JSON text; in a one-value field
(model, item, cluster, condition) they are refused with one line."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from mrcstats.cli import main
from mrcstats.errors import InputError
from mrcstats.io import read_log

MAP = ["--map", "item=question_id", "--map", "gold=answer", "--map", "pred=pred", "--map", "cluster=category"]


@pytest.fixture()
def mmlu_pro(tmp_path):
    """The shape of TIGER-Lab/MMLU-Pro's evaluate_from_api.py output: one JSON list of records per category."""
    recs = []
    for i in range(8):
        recs.append({"question_id": 70 + i, "question": f"Question {i}?",
                     "options": ["alpha", "beta", "gamma", "delta", "epsilon"], "answer": "B", "answer_index": 1,
                     "cot_content": "", "category": "physics" if i % 2 else "law", "src": "ori_mmlu-high_school",
                     "pred": "B" if i % 3 else "C", "model_outputs": "Let's think. The answer is (B).",
                     "tags": {"difficulty": i % 3, "refs": [1, 2]}})
    p = tmp_path / "physics_result.json"
    p.write_text(json.dumps(recs, indent=1))
    return p


def test_list_valued_fields_are_kept_as_json_text(mmlu_pro):
    log = read_log(str(mmlu_pro), model="m1", mapping={"item": "question_id", "gold": "answer", "pred": "pred",
                                                      "cluster": "category"})
    assert len(log) == 8
    assert json.loads(log["options"].iloc[0]) == ["alpha", "beta", "gamma", "delta", "epsilon"]
    assert log["correct"].sum() == 5                                 # pred B on 5 of 8 rows
    extra = [c for c in log.columns if str(c).startswith("tags")]
    assert extra                                                   # the object is kept (flattened or as text)
    for c in extra:
        assert not log[c].map(lambda v: isinstance(v, (list, dict))).any()


def test_mmlu_pro_json_through_the_cli(capsys, tmp_path, mmlu_pro):
    code = main(["summary", str(mmlu_pro), "--model", "m1", *MAP, "--json"])
    _, err = capsys.readouterr()
    assert code == 0, err
    assert "Traceback" not in err
    out_path = tmp_path / "log.parquet"
    code = main(["ingest", str(mmlu_pro), "--model", "m1", *MAP, "--out", str(out_path)])
    capsys.readouterr()
    assert code == 0
    back = pd.read_parquet(out_path)
    assert json.loads(back["options"].iloc[3])[0] == "alpha"


def test_list_in_a_one_value_field_is_one_line(capsys, mmlu_pro):
    code = main(["summary", str(mmlu_pro), "--model", "m1", "--map", "item=options", "--map", "gold=answer",
                 "--map", "pred=pred"])
    _, err = capsys.readouterr()
    assert code == 2 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and "one value per row" in err and "JSON array" in err


def test_frame_with_a_list_item_is_refused():
    from mrcstats.io.schema import coerce_log

    df = pd.DataFrame({"model": ["a", "b"], "item": [["x"], ["y"]], "correct": [True, False]})
    with pytest.raises(InputError, match="item must be one value per row"):
        coerce_log(df)
