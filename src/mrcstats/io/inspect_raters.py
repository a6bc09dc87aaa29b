"""Several scorers of an Inspect AI log as raters: model-graded scorers (``model_graded_qa``, ``model_graded_fact``,
a custom LLM judge) and reference scorers (``match``, ``includes``, a human-label scorer) side by side.

Inspect stores every scorer's verdict on each sample-epoch under ``samples[].scores[<scorer>]`` as
``{"value", "answer", "explanation", "metadata"}``; a model-graded scorer puts the grader's reasoning in
``explanation`` and its conversation in ``metadata.grading`` (the last assistant message names the grader
model). :func:`read_inspect_raters` reads them all into the long form of :func:`mrcstats.agreement` -- one row
per sample-epoch and scorer:

* ``model`` (``eval.model``), ``item`` (``<task>:<sample id>``, as :func:`~mrcstats.io.inspect_ai.read_inspect`),
  ``trial`` (``epoch - 1``), ``task``, ``sample_id``;
* ``rater``: the scorer's name (several scorers = several judges); ``grader``: the grader model named in
  ``metadata.grading`` (empty for a scorer that is not model-graded);
* ``rating``: the value as Inspect's ``value_to_float`` reads it (``C`` 1, ``P`` .5, ``I``/``N`` 0, numbers);
  ``value``: the raw value as text; ``answer``, ``explanation``.

A scorer that holds several graders' values is several raters:

* a dict value (a hand-written judge returning ``{"gpt": "C", "claude": "I"}``; Inspect computes its metrics per
  key): one rater per key, named ``<scorer>/<key>``; a list value: one per position, ``<scorer>/1``, ``/2``, …;
* a grader panel (``model_graded_qa(model=[m1, m2, m3])``, or a ``model_role`` bound to a list; Inspect's
  ``multi_scorer``): the scorer's value is the panel's reduced grade (majority by default) and
  ``metadata.panel.votes`` holds each grader's vote in the order of ``model``; the scorer stays one rater (the
  panel) and each vote is another, ``<scorer>/1``, ``<scorer>/2``, … (Inspect does not record which model cast
  which vote, only the order; ``grader`` is empty for them). A vote a grader failed to cast (``null``) is no
  rating for that rater and sample: it is counted in ``attrs["skipped"]``.

``scorers=`` selects by the scorer's name (all its raters) or by a rater's name (``"duo/gpt"``).
:func:`raters_wide` turns it into one column per rater (the ``--judge``/``--wide`` form), keyed by model, item
and trial. A sample-epoch without scores (errored or cancelled) is left out and counted in ``attrs["skipped"]``;
a value that is not a score is an error naming the sample and the scorer.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from mrcstats.errors import InputError

__all__ = ["RATER_COLUMNS", "raters_wide", "read_inspect_raters", "read_raters"]

#: the columns of :func:`read_inspect_raters`
RATER_COLUMNS = ("model", "item", "trial", "task", "sample_id", "rater", "grader", "rating", "value", "answer",
                 "explanation")


def _grader(meta: Any) -> str | None:
    grading = meta.get("grading") if isinstance(meta, dict) else None
    if not isinstance(grading, list):
        return None
    for msg in reversed(grading):
        if isinstance(msg, dict) and msg.get("role") == "assistant" and msg.get("model"):
            return str(msg["model"])
    return None


def _parts(rater: str, value: Any) -> list[tuple[str, Any]]:
    """``(rater name, single value)`` for a scorer's value: itself, or one per dict key / list position
    (``<rater>/<key>``, ``<rater>/<i>`` from 1), nested ones flattened the same way."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _parts(f"{rater}/{k}", v)]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _parts(f"{rater}/{i + 1}", v)]
    return [(rater, value)]


def _votes(meta: Any) -> list | None:
    """The grader panel's votes of a reduced model-graded score (``metadata.panel.votes``), else None."""
    panel = meta.get("panel") if isinstance(meta, dict) else None
    votes = panel.get("votes") if isinstance(panel, dict) else None
    return votes if isinstance(votes, list) else None


def read_inspect_raters(paths: Any, scorers: Sequence[str] | None = None, model: str | None = None) -> pd.DataFrame:
    """Every scorer of one or more Inspect logs (``.eval`` or JSON) as raters, in the long form (module docstring;
    :data:`RATER_COLUMNS`). ``scorers``: keep these scorers only (each must occur); ``model``: the model name
    when a log names none."""
    from mrcstats.io.formats import EXTENSIONS
    from mrcstats.io.inspect_ai import inspect_log, sample_scores, value_to_float
    from mrcstats.io.source import expand_paths, load_source

    rows: list[dict[str, Any]] = []
    skipped = 0
    no_vote = 0
    seen: dict[str, None] = {}
    for path in expand_paths(paths, EXTENSIONS):
        src = load_source(path)
        obj = inspect_log(src)
        ev = obj.get("eval") if isinstance(obj.get("eval"), dict) else {}
        task = str(ev.get("task") or src.stem)
        name = ev.get("model") or model
        if not name:
            raise InputError(f"{src.name}: the log names no model; pass model=NAME (--model)")
        for i, s in enumerate(obj["samples"]):
            scores = sample_scores(src, i, s)
            if not scores:
                skipped += 1
                continue
            sid = str(s.get("id", i + 1))
            epoch = s.get("epoch", 1)
            if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 1:
                raise InputError(f"{src.name}: sample {i + 1} (id {sid!r}) has epoch {epoch!r}; Inspect epochs "
                                 "are whole numbers from 1")
            for scorer_name, sc in scores.items():
                scorer_name = str(scorer_name)
                sc = sc if isinstance(sc, dict) else {"value": sc}
                meta = sc.get("metadata")
                votes = _votes(meta)
                parts = _parts(scorer_name, sc.get("value"))
                if votes is not None:
                    for j, v in enumerate(votes):
                        if v is None:
                            no_vote += 1
                            seen[f"{scorer_name}/{j + 1}"] = None
                        else:
                            parts += _parts(f"{scorer_name}/{j + 1}", v)
                seen[scorer_name] = None
                for rater, value in parts:
                    seen[rater] = None
                    if scorers is not None and scorer_name not in scorers and rater not in scorers:
                        continue
                    f = value_to_float(value) if value is not None else None
                    if f is None:
                        raise InputError(f"{src.name}: sample {i + 1} (id {sid!r}): scorer {rater!r} gives "
                                         f"{value!r}, not a score (C/I/P/N, a number, yes/no); pass scorers= "
                                         "without it")
                    single = rater == scorer_name and votes is None
                    rows.append({"model": str(name), "item": f"{task}:{sid}", "trial": epoch - 1, "task": task,
                                 "sample_id": sid, "rater": rater, "grader": _grader(meta) if single else None,
                                 "rating": f, "value": str(value), "answer": sc.get("answer"),
                                 "explanation": sc.get("explanation") if single else None})
    if scorers is not None:
        missing = [x for x in scorers if x not in seen]
        if missing:
            raise InputError(f"no scorer {missing[0]!r} in the Inspect log(s); the scorers are "
                             f"{', '.join(map(repr, seen)) or '(none: no sample was scored)'}")
    if not rows:
        raise InputError("the Inspect log(s) hold no scored sample")
    df = pd.DataFrame(rows, columns=list(RATER_COLUMNS))
    df["rating"] = df["rating"].astype(float)
    df.attrs["skipped"] = ({"Inspect sample without scores (errored or cancelled)": skipped} if skipped else {}) | (
        {"grader-panel vote not cast (the grader gave no grade)": no_vote} if no_vote else {})
    return df


def raters_wide(long: pd.DataFrame) -> pd.DataFrame:
    """The long form of :func:`read_inspect_raters` as one ``rating`` column per rater (named by the scorer),
    keyed by ``model``, ``item`` and ``trial`` (a rater that did not score a sample-epoch leaves its cell empty)."""
    clash = [r for r in pd.unique(long["rater"]) if r in ("model", "item", "trial")]
    if clash:
        raise InputError(f"a scorer is named {clash[0]!r}, like a key column; rename the scorer")
    wide = long.pivot_table(index=["model", "item", "trial"], columns="rater", values="rating", aggfunc="first",
                            sort=False)
    wide = wide[list(pd.unique(long["rater"]))].reset_index()
    wide.columns.name = None
    return wide


def read_raters(paths: Any, format: str | None = None, wide: bool = True) -> pd.DataFrame:
    """A table of ratings as ``agreement`` and ``judge`` read it: an Inspect log's scorers as raters
    (:func:`read_inspect_raters`; one column per scorer keyed by model, item and trial when ``wide``
    (:func:`raters_wide`), else the long form) or any table :func:`mrcstats.io.read_data` reads. io decides the
    format, once (the detected one unless ``format`` is given)."""
    from mrcstats.io.detect import detect_format
    from mrcstats.io.formats import EXTENSIONS
    from mrcstats.io.reader import read_data
    from mrcstats.io.source import expand_paths, load_source

    files = expand_paths(paths, EXTENSIONS)
    srcs = [load_source(f) for f in files]
    if (format or detect_format(srcs[0])) == "inspect":
        long = read_inspect_raters(files)
        return raters_wide(long) if wide else long
    return read_data(paths, format=format, loaded=srcs)
