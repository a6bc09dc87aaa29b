"""Names are data, never markup (issue 24, items 5 and 6): a model name with ``$`` is drawn as written in
every figure (never parsed as mathtext: ``$x^{$`` crashed the report, ``cost $x^2$ tier`` became
"cost x² tier"), and HTML or Markdown in a name is escaped in the Markdown tables as in the HTML ones."""
from __future__ import annotations

import html
import random

import numpy as np
import pandas as pd
import pytest

from mrcstats.report import figures as F
from mrcstats.report.tables import PairTable, Table, md_escape, parse_markdown

NAMES = ["$x^{$", "cost $x^2$ tier", "<script>alert(1)</script>", "a|b \\ *c* _d_ [e](f) `g`"]


def _svg_text(fig, tmp_path, name="f") -> str:
    (path,) = F.save_figure(fig, tmp_path / f"{name}.svg")  # svg.fonttype none: text stays text
    return html.unescape(path.read_text())


@pytest.mark.parametrize("name", NAMES[:2])
def test_plain_keeps_dollars_literal(name: str) -> None:
    from matplotlib.text import Text

    shown, is_math = Text(text=F.plain(name))._preprocess_math(F.plain(name))
    assert (shown, is_math) == (name, False)
    assert F.plain("x" * 100, 10) == "x" * 9 + "…"


def test_every_figure_draws_names_as_written(tmp_path) -> None:
    rng = np.random.default_rng(0)
    n = 40
    d = pd.DataFrame({"model": np.repeat(NAMES, n), "x": rng.normal(size=n * len(NAMES))})
    d["correct"] = pd.array(rng.random(len(d)) < 0.6, dtype="boolean")
    figs = {
        "loess": F.loess_plot(d, "x", xlabel=NAMES[1]),
        "masking": F.masking_curves(pd.DataFrame({"condition": np.repeat(NAMES, 2), "masking_rate": [0, 50] * 4,
                                                  "acc": 0.5}), title=NAMES[0]),
        "indicator": F.indicator_plot(pd.DataFrame({"model": np.repeat(NAMES, 2), "masking_rate": [0, 50] * 4,
                                                    "na": 1.0}), group="model"),
        "confusion": F.confusion_matrix_plot(pd.DataFrame(np.ones((4, 4)), index=NAMES, columns=NAMES),
                                             title=NAMES[1]),
        "bars": F.error_type_bars(pd.DataFrame({NAMES[0]: [1, 2], NAMES[1]: [3, 4]}, index=NAMES[2:])),
        "bar": F.bar_plot(pd.DataFrame({"m": NAMES, "acc": 0.5}), "m", "acc", title=NAMES[0]),
        "pairs": F.pairwise_matrix_plot(pd.DataFrame(np.zeros((4, 4)), index=NAMES, columns=NAMES)),
        "forest": F.forest_plot(pd.DataFrame({"model": NAMES, "accuracy": 0.5, "ci_low": 0.4, "ci_high": 0.6})),
        "fixef": F.fixef_truth_plot(pd.DataFrame({"term": NAMES, "estimate": 0.1, "se": 0.1}), {}),
        "subset": F.subset_error_plot(pd.DataFrame({"method": NAMES[:2], "estimator": NAMES[2:], "k": [5, 5],
                                                    "mae": [0.1, 0.2]})),
        "caterpillar": F.caterpillar_plot(pd.DataFrame({"level": ["a"], "mode": [0.0]}), title=NAMES[0]),
        "items": F.item_map_plot(pd.DataFrame({"a": [1.0], "b": [0.0]}), title=NAMES[1]),
    }
    for key, fig in figs.items():
        text = _svg_text(fig, tmp_path, key)
        F.figure_pdf_bytes(fig)
        assert "x^2" in text or "x^{" in text or "script" in text, key
        for name in NAMES[:2]:
            if name.replace("$", "") in text.replace("$", ""):  # every name this figure shows: exactly as written
                assert name in text, (key, name)


def test_report_with_markup_in_model_names(tmp_path) -> None:
    from mrcstats.report import build_report

    rnd = random.Random(0)
    rows = [{"model": m, "item": str(i), "correct": rnd.randint(0, 1), "cluster": f"c{i // 3}",
             "masking_rate": mr, "condition": "regular"} for m in NAMES for i in range(12) for mr in (0, 50)]
    pd.DataFrame(rows).to_csv(tmp_path / "names.csv", index=False)
    (tmp_path / "spec.yaml").write_text(
        "title: names\nlogs:\n  - path: names.csv\nanalyses:\n  - type: summary\n    by: [model]\n"
        "  - type: compare\n    filter: {masking_rate: 0}\n  - type: masking\n")
    res = build_report(tmp_path / "spec.yaml", tmp_path / "r" / "rep.pdf")
    assert res.pages >= 1 and res.figures
    mds = [p for p in res.tables if p.suffix == ".md"]
    assert mds
    for p in mds:
        text = p.read_text()
        assert "<script" not in text and "[e](f)" not in text and "\\[e\\](f)" in text, p
    summary = next(p for p in mds if "summary" in p.name)
    _, body = parse_markdown(summary.read_text())
    assert sorted(r[0] for r in body) == sorted(NAMES)
    assert "&lt;script&gt;" in summary.read_text()
    assert "&lt;script&gt;" in summary.with_suffix(".html").read_text()


def test_markdown_tables_escape_html_and_markup() -> None:
    assert md_escape("<script>alert(1)</script>") == "&lt;script&gt;alert(1)&lt;/script&gt;"
    t = Table(pd.DataFrame({"model": NAMES, "n": range(4)}), caption="<b>caption</b> | x")
    md = t.to_markdown()
    assert "<script>" not in md and "<b>" not in md and "&lt;b&gt;caption&lt;/b&gt; \\| x" in md
    head, body = parse_markdown(md)
    assert head == ["model", "n"] and [r[0] for r in body] == NAMES
    pt = PairTable(pd.DataFrame({"Model": NAMES}), raw=pd.DataFrame({"model": NAMES}))
    assert "<script>" not in pt.to_markdown()


def test_pdf_table_with_a_very_long_name(tmp_path) -> None:
    """Fuzz finding: a 300-character model name made reportlab lay a table out with a negative column width
    (ValueError, exit 1); long words are now split inside their cell."""
    from mrcstats.report.pdf import ReportDocument

    names = ["GPT-4o", "L" * 300, "x" * 1000]
    doc = ReportDocument("t", "", "")
    doc.table(PairTable(pd.DataFrame({"Model": names, "Other": names[::-1], "n": [1, 2, 3]}),
                        raw=pd.DataFrame({"model": names}), stub=2))
    doc.table(Table(pd.DataFrame({"a": ["y" * 500], "b": ["z" * 500], "c": [1.0]})))
    doc.build(tmp_path / "t.pdf")
    assert doc.pages >= 1 and (tmp_path / "t.pdf").stat().st_size > 1000
