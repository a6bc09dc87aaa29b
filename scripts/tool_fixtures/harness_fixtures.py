"""Write small real lm-evaluation-harness runs (offline) for the conformance tests.

    python scripts/tool_fixtures/harness_fixtures.py [OUT_DIR]     (default: tests/conformance/harness)

Installs lm-eval (``LM_EVAL_VERSION``, CPU torch from the local wheel) into a scratch venv
(``$HARNESS_VENV``, default /work/scratch/i23b/venv) unless it is there, then runs the harness's own
CLI (``lm_eval run``; for the pseudo models via its ``cli_evaluate`` after registering them) with
``--log_samples`` against the local task YAMLs over local JSON data in ``harness_tasks/`` beside this
script (no hub access: HF_HUB_OFFLINE / HF_DATASETS_OFFLINE are set):

* ``mrc_mc``   multiple choice (acc, acc_norm), one filter (``none``);
* ``mrc_gen``  generation with two filters (``strict-match``, ``flexible-extract``) and a
  ``process_results`` giving ``exact_match`` and a token ``f1`` per sample;
* ``mrc_f1``   generation scored by the token ``f1`` alone (a graded metric).

Runs, all into ONE output folder ``OUT_DIR/lm_eval_out`` (as several runs of one user would be):
``dummy`` (lm-eval's own), ``pseudo_alpha`` and ``pseudo_beta`` (a small ``LM`` subclass registered
in a runner script), and ``pseudo`` with ``--model_args skill=0.3`` (identity from model_args).
None names a pretrained/model/path, so lm-eval gives each the same generated ``model_name``.
Then ``pseudo_beta`` on ``mrc_mc`` at ``--num_fewshot 0`` and ``2`` into ``OUT_DIR/fewshot_out`` (one model at
two few-shot settings in one folder; ``--fewshot-only`` writes just these).
``OUT_DIR/manifest.json`` records the lm-eval version, the runs and each results_*.json headline
(every metric and stderr per task and filter) for the tests to compare against.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

LM_EVAL_VERSION = "0.4.13"
TORCH_VERSION = "2.13.0"
VENV = Path(os.environ.get("HARNESS_VENV", "/work/scratch/i23b/venv"))
REPO = Path(__file__).resolve().parents[2]

#: (model, model_args or None) for each run, in order
RUNS: list[tuple[str, str | None]] = [
    ("dummy", None),
    ("pseudo_alpha", None),
    ("pseudo_beta", None),
    ("pseudo", "skill=0.3"),
]

#: the task YAMLs, their JSON data, the process_results (utils.py) and the runner that registers the pseudo
#: models (run_lm_eval.py): real files beside this script, copied into a scratch folder for each generation
TASKS = Path(__file__).resolve().parent / "harness_tasks"


def ensure_venv() -> Path:
    """The scratch venv's python, with lm-eval installed (CPU torch from the local wheel)."""
    py = VENV / "bin" / "python"
    if py.exists() and subprocess.run([str(py), "-c", "import lm_eval"], capture_output=True,
                                     check=False).returncode == 0:
        return py
    subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    subprocess.run([str(py), "-m", "pip", "install", "-q", f"torch=={TORCH_VERSION}"], check=True)
    subprocess.run([str(py), "-m", "pip", "install", "-q", f"lm-eval=={LM_EVAL_VERSION}"], check=True)
    return py


def write_tasks(folder: Path) -> None:
    """Copy the task folder (:data:`TASKS`) to ``folder`` (the harness runs there: data paths are relative)."""
    if folder.exists():
        shutil.rmtree(folder)
    shutil.copytree(TASKS, folder, ignore=shutil.ignore_patterns("__pycache__"))


def headline(results: dict) -> dict:
    """``{task: {filter: {metric: value, metric_stderr: value}}}`` from a results_*.json."""
    out: dict = {}
    for task, vals in (results.get("results") or {}).items():
        for key, v in vals.items():
            if "," not in key or not isinstance(v, (int, float)):
                continue
            metric, flt = key.split(",", 1)
            out.setdefault(task, {}).setdefault(flt, {})[metric] = v
    return out


def _prepare(runs_dir: Path) -> tuple[Path, dict[str, str]]:
    """Empty ``runs_dir``, copy the task folder beside the venv; returns it and the offline environment."""
    tasks = VENV.parent / "harness_tasks"
    if runs_dir.exists():
        shutil.rmtree(runs_dir)
    write_tasks(tasks)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "HF_DATASETS_CACHE": str(tasks / ".hf_cache"), "TOKENIZERS_PARALLELISM": "false"}
    return tasks, env


#: the few-shot runs (issue 36): one model at 0 and 2 shots into ONE folder ``OUT_DIR/fewshot_out``
FEWSHOT_RUNS: list[tuple[str, int]] = [("pseudo_beta", 0), ("pseudo_beta", 2)]


def fewshot(out_dir: str | os.PathLike = REPO / "tests" / "conformance" / "harness") -> Path:
    """Write :data:`FEWSHOT_RUNS` (``mrc_mc`` with ``--num_fewshot``) into ``OUT_DIR/fewshot_out`` and their
    headlines into ``manifest.json`` (``fewshot_runs``), leaving the other runs as they are."""
    out = Path(out_dir)
    py = ensure_venv()
    runs_dir = out / "fewshot_out"
    tasks, env = _prepare(runs_dir)
    runs = []
    for model, shots in FEWSHOT_RUNS:
        before = set(runs_dir.rglob("results_*.json")) if runs_dir.exists() else set()
        cmd = [str(py), "run_lm_eval.py", "run", "--model", model, "--tasks", "mrc_mc", "--num_fewshot", str(shots),
               "--include_path", ".", "--output_path", str(runs_dir.resolve()), "--log_samples", "--batch_size", "1"]
        subprocess.run(cmd, cwd=tasks, env=env, check=True)
        time.sleep(1.1)  # lm-eval names the files by the second: keep the runs apart
        new = sorted(set(runs_dir.rglob("results_*.json")) - before)
        if len(new) != 1:
            raise RuntimeError(f"expected one new results file for {model} at {shots} shots, found {new}")
        res = json.loads(new[0].read_text())
        runs.append({"model": model, "num_fewshot": shots,
                     "command": " ".join(["lm_eval", *cmd[2:]]).replace(str(runs_dir.resolve()), "fewshot_out"),
                     "results_file": str(new[0].relative_to(out)), "n-shot": res.get("n-shot"),
                     "samples_files": sorted(str(p.relative_to(out)) for p in new[0].parent.glob(
                         "samples_*" + new[0].stem.removeprefix("results_") + ".jsonl")),
                     "headline": headline(res)})
    man = json.loads((out / "manifest.json").read_text())
    man["fewshot_runs"] = runs
    (out / "manifest.json").write_text(json.dumps(man, indent=2) + "\n")
    return out


def main(out_dir: str | os.PathLike = REPO / "tests" / "conformance" / "harness") -> Path:
    out = Path(out_dir)
    py = ensure_venv()
    version = subprocess.run([str(py), "-c", "import importlib.metadata as m; print(m.version('lm_eval'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    runs_dir = out / "lm_eval_out"
    tasks, env = _prepare(runs_dir)
    manifest_runs = []
    for model, model_args in RUNS:
        before = set(runs_dir.rglob("results_*.json")) if runs_dir.exists() else set()
        # lm-eval's own console script for its own model; the runner (which registers the pseudo models
        # first) for the others
        entry = [str(py.parent / "lm_eval")] if model == "dummy" else [str(py), "run_lm_eval.py"]
        cmd = [*entry, "run", "--model", model, "--tasks", "mrc_mc,mrc_gen,mrc_f1",
               "--include_path", ".", "--output_path", str(runs_dir.resolve()), "--log_samples",
               "--batch_size", "1"]
        if model_args:
            cmd += ["--model_args", model_args]
        subprocess.run(cmd, cwd=tasks, env=env, check=True)
        new = sorted(set(runs_dir.rglob("results_*.json")) - before)
        if len(new) != 1:
            raise RuntimeError(f"expected one new results file for {model}, found {new}")
        res = json.loads(new[0].read_text())
        manifest_runs.append({
            "model": model, "model_args": model_args, "command": " ".join(["lm_eval", *cmd[len(entry):]]).replace(str(runs_dir.resolve()), "lm_eval_out"),
            "results_file": str(new[0].relative_to(out)), "model_name": res.get("model_name"),
            "samples_files": sorted(str(p.relative_to(out)) for p in new[0].parent.glob(
                "samples_*" + new[0].stem.removeprefix("results_") + ".jsonl")),
            "headline": headline(res),
        })
    manifest = {"tool": "lm-evaluation-harness", "package": "lm-eval", "version": version,
                "generator": "python scripts/tool_fixtures/harness_fixtures.py",
                "tasks": "scripts/tool_fixtures/harness_tasks", "runs": manifest_runs}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    fewshot(out)
    return out


if __name__ == "__main__":
    if "--fewshot-only" in sys.argv:  # just the few-shot runs, merged into the existing manifest
        print(fewshot(*[a for a in sys.argv[1:2] if a != "--fewshot-only"]))
    else:
        print(main(*sys.argv[1:2]))
