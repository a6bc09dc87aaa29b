"""Write a small real Inspect AI log with model-graded scorers (several judges), offline, for
tests/conformance/inspect_judges/.

Usage (inside a venv with inspect-ai, e.g. /tmp/insp)::

    python scripts/tool_fixtures/inspect_judge_fixture.py [OUT_DIR]   # default tests/conformance/inspect_judges

The solver and both graders are ``mockllm/model`` with scripted ``custom_outputs`` (no network, no API key).
The task has eight samples and three scorers: ``match`` (the exact-answer check, the stand-in for a human
label) and two ``model_graded_qa`` graders (``strict`` and ``lenient``, each a separate grader model that
answers ``GRADE: C`` or ``GRADE: I`` from a script), so each sample carries three scores with a value, an
answer and (for the graders) the grader's explanation. ``manifest.json`` records inspect-ai's version, the
scripted grades and Inspect's own headline numbers.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve()
DEFAULT_OUT = HERE.parents[2] / "tests" / "conformance" / "inspect_judges"

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


def main(out_dir: str) -> None:
    import inspect_ai
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.scorer import accuracy, match, model_graded_qa, scorer
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

    def grader(name: str, col: int):
        outs = [out(f"The answer is judged by {name}.\nGRADE: {s[col]}") for s in SAMPLES]
        g = get_model("mockllm/model", custom_outputs=outs, memoize=False)

        @scorer(metrics=[accuracy()], name=name)
        def named():
            return model_graded_qa(model=g)
        return named()

    task = Task(dataset=[Sample(id=s[0], input=s[1], target=s[2]) for s in SAMPLES], solver=generate(),
                scorer=[match(), grader("strict", 4), grader("lenient", 5)], name="judged_qa")
    logs = eval(task, model=solver_model, log_dir=str(dest), max_samples=1, display="none")
    log = logs[0]
    path = Path(log.location)
    target = dest / "judges.eval"
    path.rename(target)
    manifest = {"tool": "inspect-ai", "version": inspect_ai.__version__, "python": sys.version.split()[0],
                "command": "python scripts/tool_fixtures/inspect_judge_fixture.py tests/conformance/inspect_judges",
                "model": "mockllm/model (solver and graders) with scripted custom_outputs (offline)",
                "samples": [{"id": s[0], "answer": s[3], "strict": s[4], "lenient": s[5]} for s in SAMPLES],
                "status": log.status,
                "scores": [{"name": sc.name, "scorer": sc.scorer, "metrics": {k: m.value for k, m in sc.metrics.items()}}
                           for sc in (log.results.scores if log.results else [])]}
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(target)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else str(DEFAULT_OUT))
