"""Regenerate tests/conformance/lighteval/: details files written by lighteval itself, offline.

lighteval (https://github.com/huggingface/lighteval) runs two local tasks on a small local dataset
(JSON lines, no Hub access: ``HF_HUB_OFFLINE=1``) with a custom mock model (a ``LightevalModel`` whose
answers are a fixed rule of the question: no weights, no network):

* ``mrc_gen`` -- generative, metric ``exact_match`` (the model answers some questions right);
* ``mrc_mc``  -- multiple choice by log-likelihood, metric ``loglikelihood_acc``;
* ``mrc_gen_f1`` -- the generative task with two metrics, ``exact_match`` and the graded ``f1_score``.

``EvaluationTracker(save_details=True)`` writes ``details/<model>/<date>/details_<task>_<date>.parquet``
and ``results/<model>/results_<date>.json``; both are copied to ``OUT`` with a ``manifest.json``
(lighteval version, its aggregated numbers per task and metric from the results file). lighteval 0.13.0
needs ``xxhash<3.6`` (it hashes ``str``, which xxhash 3.6 refuses).

Run it with a Python where ``lighteval`` is installed (``pip install lighteval``; it pulls torch), e.g.

    /work/scratch/i23c/lv/bin/python scripts/tool_fixtures/lighteval_fixtures.py tests/conformance/lighteval
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import textwrap
from pathlib import Path

#: the local dataset: question, gold answer, choices (the first three questions appear in both tasks)
ROWS = [
    {"id": "q1", "question": "What colour is the sky on a clear day?", "answer": "blue",
     "choices": ["blue", "green", "red"], "gold": 0},
    {"id": "q2", "question": "How many legs does a spider have?", "answer": "eight",
     "choices": ["six", "eight", "ten"], "gold": 1},
    {"id": "q3", "question": "What is the capital of France?", "answer": "Paris",
     "choices": ["Lyon", "Marseille", "Paris"], "gold": 2},
    {"id": "q4", "question": "Which gas do plants absorb?", "answer": "carbon dioxide",
     "choices": ["oxygen", "carbon dioxide", "helium"], "gold": 1},
    {"id": "q5", "question": "What is frozen water called?", "answer": "ice",
     "choices": ["ice", "steam", "dew"], "gold": 0},
    {"id": "q6", "question": "How many days are in a week?", "answer": "seven",
     "choices": ["five", "seven", "nine"], "gold": 1},
]

TASKS_PY = '''
from lighteval.metrics.metrics import Metrics
from lighteval.tasks.lighteval_task import LightevalTaskConfig
from lighteval.tasks.requests import Doc

DATA = {data!r}


def gen_prompt(line, task_name: str = None):
    return Doc(task_name=task_name, query="Question: " + line["question"] + "\\nAnswer:",
               choices=[line["answer"]], gold_index=0, specific={{"id": line["id"]}})


def mc_prompt(line, task_name: str = None):
    return Doc(task_name=task_name, query="Question: " + line["question"] + "\\nAnswer:",
               choices=[" " + c for c in line["choices"]], gold_index=line["gold"], specific={{"id": line["id"]}})


common = dict(hf_repo=DATA, hf_subset="default", hf_avail_splits=["test"], evaluation_splits=["test"],
              few_shots_split=None, few_shots_select=None, version=0)
TASKS_TABLE = [
    LightevalTaskConfig(name="mrc_gen", prompt_function=gen_prompt, metrics=[Metrics.exact_match],
                        generation_size=16, stop_sequence=["\\n"], **common),
    LightevalTaskConfig(name="mrc_mc", prompt_function=mc_prompt, metrics=[Metrics.loglikelihood_acc],
                        **{{**common, "few_shots_split": "test", "few_shots_select": "sequential"}}),
    LightevalTaskConfig(name="mrc_gen_f1", prompt_function=gen_prompt, metrics=[Metrics.exact_match, Metrics.f1_score],
                        generation_size=16, stop_sequence=["\\n"], **common),
]
'''

MODEL_PY = '''
"""A mock model: no weights. Generation answers the gold for questions whose id is odd (q1, q3, q5), the
last word of a gold of several words otherwise (q4: "dioxide", partial F1), else "unknown"; log-likelihoods
prefer the first choice."""
from lighteval.models.abstract_model import LightevalModel
from lighteval.models.model_output import ModelResponse
from lighteval.tasks.requests import SamplingMethod
from lighteval.utils.cache_management import SampleCache, cached

ANSWERS = {answers!r}


class MockModel(LightevalModel):
    def __init__(self, config):
        self.config = config
        self._tokenizer = None
        self._cache = SampleCache(config)

    @property
    def tokenizer(self):
        return None

    @property
    def add_special_tokens(self):
        return False

    @property
    def max_length(self):
        return 2048

    @cached(SamplingMethod.GENERATIVE)
    def greedy_until(self, docs):
        out = []
        for d in docs:
            sid = (d.specific or {{}}).get("id", "")
            gold = ANSWERS.get(sid, "")
            text = gold if int(sid[1:]) % 2 == 1 else (gold.split()[-1] if len(gold.split()) > 1 else "unknown")
            out.append(ModelResponse(input=d.query, text=[text]))
        return out

    @cached(SamplingMethod.LOGPROBS)
    def loglikelihood(self, docs):
        return [ModelResponse(input=d.query, logprobs=[-1.0 - 0.5 * i for i in range(len(d.choices))],
                              argmax_logits_eq_gold=[i == 0 for i in range(len(d.choices))]) for d in docs]

    def loglikelihood_rolling(self, docs):
        raise NotImplementedError
'''


def main(out_dir: str | Path, work: str | Path | None = None, tasks: str = "mrc_gen|0,mrc_mc|0,mrc_gen_f1|0") -> Path:
    """Run lighteval on the local ``tasks`` and copy its details + results into ``out_dir`` (replaced).
    ``--fewshot`` runs ``mrc_mc|0,mrc_mc|2`` (one model at two few-shot settings; few-shot examples from the
    test split, sequential) for tests/conformance/lighteval_fewshot."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

    import lighteval

    # lighteval imports every built-in task module when it builds its registry; some fail offline at import
    # time (tiny_benchmarks downloads a pickle from GitHub, mt_bench calls the Hub). They are tasks we do not
    # run: each module that fails to import is replaced by an empty one (the files written are unaffected).
    stubbed = _stub_unimportable_tasks(Path(lighteval.__file__).parent / "tasks" / "tasks")
    from lighteval.logging.evaluation_tracker import EvaluationTracker
    from lighteval.models.custom.custom_model import CustomModelConfig
    from lighteval.pipeline import ParallelismManager, Pipeline, PipelineParameters

    work = Path(work or tempfile.mkdtemp(prefix="lighteval-fixtures-"))
    data = work / "data"
    data.mkdir(parents=True, exist_ok=True)
    (data / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    tasks_py = work / "mrc_tasks.py"
    tasks_py.write_text(textwrap.dedent(TASKS_PY.format(data=str(data))))
    model_py = work / "mock_model.py"
    model_py.write_text(textwrap.dedent(MODEL_PY.format(answers={r["id"]: r["answer"] for r in ROWS})))
    runs = work / "runs"
    shutil.rmtree(runs, ignore_errors=True)
    tracker = EvaluationTracker(output_dir=str(runs), save_details=True)
    params = PipelineParameters(launcher_type=ParallelismManager.CUSTOM, custom_tasks_directory=str(tasks_py))
    pipeline = Pipeline(tasks=tasks, pipeline_parameters=params, evaluation_tracker=tracker,
                        model_config=CustomModelConfig(model_name="mock/mrc-mock", cache_dir=str(work / "cache"),
                                                       model_definition_file_path=str(model_py)))
    pipeline.evaluate()
    pipeline.save_and_push_results()
    out = Path(out_dir)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    # lighteval's own layout: details/<model>/<date>/details_<task>_<date>.parquet, results/<model>/results_<date>.json
    shutil.copytree(runs / "details", out / "details")
    shutil.copytree(runs / "results", out / "results")
    details = sorted((out / "details").rglob("details_*.parquet"))
    results = sorted((out / "results").rglob("results_*.json"))
    res = json.loads(results[-1].read_text())
    manifest = {"tool": "lighteval", "version": _version("lighteval"), "python": sys.version.split()[0],
                "xxhash": _version("xxhash"), "torch": _version("torch"),
                "generated_by": "scripts/tool_fixtures/lighteval_fixtures.py",
                "model": "mock/mrc-mock (custom LightevalModel, no weights)",
                "details": [str(f.relative_to(out)) for f in details],
                "results_file": str(results[-1].relative_to(out)),
                "offline_stubbed_task_modules": stubbed,
                "notes": "lighteval 0.13.0 hashes str with xxhash, which xxhash >= 3.6 refuses (TypeError): run with "
                         "xxhash 3.5.0",
                "results": res.get("results")}
    path = out / "manifest.json"
    path.write_text(json.dumps(manifest, indent=2) + "\n")
    return path


def _stub_unimportable_tasks(tasks_dir: Path) -> list[str]:
    import importlib
    import types

    names = [f"lighteval.tasks.tasks.{f.stem}" for f in sorted(tasks_dir.glob("*.py")) if f.name != "__init__.py"]
    names += [f"lighteval.tasks.tasks.{d.name}.main" for d in sorted(tasks_dir.iterdir()) if (d / "main.py").exists()]
    stubbed = []
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - offline failures of tasks we do not run
            stub = types.ModuleType(name)
            stub.TASKS_TABLE = []
            sys.modules[name] = stub
            stubbed.append(name)
    return stubbed


def _version(dist: str) -> str:
    import importlib.metadata

    return importlib.metadata.version(dist)


if __name__ == "__main__":
    argv = [a for a in sys.argv[1:] if a != "--fewshot"]
    if "--fewshot" in sys.argv:
        print(main(argv[0] if argv else "tests/conformance/lighteval_fewshot", argv[1] if len(argv) > 1 else None,
                   tasks="mrc_mc|0,mrc_mc|2"), file=sys.stderr)
    else:
        print(main(argv[0] if argv else "tests/conformance/lighteval", argv[1] if len(argv) > 1 else None),
              file=sys.stderr)
