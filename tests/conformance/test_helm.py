"""HELM: the reader's accuracy per split equals HELM's own stats.json on a real HELM run folder.

Fixture: tests/conformance/helm/ (scripts/tool_fixtures/helm_fixtures.py: a run folder kept unchanged from the
evaleval/every_eval_ever repository's HELM converter test inputs; manifest.json names its origin)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import mrcstats
from mrcstats.io.detect import detect_format, load_source
from mrcstats.stats.accuracy import summarize_frame

HERE = Path(__file__).resolve().parent / "helm"
MANIFEST = json.loads((HERE / "manifest.json").read_text())
RUN = HERE / MANIFEST["run"]


def test_accuracy_per_split_equals_helm_stats_json():
    assert detect_format(load_source(RUN / "per_instance_stats.json")) == "helm"
    log = mrcstats.read_log(HERE)       # the folder: only per_instance_stats.json is read
    assert log.attrs["format"] == "helm" and set(log["metric"]) == {"exact_match"}
    stats = json.loads((RUN / "stats.json").read_text())
    helm = {s["name"]["split"]: s["mean"] for s in stats
            if s["name"]["name"] == "exact_match" and "perturbation" not in s["name"]}
    assert helm == {h["split"]: h["exact_match"] for h in MANIFEST["headline_stats_json"]}
    table = summarize_frame(log, ["split"]).to_frame().set_index("split")
    assert set(table.index) == set(helm)
    for split, mean in helm.items():
        assert table.loc[split, "accuracy"] == pytest.approx(mean, abs=1e-12)
    per_instance = json.loads((RUN / "per_instance_stats.json").read_text())
    assert len(log) == len(per_instance)


# ---------------------------------------------------------------- issue 36: a HELM suite folder
SUITE = Path(__file__).resolve().parent / "helm_suite"
SUITE_MANIFEST = json.loads((SUITE / "manifest.json").read_text())


def test_suite_folder_reads_with_items_qualified_by_scenario():
    """``benchmark_output/runs/<suite>/`` as the docs show it: every run read, item = ``<scenario>:<instance id>``
    (the run name without its model), and each run's accuracy per split equals HELM's stats.json."""
    from mrcstats.io.helm import scenario_of

    log = mrcstats.read_log(SUITE / SUITE_MANIFEST["suite"])
    assert log.attrs["format"] == "helm" and len(log.attrs["sources"]) == len(SUITE_MANIFEST["runs"])
    assert set(log["model"]) == {r["model"] for r in SUITE_MANIFEST["runs"]}
    assert (log["item"] == log["scenario"] + ":" + log["instance_id"]).all()
    for run in SUITE_MANIFEST["runs"]:
        part = log[log["run"] == run["name"]]
        assert set(part["scenario"]) == {scenario_of(run["name"])} and "model=" not in scenario_of(run["name"])
        table = summarize_frame(part, ["split"]).to_frame().set_index("split")
        for h in run["headline_stats_json"]:
            assert table.loc[h["split"], "accuracy"] == pytest.approx(h["exact_match"], abs=1e-12)
    # the single run fixture gives the same items as its copy in the suite
    one = mrcstats.read_log(HERE)
    assert set(one["item"]) == set(log.loc[log["run"] == SUITE_MANIFEST["runs"][0]["name"], "item"])


def test_suite_folder_cli(capsys):
    from mrcstats.cli import main

    assert main(["summary", str(SUITE / SUITE_MANIFEST["suite"]), "--by", "model,scenario", "--json"]) == 0
    groups = json.loads(capsys.readouterr().out)["groups"]
    assert len(groups) == 3
