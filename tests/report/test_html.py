"""The interactive HTML report: self-contained, the PDF's numbers, hover on figures, sortable tables.

The page is checked in headless Chromium (Debian's ``chromium``, installed by scripts/sysdeps.sh): it loads
with no console errors, a screenshot is taken, and its self-test hook (``#selftest``) sorts a table both ways.
"""
from __future__ import annotations

import html as H
import json
import re
import shutil
import subprocess

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (scripts/sysdeps.sh installs it)")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    from mrcstats.report.build import build_report
    from mrcstats.tasks.simulate import simulate_log

    d = tmp_path_factory.mktemp("html")
    log = simulate_log(seed=3, n_passages=30, questions_per_passage=3, masking_rates=(0, 50, 100),
                       conditions=("regular", "strict"), trials=2).log
    log.to_parquet(d / "log.parquet")
    spec = {"title": "HTML check", "seed": 1, "logs": [str(d / "log.parquet")],
            "analyses": [{"type": "summary", "by": ["model"]},
                         {"type": "glmm", "name": "m", "formula": "correct ~ model + (1 | cluster)", "ranef": True,
                          "filter": {"masking_rate": 0}},
                         {"type": "compare", "cluster": "cluster", "filter": {"masking_rate": 0, "condition": "regular"}},
                         {"type": "masking"}]}
    res = build_report(spec, d / "r.pdf", html=True)
    return res, res.html.read_text(encoding="utf-8")


def test_written_beside_the_pdf(report):
    res, page = report
    assert res.html == res.pdf.with_suffix(".html") and res.pdf.exists()
    assert res.to_dict()["html"] == str(res.html)
    assert page.startswith("<!DOCTYPE html>") and page.count("<table class=\"sortable\"") >= 3
    assert page.count('<figure class="fig"') >= 3


def test_self_contained(report):
    """Nothing is fetched at view time: no external scripts, styles, images, fonts or imports."""
    _, page = report
    assert not re.search(r"<(script|img|link|iframe)[^>]+(src|href)=", page, re.IGNORECASE)
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page, re.IGNORECASE)
    assert not re.search(r"url\((?!#)|@import|fetch\(|XMLHttpRequest", page)  # url(#id): in-page


def test_same_numbers_as_the_pdf_tables(report):
    """Every table cell of the HTML is the cell text the PDF's tables show (the .md written beside the PDF
    from the same Table objects)."""
    from mrcstats.report.analyses.base import slug

    res, page = report
    shown = {slug(H.unescape(x)) for x in re.findall(r'<figure class="tbl" [^>]*data-label="([^"]*)"', page)}
    assert len(shown) >= 3
    html_cells = {H.unescape(re.sub(r"<[^>]+>", "", c)).strip()
                  for c in re.findall(r"<t[dh](?: [^>]*)?>(.*?)</t[dh]>", page)}
    from mrcstats.report.tables import parse_markdown

    md_cells = set()
    for p in res.tables:
        if p.suffix == ".md" and p.stem in shown:      # the cells as written, Markdown escapes undone
            head, body = parse_markdown(p.read_text(encoding="utf-8"))
            md_cells |= {c for row in [head, *body] for c in row}
    numeric = {c for c in md_cells if re.search(r"\d", c)}
    assert len(numeric) > 20
    missing = numeric - html_cells
    assert not missing, sorted(missing)[:10]


def test_figures_have_hover_values(report):
    """Hover text: the point's label (cluster of the caterpillar), its value and its drawn interval."""
    _, page = report
    tips = [H.unescape(t) for t in re.findall(r'<circle class="hit"[^>]*><title>(.*?)</title>', page, re.DOTALL)]
    assert len(tips) > 50
    assert any(re.match(r"p\d+\n", t) and "conditional mode" in t and "interval: [" in t for t in tips)
    # the forest plot of the comparison: a model (axis label), its accuracy and its interval
    assert any(t.startswith(("alpha-7b", "beta-13b", "gamma-70b")) and "accuracy" in t and "interval: [" in t
               for t in tips)


def _chromium(args: list[str], tmp_path) -> subprocess.CompletedProcess:
    ud = tmp_path / "profile"
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={ud}", "--enable-logging=stderr", "--v=0", "--window-size=1280,1000",
           "--virtual-time-budget=3000", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


@needs_chromium
def test_loads_without_errors_and_sorts_in_chromium(report, tmp_path):
    res, _ = report
    out = _chromium(["--dump-dom", res.html.as_uri() + "#selftest"], tmp_path)
    m = re.search(r'<pre id="mrcstats-selftest">(.*?)</pre>', out.stdout, re.DOTALL)
    assert m, out.stderr[-2000:]
    got = json.loads(H.unescape(m.group(1)))
    assert got["errors"] == [], got
    assert got["tables"] >= 3 and got["hits"] > 50
    assert got["sorted"]["ascending"] and got["sorted"]["descending"], got
    console = [ln for ln in out.stderr.splitlines() if "CONSOLE" in ln or "Uncaught" in ln]
    assert not console, console


@needs_chromium
def test_screenshots(report, tmp_path):
    res, _ = report
    for name, url in (("first", res.html.as_uri()), ("hover", res.html.as_uri() + "#hover=5")):
        png = tmp_path / f"{name}.png"
        _chromium([f"--screenshot={png}", url], tmp_path)
        assert png.exists() and png.stat().st_size > 10_000, name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_format_html(tmp_path, report, capsys):
    from mrcstats.cli import main

    res, _ = report
    spec = tmp_path / "s.yaml"
    spec.write_text(f"title: T\nlogs: [{res.pdf.parent / 'log.parquet'}]\nanalyses: [summary]\n")
    assert main(["report", str(spec), "--out", str(tmp_path / "t.pdf"), "--format", "html", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["html"] == str(tmp_path / "t.html") and (tmp_path / "t.html").exists()
    assert main(["report", str(spec), "--out", str(tmp_path / "u.pdf")]) == 0
    assert not (tmp_path / "u.html").exists()
