"""Side-by-side model tables (mrcstats.table): numbers equal each model's own table, four exports."""
from __future__ import annotations

import io
import math
import re

import numpy as np
import pandas as pd
import pytest

import mrcstats
from mrcstats.errors import InputError
from mrcstats.report.format import parse_formatted
from mrcstats.report.modeltable import ModelTable, table
from mrcstats.report.tables import parse_html, parse_markdown


@pytest.fixture(scope="module")
def fits():
    rng = np.random.default_rng(7)
    groups, per = 30, 6
    g = np.repeat(np.arange(groups), per)
    n = g.size
    f = rng.choice(np.array(["a", "b", "c"]), n)
    x = rng.normal(size=n)
    eta = 0.2 + 0.6 * x + 0.5 * (f == "b") - 0.4 * (f == "c") + rng.normal(0, 0.9, groups)[g]
    df = pd.DataFrame({"g": [f"g{i}" for i in g], "f": f, "x": x,
                       "y": (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(int)})
    m1 = mrcstats.glmer("y ~ x + (1 | g)", df)
    m2 = mrcstats.glmer("y ~ x + f + (1 | g)", df)
    return m1, m2


def _cells(t: ModelTable) -> dict[str, list[str]]:
    """label -> printed cells (the row under a coefficient is keyed '<label>/under')."""
    out, last = {}, None
    for r in t._rows():
        key = r[1] if r[1] else f"{last}/under"
        out[key] = r[2:]
        last = r[1] or last
    return out


def _close(text: str, value: float, decimals: int) -> None:
    assert abs(parse_formatted(text) - value) <= 0.5 * 10 ** -decimals + 1e-12, (text, value)


def test_numbers_are_each_models_own(fits):
    m1, m2 = fits
    t = mrcstats.table({"Base": m1, "Factor": m2})
    assert isinstance(t, ModelTable) and t.models == ("Base", "Factor")
    d = t.to_frame()
    for name, m in (("Base", m1), ("Factor", m2)):
        ct = m.coef_table()
        sub = d[(d["model"] == name) & (d["block"] == "coef")]
        got = sub.pivot(index="term", columns="statistic", values="value").astype(float)
        assert set(got.index) == set(ct.index)
        for term in ct.index:   # exactly the numbers of the model's coefficient table
            assert got.loc[term, "estimate"] == ct.loc[term, "Estimate"]
            assert got.loc[term, "std_error"] == ct.loc[term, "Std. Error"]
            assert got.loc[term, "z"] == ct.loc[term, "z value"]
            assert got.loc[term, "p_value"] == ct.loc[term, "Pr(>|z|)"]
        sd = d[(d["model"] == name) & (d["block"] == "ranef")]
        assert list(sd["value"]) == list(m.varcorr["sd"])
        gof = d[(d["model"] == name) & (d["block"] == "gof")].set_index("term")["value"]
        assert gof["nobs"] == m.nobs and gof["groups:g"] == m.ngroups["g"]
        assert (gof["aic"], gof["bic"], gof["loglik"]) == (m.aic, m.bic, m.loglik)
    # rows in union order: model 1's terms, then model 2's new ones; model 1 has blanks for f
    cells = _cells(t)
    assert [r[1] for r in t._rows() if r[0] == "coef" and r[1]] == ["(Intercept)", "x", "fb", "fc"]
    assert cells["fb"][0] == "" and cells["fb/under"][0] == ""
    # printed cells read back as the numbers (3 decimals for estimates/SEs, 1 for AIC/BIC/logLik)
    for j, m in enumerate((m1, m2)):
        for term in m.coef_table().index:
            _close(cells[term][j], m.fixef[term], 3)
            assert cells[f"{term}/under"][j].startswith("(")
            _close(cells[f"{term}/under"][j].strip("()"), m.se[term], 3)
        _close(cells["SD (Intercept | g)"][j], float(m.varcorr["sd"].iloc[0]), 3)
        assert cells["Num. obs."][j] == str(m.nobs)
        assert cells["Num. groups: g"][j] == str(m.ngroups["g"])
        _close(cells["AIC"][j], m.aic, 1)
        _close(cells["Log likelihood"][j], m.loglik, 1)


def test_printed_estimates_agree_with_the_models_summary(fits):
    """The table and each model's lme4-layout summary() print the same estimates and SEs."""
    m1, m2 = fits
    cells = _cells(table([m1, m2]))
    for j, m in enumerate((m1, m2)):
        text = m.summary().split("Fixed effects")[1].split("---")[0]   # the heading names the vcov rule
        lines = text.strip().splitlines()
        head = next(i for i, ln in enumerate(lines) if "Estimate" in ln)
        for line in lines[head + 1:]:
            term, est, se = line.split()[:3]
            assert abs(parse_formatted(cells[term][j]) - float(est)) <= 0.0005 + 1e-5
            assert abs(parse_formatted(cells[f"{term}/under"][j].strip("()")) - float(se)) <= 0.0005 + 1e-5


def test_latex_booktabs_with_rules_between_blocks(fits):
    tex = table([*fits], stars=True, caption="Two models").to_latex()
    assert tex.count("\\toprule") == 1 and tex.count("\\bottomrule") == 1
    assert tex.count("\\midrule") == 3          # after the header, before random effects, before fit rows
    assert "\\begin{tabular}{lcc}" in tex and "\\caption{Two models}" in tex
    body = tex.split("\\begin{tabular}")[1]
    blocks = body.split("\\midrule")
    assert "x &" in blocks[1] and "SD (Intercept $|$ g)" in blocks[2] and "Num. obs." in blocks[3]
    assert "$^{***}$" in tex                    # x is far from zero in both fits
    assert "p $<$ .001" in tex
    nostars = table([*fits]).to_latex()
    assert "$^{" not in nostars and "p $<$ .05" not in nostars


def test_markdown_html_and_csv(fits):
    t = table({"A": fits[0], "B": fits[1]}, stars=True)
    head, body = parse_markdown(t.to_markdown())
    assert head == ["", "A", "B"]
    assert [r[1:] for r in body] == [r[2:] for r in t._rows()]   # stars unescaped back
    hhead, hbody = parse_html(t.to_html())
    assert hhead == ["", "A", "B"] and hbody == [r[1:] for r in t._rows()]
    assert t.to_html().count("<tbody") == 3
    back = pd.read_csv(io.StringIO(t.to_csv()))
    assert list(back.columns) == list(t.to_frame().columns)
    orig = pd.to_numeric(t.to_frame()["value"]).to_numpy(float)
    assert np.array_equal(back["value"].to_numpy(float), orig)   # unrounded, exact
    d = t.to_dict()
    assert d["models"] == ["A", "B"] and len(d["rows"]) == len(t.to_frame())
    assert "A" in t.summary() and "Num. obs." in str(t)


def test_write_and_to_csv_path(fits, tmp_path):
    t = table([*fits])
    t.to_csv(tmp_path / "m.csv")
    assert (tmp_path / "m.csv").read_text() == t.to_csv()
    paths = t.write(tmp_path / "tab")
    assert sorted(p.suffix for p in paths) == [".csv", ".html", ".md", ".tex"]
    with pytest.raises(InputError, match="unknown format"):
        t.write(tmp_path / "tab", formats=("docx",))


def test_ci_exponentiate_inline_and_none(fits):
    m1, m2 = fits
    t = table([m1, m2], statistic="ci", conf_level=0.9)
    d = t.to_frame()
    z = 1.6448536269514722
    row = d[(d["model"] == "(2)") & (d["term"] == "x")].set_index("statistic")["value"]
    assert math.isclose(row["conf_low"], m2.fixef["x"] - z * m2.se["x"], rel_tol=1e-12)
    assert math.isclose(row["conf_high"], m2.fixef["x"] + z * m2.se["x"], rel_tol=1e-12)
    assert (row["conf_low"], row["conf_high"]) == tuple(m2.confint("Wald", 0.9, parm="beta_").to_frame().loc["x"])
    assert _cells(t)["x/under"][1].startswith("[") and "90% Wald" in t.notes[0]
    e = table([m2], exponentiate=True, statistic="ci", layout="inline")
    de = e.to_frame().set_index(["term", "statistic"])["value"]
    assert math.isclose(de[("x", "estimate")], math.exp(m2.fixef["x"]))
    assert math.isclose(de[("x", "std_error")], math.exp(m2.fixef["x"]) * m2.se["x"])
    cell = _cells(e)["x"][0]
    assert re.fullmatch(r"\d+\.\d\d \[\d+\.\d\d, \d+\.\d\d\]", cell) and "Odds ratios" in e.notes[0]
    # random-effect SDs and fit rows are never exponentiated
    assert _cells(e)["SD (Intercept | g)"][0] == _cells(table([m2]))["SD (Intercept | g)"][0]
    n = table([m1, m2], statistic="none")
    assert "x/under" not in _cells(n)


def test_coef_map_and_rename(fits):
    m1, m2 = fits
    t = table([m1, m2], coef_map={"x": "Length (SD)", "fb": "Level b"}, gof=("nobs",))
    labels = [r[1] for r in t._rows() if r[1]]
    assert labels == ["Length (SD)", "Level b", "SD (Intercept | g)", "Num. obs."]
    r = table([m1, m2], coef_rename={"(Intercept)": "Constant"})
    assert [x[1] for x in r._rows() if x[0] == "coef" and x[1]] == ["Constant", "x", "fb", "fc"]
    with pytest.raises(InputError, match="no model has"):
        table([m1, m2], coef_map=["x", "LLM1"])
    with pytest.raises(InputError, match="one label"):
        table([m1, m2], coef_rename={"fb": "f", "fc": "f"})


def test_custom_stars_and_model_flags(fits):
    m1, m2 = fits
    t = table([m1, m2], stars={"+": 0.1, "*": 0.05})
    assert "+ p < .1, * p < .05" in t.notes
    import dataclasses
    s = dataclasses.replace(m1, singular=True)
    assert any("(1): singular fit" in n for n in table([s, m2]).notes)


def test_correlation_rows_when_present(fits):
    m1 = fits[0]

    class WithCor:   # a fit whose tidy table has a random-effect correlation (broom.mixed names)
        nobs, ngroups, aic, bic, loglik = m1.nobs, m1.ngroups, m1.aic, m1.bic, m1.loglik
        confint = m1.confint

        def to_frame(self):
            fr = m1.to_frame()
            extra = pd.DataFrame([{"effect": "ran_pars", "group": "g", "term": "sd__x", "estimate": 0.3},
                                  {"effect": "ran_pars", "group": "g", "term": "cor__(Intercept).x",
                                   "estimate": -0.25}])
            return pd.concat([fr, extra], ignore_index=True)

    cells = _cells(table([WithCor()]))
    assert cells["SD (x | g)"] == ["0.300"] and cells["Cor (Intercept, x | g)"] == ["−0.25"]


@pytest.mark.parametrize("args, kw, match", [
    (([],), {}, "no models"),
    (([object()],), {}, "not a fitted GLMM"),
    ((None,), {"statistic": "t"}, "statistic must be"),
    ((None,), {"layout": "wide"}, "layout must be"),
    ((None,), {"conf_level": 95}, "conf_level"),
    ((None,), {"gof": ("r2",)}, "unknown gof"),
    ((None,), {"stars": "yes"}, "stars must be"),
])
def test_bad_input_is_one_clear_error(fits, args, kw, match):
    models = list(fits) if args[0] is None else args[0]
    with pytest.raises(InputError, match=match):
        table(models, **kw)


def test_lazy_export():
    assert mrcstats.table is table
    assert "table" in dir(mrcstats)


def test_readme_example_runs(tmp_path, monkeypatch, capsys):
    """The Python example of the docs' "Side-by-side model tables" page runs as written."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "modeltable.md").read_text()
    m = re.search(r"# Side-by-side model tables\n.*?```python\n(.*?)```", text, re.DOTALL)
    assert m, "docs/modeltable.md has a Python example"
    import runpy

    monkeypatch.chdir(tmp_path)
    (tmp_path / "readme_example.py").write_text(m.group(1))
    runpy.run_path(str(tmp_path / "readme_example.py"), run_name="readme_example")
    out = capsys.readouterr().out
    assert "Tokens (SD)" in out and "Num. groups: passage" in out
    assert (tmp_path / "models.csv").exists()


def test_to_table_for_the_pdf_route(fits):
    t = table({"A": fits[0], "B": fits[1]})
    tab = t.to_table()
    assert tab.header == ["", "A", "B"]
    assert tab.cells() == [r[1:] for r in t._rows()]
    starts = t.block_starts()
    blocks = [r[0] for r in t._rows()]
    assert [blocks[i] for i in starts] == ["ranef", "gof"] and tab.rules == starts
    # the view's exports are the model table's: rules between blocks in LaTeX, the long form in CSV
    assert tab.to_latex() == t.to_latex() and tab.to_csv() == t.to_csv() and tab.to_html() == t.to_html()
    import dataclasses
    renamed = dataclasses.replace(tab, caption="Table caption set by the report")
    assert "\\caption{Table caption set by the report}" in renamed.to_latex()
