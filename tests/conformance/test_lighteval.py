"""lighteval details files written by lighteval itself (0.13.0, offline, mock model): read sample by sample,
and the aggregated numbers equal lighteval's own results file.

Fixtures: tests/conformance/lighteval/ (scripts/tool_fixtures/lighteval_fixtures.py; manifest.json has the
version and lighteval's aggregated results)."""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import mrcstats
from mrcstats.errors import InputError
from mrcstats.io.detect import detect_format, load_source
from mrcstats.stats.accuracy import summarize_frame

HERE = Path(__file__).resolve().parent / "lighteval"
MANIFEST = json.loads((HERE / "manifest.json").read_text())
DETAILS = [HERE / p for p in MANIFEST["details"]]


@pytest.fixture(scope="module")
def log() -> pd.DataFrame:
    return mrcstats.read_log(HERE / "details")


def test_details_files_are_detected_as_lighteval_and_a_plain_parquet_is_not(tmp_path):
    for f in DETAILS:
        assert detect_format(load_source(f)) == "lighteval"
    p = tmp_path / "log.parquet"
    pd.DataFrame({"model": ["m"], "item": ["q"], "correct": [True]}).to_parquet(p)
    assert detect_format(load_source(p)) == "parquet"


def test_every_sample_and_metric_is_one_row(log):
    assert log.attrs["format"] == "lighteval"
    assert set(log["model"]) == {"mock/mrc-mock"}   # config_general.model_name of the run's results file
    n = sum(sum(len(m) for m in pq.read_table(f).column("metric").to_pylist()) for f in DETAILS)
    assert len(log) == n == 24
    assert log.attrs["skipped"] == {}


def test_per_sample_values_are_lighteval_s(log):
    for f in DETAILS:
        recs = pq.read_table(f).to_pylist()
        for r in recs:
            task = r["doc"]["task_name"].split("|")[0]
            rows = log[log["item"] == f"{task}:{r['doc']['id']}"]
            assert sorted(rows["metric"]) == sorted(r["metric"])
            for _, row in rows.iterrows():
                v = float(r["metric"][row["metric"]])
                assert row["score"] == v
                if v in (0.0, 1.0) and row["metric"] != "f1":
                    assert row["correct"] == (v == 1.0)
            gold = r["doc"]["choices"][r["doc"]["gold_index"]].strip()
            assert set(rows["gold"]) == {gold}
            lp = r["model_response"]["logprobs"]
            if lp:   # log-likelihood task: pred is the most likely choice, and acc says whether it is the gold
                pred = r["doc"]["choices"][int(np.argmax(lp))].strip()
                assert set(rows["pred"]) == {pred}
                assert set(rows["correct"]) == {pred == gold}
            else:
                assert set(rows["pred"]) == {r["model_response"]["text_post_processed"][0]}


def test_graded_metric_fills_score_only(log):
    f1 = log[log["metric"] == "f1"]
    assert f1["correct"].isna().all() and f1["score"].notna().all()
    assert f1["score"].between(0, 1).all() and (~f1["score"].isin([0.0, 1.0])).any()   # partial F1
    assert set(log.loc[log["task"] == "mrc_gen_f1", "condition"]) == {"em", "f1"}   # two metrics: kept apart
    assert set(log.loc[log["task"] != "mrc_gen_f1", "condition"]) == {""}


@pytest.mark.parametrize("task_key", [k for k in MANIFEST["results"] if k != "all"])
def test_aggregates_equal_lighteval_results(log, task_key):
    task = task_key.split("|")[0]
    for name, value in MANIFEST["results"][task_key].items():
        if name.endswith("_stderr"):
            continue
        part = log[(log["task"] == task) & (log["metric"] == name)]
        scores = part["score"].to_numpy(dtype=float)
        n = len(scores)
        assert scores.mean() == pytest.approx(value, abs=1e-12)
        stderr = MANIFEST["results"][task_key][f"{name}_stderr"]
        assert scores.std(ddof=1) / math.sqrt(n) == pytest.approx(stderr, abs=1e-12)
        if part["correct"].notna().all():   # a binary metric: mrcstats' accuracy and clustered SE
            s = summarize_frame(part, ["model"]).to_frame().iloc[0]
            assert s["accuracy"] == pytest.approx(value, abs=1e-12)
            assert s["se_cluster"] == pytest.approx(stderr, abs=1e-12)   # CR1 = sd / sqrt(n) here


def test_results_file_is_matched_by_run_date_and_model_needed_without_it(tmp_path):
    one = DETAILS[0]
    alone = tmp_path / one.name
    shutil.copy(one, alone)
    with pytest.raises(InputError, match="no model name.*pass --model"):
        mrcstats.read_log(alone)
    assert set(mrcstats.read_log(alone, model="mine")["model"]) == {"mine"}
    # the results file beside the details file names the model
    res = next((HERE / "results").rglob("results_*.json"))
    shutil.copy(res, tmp_path / res.name)
    assert set(mrcstats.read_log(alone)["model"]) == {"mock/mrc-mock"}


def test_a_details_file_without_metrics_is_one_clear_error(tmp_path):
    t = pq.read_table(DETAILS[0])
    recs = t.to_pylist()
    for r in recs:
        r["metric"] = None
    bad = tmp_path / DETAILS[0].name
    pq.write_table(pa.Table.from_pylist(recs), bad)
    with pytest.raises(InputError, match="no sample-level metric values"):
        mrcstats.read_log(bad, model="m")


def test_dataset_ingest_detects_lighteval_by_the_parquet_footer(tmp_path, log):
    ds = mrcstats.write_dataset(HERE / "details", tmp_path / "ds")
    back = ds.to_log()
    assert len(back) == len(log)
    key = ["model", "item", "condition"]
    a = back.sort_values(key).reset_index(drop=True)
    b = log.sort_values(key).reset_index(drop=True)
    assert a["correct"].tolist() == b["correct"].tolist()


# ------------------------------------------------ issue 36: one model at two few-shot settings, read together
FEWSHOT = Path(__file__).resolve().parent / "lighteval_fewshot"


def test_fewshot_settings_become_the_condition():
    """lighteval 0.13.0 ran ``mrc_mc|0,mrc_mc|2`` for one model: the few-shot setting joins the condition (the
    rows used to collide as duplicates), the notes say so, and each condition equals lighteval's own result."""
    man = json.loads((FEWSHOT / "manifest.json").read_text())
    assert man["version"] == "0.13.0"
    with pytest.warns(UserWarning, match="num_fewshot"):
        log = mrcstats.read_log(FEWSHOT / "details")
    assert set(log["condition"]) == {"num_fewshot=0", "num_fewshot=2"}
    assert any("num_fewshot" in n for n in log.attrs["notes"])
    t = summarize_frame(log, ["model", "condition"]).to_frame().set_index("condition")
    for shots in (0, 2):
        want = man["results"][f"mrc_mc|{shots}"]
        assert t.loc[f"num_fewshot={shots}", "accuracy"] == pytest.approx(want["acc"], abs=1e-12)
        assert t.loc[f"num_fewshot={shots}", "se_cluster"] == pytest.approx(want["acc_stderr"], abs=1e-12)
