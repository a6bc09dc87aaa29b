"""Spec validation: every error names the file and the key."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from mrcstats.errors import InputError
from mrcstats.report.spec import load_spec

REPO = Path(__file__).resolve().parents[2]


def _write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "log.csv").write_text("model,item,correct\na,i1,true\nb,i1,false\n")
    p = tmp_path / "spec.yaml"
    p.write_text(text)
    return p


@pytest.mark.parametrize("text, key, what", [
    ("logs: [log.csv]\nanalyses: [{type: glmm}]\n", "analyses[0].formula", "missing"),
    ("logs: [log.csv]\nanalyses: [{type: glmm, formula: 'y ~ x', formul: 1}]\n", "analyses[0].formul", "unknown key"),
    ("logs: [log.csv]\nanalyses: [{type: glmn}]\n", "analyses[0].type", "expected one of"),
    ("logs: [log.csv]\nanalyses: [{type: glmm, formula: 'y ~ x', nagq: two}]\n", "analyses[0].nagq", "integer"),
    ("logs: [log.csv]\nanalyses: [{type: glmm, formula: 'y ~ x', contrasts: {m: helmert}}]\n",
     "analyses[0].contrasts.m", "sum or treatment"),
    ("logs: [nope.csv]\nanalyses: []\n", "logs[0].path", "does not exist"),
    ("analyses: []\n", "logs", "missing"),
    ("logs: [log.csv]\n", "analyses", "missing"),
    ("logs: [log.csv]\nanalyses: []\ntitel: x\n", "titel", "unknown key"),
    ("logs: [log.csv]\nanalyses: [{type: wh_extremes, glmm: m}]\n", "analyses[0].glmm", "no glmm analysis"),
    ("logs: [log.csv]\nanalyses: [{type: discrimination, cutoffs: [a]}]\n", "analyses[0].cutoffs", "numbers"),
    ("logs: [log.csv]\nanalyses: [{type: masking, acc0: 89.84}]\n", "analyses[0].acc0", "fraction"),
    ("logs: [log.csv]\nanalyses: [{type: contingency, rows: a, cols: b, tests: [t]}]\n", "analyses[0].tests",
     "fisher"),
])
def test_errors_name_the_key(tmp_path, text, key, what):
    p = _write(tmp_path, text)
    with pytest.raises(InputError) as ei:
        load_spec(p)
    msg = str(ei.value)
    assert msg.startswith(f"{p}: {key}:"), msg
    assert what in msg
    assert "\n" not in msg


def test_bad_yaml_and_empty(tmp_path):
    p = _write(tmp_path, "logs: [log.csv\n")
    with pytest.raises(InputError, match=r"not valid YAML \(line"):
        load_spec(p)
    p.write_text("")
    with pytest.raises(InputError, match="empty"):
        load_spec(p)
    with pytest.raises(InputError, match="not found"):
        load_spec(tmp_path / "missing.yaml")


def test_short_forms_and_paths_relative_to_the_spec(tmp_path):
    p = _write(tmp_path, "title: T\nlogs: log.csv\nanalyses:\n  - summary\n  - glmm: {formula: 'correct ~ 1 + (1|item)'}\n")
    s = load_spec(p)
    assert s.logs[0].path == tmp_path / "log.csv"
    assert [a.type for a in s.analyses] == ["summary", "glmm"]
    assert s.analyses[1].get("name") == "model 1" and s.analyses[1].get("nagq") == 1
    assert s.to_dict()["analyses"][0]["by"] == ["model"]


def test_readme_example_spec_is_valid(tmp_path):
    """The example on the report page of the docs (docs/report.md) validates (its paths made to exist)."""
    text = (REPO / "docs" / "report.md").read_text()
    m = re.search(r"<!-- section:report -->.*?```yaml\n(.*?)```", text, re.DOTALL)
    assert m, "docs/report.md has a yaml example"
    example = m.group(1)
    for name in set(re.findall(r"([\w./-]+\.(?:parquet|csv))", example)):
        target = tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("model,item,correct\na,i1,true\n")
    (tmp_path / "spec.yaml").write_text(example)
    s = load_spec(tmp_path / "spec.yaml")
    assert s.analyses
