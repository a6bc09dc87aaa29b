"""`mrcstats demo`: reports/demo.pdf of at least four pages with the section titles, every page rendering."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from mrcstats.cli import main

from .test_pdf import assert_every_page_renders, needs_poppler, pdf_text

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@needs_poppler
def test_demo_writes_the_report(tmp_path, capsys):
    code = main(["demo", "--outdir", str(tmp_path / "reports"), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    obj = json.loads(out)
    pdf = tmp_path / "reports" / "demo.pdf"
    assert obj["pdf"] == str(pdf) and obj["pages"] >= 4
    assert obj["ingest"]["rows"] == len(pd.read_parquet(tmp_path / "reports" / "demo_log.parquet"))
    assert len(obj["by_model"]) == 3
    text = pdf_text(pdf)
    for title in ("Methods", "Fixed effects", "Random effects", "Fisher", "Discrimination", "Masking"):
        assert title in text, title
    assert "engine: native" in text
    assert assert_every_page_renders(pdf, tmp_path) >= 4
    g = obj["headline"]["glmm"]["token count"]
    assert g["max_abs_error"] < 0.5 and set(g["truth"]) == set(g["estimate"])
    assert not obj["skipped"]
    # like with like: the truth describes valid answers, so the GLMM checked against it leaves invalid ones out
    flat = " ".join(text.split())
    assert "invalid answer (left out, as asked)" in flat
    # the tolerance stated as tests: each term's z against the truth and a joint Wald test, no binomial count
    assert set(g["z_truth"]) == set(g["truth"]) and g["wald_truth"]["df"] == len(g["truth"])
    assert "Joint Wald test that all 6 fixed effects equal the truth" in flat and "binomial standard deviation" not in flat
    assert g["wald_truth"]["p"] > 0.01 and max(abs(v) for v in g["z_truth"].values()) < 3.5


def test_demo_compares_like_with_like():
    """The simulated truth describes valid answers (invalid ones are drawn at random): the recovery GLMM must
    leave invalid answers out rather than count them wrong, and say so."""
    from mrcstats.report.demo import DEMO_SIM, demo_spec
    from mrcstats.tasks.simulate import simulate_log

    sim = simulate_log(seed=0, **{**DEMO_SIM, "n_passages": 6})
    spec = demo_spec("demo_log.parquet", sim.truth, 0)
    (g,) = [a for a in spec["analyses"] if a.get("truth")]
    assert g["invalid"] == "exclude"
    assert any("truth describes the valid answers" in n for n in spec["notes"])


def test_analysis_scripts_exist():
    for name in ("seed003_race.py", "seed000_mskqa.py", "seed004_elagent.py"):
        assert (REPO / "analyses" / name).is_file(), name
