"""A demo response log with known truth (for ``mrcstats demo``, docs and recovery tests).

:func:`simulate_log` draws a canonical log for three models answering
multiple-choice questions about generated passages (clusters), under the four
masking conditions of MskQA (regular / partial / strict / lenient) at masking
rates 0, 5, ..., 100 percent, with several trials. Correctness follows a
binomial GLMM with a random intercept per passage::

    logit P(correct) = b0 + b_LLM[m] + (b_tok + b_tok:LLM[m]) * scaled_tok[p] + u[p]
                       + g[condition] * masking_rate / 100,        u[p] ~ N(0, sd_passage^2)

so the rows with ``masking_rate == 0`` follow exactly ``correct ~ scaled_tok * LLM +
(1 | passage)`` (lme4 notation; in the log, ``LLM`` is ``model`` and ``passage`` is
``cluster``), and accuracy falls with the masking rate at a condition-specific
slope ``g``. ``scaled_tok`` is the passage's token count (whitespace tokens of
``passage``) centred and scaled by its sample SD over passages (R ``scale()``); it
is stored in the log beside ``n_tokens``. A small share of answers
(``invalid_rate``) is made invalid at random (``correct`` <NA>, ``pred`` <NA>).

:func:`simulate_log` returns a :class:`SimulatedLog`: the canonical log (``.log``) and the truth
(``.truth``, an explicit field, not DataFrame metadata): ``formula``, ``fixef`` (lme4-style names,
reference model = first in sorted order), ``sd_passage``, ``masking_slope``
(per condition, logit change from 0 to 100 percent), ``u`` (the drawn passage
effects) and the generating arguments. Deterministic given ``seed``.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from mrcstats._repr import Result
from mrcstats._seeds import rng as seed_rng
from mrcstats.errors import InputError
from mrcstats.models.predict import plogis

DEFAULT_MODELS: tuple[str, ...] = ("alpha-7b", "beta-13b", "gamma-70b")
DEFAULT_CONDITIONS: tuple[str, ...] = ("regular", "partial", "strict", "lenient")
DEFAULT_RATES: tuple[int, ...] = tuple(range(0, 101, 5))

#: default effects: model effects and token-slope interactions for the 2nd, 3rd, ... model
DEFAULT_BETA: dict[str, Any] = {"intercept": 1.0, "tok": -0.4, "llm": (0.6, 1.2), "tok_llm": (0.15, 0.3)}
DEFAULT_MASKING_SLOPE: dict[str, float] = {"regular": -3.0, "partial": -2.0, "strict": -4.0, "lenient": -1.5}

_NOUNS = ("river", "council", "farmer", "engine", "museum", "letter", "forest", "doctor", "harbor", "village",
          "market", "teacher", "storm", "bridge", "garden", "soldier", "library", "island", "painter", "factory")
_VERBS = ("visited", "repaired", "described", "protected", "opened", "measured", "crossed", "painted", "built",
          "studied", "moved", "closed", "found", "carried", "planned")
_ADJS = ("old", "quiet", "northern", "busy", "small", "famous", "wooden", "distant", "bright", "local")
_WH = ("What", "Which", "Who", "Why", "How", "When", "Where")
_QUESTION = {
    "What": "What did the {adj} {noun} {verb}?",
    "Which": "Which {noun} was {verb} first?",
    "Who": "Who {verb} the {adj} {noun}?",
    "Why": "Why was the {noun} {verb}?",
    "How": "How was the {adj} {noun} {verb}?",
    "When": "When was the {noun} {verb}?",
    "Where": "Where was the {adj} {noun} {verb}?",
}


def take_strings(values: Sequence[str], idx: np.ndarray) -> pd.Series:
    """``values[idx]`` as a ``string`` Series, gathered in Arrow (long repeated texts stay fast)."""
    import pyarrow as pa

    arr = pa.array(list(values), type=pa.large_string()).take(pa.array(idx))
    return pd.Series(pd.arrays.ArrowStringArray(arr))


def _passage(rng: np.random.Generator, n_tokens: int) -> str:
    """``n_tokens`` whitespace tokens of simple English sentences."""
    words: list[str] = []
    while len(words) < n_tokens:
        pick = lambda pool: str(rng.choice(pool))
        sent = ["The", pick(_ADJS), pick(_NOUNS), pick(_VERBS), "the", pick(_NOUNS)]
        if rng.random() < 0.6:
            sent += ["near", "the", pick(_ADJS), pick(_NOUNS)]
        if rng.random() < 0.4:
            sent += ["in", "the", pick(_NOUNS)]
        sent = sent[: n_tokens - len(words)]
        sent[-1] += "."
        words.extend(sent)
    return " ".join(words)


def simulate_log(seed: int = 0, *, models: Sequence[str] = DEFAULT_MODELS, n_passages: int = 12,
                 questions_per_passage: int = 3, conditions: Sequence[str] = DEFAULT_CONDITIONS,
                 masking_rates: Sequence[float] = DEFAULT_RATES, trials: int = 2,
                 beta: dict[str, Any] | None = None, sd_passage: float = 0.8,
                 masking_slope: dict[str, float] | None = None, invalid_rate: float = 0.02,
                 tokens: tuple[int, int] = (40, 260)) -> SimulatedLog:
    """Simulate a canonical log with a known GLMM truth (see the module docstring).

    The default (3 models x 12 passages x 3 questions x 4 conditions x 21 rates x 2
    trials = 18,144 rows) takes well under a second.
    """
    models = list(models)
    conditions = list(conditions)
    rates = np.asarray(list(masking_rates), dtype=float)
    if len(models) < 1 or n_passages < 2 or questions_per_passage < 1 or trials < 1 or len(rates) < 1:
        raise InputError("simulate_log needs >= 1 model, >= 2 passages, >= 1 question, trial and masking rate")
    if not 0 <= invalid_rate < 1:
        raise InputError(f"invalid_rate must be in [0, 1), got {invalid_rate}")
    if len(set(models)) != len(models):
        raise InputError("model names must be distinct")
    b = {**DEFAULT_BETA, **(beta or {})}
    slopes = {**DEFAULT_MASKING_SLOPE, **(masking_slope or {})}
    missing = [c for c in conditions if c not in slopes]
    if missing:
        raise InputError(f"no masking slope for condition(s) {missing}; pass masking_slope={{name: value}}")
    levels = sorted(models)  # lme4 orders factor levels alphabetically; the first is the reference
    n_extra = len(levels) - 1
    llm = list(b["llm"])[:n_extra] + [0.0] * max(0, n_extra - len(b["llm"]))
    tok_llm = list(b["tok_llm"])[:n_extra] + [0.0] * max(0, n_extra - len(b["tok_llm"]))
    b_m = np.array([0.0, *llm])
    bt_m = np.array([0.0, *tok_llm])

    rng = seed_rng(seed)
    n_tok = rng.integers(tokens[0], tokens[1] + 1, size=n_passages)
    passages = [_passage(rng, int(k)) for k in n_tok]
    n_tok = np.array([len(p.split()) for p in passages])
    z = (n_tok - n_tok.mean()) / n_tok.std(ddof=1)
    u = rng.normal(0.0, sd_passage, size=n_passages)

    n_items = n_passages * questions_per_passage
    item_pass = np.repeat(np.arange(n_passages), questions_per_passage)
    wh = rng.choice(len(_WH), size=n_items)
    gold_idx = rng.integers(0, 4, size=n_items)
    questions, options = [], []
    for i in range(n_items):
        w = _WH[wh[i]]
        questions.append(_QUESTION[w].format(adj=rng.choice(_ADJS), noun=rng.choice(_NOUNS),
                                             verb=rng.choice(_VERBS)))
        opts = [f"the {rng.choice(_ADJS)} {rng.choice(_NOUNS)}" for _ in range(4)]
        options.append(repr(opts))

    M, I, C, R, T = len(models), n_items, len(conditions), len(rates), trials
    grid = np.indices((M, I, C, R, T)).reshape(5, -1)
    m_i, it_i, c_i, r_i, t_i = grid
    lvl = np.array([levels.index(m) for m in models])[m_i]
    p_i = item_pass[it_i]
    g = np.array([slopes[c] for c in conditions])[c_i]
    eta = (b["intercept"] + b_m[lvl] + (b["tok"] + bt_m[lvl]) * z[p_i] + u[p_i] + g * rates[r_i] / 100.0)
    prob = plogis(eta)
    y = rng.random(eta.size) < prob
    invalid = rng.random(eta.size) < invalid_rate
    letters = np.array(list("ABCD"))
    gold = gold_idx[it_i]
    wrong = (gold + rng.integers(1, 4, size=eta.size)) % 4
    pred_idx = np.where(y, gold, wrong)
    pred = letters[pred_idx].astype(object)
    pred[invalid] = None
    response = np.char.add(np.char.add("The answer is [", letters[pred_idx]), "].").astype(object)
    response[invalid] = "I cannot tell from the masked text."
    correct = pd.array(y, dtype="boolean")
    correct[invalid] = pd.NA

    item_names = [f"p{p:02d}q{q}" for p in range(n_passages) for q in range(questions_per_passage)]
    pass_names = [f"p{p:02d}" for p in range(n_passages)]
    df = pd.DataFrame({
        "model": take_strings(models, m_i),
        "item": take_strings(item_names, it_i),
        "cluster": take_strings(pass_names, p_i),
        "trial": t_i.astype("int64"),
        "condition": take_strings(conditions, c_i),
        "masking_rate": rates[r_i],
        "correct": correct,
        "response": pd.array(response, dtype="string"),
        "gold": take_strings(list("ABCD"), gold),
        "pred": pd.array(pred, dtype="string"),
        "passage": take_strings(passages, p_i),
        "question": take_strings(questions, it_i),
        "options": take_strings(options, it_i),
        "n_tokens": n_tok[p_i].astype("int64"),
        "scaled_tok": z[p_i],
        "wh_word": take_strings([_WH[k] for k in wh], it_i),
    })
    from mrcstats.io.schema import validate_log

    log = validate_log(df)
    fixef = {"(Intercept)": b["intercept"], "scaled_tok": b["tok"]}
    for lv, v in zip(levels[1:], llm):
        fixef[f"model{lv}"] = float(v)
    for lv, v in zip(levels[1:], tok_llm):
        fixef[f"scaled_tok:model{lv}"] = float(v)
    truth = {
        "formula": "correct ~ scaled_tok * model + (1 | cluster)",
        "formula_paper": "correct ~ scaled_tok * LLM + (1 | passage)",
        "applies_to": "rows with masking_rate == 0 (all rows add masking_slope[condition] * masking_rate / 100)",
        "fixef": fixef,
        "sd_passage": float(sd_passage),
        "masking_slope": {c: float(slopes[c]) for c in conditions},
        "u": {pass_names[k]: float(u[k]) for k in range(n_passages)},
        "reference_model": levels[0],
        "invalid_rate": float(invalid_rate),
        "seed": int(seed),
    }
    return SimulatedLog(log, truth)


@dataclass(frozen=True, repr=False)
class SimulatedLog(Result):
    """A simulated canonical log and the truth that generated it (module docstring)."""

    log: pd.DataFrame = field(repr=False)
    truth: Mapping[str, Any]

    def to_frame(self) -> pd.DataFrame:
        return self.log.copy()

    def to_dict(self) -> dict[str, Any]:
        """The truth without the per-passage effects ``u``, and the number of rows."""
        return {"rows": len(self.log), **{k: v for k, v in self.truth.items() if k != "u"}}

    def summary(self) -> str:
        t = self.truth
        return (f"simulated log: {len(self.log):,} rows, seed {t['seed']}; truth {t['formula']} with "
                f"passage SD {t['sd_passage']}")


def true_accuracy(sim: SimulatedLog) -> np.ndarray:
    """The true P(correct) of every row of a :func:`simulate_log` log (before invalid answers)."""
    if not isinstance(sim, SimulatedLog):
        raise InputError("true_accuracy needs the SimulatedLog that simulate_log returned (log and truth)")
    log, t = sim.log, sim.truth
    fx = t["fixef"]
    b_m = np.array([fx.get(f"model{m}", 0.0) for m in log["model"]], dtype=float)
    bt_m = np.array([fx.get(f"scaled_tok:model{m}", 0.0) for m in log["model"]], dtype=float)
    z = log["scaled_tok"].to_numpy(dtype=float)
    u = log["cluster"].map(t["u"]).to_numpy(dtype=float)
    g = log["condition"].map(t["masking_slope"]).to_numpy(dtype=float)
    mr = log["masking_rate"].to_numpy(dtype=float, na_value=0.0)
    eta = fx["(Intercept)"] + b_m + (fx["scaled_tok"] + bt_m) * z + u + g * mr / 100.0
    return plogis(eta)
