"""lm-evaluation-harness conformance: files lm-eval itself wrote (tests/conformance/harness, written by
scripts/tool_fixtures/harness_fixtures.py: lm-eval 0.4.13, its ``dummy`` model and registered pseudo
models, four runs in one output folder) read sample by sample and against lm-eval's own results_*.json.

Issue 23, harness part: (5) runs without a model path share lm-eval's generated model_name,
(6) multiple-choice log-likelihoods are written as text, (7) the filter ``none`` had two names,
(8) graded metrics (f1) were refused.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mrcstats.errors import InputError
from mrcstats.io import read_log
from mrcstats.stats.accuracy import summarize
from mrcstats.stats.compare import compare

HERE = Path(__file__).parent / "harness"
OUT = HERE / "lm_eval_out"
MANIFEST = json.loads((HERE / "manifest.json").read_text())
RUNS = MANIFEST["runs"]
MODELS = {"dummy": "dummy", "pseudo_alpha": "pseudo_alpha", "pseudo_beta": "pseudo_beta",
          "pseudo": "pseudo(skill=0.3)"}


def _samples(run: dict) -> list[Path]:
    return [HERE / p for p in run["samples_files"]]


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _cli(*args: str) -> subprocess.CompletedProcess:
    src = Path(__file__).resolve().parents[2] / "src"
    return subprocess.run([sys.executable, "-m", "mrcstats", *args], capture_output=True, text=True, check=False,
                          env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"}, timeout=300)


@pytest.fixture(scope="module")
def log() -> pd.DataFrame:
    return read_log(OUT)


def test_manifest_is_lm_eval_and_runs_share_generated_name():
    assert MANIFEST["package"] == "lm-eval" and MANIFEST["version"] == "0.4.13"
    assert len(RUNS) == 4
    # the premise, as lm-eval wrote it: one generated model_name for every run
    assert len({r["model_name"] for r in RUNS}) == 1
    assert all(r["model_args"] is None or "pretrained" not in r["model_args"] for r in RUNS)


def test_multi_run_folder_keeps_every_model(log):
    """Issue 23.5: four runs in one folder are four models, nothing merged or dropped."""
    assert sorted(log["model"].unique()) == sorted(MODELS.values())
    n_lines = sum(len(_records(p)) for r in RUNS for p in _samples(r))
    assert len(log) == n_lines
    assert log.attrs["skipped"] == {}


def test_keys_and_per_sample_correctness(log):
    for run in RUNS:
        model = MODELS[run["model"]]
        for path in _samples(run):
            task = path.name.removeprefix("samples_").rsplit("_", 1)[0]
            for rec in _records(path):
                row = log[(log["model"] == model) & (log["item"] == f"{task}:{rec['doc_id']}")
                          & (log["condition"] == rec["filter"])]
                assert len(row) == 1, (model, task, rec["doc_id"], rec["filter"])
                row = row.iloc[0]
                metric = "acc" if "acc" in rec else "exact_match" if "exact_match" in rec else "f1"
                assert row["metric"] == metric
                invalid = rec["filtered_resps"] in ("[invalid]", ["[invalid]"])
                if invalid:
                    assert pd.isna(row["score"]) and pd.isna(row["correct"]) and rec[metric] == 0
                else:
                    assert row["score"] == rec[metric]
                    if metric == "f1":
                        assert pd.isna(row["correct"])
                    else:
                        assert bool(row["correct"]) == (rec[metric] == 1.0)
                assert row["gold"] == str(rec["target"])


def test_multiple_choice_pred_is_argmax_of_textual_logliks(log):
    """Issue 23.6: lm-eval writes MC log-likelihoods as text; pred is the argmax index, and pred == gold
    exactly where lm-eval scored acc = 1."""
    for run in RUNS:
        path = next(p for p in _samples(run) if "samples_mrc_mc_" in p.name)
        recs = _records(path)
        assert isinstance(recs[0]["filtered_resps"][0][0], str)     # the tool's own text form
        sub = log[(log["model"] == MODELS[run["model"]]) & (log["task"] == "mrc_mc")].set_index("doc_id")
        for rec in recs:
            lls = [float(x[0]) for x in rec["filtered_resps"]]
            assert sub.loc[rec["doc_id"], "pred"] == str(int(np.argmax(lls)))
            assert (sub.loc[rec["doc_id"], "pred"] == sub.loc[rec["doc_id"], "gold"]) == (rec["acc"] == 1.0)


def test_filter_names_are_one_rule_across_files():
    """Issue 23.7: a file with the one filter ``none`` and a file with several name conditions alike,
    read alone or together."""
    run = RUNS[1]
    mc = next(p for p in _samples(run) if "mrc_mc" in p.name)
    gen = next(p for p in _samples(run) if "mrc_gen" in p.name)
    assert set(read_log(mc)["condition"]) == {"none"}
    assert set(read_log(gen)["condition"]) == {"strict-match", "flexible-extract"}
    both = read_log([mc, gen])
    assert set(both["condition"]) == {"none", "strict-match", "flexible-extract"}


def test_condition_none_says_what_it_leaves_out():
    """Issue 23.7: --condition none keeps every unfiltered item and says how many rows of other filters
    it leaves out (it used to drop the multiple-choice items without a word)."""
    r = _cli("compare", str(OUT), "--condition", "none", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    n_none = sum(1 for run in RUNS for p in _samples(run) for rec in _records(p) if rec["filter"] == "none")
    assert "left out 80 rows of other conditions" in r.stderr
    assert out["skipped"]["condition other than 'none' (--condition)"] == 80
    assert sum(m["n_items"] for m in out["models"]) == n_none


@pytest.mark.parametrize("run", RUNS, ids=[r["model"] for r in RUNS])
def test_headline_equals_results_json(log, run):
    """Per (task, filter): mrcstats' accuracy / mean score and its CLT SE (compare's ``se``, lm-eval's
    sample stderr sqrt(var_{n-1} / n)) equal lm-eval's results_*.json."""
    model = MODELS[run["model"]]
    for task, filters in run["headline"].items():
        for flt, vals in filters.items():
            sub = log[(log["model"] == model) & (log["task"] == task) & (log["condition"] == flt)]
            metric = "acc" if "acc" in vals else "exact_match" if "exact_match" in vals else "f1"
            s = summarize(sub, by=[]).to_frame().iloc[0]
            assert s["accuracy"] == pytest.approx(vals[metric], abs=1e-12), (task, flt)
            x = sub["score"].to_numpy(dtype=float, na_value=0.0)
            se = np.sqrt(x.var(ddof=1) / len(x))
            assert se == pytest.approx(vals[f"{metric}_stderr"], abs=1e-12)
            two = pd.concat([sub, sub.assign(model="copy")], ignore_index=True)
            c = compare(two).models.set_index("model")
            assert c.loc[model, "se"] == pytest.approx(vals[f"{metric}_stderr"], abs=1e-12)


def test_graded_f1_fills_score(log):
    """Issue 23.8 (harness half): a task scored by f1 alone reads as a graded score (correct empty);
    summary reports the mean score = lm-eval's f1; binary-only analyses refuse it in one line."""
    f1 = log[log["task"] == "mrc_f1"]
    assert f1["correct"].isna().all() and f1["score"].notna().all()
    assert not f1["score"].isin([0.0, 1.0]).all()
    res = summarize(f1)
    assert res.outcome == "score"
    r = _cli("mcnemar", *map(str, OUT.glob("*/samples_mrc_f1_*")), "--models", "dummy,pseudo_alpha")
    assert r.returncode == 2 and "needs a binary outcome" in r.stderr and "Traceback" not in r.stderr
    r = _cli("summary", *map(str, OUT.glob("*/samples_mrc_f1_*")), "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["outcome"] == "score"


def test_other_metrics_kept_and_mappable(log):
    assert "acc_norm" in log.columns and "f1" in log.columns
    gen = list(OUT.glob("*/samples_mrc_gen_*"))
    g = read_log(gen, mapping={"score": "f1"})
    assert g["score"].notna().any()


def test_same_run_read_twice_suggests_on_duplicate(tmp_path):
    run = RUNS[1]
    res = HERE / run["results_file"]
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        shutil.copy(res, tmp_path / d)
        for p in _samples(run):
            shutil.copy(p, tmp_path / d)
    with pytest.raises(InputError) as e:
        read_log(tmp_path)
    assert "identical" in str(e.value) and "--on-duplicate first|last" in str(e.value)
    assert len(read_log(tmp_path, on_duplicate="first")) == len(read_log(tmp_path / "a"))


def test_different_runs_under_one_name_are_not_offered_on_duplicate(tmp_path):
    """Two different runs given one --model name: the message says they differ and how to name them."""
    for run, d in zip(RUNS[1:3], ("a", "b"), strict=True):
        (tmp_path / d).mkdir()
        for p in _samples(run):
            shutil.copy(p, tmp_path / d)
    with pytest.raises(InputError) as e:
        read_log(tmp_path, model="m")
    msg = str(e.value)
    assert "differ" in msg and "--model PATH=NAME" in msg and "--on-duplicate first|last" not in msg
    named = read_log(tmp_path, model={str(tmp_path / "a"): "alpha", str(tmp_path / "b"): "beta"})
    assert sorted(named["model"].unique()) == ["alpha", "beta"]
    r = _cli("summary", str(tmp_path), "--model", f"{tmp_path / 'a'}=alpha", "--model", f"{tmp_path / 'b'}=beta",
             "--json")
    assert r.returncode == 0, r.stderr
    assert sorted(g["model"] for g in json.loads(r.stdout)["groups"]) == ["alpha", "beta"]


def test_readme_style_compare_on_multi_run_folder(tmp_path):
    """``mrcstats compare lm_eval_out/ --cluster cluster`` on a folder of several runs of one task."""
    folder = tmp_path / "lm_eval_out"
    for run in RUNS:
        d = folder / run["model"]
        d.mkdir(parents=True)
        shutil.copy(HERE / run["results_file"], d)
        for p in _samples(run):
            if "mrc_mc" in p.name:
                shutil.copy(p, d)
    r = _cli("compare", str(folder), "--cluster", "cluster", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert sorted(m["model"] for m in out["models"]) == sorted(MODELS.values())
    assert out["outcome"] == "correct" and len(out["pairs"]) == 6
    # the whole folder (three tasks, three filters) asks for one condition in one line
    r = _cli("compare", str(OUT), "--cluster", "cluster")
    assert r.returncode == 2 and "conditions" in r.stderr and "--condition" in r.stderr


# ------------------------------------------------------ issue 36: the metric used is named and can be chosen
@pytest.mark.parametrize("run", RUNS, ids=[r["model"] for r in RUNS])
def test_map_score_picks_the_metric_and_names_it(run):
    """``--map score=acc_norm`` reports lm-eval's ``acc_norm`` (it used to keep ``acc``: the reader filled
    ``correct`` from ``acc`` and the mapping only renamed a column), and the output names the metric."""
    path = next(p for p in _samples(run) if "samples_mrc_mc_" in p.name)
    want = run["headline"]["mrc_mc"]["none"]
    norm = summarize(read_log(path, mapping={"score": "acc_norm"}))
    assert norm.metric == "acc_norm" and norm.outcome == "correct"
    assert norm.to_frame()["accuracy"].iloc[0] == pytest.approx(want["acc_norm"], abs=1e-12)
    plain = summarize(read_log(path))
    assert plain.metric == "acc"
    assert plain.to_frame()["accuracy"].iloc[0] == pytest.approx(want["acc"], abs=1e-12)


def test_map_score_cli_json_names_the_metric():
    run = next(r for r in RUNS if r["model"] == "pseudo_beta")   # acc 0.6667, acc_norm 0.5833
    path = next(p for p in _samples(run) if "samples_mrc_mc_" in p.name)
    out = _cli("summary", str(path), "--map", "score=acc_norm", "--json")
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    assert res["metric"] == "acc_norm"
    assert res["groups"][0]["accuracy"] == pytest.approx(run["headline"]["mrc_mc"]["none"]["acc_norm"], abs=1e-12)
    bad = _cli("summary", str(path), "--map", "score=nope")
    assert bad.returncode == 2 and "numeric metric fields: 'acc', 'acc_norm'" in bad.stderr


# --------------------------------------------------- issue 36: few-shot settings read together as conditions
FEWSHOT = MANIFEST["fewshot_runs"]


def test_fewshot_runs_read_together_as_conditions():
    """One model at 0 and 2 shots in one folder (lm-eval wrote both): the few-shot count joins the condition
    (it used to be refused as duplicate rows), the reader's notes say so, and each condition equals lm-eval."""
    with pytest.warns(UserWarning, match="num_fewshot"):
        log = read_log(HERE / "fewshot_out")
    assert set(log["condition"]) == {"none, num_fewshot=0", "none, num_fewshot=2"}
    assert any("num_fewshot" in n for n in log.attrs["notes"])
    with pytest.warns(UserWarning, match="num_fewshot"):
        norm = read_log(HERE / "fewshot_out", mapping={"score": "acc_norm"})
    for metric, one in (("acc", log), ("acc_norm", norm)):
        t = summarize(one, by=["model", "condition"]).to_frame().set_index("condition")
        for run in FEWSHOT:
            want = run["headline"]["mrc_mc"]["none"][metric]
            assert run["n-shot"] == {"mrc_mc": run["num_fewshot"]}
            got = t.loc[f"none, num_fewshot={run['num_fewshot']}", "accuracy"]
            assert got == pytest.approx(want, abs=1e-12)


def test_one_fewshot_setting_leaves_the_condition_alone():
    path = HERE / FEWSHOT[1]["samples_files"][0]
    log = read_log(path)
    assert set(log["condition"]) == {"none"} and set(log["num_fewshot"]) == {2}


def test_fewshot_runs_streamed_into_a_dataset_say_why(tmp_path):
    """A streamed dataset cannot rewrite conditions across files: the duplicate error names the run setting."""
    from mrcstats.io import write_dataset

    with pytest.raises(InputError, match="run setting 'num_fewshot' \\(0, 2\\)"):
        write_dataset(HERE / "fewshot_out", tmp_path / "ds")
