"""The native engine: lme4's objective and optimum, SEs, checks; compared with lme4 run in the same test."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcstats._jsonout import dumps
from mrcstats.errors import InputError, ModelError
from mrcstats.models import GlmerResult, glmer
from mrcstats.models.design import build_design
from mrcstats.models.deviance import BinomialData, MultiFactor, SingleFactor

from ._fits import model_spec
from ._r import lme4_fit


def seed_like(n_pass=300, per=3, seed=1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    b = rng.normal(0, 0.75, n_pass)
    pid = np.repeat(np.arange(n_pass), per)
    tok = rng.normal(size=pid.size)
    out = []
    for m, off in zip(("davinci2", "davinci3", "gpt4"), (-1.1, 0.0, 1.1), strict=True):
        eta = 1.3 + off + b[pid] - 0.1 * tok * (m == "davinci2")
        y = (rng.random(pid.size) < 1 / (1 + np.exp(-eta))).astype(int)
        out.append(pd.DataFrame({"passage": [f"p{i:04d}" for i in pid], "scaled_tok": tok, "LLM": m, "correct": y}))
    return pd.concat(out, ignore_index=True)


def herd_like(seed=3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for h in range(40):
        bh = rng.normal(0, 0.6)
        for per, off in zip(("p1", "p2", "p3", "p4"), (0, -0.9, -1.1, -1.6), strict=True):
            n = int(rng.integers(5, 30))
            s = int(rng.binomial(n, 1 / (1 + np.exp(1.5 - off - bh))))
            rows.append((f"h{h:02d}", per, s, n, rng.choice(["F", "M"])))
    return pd.DataFrame(rows, columns=["herd", "period", "incidence", "size", "Gender"])


def crossed_like(n=4000, seed=5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    ids, items = rng.integers(0, 120, n), rng.integers(0, 60, n)
    cond = rng.choice(["a", "b", "c"], n)
    x = rng.normal(size=n)
    sex = np.array(["F", "M"])[ids % 2]
    eta = 0.3 + rng.normal(0, 0.8, 120)[ids] + rng.normal(0, 0.5, 60)[items] + 0.4 * (cond == "b") + 0.2 * x
    y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(int)
    return pd.DataFrame({"id": ids, "item": [f"i{i:03d}" for i in items], "cond": cond, "x": x, "Gender": sex, "y": y})


CASES = {
    "cbind_treatment": (herd_like, "cbind(incidence, size - incidence) ~ period + Gender + (1 | herd)", {}),
    "seed_sum": (seed_like, "correct ~ scaled_tok * LLM + (1 | passage)", {"LLM": "sum"}),
    "crossed": (crossed_like, "y ~ cond * x + Gender + (1 | id) + (1 | item)", {}),
}


def _compare(m: GlmerResult, r: dict) -> None:
    for k, v in r["fixef"].items():
        assert m.fixef[k] == pytest.approx(v, abs=1e-4), k
    for k, v in r["se"].items():
        assert m.se[k] == pytest.approx(v, rel=1e-3), k
    for k, v in r["theta"].items():
        assert m.theta[k] == pytest.approx(v, abs=1e-4), k
    assert m.loglik == pytest.approx(r["loglik"], abs=1e-4)
    assert m.aic == pytest.approx(r["aic"], abs=2e-4)
    assert m.bic == pytest.approx(r["bic"], abs=2e-4)
    assert m.df_resid == r["df_resid"]
    assert m.deviance == pytest.approx(r["deviance"], rel=1e-5)
    assert np.allclose(m.resid_quantiles.to_numpy(), r["resid_q"], atol=1e-3)


@pytest.mark.r
@pytest.mark.parametrize("case", list(CASES))
def test_matches_lme4_converged(case, rscript, tmp_path):
    make, formula, contrasts = CASES[case]
    df = make()
    m = glmer(formula, df, contrasts=contrasts or None)
    r = lme4_fit(rscript, df, formula, tmp_path, sum_contrasts=tuple(contrasts))
    _compare(m, r)
    assert m.converged and not m.singular
    # conditional modes and variances
    for g, rr in r["ranef"].items():
        ours = m.ranef[g]
        modes = pd.Series(rr["mode"], index=[str(x) for x in rr["level"]])
        cv = pd.Series(rr["condvar"], index=modes.index)
        assert np.allclose(ours["mode"].reindex(modes.index), modes, atol=2e-4)
        assert np.allclose(ours["condvar"].reindex(modes.index), cv, rtol=2e-3)


@pytest.mark.r
@pytest.mark.parametrize("nagq", [0, 7])
def test_nagq_matches_lme4(nagq, rscript, tmp_path):
    df = seed_like(200)
    formula = "correct ~ scaled_tok * LLM + (1 | passage)"
    m = glmer(formula, df, contrasts={"LLM": "sum"}, nagq=nagq)
    r = lme4_fit(rscript, df, formula, tmp_path, sum_contrasts=("LLM",), nagq=nagq)
    for k, v in r["fixef"].items():
        assert m.fixef[k] == pytest.approx(v, abs=1e-4), k
    for k, v in r["se"].items():
        assert m.se[k] == pytest.approx(v, rel=1e-3), k
    assert m.theta.iloc[0] == pytest.approx(next(iter(r["theta"].values())), abs=1e-4)
    assert m.loglik == pytest.approx(r["loglik"], abs=1e-4)


def _fd_grad(f, x, h=1e-6):
    g = np.empty_like(x)
    for i in range(len(x)):
        e = np.zeros_like(x)
        e[i] = h
        g[i] = (f(x + e) - f(x - e)) / (2 * h)
    return g


def test_analytic_gradient_single_factor():
    d = build_design(model_spec("correct ~ scaled_tok * LLM + (1 | passage)"), seed_like(100), contrasts={"LLM": "sum"})
    bd = BinomialData(d.X, d.y, d.weights, None, d.loglik_const, d.family)
    sf = SingleFactor(bd, d.re[0].codes, d.re[0].nlevels)
    x = np.array([0.8, 1.2, -0.05, -1.0, 0.1, -0.1, 0.02])
    _D, g = sf.evaluate(x[0], x[1:])
    num = _fd_grad(lambda z: sf.evaluate(z[0], z[1:], grad=False)[0], x)
    assert np.allclose(g, num, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("formula, nth", [
    ("y ~ cond + x + (1 | id) + (1 | item)", 2),
    ("y ~ cond + x + (1 | id) + (1 | item) + (1 | Gender)", 3),
    ("y ~ x + (1 | item/cond)", 2),
])
def test_analytic_gradient_crossed_and_nested(formula, nth):
    d = build_design(model_spec(formula), crossed_like(1500))
    bd = BinomialData(d.X, d.y, d.weights, None, d.loglik_const, d.family)
    mf = MultiFactor(bd, [r.codes for r in d.re], [r.nlevels for r in d.re])
    rng = np.random.default_rng(1)
    x = np.concatenate([[0.7, 0.4, 0.3][:nth], rng.normal(0, 0.2, d.X.shape[1])])
    _D, g = mf.evaluate(x[:nth], x[nth:])
    num = _fd_grad(lambda z: mf.evaluate(z[:nth], z[nth:], grad=False)[0], x)
    assert np.allclose(g, num, rtol=1e-5, atol=1e-5)


def test_crossed_sparse_pair_table_gives_the_same_fit(monkeypatch):
    import mrcstats.models.deviance as dv

    df = crossed_like(1500)
    formula = "y ~ cond + x + (1 | id) + (1 | item)"
    dense = glmer(formula, df)
    monkeypatch.setattr(dv, "DENSE_PAIRS_MAX", 0)
    sparse = glmer(formula, df)
    assert np.allclose(dense.fixef, sparse.fixef, atol=1e-7)
    assert np.allclose(dense.se, sparse.se, rtol=1e-6)
    assert sparse.loglik == pytest.approx(dense.loglik, abs=1e-8)


def test_agq_one_node_is_laplace():
    d = build_design(model_spec("cbind(incidence, size - incidence) ~ period + (1 | herd)"), herd_like())
    bd = BinomialData(d.X, d.y, d.weights, None, d.loglik_const, d.family)
    sf = SingleFactor(bd, d.re[0].codes, d.re[0].nlevels)
    beta = np.array([-1.4, -0.9, -1.0, -1.5])
    lap, _ = sf.evaluate(0.6, beta, grad=False)
    # glmerAGQ sums deviance residuals (no binomial coefficients); the Laplace deviance uses aic()
    assert sf.agq(0.6, beta, 1) == pytest.approx(lap + 2 * bd.const + bd.ent, rel=1e-12)


def test_result_shapes_and_outputs():
    df = seed_like(120)
    m = glmer("correct ~ scaled_tok * LLM + (1 | passage)", df, contrasts={"LLM": "sum"})
    assert list(m.fixef.index) == ["(Intercept)", "scaled_tok", "LLM1", "LLM2", "scaled_tok:LLM1", "scaled_tok:LLM2"]
    assert list(m.theta.index) == ["passage.(Intercept)"]
    assert m.ngroups == {"passage": 120}
    assert m.nobs == len(df)
    assert m.df_resid == len(df) - 7
    assert m.minus2loglik == pytest.approx(-2 * m.loglik)
    assert m.aic == pytest.approx(m.minus2loglik + 14)
    assert m.assign == (0, 1, 2, 2, 3, 3)
    d = json.loads(dumps(m.to_dict()))
    for key in ("formula", "engine", "nobs", "ngroups", "fixef", "se", "z", "p", "theta", "loglik", "aic", "bic",
                "minus2loglik", "deviance", "df_resid", "converged", "singular", "messages", "fit_seconds"):
        assert key in d
    text = m.summary()
    assert "Generalized linear mixed model fit by maximum likelihood (Laplace Approximation)" in text
    assert "Correlation of Fixed Effects:" in text and "scld_t:LLM1" in text
    fr = m.to_frame()
    assert list(fr["term"])[:2] == ["(Intercept)", "scaled_tok"] and fr.iloc[-1]["group"] == "passage"
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.loglik = 0  # type: ignore[misc]
    # predict: fitted linear predictor = X beta + b[group]
    eta = m.predict()
    d0 = build_design(model_spec("correct ~ scaled_tok * LLM + (1 | passage)"), df, contrasts={"LLM": "sum"})
    b = m.ranef["passage"]["mode"].to_numpy()
    assert np.allclose(eta, d0.X @ m.fixef.to_numpy() + b[d0.re[0].codes])
    assert np.allclose(m.predict(df.iloc[:5], re_form="~0"), d0.X[:5] @ m.fixef.to_numpy())
    new = df.iloc[:2].assign(passage="unseen")
    with pytest.raises(InputError, match="allow_new_levels"):
        m.predict(new)
    assert np.allclose(m.predict(new, allow_new_levels=True, type="response"),
                       1 / (1 + np.exp(-(d0.X[:2] @ m.fixef.to_numpy()))))


def test_singular_fit_flagged():
    rng = np.random.default_rng(0)
    n = 600
    df = pd.DataFrame({"g": rng.integers(0, 30, n), "x": rng.normal(size=n)})
    df["y"] = (rng.random(n) < 1 / (1 + np.exp(-0.5 * df["x"]))).astype(int)
    m = glmer("y ~ x + (1 | g)", df)
    assert m.singular            # g has no effect in the data: the fit is on the boundary (lme4 too)
    assert "boundary (singular) fit: see help('isSingular')" in m.messages
    assert np.all(np.isfinite(m.se))


def test_separation_and_all_correct_groups_give_finite_tables():
    df = seed_like(60)
    df.loc[df["LLM"] == "gpt4", "correct"] = 1          # a level with every answer correct
    df.loc[df["passage"] == "p0001", "correct"] = 1     # an all-correct group
    m = glmer("correct ~ LLM + (1 | passage)", df)
    assert np.all(np.isfinite(m.fixef)) and np.all(np.isfinite(m.se))
    assert m.fixef["LLMgpt4"] > 5
    assert any("separation" in x or "converge" in x or "Hessian" in x or "unidentifiable" in x
               for x in m.messages)


def test_clear_errors():
    df = seed_like(30)
    with pytest.raises(ModelError, match="single scalar random-effects term"):
        glmer("correct ~ scaled_tok + (1 + scaled_tok | passage)", df, nagq=5)
    with pytest.raises(InputError, match="nagq"):
        glmer("correct ~ scaled_tok + (1 | passage)", df, nagq=30)
    with pytest.raises(InputError, match="family"):
        glmer("correct ~ scaled_tok + (1 | passage)", df, family="gamma")
    with pytest.raises(InputError, match="engine"):
        glmer("correct ~ scaled_tok + (1 | passage)", df, engine="julia")
    with pytest.raises(ModelError, match="every response is a success"):
        glmer("correct ~ scaled_tok + (1 | passage)", df.assign(correct=1))
    df2 = df.assign(item=[f"i{k % 7}" for k in range(len(df))])
    with pytest.raises(ModelError, match="single scalar random-effects term"):
        glmer("correct ~ scaled_tok + (1 | passage) + (1 | item)", df2, nagq=5)


def test_missing_rows_reported():
    df = seed_like(50)
    df["correct"] = df["correct"].astype("boolean")
    df.loc[[0, 3, 9], "correct"] = pd.NA
    m = glmer("correct ~ scaled_tok + (1 | passage)", df, invalid="exclude")
    assert m.nobs == len(df) - 3
    assert any(msg.startswith("3 invalid answers are left out") for msg in m.messages)
    w = glmer("correct ~ scaled_tok + (1 | passage)", df)      # the default: invalid = not correct
    assert w.nobs == len(df) and any(msg.startswith("3 invalid answers count as not correct") for msg in w.messages)
    df["x"] = df["scaled_tok"].where(df.index != 5)             # another missing variable: R's na.omit
    m = glmer("correct ~ x + (1 | passage)", df)
    assert any(msg.startswith(("1 rows with missing values", "1 row with missing"))
               for msg in m.messages), m.messages


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 10_000))
def test_fit_invariant_to_row_order_and_labels(seed):
    """Permuting rows and renaming group levels leaves every figure unchanged; the optimum
    is stationary (analytic gradient ~ 0) and no perturbation of it lowers the deviance."""
    df = seed_like(40, seed=seed)
    formula = "correct ~ scaled_tok + LLM + (1 | passage)"
    m = glmer(formula, df)
    perm = df.sample(frac=1.0, random_state=seed).reset_index(drop=True)
    perm["passage"] = "x" + perm["passage"].str[::-1]
    m2 = glmer(formula, perm)
    assert m2.loglik == pytest.approx(m.loglik, abs=1e-8)
    assert np.allclose(m2.fixef, m.fixef, atol=1e-6)
    assert np.allclose(m2.se, m.se, rtol=1e-5)
    assert m2.theta.iloc[0] == pytest.approx(m.theta.iloc[0], abs=1e-6)
    grad = np.asarray(m.optinfo["grad"])
    # stationary in every parameter; on the boundary (theta = 0) in the fixed effects only
    assert np.max(np.abs(grad[1:] if m.singular else grad)) < 1e-3
    d = build_design(model_spec(formula), df)
    bd = BinomialData(d.X, d.y, d.weights, None, d.loglik_const, d.family)
    sf = SingleFactor(bd, d.re[0].codes, d.re[0].nlevels)
    x = np.array(m.optinfo["par"])
    best = sf.evaluate(x[0], x[1:], grad=False)[0]
    rng = np.random.default_rng(seed)
    for _ in range(3):
        z = x + rng.normal(0, 1e-2, x.size)
        z[0] = abs(z[0])
        assert sf.evaluate(z[0], z[1:], grad=False)[0] >= best - 1e-9


def test_graded_log_check_has_one_home():
    """glmer (before invalid answers are handled) and fit_rows (pandas or Columns) refuse a graded log with the
    same message, from models.native.require_binary_response."""
    from mrcstats.io.columns import Columns
    from mrcstats.io.schema import validate_log
    from mrcstats.models import fit as fit_mod
    from mrcstats.models import native
    from mrcstats.models.family import get_family
    from mrcstats.models.formula import parse_formula

    log = validate_log(pd.DataFrame({"model": ["a", "a", "b", "b"], "item": ["1", "2", "1", "2"],
                                     "score": [0.2, 0.9, 0.4, 0.7]}))
    assert fit_mod.require_binary_response is native.require_binary_response
    msgs = []
    for call in (lambda: glmer("correct ~ model + (1 | item)", log, invalid="wrong"),
                 lambda: native.fit_rows(parse_formula("correct ~ model + (1 | item)").with_family("binomial"),
                                               Columns.from_pandas(log))):
        with pytest.raises(InputError, match="needs a binary outcome") as e:
            call()
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]
    native.require_binary_response(get_family("gaussian"), log, "lmer")    # a family without a 0/1 response: no check


def test_the_graded_log_message_names_the_family_and_the_caller_asked():
    """The message names the family actually asked (and the caller), not always 'glmer (binomial)'."""
    import dataclasses

    from mrcstats.io.schema import validate_log
    from mrcstats.models import native
    from mrcstats.models.family import BINOMIAL
    from mrcstats.models.family_table import Capabilities

    log = validate_log(pd.DataFrame({"model": ["a", "a", "b", "b"], "item": ["1", "2", "1", "2"],
                                     "score": [0.2, 0.9, 0.4, 0.7]}))
    other = dataclasses.replace(BINOMIAL, name="binomial-probit", link="probit",
                                capabilities=Capabilities("binomial-probit", frozenset({"fit.binary"})))
    for fam, who in ((BINOMIAL, "glmer"), (other, "my_command")):
        with pytest.raises(InputError, match="needs a binary outcome") as e:
            native.require_binary_response(fam, log, who)
        assert str(e.value).startswith(f"{who} (family {fam.name}, {fam.link} link): "), str(e.value)
    with pytest.raises(InputError, match=r"^glmer \(family binomial, logit link\): needs a binary outcome"):
        glmer("correct ~ model + (1 | item)", log)
