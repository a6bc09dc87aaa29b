"""Cumulative-link mixed models (``mrcstats.clmm``) against R's ``ordinal::clmm`` and emmeans, run in the same test
run on data generated here.

Targets (issue 26): thresholds and coefficients 1e-4, logLik 1e-4, for logit and probit, one and two crossed random
intercepts. R's inner tolerance is tightened (``clmm.control(gradTol = 1e-8)``): with clmm's default (max|gradient|
of the conditional modes < 1e-4) its Laplace log-likelihood can sit 5e-4 below the converged one (seen on a probit
fit), while the parameters agree either way.
"""
from __future__ import annotations

import json
import subprocess

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcstats.errors import InputError
from mrcstats.models.clmm import ClmmLaplace, ClmmResult, category_probs, clmm

_R = r"""
suppressMessages({library(ordinal); library(emmeans)})
a <- commandArgs(TRUE)
df <- read.csv(a[1], stringsAsFactors = TRUE)
df$rating <- factor(df$rating, ordered = TRUE)
out <- function(case, sec, nm, v) cat(paste(case, sec, nm, sprintf("%.17g", v), sep = "\t"), sep = "\n")
forms <- c(one = "rating ~ x + LLM + (1 | item)", two = "rating ~ x + LLM + (1 | item) + (1 | model)")
for (f in names(forms)) for (link in c("logit", "probit")) {
  case <- paste(f, link, sep = ":")
  m <- clmm(as.formula(forms[[f]]), data = df, link = link, control = clmm.control(gradTol = 1e-8))
  se <- sqrt(diag(vcov(m)))
  out(case, "alpha", names(m$alpha), m$alpha)
  out(case, "beta", names(m$beta), m$beta)
  out(case, "se", names(se), se)
  vc <- VarCorr(m)
  out(case, "sd", names(vc), sapply(vc, function(v) sqrt(v[1, 1])))
  out(case, "scalar", c("loglik", "aic"), c(as.numeric(logLik(m)), AIC(m)))
  if (f == "two" && link == "logit") {
    em <- summary(emmeans(m, ~ LLM))
    out(case, "emmean", as.character(em$LLM), em$emmean)
    out(case, "emse", as.character(em$LLM), em$SE)
    pr <- summary(pairs(emmeans(m, ~ LLM)))
    out(case, "pairs", as.character(pr$contrast), pr$estimate)
    out(case, "pairs_p", as.character(pr$contrast), pr$p.value)
  }
}
"""

FORMULAS = {"one": "rating ~ x + LLM + (1 | item)", "two": "rating ~ x + LLM + (1 | item) + (1 | model)"}


def clmm_data(seed: int = 7, n: int = 500, items: int = 30, models: int = 6) -> pd.DataFrame:
    """Ratings 1..4 from a logistic latent variable with crossed item and model intercepts."""
    rng = np.random.default_rng(seed)
    item, model = rng.integers(0, items, n), rng.integers(0, models, n)
    x, g = rng.normal(size=n), rng.integers(0, 3, n)
    eta = 0.6 * x + np.array([0.0, -0.4, 0.3])[g] + rng.normal(0, 0.9, items)[item] + rng.normal(0, 0.5, models)[model]
    y = 1 + np.searchsorted([-1.2, 0.0, 1.3], eta + rng.logistic(size=n))
    return pd.DataFrame({"rating": y, "x": x, "LLM": np.array(["a", "b", "c"])[g],
                         "item": [f"q{i}" for i in item], "model": [f"m{m}" for m in model]})


@pytest.fixture(scope="module")
def r_fits(rscript, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("clmm")
    df = clmm_data()
    df.to_csv(tmp / "d.csv", index=False)
    (tmp / "clmm.R").write_text(_R)
    res = subprocess.run([rscript, str(tmp / "clmm.R"), str(tmp / "d.csv")], capture_output=True, text=True,
                         timeout=900, check=False)
    if res.returncode != 0:
        raise RuntimeError(res.stderr[-2000:])
    r: dict = {}
    for line in res.stdout.splitlines():
        case, sec, name, val = line.split("\t")
        r.setdefault(case, {}).setdefault(sec, {})[name] = float(val)
    return df, r


@pytest.mark.r
@pytest.mark.parametrize("link", ["logit", "probit"])
@pytest.mark.parametrize("terms", ["one", "two"])
def test_clmm_matches_ordinal(r_fits, terms, link):
    df, r = r_fits
    want = r[f"{terms}:{link}"]
    m = clmm(FORMULAS[terms], df, link=link)
    assert m.converged and not m.singular
    assert list(m.thresholds.index) == ["1|2", "2|3", "3|4"]
    assert m.thresholds.to_dict() == pytest.approx(want["alpha"], abs=1e-4)
    assert m.fixef.to_dict() == pytest.approx(want["beta"], abs=1e-4)
    assert m.loglik == pytest.approx(want["scalar"]["loglik"], abs=1e-4)
    assert m.aic == pytest.approx(want["scalar"]["aic"], abs=2e-4)
    assert m.sd.to_dict() == pytest.approx(want["sd"], abs=1e-3)
    se = {**m.threshold_se.to_dict(), **m.se.to_dict()}
    assert se == pytest.approx({k: v for k, v in want["se"].items() if k in se}, rel=1e-3)


@pytest.mark.r
def test_clmm_emmeans_latent_match_emmeans(r_fits):
    df, r = r_fits
    want = r["two:logit"]
    m = clmm(FORMULAS["two"], df)
    em = m.emmeans("LLM").to_frame().set_index("LLM")
    assert em["emmean"].to_dict() == pytest.approx(want["emmean"], abs=1e-4)
    assert em["SE"].to_dict() == pytest.approx(want["emse"], rel=1e-3)
    import mrcstats

    same = mrcstats.emmeans(m, "LLM").to_frame().set_index("LLM")      # the one emmeans front door
    assert same["emmean"].to_dict() == em["emmean"].to_dict()
    with pytest.raises(InputError, match="latent scale"):
        mrcstats.emmeans(m, "LLM", type="response")
    pr = m.emmeans("LLM").pairs().to_frame().set_index("contrast")
    assert pr["estimate"].to_dict() == pytest.approx(want["pairs"], abs=1e-4)
    assert pr["p.value"].to_dict() == pytest.approx(want["pairs_p"], rel=1e-3, abs=1e-6)


@pytest.mark.parametrize("link", ["logit", "probit"])
def test_gradient_matches_finite_differences(link):
    rng = np.random.default_rng(3)
    n = 400
    item, model = rng.integers(0, 25, n), rng.integers(0, 5, n)
    X = rng.normal(size=(n, 2))
    y = np.clip(np.round(X[:, 0] + rng.normal(size=25)[item] + rng.normal(size=n) + 2), 0, 4).astype(int)
    for K in (1, 2):
        lap = ClmmLaplace(X, y, [item, model][:K], [25, 5][:K], link)
        par = np.concatenate([[-1.5, -0.4, 0.6, 1.7], [0.3, -0.2], [0.8, 0.4][:K]])
        _f, g = lap.nla(par, keep=True, grad=True)
        h = 1e-6
        fd = np.array([(lap.nla(par + e) - lap.nla(par - e)) / (2 * h) for e in np.eye(len(par)) * h])
        assert g == pytest.approx(fd, abs=1e-5)


def test_result_outputs_and_predictions():
    df = clmm_data(seed=2, n=300, items=20, models=4)
    m = clmm(FORMULAS["two"], df, link="probit")
    assert isinstance(m, ClmmResult)
    d = m.to_dict()
    assert set(d["thresholds"]) == {"1|2", "2|3", "3|4"} and set(d["sd"]) == {"item", "model"}
    for key in ("fixef", "se", "theta", "loglik", "aic", "fit_seconds", "nobs", "ngroups", "converged"):
        assert key in d
    fr = m.to_frame()
    assert list(fr["effect"].unique()) == ["threshold", "fixed", "ran_pars"]
    text = m.summary()
    assert "Threshold coefficients:" in text and "probit" in text and "1|2" in text
    assert repr(m).startswith("<ClmmResult>")
    P = m.predict()
    assert P.shape == (300, 4) and np.allclose(P.sum(axis=1), 1.0) and (P.to_numpy() >= 0).all()
    import mrcstats

    em = mrcstats.emmeans(m, "LLM").to_frame()                           # the one emmeans front door
    assert em["emmean"].tolist() == m.emmeans("LLM").to_frame()["emmean"].tolist()
    assert "latent" in mrcstats.emmeans(m, "LLM").summary()
    with pytest.raises(InputError, match="latent scale"):
        mrcstats.emmeans(m, "LLM", type="response")
    new = pd.DataFrame({"x": [0.0, 2.0], "LLM": ["a", "a"]})
    Pn = m.predict(new)
    # a larger latent value moves probability to the top category
    assert Pn.iloc[1, -1] > Pn.iloc[0, -1] if m.fixef["x"] > 0 else Pn.iloc[1, -1] < Pn.iloc[0, -1]


def test_labels_and_levels_order():
    df = clmm_data(seed=4, n=300, items=20, models=4)
    lab = df.assign(rating=df["rating"].map({1: "poor", 2: "fair", 3: "good", 4: "great"}))
    order = ["poor", "fair", "good", "great"]
    m = clmm("rating ~ x + (1 | item)", lab, levels={"rating": order})
    assert list(m.thresholds.index) == ["poor|fair", "fair|good", "good|great"]
    ref = clmm("rating ~ x + (1 | item)", df)
    assert m.thresholds.to_numpy() == pytest.approx(ref.thresholds.to_numpy(), abs=1e-8)
    cat = lab.assign(rating=pd.Categorical(lab["rating"], categories=order, ordered=True))
    assert clmm("rating ~ x + (1 | item)", cat).loglik == pytest.approx(ref.loglik, abs=1e-8)


def test_bad_input_is_one_clear_error():
    df = clmm_data(seed=5, n=200, items=15, models=4)
    with pytest.raises(InputError, match="at least 3"):
        clmm("rating ~ x + (1 | item)", df.assign(rating=np.where(df["rating"] > 2, 2, 1)))
    with pytest.raises(InputError, match="whole numbers"):
        clmm("rating ~ x + (1 | item)", df.assign(rating=df["rating"] + 0.5))
    with pytest.raises(InputError, match="gap"):
        clmm("rating ~ x + (1 | item)", df.assign(rating=np.where(df["rating"] == 2, 1, df["rating"])))
    with pytest.raises(InputError, match="order of its levels"):
        clmm("rating ~ x + (1 | item)", df.assign(rating=df["rating"].map(str)))
    with pytest.raises(InputError, match="random slopes"):
        clmm("rating ~ x + (1 + x | item)", df)
    with pytest.raises(InputError, match="link"):
        clmm("rating ~ x + (1 | item)", df, link="cloglog")
    with pytest.raises(InputError, match="random intercept"):
        clmm("rating ~ x", df)
    with pytest.raises(InputError, match="intercept"):
        clmm("rating ~ 0 + x + (1 | item)", df)


def test_cli_clmm_json(tmp_path, capsys):
    from mrcstats.cli import main

    df = clmm_data(seed=6, n=300, items=20, models=4)
    p = tmp_path / "ratings.csv"
    df.to_csv(p, index=False)
    f = "rating ~ x + (1 | item) + (1 | model)"
    assert main(["clmm", str(p), "--formula", f, "--link", "probit", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    m = clmm(f, df, link="probit")
    assert got["link"] == "probit" and got["thresholds"] == pytest.approx(m.thresholds.to_dict(), abs=1e-10)
    assert got["sd"] == pytest.approx(m.sd.to_dict(), abs=1e-10) and got["loglik"] == pytest.approx(m.loglik)
    assert main(["clmm", str(p), "--formula", f, "--probs", "--ranef"]) == 0
    out = capsys.readouterr().out
    assert "Threshold coefficients:" in out and "Category probabilities" in out
    df.assign(LLM=np.where(df["x"] > 0, "a", "b")).to_csv(p, index=False)
    fe = "rating ~ x + LLM + (1 | item)"
    assert main(["clmm", str(p), "--formula", fe, "--emmeans", "LLM", "--pairs", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert [r["LLM"] for r in got["emmeans"]] == ["a", "b"] and got["pairs"][0]["contrast"] == "a - b"
    assert main(["clmm", str(p), "--formula", fe, "--emmeans", "nope"]) == 2
    assert "nope" in capsys.readouterr().err
    df.assign(rating=df["rating"] + 0.25).to_csv(p, index=False)
    assert main(["clmm", str(p), "--formula", f]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "whole numbers" in err[0]


@settings(max_examples=60, deadline=None)
@given(cuts=st.lists(st.floats(-40, 40, allow_nan=False), min_size=2, max_size=6, unique=True),
       eta=st.lists(st.floats(-60, 60, allow_nan=False), min_size=1, max_size=8),
       link=st.sampled_from(["logit", "probit"]))
def test_category_probabilities_are_a_distribution(cuts, eta, link):
    """For any increasing thresholds and latent values the J category probabilities are ≥ 0 and sum to 1."""
    cut = np.concatenate([[-np.inf], np.sort(cuts), [np.inf]])
    e = np.asarray(eta)[:, None]
    P = category_probs(link, cut[None, 1:] - e, cut[None, :-1] - e)
    assert np.all(P >= 0) and np.allclose(P.sum(axis=1), 1.0, atol=1e-12)


def test_docs_clmm_examples_run(tmp_path, monkeypatch, capsys):
    """Every example in docs/clmm.md runs, in order, in one folder (the first block writes ``ratings.csv``)."""
    import shlex
    from pathlib import Path

    from mrcstats.cli import main

    from .._docblocks import blocks, cli_lines

    doc = Path(__file__).resolve().parents[2] / "docs" / "clmm.md"
    found = [(lang, body) for _, lang, body in blocks(doc)]
    assert [lang for lang, _ in found] == ["python", "bash"]
    monkeypatch.chdir(tmp_path)
    for lang, code in found:
        if lang == "python":
            exec(compile(code, str(doc), "exec"), {})  # noqa: S102 - the docs are ours
            continue
        for line in cli_lines(code):
            capsys.readouterr()
            assert main(shlex.split(line)[1:]) == 0, line
            if "--json" in line:
                got = json.loads(capsys.readouterr().out)
                assert set(got["thresholds"]) == {"1|2", "2|3", "3|4", "4|5"}
                assert "--emmeans" not in line or len(got["pairs"]) == 3


def test_boundary_sd_is_reported_and_left_out_of_vcov():
    """No model effect in the data: its SD goes to 0 (as clmm: -483.2112752 on this seed, SD item 1.206066), the fit
    says so, and the Hessian leaves the boundary parameter out as clmm's paratBoundary2 does."""
    rng = np.random.default_rng(11)
    n = 400
    item, model, x = rng.integers(0, 25, n), rng.integers(0, 5, n), rng.normal(size=n)
    y = 1 + np.searchsorted([-1, 0, 1], 0.5 * x + rng.normal(0, 1, 25)[item] + rng.logistic(size=n))
    d = pd.DataFrame({"rating": y, "x": x, "item": item.astype(str), "model": model.astype(str)})
    m = clmm("rating ~ x + (1 | item) + (1 | model)", d)
    assert m.singular and m.converged and m.sd["model"] == 0.0
    assert m.sd["item"] == pytest.approx(1.206066, abs=1e-4) and m.loglik == pytest.approx(-483.2112752, abs=1e-4)
    assert list(m.vcov.index) == ["1|2", "2|3", "3|4", "x", "ST1"]
    assert any("boundary" in msg for msg in m.messages)
