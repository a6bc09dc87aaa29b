"""PDF reports: section titles extractable, every page renders, builds are byte-identical; the CLI."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mrcstats.cli import main
from mrcstats.report import build_report

needs_poppler = pytest.mark.skipif(not (shutil.which("pdftotext") and shutil.which("pdftoppm")),
                                   reason="poppler-utils (pdftotext, pdftoppm) not installed")


def pdf_text(path: Path) -> str:
    return subprocess.run(["pdftotext", "-layout", str(path), "-"], capture_output=True, text=True,
                          check=True).stdout


def pdf_pages(path: Path) -> int:
    out = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True, check=True).stdout
    return int(next(ln.split()[-1] for ln in out.splitlines() if ln.startswith("Pages:")))


def assert_every_page_renders(path: Path, tmp: Path) -> int:
    """pdftoppm renders each page to a non-empty PNG; returns the number of pages."""
    n = pdf_pages(path)
    subprocess.run(["pdftoppm", "-r", "30", "-png", str(path), str(tmp / "page")], check=True,
                   capture_output=True)
    pngs = sorted(tmp.glob("page-*.png"))
    assert len(pngs) == n
    assert all(p.stat().st_size > 500 for p in pngs)
    return n


def small_log(tmp_path: Path, seed: int = 3) -> Path:
    """A canonical log with a GLMM truth: 3 models x 60 passages x 3 questions, masking at 0/50/100."""
    rng = np.random.default_rng(seed)
    rows = []
    beta = {"m-a": -0.8, "m-b": 0.0, "m-c": 0.8}
    for p in range(60):
        u = rng.normal(0, 0.7)
        x = rng.normal()
        for q in range(3):
            for m, b in beta.items():
                for cond, slope in (("regular", -2.0), ("strict", -3.0)):
                    for mr in (0, 50, 100):
                        for t in range(2):
                            eta = 1.0 + b + 0.3 * x + u + slope * mr / 100
                            ok = bool(rng.random() < 1 / (1 + np.exp(-eta)))
                            rows.append({"model": m, "item": f"p{p}:{q}", "cluster": f"p{p}", "trial": t,
                                         "condition": cond, "masking_rate": float(mr), "correct": ok,
                                         "gold": "ABC"[q], "pred": "ABC"[q] if ok else "ABC"[(q + 1) % 3],
                                         "scaled_tok": x, "tokens": 300 + 90 * x,
                                         "wh_word": ["what", "which", "why"][q]})
    path = tmp_path / "log.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


SPEC = """\
title: Small report
seed: 5
logs: [log.csv]
analyses:
  - summary: {filter: {masking_rate: 0}}
  - glmm:
      name: tok
      formula: correct ~ scaled_tok * model + (1 | cluster)
      contrasts: {model: sum}
      filter: {masking_rate: 0}
      drop1: true
      gvif: true
      sigma_table: {feature: scaled_tok, factor: model, raw: tokens}
      loess: true
      truth: {"(Intercept)": 1.0, "scaled_tok": 0.3, "model1": -0.8, "model2": 0.0}
  - wh_extremes: {glmm: tok, n: 10, B: 500}
  - contingency: {rows: condition, cols: correct, filter: {masking_rate: 50}, tests: [fisher, chisq]}
  - discrimination: {filter: {masking_rate: 0}, cutoffs: [0, 1, 5], n: 10}
  - masking: {}
  - accuracy: {rows: condition, cols: model, filter: {masking_rate: 50}}
  - confusion: {filter: {masking_rate: 100}}
  - error_types: {rows: wh_word, cols: model, filter: {masking_rate: 100}, order: {wh_word: [why, what]}}
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    small_log(tmp)
    (tmp / "spec.yaml").write_text(SPEC)
    a = build_report(tmp / "spec.yaml", tmp / "a" / "r.pdf")
    b = build_report(tmp / "spec.yaml", tmp / "b" / "r.pdf")
    return tmp, a, b


def test_builds_are_byte_identical(built):
    tmp, a, b = built
    assert a.pdf.read_bytes() == b.pdf.read_bytes()
    for p in a.tables:
        assert p.read_bytes() == (tmp / "b" / p.relative_to(tmp / "a")).read_bytes()
    assert not a.skipped


@needs_poppler
def test_sections_extract_and_pages_render(built, tmp_path):
    _, a, _ = built
    text = pdf_text(a.pdf)
    for title in ("Methods", "Fixed effects", "Random effects", "Fisher", "Discrimination", "Masking",
                  "Confusion matrix", "Error types"):
        assert title in text
    assert "correct ~ scaled_tok * model + (1 | cluster)" in text
    assert "contr.sum" in text and "nAGQ = 1" in text and "Software: Python" in text
    assert assert_every_page_renders(a.pdf, tmp_path) == a.pages >= 4


def test_latex_tables_beside_the_pdf(built):
    _, a, _ = built
    tex = {p.name for p in a.tables if p.suffix == ".tex"}
    assert {"fixef_tok.tex", "fixef_tok_compact.tex", "sigma_tok_scaled_tok.tex", "pd_cutoffs.tex",
            "masking_indicators.tex", "drop1_tok.tex", "gvif_tok.tex"} <= tex
    fx = (a.pdf.parent / "r_tables" / "fixef_tok.tex").read_text()
    assert "\\toprule" in fx and "\\bottomrule" in fx and "model1" in fx
    csv = pd.read_csv(a.pdf.parent / "r_tables" / "fixef_tok.csv")
    assert set(csv["Term"]) >= {"(Intercept)", "scaled_tok:model1"}
    h = a.headline["glmm"]["tok"]
    assert abs(h["estimate"]["model1"] - (-0.8)) < 0.3


def test_missing_pieces_are_skipped_with_a_note(tmp_path, monkeypatch):
    small_log(tmp_path)
    (tmp_path / "spec.yaml").write_text("logs: [log.csv]\nanalyses: [discrimination]\n")
    from mrcstats.report.analyses.base import Skip
    from mrcstats.report.analyses.discrimination import Discrimination

    def missing(self, ctx, a):
        raise Skip("mrcstats.stats.discrimination is not available in this installation")

    monkeypatch.setattr(Discrimination, "run", missing)
    r = build_report(tmp_path / "spec.yaml", tmp_path / "s.pdf")
    assert r.skipped and "not available" in r.skipped[0]
    assert r.pdf.exists()


@needs_poppler
@pytest.mark.parametrize("exc", [RuntimeError("boom in the fit"), "input"])
def test_a_failing_analysis_is_skipped_with_a_note_never_kills_the_report(tmp_path, monkeypatch, exc):
    """The promise of docs/report.md: an analysis that raises (a bug, a failed fit, input this log cannot serve)
    is skipped with a note in the PDF, the HTML and the result; the analyses after it still run."""
    from mrcstats.errors import InputError
    from mrcstats.report.analyses.discrimination import Discrimination
    small_log(tmp_path)
    (tmp_path / "spec.yaml").write_text("logs: [log.csv]\nanalyses: [discrimination, {type: summary, by: [model]}]\n")
    err = InputError("the screen's validation needs graded scores") if exc == "input" else exc

    def fails(self, ctx, a):
        ctx.extra_tables.append(object())   # half-built output of the failed analysis is dropped
        raise err

    monkeypatch.setattr(Discrimination, "run", fails)
    r = build_report(tmp_path / "spec.yaml", tmp_path / "s.pdf", html=True)
    assert r.pdf.exists() and r.html.exists()
    assert len(r.skipped) == 1 and str(err) in r.skipped[0] and "failed" in r.skipped[0]
    assert r.failed == (f"analyses[0] (discrimination): {'' if exc == 'input' else 'RuntimeError: '}{err}",)
    assert "Accuracy" in " ".join(r.sections)        # the analysis after the failed one ran
    text = pdf_text(r.pdf)
    assert "Skipped: the analysis failed on this log" in " ".join(text.split()) and "Skipped analyses" in text
    assert "analyses[0]" not in text                 # no internal identifier in what a person reads
    assert "Skipped: the analysis failed on this log" in r.html.read_text()
    with pytest.raises(type(err), match="boom" if exc != "input" else r"analyses\[0\] \(discrimination\)"):
        build_report(tmp_path / "spec.yaml", tmp_path / "t.pdf", on_error="raise")
    assert not (tmp_path / "t.pdf").exists()


def test_cli_report_json_and_errors(tmp_path, capsys):
    small_log(tmp_path)
    (tmp_path / "spec.yaml").write_text("logs: [log.csv]\nanalyses: [{type: summary, by: [model]}]\n")
    code = main(["report", str(tmp_path / "spec.yaml"), "--out", str(tmp_path / "o.pdf"), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    obj = json.loads(out)
    assert obj["pdf"].endswith("o.pdf") and obj["pages"] >= 1
    (tmp_path / "bad.yaml").write_text("logs: [log.csv]\nanalyses: [{type: glmm, formula: 'correct ~ nope + (1|item)'}]\n")
    code = main(["report", str(tmp_path / "bad.yaml"), "--out", str(tmp_path / "x.pdf"), "--strict"])
    out, err = capsys.readouterr()
    assert code == 2 and not (tmp_path / "x.pdf").exists()
    assert err.count("\n") == 1 and "analyses[0] (glmm)" in err and "Traceback" not in err
    # without --strict the failing analysis is skipped with a note and the report is written
    code = main(["report", str(tmp_path / "bad.yaml"), "--out", str(tmp_path / "x.pdf"), "--json"])
    out, err = capsys.readouterr()
    obj = json.loads(out)
    assert code == 0 and (tmp_path / "x.pdf").exists() and "Traceback" not in err
    assert len(obj["failed"]) == 1 and obj["failed"][0].startswith("analyses[0] (glmm)") and "nope" in obj["failed"][0]
    assert "analyses[0] (glmm)" in err and "skipped" in err
    code = main(["report", str(tmp_path / "spec.yaml"), "--out", str(tmp_path / "x.txt")])
    assert code == 2 and ".pdf" in capsys.readouterr().err


def test_filters_compare_numbers_as_numbers_and_name_missing_columns():
    from mrcstats.errors import InputError
    from mrcstats.report.build import apply_filter

    d = pd.DataFrame({"masking_rate": pd.array([0.0, 50.0, None], dtype="Float64"), "c": ["a", "b", "a"]})
    assert len(apply_filter(d, {"masking_rate": 0})) == 1
    assert len(apply_filter(d, {"masking_rate": [0, "50"], "c": "b"})) == 1
    with pytest.raises(InputError, match="no column 'x'"):
        apply_filter(d, {"x": 1})
    with pytest.raises(InputError, match="keeps no rows"):
        apply_filter(d, {"c": "z"})


#: what must never appear in a report a person reads
_ZEROS = re.compile(r"(?<![\w.])[−-]?0\.000+(?![\d])")        # a string of zeros: 0.000, 0.0000 (axis ticks
#                                                               such as 0.0 are allowed)
_P_ZERO = re.compile(r"\bp\s*=\s*[−-]?(?:0(?:\.0*)?|\.0+)(?![\d.])")  # p = 0, p = 0.000, p = .000
_INTERNAL = re.compile(r"analyses\[\d+\]|Spec: given in Python|\battrs\[|_Skip|Traceback")


def assert_clean_text(text: str, where: str) -> None:
    """The rules every PDF obeys: no strings of zeros, no p = 0, no internal identifiers."""
    for rx, what in ((_ZEROS, "a string of zeros"), (_P_ZERO, "p = 0"), (_INTERNAL, "an internal identifier")):
        m = rx.search(text)
        assert m is None, f"{where}: {what} {m.group(0)!r} in …{text[max(m.start() - 80, 0):m.end() + 40]}…"


def test_clean_text_rules_catch_what_they_should():
    for bad in ("p = 0", "p = 0.000,", "SE 0.0000 here", "(p = .000)", "in analyses[3] (glmm)"):
        with pytest.raises(AssertionError):
            assert_clean_text(bad, "x")
    assert_clean_text("p = 0.004, p < 2.2e-16, 0.052 [0.011, 0.093], 10.05, 2.0e-05, 0 rows", "x")


@needs_poppler
def test_pdf_text_has_no_zero_strings_p_zero_or_internal_names(built):
    _, a, _ = built
    assert_clean_text(pdf_text(a.pdf), str(a.pdf))


@needs_poppler
@pytest.mark.parametrize("pdf", sorted((Path(__file__).resolve().parents[2] / "reports").glob("**/*.pdf")),
                         ids=lambda p: p.name)
def test_tracked_report_pdfs_are_clean(pdf):
    """The committed demo and seed reports obey the same rules (their figure PDFs hold no text of ours)."""
    if pdf.parent.name.endswith("_figures"):
        pytest.skip("figure file")
    assert_clean_text(pdf_text(pdf), str(pdf))


@needs_poppler
def test_methods_says_what_each_reader_said_about_its_file(tmp_path, recwarn):
    """The readers' notes (rows skipped, a run killed), each naming its file, are in the Methods section of the
    PDF; the report read each log and kept none of them."""
    src = Path(__file__).resolve().parents[1] / "conformance" / "inspect"
    for f in ("failfast.eval", "sigkill.eval"):
        shutil.copy(src / f, tmp_path / f)
    (tmp_path / "spec.yaml").write_text("title: Killed runs\nlogs: [failfast.eval, sigkill.eval]\n"
                                        "analyses:\n  - summary: {}\n")
    r = build_report(tmp_path / "spec.yaml", tmp_path / "r.pdf", html=False)
    text = " ".join(pdf_text(r.pdf).split())
    methods = text[text.index("Methods"):]
    assert "Reading the logs:" in methods
    assert "sigkill.eval: skipped 8 sample-epoch(s): not run: Inspect run killed (no header.json)" in methods
    assert "failfast.eval: the Inspect run ended with status 'error'" in methods


@needs_poppler
def test_small_expected_counts_are_a_methods_note_not_a_python_warning(tmp_path):
    """The confusion analysis' chi-square test with expected counts below 5: its caveat is in the PDF's Methods
    (it was only a UserWarning on stderr) and no Python warning is raised."""
    import warnings

    rows = [{"model": "m", "item": f"i{k}", "correct": g == p, "gold": g, "pred": p}
            for k, (g, p) in enumerate([("A", "A")] * 6 + [("B", "B")] * 5 + [("A", "B"), ("B", "A"), ("C", "C")])]
    pd.DataFrame(rows).to_csv(tmp_path / "log.csv", index=False)
    (tmp_path / "spec.yaml").write_text("title: Small counts\nlogs: [log.csv]\nanalyses:\n  - confusion: {}\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = build_report(tmp_path / "spec.yaml", tmp_path / "r.pdf", html=False)
    assert not r.skipped
    text = " ".join(pdf_text(r.pdf).split())
    methods = text[text.index("Methods"):]
    assert "Chi-squared approximation may be incorrect: 9 of 9 expected counts are below 5" in methods, methods
