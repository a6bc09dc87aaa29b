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

:func:`raters_wide` turns it into one column per rater (the ``--judge``/``--wide`` form), keyed by model, item
and trial. A sample-epoch without scores (errored or cancelled) is left out and counted in ``attrs["skipped"]``;
a scorer with several values per sample (a dict) or a value that is not a score is an error naming the
sample and the scorer.
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


def read_inspect_raters(paths: Any, scorers: Sequence[str] | None = None, model: str | None = None) -> pd.DataFrame:
    """Every scorer of one or more Inspect logs (``.eval`` or JSON) as raters, in the long form (module docstring;
    :data:`RATER_COLUMNS`). ``scorers``: keep these scorers only (each must occur); ``model``: the model name
    when a log names none."""
    from mrcstats.io.formats import EXTENSIONS
    from mrcstats.io.inspect_ai import inspect_log, sample_scores, value_to_float
    from mrcstats.io.source import expand_paths, load_source

    rows: list[dict[str, Any]] = []
    skipped = 0
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
            for rater, sc in scores.items():
                seen[rater] = None
                if scorers is not None and rater not in scorers:
                    continue
                sc = sc if isinstance(sc, dict) else {"value": sc}
                value = sc.get("value")
                if isinstance(value, (dict, list)):
                    raise InputError(f"{src.name}: sample {i + 1} (id {sid!r}): scorer {rater!r} gives several "
                                     f"values ({', '.join(map(str, value))}); only single-value scorers are raters "
                                     "(pass scorers= without it)")
                f = value_to_float(value) if value is not None else None
                if f is None:
                    raise InputError(f"{src.name}: sample {i + 1} (id {sid!r}): scorer {rater!r} gives {value!r}, "
                                     "not a score (C/I/P/N, a number, yes/no); pass scorers= without it")
                rows.append({"model": str(name), "item": f"{task}:{sid}", "trial": epoch - 1, "task": task,
                             "sample_id": sid, "rater": str(rater), "grader": _grader(sc.get("metadata")),
                             "rating": f, "value": str(value), "answer": sc.get("answer"),
                             "explanation": sc.get("explanation")})
    if scorers is not None:
        missing = [x for x in scorers if x not in seen]
        if missing:
            raise InputError(f"no scorer {missing[0]!r} in the Inspect log(s); the scorers are "
                             f"{', '.join(map(repr, seen)) or '(none: no sample was scored)'}")
    if not rows:
        raise InputError("the Inspect log(s) hold no scored sample")
    df = pd.DataFrame(rows, columns=list(RATER_COLUMNS))
    df["rating"] = df["rating"].astype(float)
    df.attrs["skipped"] = {"Inspect sample without scores (errored or cancelled)": skipped} if skipped else {}
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
