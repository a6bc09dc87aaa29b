"""Regenerate tests/conformance/helm/: a real HELM run folder with HELM's own ``stats.json``.

HELM (crfm-helm) writes ``benchmark_output/runs/<suite>/<run name>/`` with ``per_instance_stats.json``,
``scenario_state.json``, ``run_spec.json``, ``scenario.json`` and its aggregate ``stats.json``. Installing and
running HELM offline is heavy (models, datasets); the public Every Eval Ever repository keeps real HELM run
folders as test inputs of its HELM converter (``tests/data/helm/<run>/``), so this script copies one of them,
unchanged, with a manifest naming its origin and HELM's own headline numbers (the unperturbed
``exact_match`` mean per split from ``stats.json``).

    python scripts/tool_fixtures/helm_fixtures.py tests/conformance/helm --repo /path/to/every_eval_ever.git
    python scripts/tool_fixtures/helm_fixtures.py tests/conformance/helm_suite --suite --repo /path/to/every_eval_ever.git

``--suite`` lays three of those runs (two models, three scenarios) out as HELM writes a suite,
``benchmark_output/runs/v1/<run>/``, keeping the files the reader needs.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from _evaleval_repo import REPO_URL, git, open_repo, repo_arg, write_manifest

RUN = "mmlu-subject=philosophy,method=multiple_choice_joint,model=openai_gpt2"
FILES = ("per_instance_stats.json", "run_spec.json", "scenario.json", "scenario_state.json", "stats.json")



def main(out_dir: str | Path, repo: str | Path | None = None) -> Path:
    """Copy the run folder into ``out_dir`` (replaced) with ``manifest.json``; returns the manifest path."""
    out = Path(out_dir)
    git_dir, commit = open_repo(repo)
    if out.exists():
        shutil.rmtree(out)
    (out / RUN).mkdir(parents=True)
    for f in FILES:
        (out / RUN / f).write_bytes(git(git_dir, "show", f"{commit}:tests/data/helm/{RUN}/{f}"))
    stats = json.loads((out / RUN / "stats.json").read_text())
    headline = [{"split": s["name"].get("split"), "exact_match": s["mean"], "count": s["count"]}
                for s in stats if s["name"]["name"] == "exact_match" and "perturbation" not in s["name"]]
    manifest = {"tool": "HELM (crfm-helm)", "version": "not recorded in the run files",
                "generated_by": "scripts/tool_fixtures/helm_fixtures.py",
                "origin": {"repo": REPO_URL, "commit": commit, "path": f"tests/data/helm/{RUN}/"},
                "run": RUN, "headline_stats_json": headline}
    return write_manifest(out, manifest)


#: the suite fixture (issue 36): three real runs of two models laid out as HELM writes a suite,
#: ``benchmark_output/runs/<suite>/<run>/`` (folder names as in the repository, ``:`` written ``-``)
SUITE = "v1"
SUITE_RUNS = (RUN, "narrative_qa-model=openai_gpt2",
              "commonsense-dataset=hellaswag,method=multiple_choice_joint,model=eleutherai_pythia-1b-v0")
#: the files of each suite run kept (the reader needs these; HELM's stats.json is summarised in the manifest)
SUITE_FILES = ("per_instance_stats.json", "run_spec.json", "scenario.json")


def suite(out_dir: str | Path, repo: str | Path | None = None) -> Path:
    """Write ``out_dir/benchmark_output/runs/v1/<run>/`` for :data:`SUITE_RUNS` (:data:`SUITE_FILES`, unchanged)
    with ``manifest.json``: per run its model and HELM's unperturbed ``exact_match`` per split (stats.json)."""
    out = Path(out_dir)
    git_dir, commit = open_repo(repo)
    if out.exists():
        shutil.rmtree(out)
    runs = []
    for run in SUITE_RUNS:
        dest = out / "benchmark_output" / "runs" / SUITE / run
        dest.mkdir(parents=True)
        for f in SUITE_FILES:
            (dest / f).write_bytes(git(git_dir, "show", f"{commit}:tests/data/helm/{run}/{f}"))
        stats = json.loads(git(git_dir, "show", f"{commit}:tests/data/helm/{run}/stats.json"))
        spec = json.loads((dest / "run_spec.json").read_text())
        runs.append({"folder": run, "name": spec["name"], "model": spec["adapter_spec"]["model"],
                     "headline_stats_json": [{"split": s["name"].get("split"), "exact_match": s["mean"],
                                              "count": s["count"]} for s in stats
                                             if s["name"]["name"] == "exact_match" and "perturbation" not in s["name"]]})
    manifest = {"tool": "HELM (crfm-helm)", "version": "not recorded in the run files",
                "generated_by": "scripts/tool_fixtures/helm_fixtures.py --suite",
                "origin": {"repo": REPO_URL, "commit": commit, "path": "tests/data/helm/"},
                "suite": f"benchmark_output/runs/{SUITE}", "runs": runs}
    return write_manifest(out, manifest)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir", nargs="?", default="tests/conformance/helm")
    repo_arg(ap)
    ap.add_argument("--suite", action="store_true", help="write the suite fixture (tests/conformance/helm_suite)")
    a = ap.parse_args()
    print((suite if a.suite else main)(a.out_dir, a.repo), file=sys.stderr)
