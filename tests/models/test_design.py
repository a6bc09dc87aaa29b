"""Design matrices as R's model.matrix builds them (names, contrasts, assign, na.omit, levels)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcstats.errors import InputError, ModelError
from mrcstats.models.design import build_design, factor_levels

from ._fits import model_spec


def _df(n=60, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "y": rng.integers(0, 2, n), "x": rng.normal(size=n),
        "LLM": rng.choice(["gpt4", "davinci2", "davinci3"], n),
        "Gender": rng.choice(["F", "M"], n), "period": rng.choice(["p1", "p2", "p3"], n),
        "g": [f"g{i % 6}" for i in range(n)], "h": [f"h{i % 3}" for i in range(n)],
        "s": rng.integers(0, 6, n),
    }).assign(n=lambda d: d.s + 4)


def test_sum_contrasts_names_and_assign():
    d = build_design(model_spec("y ~ x * LLM + (1|g)"), _df(), contrasts={"LLM": "sum"})
    assert d.column_names == ("(Intercept)", "x", "LLM1", "LLM2", "x:LLM1", "x:LLM2")
    assert d.info.assign == (0, 1, 2, 2, 3, 3)
    assert d.info.contrasts == {"LLM": "contr.sum"}
    assert d.info.xlevels == {"LLM": ("davinci2", "davinci3", "gpt4")}
    X = d.X
    last = (d.frame["LLM"] == "gpt4").to_numpy()
    assert np.all(X[last][:, 2:4] == -1)


def test_treatment_names_like_r():
    d = build_design(model_spec("y ~ period + Gender + (1|g)"), _df())
    assert d.column_names == ("(Intercept)", "periodp2", "periodp3", "GenderM")


def test_interaction_first_variable_varies_fastest():
    d = build_design(model_spec("y ~ period:Gender + (1|g)"), _df())
    # R: model.matrix(~ p:G) codes both by indicators (rank deficient; lme4 drops the last column)
    assert d.column_names[1:] == ("periodp1:GenderF", "periodp2:GenderF", "periodp3:GenderF",
                                  "periodp1:GenderM", "periodp2:GenderM")
    assert d.info.dropped_columns == ("periodp3:GenderM",)
    d = build_design(model_spec("y ~ period + period:Gender + (1|g)"), _df())
    assert d.column_names[1:] == ("periodp2", "periodp3", "periodp1:GenderM", "periodp2:GenderM",
                                  "periodp3:GenderM")
    d = build_design(model_spec("y ~ x + x:period + (1|g)"), _df())
    assert d.column_names[1:] == ("x", "x:periodp2", "x:periodp3")
    d = build_design(model_spec("y ~ 0 + period:x + (1|g)"), _df())
    assert d.column_names == ("periodp1:x", "periodp2:x", "periodp3:x")


def test_levels_given_change_reference():
    d = build_design(model_spec("y ~ LLM + (1|g)"), _df(), levels={"LLM": ["gpt4", "davinci2", "davinci3"]})
    assert d.column_names == ("(Intercept)", "LLMdavinci2", "LLMdavinci3")
    with pytest.raises(InputError, match="not among the given levels"):
        build_design(model_spec("y ~ LLM + (1|g)"), _df(), levels={"LLM": ["gpt4"]})


def test_levels_sorted_by_code_point():
    _codes, lv = factor_levels(pd.Series(["b", "B", "a", "_x", "é"]), None, "t")
    assert lv == ("B", "_x", "a", "b", "é")
    _codes, lv = factor_levels(pd.Series([10, 2, 2.5]), None, "t")
    assert lv == ("2", "2.5", "10")


def test_na_omit_counted():
    df = _df()
    df.loc[[1, 5], "x"] = np.nan
    df["correct"] = pd.array([True, False, None] * 20, dtype="boolean")
    d = build_design(model_spec("correct ~ x + (1|g)"), df)
    assert d.nobs == len(df) - 2 - 20 + sum(1 for i in (1, 5) if i % 3 == 2)
    assert d.n_dropped == len(df) - d.nobs
    assert any("dropped (na.omit)" in m for m in d.messages)


def test_scale_uses_all_non_missing_rows():
    df = _df()
    d = build_design(model_spec("y ~ scale(x) + (1|g)"), df)
    x = df["x"].to_numpy()
    assert np.allclose(d.X[:, 1], (x - x.mean()) / x.std(ddof=1))
    assert d.info.scaling["scale(x)"][0] == pytest.approx(x.mean())


def test_responses():
    df = _df()
    d = build_design(model_spec("cbind(s, n - s) ~ x + (1|g)"), df)
    assert np.allclose(d.weights, df["n"])
    assert np.allclose(d.y, df["s"] / df["n"])
    assert d.loglik_const > 0
    df["ok"] = np.where(df["y"] == 1, "yes", "no")
    d2 = build_design(model_spec("ok ~ x + (1|g)"), df)
    assert np.array_equal(d2.y, (df["ok"] == "yes").astype(float))   # first level ("no") is failure
    df["b"] = df["y"].astype(bool)
    assert np.array_equal(build_design(model_spec("b ~ x + (1|g)"), df).y, df["y"].to_numpy(float))
    df["bad"] = df["y"] * 2
    with pytest.raises(InputError, match="0/1"):
        build_design(model_spec("bad ~ x + (1|g)"), df)
    df["three"] = df["LLM"]
    with pytest.raises(InputError, match="two levels"):
        build_design(model_spec("three ~ x + (1|g)"), df)


def test_random_terms_nested_crossed_and_order():
    df = _df()
    d = build_design(model_spec("y ~ x + (1|h) + (1|g)"), df)
    assert [r.name for r in d.re] == ["g", "h"]     # lme4: decreasing number of levels
    d = build_design(model_spec("y ~ x + (1|h/g)"), df)
    assert [r.name for r in d.re] == ["g:h", "h"]
    assert d.re[0].levels[0] == "g0:h0"


def test_errors():
    df = _df()
    d = build_design(model_spec("y ~ x + (1 + x|g)"), df)
    assert d.re[0].cnames == ("(Intercept)", "x")
    assert d.re[0].theta_names == ("g.(Intercept)", "g.x.(Intercept)", "g.x")
    with pytest.raises(ModelError, match="no random-effects term"):
        build_design(model_spec("y ~ x"), df)
    with pytest.raises(InputError, match="not in the data"):
        build_design(model_spec("y ~ nope + (1|g)"), df)
    df1 = df.assign(one="a")
    with pytest.raises(ModelError, match="only one level"):
        build_design(model_spec("y ~ one + (1|g)"), df1)
    with pytest.raises(ModelError, match="> 1 sampled level"):
        build_design(model_spec("y ~ x + (1|one)"), df1)
    with pytest.raises(InputError, match="contrasts"):
        build_design(model_spec("y ~ x + (1|g)"), df, contrasts={"LLM": "helmert"})


def test_the_family_travels_on_the_spec_and_a_missing_one_is_an_error():
    from mrcstats.models.family import POISSON
    from mrcstats.models.formula import parse_formula

    df = _df().assign(y=lambda d: d["y"] * 3)
    assert build_design(model_spec("y ~ x + (1|g)", "poisson"), df).family is POISSON
    with pytest.raises(InputError, match="has no family"):      # never a silent binomial
        build_design(parse_formula("y ~ x + (1|g)"), df)
    with pytest.raises(InputError, match="expected a parsed model"):
        build_design("y ~ x + (1|g)", df)
    with pytest.raises(TypeError, match="family"):              # no second track beside the spec
        build_design(model_spec("y ~ x + (1|g)"), df, family=POISSON)


def test_rank_deficient_columns_dropped_with_lme4_message():
    df = _df().assign(x2=lambda d: 2 * d.x)
    d = build_design(model_spec("y ~ x + x2 + (1|g)"), df)
    assert d.column_names == ("(Intercept)", "x")
    assert any("rank deficient so dropping 1 column / coefficient" in m for m in d.messages)


def test_model_matrix_for_newdata_matches():
    df = _df()
    d = build_design(model_spec("y ~ scale(x) * LLM + Gender + (1|g)"), df, contrasts={"LLM": "sum"})
    assert np.allclose(d.info.model_matrix(df.iloc[:7]), d.X[:7])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=8, max_size=40), st.booleans())
def test_contrast_columns_property(vals, use_sum):
    """Treatment: columns are indicators of levels 2..k; sum: rows of the last level are all -1;
    with an intercept the columns always number k-1."""
    n = len(vals)
    df = pd.DataFrame({"f": vals, "y": [i % 2 for i in range(n)], "g": [i % 2 for i in range(n)]})
    k = len(set(vals))
    if k < 2:
        return
    d = build_design(model_spec("y ~ f + (1|g)"), df, contrasts={"f": "sum"} if use_sum else None)
    assert d.X.shape == (n, k)
    lv = sorted(set(vals))
    F = d.X[:, 1:]
    for i, v in enumerate(vals):
        j = lv.index(v)
        if use_sum:
            expect = -np.ones(k - 1) if j == k - 1 else np.eye(k - 1)[j]
        else:
            expect = np.zeros(k - 1) if j == 0 else np.eye(k - 1)[j - 1]
        assert np.array_equal(F[i], expect)
