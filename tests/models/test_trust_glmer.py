"""Issue 14 reproducers in glmer's API and printing."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mrcstats.errors import InputError
from mrcstats.models import glmer
from mrcstats.models.results import fmt_sig, separation_messages


@pytest.mark.parametrize("formula,data,match", [(123, pd.DataFrame({"y": [1]}), "glmer"),
                                                ("y ~ 1 + (1|g)", 123, "glmer"),
                                                ("y ~ 1 + (1|g)", "data.csv", "data.csv: no such file"),
                                                (None, None, "glmer")])
def test_glmer_type_checks(formula, data, match):
    """Bad types name glmer; a path is opened by io.open_log, which names the missing file."""
    with pytest.raises(InputError, match=match):
        glmer(formula, data)


def test_variance_printed_sanely():
    assert fmt_sig(5.21e-17, 4) == "5.21e-17"
    assert fmt_sig(0.05183, 4) == "0.05183" and fmt_sig(1.234567, 4) == "1.235"


def test_separation_flagged():
    msgs = separation_messages(["(Intercept)", "xc"], np.array([0.1, 17.49]), np.array([0.2, 4445.0]))
    assert len(msgs) == 1 and "xc = 17.49 with SE 4445" in msgs[0]
    assert not separation_messages(["x"], np.array([2.0]), np.array([0.5]))


def test_separated_fit_warns_once_and_singular_message_once():
    rng = np.random.default_rng(1)
    n = 300
    x = rng.choice(["a", "b", "c"], n)
    y = (rng.random(n) < 0.5).astype(int)
    y[x == "c"] = 1
    df = pd.DataFrame({"y": y, "x": x, "g": rng.integers(0, 15, n)})
    m = glmer("y ~ x + (1 | g)", df)
    assert any(s.startswith("possible separation: xc") for s in m.messages)
    assert len(m.messages) == len(set(m.messages))
    text = m.summary()
    for msg in m.messages:
        assert text.count(msg) == 1


@pytest.mark.parametrize("bad", [[1, 2], {"y": [1]}, "no-such-file.csv", np.zeros((3, 2))],
                         ids=["list", "dict", "path", "array"])
def test_lmer_and_glmer_refuse_a_non_table_with_one_message(bad):
    """lmer and glmer run the same check (:func:`mrcstats.models._checks.require_table`): one message, which names
    both tables they accept (a pandas frame and a Columns table) and how to get one."""
    from mrcstats.models import lmer

    msgs = {}
    for who, fit in (("lmer", lmer), ("glmer", glmer)):
        if who == "glmer" and isinstance(bad, str):
            continue                 # glmer opens a path itself (io.open_log): its own message
        with pytest.raises(InputError) as e:
            fit("y ~ x + (1 | g)", bad)
        msgs[who] = str(e.value)
    for who, msg in msgs.items():
        assert msg.startswith(f"{who}: data must be "), msg
        assert "pandas DataFrame" in msg and "Columns" in msg and "read_data" in msg, msg
        assert type(bad).__name__ in msg
    if len(msgs) == 2:
        assert msgs["lmer"].removeprefix("lmer") == msgs["glmer"].removeprefix("glmer")
