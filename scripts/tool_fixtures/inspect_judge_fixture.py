"""Write small real Inspect AI logs with model-graded scorers (several judges), offline, for
tests/conformance/inspect_judges/.

Usage (inside a venv with inspect-ai, e.g. /tmp/insp)::

    python scripts/tool_fixtures/inspect_judge_fixture.py [OUT_DIR]   # default tests/conformance/inspect_judges

The solver and every grader are ``mockllm/model`` with scripted ``custom_outputs`` (no network, no API key).
Two logs, each beside a ``manifest.json`` recording inspect-ai's version, the scripted grades and Inspect's own
headline numbers:

* ``judges.eval``: eight samples and three scorers: ``match`` (the exact-answer check, the stand-in for a human
  label) and two ``model_graded_qa`` graders (``strict`` and ``lenient``, each a separate grader model that
  answers ``GRADE: C`` or ``GRADE: I`` from a script), so each sample carries three scores with a value, an
  answer and (for the graders) the grader's explanation.
* ``panel/panel.eval``: scorers holding several graders' values -- six samples and three scorers: ``match``;
  ``panel``, ``model_graded_qa(model=[g1, g2, g3])`` (Inspect stores the three graders' majority as the value and
  their votes in ``metadata.panel.votes``, in the order of ``model``); and ``duo``, a hand-written scorer whose
  value is a dict, one grade per grader (``{"gpt": "C", "claude": "I"}``).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve()
DEFAULT_OUT = HERE.parents[2] / "tests" / "conformance" / "inspect_judges"
COMMAND = "python scripts/tool_fixtures/inspect_judge_fixture.py tests/conformance/inspect_judges"

#: (id, question, target, the solver's answer, strict grader's grade, lenient grader's grade)
SAMPLES = [
    (1, "What is 2+2?", "4", "4", "C", "C"),
    ("q:2", "Capital of France?", "Paris", "paris", "I", "C"),
    (3, "Color of the clear sky?", "blue", "grey", "I", "C"),
    (4, "What is 3*3?", "9", "9", "C", "C"),
    ("x/5", "Opposite of hot?", "cold", "warm", "I", "I"),
    (6, "Largest planet?", "Jupiter", "Jupiter", "C", "I"),
    (7, "H2O is?", "water", "Water", "C", "C"),
    (8, "2 cubed?", "8", "6", "I", "C"),
]
#: (id, question, target, the solver's answer, the panel's three grades, the duo's two grades)
PANEL_SAMPLES = [
    (1, "What is 2+2?", "4", "4", ("C", "C", "C"), ("C", "C")),
    (2, "Capital of France?", "Paris", "paris", ("C", "I", "C"), ("C", "I")),
    (3, "Color of the clear sky?", "blue", "grey", ("I", "I", "C"), ("I", "C")),
    (4, "What is 3*3?", "9", "nine", ("C", "C", "I"), ("C", "C")),
    (5, "Opposite of hot?", "cold", "warm", ("I", "I", "I"), ("I", "I")),
    (6, "Largest planet?", "Jupiter", "Saturn", ("I", "C", "C"), ("I", "C")),
]
DUO = ("gpt", "claude")


def _mock(texts: list[str], memoize: bool = True):
    """A ``mockllm/model`` answering ``texts`` in turn (usage given, so mockllm never counts tokens: tiktoken
    would download its encoding)."""
    from inspect_ai.model import ModelOutput, ModelUsage, get_model

    outs = []
    for text in texts:
        o = ModelOutput.from_content("mockllm/model", text)
        o.usage = ModelUsage(input_tokens=10, output_tokens=len(text.split()), total_tokens=10 + len(text.split()))
        outs.append(o)
    return get_model("mockllm/model", custom_outputs=outs, **({} if memoize else {"memoize": False}))


def _run(task, solver_model, dest: Path, name: str, samples: list[dict]) -> Path:
    """Run ``task`` into ``dest/name`` (older ``.eval`` files there removed) and write its ``manifest.json``."""
    import inspect_ai
    from inspect_ai import eval

    dest.mkdir(parents=True, exist_ok=True)
    for f in dest.glob("*.eval"):
        f.unlink()
    log = eval(task, model=solver_model, log_dir=str(dest), max_samples=1, display="none")[0]
    target = dest / name
    Path(log.location).rename(target)
    manifest = {"tool": "inspect-ai", "version": inspect_ai.__version__, "python": sys.version.split()[0],
                "command": COMMAND,
                "model": "mockllm/model (solver and graders) with scripted custom_outputs (offline)",
                "samples": samples, "status": log.status,
                "scores": [{"name": sc.name, "scorer": sc.scorer, "metrics": {k: m.value for k, m in sc.metrics.items()}}
                           for sc in (log.results.scores if log.results else [])]}
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return target


def judges(dest: Path) -> Path:
    from inspect_ai import Task
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import accuracy, match, model_graded_qa, scorer
    from inspect_ai.solver import generate

    def grader(name: str, col: int):
        g = _mock([f"The answer is judged by {name}.\nGRADE: {s[col]}" for s in SAMPLES], memoize=False)

        @scorer(metrics=[accuracy()], name=name)
        def named():
            return model_graded_qa(model=g)
        return named()

    task = Task(dataset=[Sample(id=s[0], input=s[1], target=s[2]) for s in SAMPLES], solver=generate(),
                scorer=[match(), grader("strict", 4), grader("lenient", 5)], name="judged_qa")
    return _run(task, _mock([s[3] for s in SAMPLES]), dest, "judges.eval",
                [{"id": s[0], "answer": s[3], "strict": s[4], "lenient": s[5]} for s in SAMPLES])


def panel(dest: Path) -> Path:
    from inspect_ai import Task
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import Score, accuracy, match, model_graded_qa, scorer
    from inspect_ai.solver import generate

    graders = [_mock([f"Grader {g + 1} looked.\nGRADE: {s[4][g]}" for s in PANEL_SAMPLES], memoize=False)
               for g in range(3)]
    grades = {s[0]: dict(zip(DUO, s[5])) for s in PANEL_SAMPLES}

    @scorer(metrics=[accuracy()], name="panel")
    def panel_scorer():
        return model_graded_qa(model=graders)

    @scorer(metrics=[{k: [accuracy()] for k in DUO}], name="duo")
    def duo():
        async def score(state, target):
            return Score(value=dict(grades[state.sample_id]), answer=state.output.completion,
                         explanation="scripted grades of two graders")
        return score

    task = Task(dataset=[Sample(id=s[0], input=s[1], target=s[2]) for s in PANEL_SAMPLES], solver=generate(),
                scorer=[match(), panel_scorer(), duo()], name="panel_qa")
    return _run(task, _mock([s[3] for s in PANEL_SAMPLES]), dest, "panel.eval",
                [{"id": s[0], "answer": s[3], "panel": list(s[4]), "duo": dict(zip(DUO, s[5]))}
                 for s in PANEL_SAMPLES])


def main(out_dir: str) -> None:
    dest = Path(out_dir)
    print(judges(dest))
    print(panel(dest / "panel"))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else str(DEFAULT_OUT))
