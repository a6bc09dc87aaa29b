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


def test_analysis_scripts_exist():
    for name in ("seed003_race.py", "seed000_mskqa.py", "seed004_elagent.py"):
        assert (REPO / "analyses" / name).is_file(), name
