"""Issues 25 and 36: tiny p-values never print as ``0`` in the terminal (compare, mcnemar, fisher/chisq summaries);
the floor is R's ``< 2.2e-16`` for every p column (format.pval with eps), never a raw 2.28e-318."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from mrcstats._pformat import P_FLOOR_TEXT, format_pval
from mrcstats.cli import main


def test_format_pval_floor_is_rs():
    assert format_pval(0.0) == P_FLOOR_TEXT == "< 2.2e-16" == format_pval(2.28e-318)
    assert format_pval(0.04231) == "0.04231"


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
    assert "< 2.2e-16" in pair and "e-3" not in pair, pair
    assert not re.search(r"(?<![\w.e-])0(?![\w.])", pair.split("]")[-1]), pair


def test_mcnemar_terminal_prints_no_zero_p(capsys, far_apart):
    assert main(["mcnemar", str(far_apart), "--models", "a,b"]) == 0
    out = capsys.readouterr().out
    ps = _p_fields(out)
    assert "0" not in ps and "p < 2.2e-16" in out and "= <" not in out, out
