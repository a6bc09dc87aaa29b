"""HELM per-instance outputs: a run folder with ``per_instance_stats.json`` (+ ``scenario_state.json``).

A HELM run (``benchmark_output/runs/<suite>/<run name>/``) evaluates one model on one scenario.
``per_instance_stats.json`` is a list of ``{"instance_id", "train_trial_index", "perturbation"?,
"stats": [{"name": {"name", "split", "perturbation"?}, "count", "sum", "mean", ...}]}``;
``scenario_state.json`` holds ``{"adapter_spec": {"model", ...}, "request_states": [{"instance": {"id",
"references": [{"output": {"text"}, "tags": ["correct"]}], "split"}, "train_trial_index", "result":
{"completions": [{"text"}]}}]}``; ``run_spec.json`` (optional) the run's ``name`` and ``adapter_spec``.

* correctness: the run's main exact-match style stat, the first present of :data:`MAIN_STATS`
  (``exact_match``, then ``quasi_exact_match``, ``prefix_exact_match``, ``quasi_prefix_exact_match``,
  ``math_equiv``, ``math_equiv_chain_of_thought``, ``final_number_exact_match``) — its per-instance
  ``mean`` must be 0 or 1; the stat used is the ``metric`` column;
* model: ``adapter_spec.model`` of ``scenario_state.json`` (else of ``run_spec.json``, else ``--model``);
* item = ``<scenario>:<instance id>``, the instance id qualified by the run's scenario (:func:`scenario_of`:
  the run name without its ``model=``/``model_deployment=`` arguments, e.g.
  ``mmlu:subject=philosophy,method=multiple_choice_joint``), since HELM's bare ids (``id0``, ``id1``, ...)
  repeat across the scenarios of a suite while two models' runs of one scenario share them (they pair);
  ``scenario`` and ``instance_id`` keep the parts; trial = ``train_trial_index``; condition = the
  perturbation name (``""`` unperturbed); cluster = item;
* response: the first completion's text; gold: the texts of the references tagged ``correct``;
  ``run`` (the run name), ``split`` and ``metric`` columns are kept.

Instances without the stat are left out and counted in ``attrs["skipped"]``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from mrcstats.errors import InputError
from mrcstats.io.source import Source

#: exact-match style HELM stats, in the order the reader looks for them
MAIN_STATS: tuple[str, ...] = ("exact_match", "quasi_exact_match", "prefix_exact_match", "quasi_prefix_exact_match",
                               "math_equiv", "math_equiv_chain_of_thought", "final_number_exact_match")


def looks_like_helm(obj: Any) -> bool:
    """True for a parsed ``per_instance_stats.json``: a list of objects with ``instance_id`` and ``stats``."""
    return (isinstance(obj, list) and bool(obj) and isinstance(obj[0], dict) and "instance_id" in obj[0]
            and "stats" in obj[0])


def _sibling(src: Source, name: str) -> Any | None:
    """A JSON file beside ``src`` (``name`` or ``name.gz``), parsed; None when absent."""
    from mrcstats.io.source import load_source

    for cand in (src.path.parent / name, src.path.parent / f"{name}.gz"):
        if cand.is_file():
            return load_source(cand).json()
    return None


def _pert(p: Any) -> str:
    if isinstance(p, dict):
        return str(p.get("name") or "")
    return ""


def _model_of(spec: Any) -> str | None:
    if isinstance(spec, dict):
        ad = spec.get("adapter_spec") or {}
        if isinstance(ad, dict):
            m = ad.get("model") or ad.get("model_deployment")
            if m:
                return str(m)
    return None


#: run-name arguments that name the model, not the scenario (left out of :func:`scenario_of`)
_MODEL_ARGS = ("model", "model_deployment")


def scenario_of(run: str) -> str:
    """The scenario part of a HELM run name: ``mmlu:subject=philosophy,method=multiple_choice_joint,model=openai_gpt2``
    -> ``mmlu:subject=philosophy,method=multiple_choice_joint``; ``narrative_qa:model=openai_gpt2`` ->
    ``narrative_qa``. A run folder copied where ``:`` is not allowed (``mmlu-subject=...``) is read alike."""
    head, sep, args = run.partition(":")
    if not sep and "=" in run:                       # "mmlu-subject=philosophy,..." (":" written as "-")
        key = run.split(",", 1)[0].split("=", 1)[0]  # "mmlu-subject"
        head = key.rpartition("-")[0]
        args = run[len(head) + 1:] if head else run
    kept = [a for a in args.split(",") if a and a.split("=", 1)[0] not in _MODEL_ARGS]
    if not head:
        return ",".join(kept) or run
    return head + (":" + ",".join(kept) if kept else "")


def read_helm(src: Source, model: str | None = None) -> pd.DataFrame:
    """Read one HELM run (its ``per_instance_stats.json``) into rows with canonical field names."""
    recs = src.json()
    if not looks_like_helm(recs):
        raise InputError(f"{src.name}: not a HELM per_instance_stats.json (expected a list of objects with "
                         f"'instance_id' and 'stats'); pass another --format")
    names: set[str] = set()
    for r in recs:
        for s in r.get("stats") or []:
            nm = s.get("name") if isinstance(s, dict) else None
            if isinstance(nm, dict) and nm.get("name"):
                names.add(str(nm["name"]))
    metric = next((m for m in MAIN_STATS if m in names), None)
    if metric is None:
        shown = ", ".join(sorted(names)[:30]) or "(none)"
        raise InputError(f"{src.name}: no exact-match style stat ({', '.join(MAIN_STATS)}) among the per-instance "
                         f"stats; stats found: {shown}")
    state = _sibling(src, "scenario_state.json")
    spec = _sibling(src, "run_spec.json")
    run_model = _model_of(state) or _model_of(spec) or model
    if run_model is None:
        raise InputError(f"{src.name}: the HELM run does not name its model (no scenario_state.json or "
                         f"run_spec.json with adapter_spec.model beside it); pass --model NAME")
    run = str(spec.get("name")) if isinstance(spec, dict) and spec.get("name") else src.path.parent.name
    scenario = scenario_of(run)
    texts: dict[tuple[str, int, str], tuple[str | None, str | None]] = {}
    if isinstance(state, dict):
        for rs in state.get("request_states") or []:
            inst = rs.get("instance") or {}
            key = (str(inst.get("id")), int(rs.get("train_trial_index") or 0), _pert(inst.get("perturbation")))
            if key in texts:
                continue
            comps = ((rs.get("result") or {}).get("completions") or [])
            resp = comps[0].get("text") if comps and isinstance(comps[0], dict) else None
            gold = [str((ref.get("output") or {}).get("text")) for ref in inst.get("references") or []
                    if "correct" in (ref.get("tags") or [])]
            texts[key] = (resp, "; ".join(gold) if gold else None)
    rows = []
    missing = 0
    for i, r in enumerate(recs):
        if not isinstance(r, dict) or "instance_id" not in r:
            raise InputError(f"{src.name}: entry {i + 1} has no 'instance_id'")
        cond = _pert(r.get("perturbation"))
        stat = None
        for s in r.get("stats") or []:
            nm = s.get("name") if isinstance(s, dict) else None
            if isinstance(nm, dict) and nm.get("name") == metric and _pert(nm.get("perturbation")) == cond:
                stat = s
                break
        if stat is None:
            missing += 1
            continue
        val = stat.get("mean")
        if val is None and stat.get("count"):
            val = float(stat.get("sum", 0.0)) / float(stat["count"])
        if val not in (0, 1, 0.0, 1.0, True, False):
            raise InputError(f"{src.name}: instance {r['instance_id']!r}, stat {metric!r}: mean {val!r} is not 0 or "
                             f"1; an exact-match stat must be binary per instance")
        trial = int(r.get("train_trial_index") or 0)
        resp, gold = texts.get((str(r["instance_id"]), trial, cond), (None, None))
        rows.append({"model": run_model, "item": f"{scenario}:{r['instance_id']}", "trial": trial, "condition": cond,
                     "correct": float(val), "response": resp, "gold": gold, "run": run, "scenario": scenario,
                     "instance_id": str(r["instance_id"]),
                     "split": (stat.get("name") or {}).get("split"), "metric": metric})
    if not rows:
        raise InputError(f"{src.name}: no instance has the {metric!r} stat")
    df = pd.DataFrame(rows)
    if missing:
        df.attrs["skipped"] = {f"HELM instances without the {metric!r} stat": missing}
    return df


def helm_run_dirs(root: str | Path) -> list[Path]:
    """The HELM run folders under ``root`` (folders holding a ``per_instance_stats.json``)."""
    p = Path(root)
    return sorted({f.parent for f in p.rglob("per_instance_stats.json*")})
