"""MskCal: numeric value extraction from free-text answers and the per-MR error metrics."""
from __future__ import annotations

import math
import subprocess

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcstats.errors import InputError
from mrcstats.stats.mskcal import GROUND_TRUTH, extract_value, extract_values, mskcal


@pytest.mark.parametrize("text,name,value", [
    ("P = E / (B + C) = 62,500 yen", "P", 62_500),
    ("- **Revised revenue (E')**: 1,980.00 million yen", "E'", 1_980_000_000),
    ("D' = D - L = 1.98 billion", "D'", 1_980_000_000),
    ("E’ = [1,389,960,000]", "E'", 1_389_960_000),
    ("E′: 1,389,960,000 yen", "E'", 1_389_960_000),
    (r"\[ E^{\prime} = E - L = 1,980,000,000 - 590,040,000 = 1,389,960,000 \text{ yen} \]", "E'", 1_389_960_000),
    (r"P = \frac{1,980,000,000}{31,680} \approx 62,500 \text{ yen/unit}", "P", 62_500),
    ("P = 1,980 million yen / 31,680 = approx. 62.5 thousand yen per unit.", "P", 62_500),
    ("| NR | units sold | 11,880 |", "NR", 11_880),
    ("X = 8,000 \\times NR = 8,000 \\times 11,880 = 95,040,000 \\text{ yen} \\, (or \\, 95.04 \\, million)", "X",
     95_040_000),
    ("**N (Post-recall sales volume):** 23,760 units", "N", 23_760),
    ("Number of units (NR): 11,880 units (A - C = 15,840 - 3,960)", "NR", 11_880),
    ("Y = $495,000,000$", "Y", 495_000_000),
    ("L = X + Y = 94.24 + 493.68 = 587.92 million yen", "L", 587_920_000),
    ("   - `P = 1,980.00 / 31,680.00 = 0.0625 million yen per unit`", "P", 62_500),
    (r"- Calculate: \( \text{NR} = A - C = 15,840 - 3,960 = 11,880 \text{ units}\).", "NR", 11_880),
    ("- **P ≈ 0.0625 million yen per unit**", "P", 62_500),
])
def test_extract_formats(text, name, value):
    assert extract_value(text, name) == pytest.approx(value)


@pytest.mark.parametrize("text,name", [
    ("NR = A - C", "NR"),
    ("X = 8,000 * NR", "X"),
    ("P = 1,980 million yen / 31,680", "P"),
    ("Y = 0.25E", "Y"),
    ("1. **Calculate Unsold Units (NR)**:", "NR"),
    ("The price is unknown.", "P"),
    (r"\( \text{NR} = \text{2023 Sales} - \text{April 2024 Inventory} \)", "NR"),
])
def test_formula_or_missing_is_none(text, name):
    assert extract_value(text, name) is None


def test_last_assignment_wins_and_variables_do_not_bleed():
    text = ("NR = A - C = 15,840 - 3,960 = 11,880\n"
            "X = 8,000 \\times NR = 8,000 \\times 11,880 = 95,040,000\n"
            "N = (B + C) * 0.75 = 23,760\n"
            "### Final\n- NR: 11,880 units\n- X: 94,240,000 yen\n")
    v = extract_values(text)
    assert v["NR"] == 11_880 and v["X"] == 94_240_000 and v["N"] == 23_760 and v["P"] is None
    # one paragraph holding several sentences
    para = ("The number of units, NR: **11,880** by subtracting C from A, **NR = A - C = 11,880**. "
            "The sales price, P: **62,514** by dividing E, **P = E / (B + C) = 62,514**. "
            "The loss L is, **L = X + Y = 589,840,000**.")
    v = extract_values(para)
    assert v["NR"] == 11_880 and v["P"] == 62_514 and v["L"] == 589_840_000
    assert extract_values(None) == {k: None for k in GROUND_TRUTH}
    assert extract_values(float("nan"))["P"] is None


_TEMPLATES = [
    "{name} = {num} yen",
    "- **{name} (value)**: {num} units",
    "{name} = A + B = {num}",
    r"\[ {name} = \frac{{E}}{{B+C}} \approx {num} \text{{ yen}} \]",
    "| {name} | {num} |",
    "{name}: [{num}]",
]


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 10**12), st.sampled_from(_TEMPLATES), st.sampled_from(list(GROUND_TRUTH)),
       st.booleans(), st.sampled_from(["'", "’", "′"]))
def test_extract_roundtrip_integers(value, template, name, commas, prime):
    num = f"{value:,}" if commas else str(value)
    shown = name.replace("'", prime)
    text = "Some working first.\n" + template.format(name=shown, num=num)
    assert extract_value(text, name) == value


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 99_999), st.integers(0, 99), st.sampled_from(["thousand", "million", "billion"]))
def test_extract_roundtrip_scaled(whole, frac, unit):
    mult = {"thousand": 1e3, "million": 1e6, "billion": 1e9}[unit]
    text = f"E' = E - L = {whole:,}.{frac:02d} {unit} yen"
    assert extract_value(text, "E'") == pytest.approx((whole + frac / 100) * mult, rel=1e-12)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200))
def test_extract_never_crashes(text):
    out = extract_values(text)
    assert set(out) == set(GROUND_TRUTH)
    assert all(v is None or math.isfinite(v) for v in out.values())


def _log(answers: dict[float, list[str | None]], model: str = "m") -> pd.DataFrame:
    rows = [{"model": model, "masking_rate": mr, "trial": t, "response": a}
            for mr, lst in answers.items() for t, a in enumerate(lst)]
    return pd.DataFrame(rows)


def test_metrics_by_hand():
    answers = {20.0: ["P = 62,500", "P = 62,500", "P = 63,000", "P = 6,250", None],
               60.0: [None, "no idea", "P = 625,000", None, None]}
    res = mskcal(_log(answers), truth={"P": 62_500.0})
    t = res.table.set_index("masking_rate")
    errs = np.array([0, 0, 500 / 62_500, 56_250 / 62_500])
    assert t.loc[20.0, "nar"] == pytest.approx(0.2)
    assert t.loc[20.0, "mean_rel_error"] == pytest.approx(errs.mean())
    assert t.loc[20.0, "success_rate"] == pytest.approx(0.75)  # 63,000 is 0.8 % off: < 1 %
    assert t.loc[60.0, "nar"] == pytest.approx(0.8)
    assert t.loc[60.0, "mean_rel_error"] == pytest.approx(9.0)
    assert t.loc[60.0, "success_rate"] == 0.0
    d = res.to_dict()
    assert set(d["variables"]["P"]) == {"20", "60"}
    assert set(d["variables"]["P"]["20"]) == {"nar", "mean_rel_error", "trimmed_mean", "success_rate"}
    avg = res.averages(["P"])
    assert avg.loc[avg.masking_rate == 20.0, "nar"].item() == pytest.approx(0.2)
    all_missing = mskcal(_log({100.0: [None, None]}), truth={"P": 62_500.0}).table.iloc[0]
    assert all_missing["nar"] == 1.0 and math.isnan(all_missing["mean_rel_error"])


def test_trimmed_mean_matches_r(rscript):
    vals = [62_500, 62_400, 6_250, 62_500, 625_000, 62_000, 61_000, 62_500, 70_000, 62_510, 1, 62_499]
    res = mskcal(_log({40.0: [f"P = {v:,}" for v in vals]}), truth={"P": 62_500.0}, trim=0.1)
    e = [abs(v - 62_500) / 62_500 for v in vals]
    code = f"cat(sprintf('%.15f', mean(c({','.join(map(repr, e))}), trim = 0.1)))"
    r = float(subprocess.run([rscript, "-e", code], capture_output=True, text=True, check=True).stdout)
    assert res.table.iloc[0]["trimmed_mean"] == pytest.approx(r, rel=1e-12)


def test_bad_arguments():
    with pytest.raises(InputError, match="tol"):
        mskcal(_log({0.0: ["P = 1"]}), tol=0)
    with pytest.raises(InputError, match="response"):
        mskcal(pd.DataFrame({"masking_rate": [0]}))
    two = pd.concat([_log({0.0: ["P = 1"]}, "a"), _log({0.0: ["P = 1"]}, "b")])
    with pytest.raises(InputError, match="2 models"):
        mskcal(two).to_dict()
    with pytest.raises(InputError, match="no answers of model"):
        mskcal(two, model="c")


@pytest.mark.shared
def test_shared_mskcal_table2(shared_data):
    """Seed Table 2 (mask-free, GPT-4o-mini): eps P 20.0 %, Y 10.2 %, E' 3.68 %, D' 2.35 %; 1 - trimmed
    mean P 87.5 %; success P 80 %, N 100 %, Y/E'/D' 90 %."""
    res = mskcal([shared_data / "mskqa" / "output" / "MSKCAL_gpt-4o-mini-2024-07-18"])
    t = res.table.set_index("variable")
    assert round(100 * t.loc["P", "mean_rel_error"], 1) == 20.0
    assert round(100 * t.loc["Y", "mean_rel_error"], 1) == 10.2
    assert round(100 * t.loc["E'", "mean_rel_error"], 2) == 3.68
    assert round(100 * t.loc["D'", "mean_rel_error"], 2) == 2.35
    assert round(100 * (1 - t.loc["P", "trimmed_mean"]), 1) == 87.5
    assert t.loc["P", "success_rate"] == 0.8 and t.loc["N", "success_rate"] == 1.0
    assert all(t.loc[v, "success_rate"] == 0.9 for v in ("Y", "E'", "D'"))
    # the masked runs: both layouts read, masking steps skipped and reported
    res2 = mskcal([shared_data / "mskqa" / "output" / "MskCal_2"], model="gpt-4o-2024-08-06")
    assert sorted(res2.table["masking_rate"].unique()) == [20.0, 40.0, 60.0, 80.0, 100.0]
    assert (res2.table["n_trials"] == 10).all()
    assert any("skipped" in n for n in res2.notes)
