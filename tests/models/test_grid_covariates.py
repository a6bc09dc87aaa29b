"""The crossed grid with item- and model-level covariates (models.grid.grid_covariates): seed 003's
``correct ~ scaled_tok + scaled_con + wh + (1 | item) + (1 | model)`` on count tables equals the native fit
on the rows (1e-6) and lme4 on the rows (same test run, tolPwrss 1e-13)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import mrcstats
from mrcstats.errors import InputError
from mrcstats.models.grid import CrossedGrid
from mrcstats.models.outofcore import glmer_outofcore

from ._fits import same_fit

F = "correct ~ scaled_tok + scaled_con + wh + (1 | item) + (1 | model)"


def _rows(q1: int, q2: int, seed: int, max_trials: int = 2) -> pd.DataFrame:
    """Bernoulli rows with item features (token count, concreteness, wh-word) and a model size; 0..max-1 trials
    per cell (empty cells included)."""
    rng = np.random.default_rng(seed)
    tok, con = rng.normal(0, 1, q1), rng.normal(0, 1, q1)
    wh = rng.choice(["how", "what", "which", "why"], q1)
    size = rng.normal(0, 1, q2)
    d = rng.normal(0, 1.0, q1) + 0.5 * tok - 0.3 * con + np.where(wh == "why", 0.8, 0.0)
    a = rng.normal(0, 0.8, q2) + 0.6 * size
    n = rng.integers(0, max_trials + 1, size=(q1, q2))
    j, k = np.nonzero(n)
    j, k = np.repeat(j, n[j, k]), np.repeat(k, n[j, k])
    p = 1 / (1 + np.exp(-(0.4 + a[k] - d[j])))
    return pd.DataFrame({"item": [f"i{x:03d}" for x in j], "model": [f"m{x:02d}" for x in k],
                         "scaled_tok": tok[j], "scaled_con": con[j], "wh": wh[j], "size": size[k],
                         "correct": (rng.random(len(j)) < p).astype(int)})


def _same(a, b, tol=1e-6):
    same_fit(a, b, tol, se_rel=1e-4)
    assert a.loglik == pytest.approx(b.loglik, abs=1e-6)


def test_grid_with_item_covariates_equals_rows_fit():
    df = _rows(80, 12, seed=11)
    rows = mrcstats.glmer(F, df)
    g = glmer_outofcore(F, df, backend="memory")
    assert g.engine == "native (memory grid)"
    assert list(g.fixef.index) == ["(Intercept)", "scaled_tok", "scaled_con", "whwhat", "whwhich", "whwhy"]
    _same(rows, g)
    assert any("item-level covariates scaled_con, scaled_tok, wh" in m for m in g.messages)


def test_grid_with_item_and_model_covariates_and_scale_equals_rows_fit():
    """Model-level covariate, an R transform (scale: the rows' mean and SD), an item-level interaction, and
    more models than items (the grid's rows are then the models)."""
    df = _rows(16, 20, seed=12, max_trials=3)
    df["wh"] = np.where(df["wh"].isin(["how", "why"]), "open", "closed")
    f = "correct ~ scale(size) + scaled_tok * wh + (1 | item) + (1 | model)"
    rows = mrcstats.glmer(f, df)
    g = glmer_outofcore(f, df, backend="memory", method="grid")
    assert g.optinfo["collapse"]["grid"] == [20, 16]
    _same(rows, g)


def test_gradient_with_covariates_is_the_deviance_derivative():
    rng = np.random.default_rng(3)
    q1, q2 = 25, 7
    N = rng.integers(0, 3, size=(q1, q2)).astype(np.int32)
    K = rng.binomial(N, 0.6).astype(np.int32)
    Xr = np.column_stack([np.ones(q1), rng.normal(size=(q1, 2))])
    Xc = rng.normal(size=(q2, 1))
    m = CrossedGrid(K, N, chunk_cells=30, Xr=Xr, Xc=Xc)
    x = np.array([0.8, 0.5, 0.3, -0.4, 0.2, 0.5])
    _D, g = m.evaluate(x[:2], x[2:])
    h = 1e-6
    for i in range(len(x)):
        e = np.zeros(len(x))
        e[i] = h
        fd = (m.evaluate((x + e)[:2], (x + e)[2:], grad=False)[0]
              - m.evaluate((x - e)[:2], (x - e)[2:], grad=False)[0]) / (2 * h)
        assert g[i] == pytest.approx(fd, rel=1e-5, abs=1e-5)


def test_rx_vcov_with_covariates_close_to_hessian_vcov():
    df = _rows(60, 10, seed=13)
    g = glmer_outofcore(F, df, backend="memory")
    from mrcstats.models.formula import parse_formula
    from mrcstats.models.grid import grid_covariates
    from mrcstats.models.outofcore import _Grid, pass_backend

    be = pass_backend(df, "memory")
    grid, _ = be.grid_counts(["item", "model"], "correct", lambda vals: _Grid(("item", "model"), vals, None))
    cov = grid_covariates(parse_formula(F), be, grid, "correct")
    K, N = grid.tables()
    m = CrossedGrid(K, N, Xr=cov.Xr, Xc=cov.Xc)
    beta = np.empty(len(cov.order))
    beta[:] = g.fixef.to_numpy()[list(cov.order)]
    rx = m.rx_vcov(g.theta.to_numpy(), beta)
    want = g.vcov.to_numpy()[np.ix_(cov.order, cov.order)]
    np.testing.assert_allclose(np.sqrt(np.diag(rx)), np.sqrt(np.diag(want)), rtol=0.05)


def test_covariates_the_grid_cannot_take():
    df = _rows(30, 6, seed=14)
    # varies within an (item, model) cell: trial-level covariate
    df["temp"] = np.arange(len(df)) % 2
    f = "correct ~ temp + (1 | item) + (1 | model)"
    with pytest.raises(InputError, match=r"'temp' varies within an \(item, model\) cell"):
        glmer_outofcore(f, df, backend="memory", method="grid")
    # auto: the cell table takes it, as before
    c = glmer_outofcore(f, df, backend="memory")
    assert c.engine == "native (memory collapse)"
    # constant within cells but item x model (not separable)
    codes = df["item"].str[1:].astype(int) + df["model"].str[1:].astype(int)
    df["cellcov"] = (codes % 3).astype(float)
    with pytest.raises(InputError, match="varies across both 'item' and 'model'"):
        glmer_outofcore("correct ~ cellcov + (1 | item) + (1 | model)", df, backend="memory", method="grid")
    with pytest.raises(InputError, match="mixes item-level and model-level covariates"):
        glmer_outofcore("correct ~ scaled_tok:size + (1 | item) + (1 | model)", df, backend="memory",
                        method="grid")
    df.loc[3, "scaled_tok"] = np.nan
    with pytest.raises(InputError, match="missing on 1 row"):
        glmer_outofcore(F, df, backend="memory", method="grid")


def test_grid_covariates_on_a_dataset_duckdb_and_dask(tmp_path):
    pytest.importorskip("duckdb")
    from mrcstats.io.ingest import write_dataset

    df = _rows(40, 8, seed=15)
    df["trial"] = df.groupby(["model", "item"]).cumcount()
    df.to_parquet(tmp_path / "s.parquet")
    path = write_dataset(tmp_path / "s.parquet", tmp_path / "ds")
    mem = glmer_outofcore(F, df, backend="memory")
    duck = glmer_outofcore(F, path, backend="duckdb", method="grid")
    assert duck.engine == "native (duckdb grid)"
    _same(mem, duck, tol=1e-8)
    pytest.importorskip("dask.dataframe")
    dask = glmer_outofcore(F, df, backend="dask", method="grid")
    _same(mem, dask, tol=1e-8)


#: lme4 with its default glmer(nAGQ = 1) objective, tolPwrss 1e-13 and the optimiser run to convergence
#: (nloptwrap, absolute tolerances): the default bobyqa/Nelder-Mead stops ~1e-4 short on flat likelihoods
_LME4 = r"""
suppressMessages(library(lme4))
a <- commandArgs(TRUE)
df <- read.csv(a[1], stringsAsFactors = TRUE)
m <- glmer(as.formula(a[2]), data = df, family = binomial,
           control = glmerControl(tolPwrss = 1e-13, optimizer = "nloptwrap",
                                  optCtrl = list(xtol_abs = 1e-12, ftol_abs = 1e-14, xtol_rel = 0, ftol_rel = 0,
                                                 maxeval = 1e5)))
out <- function(sec, nm, v) cat(paste(sec, nm, sprintf("%.17g", v), sep = "\t"), sep = "\n")
out("fixef", names(fixef(m)), fixef(m))
out("se", names(fixef(m)), sqrt(diag(as.matrix(vcov(m)))))
out("theta", names(getME(m, "theta")), getME(m, "theta"))
out("loglik", "loglik", as.numeric(logLik(m)))
"""


@pytest.mark.r
def test_grid_with_item_covariates_equals_lme4(rscript, tmp_path):
    """A slice the size lme4 fits in seconds: 50 items x 9 models, 1-2 trials per cell."""
    import subprocess

    df = _rows(50, 9, seed=16)
    g = glmer_outofcore(F, df, backend="memory", method="grid")
    df.to_csv(tmp_path / "d.csv", index=False)
    (tmp_path / "fit.R").write_text(_LME4)
    out = subprocess.run([rscript, str(tmp_path / "fit.R"), str(tmp_path / "d.csv"), F], capture_output=True,
                         text=True, timeout=600, check=True).stdout
    r: dict = {}
    for line in out.splitlines():
        sec, name, val = line.split("\t")
        r.setdefault(sec, {})[name] = float(val)
    assert list(r["fixef"]) == list(g.fixef.index)
    np.testing.assert_allclose(g.fixef.to_numpy(), list(r["fixef"].values()), rtol=0, atol=1e-5)
    np.testing.assert_allclose(g.theta.to_numpy(), list(r["theta"].values()), rtol=0, atol=1e-5)
    np.testing.assert_allclose(g.se.to_numpy(), list(r["se"].values()), rtol=1e-3)
    assert g.loglik == pytest.approx(r["loglik"]["loglik"], abs=1e-6)


def test_docs_scale_recipe_runs(tmp_path, monkeypatch, capsys):
    """docs/scale.md's seed-003 recipe (a dataset block, which tests/test_readme.py skips) runs as written."""
    pytest.importorskip("duckdb")
    from pathlib import Path

    from .._docblocks import blocks

    page = Path(__file__).resolve().parents[2] / "docs" / "scale.md"
    [code] = [b for _l, lang, b in blocks(page) if lang == "python" and "scaled_tok + scaled_con + wh" in b]
    monkeypatch.chdir(tmp_path)
    exec(compile(code, str(page), "exec"), {})  # noqa: S102 - the page is ours
    out = capsys.readouterr().out
    assert "native (duckdb grid)" in out and "item-level covariates scaled_con, scaled_tok, wh" in out
