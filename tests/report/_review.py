"""A referee's check of a rendered report: the text (pdftotext) and the tables written beside the PDF.

``review(pdf)`` returns the problems found (an empty list when the report passes):

* no raw console output (lme4's summary header, R's significance codes);
* no "(s)" plurals;
* every all-capitals abbreviation defined before or at its first use: in the report's "Abbreviations:"
  paragraph, in place as "words (ABBR)", or a name (:data:`mrcstats.report.glossary.NAMES`);
* every accuracy interval inside [0, 1] (percent tables: [0, 100]);
* each accuracy cell's interval the same wherever it appears (tables keyed by the row label and the accuracy).
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pandas as pd

from mrcstats.report.glossary import NAMES, tokens

CONSOLE = ("Generalized linear mixed model fit by", "Scaled residuals:", "Signif. codes", "Number of obs:",
           "REML criterion", "Linear mixed model fit by")


def pdf_text(pdf: Path) -> str:
    return subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True,
                          check=True).stdout


def review_text(text: str) -> list[str]:
    problems = [f"console output: {m!r}" for m in CONSOLE if m in text]
    problems += [f"'(s)' plural: {m.group(0)!r}" for m in re.finditer(r"\w+\(s\)", text)]
    flat = re.sub(r"-\n", "", re.sub(r"\s+", " ", text))
    ab = re.search(r"Abbreviations: (.*?)\.(?: [A-Z]|$)", flat)
    defined: dict[str, int] = {}
    if ab:
        for part in ab.group(1).split("; "):
            defined[part.split(",")[0].strip()] = ab.start()
    for m in re.finditer(r"\(([A-Z][A-Z0-9]+)\)", flat):      # defined in place: "words (ABBR)"
        defined.setdefault(m.group(1), m.start())
    first: dict[str, int] = {}
    for m in re.finditer(r"(?<![\w/.])([A-Z][A-Z0-9]{1,})(?![\w])", flat):
        first.setdefault(m.group(1), m.start())
    for tok, pos in first.items():
        if tok in NAMES or not tokens(tok):
            continue
        if tok not in defined:
            problems.append(f"abbreviation {tok!r} is never defined (first use: {flat[max(0, pos - 40):pos + 40]!r})")
        elif defined[tok] > pos:
            problems.append(f"abbreviation {tok!r} is used before it is defined: {flat[max(0, pos - 40):pos + 40]!r}")
    return problems


def _intervals(csv: Path) -> list[tuple[str, str, float, float, float]]:
    """(table, row label, accuracy, low, high) as proportions from an accuracy table's CSV."""
    t = pd.read_csv(csv)
    name, rows = csv.stem, []
    if {"accuracy", "ci_low", "ci_high"} <= set(t.columns):                    # summary: raw proportions
        label_cols = [c for c in t.columns if c not in ("n", "correct", "accuracy", "accuracy_valid", "invalid",
                                                        "ci_low", "ci_high", "ci_method", "ci_df", "se_cluster",
                                                        "clusters", "n_shared", "accuracy_shared")]
        for _, r in t.iterrows():
            rows.append((name, " / ".join(str(r[c]) for c in label_cols), r["accuracy"], r["ci_low"], r["ci_high"]))
    elif {"Accuracy (%)", "Model"} <= set(t.columns):                          # compare ranking, percent
        lo = next(c for c in t.columns if c.endswith("CI low"))
        hi = next(c for c in t.columns if c.endswith("CI high"))
        for _, r in t.iterrows():
            rows.append((name, str(r["Model"]), r["Accuracy (%)"] / 100, r[lo] / 100, r[hi] / 100))
    else:                                                                       # accuracy grid: "<col> low/high"
        for c in t.columns:
            if f"{c} low" in t.columns and f"{c} high" in t.columns:
                for _, r in t.iterrows():
                    rows.append((name, f"{r.iloc[0]} / {c}", r[c] / 100, r[f"{c} low"] / 100, r[f"{c} high"] / 100))
    return rows


def review_tables(tables: Path) -> list[str]:
    problems, seen = [], {}
    for csv in sorted(tables.glob("*.csv")):
        if not any(k in csv.stem for k in ("summary", "compare_ranking", "accuracy")):
            continue
        for name, label, acc, lo, hi in _intervals(csv):
            if not (-1e-12 <= lo <= acc + 1e-9 and acc - 1e-9 <= hi <= 1 + 1e-12):
                problems.append(f"{name}: {label}: interval [{lo}, {hi}] of {acc} leaves [0, 1] or misses it")
            key = (label.split(" / ")[-1] if "compare" in name else label, round(acc, 9))
            if key in seen and (abs(seen[key][1] - lo) > 1e-9 or abs(seen[key][2] - hi) > 1e-9):
                problems.append(f"{label} (accuracy {acc}): [{lo}, {hi}] in {name} but "
                                f"[{seen[key][1]}, {seen[key][2]}] in {seen[key][0]}")
            seen.setdefault(key, (name, lo, hi))
    return problems


def review(pdf: Path) -> list[str]:
    return review_text(pdf_text(pdf)) + review_tables(pdf.parent / f"{pdf.stem}_tables")
