"""Issue 25: tiny p-values never print as ``0`` in the terminal (compare, mcnemar, fisher/chisq summaries)."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrcstats._pformat import P_FLOOR_TEXT, format_pval
from mrcstats.cli import main


def test_format_pval():
    assert format_pval(0.0) == P_FLOOR_TEXT == "< 1e-16"
    assert format_pval(2.3e-45) == "2.3e-45"
    assert format_pval(0.04231) == "0.0423"
    assert format_pval(None) == "NA" and format_pval(float("nan")) == "NA" and format_pval(pd.NA) == "NA"
    assert format_pval(0.123456789, 6) == "0.123457"


@given(st.floats(min_value=0.0, max_value=1.0))
def test_format_pval_never_prints_zero(p):
    s = format_pval(p)
    assert s != "0" and not re.fullmatch(r"0(\.0*)?(e[-+]?\d+)?", s)
    if p > 0:
        assert float(s) == pytest.approx(p, rel=1e-2)


@pytest.fixture()
def far_apart(tmp_path):
    """Model a right on every item, b on none (and c in between): the true p-values underflow to 0."""
    n = 3000
    rng = np.random.default_rng(0)
    rows = pd.DataFrame({"model": np.repeat(["a", "b", "c"], n), "item": np.tile([f"i{i}" for i in range(n)], 3),
                         "correct": np.concatenate([rng.random(n) < 0.95, rng.random(n) < 0.05,
                                                    rng.random(n) < 0.5])})
    p = tmp_path / "log.csv"
    rows.to_csv(p, index=False)
    return p


def _p_fields(text: str) -> list[str]:
    return re.findall(r"\bp(?:-value)?\s*=\s*(\S+)", text)


def test_compare_terminal_prints_no_zero_p(capsys, far_apart):
    assert main(["compare", str(far_apart)]) == 0
    out = capsys.readouterr().out
    pair = next(line for line in out.splitlines() if line.startswith("a ") and " b " in line)
    assert "< 1e-16" in pair
    assert not re.search(r"(?<![\w.e-])0(?![\w.])", pair.split("]")[-1]), pair


def test_mcnemar_terminal_prints_no_zero_p(capsys, far_apart):
    assert main(["mcnemar", str(far_apart), "--models", "a,b"]) == 0
    out = capsys.readouterr().out
    ps = _p_fields(out)
    assert ps and "0" not in ps and ("<" in ps or "<" in out), out
