"""Abbreviations a report may use, and the paragraph that defines those it does use before their first use.

A report opens with "Abbreviations: ..." listing every abbreviation of :data:`GLOSSARY` that appears anywhere in
its text (headings, methods, captions, table cells and notes, figure labels), so each is defined before it is
used; tests/report/test_reviewer_check.py checks the rendered PDF (every all-capitals token is defined there,
defined in place as "words (ABBR)", or a name in :data:`NAMES`).
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

#: abbreviation -> what it stands for (as the Abbreviations paragraph prints it)
GLOSSARY: dict[str, str] = {
    "AIC": "Akaike information criterion", "BIC": "Bayesian information criterion",
    "CI": "confidence interval", "CR1": "cluster-robust variance with the small-sample factor G/(G − 1)",
    "DIF": "differential item functioning", "EA": "effective accuracy (seed 000)",
    "GLMM": "generalized linear mixed model", "GVIF": "generalized variance inflation factor",
    "IRLS": "iteratively reweighted least squares", "IRT": "item response theory",
    "KI": "knowledge independence (seed 000)", "KL": "Kullback–Leibler divergence",
    "LOESS": "locally estimated scatterplot smoothing", "LRT": "likelihood-ratio test",
    "MAE": "mean absolute error", "MC": "Monte Carlo", "MR": "masking rate (percent of the passage masked)",
    "NA": "normalised accuracy Acc_r / Acc_0 (seed 000)", "SD": "standard deviation", "SE": "standard error",
    "MLE": "maximum-likelihood estimate", "PIRLS": "penalised iteratively reweighted least squares",
    "RX": "the fixed-effect block R_X of lme4's Cholesky factor", "OR": "odds ratio",
    "LLM": "large language model", "FP": "false positive",
    "NT": "a predicate that is not transitive (seed 004)", "NS": "a predicate that is not symmetrical (seed 004)",
    "WH": "wh-word (what, when, which, why, where, who, how)", "TAU": "Kendall's τ",
    "CLT": "central limit theorem", "2PL": "two-parameter logistic item response model",
    "1PL": "one-parameter logistic item response model",
}

#: all-capitals tokens that are names, not abbreviations to define (software, formats, data sets, test labels)
NAMES: frozenset[str] = frozenset({
    "R", "CSV", "PDF", "JSON", "HTML", "API", "RACE", "MSKQA", "MSKQA's", "RQA", "UQA", "AQA", "MMLU", "ID",
    "I", "II", "III", "IV", "V", "X", "Y", "N", "P", "B", "G", "K", "T", "H", "TRUE", "FALSE", "NULL", "AGQ",
    "OK", "NO", "YES", "UTC", "GPT", "LME4", "DOI", "URL", "BFGS", "TIGER", "AI", "NLTK", "ELAGENT"})

_TOKEN = re.compile(r"(?<![\w/.])([A-Z][A-Z0-9]{1,})(?![\w])")


def tokens(text: str) -> list[str]:
    """The all-capitals tokens (two or more characters) of ``text``, in order."""
    return _TOKEN.findall(text)


def used(texts: Iterable[str]) -> list[str]:
    """The glossary abbreviations that occur in ``texts``, sorted."""
    seen = {t for s in texts for t in tokens(str(s))}
    return sorted(a for a in GLOSSARY if a in seen)


def paragraph(abbrevs: Iterable[str]) -> str:
    """``"Abbreviations: CI, confidence interval; SD, standard deviation."``"""
    items = [f"{a}, {GLOSSARY[a]}" for a in abbrevs]
    return ("Abbreviations: " + "; ".join(items) + ".") if items else ""


def output_texts(outputs: Iterable[Any]) -> list[str]:
    """Every text an analysis output shows: titles, methods, paragraphs, notes, captions, table cells and
    figure labels (figure text is read from the matplotlib artists)."""
    out: list[str] = []

    def table_texts(t: Any) -> None:
        out.extend([str(getattr(t, "caption", "")), *map(str, getattr(t, "notes", ()))])
        data = getattr(t, "data", None)
        if data is not None:
            out.extend(map(str, data.columns))
            for c in data.columns:
                if data[c].dtype == object:
                    out.extend(map(str, data[c].tolist()))

    def fig_texts(fig: Any) -> None:
        if hasattr(fig, "findobj"):      # a matplotlib figure: its titles, labels, ticks and legends
            from matplotlib.text import Text

            out.extend(t.get_text() for t in fig.findobj(Text))

    for o in outputs:
        for sec in (o, *getattr(o, "sections", ())):
            out.append(str(sec.title))
            out.extend(map(str, sec.methods))
            out.extend(map(str, getattr(sec, "test_methods", {}).values()))
            for op, args, _kw in sec.blocks:
                if op == "table":
                    table_texts(args[0])
                elif op == "figure":
                    fig_texts(args[0])
                    out.append(str(args[2]))
                else:
                    out.append(str(args[0]))
    return out
