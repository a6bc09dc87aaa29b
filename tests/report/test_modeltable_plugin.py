"""The ``modeltable`` report analysis: GLMMs fitted earlier in the spec, side by side."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mrcstats.errors import InputError
from mrcstats.report import build_report
from mrcstats.report.analyses.registry import ANALYSES
from mrcstats.report.spec import load_spec


def _log(tmp: Path) -> None:
    rng = np.random.default_rng(11)
    rows = []
    for p in range(40):
        u, x, d = rng.normal(0, 0.7), rng.normal(), rng.normal()
        for q in range(3):
            for m, b in (("m-a", -0.5), ("m-b", 0.5)):
                eta = 0.6 + b - 0.5 * x + 0.3 * d + u
                rows.append({"model": m, "item": f"p{p}:{q}", "cluster": f"p{p}", "scaled_tok": x, "scaled_den": d,
                             "correct": bool(rng.random() < 1 / (1 + np.exp(-eta)))})
    pd.DataFrame(rows).to_csv(tmp / "log.csv", index=False)


SPEC = """\
title: Model table
logs: [log.csv]
analyses:
  - glmm: {name: tokens, formula: "correct ~ scaled_tok + model + (1 | cluster)", ranef: false}
  - glmm: {name: density, formula: "correct ~ scaled_tok + scaled_den + model + (1 | cluster)", ranef: false}
  - modeltable:
      glmms: [tokens, density]
      model_names: {tokens: Tokens, density: Tokens + density}
      stars: true
      coef_rename: {scaled_tok: Tokens (SD), scaled_den: Density (SD)}
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mt")
    _log(tmp)
    (tmp / "spec.yaml").write_text(SPEC)
    return tmp, build_report(tmp / "spec.yaml", tmp / "r.pdf")


def test_registered():
    assert ANALYSES["modeltable"].type == "modeltable"


def test_report_lays_the_fits_side_by_side(built):
    tmp, r = built
    assert not r.skipped and "Models side by side: Tokens, Tokens + density" in r.sections
    tex = (tmp / "r_tables" / "a2_modeltable.tex").read_text()
    assert tex.count("\\midrule") == 3 and "Tokens + density" in tex and "Density (SD)" in tex
    csv = pd.read_csv(tmp / "r_tables" / "a2_modeltable.csv")
    assert set(csv["model"]) == {"Tokens", "Tokens + density"}
    assert set(csv["block"]) == {"coef", "ranef", "gof"}
    assert r.headline["modeltable"]["a2"]["models"] == ["Tokens", "Tokens + density"]


@pytest.mark.skipif(not shutil.which("pdftotext"), reason="poppler-utils (pdftotext) not installed")
def test_pdf_shows_the_table(built):
    _tmp, r = built
    text = subprocess.run(["pdftotext", "-layout", str(r.pdf), "-"], capture_output=True, text=True,
                          check=True).stdout
    for s in ("Tokens + density", "SD (Intercept | cluster)", "Num. groups: cluster", "Log likelihood",
              "* p < .05, ** p < .01, *** p < .001"):
        assert s in text, s


@pytest.mark.parametrize("analyses, where, what", [
    ("[{modeltable: {glmms: [tok]}}]", "analyses[0].glmms[0]", "no glmm analysis named 'tok'"),
    ("[{modeltable: {glmms: [m]}}, {glmm: {name: m, formula: 'correct ~ 1 + (1|cluster)'}}]",
     "analyses[0].glmms[0]", "before this one"),
    ("[{glmm: {name: m, formula: 'correct ~ 1 + (1|cluster)'}}, {modeltable: {glmms: [m], gof: [r2]}}]",
     "analyses[1].gof[0]", "expected one of"),
    ("[{glmm: {name: m, formula: 'correct ~ 1 + (1|cluster)'}}, {modeltable: {glmms: [m], statistic: t}}]",
     "analyses[1].statistic", ""),
    (("[{glmm: {name: m, formula: 'correct ~ 1 + (1|cluster)'}}, {modeltable: {glmms: [m],"
     " model_names: {x: X}}}]"), "analyses[1].model_names.x", "not one of"),
    ("[{glmm: {name: m, formula: 'correct ~ 1 + (1|cluster)'}}, {modeltable: {glmms: []}}]",
     "analyses[1].glmms", ""),
])
def test_spec_errors_name_the_key(tmp_path, analyses, where, what):
    _log(tmp_path)
    (tmp_path / "s.yaml").write_text(f"logs: [log.csv]\nanalyses: {analyses}\n")
    with pytest.raises(InputError, match=re.escape(where) + ".*" + re.escape(what)):
        load_spec(tmp_path / "s.yaml")


def test_unfitted_glmm_skips_the_table_with_a_note(tmp_path, monkeypatch):
    import mrcstats.report.analyses.glmm as G

    real = G.glmer

    def no_density(formula, *a, **kw):
        if "scaled_den" in str(formula):
            raise NotImplementedError("test: engine unavailable")
        return real(formula, *a, **kw)

    monkeypatch.setattr(G, "glmer", no_density)
    _log(tmp_path)
    (tmp_path / "spec.yaml").write_text(SPEC)
    r = build_report(tmp_path / "spec.yaml", tmp_path / "r.pdf")
    assert any("density could not be fitted" in s for s in r.skipped)


def test_readme_spec_fragment_is_valid(tmp_path):
    """The docs' `modeltable` spec fragment (docs/modeltable.md) validates after two glmm analyses of those names."""
    readme = (Path(__file__).resolve().parents[2] / "docs" / "modeltable.md").read_text()
    m = re.search(r"# Side-by-side model tables\n.*?```yaml\n(.*?)```", readme, re.DOTALL)
    assert m
    _log(tmp_path)
    head = ("logs: [log.csv]\nanalyses:\n"
            "  - glmm: {name: token count, formula: 'correct ~ scaled_tok + (1 | cluster)'}\n"
            "  - glmm: {name: syntactic density, formula: 'correct ~ scaled_den + (1 | cluster)'}\n")
    (tmp_path / "s.yaml").write_text(head + m.group(1))
    spec = load_spec(tmp_path / "s.yaml")
    assert spec.analyses[-1].type == "modeltable" and spec.analyses[-1].get("statistic") == "ci"
