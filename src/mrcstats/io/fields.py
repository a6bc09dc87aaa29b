"""The canonical log's column names: the schema's vocabulary (:mod:`mrcstats.io.schema` validates with it).

A module of its own, without pandas, so that readers that never build a pandas frame (the command line's
``glmer``, :mod:`mrcstats.io.arrow_columns`) use the same names.
"""
from __future__ import annotations

#: every canonical column, in the order they appear in a log
CANONICAL_COLUMNS: tuple[str, ...] = (
    "model", "item", "cluster", "trial", "condition", "masking_rate", "correct", "score",
    "response", "gold", "pred", "passage", "question", "options",
)
#: columns every log has (the texts are optional). ``score`` is not among them: every log read or
#: validated has it, but a frame (or a dataset written before it existed) without it is still
#: canonical, its score being ``correct`` (:func:`outcome_values`)
CORE_COLUMNS: tuple[str, ...] = ("model", "item", "cluster", "trial", "condition", "masking_rate", "correct",
                                 "response", "gold", "pred")
#: optional text columns, present when the source has them
TEXT_COLUMNS: tuple[str, ...] = ("passage", "question", "options")
#: columns a source must provide (``cluster``, ``trial``, ``condition`` have defaults); ``score`` may stand
#: in for ``correct`` (a graded source)
REQUIRED_COLUMNS: tuple[str, ...] = ("model", "item", "correct")
#: the outcomes an analysis of the mean can use (``outcome=`` of summary / compare / power)
OUTCOMES: tuple[str, ...] = ("auto", "correct", "score")
#: the key that identifies a row; the masking rate is part of the condition (null when there is no
#: masking), so without masking this is exactly (model, item, trial, condition)
KEY_COLUMNS: tuple[str, ...] = ("model", "item", "trial", "condition", "masking_rate")
STRING_COLUMNS: tuple[str, ...] = ("model", "item", "cluster", "condition", "response", "gold", "pred",
                                   *TEXT_COLUMNS)
DUPLICATE_POLICIES: tuple[str, ...] = ("error", "first", "last")
#: how each section states the invalid-answer rule (one wording for accuracy, compare, IRT and the GLMM)
INVALID_WORDS: dict[str, str] = {"wrong": "invalid answers count as not correct",
                                 "exclude": "invalid answers are left out"}
