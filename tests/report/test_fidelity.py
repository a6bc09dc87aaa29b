"""Issue 36: a reproduction counts as reproduced only cells computed from the paper's real data; every cell shown
but not compared is listed with its reason; contingency counts can be compared; the confusion caption counts
the 'other' column from the table."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from mrcstats.report import build_report
from mrcstats.report.analyses.base import Output, cell_option, compare_published

from .test_pdf import needs_poppler, pdf_text, small_log


def test_cell_option_lookup_order():
    opts = {"r / c": 1, "r": 2, "c": 3, "*": 4}
    assert cell_option(opts, "r", "c") == 1 and cell_option(opts, "r", "x") == 2
    assert cell_option(opts, "q", "c") == 3 and cell_option(opts, "q", "x") == 4
    assert cell_option(None, "r", "c") is None and cell_option({"r": 0}, "r", "c") == 0


def test_not_compared_cells_are_shown_listed_and_never_counted():
    ours = pd.DataFrame({"a": [0.51, 0.9], "b": [0.6, 0.7]}, index=["m1", "Grand Mean"])
    out = Output("t")
    compare_published(out, "Table 2", ours, {"m1": {"a": 0.51, "b": 0.66}, "Grand Mean": {"a": 0.9, "b": math.nan}},
                      0.005, "t2", not_compared={"m1 / b": "computed from simulated responses"})
    assert [f.cell for f in out.fidelity] == ["m1 / a", "Grand Mean / a"]          # the compared cells only
    assert {(n.cell, n.reason) for n in out.not_compared} == {
        ("m1 / b", "computed from simulated responses"), ("Grand Mean / b", "the paper's value is not readable")}
    t = next(b for b in out.blocks if b[0] == "table")[1][0]
    assert "2 of 2 compared cells within tolerance; 2 of 4 shown but not compared" in t.caption
    vis = t.data.set_index(["Row", "Column"])["Within tolerance"]
    assert vis["m1", "b"] == "not compared (a)" and vis["Grand Mean", "b"] == "not compared (b)"
    assert t.data.set_index(["Row", "Column"]).loc[("Grand Mean", "b"), "Paper"] == "unreadable"
    assert t.notes == ("a not compared: computed from simulated responses.",
                       "b not compared: the paper's value is not readable.")
    raw = t.to_frame()
    assert list(raw["not_compared"]) == ["", "computed from simulated responses", "",
                                         "the paper's value is not readable"]


@needs_poppler
def test_report_fidelity_section_and_headline(tmp_path):
    small_log(tmp_path)
    spec = {"logs": [str(tmp_path / "log.csv")], "analyses": [
        {"type": "summary", "by": ["model"], "title": "Accuracy",
         "published": {"m-a": 0.1, "m-b": 0.5, "m-c": None}, "tolerance": 1.0,
         "not_compared": {"m-b": "computed from simulated responses"}},
        {"type": "contingency", "rows": "model", "cols": "correct", "tests": ["fisher"], "title": "model x correct",
         "published": {"m-a": {"Total": 2160}}}]}
    r = build_report(spec, tmp_path / "r.pdf")
    fid = r.headline["fidelity"]
    assert fid["Accuracy"] == {"compared": 1, "reproduced": 1, "outside": [], "not_compared": {
        "m-b / accuracy": "computed from simulated responses", "m-c / accuracy": "the paper's value is not readable"}}
    assert fid["model x correct"]["compared"] == 1 and fid["model x correct"]["reproduced"] == 1
    text = " ".join(pdf_text(r.pdf).split())
    assert "Accuracy: 1 of 1 compared cells reproduced; not compared (1 cell: m-b / accuracy): computed from simulated" in text
    assert "not compared (1 cell: m-c / accuracy): the paper's value is not readable" in text


def test_published_null_is_accepted_and_words_are_not(tmp_path):
    from mrcstats.errors import InputError
    from mrcstats.report.spec import load_spec

    small_log(tmp_path)
    base = {"logs": [str(tmp_path / "log.csv")], "analyses": [{"type": "summary", "published": {"a": None}}]}
    assert math.isnan(load_spec(base).analyses[0].get("published")["a"][""])
    with pytest.raises(InputError, match="null for an unreadable"):
        load_spec({**base, "analyses": [{"type": "summary", "published": {"a": "n/a"}}]})


def test_contingency_published_frame():
    from mrcstats.report.analyses.contingency import published_frame

    counts = pd.DataFrame([[13, 80], [10, 147]], index=["1st stmt", "rest stmts"], columns=[False, True])
    f = published_frame(counts, {"False": "not correct", "True": "correct"})
    assert list(f.columns) == ["not correct", "correct", "Total", "error rate (%)"]
    assert f.loc["1st stmt", "Total"] == 93 and round(f.loc["1st stmt", "error rate (%)"], 1) == 14.0


def test_confusion_caption_counts_the_other_column(tmp_path):
    """The caption is computed from the table: the 'other' column's sum, and the distinct values beside it."""
    rows = [{"model": "m", "item": f"i{k}", "gold": "A", "pred": p, "correct": p == "A"}
            for k, p in enumerate(["A"] * 5 + ["x"] * 3 + ["y"] * 2 + ["B"])]
    rows += [{"model": "m", "item": "j", "gold": "B", "pred": "B", "correct": True}]
    pd.DataFrame(rows).to_csv(tmp_path / "c.csv", index=False)
    r = build_report({"logs": [str(tmp_path / "c.csv")], "analyses": [{"type": "confusion", "tests": ["chisq"]}]},
                     tmp_path / "c.pdf")
    cap = (tmp_path / "c_tables").glob("*confusion*.md")
    text = " ".join(p.read_text() for p in cap)
    assert "5 extracted answers (2 distinct values) that are not among the gold labels" in text, text
    assert r.pdf.exists()
