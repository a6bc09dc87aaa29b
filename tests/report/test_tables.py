"""Tables: exports round-trip, R-like number formatting, probability-at-σ from the seed's fixed effects."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcstats.errors import InputError
from mrcstats.models.design import contrast_matrix
from mrcstats.models.predict import probability_frame
from mrcstats.report.analyses._tests import contingency_table
from mrcstats.report.analyses.accuracy import accuracy_table
from mrcstats.report.analyses.discrimination import pd_cutoff_table
from mrcstats.report.analyses.glmm_tables import regression_table
from mrcstats.report.analyses.masking import masking_indicator_table
from mrcstats.report.analyses.probability import probability_table
from mrcstats.report.tables import (
    Table,
    latex_escape,
    latex_unescape,
    parse_html,
    parse_latex,
    parse_markdown,
)

# seed 003 Appendix B.1 / B.2 (lme4 summaries), sum contrasts: LLM1 = Davinci-002, LLM2 = Davinci-003
TOK = {"(Intercept)": 1.306962, "scaled_tok": -0.012971, "LLM1": -1.116906, "LLM2": -0.044386,
       "scaled_tok:LLM1": -0.097136, "scaled_tok:LLM2": 0.003958}
TOK_SE = {"(Intercept)": 0.037221, "scaled_tok": 0.032554, "LLM1": 0.035076, "LLM2": 0.035716,
          "scaled_tok:LLM1": 0.034660, "scaled_tok:LLM2": 0.035950}
CON = {"(Intercept)": 1.3075563, "scaled_con": 0.0832204, "LLM1": -1.1176523, "LLM2": -0.0434572,
       "scaled_con:LLM1": 0.0072892, "scaled_con:LLM2": -0.0003695}
LEVELS = ["Davinci-002", "Davinci-003", "GPT-4"]


def _roundtrip(t: Table) -> None:
    for text, parse in ((t.to_latex(), parse_latex), (t.to_markdown(), parse_markdown), (t.to_html(), parse_html)):
        head, body = parse(text)
        assert head == t.header
        assert body == t.cells()


def test_regression_table_lme4_layout_matches_r_printing():
    t = regression_table(pd.DataFrame({"estimate": TOK, "se": TOK_SE}))
    cells = {r[0]: r for r in t.cells()}
    # printCoefmat: estimates and SEs share decimals; p-values by the one formatter (format.pval, 4 digits)
    assert cells["(Intercept)"][1:3] == ["1.306962", "0.037221"]
    assert cells["scaled_tok:LLM2"][1] == "0.003958"
    assert cells["scaled_tok"][4] == "0.6903"
    assert cells["scaled_tok:LLM1"][4:6] == ["0.00507", "**"]
    assert cells["LLM1"][4:6] == ["< 2.2e-16", "***"]
    _roundtrip(t)


def test_compact_layout_and_truth_column():
    t = regression_table(pd.DataFrame({"estimate": TOK, "se": TOK_SE}), layout="compact", truth={"LLM1": -1.1})
    row = dict(zip(t.header, t.cells()[2], strict=True))
    assert row["β (SE)"] == "−1.12 (0.04)***" and row["Truth"] == "−1.10"
    _roundtrip(t)
    with pytest.raises(InputError, match="layout"):
        regression_table(pd.DataFrame({"estimate": TOK, "se": TOK_SE}), layout="wide")


def test_probability_table_reproduces_seed_table_2():
    pf = probability_frame(CON, "scaled_con", "LLM", LEVELS, "sum", sigmas=(-2, 0, 2, 4)).set_index("LLM")
    # seed Table 2 (rounded to hundredths); the seed's own -2σ Davinci-002 cell (0.51) is its rounding slip
    assert round(pf.loc["Davinci-003", 0.0], 2) == 0.78
    assert round(pf.loc["GPT-4", 0.0], 2) == 0.92
    assert round(pf.loc["Grand Mean", 0.0], 2) == 0.79
    assert [round(v, 2) for v in pf.loc["Davinci-002", [0.0, 2.0, 4.0]]] == [0.55, 0.59, 0.63]
    assert [round(v, 2) for v in pf.loc["GPT-4"]] == [0.91, 0.92, 0.93, 0.94]
    # GPT-4 under sum coding: offset -(LLM1 + LLM2), as the seed's text computes (1.16)
    eta = CON["(Intercept)"] - CON["LLM1"] - CON["LLM2"]
    assert pf.loc["GPT-4", 0.0] == pytest.approx(1 / (1 + math.exp(-eta)), abs=1e-15)


def test_probability_table_header_and_treatment_coding():
    t = probability_table(TOK, "scaled_tok", "LLM", LEVELS, raw_mean=300.0, raw_sd=100.0, feature_label="Tokens")
    assert t.header == ["Tokens", "−2σ (100.00)", "0σ (300.00)", "2σ (500.00)", "4σ (700.00)"]
    _roundtrip(t)
    fx = {"(Intercept)": 0.5, "x": 0.1, "mb": 1.0, "mc": -1.0, "x:mb": 0.2, "mc:x": 0.3}
    pf = probability_frame(fx, "x", "m", ["a", "b", "c"], "treatment", sigmas=(1,)).set_index("m")
    assert pf.loc["a", 1.0] == pytest.approx(1 / (1 + math.exp(-0.6)))
    assert pf.loc["c", 1.0] == pytest.approx(1 / (1 + math.exp(-(0.5 - 1.0 + 0.4))))
    with pytest.raises(InputError, match="term"):
        probability_frame(fx, "y", "m", ["a", "b", "c"], "treatment")


def test_contrast_matrix_is_r_contr_sum_and_treatment():
    c, suf = contrast_matrix(["a", "b", "c"], "sum")
    assert suf == ["1", "2"] and c.tolist() == [[1, 0], [0, 1], [-1, -1]]
    c, suf = contrast_matrix(["a", "b", "c"], "contr.treatment")
    assert suf == ["b", "c"] and c.tolist() == [[0, 0], [1, 0], [0, 1]]


def test_contingency_accuracy_cutoff_and_masking_tables_round_trip():
    counts = pd.DataFrame([[11, 0], [8, 9]], index=pd.Index(["Correct", "Incorrect"], name="outcome"),
                          columns=["Factual", "Counterfactual"])
    t = contingency_table(counts, [("Fisher's exact test", {"p": 0.0039, "odds_ratio": float("inf"),
                                                            "conf_int": [1.5, float("inf")]})])
    assert t.cells()[-1] == ["Total", "19", "9", "28"]
    assert "p = 0.0039" in t.notes[0] and "∞" in t.notes[0]   # R's format.pval, as every p-value
    _roundtrip(t)
    back = Table.read_csv(t.to_csv())
    assert back["Total"].tolist() == [11, 17, 28]

    acc = pd.DataFrame({"move": ["zero", "zero", "two"], "digits": [1, 2, 1], "accuracy": [0.99, 0.95, 0.54],
                        "sd": [0.005, 0.012, np.nan]})
    a = accuracy_table(acc, "move", "digits")
    assert a.cells() == [["zero", "99.0 ± 0.5", "95.0 ± 1.2"], ["two", "54.0", "–"]]
    _roundtrip(a)
    raw = Table.read_csv(a.to_csv())
    assert raw.columns.tolist() == ["move", "1", "1 SD", "2", "2 SD"]
    assert raw.loc[0, "2"] == pytest.approx(95.0)

    cut = pd.DataFrame({"cutoff": [0.0, 5.0], "clusters": [1045, 154], "items": [3498, 449],
                        "accuracy": [{"a": 0.54, "b": 0.9}, {"a": 0.19, "b": 0.97}], "grand_mean": [0.72, 0.58]})
    p = pd_cutoff_table(cut)
    assert p.header == ["", "P_d > 0", "P_d > 5"] and p.cells()[-1] == ["Item count", "3,498", "449"]
    _roundtrip(p)

    ind = pd.DataFrame({"model": ["m"] * 2, "condition": ["regular", "strict"], "acc": [0.6467, 0.6327],
                        "na": [0.7198, 0.7], "ea": [np.nan, np.nan], "ki": [np.nan, np.nan]})
    m = masking_indicator_table(ind)
    assert m.cells()[0][:4] == ["m", "63.27", "64.67", "0.7198"]
    _roundtrip(m)


def test_pvalue_formatting():
    """Report tables print p-values with the one formatter (R's format.pval), missing as –."""
    from mrcstats.report.format import format_p

    assert format_p(1e-20) == "< 2.2e-16"
    assert format_p(3.2e-7) == "3.2e-07"
    assert format_p(0.04897) == "0.04897"
    assert format_p(None) == "–"


def test_table_validation():
    with pytest.raises(InputError, match="DataFrame"):
        Table([[1, 2]])  # type: ignore[arg-type]
    with pytest.raises(InputError, match="duplicate"):
        Table(pd.DataFrame([[1, 2]], columns=["a", "a"]))
    with pytest.raises(InputError, match="unknown format"):
        Table(pd.DataFrame({"a": [1]})).write("/tmp/x", formats=("docx",))


_text = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=20).map(str.strip)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_text, st.floats(allow_nan=True, allow_infinity=False, width=32), _text),
                min_size=1, max_size=6))
def test_any_cell_text_round_trips_through_every_export(rows):
    df = pd.DataFrame(rows, columns=["label", "value", "note"])
    t = Table(df, caption="hypothesis", label="h")
    _roundtrip(t)
    back = Table.read_csv(t.to_csv())
    assert len(back) == len(df)
    np.testing.assert_allclose(back["value"].to_numpy(dtype=float), df["value"].to_numpy(dtype=float),
                               rtol=1e-7, equal_nan=True)


@given(_text)
def test_latex_escape_inverts(s):
    assert latex_unescape(latex_escape(s)) == s
