"""p-values print one way everywhere: R's ``format.pval`` (issue 36), checked against R in the same run,
and a scan that no other p-value formatting is left in the source."""
from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrcstats._pformat import EPS, P_FLOOR_TEXT, format_pval, format_pval_columns, format_signif

SRC = Path(__file__).resolve().parents[1] / "src" / "mrcstats"


def test_format_pval_examples():
    assert P_FLOOR_TEXT == "< 2.2e-16" == format_pval(0.0) == format_pval(2.28e-318) == format_pval(1e-20)
    assert format_pval(EPS) == "2.22e-16"
    assert format_pval(0.04231234) == "0.04231"
    assert format_pval(3.2e-7) == "3.2e-07"
    assert format_pval(0.0001) == "1e-04"
    assert format_pval(0.00012345) == "0.0001234"
    assert format_pval(1.0) == "1"
    assert format_pval(1e-20, digits=3) == "<2e-16"
    assert format_pval(None) == "NA" == format_pval(float("nan")) == format_pval(pd.NA)
    assert format_pval(None, na="–") == "–"
    assert format_signif(-0.00001234, 2) == "-1.2e-05"


def test_format_pval_columns_formats_only_the_p_columns():
    df = pd.DataFrame({"stat": [1.5, 2.5], "p": [0.5, 0.0]})
    out = format_pval_columns(df, ["p", "absent"])
    assert list(out["p"]) == ["0.5", "< 2.2e-16"] and list(out["stat"]) == [1.5, 2.5]
    assert list(df["p"]) == [0.5, 0.0]


@given(st.floats(min_value=0.0, max_value=1.0), st.integers(min_value=1, max_value=8))
def test_format_pval_never_prints_zero_and_reads_back(p, digits):
    s = format_pval(p, digits)
    assert not re.fullmatch(r"0(\.0*)?(e[-+]?\d+)?", s)
    if p >= EPS:
        assert float(s) == pytest.approx(p, rel=10.0 ** (1 - digits))
    else:
        assert s.startswith("<")


def test_format_pval_equals_r_format_pval(rscript):
    """R's format.pval(p, digits) on 400 values from 1e-330 to 1 and the edge cases, digits 1-7."""
    rng = np.random.default_rng(36)
    vals = [float(v) for v in [*10 ** rng.uniform(-330, 0, 300), *rng.uniform(0, 1, 100), 0.0, 1.0, 0.05, 0.001,
                               1e-4, 0.00012345, 0.049999, 0.99996, 2.28e-318, 2.2e-16, 2.3e-16, 9.99999e-5]]
    text = "\n".join(repr(v) for v in vals)
    for digits in range(1, 8):
        code = (f"x <- scan('stdin', quiet = TRUE); "
                f"cat(vapply(x, function(p) format.pval(p, digits = {digits}), ''), sep = '\\n')")
        r = subprocess.run([rscript, "-e", code], input=text, capture_output=True, text=True, check=True, timeout=120)
        got = r.stdout.splitlines()
        assert len(got) == len(vals)
        bad = [(v, want, format_pval(v, digits)) for v, want in zip(vals, got) if format_pval(v, digits) != want]
        assert not bad, (digits, bad[:5])


# --------------------------------------------------------------------------- the scan

#: an expression that holds a p-value
_P_EXPR = re.compile(r"(^|[^\w.])(p|pv|pval|pvalue|p_value|p_adj|p_adjusted|p_exact|p_asymptotic|p_mcnemar|"
                     r"mh_p\w*|lr_p\w*|lr_\w+_p)($|[^\w(])|\[['\"](p|p_value|p_adjusted|p\.value|Pr\(.*\))['\"]\]")
#: a table column that holds a p-value
_P_COL = re.compile(r"^(p|p\.value|p-value|p_value|p_adjusted|pr\(.*\)|.* p|.* p \(adj\.\))$", re.IGNORECASE)
#: a hand-written floor of a p-value
_FLOOR = re.compile(r"<\s*\.0001|<\s*[12](\.2)?e-16|<\s*1e-1\d")
#: p-named expressions that are not p-values (a proportion, a probability, a percent level)
_NOT_P = {("models/confint.py", "100 * p"), ("tasks/simulate.py", "p")}


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.body:
            first = n.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def p_formatting_outside_the_home(root: Path = SRC) -> list[str]:
    """Every place in ``root`` that formats a p-value itself instead of calling :func:`format_pval`."""
    found = []
    for f in sorted(root.rglob("*.py")):
        rel = str(f.relative_to(root))
        if rel == "_pformat.py":
            continue
        src = f.read_text()
        tree = ast.parse(src)
        docs = _docstrings(tree)
        for n in ast.walk(tree):
            if isinstance(n, ast.FormattedValue) and n.format_spec is not None:
                txt = ast.get_source_segment(src, n.value) or ""
                if _P_EXPR.search(txt) and (rel, txt) not in _NOT_P:
                    found.append(f"{rel}:{n.lineno}: f-string {txt!r} with a format spec")
            elif isinstance(n, ast.JoinedStr):     # "p = {format_pval(x)}" prints "p = < 2.2e-16": p_clause
                for a, b in zip(n.values, n.values[1:]):
                    if (isinstance(a, ast.Constant) and isinstance(a.value, str) and re.search(r"=\s*$", a.value)
                            and isinstance(b, ast.FormattedValue) and isinstance(b.value, ast.Call)
                            and getattr(b.value.func, "id", getattr(b.value.func, "attr", "")) == "format_pval"):
                        found.append(f"{rel}:{n.lineno}: '= ' before format_pval (use p_clause)")
            elif isinstance(n, ast.Dict):
                for k, v in zip(n.keys, n.values):
                    if (isinstance(k, ast.Constant) and isinstance(k.value, str) and _P_COL.match(k.value)
                            and isinstance(v, ast.Constant) and isinstance(v.value, str) and "{:" in v.value):
                        found.append(f"{rel}:{n.lineno}: column {k.value!r} formatted {v.value!r}")
            elif (isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
                  and _FLOOR.search(n.value)):
                found.append(f"{rel}:{n.lineno}: a p-value floor written by hand {n.value[:40]!r}")
    return found


def test_no_p_value_formatting_outside_pformat():
    """The package and the seed reproductions (analyses/) print every p-value through the one home."""
    assert p_formatting_outside_the_home() == []
    assert p_formatting_outside_the_home(SRC.parents[1] / "analyses") == []


def test_the_scan_finds_hand_formatted_p_values(tmp_path):
    (tmp_path / "m.py").write_text('def f(p, r):\n    a = f"p = {p:.3g}"\n    b = f"{r[\'p\']:.4f}"\n'
                                   '    c = {"p": "{:.3g}", "Pr(>|z|)": "{:.4f}"}\n    return "< 2e-16"\n')
    assert len(p_formatting_outside_the_home(tmp_path)) == 5
    (tmp_path / "n.py").write_text('def g(x):\n    return f"chi2, p = {format_pval(x)}"\n')
    assert len(p_formatting_outside_the_home(tmp_path)) == 6


def test_p_clause_is_print_htest():
    from mrcstats._pformat import p_clause

    assert p_clause(0.0, "p-value") == "p-value < 2.2e-16"
    assert p_clause(0.04231) == "p = 0.04231"
    assert p_clause(None) == "p = NA"
