"""Every Eval Ever: files written by every-eval-ever's own converters are read, their headline numbers are
what mrcstats computes, and what mrcstats writes validates against the EEE schemas and reads back the same.

Fixtures: tests/conformance/eee/ (scripts/tool_fixtures/eee_fixtures.py; manifest.json names the package
version, the origin of each input and the aggregate's own numbers)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mrcstats
from mrcstats.cli import main
from mrcstats.errors import InputError
from mrcstats.io.detect import detect_format, load_source
from mrcstats.io.eee import validate_eee
from mrcstats.io.schema import CORE_COLUMNS, KEY_COLUMNS
from mrcstats.stats.accuracy import summarize_frame

HERE = Path(__file__).resolve().parent / "eee"
MANIFEST = json.loads((HERE / "manifest.json").read_text())
FIXTURES = MANIFEST["fixtures"]


def _ids(f: dict) -> str:
    return f["folder"]


@pytest.mark.parametrize("fx", FIXTURES, ids=_ids)
def test_real_files_are_detected_and_read_row_for_row(fx):
    agg, samples = HERE / fx["folder"] / fx["aggregate"], HERE / fx["folder"] / fx["samples"]
    assert detect_format(load_source(agg)) == "eee"
    assert detect_format(load_source(samples)) == "eee"
    log = mrcstats.read_log(agg)
    assert log.attrs["format"] == "eee" and len(log) == fx["samples_rows"]
    recs = [json.loads(line) for line in samples.read_text().splitlines() if line.strip()]
    assert log["item"].tolist() == [f"{r['evaluation_name']}:{r['sample_id']}" for r in recs]
    assert log["model"].tolist() == [r["model_id"] for r in recs]
    assert log["correct"].tolist() == [r["evaluation"]["is_correct"] for r in recs]
    assert log["score"].dtype == "Float64"
    assert log["score"].tolist() == [float(r["evaluation"]["score"]) for r in recs]
    # the folder, and the samples file alone, give the same rows
    for other in (mrcstats.read_log(HERE / fx["folder"]), mrcstats.read_log(samples)):
        pd.testing.assert_frame_equal(other[list(CORE_COLUMNS)], log[list(CORE_COLUMNS)])
    assert [r["score"] for r in log.attrs["eee"]["results"]] == [h["score"] for h in fx["headline"]]


@pytest.mark.parametrize("fx", [f for f in FIXTURES if f["headline_from_samples"]], ids=_ids)
def test_headline_numbers_are_what_mrcstats_computes(fx):
    log = mrcstats.read_log(HERE / fx["folder"] / fx["aggregate"])
    agg = json.loads((HERE / fx["folder"] / fx["aggregate"]).read_text())
    for res in agg["evaluation_results"]:
        part = log[log["metric"] == res.get("evaluation_result_id")] if "metric" in log else log
        s = summarize_frame(part, ["model"]).to_frame().iloc[0]
        assert s["accuracy"] == pytest.approx(res["score_details"]["score"], abs=1e-12)
        assert float(part["score"].mean()) == pytest.approx(res["score_details"]["score"], abs=1e-12)
        se = ((res["score_details"].get("uncertainty") or {}).get("standard_error") or {}).get("value")
        if se is not None:   # Inspect's stderr: the clustered SE with the G / (G - 1) small-sample factor (CR1)
            assert s["se_cluster"] == pytest.approx(se, abs=1e-12)


def test_skill_reference_record_fields():
    fx = next(f for f in FIXTURES if f["folder"] == "skill_reference")
    log = mrcstats.read_log(HERE / fx["folder"] / fx["aggregate"])
    row = log.iloc[0]
    assert (row["model"], row["item"], row["trial"], row["condition"]) == (
        "demo-org/demo-model", "demo-source.demo_bench:demo_0001", 0, "")
    assert (row["correct"], row["score"], row["pred"], row["gold"], row["question"]) == (
        True, 1.0, "4", "4", "What is 2 + 2?")


@pytest.mark.parametrize("fx", FIXTURES, ids=_ids)
def test_the_converters_files_pass_the_bundled_schemas(fx):
    validate_eee(json.loads((HERE / fx["folder"] / fx["aggregate"]).read_text()), "aggregate")
    for line in (HERE / fx["folder"] / fx["samples"]).read_text().splitlines():
        validate_eee(json.loads(line), "instance")


def _log(n_models=2, n_items=4, trials=2, conditions=("", "cot")) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    rows = []
    for m in [f"org{i}/model-{i}" for i in range(n_models)]:
        for it in range(n_items):
            for t in range(trials):
                for c in conditions:
                    v = rng.random()
                    rows.append({"model": m, "item": f"bench:{it}", "cluster": f"passage{it // 2}", "trial": t,
                                 "condition": c, "correct": pd.NA if v < 0.1 else bool(v > 0.5),
                                 "response": f"answer {it}", "gold": "A", "pred": "A" if v > 0.5 else "B",
                                 "question": f"question {it}?"})
    return mrcstats.validate_log(pd.DataFrame(rows))


def _same_rows(a: pd.DataFrame, b: pd.DataFrame) -> None:
    key = list(KEY_COLUMNS)
    cols = [c for c in CORE_COLUMNS if c != "masking_rate"]
    x = a.sort_values(key).reset_index(drop=True)[cols]
    y = b.sort_values(key).reset_index(drop=True)[cols]
    pd.testing.assert_frame_equal(x, y, check_dtype=False)
    assert x["masking_rate"].isna().all() if "masking_rate" in x else True


def test_write_then_read_gives_the_same_rows(tmp_path):
    log = _log()
    paths = mrcstats.write_eee(log, tmp_path / "data", evaluation_name="bench", retrieved_timestamp="1700000000")
    assert len(paths) == 4 and {p.suffix for p in paths} == {".json", ".jsonl"}
    back = mrcstats.read_log(tmp_path / "data")
    assert back.attrs["format"] == "eee"
    _same_rows(back, log)
    # a binary log's score is its 0/1 outcome, <NA> for an invalid answer (both null), as in the schema
    assert [None if pd.isna(s) else s for s in back["score"]] == [None if pd.isna(c) else float(c)
                                                                   for c in back["correct"]]
    # the same log and timestamp give the same files
    again = mrcstats.write_eee(log, tmp_path / "again", evaluation_name="bench", retrieved_timestamp="1700000000")
    assert [p.name for p in again] == [p.name for p in paths]
    assert all(p.read_bytes() == q.read_bytes() for p, q in zip(paths, again, strict=True))


def test_written_files_validate_and_their_headline_is_mrcstats_accuracy(tmp_path):
    log = _log(n_models=1)
    paths = mrcstats.write_eee(log, tmp_path, evaluation_name="bench", retrieved_timestamp="1")
    agg = json.loads(next(p for p in paths if p.suffix == ".json").read_text())
    validate_eee(agg, "aggregate")
    samples = next(p for p in paths if p.suffix == ".jsonl")
    lines = samples.read_text().splitlines()
    for line in lines:
        validate_eee(json.loads(line), "instance")
    assert agg["detailed_evaluation_results"]["total_rows"] == len(lines) == len(log)
    assert agg["detailed_evaluation_results"]["file_path"].endswith(samples.name)
    s = summarize_frame(log, ["condition"]).to_frame().set_index("condition")
    got = {r["evaluation_result_id"]: r["score_details"] for r in agg["evaluation_results"]}
    assert set(got) == {"accuracy", "accuracy[cot]"}
    for cond, rid in (("", "accuracy"), ("cot", "accuracy[cot]")):
        assert got[rid]["score"] == s.loc[cond, "accuracy"]
        assert got[rid]["uncertainty"]["standard_error"]["value"] == s.loc[cond, "se_cluster"]
        assert got[rid]["uncertainty"]["num_samples"] == s.loc[cond, "n"]


def test_real_files_round_trip_through_the_writer(tmp_path):
    for fx in FIXTURES:
        log = mrcstats.read_log(HERE / fx["folder"] / fx["aggregate"])
        mrcstats.write_eee(log, tmp_path / fx["folder"], retrieved_timestamp="1")
        back = mrcstats.read_log(tmp_path / fx["folder"])
        _same_rows(back, log)
        assert back["score"].tolist() == log["score"].tolist()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_round_trip_property(tmp_path_factory, data):
    n = data.draw(st.integers(1, 6))
    text = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=8)
    rows = [{"model": data.draw(st.sampled_from(["m1", "org/m2"])), "item": data.draw(text),
             "trial": data.draw(st.integers(0, 3)), "condition": data.draw(st.sampled_from(["", "x", "a b"])),
             "cluster": data.draw(st.one_of(st.none(), text)),
             "masking_rate": data.draw(st.one_of(st.none(), st.sampled_from([0.0, 12.5, 100.0]))),
             "correct": data.draw(st.sampled_from([True, False, None])),
             "pred": data.draw(st.one_of(st.none(), text)), "gold": data.draw(st.one_of(st.none(), text))}
            for _ in range(n)]
    df = pd.DataFrame(rows).drop_duplicates(["model", "item", "trial", "condition", "masking_rate"])
    df["cluster"] = df["cluster"].fillna(df["item"])
    log = mrcstats.validate_log(df)
    out = tmp_path_factory.mktemp("eee")
    mrcstats.write_eee(log, out, evaluation_name="e", retrieved_timestamp="1")
    back = mrcstats.read_log(out)
    key = list(KEY_COLUMNS)
    a = log.sort_values(key).reset_index(drop=True)
    b = back.sort_values(key).reset_index(drop=True)
    for c in ("model", "item", "cluster", "trial", "condition", "masking_rate", "correct", "gold", "pred"):
        pd.testing.assert_series_equal(b[c], a[c], check_dtype=False, check_names=False)


def test_aggregate_without_samples_is_one_clear_error(tmp_path):
    fx = FIXTURES[0]
    (tmp_path / fx["aggregate"]).write_bytes((HERE / fx["folder"] / fx["aggregate"]).read_bytes())
    with pytest.raises(InputError, match="without its instance-level samples file"):
        mrcstats.read_log(tmp_path / fx["aggregate"])


def test_bad_records_name_the_line_and_errored_samples_are_counted(tmp_path):
    fx = FIXTURES[0]
    lines = (HERE / fx["folder"] / fx["samples"]).read_text().splitlines()
    bad = json.loads(lines[1])
    bad["evaluation"]["is_correct"] = "yes"
    p = tmp_path / "x_samples.jsonl"
    p.write_text("\n".join([lines[0], json.dumps(bad), *lines[2:]]) + "\n")
    with pytest.raises(InputError, match=r"line 2: evaluation.is_correct is 'yes'"):
        mrcstats.read_log(p)
    err = json.loads(lines[1])
    err["error"] = "TimeoutError: the model did not answer\ntraceback ..."
    p.write_text("\n".join([lines[0], json.dumps(err), *lines[2:]]) + "\n")
    log = mrcstats.read_log(p)
    assert len(log) == len(lines) - 1
    assert log.attrs["skipped"] == {"sample errored: TimeoutError: the model did not answer": 1}


def test_several_results_per_sample_are_kept_apart_as_conditions(tmp_path):
    fx = FIXTURES[0]
    recs = [json.loads(x) for x in (HERE / fx["folder"] / fx["samples"]).read_text().splitlines()]
    second = [{**r, "evaluation_result_id": "choice:stderr"} for r in recs]
    p = tmp_path / "y_samples.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in recs + second))
    log = mrcstats.read_log(p)
    assert len(log) == 2 * len(recs)
    assert sorted(log["condition"].unique()) == ["choice:accuracy", "choice:stderr"]


def test_validator_names_the_path_of_a_violation():
    rec = json.loads((HERE / FIXTURES[0]["folder"] / FIXTURES[0]["samples"]).read_text().splitlines()[0])
    rec["evaluation"]["score"] = "high"
    with pytest.raises(InputError, match=r"instance at evaluation/score: 'high' is not of type 'number'"):
        validate_eee(rec, "instance")


def test_export_cli(tmp_path, capsys):
    src = HERE / FIXTURES[0]["folder"]
    assert main(["export", str(src), "--out", str(tmp_path / "data"), "--timestamp", "5", "--json",
                 "--eval-library", "inspect_ai=0.3.138"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["format"] == "eee" and len(out["written"]) == 2
    assert main(["export", str(src), "--out", str(tmp_path / "d2"), "--eval-library", "noversion"]) == 2
    assert "--eval-library expects NAME=VERSION" in capsys.readouterr().err
    with pytest.raises(InputError, match="evaluator_relationship must be"):
        mrcstats.write_eee(mrcstats.read_log(src), tmp_path / "d3", evaluator_relationship="friend")


def test_graded_scores_round_trip_and_their_aggregate_is_the_mean_score(tmp_path):
    log = mrcstats.read_log(Path(__file__).resolve().parent / "lighteval" / "details")   # em (binary), f1 (graded)
    paths = mrcstats.write_eee(log, tmp_path, retrieved_timestamp="1")
    back = mrcstats.read_log(tmp_path)
    _same_rows(back, log)
    key = list(KEY_COLUMNS)
    a, b = log.sort_values(key).reset_index(drop=True), back.sort_values(key).reset_index(drop=True)
    assert b["score"].tolist() == a["score"].tolist()
    assert b["correct"].isna().tolist() == a["correct"].isna().tolist()
    aggs = [json.loads(p.read_text()) for p in paths if p.suffix == ".json"]
    res = {(r["evaluation_name"], r["evaluation_result_id"]): r for agg in aggs for r in agg["evaluation_results"]}
    f1 = res[("mrc_gen_f1", "mean_score[f1]")]
    assert f1["metric_config"]["metric_id"] == "mean_score"
    assert f1["score_details"]["score"] == pytest.approx(log.loc[log["metric"] == "f1", "score"].mean(), abs=1e-15)
    assert res[("mrc_gen_f1", "accuracy[em]")]["score_details"]["score"] == 0.5


def test_every_eval_ever_s_own_validator_accepts_what_mrcstats_writes(tmp_path):
    """every-eval-ever's validator (pydantic models + datastore path rules; Python >= 3.12) on exported files.
    Set MRCSTATS_EEE_PYTHON to a Python with ``every-eval-ever`` installed; skipped otherwise."""
    import os
    import subprocess

    py = os.environ.get("MRCSTATS_EEE_PYTHON")
    if not py or subprocess.run([py, "-c", "import every_eval_ever"], check=False, capture_output=True).returncode:
        pytest.skip("set MRCSTATS_EEE_PYTHON to a Python >= 3.12 with every-eval-ever installed")
    for fx in FIXTURES[:2]:
        mrcstats.write_eee(mrcstats.read_log(HERE / fx["folder"]), tmp_path / "data", retrieved_timestamp="1")
    mrcstats.write_eee(mrcstats.read_log(Path(__file__).resolve().parent / "lighteval" / "details"),
                       tmp_path / "data", retrieved_timestamp="1")
    files = sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "data").rglob("*.json*"))
    r = subprocess.run([py, "-m", "every_eval_ever", "validate", *files], check=False, cwd=tmp_path,
                       capture_output=True, text=True)
    assert r.returncode == 0 and "All files passed validation" in r.stdout, r.stdout[-2000:]


# ------------------------------------------- issue 36: an Inspect log's aggregate is the tool's headline
INSPECT = Path(__file__).resolve().parent / "inspect"


@pytest.mark.parametrize("name", ["epochs_at_least_2.eval", "epochs_two_reducers.eval", "epochs_mean.eval",
                                  "scorers.eval"])
def test_export_of_an_inspect_log_writes_inspects_headline(tmp_path, name):
    """The aggregate of a log Inspect wrote is its own ``results.scores`` (the first reducer's value and its
    stderr), as every-eval-ever's Inspect converter writes it (``score`` = the metric value), not the
    trial-pooled accuracy (kept in ``details``)."""
    import warnings

    tool = json.loads((INSPECT / "manifest.json").read_text())["logs"][name]
    first = tool["scores"][0]        # Inspect's first EvalScore: the first scorer, first reducer
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        log = mrcstats.read_log(INSPECT / name)
    paths = mrcstats.write_eee(log, tmp_path / "out", retrieved_timestamp="1")
    agg = json.loads(next(p for p in paths if p.suffix == ".json").read_text())
    validate_eee(agg, "aggregate")
    (res,) = agg["evaluation_results"]
    metric = next(v for k, v in first["metrics"].items() if k != "stderr")
    assert res["score_details"]["score"] == pytest.approx(metric, abs=1e-12)
    assert res["score_details"]["uncertainty"]["standard_error"]["value"] == pytest.approx(
        first["metrics"]["stderr"], abs=1e-12)
    assert res["score_details"]["uncertainty"]["num_samples"] == first["scored_samples"]
    assert res["score_details"]["details"]["reducer"] == (first["reducer"] or "mean")
    pooled = log["score"].astype(float).mean()   # no N in these logs' first scorer
    if res["metric_config"]["metric_id"] == "accuracy":
        assert float(res["score_details"]["details"]["trial_pooled_accuracy"]) == pytest.approx(pooled, abs=1e-12)
    if name == "epochs_at_least_2.eval":  # the reducer matters here: 0.4 against the pooled 0.4667
        assert res["score_details"]["score"] == pytest.approx(0.4) and pooled == pytest.approx(7 / 15)
