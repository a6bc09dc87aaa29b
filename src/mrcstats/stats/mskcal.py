"""MskCal: numeric answers extracted from free-text worked solutions, scored per masking rate.

Reference: Sato & Matsuzaki (seed ``000_c27602a462156830``), section 4.4, Table 1
and Appendix C (Table 2). A model fills in a guided accounting simulation
(``../shared/data/mskqa/input/MskCal.txt``) whose guiding sentences are masked;
for each named variable (NR, P, X, N, Y, L, E', D') we extract the value the
answer gives and compare it with the true value.

Per variable x model x masking rate, over trials:

* ``nar``            missing-answer rate: share of trials whose answer gives no value for the variable;
* ``mean_rel_error`` mean of ``|v - v*| / |v*|`` over the trials that gave a value;
* ``trimmed_mean``   the same, trimmed (``trim`` = 0.1 cuts 10 % at each end, as R ``mean(x, trim = 0.1)``);
* ``success_rate``   share of the answered trials with relative error below ``tol`` (1 % by default);
  conditional on an answer, as the seed's Table 1 ("conditional success rates when responses were obtained").

The extractor (:func:`extract_values`) reads "62,500 yen", "1,980.00 million yen",
"1.98 billion", "[1,389,960,000]", "62.5 thousand yen", LaTeX (``\\[ P = \\frac{E}{B+C}
\\approx 62{,}500 \\text{ yen} \\]``, ``E^{\\prime}``) and markdown (``**P (price):** 62,500``,
tables). For each variable it keeps the value of the *last* line that assigns one
(``VAR = ... = value``, ``label (VAR): value``), so a closing summary wins over the
working; a formula with no number after its last ``=`` is not a value.
"""
from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from mrcstats._repr import Result
from mrcstats._words import plural
from mrcstats.errors import InputError
from mrcstats.stats.masking import fmt_or_na, mr_key, summary_text

__all__ = ["GROUND_TRUTH", "TABLE1_VARIABLES", "MskcalResult", "extract_value", "extract_values", "mskcal", "read_mskcal_outputs",
           "relative_error"]

#: True values of the MskCal problem (issue 7; ``input/MskCal.txt``): NR = A - C, P = E / (B + C), ...
GROUND_TRUTH: dict[str, float] = {
    "NR": 11_880.0,
    "P": 62_500.0,
    "X": 95_040_000.0,
    "N": 23_760.0,
    "Y": 495_000_000.0,
    "L": 590_040_000.0,
    "E'": 1_389_960_000.0,
    "D'": 2_181_960_000.0,
}

#: the five variables the seed's Table 1 averages over
TABLE1_VARIABLES = ("P", "N", "Y", "E'", "D'")

_MULT = {"thousand": 1e3, "k": 1e3, "million": 1e6, "mn": 1e6, "mil": 1e6, "m": 1e6,
         "billion": 1e9, "bn": 1e9, "b": 1e9, "trillion": 1e12}
_NUM = re.compile(
    r"(?<![\w.])(?P<sign>[-\u2212])?(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
    r"(?:\s*(?P<mult>thousand|million|billion|trillion|mn|bn|mil)\b|(?P<short>[kKmMbB])\b(?!\s*[-+*/×÷(]))?"
    r"(?![\w']|\.\d)",
)
#: sentence breaks inside a line ("... = 11,880. The sales price ..."), not after abbreviations
_SENTENCE = re.compile(r"(?<!approx)(?<!\bi\.e)(?<!\be\.g)(?<!\bvs)(?<!\betc)(?<!\bno)\.\s+(?=\S)")
_APPROX = re.compile(r"≈|≃|~|\bapprox(?:imately|\.)?\s*|\babout\b|\broughly\b|\baround\b|\bnearly\b",
                     re.IGNORECASE)
_PREFIX_OK = re.compile(r"^[\s\[\](){}*_$¥￥#>:|\\-]*(?:(?:JPY|yen|USD|Yen)\s*)?[\s\[\]({*_$¥￥]*$")
_FORMULA_AFTER = re.compile(r"[-+*/×÷^]\s*(?:\d|[A-Z](?![a-z])|\(|\\)|\s[-+*/×÷]\s+\S")


def _normalize(text: str) -> str:
    """Unify primes, strip LaTeX and markdown decoration; keep line structure."""
    t = text.replace("\r\n", "\n")
    t = re.sub(r"\^\s*\{\s*(?:\\prime|')\s*\}|\^\s*\\prime|\\prime|\^'", "'", t)
    t = re.sub(r"[’′ʼ‘´]", "'", t).replace("`", " ")
    t = re.sub(r"\\(?:text|mathrm|textbf|mathbf|operatorname|boxed|textit)\s*\{([^{}]*)\}", r" \1 ", t)
    t = t.replace("{,}", ",")
    t = re.sub(r"\\(?:approx|simeq|sim)\b", "≈", t)
    t = re.sub(r"\\(?:times|cdot)\b", "×", t)
    t = re.sub(r"\\div\b", "÷", t)
    t = re.sub(r"\\[,;:! ]|\\quad|\\qquad|\\left|\\right|\\\[|\\\]|\\\(|\\\)", " ", t)
    t = re.sub(r"\*\*|__|\$", "", t)
    t = t.replace("＝", "=").replace("：", ":")
    return t


def _parse_number(m: re.Match[str]) -> float:
    x = float(m.group("num").replace(",", ""))
    mult = m.group("mult") or m.group("short")
    if mult:
        x *= _MULT[mult.lower()]
    return -x if m.group("sign") else x


def _pure_value(segment: str) -> float | None:
    """The number a right-hand side states, or None when it is a formula or has no number."""
    parts = _APPROX.split(segment)
    seg = parts[-1] if parts[-1].strip() or len(parts) == 1 else parts[-2]
    m = _NUM.search(seg)
    if m is None:
        return None
    if not _PREFIX_OK.match(seg[: m.start()]):
        return None
    rest = seg[m.end():]
    stop = re.search(r"[()\[\];,]|\.\s|\.$|\bor\b|\bi\.e\.", rest)
    tail = rest[: stop.start()] if stop else rest
    if _FORMULA_AFTER.search(tail) or "=" in tail:
        return None
    return _parse_number(m)


def _name_pattern(name: str) -> re.Pattern[str]:
    n = name.replace("′", "'").replace("’", "'")
    return re.compile(r"(?<![\w'])" + re.escape(n) + r"(?![\w'])")


def _assignment(line: str, pats: Mapping[str, re.Pattern[str]]) -> tuple[str, list[str]] | None:
    """The variable a clause assigns and its candidate right-hand sides, last first.

    The variable must stand before the clause's first ``=`` (or ``≈``; before the
    first ``:`` when there is no ``=``), so ``X = 8,000 * NR = ...`` assigns X, not
    NR. Candidates are the segments after each later ``=``, then the text after a
    ``:`` that follows the variable (``NR (units): 11,880 (A - C = ...)``).
    """
    s = line.strip().replace("≈", "=").replace("≃", "=")
    if s.startswith("|") and s.count("|") >= 2:
        cells = [c.strip() for c in s.strip("|").split("|")]
        hits = [(m.start(), n) for n, p in pats.items() for m in p.finditer(cells[0])] if cells else []
        return (max(hits)[1], [" ".join(cells[1:])] + cells[1:][::-1]) if hits else None
    eq = s.find("=")
    cut = eq if eq >= 0 else s.find(":")
    if cut < 0:
        return None
    hits = [(m.start(), m.end(), n) for n, p in pats.items() for m in p.finditer(s[:cut])]
    if not hits:
        return None
    _, end, name = max(hits)
    segs = s[end:].split("=")
    cands = segs[1:][::-1]
    if ":" in segs[0]:
        cands.append(segs[0].split(":", 1)[1])
    return name, cands


def extract_values(text: Any, names: Iterable[str] = tuple(GROUND_TRUTH)) -> dict[str, float | None]:
    """Extract the numeric value of each named variable from a free-text answer.

    Parameters
    ----------
    text : the model's answer (None / NaN = no answer: every value None).
    names : variable names (``E'`` also matches ``E′``, ``E’`` and LaTeX ``E^{\\prime}``).

    Returns
    -------
    ``{name: value or None}``; the value of the last line that assigns one.

    Examples
    --------
    >>> extract_values("- **P (sales price):** 62,500 yen\\nE' = E - L = 1,389.96 million yen", ["P", "E'"])
    {'P': 62500.0, "E'": 1389960000.0}
    """
    names = list(names)
    out: dict[str, float | None] = {n: None for n in names}
    if text is None or (isinstance(text, float) and math.isnan(text)) or text is pd.NA:
        return out
    pats = {n: _name_pattern(n) for n in names}
    clauses = (c for line in _normalize(str(text)).split("\n") for c in _SENTENCE.split(line))
    for line in clauses:
        cand = _assignment(line, pats)
        if cand is None:
            continue
        name, segs = cand
        for seg in segs:
            v = _pure_value(seg)
            if v is not None:
                out[name] = v
                break
    return out


def extract_value(text: Any, name: str) -> float | None:
    """The value of one variable in ``text`` (see :func:`extract_values`)."""
    return extract_values(text, [name])[name]


def relative_error(value: Any, truth: float) -> np.ndarray:
    """``|value - truth| / |truth|`` (NaN where value is missing)."""
    v = np.asarray(value, dtype=float)
    return np.abs(v - truth) / abs(truth)


@dataclass(frozen=True, repr=False)
class MskcalResult(Result):
    """MskCal metrics per variable x model x masking rate, and the extracted values.

    ``table``: variable, model, masking_rate, truth, n_trials, n_answered, nar,
    mean_rel_error, trimmed_mean, success_rate. ``values``: one row per model x
    masking rate x trial x variable with the extracted ``value`` and ``rel_error``.
    """

    table: pd.DataFrame
    values: pd.DataFrame
    tol: float
    trim: float
    notes: tuple[str, ...] = ()

    def to_frame(self) -> pd.DataFrame:
        return self.table.copy()

    def to_dict(self) -> dict[str, Any]:
        """``{"variables": {name: {MR: {"nar", "mean_rel_error", "trimmed_mean", "success_rate"}}}}``.

        With several models the masking-rate level is nested under each model
        only if you call :meth:`to_dict_by_model`; this form needs one model.
        """
        models = self.table["model"].unique()
        if len(models) > 1:
            raise InputError(f"MskCal outputs hold {len(models)} models ({', '.join(map(str, models))}); "
                             "choose one (mskcal(..., model=NAME), CLI --model NAME)")
        out: dict[str, dict[str, dict[str, float]]] = {}
        for r in self.table.itertuples(index=False):
            out.setdefault(r.variable, {})[mr_key(r.masking_rate)] = {
                "nar": r.nar, "mean_rel_error": r.mean_rel_error,
                "trimmed_mean": r.trimmed_mean, "success_rate": r.success_rate}
        return {"variables": out}

    def averages(self, variables: Sequence[str] = TABLE1_VARIABLES) -> pd.DataFrame:
        """Per model x masking rate, the mean over ``variables`` of each metric (seed Table 1 "ave.").

        The seed's Table 1 shows ``1 - mean_rel_error`` and ``1 - trimmed_mean``
        averaged over P, N, Y, E', D', and the success rate among answered trials.
        """
        t = self.table[self.table["variable"].isin(list(variables))]
        cols = ["nar", "mean_rel_error", "trimmed_mean", "success_rate"]
        return t.groupby(["model", "masking_rate"], sort=True)[cols].mean().reset_index()

    def summary(self, notes: bool = True) -> str:
        """Text table; ``notes=False`` leaves out the notes (the CLI prints them on stderr)."""
        lines = [(f"MskCal: relative error |v - v*|/|v*|; success = error < {self.tol:g}; "
                  f"trimmed mean cuts {self.trim:.0%} each end")]
        for m, g in self.table.groupby("model", sort=False):
            lines.append(f"model {m}")
            lines.append(f"  {'var':<4} {'MR':>4} {'trials':>6} {'NAR':>6} {'mean err':>10} {'trimmed':>10} "
                         f"{'success':>8}")
            for r in g.itertuples(index=False):
                lines.append(f"  {r.variable:<4} {r.masking_rate:>4g} {r.n_trials:>6d} {r.nar:>6.2f} "
                             f"{_pct(r.mean_rel_error):>10} {_pct(r.trimmed_mean):>10} {_pct(r.success_rate):>8}")
        avg = self.averages()
        if not avg.empty:
            lines.append(f"mean over {', '.join(TABLE1_VARIABLES)} (seed Table 1)")
            lines.append(f"  {'model':<26} {'MR':>4} {'NAR':>6} {'1-mean err':>12} {'1-trimmed':>12} {'success':>8}")
            for r in avg.itertuples(index=False):
                lines.append(f"  {str(r.model)[:26]:<26} {r.masking_rate:>4g} {r.nar:>6.2f} "
                             f"{_pct(1 - r.mean_rel_error):>12} {_pct(1 - r.trimmed_mean):>12} "
                             f"{_pct(r.success_rate):>8}")
        return summary_text(lines, self.notes if notes else ())


def _pct(x: float) -> str:
    return fmt_or_na(x, ".2f", "NA", scale=100, suffix="%")


def read_mskcal_outputs(paths: Any) -> pd.DataFrame:
    """Read MskCal output files (free-text answers, no gold) into canonical-style rows.

    Two layouts of the maskcode repository: ``MskCal_<masker>_<trial>.csv`` with
    ``answer_<model>_<MR>`` columns (one row; the trial from the file name, as
    :func:`mrcstats.io.mskqa.parse_mskqa_name` reads it), and
    ``MSKCAL_<model>/result_MskCal_p<MR>.csv`` whose columns ``0``..``9`` are the
    trials. Files of neither layout (the masking steps) are skipped and counted
    in ``attrs["skipped"]``. The multiple-choice reader (``read_log(...,
    format="mskqa")``) needs a gold column, which MskCal outputs do not have.
    """
    from pathlib import Path

    from mrcstats.io.files import read_string_table
    from mrcstats.io.formats import EXTENSIONS
    from mrcstats.io.formats.content import MSKQA_ANSWER_RE
    from mrcstats.io.mskqa import parse_mskqa_name
    from mrcstats.io.source import expand_paths

    files = expand_paths(paths, EXTENSIONS)
    rows: list[dict[str, Any]] = []
    skipped: dict[str, int] = {}
    for f in files:
        f = Path(f)
        raw = read_string_table(f)
        answer_cols = [(c, MSKQA_ANSWER_RE.match(c)) for c in raw.columns]
        answer_cols = [(c, m) for c, m in answer_cols if m]
        pm = re.search(r"_p(\d+(?:\.\d+)?)$", f.stem)
        if answer_cols:
            trial, _ = parse_mskqa_name(f.stem)
            for i, rec in raw.iterrows():
                for c, m in answer_cols:
                    rows.append({"model": m.group(1), "item": f"{f.stem}:{i}" if len(raw) > 1 else "MskCal",
                                 "trial": trial, "masking_rate": float(m.group(2)), "response": rec[c]})
        elif pm and len(raw.columns) and all(str(c).isdigit() for c in raw.columns):
            model = f.parent.name.split("_", 1)[1] if "_" in f.parent.name else f.parent.name
            for i, rec in raw.iterrows():
                for c in raw.columns:
                    rows.append({"model": model, "item": "MskCal", "trial": int(c),
                                 "masking_rate": float(pm.group(1)), "response": rec[c]})
        else:
            skipped["not a MskCal answer file"] = skipped.get("not a MskCal answer file", 0) + 1
    if not rows:
        raise InputError(f"no MskCal answers found in {plural(len(files), 'file')}; expected answer_<model>_<MR> "
                         "columns or a result_MskCal_p<MR>.csv with trial columns 0..9")
    df = pd.DataFrame(rows)
    df["response"] = df["response"].replace("", pd.NA).astype("string")
    df.attrs["skipped"] = skipped
    return df


def _load(outputs: Any) -> pd.DataFrame:
    if isinstance(outputs, pd.DataFrame):
        return outputs
    if isinstance(outputs, (str, os.PathLike)):
        outputs = [outputs]
    if not isinstance(outputs, Sequence) or not outputs:
        raise InputError("mskcal: give a canonical log DataFrame or one or more MskCal output files")
    return read_mskcal_outputs([os.fspath(p) for p in outputs])


def mskcal(outputs: Any, *, truth: Mapping[str, float] | None = None, tol: float = 0.01,
           trim: float = 0.1, model: str | None = None) -> MskcalResult:
    """Score MskCal free-text answers per variable and masking rate (seed section 4.4, Table 1).

    Parameters
    ----------
    outputs : canonical log (columns ``response``, ``masking_rate``, optional
        ``model``, ``trial``) or paths of MskCal output files, read with
        :func:`mrcstats.io.read_log`.
    truth : ``{variable: true value}``; default :data:`GROUND_TRUTH`.
    tol : success threshold on the relative error (0.01 = 1 %).
    trim : proportion cut at each end for the trimmed mean (R ``mean(x, trim)``;
        ``scipy.stats.trim_mean``).
    model : keep only this model.

    Returns
    -------
    MskcalResult (see the module docstring for the four metrics).
    """
    if not 0 < tol:
        raise InputError(f"tol must be positive (0.01 = 1 %), got {tol!r}")
    if not 0 <= trim < 0.5:
        raise InputError(f"trim must be in [0, 0.5), got {trim!r}")
    truth = dict(GROUND_TRUTH if truth is None else truth)
    bad = [k for k, v in truth.items() if not (isinstance(v, (int, float)) and math.isfinite(v) and v != 0)]
    if bad:
        raise InputError(f"truth values must be finite non-zero numbers; bad: {', '.join(bad)}")
    df = _load(outputs)
    notes: list[str] = [f"{plural(n, 'file')} skipped: {why}" for why, n in df.attrs.get("skipped", {}).items() if n]
    missing = [c for c in ("response", "masking_rate") if c not in df.columns]
    if missing:
        raise InputError(f"mskcal: column(s) {', '.join(missing)} missing from the outputs; they must hold "
                         "the free-text answer (response) and the masking rate in percent (masking_rate)")
    d = pd.DataFrame({
        "model": df["model"].astype("string").fillna("") if "model" in df.columns else "",
        "masking_rate": pd.to_numeric(df["masking_rate"], errors="coerce"),
        "trial": pd.to_numeric(df["trial"], errors="coerce") if "trial" in df.columns else 0,
        "response": df["response"].astype("object"),
    })
    no_mr = d["masking_rate"].isna()
    if no_mr.any():
        notes.append(f"{plural(int(no_mr.sum()), 'row')} without a masking_rate left out")
        d = d[~no_mr]
    if model is not None:
        known = sorted(d["model"].unique())
        d = d[d["model"] == model]
        if d.empty:
            raise InputError(f"mskcal: no answers of model {model!r}; the outputs hold: {', '.join(known)}")
    if d.empty:
        raise InputError("mskcal: the outputs hold no answers with a masking rate")
    from scipy.stats import trim_mean

    vals = []
    for r in d.itertuples(index=False):
        resp = None if r.response is None or r.response is pd.NA or (
            isinstance(r.response, float) and math.isnan(r.response)) else str(r.response)
        ext = extract_values(resp, truth)
        for name, t in truth.items():
            v = ext[name]
            vals.append({"model": r.model, "masking_rate": float(r.masking_rate), "trial": r.trial,
                         "variable": name, "value": np.nan if v is None else v,
                         "rel_error": np.nan if v is None else abs(v - t) / abs(t)})
    values = pd.DataFrame(vals)
    rows = []
    order = {n: i for i, n in enumerate(truth)}
    for (m, mr, var), g in values.groupby(["model", "masking_rate", "variable"], sort=True):
        e = g["rel_error"].to_numpy(float)
        ok = e[np.isfinite(e)]
        n, k = len(e), len(ok)
        rows.append({"variable": var, "model": m, "masking_rate": mr, "truth": truth[var],
                     "n_trials": n, "n_answered": k, "nar": (n - k) / n,
                     "mean_rel_error": float(ok.mean()) if k else math.nan,
                     "trimmed_mean": float(trim_mean(ok, trim)) if k else math.nan,
                     "success_rate": float((ok < tol).mean()) if k else math.nan})
    table = pd.DataFrame(rows)
    table["_o"] = table["variable"].map(order)
    table = (table.sort_values(["model", "_o", "masking_rate"]).drop(columns="_o").reset_index(drop=True))
    return MskcalResult(table=table, values=values, tol=tol, trim=trim, notes=tuple(notes))
