"""The ``glmm`` analysis's ``emmeans:`` option: the means and pairs tables in the PDF and beside it."""
from __future__ import annotations

import shutil

import pandas as pd
import pytest

from mrcstats.errors import InputError
from mrcstats.report import build_report

from .test_pdf import pdf_text, small_log

SPEC = """\
title: emmeans
seed: 5
logs: [log.csv]
analyses:
  - glmm:
      name: tok
      formula: correct ~ scaled_tok * model + (1 | cluster)
      contrasts: {model: sum}
      filter: {masking_rate: 0}
      ranef: false
      emmeans:
        - {specs: model, type: response, pairs: true}
        - {specs: model, by: condition, pairs: true, adjust: holm}
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("emm_report")
    small_log(tmp)
    (tmp / "spec.yaml").write_text(SPEC.replace("scaled_tok * model", "scaled_tok * model + condition"))
    return build_report(tmp / "spec.yaml", tmp / "out" / "r.pdf")


def test_tables_beside_the_pdf(built):
    import mrcstats

    tdir = built.pdf.parent / "r_tables"
    em = pd.read_csv(tdir / "emmeans_tok_0.csv")
    assert list(em.columns) == ["model", "prob", "SE", "df", "asymp.LCL", "asymp.UCL"]
    assert list(em["model"]) == ["m-a", "m-b", "m-c"]
    pr = pd.read_csv(tdir / "pairs_tok_0.csv")
    assert list(pr["contrast"]) == ["m-a / m-b", "m-a / m-c", "m-b / m-c"] or \
        list(pr["contrast"]) == ["(m-a) / (m-b)", "(m-a) / (m-c)", "(m-b) / (m-c)"]
    assert "odds.ratio" in pr.columns
    by = pd.read_csv(tdir / "pairs_tok_1.csv")
    assert set(by["condition"]) == {"regular", "strict"} and len(by) == 6
    # the table's numbers are the API's
    log = pd.read_csv(built.pdf.parent.parent / "log.csv")
    m = mrcstats.glmer("correct ~ scaled_tok * model + condition + (1 | cluster)", log[log.masking_rate == 0],
                       contrasts={"model": "sum"})
    ref = mrcstats.emmeans(m, "model", type="response").to_frame()
    assert (em["prob"] - ref["prob"]).abs().max() < 1e-9


@pytest.mark.skipif(not shutil.which("pdftotext"), reason="poppler-utils (pdftotext) not installed")
def test_pdf_shows_the_tables(built):
    text = pdf_text(built.pdf)
    assert "Estimated marginal means of model" in text and "odds.ratio" in text and "asymp.LCL" in text
    assert "tukey method for comparing a family of 3 estimates" in text
    assert "holm method for 3 tests" in text


def test_bad_emmeans_option(tmp_path):
    small_log(tmp_path)
    (tmp_path / "s.yaml").write_text(SPEC.replace("{specs: model, type: response, pairs: true}",
                                                  "{specs: nope, pairs: true}"))
    with pytest.raises(InputError, match=r"emmeans\[0\].*not a variable"):
        build_report(tmp_path / "s.yaml", tmp_path / "r.pdf")
    (tmp_path / "s2.yaml").write_text(SPEC.replace("adjust: holm", "adjust: scheffe"))
    with pytest.raises(InputError, match=r"emmeans\[1\].adjust"):
        build_report(tmp_path / "s2.yaml", tmp_path / "r.pdf")
