"""Issue 25: a referee's check that runs on every report the project ships (the demo always; the seed
reproductions on the shared data): no console dumps, no "(s)" plurals, every abbreviation defined before its
first use, accuracy intervals inside [0, 1] and the same interval for the same cell wherever it appears."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from ._review import review, review_tables, review_text
from .test_analyses import _load
from .test_pdf import needs_poppler


def test_the_check_finds_what_a_referee_found():
    text = ("Abbreviations: CI, confidence interval.\nGeneralized linear mixed model fit by maximum likelihood\n"
            "6 model(s) with a 95% CI; the CR0 SE of the GLMM (GLMM)")
    found = "\n".join(review_text(text))
    assert "console output" in found and "'(s)' plural" in found
    assert "'CR0' is never defined" in found and "'SE' is never defined" in found
    assert "'GLMM' is used before it is defined" in found and "'CI'" not in found


def test_the_check_finds_intervals_that_disagree_or_leave_0_1(tmp_path):
    pd.DataFrame({"model": ["a", "b"], "n": [10, 10], "accuracy": [0.5, 0.95], "ci_low": [0.3, 0.9],
                  "ci_high": [0.7, 1.02]}).to_csv(tmp_path / "a0_summary_model.csv", index=False)
    pd.DataFrame({"Rank": [1], "Model": ["a"], "Accuracy (%)": [50.0], "95% CI low": [28.0],
                  "95% CI high": [72.0]}).to_csv(tmp_path / "a1_compare_ranking.csv", index=False)
    found = "\n".join(review_tables(tmp_path))
    assert "leaves [0, 1]" in found and "in a1_compare_ranking but" in found


@pytest.mark.slow
@needs_poppler
def test_demo_report_passes(tmp_path):
    from mrcstats.report.demo import run_demo

    res = run_demo(tmp_path, seed=0)
    assert review(Path(res.report.pdf)) == []
    # the summary and the comparison show the same cells: the check compared them
    s = pd.read_csv(tmp_path / "demo_tables" / "a0_summary_model.csv").set_index("model")
    c = pd.read_csv(tmp_path / "demo_tables" / "a1_compare_ranking.csv").set_index("Model")
    assert (s["ci_method"] == "clustered wilson").all()
    pd.testing.assert_series_equal(s["ci_low"] * 100, c.loc[s.index, "95% CI low"], check_names=False, rtol=1e-12)


@pytest.mark.slow
@pytest.mark.shared
@needs_poppler
@pytest.mark.parametrize("name", ["seed000_mskqa", "seed003_race", "seed004_elagent"])
def test_seed_reports_pass(name, shared_data, tmp_path):
    args = [str(shared_data), "--out", str(tmp_path / "out")]
    if name != "seed000_mskqa":
        args += ["--work", str(tmp_path / "work")]
    if name == "seed003_race":
        # the report's text and tables, not the syntactic parse (tests/features): the link-grammar parse of
        # every RACE-h passage adds about 10 minutes of CPU
        args += ["--parser", "none"]
    if _load(name).main(args) != 0:
        pytest.skip(f"{name} could not run on this machine")
    pdf = next((tmp_path / "out").glob("*.pdf"))
    assert review(pdf) == []
