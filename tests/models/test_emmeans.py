"""emmeans()/pairs() against R's emmeans on the same data (lme4 fit, tolPwrss 1e-13), and their properties.

R fits each model once with lme4 run to convergence (``tolPwrss = 1e-13``, bobyqa with
``rhoend = 1e-10``: with the default ``rhoend`` lme4 stops 3e-4 short of the optimum on the
``tr`` case and warns) and computes the emmeans/pairs tables in the same test run; mrcstats
applies :func:`mrcstats.emmeans` to the native fit of the same data. Native and lme4 fixed
effects then differ by ~1e-6, and the tables are compared within 1e-4 (absolute).
"""
from __future__ import annotations

import math
import subprocess

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mrcstats
from mrcstats.errors import InputError
from mrcstats.models.emmeans import _adjust, emmeans, pairs, reference_grid

TOL = 1e-4

_R_SCRIPT = r"""
a <- commandArgs(TRUE)
if (!requireNamespace("emmeans", quietly = TRUE)) { cat("SKIP\tR package emmeans not installed (apt-get install r-cran-emmeans)\n"); quit(status = 0) }
suppressMessages({library(lme4); library(emmeans)})
emm_options(msg.interaction = FALSE, msg.nesting = FALSE)
d <- read.csv(a[1], stringsAsFactors = TRUE)
jobs <- read.delim(a[2], header = FALSE, colClasses = "character", na.strings = character(0))
fits <- list()
done <- character(0)
for (i in seq_len(nrow(jobs))) {
  j <- as.character(jobs[i, ])  # case, formula, sums, name, specs, by, type, adjust
  if (is.null(fits[[j[1]]])) {
    sums <- if (nchar(j[3])) strsplit(j[3], ",")[[1]] else character(0)
    cl <- if (length(sums)) setNames(as.list(rep("contr.sum", length(sums))), sums) else NULL
    fits[[j[1]]] <- glmer(as.formula(j[2]), data = d, family = binomial, contrasts = cl,
                          control = glmerControl(tolPwrss = 1e-13, optimizer = "bobyqa",
                                                 optCtrl = list(rhoend = 1e-10, maxfun = 1e5)))
  }
  m <- fits[[j[1]]]
  if (!(j[1] %in% done)) {  # the fit's estimates, once per case
    done <- c(done, j[1])
    b <- fixef(m); V <- as.matrix(vcov(m))
    for (r in seq_along(b))
      cat(paste(paste0("fit:", j[1]), 1, names(b)[r], sprintf("%.17g", b[r]), sep = "\t"), sep = "\n")
    for (r in seq_along(b)) for (q in seq_along(b))
      cat(paste(paste0("vcov:", j[1]), r, names(b)[q], sprintf("%.17g", V[r, q]), sep = "\t"), sep = "\n")
  }
  by <- if (nchar(j[6])) strsplit(j[6], ",")[[1]] else NULL
  em <- emmeans(m, specs = strsplit(j[5], ",")[[1]], by = by, type = j[7])
  s <- if (nchar(j[8])) as.data.frame(summary(pairs(em, adjust = j[8]))) else as.data.frame(summary(em))
  for (r in seq_len(nrow(s))) for (cn in names(s)) {
    v <- s[[cn]][r]
    txt <- if (is.numeric(v)) sprintf("%.15g", v) else as.character(v)
    cat(paste(j[4], r, cn, txt, sep = "\t"), sep = "\n")
  }
}
"""

#: case -> (formula, sum-coded factors)
CASES = {
    "trt": ("y ~ x * f + h + (1 | g)", ()),
    "sum": ("y ~ x * f + h + (1 | g)", ("f", "h")),
    "tr": ("y ~ scale(x) + f * h + log(z) + b01 + factor(k) + (1 | g)", ()),
    "slope": ("y ~ x * f + h + (1 + x | g)", ()),
}
#: name -> (case, specs, by, type, adjust or "" for the means)
JOBS = {
    "trt_link": ("trt", "f", "", "link", ""),
    "trt_resp": ("trt", "f", "", "response", ""),
    "trt_by": ("trt", "f", "h", "response", ""),
    "trt_pairs_tukey_link": ("trt", "f", "", "link", "tukey"),
    "trt_pairs_tukey_resp": ("trt", "f", "", "response", "tukey"),
    "trt_pairs_holm_by": ("trt", "f", "h", "response", "holm"),
    "sum_link": ("sum", "f", "", "link", ""),
    "sum_resp_by": ("sum", "f", "h", "response", ""),
    "sum_pairs_tukey": ("sum", "f", "", "response", "tukey"),
    "sum_pairs_holm": ("sum", "f", "", "link", "holm"),
    "tr_two": ("tr", "f,h", "", "link", ""),
    "tr_pairs_two": ("tr", "f,h", "", "response", "tukey"),
    "tr_k_pairs": ("tr", "k", "", "link", "bonferroni"),
    "tr_by_pairs": ("tr", "h", "f", "link", "none"),
    "slope_pairs": ("slope", "f", "h", "response", "tukey"),
}


def make_data(seed: int = 17, groups: int = 30, per: int = 20) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = groups * per
    g = np.repeat(np.arange(groups), per)
    f = rng.choice(np.array(["a", "b-1", "c"]), n)
    h = rng.choice(np.array(["u", "v"]), n)
    x = rng.normal(size=n)
    z = rng.lognormal(size=n)
    b01 = rng.binomial(1, 0.3, n)
    k = rng.integers(1, 4, n)
    eta = (0.2 + 0.6 * x + 0.8 * (f == "b-1") - 0.5 * (f == "c") + 0.4 * x * (f == "c") + 0.3 * (h == "v")
           + 0.2 * np.log(z) + 0.3 * b01 + rng.normal(0, 0.8, groups)[g])
    y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(int)
    return pd.DataFrame({"g": [f"g{i:02d}" for i in g], "f": f, "h": h, "x": x, "z": z, "b01": b01, "k": k, "y": y})


@pytest.fixture(scope="module")
def data() -> pd.DataFrame:
    return make_data()


@pytest.fixture(scope="module")
def native(data):
    return {c: mrcstats.glmer(fml, data, contrasts={s: "sum" for s in sums} or None)
            for c, (fml, sums) in CASES.items()}


@pytest.fixture(scope="module")
def r_tables(rscript, data, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("emm")
    data.to_csv(tmp / "d.csv", index=False)
    lines = []
    for name, (case, specs, by, typ, adj) in JOBS.items():
        fml, sums = CASES[case]
        lines.append("\t".join([case, fml, ",".join(sums), name, specs, by, typ, adj]))
    (tmp / "jobs.tsv").write_text("\n".join(lines) + "\n")
    (tmp / "emm.R").write_text(_R_SCRIPT)
    res = subprocess.run([rscript, str(tmp / "emm.R"), str(tmp / "d.csv"), str(tmp / "jobs.tsv")],
                         capture_output=True, text=True, timeout=600, check=False)
    if res.returncode != 0:
        raise RuntimeError(res.stderr[-2000:])
    if res.stdout.startswith("SKIP"):
        pytest.skip(res.stdout.split("\t", 1)[1].strip())
    rows: dict[str, dict[int, dict[str, str]]] = {}
    for line in res.stdout.splitlines():
        parts = line.split("\t")
        if len(parts) == 4:
            rows.setdefault(parts[0], {}).setdefault(int(parts[1]), {})[parts[2]] = parts[3]
    return {name: pd.DataFrame([r[i] for i in sorted(r)]) for name, r in rows.items()}


def _r_estimates(tables, case):
    """(fixef, vcov) of R's lme4 fit of ``case`` as pandas objects."""
    f = tables[f"fit:{case}"]
    names = list(f.columns)
    beta = pd.Series(f.iloc[0].astype(float).to_numpy(), index=names)
    v = tables[f"vcov:{case}"].astype(float)
    return beta, pd.DataFrame(v.to_numpy(), index=names, columns=names)


def _ours(native, name):
    case, specs, by, typ, adj = JOBS[name]
    em = emmeans(native[case], specs.split(","), by=by or None, type=typ)
    return (pairs(em, adjust=adj) if adj else em).to_frame()


def _compare(ours: pd.DataFrame, theirs: pd.DataFrame) -> float:
    assert list(ours.columns) == list(theirs.columns)
    assert len(ours) == len(theirs)
    worst = 0.0
    for c in ours.columns:
        if not pd.api.types.is_numeric_dtype(ours[c]):
            assert [str(v) for v in ours[c]] == list(theirs[c]), c
            continue
        r = theirs[c].astype(float).to_numpy()
        o = ours[c].astype(float).to_numpy()
        if np.isinf(r).any():
            assert np.array_equal(np.isinf(o), np.isinf(r)), c
            continue
        d = float(np.max(np.abs(o - r)))
        assert d < TOL, (c, d, o, r)
        worst = max(worst, d)
    return worst


@pytest.mark.parametrize("name", list(JOBS))
def test_parity_with_r_emmeans(name, native, r_tables):
    """Same columns, labels, order and numbers (within 1e-4) as R's emmeans on the lme4 fit."""
    worst = _compare(_ours(native, name), r_tables[name])
    print(f"emmeans parity {name}: max abs diff {worst:.2e}")


@pytest.mark.parametrize("name", list(JOBS))
def test_exact_given_lme4_estimates(name, native, r_tables):
    """With lme4's own fixef and vcov in place of the native ones, the tables agree to 1e-9:
    the reference grid, averaging, delta method and adjustments are emmeans's exactly."""
    import dataclasses

    case = JOBS[name][0]
    beta, V = _r_estimates(r_tables, case)
    m = native[case]
    assert list(beta.index) == list(m.fixef.index)
    m_r = dataclasses.replace(m, fixef_values=beta.to_numpy(), vcov_values=V.to_numpy())
    theirs = r_tables[name]
    case, specs, by, typ, adj = JOBS[name]
    em = emmeans(m_r, specs.split(","), by=by or None, type=typ)
    ours = (pairs(em, adjust=adj) if adj else em).to_frame()
    worst = 0.0
    for c in ours.columns:
        if pd.api.types.is_numeric_dtype(ours[c]) and not np.isinf(ours[c]).any():
            d = float(np.max(np.abs(ours[c].to_numpy() - theirs[c].astype(float).to_numpy())))
            assert d < 1e-9, (c, d)
            worst = max(worst, d)
    print(f"emmeans exact {name}: max abs diff {worst:.2e}")


def test_tables_and_notes(native):
    em = emmeans(native["trt"], "f", type="response")
    fr = em.to_frame()
    assert list(fr.columns) == ["f", "prob", "SE", "df", "asymp.LCL", "asymp.UCL"]
    assert np.all(np.isinf(fr["df"])) and np.all((fr["asymp.LCL"] < fr["prob"]) & (fr["prob"] < fr["asymp.UCL"]))
    assert "Intervals are back-transformed from the logit scale" in em.summary()
    assert "NOTE: Results may be misleading due to involvement in interactions" in em.notes
    pr = pairs(em)
    assert list(pr.to_frame().columns) == ["contrast", "odds.ratio", "SE", "df", "null", "z.ratio", "p.value"]
    assert pr.contrast == ("a / (b-1)", "a / c", "(b-1) / c")
    d = pr.to_dict()
    assert d["adjust"] == "tukey" and d["pairs"][0]["df"] == math.inf
    link = pairs(emmeans(native["trt"], "f"), adjust="holm")
    assert link.contrast[0] == "a - (b-1)" and "P value adjustment: holm method for 3 tests" in link.summary()
    # the response-scale pairs are exp() of the link-scale ones, with the same tests
    lk = pairs(emmeans(native["trt"], "f")).to_frame()
    assert np.allclose(np.exp(lk["estimate"]), pr.to_frame()["odds.ratio"])
    assert np.allclose(lk["p.value"], pr.to_frame()["p.value"])


def test_reference_grid_rules(native, data):
    m = native["tr"]
    rg = reference_grid(m)
    byname = {v.name: v for v in rg.variables}
    assert byname["x"].values == (pytest.approx(float(data["x"].mean())),)  # covariate at its mean
    assert byname["z"].values == (pytest.approx(float(data["z"].mean())),)  # log(z) at log(mean z)
    assert byname["b01"].values == (0.0, 1.0)  # two distinct values: kept (cov.keep = "2")
    assert byname["k"].labels == ("1", "2", "3") and byname["k"].numeric
    rg2 = reference_grid(m, at={"x": [0, 1], "f": ["c", "a"]})
    v2 = {v.name: v for v in rg2.variables}
    assert v2["x"].values == (0.0, 1.0) and v2["f"].labels == ("a", "c")
    assert rg2.X.shape[0] == 2 * 2 * 2 * 2 * 3  # x, f, h, b01, k (z fixed)


def test_bad_input(native):
    m = native["trt"]
    with pytest.raises(InputError, match="not a variable"):
        emmeans(m, "nope")
    with pytest.raises(InputError, match="type must be"):
        emmeans(m, "f", type="prob")
    with pytest.raises(InputError, match="not among the levels"):
        emmeans(m, "f", at={"f": ["zz"]})
    with pytest.raises(InputError, match="give numbers"):
        emmeans(m, "f", at={"x": ["high"]})
    with pytest.raises(InputError, match="both in specs and in by"):
        emmeans(m, "f", by="f")
    with pytest.raises(InputError, match="adjust must be"):
        pairs(emmeans(m, "f"), adjust="mvt")
    with pytest.raises(InputError, match="single level"):
        pairs(emmeans(m, "x"))
    with pytest.raises(InputError, match="result of mrcstats.emmeans"):
        pairs(m)
    d = make_data(seed=5)
    with pytest.raises(InputError, match="nested structure"):
        emmeans(mrcstats.glmer("y ~ x + f/h + (1 | g)", d), "f")


def test_rank_deficient_means_are_na():
    """An empty cell of an interaction: the non-estimable means are NA, as emmeans's nonEst."""
    d = make_data(seed=3)
    d = d[~((d["f"] == "c") & (d["h"] == "v"))]
    m = mrcstats.glmer("y ~ x + f * h + (1 | g)", d)
    assert m.info.dropped_columns
    fr = emmeans(m, ["f", "h"]).to_frame()
    na = fr["emmean"].isna().to_numpy()
    assert na.tolist() == [False, False, False, False, False, True]
    pr = pairs(emmeans(m, "f", by="h")).to_frame()
    assert pr.loc[pr["h"] == "v", "estimate"].isna().sum() == 2
    assert pr.loc[pr["h"] == "u", "estimate"].notna().all()


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(perm_seed=st.integers(0, 2**31 - 1), order=st.permutations(["a", "b-1", "c"]),
       contrast=st.sampled_from(["treatment", "sum"]))
def test_invariant_to_row_order_level_order_and_coding(perm_seed, order, contrast, data, native):
    """Marginal means and pairwise odds ratios do not depend on the row order, the level order
    (i.e. the reference level) or the contrast coding of the fit."""
    base = emmeans(native["trt"], "f", type="response").to_frame().set_index("f")
    base_p = {tuple(c.split(" / ")): (v, p) for c, v, p in
              pairs(emmeans(native["trt"], "f", type="response")).to_frame()[["contrast", "odds.ratio", "p.value"]]
              .itertuples(index=False)}
    shuffled = data.sample(frac=1.0, random_state=perm_seed).reset_index(drop=True)
    m = mrcstats.glmer(CASES["trt"][0], shuffled, levels={"f": order}, contrasts={"f": contrast})
    em = emmeans(m, "f", type="response")
    fr = em.to_frame().set_index("f")
    assert list(fr.index) == list(order)
    pd.testing.assert_frame_equal(fr.loc[base.index], base, atol=2e-5, rtol=0)
    for c, v, p in pairs(em).to_frame()[["contrast", "odds.ratio", "p.value"]].itertuples(index=False):
        a, b = c.split(" / ")
        # the same pair in the other order is the reciprocal odds ratio, with the same p value
        v0, p0 = base_p[(a, b)] if (a, b) in base_p else (1 / base_p[(b, a)][0], base_p[(b, a)][1])
        assert abs(v - v0) < 1e-4
        assert abs(p - p0) < 1e-4


@settings(max_examples=60, deadline=None)
@given(p=st.lists(st.floats(0, 1), min_size=1, max_size=12))
def test_adjustments_are_conservative(p):
    """Holm and Bonferroni p values are >= the raw ones, <= 1, and Holm <= Bonferroni."""
    p = np.asarray(p)
    z = np.full(p.shape, 1.0)
    holm = _adjust(p, z, "holm", 3, p.size)
    bonf = _adjust(p, z, "bonferroni", 3, p.size)
    assert np.all(holm >= p - 1e-15) and np.all(holm <= 1) and np.all(holm <= bonf + 1e-15)


@settings(max_examples=40, deadline=None)
@given(z=st.floats(0, 8), k=st.integers(2, 8))
def test_tukey_at_least_unadjusted(z, k):
    """ptukey(sqrt(2)|z|, k, Inf) >= 2 Phi(-|z|), with equality for k = 2."""
    from scipy.stats import norm

    raw = 2 * norm.sf(z)
    tk = _adjust(np.array([raw]), np.array([z]), "tukey", k, k * (k - 1) // 2)[0]
    assert tk >= raw - 1e-9
    if k == 2:
        assert abs(tk - raw) < 1e-9


def test_readme_example_runs(capsys):
    """The "Estimated marginal means" example of the docs (docs/emmeans.md) runs as written."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "emmeans.md").read_text()
    sec = text[text.index("<!-- section:emmeans -->"):text.index("<!-- /section:emmeans -->")]
    code = re.findall(r"```python\n(.*?)```", sec, re.DOTALL)
    assert code, "docs/emmeans.md has a python example"
    exec(compile(code[0], "docs/emmeans.md", "exec"), {})  # noqa: S102 - the docs text is ours
    out = capsys.readouterr().out
    assert "odds.ratio" in out and "asymp.LCL" in out
