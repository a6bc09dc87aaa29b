"""HELM run folders and folders of lm-evaluation-harness outputs (several models), read as one log.

The files are built here in the tools' documented shapes: HELM ``per_instance_stats.json`` (PerInstanceStats:
instance_id, train_trial_index, perturbation, stats of Stat{name{name, split, perturbation}, count, sum, mean}),
``scenario_state.json`` (adapter_spec, request_states) and ``run_spec.json``; harness
``<output_path>/<model>/results_<ts>.json`` (model_name, config.model_args) beside ``samples_<task>_<ts>.jsonl``.
"""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcstats.errors import InputError
from mrcstats.io import read_log
from mrcstats.io.detect import detect_format, load_source


def _stat(name, value, split="test", pert=None):
    nm = {"name": name, "split": split}
    if pert:
        nm["perturbation"] = pert
    return {"name": nm, "count": 1, "sum": value, "sum_squared": value * value, "min": value, "max": value,
            "mean": value, "variance": 0.0, "stddev": 0.0}


def helm_run(root, model, outcomes, metric="exact_match", scenario="mmlu:subject=anatomy", state=True,
             pert=None, trials=1):
    run = root / f"{scenario},method=multiple_choice_joint,model={model.replace('/', '_')}"
    run.mkdir(parents=True)
    per, reqs = [], []
    for t in range(trials):
        for i, ok in enumerate(outcomes):
            per.append({"instance_id": f"id{i}", "train_trial_index": t,
                        "stats": [_stat("num_references", 4.0), _stat(metric, float(ok)),
                                  _stat("predicted_index", 1.0)]})
            reqs.append({"instance": {"input": {"text": f"Q{i}?"}, "id": f"id{i}", "split": "test",
                                      "references": [{"output": {"text": "A"}, "tags": ["correct"]},
                                                     {"output": {"text": "B"}, "tags": []}]},
                         "train_trial_index": t, "request": {"model": model, "prompt": "..."},
                         "result": {"success": True, "completions": [{"text": " A" if ok else " B",
                                                                      "logprob": -0.1}]}})
    if pert:
        for i, ok in enumerate(outcomes):
            p = {"name": pert, "robustness": True}
            per.append({"instance_id": f"id{i}", "train_trial_index": 0, "perturbation": p,
                        "stats": [_stat(metric, float(not ok), pert=p)]})
    per.append({"instance_id": "id-no-stat", "train_trial_index": 0, "stats": [_stat("num_references", 4.0)]})
    (run / "per_instance_stats.json").write_text(json.dumps(per, indent=2))
    if state:
        (run / "scenario_state.json").write_text(json.dumps({"adapter_spec": {"method": "multiple_choice_joint",
                                                                              "model": model, "max_tokens": 1},
                                                             "request_states": reqs}))
    (run / "run_spec.json").write_text(json.dumps({"name": run.name, "adapter_spec": {"model": model},
                                                   "metric_specs": []}))
    (run / "stats.json").write_text(json.dumps([_stat(metric, sum(outcomes) / len(outcomes))]))
    (run / "scenario.json").write_text(json.dumps({"name": "mmlu"}))
    return run


def test_helm_runs_folder(tmp_path):
    a = [1, 0, 1, 1, 0, 1]
    b = [0, 0, 1, 0, 0, 1]
    helm_run(tmp_path / "suite", "openai/gpt2", a)
    helm_run(tmp_path / "suite", "meta/llama-7b", b)
    src = load_source(tmp_path / "suite" / next(p.name for p in (tmp_path / "suite").iterdir())
                      / "per_instance_stats.json")
    assert detect_format(src) == "helm"
    log = read_log(tmp_path / "suite")
    assert log.attrs["format"] == "helm" and len(log.attrs["sources"]) == 2
    assert sorted(log["model"].unique()) == ["meta/llama-7b", "openai/gpt2"]
    g = log[log.model == "openai/gpt2"].sort_values("item")
    assert g["item"].tolist() == [f"mmlu:subject=anatomy,method=multiple_choice_joint:id{i}" for i in range(6)]
    assert g["instance_id"].tolist() == [f"id{i}" for i in range(6)]
    assert g["correct"].astype(int).tolist() == a
    assert set(log["metric"]) == {"exact_match"} and (log["gold"] == "A").all()
    assert g["response"].tolist()[0] == " A"
    assert log.attrs["skipped"] == {"HELM instances without the 'exact_match' stat": 2}
    from mrcstats.stats.compare import compare

    res = compare(log)
    r = res.pairs.iloc[0]
    assert (r.model_a, r.model_b, r.n_items) == ("meta/llama-7b", "openai/gpt2", 6)
    assert r["diff"] == pytest.approx((sum(b) - sum(a)) / 6)


def test_helm_suite_same_ids_in_two_scenarios(tmp_path):
    """HELM's bare instance ids repeat across the scenarios of a suite (id0, id1, ... in each): one model's two
    runs are two scenarios' items, not duplicate rows; two models' runs of one scenario pair on them."""
    suite = tmp_path / "benchmark_output" / "runs" / "v1"
    helm_run(suite, "openai/gpt2", [1, 0, 1], scenario="mmlu:subject=anatomy")
    helm_run(suite, "openai/gpt2", [0, 0, 1], scenario="mmlu:subject=philosophy")
    helm_run(suite, "meta/llama-7b", [1, 1, 1], scenario="mmlu:subject=anatomy")
    log = read_log(suite)
    assert len(log) == 9 and log["item"].nunique() == 6
    assert set(log["scenario"]) == {"mmlu:subject=anatomy,method=multiple_choice_joint",
                                    "mmlu:subject=philosophy,method=multiple_choice_joint"}
    from mrcstats.stats.compare import compare

    res = compare(log[log["scenario"].str.contains("anatomy")])
    assert res.pairs.iloc[0]["n_items"] == 3


def test_helm_main_stat_order_perturbation_and_model_fallback(tmp_path):
    run = helm_run(tmp_path, "m/x", [1, 0, 1], metric="quasi_exact_match", state=False, pert="typos", trials=2)
    log = read_log(run)
    assert set(log["metric"]) == {"quasi_exact_match"}
    assert set(log["model"]) == {"m/x"}  # from run_spec.json
    assert sorted(log["condition"].unique()) == ["", "typos"]
    assert sorted(log["trial"].unique()) == [0, 1]
    typos = log[log.condition == "typos"].sort_values("item")
    assert typos["correct"].astype(int).tolist() == [0, 1, 0]


def test_helm_bad_input(tmp_path):
    run = helm_run(tmp_path, "m", [1, 0], metric="f1_score")
    with pytest.raises(InputError, match="no exact-match style stat"):
        read_log(run)
    run2 = helm_run(tmp_path / "b", "m", [1, 0])
    per = json.loads((run2 / "per_instance_stats.json").read_text())
    per[0]["stats"][1]["mean"] = 0.5
    (run2 / "per_instance_stats.json").write_text(json.dumps(per))
    with pytest.raises(InputError, match="not 0 or 1"):
        read_log(run2)
    run3 = helm_run(tmp_path / "c", "m", [1, 0], state=False)
    (run3 / "run_spec.json").unlink()
    with pytest.raises(InputError, match="--model"):
        read_log(run3)
    assert set(read_log(run3, model="given")["model"]) == {"given"}


def harness_output(root, model, outcomes, task="arc_easy", ts="2024-05-01T10-00-00.123456", style="model_name"):
    folder = root / model.replace("/", "__")
    folder.mkdir(parents=True)
    recs = [{"doc_id": i, "doc": {"question": f"q{i}"}, "target": 0, "arguments": [],
             "resps": [[[-1.0, False]], [[-2.0, False]]],
             "filtered_resps": [[-1.0, False], [-2.0 if ok else -0.5, False]], "filter": "none",
             "metrics": ["acc"], "acc": float(ok)} for i, ok in enumerate(outcomes)]
    (folder / f"samples_{task}_{ts}.jsonl").write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    results = {"results": {task: {"alias": task, "acc,none": sum(outcomes) / len(outcomes),
                                  "acc_stderr,none": 0.1}},
               "config": {"model": "hf", "model_args": f"pretrained={model},dtype=float16", "batch_size": 8},
               "git_hash": "abc", "date": 1714557600.0}
    if style == "model_name":
        results.update({"model_name": model, "model_name_sanitized": model.replace("/", "__")})
    (folder / f"results_{ts}.json").write_text(json.dumps(results))
    return folder


@pytest.mark.parametrize("style", ["model_name", "model_args"])
def test_harness_folder_of_models(tmp_path, style):
    harness_output(tmp_path / "out", "EleutherAI/pythia-160m", [1, 0, 1, 1], style=style)
    harness_output(tmp_path / "out", "EleutherAI/pythia-410m", [1, 1, 1, 0], style=style)
    log = read_log(tmp_path / "out")
    assert log.attrs["format"] == "harness" and len(log.attrs["sources"]) == 2
    assert sorted(log["model"].unique()) == ["EleutherAI/pythia-160m", "EleutherAI/pythia-410m"]
    assert log["item"].tolist()[:2] == ["arc_easy:0", "arc_easy:1"]
    from mrcstats.stats.compare import compare

    res = compare(log)
    assert res.pairs.iloc[0]["n_items"] == 4 and res.pairs.iloc[0]["p_mcnemar"] == pytest.approx(1.0)
    # --model still wins over the results file
    one = read_log(tmp_path / "out" / "EleutherAI__pythia-160m", model="mine")
    assert set(one["model"]) == {"mine"}


def test_harness_results_disagree(tmp_path):
    folder = harness_output(tmp_path, "a/b", [1, 0])
    (folder / "results_2023-01-01T00-00-00.json").write_text(json.dumps({"model_name": "c/d"}))
    (folder / "samples_arc_easy_2024-05-01T10-00-00.123456.jsonl").rename(folder / "samples_arc_easy_x.jsonl")
    with pytest.raises(InputError, match="different models"):
        read_log(folder)


@settings(max_examples=20, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=12))
def test_helm_outcomes_roundtrip(tmp_path_factory, outcomes):
    root = tmp_path_factory.mktemp("helm")
    run = helm_run(root, "m", [int(o) for o in outcomes])
    log = read_log(run).sort_values("instance_id", key=lambda s: s.str[2:].astype(int))
    assert log["correct"].tolist() == outcomes
