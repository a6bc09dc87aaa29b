"""Inter-rater agreement (mrcstats.stats.agreement): parity with R psych (Cohen's kappa with its CI, ICC), the
krippendorff and irrCAC packages and statsmodels, in this run; hypothesis properties; bad input."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.stats._r_accuracy import run_r_json

from mrcstats import agreement
from mrcstats.errors import InputError


def _ratings(seed: int, n: int = 70, raters: int = 4, q: int = 5, missing: float = 0.1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    truth = rng.integers(1, q + 1, n)
    x = np.column_stack([np.clip(truth + rng.integers(-1, 2, n), 1, q) for _ in range(raters)]).astype(float)
    x[rng.random(x.shape) < missing] = np.nan
    return x[~np.isnan(x).all(axis=1)]


def _frame(x: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame(x, columns=[f"r{j}" for j in range(x.shape[1])])


def _row(res, stat: str, weights: str | None = None) -> pd.Series:
    t = res.table[res.table["statistic"] == stat]
    if weights is not None:
        t = t[t["weights"] == weights]
    assert len(t) == 1, (stat, weights, res.table)
    return t.iloc[0]


# ------------------------------------------------------------------------------------------ R psych
def test_cohen_kappa_and_icc_equal_r_psych(rscript, tmp_path):
    x = _ratings(3, n=80, raters=2, q=4, missing=0)
    d = _frame(x)
    csv = tmp_path / "k.csv"
    d.to_csv(csv, index=False)
    code = f"""
    if (!requireNamespace("psych", quietly = TRUE)) {{ cat("NOPSYCH"); quit(status = 0) }}
    suppressMessages(library(psych)); d <- read.csv("{csv}")
    k <- cohen.kappa(d); kl <- cohen.kappa(d, w = outer(1:4, 1:4, function(i, j) 1 - abs(i - j) / 3))
    ic <- ICC(d, lmer = FALSE)$results
    cat(jsonlite::toJSON(list(k = k$kappa, ci = k$confid[1, ], wk = k$weighted.kappa, vw = k$var.weighted,
        lk = kl$weighted.kappa, icc = ic$ICC, lo = ic[["lower bound"]], hi = ic[["upper bound"]]), digits = NA))
    """
    import subprocess

    probe = subprocess.run([rscript, "-e", 'cat(requireNamespace("psych", quietly = TRUE))'], capture_output=True,
                           text=True, check=False)
    if "TRUE" not in probe.stdout:
        pytest.skip("R package psych missing (apt-get install r-cran-psych)")
    r = run_r_json(rscript, code)
    res = agreement(d, wide=list(d.columns), level="interval", bootstrap=0)
    k = _row(res, "cohen_kappa", "none")
    assert k.estimate == pytest.approx(r["k"][0], abs=1e-12)
    assert [k.ci_low, k.ci_high] == pytest.approx([r["ci"][0], r["ci"][2]], abs=1e-12)
    assert _row(res, "cohen_kappa", "quadratic").estimate == pytest.approx(r["wk"][0], abs=1e-12)
    assert _row(res, "cohen_kappa", "linear").estimate == pytest.approx(r["lk"][0], abs=1e-12)
    for j, name in enumerate(["ICC1", "ICC2", "ICC3", "ICC1k", "ICC2k", "ICC3k"]):
        row = _row(res, name)
        assert [row.estimate, row.ci_low, row.ci_high] == pytest.approx([r["icc"][j], r["lo"][j], r["hi"][j]],
                                                                        abs=1e-10), name
    # psych's weighted-kappa variance is not Fleiss-Cohen-Everitt's: its row term is p_i. * sum_j w_ij where
    # FCE has sum_i p_i. w_ij (written out here, it gives R's number); ours is FCE's (statsmodels below)
    p = np.zeros((4, 4))
    np.add.at(p, (x[:, 0].astype(int) - 1, x[:, 1].astype(int) - 1), 1.0 / len(x))
    rs, cs = p.sum(1), p.sum(0)
    i = np.arange(4)
    w = 1 - (i[:, None] - i[None, :]) ** 2 / 9
    po, pe = (w * p).sum(), (w * np.outer(rs, cs)).sum()
    colw, roww = w @ cs, rs * w.sum(1)
    v = (((p * (w * (1 - pe) - (colw[:, None] + roww[None, :]) * (1 - po)) ** 2).sum()
          - (po * pe - 2 * pe + po) ** 2) / (len(x) * (1 - pe) ** 4))
    assert v == pytest.approx(r["vw"][0], rel=1e-10)


def test_weighted_kappa_se_equals_statsmodels():
    from statsmodels.stats.inter_rater import cohens_kappa

    x = _ratings(5, n=90, raters=2, q=4, missing=0)
    res = agreement(_frame(x), wide=["r0", "r1"], level="ordinal", bootstrap=0)
    tab = np.zeros((4, 4))
    np.add.at(tab, (x[:, 0].astype(int) - 1, x[:, 1].astype(int) - 1), 1)
    for name, wt in (("none", None), ("linear", "linear"), ("quadratic", "quadratic")):
        sm = cohens_kappa(tab, wt=wt)
        row = _row(res, "cohen_kappa", name)
        assert [row.estimate, row.se] == pytest.approx([sm.kappa, sm.std_kappa], abs=1e-12), name


# ------------------------------------------------------------------------------ krippendorff, irrCAC
@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "ratio"])
def test_alpha_equals_krippendorff_package(level):
    kr = pytest.importorskip("krippendorff")
    for seed in (1, 2):
        x = _ratings(seed, missing=0.2)
        res = agreement(_frame(x), wide=[f"r{j}" for j in range(4)], level=level, bootstrap=50, seed=1)
        want = kr.alpha(reliability_data=x.T, level_of_measurement=level)
        assert _row(res, "krippendorff_alpha").estimate == pytest.approx(want, abs=1e-12)


def _irrcac(d: pd.DataFrame, weights: str, cats: list[float], tmp_path) -> dict:
    """irrCAC's estimates on ``d``: in this interpreter when irrCAC imports here, else in ``.venv-ref``
    (``make venv-ref``; irrCAC pins scipy 1.12 and pandas < 3) by running tests/stats/_irrcac_ref.py there."""
    try:
        from tests.stats._irrcac_ref import estimates
    except ImportError:         # irrCAC is not importable in this interpreter
        estimates = None
    if estimates is not None:
        return estimates(d, weights, cats)
    ref = Path(os.environ.get("MRCSTATS_REF_PYTHON", Path(__file__).parents[2] / ".venv-ref" / "bin" / "python"))
    if not ref.exists():
        msg = f"irrCAC is not importable here and its reference venv is absent ({ref}; run `make venv-ref`)"
        if os.environ.get("MRCSTATS_REQUIRE_R", "") not in ("", "0"):
            pytest.fail(f"{msg}: with MRCSTATS_REQUIRE_R=1 (CI) the reference packages must run")
        pytest.skip(msg)
    csv = tmp_path / "ratings.csv"
    d.to_csv(csv, index=False)
    out = subprocess.run([str(ref), str(Path(__file__).with_name("_irrcac_ref.py")), str(csv), weights,
                          ",".join(map(str, cats))], check=False, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize(("level", "weights"), [("nominal", "identity"), ("ordinal", "ordinal"),
                                                ("interval", "quadratic"), ("ratio", "ratio")])
def test_fleiss_ac_and_alpha_se_equal_irrcac(level, weights, tmp_path):
    x = _ratings(7, missing=0.15)
    d = _frame(x)
    res = agreement(d, wide=list(d.columns), level=level, bootstrap=0)
    cats = [1.0, 2.0, 3.0, 4.0, 5.0]     # (irrCAC counts NaN as a category unless told the categories)
    ref = _irrcac(d, weights, cats, tmp_path)
    g = ref["gwet"]
    row = _row(res, "gwet_ac1" if weights == "identity" else "gwet_ac2", weights)
    assert [row.estimate, row.se, row.ci_low, row.ci_high] == pytest.approx(
        [g["coefficient_value"], g["se"], *g["confidence_interval"]], abs=1e-9)
    f = ref["fleiss"]
    row = _row(res, "fleiss_kappa")
    assert [row.estimate, row.se, row.ci_low, row.ci_high] == pytest.approx(
        [f["coefficient_value"], f["se"], *f["confidence_interval"]], abs=1e-9)
    if level != "ordinal":      # Krippendorff's alpha with Gwet's weights = the fixed metric; its analytic SE
        ka = ref["krippendorff"]
        row = _row(res, "krippendorff_alpha")
        assert [row.estimate, row.se] == pytest.approx([ka["coefficient_value"], ka["se"]], abs=1e-9)


# ---------------------------------------------------------------------------------------- properties
ratings_st = st.integers(2, 5).flatmap(lambda q: st.tuples(
    st.just(q), st.lists(st.lists(st.integers(1, q), min_size=3, max_size=3), min_size=4, max_size=25)))


@settings(max_examples=40, deadline=None)
@given(ratings_st)
def test_perfect_agreement_gives_one(data):
    _, rows = data
    truth = np.array([r[0] for r in rows], dtype=float)
    if len(set(truth)) < 2:
        truth[0] = 1.0 if truth[0] != 1 else 2.0
    x = np.column_stack([truth, truth, truth])
    res = agreement(_frame(x), wide=["r0", "r1", "r2"], level="interval", bootstrap=0)
    for stat in ("fleiss_kappa", "gwet_ac1", "gwet_ac2", "krippendorff_alpha", "ICC1", "ICC2", "ICC3"):
        assert _row(res, stat).estimate == pytest.approx(1.0, abs=1e-12), stat
    two = agreement(_frame(x[:, :2]), wide=["r0", "r1"], level="ordinal", bootstrap=0)
    for w in ("none", "linear", "quadratic"):
        assert _row(two, "cohen_kappa", w).estimate == pytest.approx(1.0, abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(ratings_st, st.permutations([0, 1, 2]), st.sampled_from(["nominal", "ordinal", "interval"]))
def test_permuting_raters_leaves_the_multi_rater_coefficients_unchanged(data, perm, level):
    _, rows = data
    x = np.array(rows, dtype=float)
    if len(np.unique(x)) < 2:
        x[0, 0] = 1.0 if x[0, 0] != 1 else 2.0
    a = agreement(_frame(x), wide=["r0", "r1", "r2"], level=level, bootstrap=0)
    b = agreement(_frame(x[:, perm]), wide=["r0", "r1", "r2"], level=level, bootstrap=0)
    for stat in ("fleiss_kappa", "gwet_ac1", "krippendorff_alpha"):
        ea, eb = _row(a, stat).estimate, _row(b, stat).estimate
        assert (np.isnan(ea) and np.isnan(eb)) or ea == pytest.approx(eb, abs=1e-12), stat


@settings(max_examples=30, deadline=None)
@given(ratings_st)
def test_long_and_wide_forms_agree(data):
    _, rows = data
    x = np.array(rows, dtype=float)
    if len(np.unique(x)) < 2:
        x[0, 0] = 1.0 if x[0, 0] != 1 else 2.0
    wide = _frame(x)
    wide["item"] = [f"i{u}" for u in range(len(x))]
    long = wide.melt(id_vars="item", var_name="rater", value_name="rating")   # items in the same order
    a = agreement(wide, wide=["r0", "r1", "r2"], item="item", level="ordinal", bootstrap=20, seed=3)
    b = agreement(long, item="item", rater="rater", rating="rating", level="ordinal", bootstrap=20, seed=3)
    pd.testing.assert_frame_equal(a.table, b.table)


def test_bootstrap_is_seeded_and_named():
    d = _frame(_ratings(11))
    a = agreement(d, wide=list(d.columns), level="ordinal", bootstrap=100, seed=5)
    b = agreement(d, wide=list(d.columns), level="ordinal", bootstrap=100, seed=5)
    pd.testing.assert_frame_equal(a.table, b.table)
    row = _row(a, "krippendorff_alpha")
    assert "bootstrap over items (B = 100, seed = 5" in row.method
    assert row.ci_low < row.estimate < row.ci_high


def test_prevalence_and_bias_indices_two_raters_binary():
    # a = 40 both yes, b = 10 yes/no, c = 5 no/yes, d = 45 both no (Byrt, Bland & Carlin 1993's 2 x 2 notation)
    r1 = ["y"] * 40 + ["y"] * 10 + ["n"] * 5 + ["n"] * 45
    r2 = ["y"] * 40 + ["n"] * 10 + ["y"] * 5 + ["n"] * 45
    res = agreement(pd.DataFrame({"a": r1, "b": r2}), wide=["a", "b"])
    assert res.indices["observed_agreement"] == pytest.approx(0.85)
    assert res.indices["prevalence_index"] == pytest.approx(abs(40 - 45) / 100)
    assert res.indices["bias_index"] == pytest.approx(abs(10 - 5) / 100)
    assert res.indices["pabak"] == pytest.approx(2 * 0.85 - 1)
    d = res.to_dict()
    assert {s["statistic"] for s in d["statistics"]} >= {"cohen_kappa", "fleiss_kappa", "gwet_ac1"}
    assert "Agreement of 2 raters on 100 items" in res.summary()


# ------------------------------------------------------------------------------------------ bad input
def test_bad_input_is_one_clear_error():
    long = pd.DataFrame({"item": ["a", "a", "b"], "rater": ["x", "x", "x"], "rating": [1, 2, 1]})
    with pytest.raises(InputError, match="twice"):
        agreement(long, item="item", rater="rater", rating="rating")
    one = pd.DataFrame({"item": ["a", "b"], "rater": ["x", "x"], "rating": [1, 2]})
    with pytest.raises(InputError, match="one rater"):
        agreement(one, item="item", rater="rater", rating="rating")
    nobody = pd.DataFrame({"item": ["a", "a", "b", "b"], "rater": ["x", "y", "x", "y"],
                           "rating": [1, 2, None, None]})
    with pytest.raises(InputError, match="'b'.*rated by nobody"):
        agreement(nobody, item="item", rater="rater", rating="rating")
    ok = pd.DataFrame({"item": ["a", "a", "b", "b"], "rater": ["x", "y", "x", "y"], "rating": [1, 2, 7, 1]})
    with pytest.raises(InputError, match=r"data row 3, column 'rating': rating '7' is not one of the declared"):
        agreement(ok, item="item", rater="rater", rating="rating", levels=[1, 2, 3])
    with pytest.raises(InputError, match="not a number"):
        agreement(pd.DataFrame({"a": ["x", "y"], "b": ["x", "x"]}), wide=["a", "b"], level="interval")
    with pytest.raises(InputError, match="negative"):
        agreement(pd.DataFrame({"a": [-1, 2], "b": [1, 1]}), wide=["a", "b"], level="ratio")
    with pytest.raises(InputError, match="need their order"):
        agreement(pd.DataFrame({"a": ["lo", "hi"], "b": ["lo", "lo"]}), wide=["a", "b"], level="ordinal")
    with pytest.raises(InputError, match="at least two raters"):
        agreement(pd.DataFrame({"a": [1, 2]}), wide=["a"])
    with pytest.raises(InputError, match="no column 'zz'"):
        agreement(pd.DataFrame({"a": [1, 2]}), wide=["a", "zz"])
    with pytest.raises(InputError, match="level must be one of"):
        agreement(pd.DataFrame({"a": [1, 2], "b": [1, 2]}), wide=["a", "b"], level="metric")


@pytest.mark.parametrize("n", [30, 450])      # the vectorised tau_b and, above 400 items, scipy per resample
def test_rank_correlations_of_resamples_equal_scipy(n):
    from scipy import stats

    from mrcstats.stats.agreement import _rank_corr_rows

    rng = np.random.default_rng(n)
    a = rng.integers(1, 6, (3, n)).astype(float)
    b = np.clip(a + rng.integers(-2, 3, (3, n)), 1, 5)
    a[rng.random(a.shape) < 0.1] = np.nan
    for kind, ref in (("spearman", stats.spearmanr), ("kendall", stats.kendalltau)):
        got = _rank_corr_rows(a, b, kind)
        ok = np.isfinite(a)
        want = [ref(a[r, ok[r]], b[r, ok[r]])[0] for r in range(3)]
        assert got == pytest.approx(want, abs=1e-12), kind
