"""Write small real Inspect AI logs, offline, for the conformance tests (tests/conformance/inspect/).

Usage::

    python scripts/tool_fixtures/inspect_fixtures.py [OUT_DIR]   # default tests/conformance/inspect

``main(out_dir)`` installs inspect-ai (0.3.285 when the index has it, else the newest) into the scratch venv
``/work/scratch/i23a/venv`` (``$INSPECT_FIXTURES_VENV`` overrides it), then runs this file inside that venv,
which writes every log with the ``mockllm/model`` provider and a scripted ``custom_outputs`` callable (no
network, no API key): ``.eval`` and ``.json`` logs, several scorers (``match``, ``includes``, a partial-credit
``C``/``P``/``I``/``N`` scorer and a numeric one), epochs with each reducer, a run whose samples raise
(``fail_on_error=False``), a fail-fast run, a run interrupted by SIGINT and one killed by SIGKILL, an
``edit_score`` edit and ``invalidate_samples``; sample ids with colons, slashes, spaces and non-ASCII text.

``manifest.json`` beside the logs records inspect-ai's version and, per log, Inspect's own headline numbers
(``results.scores``: scorer, reducer, metric values) and what the run was set up to do (samples, epochs,
reducers), so the tests compare mrcstats with the tool, not with numbers typed from a reading.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
REPO = HERE.parents[2]
DEFAULT_OUT = REPO / "tests" / "conformance" / "inspect"
VENV = Path(os.environ.get("INSPECT_FIXTURES_VENV", "/work/scratch/i23a/venv"))
WANTED = "0.3.285"

# ---------------------------------------------------------------------------------------------- the data
#: (id, question, target, scripted answers by attempt: attempt n of a sample gets answers[n % len])
SAMPLES: list[tuple[object, str, str, list[str]]] = [
    (1, "What is 2+2?", "4", ["4", "5", "4"]),
    ("q:2", "Capital of France?", "Paris", ["paris", "Paris", "Lyon"]),
    ("ü ß 3", "Color of the clear sky?", "blue", ["Blue sky", "blue", "grey"]),
    (40, "What is 3*3?", "9", ["8", "6", "9"]),
    ("x/5", "Opposite of hot?", "cold", ["", "cold", "warm"]),
]
REDUCERS = ["mean", "median", "mode", "max", "at_least_2", "pass_at_2"]
#: multiple choice (``multiple_choice()`` solver, ``choice()`` scorer): (id, question, choices, target, answer);
#: the empty completion gets Inspect's ``N`` (NOANSWER, reason ``no_response``)
MC_SAMPLES: list[tuple[object, str, list[str], str, str]] = [
    ("mc1", "Which is a prime number?", ["4", "7", "9"], "B", "ANSWER: B"),
    ("mc2", "Which is a colour?", ["red", "seven", "fast"], "A", "ANSWER: A"),
    ("mc3", "Which is a fruit?", ["carrot", "potato", "apple"], "C", "ANSWER: A"),
    ("mc4", "Which is a planet?", ["Mars", "Moon", "Sun"], "A", ""),
]


# ------------------------------------------------------------------------------------- outer (any python)
def _venv_python() -> Path:
    return VENV / "bin" / "python"


def install() -> str:
    """Create the scratch venv and install inspect-ai into it; return the installed version."""
    py = _venv_python()
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    probe = subprocess.run([str(py), "-c", "import inspect_ai, sys; sys.stdout.write(inspect_ai.__version__)"],
                           capture_output=True, text=True, check=False)
    if probe.returncode == 0 and probe.stdout:
        return probe.stdout
    pip = [str(py), "-m", "pip", "install", "-q"]
    if subprocess.run([*pip, f"inspect-ai=={WANTED}"], check=False).returncode != 0:
        subprocess.run([*pip, "inspect-ai"], check=True)
    return subprocess.run([str(py), "-c", "import inspect_ai, sys; sys.stdout.write(inspect_ai.__version__)"],
                          capture_output=True, text=True, check=True).stdout


def main(out_dir: str | os.PathLike = DEFAULT_OUT, only: set[str] | None = None) -> Path:
    """Install inspect-ai in the scratch venv and write every fixture log plus ``manifest.json`` to ``out_dir``
    (``only``, from ``--only=a.eval,b.eval``: just those logs, merged into the existing manifest)."""
    out = Path(out_dir).resolve()
    version = install()
    print(f"inspect-ai {version} in {VENV}", file=sys.stderr)
    if out.exists() and only is None:
        for f in out.iterdir():
            if f.is_file() and (f.suffix in (".eval", ".json")):
                f.unlink()
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "INSPECT_LOG_LEVEL": "warning", "INSPECT_DISPLAY": "none", "NO_COLOR": "1"}
    for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        env.pop(k, None)
    # run outside any git checkout, so the logs' eval.revision does not record this repository's state
    subprocess.run([str(_venv_python()), str(HERE), "--inside", str(out), *([",".join(sorted(only))] if only else [])],
                   check=True, env=env,
                   cwd=tempfile.gettempdir())
    return out


# ------------------------------------------------------------------------------------ inner (the venv)
def _key(messages) -> str:
    text = ""
    for m in messages:
        if getattr(m, "role", None) == "user":
            text = m.text
    return text


def _scripted(hang_on: str | None = None, raise_on: str | None = None, marker: str | None = None):
    """A ``custom_outputs`` callable: the n-th call for a question answers ``answers[n % len]``."""
    from inspect_ai.model import ModelOutput, ModelUsage

    seen: dict[str, int] = {}
    answers = {q: a for _, q, _, a in SAMPLES}

    async def generate(messages, tools, tool_choice, config):
        import asyncio

        q = _key(messages)
        if raise_on is not None and raise_on in q:
            raise RuntimeError(f"scripted failure on {q!r}\n(second line of the error)")
        if hang_on is not None and hang_on in q:
            if marker:
                Path(marker).write_text("reached")
            await asyncio.sleep(600)
        n = seen.get(q, 0)
        seen[q] = n + 1
        a = answers.get(q, ["?"])
        out = ModelOutput.from_content(model="mockllm/model", content=a[n % len(a)])
        # usage given, so mockllm never counts tokens (tiktoken would download its encoding)
        out.usage = ModelUsage(input_tokens=len(q.split()), output_tokens=1, total_tokens=len(q.split()) + 1)
        return out

    return generate


def _mc_outputs():
    """A ``custom_outputs`` callable answering each multiple-choice question with its scripted completion."""
    from inspect_ai.model import ModelOutput, ModelUsage

    async def generate(messages, tools, tool_choice, config):
        q = _key(messages)
        a = next((ans for _, question, _, _, ans in MC_SAMPLES if question in q), "?")
        out = ModelOutput.from_content(model="mockllm/model", content=a)
        out.usage = ModelUsage(input_tokens=len(q.split()), output_tokens=1, total_tokens=len(q.split()) + 1)
        return out

    return generate


def _mc_run(log_dir: Path, fmt: str = "eval"):
    """A multiple-choice task (``multiple_choice()`` + ``choice()``) over :data:`MC_SAMPLES`."""
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.model import get_model
    from inspect_ai.scorer import choice
    from inspect_ai.solver import multiple_choice

    ds = MemoryDataset([Sample(id=i, input=q, choices=c, target=t) for i, q, c, t, _ in MC_SAMPLES], name="tiny_mc")
    task = Task(dataset=ds, solver=multiple_choice(), scorer=choice(), name="tiny_mc")
    model = get_model("mockllm/model", custom_outputs=_mc_outputs())
    return inspect_eval(task, model=model, log_dir=str(log_dir), log_format=fmt, display="none",
                        max_connections=1, max_samples=1)


def _dataset():
    from inspect_ai.dataset import MemoryDataset, Sample

    return MemoryDataset([Sample(id=i, input=q, target=t) for i, q, t, _ in SAMPLES], name="tiny_qa")


def _partial_scorer():
    from inspect_ai.scorer import CORRECT, INCORRECT, NOANSWER, PARTIAL, Score, accuracy, scorer, stderr

    @scorer(metrics=[accuracy(), stderr()])
    def partial():
        async def score(state, target):
            ans = state.output.completion.strip()
            t = target.text
            if not ans:
                v = NOANSWER
            elif ans == t:
                v = CORRECT
            elif t.lower() in ans.lower():
                v = PARTIAL
            else:
                v = INCORRECT
            return Score(value=v, answer=ans)
        return score

    return partial()


def _numeric_scorer():
    from inspect_ai.scorer import Score, mean, scorer, stderr

    @scorer(metrics=[mean(), stderr()])
    def overlap():
        async def score(state, target):
            from difflib import SequenceMatcher

            ans = state.output.completion.strip().lower()
            ratio = SequenceMatcher(None, ans, target.text.lower()).ratio()  # graded: 0.6667 for "blue sky"
            return Score(value=round(ratio, 4), answer=ans)
        return score

    return overlap()


def _task(scorers: str = "match", epochs=None, name: str = "tiny_qa"):
    from inspect_ai import Task
    from inspect_ai.scorer import includes, match
    from inspect_ai.solver import generate

    pick = {"match": match(), "includes": includes(), "partial": _partial_scorer(), "overlap": _numeric_scorer()}
    return Task(dataset=_dataset(), solver=generate(), scorer=[pick[s] for s in scorers.split(",")],
                epochs=epochs, name=name)


def _run(log_dir: Path, task, fmt: str = "eval", **kw):
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import get_model

    model = get_model("mockllm/model", custom_outputs=_scripted(kw.pop("hang_on", None), kw.pop("raise_on", None),
                                                                 kw.pop("marker", None)))
    logs = inspect_eval(task, model=model, log_dir=str(log_dir), log_format=fmt, display="none",
                        max_connections=1, max_samples=1, **kw)
    return logs[0] if logs else None


def _newest(log_dir: Path) -> Path:
    files = sorted((f for f in log_dir.iterdir() if f.suffix in (".eval", ".json")), key=lambda f: f.stat().st_mtime)
    return files[-1]


def _interrupted(out: Path, name: str, sig: int, fmt: str) -> None:
    """Run a task in a child process, hang on one sample, then send ``sig`` to the child."""
    tmp = out / f".tmp_{name}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    marker = tmp / "marker"
    child = subprocess.Popen([sys.executable, str(HERE), "--child", str(tmp), fmt, str(marker)])
    for _ in range(600):
        if marker.exists():
            break
        time.sleep(0.1)
    time.sleep(2.0)  # let the finished samples reach the log
    child.send_signal(sig)
    try:
        child.wait(timeout=60)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
    shutil.move(str(_newest(tmp)), str(out / f"{name}.{fmt}"))
    shutil.rmtree(tmp, ignore_errors=True)


def _child(log_dir: str, fmt: str, marker: str) -> None:
    from inspect_ai import Epochs

    # samples run in dataset order (max_samples=1): ids 1 and q:2 finish, "Color of the clear sky?" hangs
    _run(Path(log_dir), _task("match", epochs=Epochs(2, "mean"), name="interrupted"), fmt=fmt,
         hang_on="clear sky", marker=marker, log_buffer=1)


def _scores_of(log) -> list[dict]:
    out = []
    for s in (log.results.scores if log.results else []) or []:
        out.append({"name": s.name, "scorer": s.scorer, "reducer": s.reducer,
                    "scored_samples": s.scored_samples, "unscored_samples": s.unscored_samples,
                    "metrics": {m.name: m.value for m in s.metrics.values()}})
    return out


def inside(out: Path, only: set[str] | None = None) -> None:
    """Write the logs (``only``: just these log names, e.g. ``{"choice_noanswer.eval"}``, merged into the
    existing manifest) and ``manifest.json``."""
    from inspect_ai import Epochs
    from inspect_ai.log import ProvenanceData, edit_score, invalidate_samples, read_eval_log, write_eval_log
    from inspect_ai.scorer import ScoreEdit

    tmp = out / ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    made: dict[str, dict] = {}

    def keep(name: str, fmt: str, what: str, epochs: int = 1, reducers: list[str] | None = None) -> Path:
        dest = out / f"{name}.{fmt}"
        shutil.move(str(_newest(tmp)), str(dest))
        made[dest.name] = {"what": what, "epochs": epochs, "reducers": reducers or ["mean"]}
        return dest

    if only is not None:
        _only(out, tmp, only, made)
        return
    # several scorers, both formats
    what = "four scorers (match, includes, partial credit C/P/I/N, numeric overlap), one epoch"
    _run(tmp, _task("match,includes,partial,overlap"), fmt="eval")
    keep("scorers", "eval", what)
    _run(tmp, _task("match,includes,partial,overlap"), fmt="json")
    keep("scorers", "json", what + ", log_format='json'")
    # epochs with each reducer
    for red in REDUCERS:
        _run(tmp, _task("match,partial", epochs=Epochs(3, red)), fmt="eval")
        keep(f"epochs_{red}", "eval", f"3 epochs reduced with {red!r}", epochs=3, reducers=[red])
    _run(tmp, _task("match", epochs=Epochs(3, ["mean", "at_least_1"])), fmt="eval")
    keep("epochs_two_reducers", "eval", "3 epochs, two reducers (mean, at_least_1)", epochs=3,
         reducers=["mean", "at_least_1"])
    # errored samples kept (fail_on_error=False), and a fail-fast run
    _run(tmp, _task("match", epochs=Epochs(2, "mean")), fmt="eval", raise_on="What is 3*3?", fail_on_error=False)
    keep("errored", "eval", "sample 40 raises in every epoch; fail_on_error=False", epochs=2)
    _run(tmp, _task("match"), fmt="eval", raise_on="Color of the clear sky?")
    keep("failfast", "eval", "the third sample raises; fail-fast (status error)")
    # interrupted (SIGINT) and killed (SIGKILL) runs
    _interrupted(out, "sigint", signal.SIGINT, "eval")
    made["sigint.eval"] = {"what": "SIGINT while the third sample runs (status cancelled)",
                      "epochs": 2, "reducers": ["mean"]}
    _interrupted(out, "sigint", signal.SIGINT, "json")
    made["sigint.json"] = {"what": "the SIGINT run written as JSON", "epochs": 2,
                           "reducers": ["mean"]}
    _interrupted(out, "sigkill", signal.SIGKILL, "eval")
    made["sigkill.eval"] = {"what": "SIGKILL while the third sample runs (no header.json)",
                       "epochs": 2, "reducers": ["mean"]}
    # edit_score and invalidate_samples on a finished log
    _run(tmp, _task("match,partial"), fmt="eval")
    src = keep("edited", "eval", "match score of sample 40 edited from I to C with edit_score (metrics recomputed)")
    log = read_eval_log(str(src))
    edit_score(log, 40, "match", ScoreEdit(value="C", explanation="regraded by hand",
                                             provenance=ProvenanceData(author="fixtures", reason="regrade")))
    write_eval_log(log, str(src))
    _run(tmp, _task("match,partial"), fmt="eval")
    src = keep("invalidated", "eval", "samples 1 and x/5 invalidated with invalidate_samples")
    log = read_eval_log(str(src))
    uuids = [s.uuid for s in log.samples if s.id in (1, "x/5")]
    log = invalidate_samples(log, uuids, ProvenanceData(author="fixtures", reason="leaked into training"))
    write_eval_log(log, str(src))
    _mc_run(tmp)
    keep("choice_noanswer", "eval", "multiple_choice() + choice(): 2 correct, 1 wrong, 1 empty completion (N)")
    shutil.rmtree(tmp, ignore_errors=True)
    _manifest(out, made)


def _only(out: Path, tmp: Path, only: set[str], made: dict[str, dict]) -> None:
    """Write just the logs named in ``only`` and merge them into the existing ``manifest.json``."""
    if "choice_noanswer.eval" in only:
        _mc_run(tmp)
        dest = out / "choice_noanswer.eval"
        shutil.move(str(_newest(tmp)), str(dest))
        made[dest.name] = {"what": "multiple_choice() + choice(): 2 correct, 1 wrong, 1 empty completion (N)",
                           "epochs": 1, "reducers": ["mean"]}
    unknown = only - set(made)
    if unknown:
        raise SystemExit(f"inspect_fixtures: --only knows no log {sorted(unknown)}")
    shutil.rmtree(tmp, ignore_errors=True)
    old = json.loads((out / "manifest.json").read_text())
    _manifest(out, made, old.get("logs", {}))


def _manifest(out: Path, made: dict[str, dict], keep_logs: dict | None = None) -> None:
    """``manifest.json``: inspect-ai's version and, per log, Inspect's own reading of it (``keep_logs``: the
    records of logs not rewritten this time)."""
    import inspect_ai
    from inspect_ai.log import read_eval_log

    # what the tool itself says about each log
    for name, rec in made.items():
        path = out / name
        log = read_eval_log(str(path))  # the killed run too: Inspect reads its _journal
        rec.update({"status": log.status, "task": log.eval.task, "model": log.eval.model,
                    "dataset_samples": log.eval.dataset.samples,
                    "samples_in_log": len(log.samples or []),
                    "errored_in_log": sum(1 for s in log.samples or [] if s.error is not None),
                    "invalidated_in_log": sum(1 for s in log.samples or [] if s.invalidation is not None),
                    "scores": _scores_of(log), "bytes": path.stat().st_size,
                    # each sample as Inspect itself reads it (read_eval_log), for per-sample comparison
                    "sample_scores": [{"id": s.id, "epoch": s.epoch,
                                       "scores": {k: v.value for k, v in (s.scores or {}).items()},
                                       "error": str(s.error.message)[:80] if s.error else None,
                                       "invalidated": s.invalidation is not None} for s in log.samples or []]})
    manifest = {"tool": "inspect-ai", "version": inspect_ai.__version__,
                "python": sys.version.split()[0],
                "command": "python scripts/tool_fixtures/inspect_fixtures.py tests/conformance/inspect",
                "model": "mockllm/model with a scripted custom_outputs callable (offline)",
                "samples": [{"id": i, "input": q, "target": t} for i, q, t, _ in SAMPLES],
                "logs": {**(keep_logs or {}), **made}}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False, default=str) + "\n")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--inside":
        inside(Path(sys.argv[2]), set(sys.argv[3].split(",")) if len(sys.argv) > 3 else None)
    elif len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(*sys.argv[2:5])
    else:
        args = [a for a in sys.argv[1:] if not a.startswith("--only=")]
        picked = [a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--only=")]
        main(args[0] if args else DEFAULT_OUT, set(picked[0].split(",")) if picked else None)
