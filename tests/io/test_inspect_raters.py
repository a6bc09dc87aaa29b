"""Inspect's model-graded scorers as raters (mrcstats.io.inspect_raters), on a real Inspect log written offline by
inspect-ai with mockllm graders (tests/conformance/inspect_judges/, scripts/tool_fixtures/inspect_judge_fixture.py):
the grades equal the graders' scripted ones, the means Inspect's own accuracy, and the CLI reads the log as raters."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from mrcstats.cli import main
from mrcstats.errors import InputError
from mrcstats.io.inspect_raters import RATER_COLUMNS, raters_wide, read_inspect_raters

HERE = Path(__file__).resolve().parents[1] / "conformance" / "inspect_judges"
LOG = HERE / "judges.eval"
MANIFEST = json.loads((HERE / "manifest.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("folder", ["", "panel"])
def test_manifest_is_the_tools(folder):
    manifest = json.loads((HERE / folder / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["tool"] == "inspect-ai" and manifest["version"] == "0.3.285"
    assert manifest["status"] == "success"


def test_long_form_equals_the_scripted_grades_and_inspects_metrics():
    d = read_inspect_raters(LOG)
    assert tuple(d.columns) == RATER_COLUMNS
    assert list(dict.fromkeys(d["rater"])) == ["match", "strict", "lenient"]
    assert len(d) == 3 * len(MANIFEST["samples"])
    for s in MANIFEST["samples"]:
        rows = d[d["sample_id"] == str(s["id"])].set_index("rater")
        for judge in ("strict", "lenient"):
            assert rows.loc[judge, "value"] == s[judge]
            assert rows.loc[judge, "rating"] == (1.0 if s[judge] == "C" else 0.0)
            assert rows.loc[judge, "grader"] == "mockllm/model"
            assert f"judged by {judge}" in rows.loc[judge, "explanation"]
            assert rows.loc[judge, "answer"] == s["answer"]
        assert pd.isna(rows.loc["match", "grader"])
    for sc in MANIFEST["scores"]:                          # Inspect's own accuracy per scorer
        assert d[d["rater"] == sc["name"]]["rating"].mean() == pytest.approx(sc["metrics"]["accuracy"])
    assert set(d["item"]) == {f"judged_qa:{s['id']}" for s in MANIFEST["samples"]}


def test_wide_form_and_scorer_choice():
    long = read_inspect_raters(LOG, scorers=["strict", "lenient"])
    assert set(long["rater"]) == {"strict", "lenient"}
    w = raters_wide(read_inspect_raters(LOG))
    assert list(w.columns) == ["model", "item", "trial", "match", "strict", "lenient"] and len(w) == 8
    with pytest.raises(InputError, match="no scorer 'nope'.*'match', 'strict', 'lenient'"):
        read_inspect_raters(LOG, scorers=["nope"])


def test_cli_reads_an_inspect_log_as_raters(capsys):
    assert main(["judge", str(LOG), "--human", "match", "--judge", "strict,lenient", "--bootstrap", "0",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["panel"]["judges"] == ["strict", "lenient"]
    strict = [s for s in MANIFEST["samples"]]
    assert out["panel"]["per_judge"][0]["models"][0]["judge_mean"] == pytest.approx(
        sum(s["strict"] == "C" for s in strict) / len(strict))
    assert main(["agreement", str(LOG), "--item", "item", "--rater", "rater", "--rating", "rating",
                 "--bootstrap", "0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["raters"] == ["match", "strict", "lenient"]


# ------------------------------------------------------- scorers holding several graders' values (a panel, a dict)
PANEL_DIR = HERE / "panel"
PANEL = PANEL_DIR / "panel.eval"
PANEL_MANIFEST = json.loads((PANEL_DIR / "manifest.json").read_text(encoding="utf-8"))


def test_grader_panel_and_dict_scorer_read_as_several_judges():
    """``model_graded_qa(model=[g1, g2, g3])``: the panel (Inspect's majority) and each vote (``panel/1`` ..) are
    raters; a dict-valued scorer is one rater per key (``duo/gpt``, ``duo/claude``); each equals the scripted
    grades, and each rater's mean equals Inspect's own accuracy for it (the dict's per key)."""
    d = read_inspect_raters(PANEL)
    assert tuple(d.columns) == RATER_COLUMNS
    assert list(dict.fromkeys(d["rater"])) == ["match", "panel", "panel/1", "panel/2", "panel/3", "duo/gpt",
                                               "duo/claude"]
    for s in PANEL_MANIFEST["samples"]:
        rows = d[d["sample_id"] == str(s["id"])].set_index("rater")
        for j, g in enumerate(s["panel"]):
            assert rows.loc[f"panel/{j + 1}", "value"] == g and pd.isna(rows.loc[f"panel/{j + 1}", "grader"])
        majority = max(set(s["panel"]), key=s["panel"].count)
        assert rows.loc["panel", "value"] == majority
        for k, g in s["duo"].items():
            assert rows.loc[f"duo/{k}", "rating"] == (1.0 if g == "C" else 0.0)
        assert (rows["answer"] == s["answer"]).all()
    acc = {sc["name"]: sc["metrics"]["accuracy"] for sc in PANEL_MANIFEST["scores"] if "accuracy" in sc["metrics"]}
    assert set(acc) == {"match", "panel", "gpt", "claude"}
    for rater, name in (("match", "match"), ("panel", "panel"), ("duo/gpt", "gpt"), ("duo/claude", "claude")):
        assert d[d["rater"] == rater]["rating"].mean() == pytest.approx(acc[name]), rater
    # choosing by scorer keeps all its raters; by rater name, that one
    assert set(read_inspect_raters(PANEL, scorers=["duo"])["rater"]) == {"duo/gpt", "duo/claude"}
    assert set(read_inspect_raters(PANEL, scorers=["panel/2", "match"])["rater"]) == {"panel/2", "match"}
    w = raters_wide(d)
    assert list(w.columns)[3:] == ["match", "panel", "panel/1", "panel/2", "panel/3", "duo/gpt", "duo/claude"]


def test_cli_judges_a_panels_graders(capsys):
    assert main(["judge", str(PANEL), "--human", "match", "--judge", "panel/1,panel/2,panel/3", "--bootstrap", "0",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["panel"]["judges"] == ["panel/1", "panel/2", "panel/3"]
    for j, r in enumerate(out["panel"]["per_judge"]):
        want = sum(s["panel"][j] == "C" for s in PANEL_MANIFEST["samples"]) / len(PANEL_MANIFEST["samples"])
        assert r["models"][0]["judge_mean"] == pytest.approx(want)


def test_a_vote_not_cast_is_counted_not_rated(tmp_path):
    """A grader of the panel that gave no grade (a ``null`` vote): no rating for that rater and sample, counted
    in ``attrs["skipped"]``; a dict value that is not a score is an error naming the rater."""
    from mrcstats.io.inspect_raters import _parts, _votes

    assert _parts("s", {"a": "C", "b": [1, 0]}) == [("s/a", "C"), ("s/b/1", 1), ("s/b/2", 0)]
    assert _votes({"panel": {"votes": ["C", None]}}) == ["C", None] and _votes({"grading": []}) is None
    log = {"version": 2, "status": "success", "eval": {"task": "t", "model": "m"},
           "samples": [{"id": 1, "epoch": 1, "scores": {"p": {"value": "C", "metadata": {"panel": {
               "votes": ["C", None, "C"], "size": 3, "failures": [{"index": 1}]}}}}}]}
    p = tmp_path / "log.json"
    p.write_text(json.dumps(log))
    d = read_inspect_raters(p)
    assert list(d["rater"]) == ["p", "p/1", "p/3"]
    assert d.attrs["skipped"] == {"grader-panel vote not cast (the grader gave no grade)": 1}
    log["samples"] = [{"id": 2, "epoch": 1, "scores": {"p": {"value": {"x": "maybe"}}}}]
    p.write_text(json.dumps(log))
    with pytest.raises(InputError, match=r"id '2'\): scorer 'p/x' gives 'maybe', not a score"):
        read_inspect_raters(p)
