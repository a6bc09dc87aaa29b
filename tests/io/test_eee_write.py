"""The EEE writer in io (:func:`mrcstats.io.eee.write_eee_files`): files, layout and validation are its own, the
aggregate results its caller's."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from mrcstats.errors import InputError
from mrcstats.io.eee import is_graded, read_eee, write_eee_files
from mrcstats.io.source import load_source


def _log() -> pd.DataFrame:
    return pd.DataFrame({"model": ["org/m1"] * 3 + ["m2"] * 3, "item": ["a", "b", "c"] * 2,
                         "correct": [1, 0, 1, 1, 1, 0]})


def _results(seen: list):
    def results(work, rids):
        seen.append(dict(rids))
        return {key: {"evaluation_result_id": rid, "evaluation_name": key[0],
                      "source_data": {"dataset_name": key[0], "source_type": "other"},
                      "metric_config": {"evaluation_description": "caller's", "lower_is_better": False,
                                        "score_type": "continuous", "min_score": 0.0, "max_score": 1.0},
                      "score_details": {"score": 0.25}} for key, rid in rids.items()}
    return results


def test_the_writer_takes_the_results_from_its_caller(tmp_path):
    seen: list = []
    paths = write_eee_files(_log(), tmp_path / "out", _results(seen), evaluation_name="quiz",
                            retrieved_timestamp="1", exported_by="test")
    assert seen == [{("quiz", "m2", ""): "accuracy", ("quiz", "org/m1", ""): "accuracy"}]
    aggs = [p for p in paths if not p.name.endswith("_samples.jsonl")]
    assert sorted(p.parent.relative_to(tmp_path / "out").as_posix() for p in aggs) == ["quiz/org/m1", "quiz/unknown/m2"]
    agg = json.loads(aggs[0].read_text())
    assert agg["evaluation_results"][0]["score_details"]["score"] == 0.25
    assert agg["source_metadata"]["additional_details"]["exported_by"] == "test"
    back = pd.concat([read_eee(load_source(p)) for p in paths if p.name.endswith("_samples.jsonl")])
    assert len(back) == 6


def test_a_result_the_schema_refuses_writes_nothing(tmp_path):
    def bad(work, rids):
        return {key: {"evaluation_result_id": rid} for key, rid in rids.items()}

    with pytest.raises(InputError):
        write_eee_files(_log(), tmp_path / "out", bad, retrieved_timestamp="1")
    assert not (tmp_path / "out").exists()


def test_a_graded_group():
    assert is_graded(pd.DataFrame({"correct": [pd.NA, 1], "score": [0.5, None]}))
    assert not is_graded(pd.DataFrame({"correct": [0, 1], "score": [0.5, 1.0]}))
