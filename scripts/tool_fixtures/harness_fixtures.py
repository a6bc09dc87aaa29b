"""Write small real lm-evaluation-harness runs (offline) for the conformance tests.

    python scripts/tool_fixtures/harness_fixtures.py [OUT_DIR]     (default: tests/conformance/harness)

Installs lm-eval (``LM_EVAL_VERSION``, CPU torch from the local wheel) into a scratch venv
(``$HARNESS_VENV``, default /work/scratch/i23b/venv) unless it is there, then runs the harness's own
CLI (``lm_eval run``, via its ``cli_evaluate``) with ``--log_samples`` against local task YAMLs over
local JSON data (no hub access: HF_HUB_OFFLINE / HF_DATASETS_OFFLINE are set):

* ``mrc_mc``   multiple choice (acc, acc_norm), one filter (``none``);
* ``mrc_gen``  generation with two filters (``strict-match``, ``flexible-extract``) and a
  ``process_results`` giving ``exact_match`` and a token ``f1`` per sample;
* ``mrc_f1``   generation scored by the token ``f1`` alone (a graded metric).

Runs, all into ONE output folder ``OUT_DIR/lm_eval_out`` (as several runs of one user would be):
``dummy`` (lm-eval's own), ``pseudo_alpha`` and ``pseudo_beta`` (a small ``LM`` subclass registered
in a runner script), and ``pseudo`` with ``--model_args skill=0.3`` (identity from model_args).
None names a pretrained/model/path, so lm-eval gives each the same generated ``model_name``.
``OUT_DIR/manifest.json`` records the lm-eval version, the runs and each results_*.json headline
(every metric and stderr per task and filter) for the tests to compare against.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
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

_PASSAGES = [
    ("Ada", "Ada wrote the first program for the engine.", "Who wrote the first program?", "Ada",
     ["Ada", "Babbage", "Turing", "Lovelace"]),
    ("Rome", "The old road led from Rome to the coast.", "Where did the road start?", "Rome",
     ["Paris", "Rome", "Athens", "Cairo"]),
    ("blue", "The door of the red house was painted blue.", "What colour was the door?", "blue",
     ["red", "green", "blue", "white"]),
    ("seven", "The cat had seven kittens in spring.", "How many kittens?", "seven",
     ["three", "five", "seven", "nine"]),
    ("river", "They crossed the river by boat at dawn.", "What did they cross?", "river",
     ["river", "bridge", "desert", "field"]),
    ("violin", "Mira played the violin at the wedding.", "What did Mira play?", "violin",
     ["piano", "drum", "flute", "violin"]),
    ("north", "The wind came from the north all night.", "Where did the wind come from?", "north",
     ["south", "north", "east", "west"]),
    ("bread", "The baker sold bread before sunrise.", "What did the baker sell?", "bread",
     ["milk", "bread", "fish", "cake"]),
    ("glass", "The vase was made of thin glass.", "What was the vase made of?", "glass",
     ["glass", "wood", "clay", "iron"]),
    ("Tuesday", "The market opens every Tuesday.", "When does the market open?", "Tuesday",
     ["Monday", "Friday", "Tuesday", "Sunday"]),
    ("salt", "Sailors carried salt to preserve the meat.", "What did the sailors carry?", "salt",
     ["sugar", "salt", "rice", "tea"]),
    ("owl", "An owl watched them from the oak.", "What watched them?", "owl",
     ["hawk", "crow", "owl", "bat"]),
]

_MC_YAML = """\
task: mrc_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: mc.json
test_split: test
output_type: multiple_choice
doc_to_text: "Passage: {{passage}}\\nQuestion: {{question}}\\nAnswer:"
doc_to_choice: choices
doc_to_target: label
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
  - metric: acc_norm
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"""

_GEN_YAML = """\
task: mrc_gen
dataset_path: json
dataset_kwargs:
  data_files:
    test: gen.json
test_split: test
output_type: generate_until
doc_to_text: "Passage: {{passage}}\\nQuestion: {{question}}\\nAnswer:"
doc_to_target: "{{answer}}"
process_results: !function utils.process_results
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
  - metric: f1
    aggregation: mean
    higher_is_better: true
generation_kwargs:
  until:
    - "\\n\\n"
  do_sample: false
filter_list:
  - name: "strict-match"
    filter:
      - function: "regex"
        regex_pattern: "The answer is (\\\\w+)"
      - function: "take_first"
  - name: "flexible-extract"
    filter:
      - function: "regex"
        group_select: -1
        regex_pattern: "(\\\\w+)"
      - function: "take_first"
metadata:
  version: 1.0
"""

_F1_YAML = """\
task: mrc_f1
dataset_path: json
dataset_kwargs:
  data_files:
    test: gen.json
test_split: test
output_type: generate_until
doc_to_text: "Passage: {{passage}}\\nQuestion: {{question}}\\nAnswer:"
doc_to_target: "{{answer}}"
process_results: !function utils.process_f1
metric_list:
  - metric: f1
    aggregation: mean
    higher_is_better: true
generation_kwargs:
  until:
    - "\\n\\n"
  do_sample: false
metadata:
  version: 1.0
"""

_UTILS = '''\
"""process_results of the mrc_gen / mrc_f1 fixture tasks: exact match and a SQuAD-style token F1."""
import collections
import re


def _tokens(s):
    return re.findall(r"\\w+", str(s).lower())


def token_f1(pred, gold):
    p, g = _tokens(pred), _tokens(gold)
    if not p or not g:
        return float(p == g)
    common = sum((collections.Counter(p) & collections.Counter(g)).values())
    if common == 0:
        return 0.0
    prec, rec = common / len(p), common / len(g)
    return 2 * prec * rec / (prec + rec)


def process_results(doc, results):
    pred = results[0]
    return {"exact_match": float(str(pred).strip().lower() == str(doc["answer"]).lower()),
            "f1": token_f1(pred, doc["answer"])}


def process_f1(doc, results):
    return {"f1": token_f1(results[0], doc["answer"])}
'''

_RUNNER = '''\
"""Register the pseudo models, then run lm-eval's own CLI (sys.argv holds its arguments)."""
import hashlib
import re

from lm_eval.api.model import LM
from lm_eval.api.registry import register_model
from lm_eval.utils import simple_parse_args_string


def _u(*parts):
    h = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return int.from_bytes(h[:8], "big") / 2 ** 64


def _oracle():
    """{passage: answer} from the task data beside this script (the pseudo models "know" the answer
    with probability ``skill``)."""
    import json

    out = {}
    with open("gen.json") as f:
        for line in f:
            r = json.loads(line)
            out[r["passage"]] = r["answer"]
    with open("mc.json") as f:
        for line in f:
            r = json.loads(line)
            out[r["passage"]] = r["choices"][r["label"]]
    return out


class PseudoLM(LM):
    """A deterministic stand-in model: it knows an item's answer with probability ``skill``; then the
    right continuation gets the highest log-likelihood and generations give the answer, otherwise a
    passage word; generations come in three formats (only the first matches strict-match)."""

    NAME = "pseudo"
    SKILL = 0.6

    def __init__(self, skill=None, **kwargs):
        super().__init__()
        self.skill = float(self.SKILL if skill is None else skill)
        self.oracle = _oracle()

    @classmethod
    def create_from_arg_string(cls, arg_string, additional_config=None):
        return cls(**simple_parse_args_string(arg_string))

    def _gold(self, ctx):
        passage = ctx.split("Passage:", 1)[-1].split("\\n", 1)[0].strip()
        return passage, self.oracle.get(passage)

    def loglikelihood(self, requests, disable_tqdm=False):
        out = []
        for r in requests:
            ctx, cont = r.args
            _p, gold = self._gold(ctx)
            knows = _u(self.NAME, self.skill, ctx) < self.skill
            bonus = 5.0 if (knows and cont.strip() == gold) else 0.0
            ll = -3.0 * _u(self.NAME, ctx, cont) - 0.1 * len(cont) + bonus
            out.append((ll, bool(bonus)))
        return out

    def generate_until(self, requests, disable_tqdm=False):
        out = []
        for r in requests:
            ctx = r.args[0]
            passage, gold = self._gold(ctx)
            words = re.findall(r"\\w+", passage)
            if gold and _u(self.NAME, self.skill, "know", ctx) < self.skill:
                word = gold
            else:
                word = words[int(_u(self.NAME, "w", ctx) * len(words))]
            style = int(_u(self.NAME, "style", ctx) * 3)
            out.append([f"The answer is {word}.", f"{word}", f"I think it is {word} or maybe not"][style])
        return out

    def loglikelihood_rolling(self, requests, disable_tqdm=False):
        return [-10.0 * _u(self.NAME, r.args[0]) for r in requests]


@register_model("pseudo")
class Pseudo(PseudoLM):
    pass


@register_model("pseudo_alpha")
class PseudoAlpha(PseudoLM):
    NAME = "alpha"
    SKILL = 0.85


@register_model("pseudo_beta")
class PseudoBeta(PseudoLM):
    NAME = "beta"
    SKILL = 0.5


if __name__ == "__main__":
    from lm_eval.__main__ import cli_evaluate

    cli_evaluate()
'''


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
    folder.mkdir(parents=True, exist_ok=True)
    mc = [{"id": f"mc{i}", "passage": p, "question": q, "choices": ch, "label": ch.index(a)}
          for i, (a, p, q, _a, ch) in enumerate(_PASSAGES)]
    gen = [{"id": f"g{i}", "passage": p, "question": q, "answer": a} for i, (a, p, q, _a, _c) in
           enumerate(_PASSAGES[:10])]
    (folder / "mc.json").write_text("\n".join(json.dumps(r) for r in mc) + "\n")
    (folder / "gen.json").write_text("\n".join(json.dumps(r) for r in gen) + "\n")
    (folder / "mrc_mc.yaml").write_text(_MC_YAML)
    (folder / "mrc_gen.yaml").write_text(_GEN_YAML)
    (folder / "mrc_f1.yaml").write_text(_F1_YAML)
    (folder / "utils.py").write_text(_UTILS)
    (folder / "run_lm_eval.py").write_text(_RUNNER)


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


def main(out_dir: str | os.PathLike = REPO / "tests" / "conformance" / "harness") -> Path:
    out = Path(out_dir)
    py = ensure_venv()
    version = subprocess.run([str(py), "-c", "import importlib.metadata as m; print(m.version('lm_eval'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    tasks = out / "tasks"
    runs_dir = out / "lm_eval_out"
    if runs_dir.exists():
        shutil.rmtree(runs_dir)
    write_tasks(tasks)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "HF_DATASETS_CACHE": str(out / ".hf_cache"), "TOKENIZERS_PARALLELISM": "false"}
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
    shutil.rmtree(out / ".hf_cache", ignore_errors=True)
    for p in tasks.glob("__pycache__"):
        shutil.rmtree(p, ignore_errors=True)
    manifest = {"tool": "lm-evaluation-harness", "package": "lm-eval", "version": version,
                "generator": "python scripts/tool_fixtures/harness_fixtures.py", "runs": manifest_runs}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return out


if __name__ == "__main__":
    print(main(*sys.argv[1:2]))
