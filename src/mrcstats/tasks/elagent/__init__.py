"""ELAGENT tasks (seed 004, Li et al., "Challenging Large Language Models with New Tasks"):
seeded generators with gold answers, a gold checker for published result files, and scorers.

* :mod:`.arith` -- expressions with redefined precedence (exact and float evaluation, moves);
* :mod:`.generate` -- Task 1, 2, 5 and 6 task files for ``mrcstats query``;
* :mod:`.verify` -- recompute the Task 1/2 gold of stored items from their prompts;
* :mod:`.scoring` -- bracket extraction, accuracy, exact match, BLEU, morph F1.
"""
from __future__ import annotations

from mrcstats.tasks.elagent.generate import generate, task1, task2, task5, task6, write_taskfile
from mrcstats.tasks.elagent.scoring import (
    accuracy,
    bleu,
    exact_match,
    extract_bracket,
    extract_choice,
    morph_f1,
    score,
    score_log,
)
from mrcstats.tasks.elagent.verify import VerifyResult, recompute, verify_files

#: names exported at the package top level (``mrcstats.elagent_generate`` ...)
elagent_generate = generate
elagent_verify = verify_files
elagent_score = score_log

__all__ = ["VerifyResult", "accuracy", "bleu", "elagent_generate", "elagent_score", "elagent_verify",
           "exact_match", "extract_bracket", "extract_choice", "generate", "morph_f1", "recompute", "score",
           "score_log", "task1", "task2", "task5", "task6", "verify_files", "write_taskfile"]
