"""Answer extraction and scores for ELAGENT-style outputs.

* :func:`extract_bracket` -- the content of the last ``[...]`` of a response,
  cleaned as the ELAGENT evaluation scripts do (``eval_T1_l3.py``: last
  bracket, backslashes removed, last whitespace token, trailing dots and
  thousands separators removed);
* :func:`extract_choice` -- a choice letter from the last bracket
  (``[B]``, ``[(b)]``, ``[B. '+' > '*']``);
* :func:`score` -- is one prediction correct: ``choice`` (same letter,
  case-insensitive), ``numeric`` (``round(x, 1)`` equal, the ELAGENT Task 1
  convention), ``exact`` (equal after whitespace normalisation) or ``auto``
  (``choice`` for a one-letter gold, ``numeric`` for a numeric gold, else ``exact``);
* :func:`accuracy`, :func:`exact_match`, :func:`bleu` (sacrebleu's corpus BLEU,
  Papineni et al. 2002) and :func:`morph_f1` (the Morph F1 of seed 004 §4.3:
  precision and recall of the words the morphological rules apply to).
"""
from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

from mrcstats._repr import Result
from mrcstats.errors import InputError

Scorer = Literal["auto", "choice", "numeric", "exact"]
SCORERS = ("auto", "choice", "numeric", "exact")

_BRACKET_RE = re.compile(r"\[([^\[\]]*)\]")
_NUMBER_RE = re.compile(r"^[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?$")
_FRACTION_RE = re.compile(r"^([-+]?\d+)\s*/\s*(\d+)$")


def extract_bracket(response: str | None) -> str | None:
    """The cleaned content of the last ``[...]`` in ``response``; ``None`` when there is none.

    ``[8 + 9 = 17]`` gives ``17``; ``[1,234.5]`` gives ``1234.5``; ``[1.777...]`` gives ``1.777``.
    """
    if not response:
        return None
    found = _BRACKET_RE.findall(response)
    if not found:
        return None
    text = found[-1].replace("\\", "").strip()
    if not text:
        return None
    token = text.split()[-1].rstrip(".")
    if re.fullmatch(r"[-+]?\d{1,3}(?:,\d{3})+(?:\.\d*)?", token):
        token = token.replace(",", "")
    return token or None


def extract_choice(response: str | None, letters: str = "ABCDEFG") -> str | None:
    """The choice letter (upper case) in the last ``[...]`` of ``response``; ``None`` when there is none."""
    if not response:
        return None
    found = _BRACKET_RE.findall(response)
    if not found:
        return None
    text = found[-1].strip()
    m = re.match(r"^\(?([A-Za-z])\)?(?:[.):\s]|$)", text)
    if m and m.group(1).upper() in letters.upper():
        return m.group(1).upper()
    return None


def parse_number(text: Any) -> Fraction | None:
    """Read ``text`` as a number (``-3.8e-05``, ``1,234``, ``41/3``); ``None`` when it is not one."""
    if text is None or isinstance(text, bool):
        return None
    if isinstance(text, (int, float)):
        try:
            return Fraction(text)
        except (ValueError, OverflowError):
            return None
    s = str(text).strip().replace(",", "")
    if _NUMBER_RE.match(s):
        return Fraction(s)
    m = _FRACTION_RE.match(s)
    if m and int(m.group(2)) != 0:
        return Fraction(int(m.group(1)), int(m.group(2)))
    return None


def _is_choice(gold: Any) -> bool:
    return isinstance(gold, str) and len(gold.strip()) == 1 and gold.strip().isalpha()


def resolve_scorer(scorer: str, gold: Any) -> str:
    """The concrete scorer (``choice``, ``numeric`` or ``exact``) for ``scorer`` and ``gold``."""
    if scorer not in SCORERS:
        raise InputError(f"unknown scorer {scorer!r}; use one of {', '.join(SCORERS)}")
    if scorer != "auto":
        return scorer
    if _is_choice(gold):
        return "choice"
    if parse_number(gold) is not None:
        return "numeric"
    return "exact"


def extract(response: str | None, scorer: str = "auto", gold: Any = None) -> str | None:
    """The prediction extracted from ``response`` for ``scorer`` (see :func:`score`)."""
    kind = resolve_scorer(scorer, gold)
    if kind == "choice":
        return extract_choice(response)
    return extract_bracket(response) if kind == "numeric" else _extract_text(response)


def _extract_text(response: str | None) -> str | None:
    if not response:
        return None
    found = _BRACKET_RE.findall(response)
    return " ".join(found[-1].split()) if found else None


def score(pred: Any, gold: Any, scorer: str = "auto", ndigits: int = 1) -> bool | None:
    """Is ``pred`` correct for ``gold``? ``None`` when there is no gold or no (valid) prediction.

    ``numeric`` compares ``round(float(x), ndigits)`` of both sides (ELAGENT Task 1:
    ``round(eval(pred), 1) == round(float(gold), 1)``).
    """
    if gold is None or pred is None:
        return None
    kind = resolve_scorer(scorer, gold)
    if kind == "choice":
        return str(pred).strip().upper() == str(gold).strip().upper()
    if kind == "numeric":
        p, g = parse_number(pred), parse_number(gold)
        if p is None:
            return None
        if g is None:
            raise InputError(f"gold {gold!r} is not a number; use --scorer exact or choice")
        return round(float(p), ndigits) == round(float(g), ndigits)
    return " ".join(str(pred).split()) == " ".join(str(gold).split())


@dataclass(frozen=True, repr=False)
class Accuracy(Result):
    """Accuracy over items: ``correct / n``; invalid (no answer) items count as wrong and are reported."""

    n: int
    correct: int
    invalid: int

    @property
    def accuracy(self) -> float:
        return self.correct / self.n if self.n else float("nan")

    @property
    def invalid_rate(self) -> float:
        return self.invalid / self.n if self.n else float("nan")

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "correct": self.correct, "invalid": self.invalid, "accuracy": self.accuracy,
                "invalid_rate": self.invalid_rate}

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame([self.to_dict()])

    def summary(self) -> str:
        return f"accuracy {self.correct}/{self.n} = {self.accuracy:.4f}; invalid {self.invalid}/{self.n}"


def accuracy(outcomes: Sequence[bool | None]) -> Accuracy:
    """Accuracy as the ELAGENT scripts report it: correct / all items, ``None`` = invalid (counted wrong);
    counted by :func:`mrcstats.stats.accuracy.summarize_frame` (``invalid="wrong"``)."""
    import pandas as pd

    from mrcstats.stats.accuracy import summarize_frame

    if not len(outcomes):
        return Accuracy(0, 0, 0)
    frame = pd.DataFrame({"correct": pd.array(list(outcomes), dtype="boolean")})
    row = summarize_frame(frame, [], cluster=None, invalid="wrong").to_frame().iloc[0]
    return Accuracy(int(row["n"]), int(row["correct"]), int(row["invalid"]))


def exact_match(preds: Sequence[str | None], golds: Sequence[str]) -> float:
    """Share of predictions equal to their gold after whitespace normalisation (Task 3 EM), in percent."""
    _same_length(preds, golds)
    if not golds:
        return float("nan")
    hits = sum(1 for p, g in zip(preds, golds) if p is not None and " ".join(p.split()) == " ".join(g.split()))
    return 100.0 * hits / len(golds)


def bleu(preds: Sequence[str | None], golds: Sequence[str]) -> float:
    """Corpus BLEU (0-100) of ``preds`` against one reference each, via ``sacrebleu.corpus_bleu``
    with its defaults (13a tokenisation, exponential smoothing) -- matches ``sacrebleu`` on the CLI."""
    _same_length(preds, golds)
    import sacrebleu

    return float(sacrebleu.corpus_bleu([p or "" for p in preds], [list(golds)]).score)


def _default_is_morph(token: str) -> bool:
    """Words the Table 2 morphological rules mark: ``S_``/``P_`` prefixes and ``_-``/``_+`` suffixes."""
    return token.startswith(("S_", "P_")) or token.endswith(("_-", "_+"))


@dataclass(frozen=True, repr=False)
class MorphF1(Result):
    """Micro-averaged precision, recall and F1 over marked words (multisets per sentence)."""

    tp: int
    n_pred: int
    n_gold: int

    @property
    def precision(self) -> float:
        return self.tp / self.n_pred if self.n_pred else float("nan")

    @property
    def recall(self) -> float:
        return self.tp / self.n_gold if self.n_gold else float("nan")

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        if math.isnan(p) or math.isnan(r):
            return float("nan")
        return 2 * p * r / (p + r) if p + r else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"tp": self.tp, "n_pred": self.n_pred, "n_gold": self.n_gold, "precision": self.precision,
                "recall": self.recall, "f1": self.f1}

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame([self.to_dict()])

    def summary(self) -> str:
        return f"morph P {self.precision:.4f} R {self.recall:.4f} F1 {self.f1:.4f} ({self.tp} matched)"


def morph_f1(preds: Sequence[str | None], golds: Sequence[str],
             is_morph: Callable[[str], bool] = _default_is_morph) -> MorphF1:
    """Morph F1 (seed 004 §4.3): precision and recall of the correctly spelled words that the
    morphological rules apply to. Per sentence, the marked words (``is_morph``) of the prediction
    and of the gold are compared as multisets; counts are summed over sentences (micro average).
    Repeated adjectives (rule M3) can be scored by passing an ``is_morph`` that recognises them."""
    _same_length(preds, golds)
    tp = n_pred = n_gold = 0
    for p, g in zip(preds, golds):
        pc = Counter(t for t in (p or "").split() if is_morph(t))
        gc = Counter(t for t in g.split() if is_morph(t))
        tp += sum((pc & gc).values())
        n_pred += sum(pc.values())
        n_gold += sum(gc.values())
    return MorphF1(tp, n_pred, n_gold)


def _same_length(preds: Sequence, golds: Sequence) -> None:
    if len(preds) != len(golds):
        raise InputError(f"{len(preds)} predictions but {len(golds)} gold answers; give one prediction per item")


METRICS = ("accuracy", "exact", "bleu", "morph")


def score_log(log, metrics: Sequence[str] = ("accuracy",), by: Sequence[str] = ("model", "condition")):
    """Score a canonical log (``mrcstats.io.read_log``) per group: a DataFrame with one row per
    group of ``by`` and the columns of each metric.

    ``accuracy``: n, correct, invalid (``correct`` is <NA>), accuracy (= correct / n, invalid counted
    wrong, as the ELAGENT scripts do) and invalid_rate; ``exact``: exact match in percent of ``pred``
    against ``gold``; ``bleu``: corpus BLEU of ``pred`` against ``gold``; ``morph``: morph precision,
    recall and F1. Rows of a query log with ``status == "failed"`` (no answer from the endpoint)
    are left out and counted in ``failed``.
    """
    import pandas as pd

    bad = [m for m in metrics if m not in METRICS]
    if bad:
        raise InputError(f"unknown metric(s) {bad}; choose from {', '.join(METRICS)}")
    from mrcstats.io.schema import check_grouping

    by = check_grouping(by, log.columns)
    rows = []
    groups = log.groupby(list(by), dropna=False, sort=True) if by else [((), log)]
    for key, g in groups:
        key = key if isinstance(key, tuple) else (key,)
        row: dict[str, Any] = dict(zip(by, key))
        if "status" in g:  # query-log rows the endpoint never answered are not model answers
            sent_failed = g["status"].astype("string").eq("failed").fillna(False).to_numpy(dtype=bool)
            row["failed"] = int(sent_failed.sum())
            g = g[~sent_failed]
        preds = [None if pd.isna(p) else str(p) for p in g["pred"]] if "pred" in g else [None] * len(g)
        golds = ["" if pd.isna(x) else str(x) for x in g["gold"]] if "gold" in g else [""] * len(g)
        if "accuracy" in metrics:
            acc = accuracy([None if pd.isna(c) else bool(c) for c in g["correct"]])
            row.update(acc.to_dict())
        if "exact" in metrics:
            row["exact_match"] = exact_match(preds, golds)
        if "bleu" in metrics:
            row["bleu"] = bleu(preds, golds)
        if "morph" in metrics:
            m = morph_f1(preds, golds)
            row.update({"morph_precision": m.precision, "morph_recall": m.recall, "morph_f1": m.f1})
        rows.append(row)
    return pd.DataFrame(rows)
