"""Write a small real Inspect AI log whose scorers hold several graders' values, offline, for
tests/conformance/inspect_judges/panel/.

Usage (inside a venv with inspect-ai, e.g. /tmp/insp)::

    python scripts/tool_fixtures/inspect_panel_fixture.py [OUT_DIR]   # default tests/conformance/inspect_judges/panel

The solver and every grader are ``mockllm/model`` with scripted ``custom_outputs`` (no network, no API key).
The task has six samples and three scorers:

* ``match`` -- the exact-answer check (the stand-in for a human label);
* ``panel`` -- ``model_graded_qa(model=[g1, g2, g3])``: three grader models grade each answer and Inspect
  stores their majority as the value, the three votes in ``metadata.panel.votes`` (in the order of ``model``);
* ``duo`` -- a custom scorer whose value is a dict, one grade per grader (``{"gpt": "C", "claude": "I"}``):
  the way a hand-written judge returns several graders' verdicts in one score.

``manifest.json`` records inspect-ai's version, the scripted grades and Inspect's own headline numbers.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve()
DEFAULT_OUT = HERE.parents[2] / "tests" / "conformance" / "inspect_judges" / "panel"

#: (id, question, target, the solver's answer, the panel's three grades, the duo's two grades)
SAMPLES = [
    (1, "What is 2+2?", "4", "4", ("C", "C", "C"), ("C", "C")),
    (2, "Capital of France?", "Paris", "paris", ("C", "I", "C"), ("C", "I")),
    (3, "Color of the clear sky?", "blue", "grey", ("I", "I", "C"), ("I", "C")),
    (4, "What is 3*3?", "9", "nine", ("C", "C", "I"), ("C", "C")),
    (5, "Opposite of hot?", "cold", "warm", ("I", "I", "I"), ("I", "I")),
    (6, "Largest planet?", "Jupiter", "Saturn", ("I", "C", "C"), ("I", "C")),
]
DUO = ("gpt", "claude")


def main(out_dir: str) -> None:
    import inspect_ai
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.scorer import Score, accuracy, match, model_graded_qa, scorer

    from inspect_ai.solver import generate

    dest = Path(out_dir)
    dest.mkdir(parents=True, exist_ok=True)
    for f in dest.glob("*.eval"):
        f.unlink()

    def out(text: str):
        o = ModelOutput.from_content("mockllm/model", text)
        # usage given, so mockllm never counts tokens (tiktoken would download its encoding)
        o.usage = ModelUsage(input_tokens=10, output_tokens=len(text.split()), total_tokens=10 + len(text.split()))
        return o

    solver_model = get_model("mockllm/model", custom_outputs=[out(s[3]) for s in SAMPLES])
    graders = [get_model("mockllm/model", custom_outputs=[out(f"Grader {g + 1} looked.\nGRADE: {s[4][g]}")
                                                          for s in SAMPLES], memoize=False) for g in range(3)]

    @scorer(metrics=[accuracy()], name="panel")
    def panel():
        return model_graded_qa(model=graders)

    grades = {s[0]: dict(zip(DUO, s[5])) for s in SAMPLES}

    @scorer(metrics=[{k: [accuracy()] for k in DUO}], name="duo")
    def duo():
        async def score(state, target):
            return Score(value=dict(grades[state.sample_id]), answer=state.output.completion,
                         explanation="scripted grades of two graders")
        return score

    task = Task(dataset=[Sample(id=s[0], input=s[1], target=s[2]) for s in SAMPLES], solver=generate(),
                scorer=[match(), panel(), duo()], name="panel_qa")
    logs = eval(task, model=solver_model, log_dir=str(dest), max_samples=1, display="none")
    log = logs[0]
    path = Path(log.location)
    target = dest / "panel.eval"
    path.rename(target)
    manifest = {"tool": "inspect-ai", "version": inspect_ai.__version__, "python": sys.version.split()[0],
                "command": "python scripts/tool_fixtures/inspect_panel_fixture.py tests/conformance/inspect_judges/panel",
                "model": "mockllm/model (solver and graders) with scripted custom_outputs (offline)",
                "samples": [{"id": s[0], "answer": s[3], "panel": list(s[4]), "duo": dict(zip(DUO, s[5]))}
                            for s in SAMPLES],
                "status": log.status,
                "scores": [{"name": sc.name, "scorer": sc.scorer, "metrics": {k: m.value for k, m in sc.metrics.items()}}
                           for sc in (log.results.scores if log.results else [])]}
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(target)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else str(DEFAULT_OUT))
