"""The analysis plug-in interface: one registry, plain imports, the README's example plug-in runs."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from mrcstats.report import build_report
from mrcstats.report.analyses.base import COMMON_KEYS, Analysis
from mrcstats.report.analyses.registry import ANALYSES

REPO = Path(__file__).resolve().parents[2]


def test_registry_lists_each_type_once_with_its_keys():
    assert set(ANALYSES) >= {"summary", "glmm", "contingency", "confusion", "wh_extremes", "error_types",
                             "probability", "discrimination", "masking", "accuracy"}
    for name, cls in ANALYSES.items():
        assert issubclass(cls, Analysis) and cls.type == name and cls.title
        assert not set(cls.keys) & set(COMMON_KEYS), name


def test_report_has_no_lookup_by_name():
    for p in (REPO / "src" / "mrcstats" / "report").rglob("*.py"):
        text = p.read_text()
        assert "import_module" not in text and "importlib" not in text.replace("importlib.metadata", ""), p


def test_the_readme_example_plugin_runs(tmp_path, monkeypatch):
    readme = (REPO / "docs" / "plugins.md").read_text()
    m = re.search(r"# Developers: adding an analysis type.*?```python\n(.*?)```", readme, re.DOTALL)
    assert m
    code = m.group(1)
    assert len([ln for ln in code.splitlines() if ln.strip() and not ln.startswith("#")]) <= 15
    ns: dict = {}
    exec(compile(code, "README example", "exec"), ns)  # noqa: S102 - our own README
    monkeypatch.setitem(ANALYSES, "invalid_rate", ns["InvalidRate"])
    (tmp_path / "log.csv").write_text("model,item,correct\na,i1,true\na,i2,\nb,i1,false\nb,i2,true\n")
    (tmp_path / "s.yaml").write_text("logs: [log.csv]\nanalyses: [{type: invalid_rate, by: [model]}]\n")
    r = build_report(tmp_path / "s.yaml", tmp_path / "r.pdf")
    assert "Invalid answers" in r.sections and not r.skipped
    csv = (tmp_path / "r_tables" / "a0_invalid.csv").read_text()
    assert csv.splitlines()[1:] == ["a,2,1", "b,2,0"]


def test_unknown_key_of_a_plugin_is_named(tmp_path):
    from mrcstats.errors import InputError
    from mrcstats.report.spec import load_spec

    (tmp_path / "log.csv").write_text("model,item,correct\na,i1,true\n")
    (tmp_path / "s.yaml").write_text("logs: [log.csv]\nanalyses: [{type: summary, bye: [model]}]\n")
    with pytest.raises(InputError, match=r"analyses\[0\]\.bye: unknown key for a summary analysis"):
        load_spec(tmp_path / "s.yaml")
