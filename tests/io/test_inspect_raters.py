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


def test_manifest_is_the_tools():
    assert MANIFEST["tool"] == "inspect-ai" and MANIFEST["version"] == "0.3.285"
    assert MANIFEST["status"] == "success"


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
