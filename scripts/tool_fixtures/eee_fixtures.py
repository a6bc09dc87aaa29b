"""Regenerate tests/conformance/eee/: Every Eval Ever files written by every-eval-ever's own converters.

The public ``evaleval/every_eval_ever`` repository no longer holds a ``data/`` folder (it moved to a
datastore; the last ``data/`` in its history had aggregates only, no ``_samples.jsonl``), so the
fixtures are what the package's converters write from the real tool logs the repository keeps as test
inputs (``tests/data/inspect/*.json``: Inspect AI logs; ``tests/data/lm_eval/``: an lm-evaluation-harness
run), plus the repository's frozen aggregate + samples pair (``tests/data/skill_reference_conversion``).

every-eval-ever needs Python >= 3.12: the script makes a venv with ``--python`` (default ``python3.12``)
under ``--work``, installs ``every-eval-ever[inspect]==VERSION`` there, converts, and copies the outputs
with a ``manifest.json`` (package version, origin of each input: repository, commit, path; the
aggregate's own headline numbers).

    python scripts/tool_fixtures/eee_fixtures.py tests/conformance/eee \\
        --repo /path/to/every_eval_ever.git     # or omit: git clone of the public repository
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _evaleval_repo import REPO_URL, git, open_repo, repo_arg, write_manifest

VERSION = "0.3.0"
#: (fixture folder, converter, input paths in the repository, extra converter flags)
CONVERSIONS = (
    ("inspect_arc_qwen", "inspect", ["tests/data/inspect/data_arc_qwen.json"], []),
    ("inspect_arc_sonnet", "inspect", ["tests/data/inspect/data_arc_sonnet.json"], []),
    ("lm_eval_math_perturbed", "lm_eval", ["tests/data/lm_eval/results_2026-01-21T03-44-18.458309.json",
                 "tests/data/lm_eval/samples_math_perturbed_full_2026-01-21T03-44-18.458309.jsonl"],
     ["--include_samples"]),
)
#: files copied as they are from the repository (an aggregate and its samples file)
_REF = "tests/data/skill_reference_conversion/data/demo-source/demo-org/demo-model/"
COPIED = (f"{_REF}f3a1c0de-4b2e-4c1a-9f6d-1b7e5a2c8d40.json",
          f"{_REF}f3a1c0de-4b2e-4c1a-9f6d-1b7e5a2c8d40_samples.jsonl")



def _venv(work: Path, python: str) -> Path:
    venv = work / "eee-venv"
    if not (venv / "bin" / "python").exists():
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", f"every-eval-ever[inspect]=={VERSION}"],
                       check=True)
    return venv / "bin" / "python"


def _headline(agg: dict) -> list[dict]:
    return [{"evaluation_name": r.get("evaluation_name"), "evaluation_result_id": r.get("evaluation_result_id"),
             "score": r["score_details"]["score"],
             "num_samples": (r["score_details"].get("uncertainty") or {}).get("num_samples")}
            for r in agg["evaluation_results"]]


def main(out_dir: str | Path, repo: str | Path | None = None, python: str = "python3.12",
         work: str | Path | None = None) -> Path:
    """Write the fixtures and manifest.json into ``out_dir`` (replaced); returns the manifest path."""
    out = Path(out_dir)
    work = Path(work or tempfile.mkdtemp(prefix="eee-fixtures-"))
    work.mkdir(parents=True, exist_ok=True)
    git_dir, commit = open_repo(repo)
    py = _venv(work, python)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    entries = []
    for i, (folder, conv, paths, flags) in enumerate(CONVERSIONS):
        src = work / f"in{i}"
        shutil.rmtree(src, ignore_errors=True)
        src.mkdir()
        for p in paths:
            (src / Path(p).name).write_bytes(git(git_dir, "show", f"{commit}:{p}"))
        conv_out = work / f"out{i}"
        shutil.rmtree(conv_out, ignore_errors=True)
        log_path = src / Path(paths[0]).name if conv == "inspect" else src
        subprocess.run([str(py), "-m", "every_eval_ever", "convert", conv, "--log_path", str(log_path),
                        "--output_dir", str(conv_out), "--source_organization_name", "mrcstats conformance",
                        "--evaluator_relationship", "third_party", *flags], check=False)
        for agg_path in sorted(conv_out.rglob("*.json")):
            samples = agg_path.with_name(agg_path.stem + "_samples.jsonl")
            if agg_path.parent.name == "adapter_reports" or not samples.exists():
                continue   # an aggregate without instance-level data (a task the run logged no samples for)
            dest = out / folder
            dest.mkdir()
            shutil.copy(agg_path, dest / agg_path.name)
            shutil.copy(samples, dest / samples.name)
            agg = json.loads(agg_path.read_text())
            rows = sum(1 for line in samples.read_text().splitlines() if line.strip())
            head = _headline(agg)
            entries.append({"folder": dest.name, "aggregate": agg_path.name, "samples": samples.name,
                            "written_by": f"every_eval_ever {VERSION} convert {conv}",
                            "input": {"repo": REPO_URL, "commit": commit, "paths": paths},
                            "eval_library": agg.get("eval_library"), "headline": head, "samples_rows": rows,
                            # the aggregate is computed from these samples only when its sample count is theirs
                            # (the repository's lm-eval input keeps 10 of the 5000 samples its results cover)
                            "headline_from_samples": all(h["num_samples"] in (None, rows) for h in head)})
    dest = out / "skill_reference"
    dest.mkdir()
    for p in COPIED:
        (dest / Path(p).name).write_bytes(git(git_dir, "show", f"{commit}:{p}"))
    agg = json.loads((dest / Path(COPIED[0]).name).read_text())
    entries.append({"folder": dest.name, "aggregate": Path(COPIED[0]).name, "samples": Path(COPIED[1]).name,
                    "written_by": "every_eval_ever's eee-dataset-conversion skill templates (frozen reference "
                                  "output in the repository; source_type 'documentation': its aggregate score is "
                                  "a demo number, not computed from the one sample)",
                    "input": {"repo": REPO_URL, "commit": commit, "paths": list(COPIED)},
                    "eval_library": agg.get("eval_library"), "headline": _headline(agg),
                    "samples_rows": 1, "headline_from_samples": False})
    probe = "import sys, importlib.metadata as m; print(sys.version.split()[0], m.version('inspect-ai'))"
    versions = subprocess.run([str(py), "-c", probe], check=True, capture_output=True, text=True).stdout.split()
    manifest = {"tool": "every-eval-ever", "version": VERSION, "python": versions[0], "inspect_ai": versions[1],
                "schema_version": VERSION, "generated_by": "scripts/tool_fixtures/eee_fixtures.py",
                "fixtures": entries}
    return write_manifest(out, manifest)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir", nargs="?", default="tests/conformance/eee")
    repo_arg(ap)
    ap.add_argument("--python", default="python3.12", help="a Python >= 3.12 for every-eval-ever")
    ap.add_argument("--work", help="scratch folder (venv, clone, converter outputs)")
    a = ap.parse_args()
    print(main(a.out_dir, a.repo, a.python, a.work), file=sys.stderr)
