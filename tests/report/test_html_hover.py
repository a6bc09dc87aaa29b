"""Hover texts of the HTML report (issue 36): both models, the value, the interval and p in every cell of the
pairwise matrix, the item id in the screening plot, and large figures sampled with a caption that says so."""
from __future__ import annotations

import html as H
import re

import numpy as np
import pandas as pd

from mrcstats.report import figures as F
from mrcstats.report.html import MAX_TARGETS, HtmlDocument, figure_svg


def _tips(svg: str) -> list[str]:
    return [H.unescape(t) for t in re.findall(r'<circle class="hit"[^>]*><title>(.*?)</title>', svg, re.DOTALL)]


def test_pairwise_matrix_hover_names_both_models_value_interval_and_p():
    for k in (4, 30):       # text cells (k <= 24) and the dense map
        names = [f"model-{i:02d}" for i in range(k)]
        acc = np.linspace(0.4, 0.8, k)
        d = acc[:, None] - acc[None, :]
        np.fill_diagonal(d, np.nan)
        diff = pd.DataFrame(d, index=names, columns=names)
        low, high = diff - 0.05, diff + 0.05
        p = pd.DataFrame(np.full((k, k), 2.28e-318), index=names, columns=names)
        svg, n, sampled = figure_svg(F.pairwise_matrix_plot(diff, diff.abs() > 0.1, low=low, high=high, p=p,
                                                            p_label="Holm-adjusted p"))
        tips = _tips(svg)
        assert n == len(tips) == k * (k - 1) and sampled == []
        want = (f"model-00 − model-01\nrow − column (points): {100 * (acc[0] - acc[1]):.4g}\n"
                f"interval: [{100 * (acc[0] - acc[1] - 0.05):.4g}, {100 * (acc[0] - acc[1] + 0.05):.4g}]\n"
                "Holm-adjusted p: < 2.2e-16")
        assert want in tips
        assert all(re.match(r"model-\d\d − model-\d\d\n", t) and "interval: [" in t for t in tips)


def test_screening_plot_hover_names_the_item():
    from mrcstats.report.analyses.screen import discrimination_difficulty_plot

    items = pd.DataFrame({"item": [f"q{i}" for i in range(20)], "b_rasch": np.linspace(-2, 2, 20),
                          "a": np.linspace(-0.5, 2, 20), "flag": [True] * 2 + [False] * 18,
                          "score": np.linspace(0.99, 0.01, 20)})
    svg, n, _ = figure_svg(discrimination_difficulty_plot(items, top=3))
    tips = _tips(svg)
    assert n == 20
    assert {re.search(r"(q\d+) \(P\(wrong key\)", t).group(1) for t in tips} == set(items["item"])
    assert any(t.startswith("flagged (2) · q0 (P(wrong key) 0.99)") for t in tips)


def test_a_large_figure_is_sampled_and_the_caption_says_so():
    n = MAX_TARGETS * 2 + 345
    fig, ax = F.new_figure("column")
    rng = np.random.default_rng(0)
    pts = ax.scatter(rng.random(n), rng.random(n), label="items")
    F.point_labels(pts, [f"i{i}" for i in range(n)])
    doc = HtmlDocument("t")
    doc.figure(fig, "Many points.")
    page = doc.render()
    assert f"Hover targets on an evenly spaced sample (more than {MAX_TARGETS:,} points in a set): {MAX_TARGETS:,} of {n:,} points of “items”; the figure draws them all." in page
    assert len(_tips(page)) == MAX_TARGETS
    ids = sorted(int(re.match(r"items · i(\d+)", t).group(1)) for t in _tips(page))
    assert ids[0] == 0 and ids[-1] == n - 1     # an even sample over all points, not the first ones
    small = HtmlDocument("t")
    fig, ax = F.new_figure("column")
    ax.scatter([0, 1], [0, 1])
    small.figure(fig, "Two points.")
    assert "evenly spaced sample" not in small.render()
