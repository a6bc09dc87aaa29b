"""Judge vs humans (mrcstats.stats.judge): the prediction-powered mean on generated data with a known truth,
its limiting cases, and bad input. (Coverage over many simulated subsets is a benchmark:
benchmarks/bench_judge_agreement.py.)"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcstats import judge
from mrcstats.errors import InputError
from mrcstats.stats.judge import ppi_mean


def _log(seed: int, p: float = 0.6, n: int = 2000, labelled: int = 300, fp: float = 0.2, fn: float = 0.05):
    """One model with true accuracy ``p``; the judge calls a wrong answer right with probability ``fp`` and a
    right one wrong with ``fn`` (judge mean p(1 - fn) + (1 - p) fp, biased); humans label a random subset."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < p).astype(float)
    f = np.where(y == 1, rng.random(n) > fn, rng.random(n) < fp).astype(float)
    h = np.full(n, np.nan)
    lab = rng.choice(n, labelled, replace=False)
    h[lab] = y[lab]
    return pd.DataFrame({"model": "m", "judge": f, "human": h}), y


def test_ppi_corrects_the_judge_bias_on_generated_data():
    d, y = _log(1)
    res = judge(d, human="human", judge="judge", bootstrap=0)
    r = res.table.iloc[0]
    truth = y.mean()                      # the human-scale accuracy over every row
    judge_expect = 0.6 * 0.95 + 0.4 * 0.2
    assert r.judge_mean == pytest.approx(judge_expect, abs=0.03)        # judge-only: biased upwards
    assert r.judge_mean - truth > 0.03
    assert abs(r.ppi_mean - truth) < 3 * r.ppi_se                       # PPI: on the human scale
    assert r.ppi_se < r.human_se                                         # narrower than the labelled rows alone
    plain = judge(d, human="human", judge="judge", ppi="plain", bootstrap=0).table.iloc[0]
    assert plain.rectifier == pytest.approx(plain.ppi_mean - plain.judge_mean, abs=1e-12)   # λ = 1
    assert r.rectifier == plain.rectifier                       # mean(human − judge) whatever the rule


def test_ppi_limiting_cases():
    rng = np.random.default_rng(3)
    f = rng.random(50)
    y = f + rng.normal(0, 0.1, 50)
    # every row labelled: the PPI mean is the human mean, with the human mean's SE
    est, se, _ = ppi_mean(f, f, y, method="plain")
    assert est == pytest.approx(y.mean(), abs=1e-12)
    assert se == pytest.approx(y.std(ddof=1) / np.sqrt(50), rel=1e-12)
    # a perfect judge: no correction, the judge's SE over all rows
    lab = rng.choice(50, 10, replace=False)
    est, se, _ = ppi_mean(f, f[lab], f[lab], method="plain")
    assert est == pytest.approx(f.mean(), abs=1e-12)
    assert se == pytest.approx(f.std(ddof=1) / np.sqrt(50), rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=4, max_size=40), st.floats(-1, 1))
def test_ppi_variance_is_that_of_the_linear_combination(rows, shift):
    """θ_PP = mean_N(f) + mean_n(y − f): with every row labelled its variance formula reduces to s²_y/N, for any
    judge (and shifting the judge by a constant leaves θ_PP unchanged)."""
    f = np.array([r[0] for r in rows])
    y = np.array([r[1] for r in rows])
    est, se, _ = ppi_mean(f, f, y, method="plain")
    est2, se2, _ = ppi_mean(f + shift, f + shift, y, method="plain")
    assert est == pytest.approx(y.mean(), abs=1e-9) and est2 == pytest.approx(est, abs=1e-9)
    assert se ** 2 == pytest.approx(y.var(ddof=1) / len(y), abs=1e-12)     # (variances: no sqrt of rounding)
    assert se2 ** 2 == pytest.approx(se ** 2, abs=1e-12)


def test_judge_per_model_and_agreement():
    a, _ = _log(5, p=0.7)
    b, _ = _log(6, p=0.3)
    a["model"], b["model"] = "a", "b"
    res = judge(pd.concat([a, b], ignore_index=True), human="human", judge="judge", bootstrap=0)
    assert list(res.table["model"]) == ["a", "b"]
    assert res.agreement.raters == ("human", "judge") and res.agreement.n_items == 600
    assert res.to_dict()["models"][1]["n_labelled"] == 300
    assert "PPI" in res.summary()


def test_judge_bad_input():
    d, _ = _log(7, n=50, labelled=10)
    with pytest.raises(InputError, match="do not overlap"):
        judge(d.assign(human=np.nan), human="human", judge="judge")
    with pytest.raises(InputError, match="the judge must score every row"):
        judge(d.assign(judge=np.where(np.arange(50) == 4, np.nan, d["judge"])), human="human", judge="judge")
    with pytest.raises(InputError, match="data row 3, column 'human' holds 'yes'"):
        judge(d.assign(human=["x" if i != 2 else "yes" for i in range(50)]).replace("x", np.nan), human="human",
              judge="judge")
    with pytest.raises(InputError, match="same column"):
        judge(d, human="judge", judge="judge")
    with pytest.raises(InputError, match="no column 'grader'"):
        judge(d, human="human", judge="grader")


def test_rows_target_is_the_difference_estimator():
    rng = np.random.default_rng(8)
    f = rng.random(100)
    y = f + rng.normal(0, 0.2, 100)
    lab = rng.choice(100, 30, replace=False)
    est, se, _ = ppi_mean(f, f[lab], y[lab], target="rows", method="plain")
    d = y[lab] - f[lab]
    assert est == pytest.approx(f.mean() + d.mean(), abs=1e-12)
    assert se == pytest.approx(np.sqrt((1 - 30 / 100) * d.var(ddof=1) / 30), rel=1e-12)
    # every row labelled: the rows' mean is known exactly
    assert ppi_mean(f, f, y, target="rows", method="plain")[1] == 0.0
    # power tuning: lambda = the regression slope, variance never above the human-only one
    est, se, lam = ppi_mean(f, f[lab], y[lab], method="tuned")
    assert lam == pytest.approx(np.cov(y[lab], f[lab])[0, 1] / f[lab].var(ddof=1), rel=1e-12)
    d = y[lab] - lam * f[lab]
    want = lam ** 2 * f.var(ddof=1) / 100 + d.var(ddof=1) / 30 + 2 * lam * np.cov(f[lab], d)[0, 1] / 100
    assert se ** 2 == pytest.approx(want, rel=1e-12)
    assert est == pytest.approx(lam * f.mean() + d.mean(), abs=1e-12)
    assert se < y[lab].std(ddof=1) / np.sqrt(30)
    with pytest.raises(InputError, match="target must be one of"):
        ppi_mean(f, f, y, target="sample")


@pytest.mark.parametrize("target", ["population", "rows"])
def test_labels_needed_for_a_width(target):
    d, _ = _log(9, n=2000, labelled=200)
    res = judge(d, human="human", judge="judge", target=target, ppi="tuned", width=0.06, bootstrap=0)
    r = res.table.iloc[0]
    # plugging the answer back into the variance formulas gives (at most) the width asked for
    lab = d["human"].notna().to_numpy()
    f, y = d["judge"].to_numpy(), d["human"].to_numpy()
    lam = r.ppi_lambda
    dd = y[lab] - lam * f[lab]
    z = 1.959963984540054
    for n_need, s2, fixed in ((r.n_for_width_human, y[lab].var(ddof=1), 0.0),
                              (r.n_for_width_ppi, dd.var(ddof=1),
                               (lam ** 2 * f.var(ddof=1) + 2 * lam * np.cov(f[lab], dd)[0, 1]) / 2000)):
        def var(n, s2=s2, fixed=fixed):
            return (1 / n - 1 / 2000) * s2 if target == "rows" else s2 / n + fixed

        assert 2 * z * np.sqrt(var(n_need)) <= 0.06 + 1e-12 < 2 * z * np.sqrt(var(n_need - 1))
    assert r.n_for_width_ppi < r.n_for_width_human          # a good judge saves labels
    assert "human labels for a CI 0.06 wide" in res.summary()
    with pytest.raises(InputError, match="width"):
        judge(d, human="human", judge="judge", width=0)


# ------------------------------------------------------------------------------------------- several judges
def test_effective_judges_formula():
    from mrcstats.stats.judge import effective_judges

    assert effective_judges(6, 0.42) == pytest.approx(6 / 3.1, abs=1e-15)
    assert round(effective_judges(6, 0.42), 1) == 1.9            # Inspect issue #4955: six judges, .42, "1.9"
    assert effective_judges(5, 0.0) == 5 and effective_judges(5, 1.0) == 1 and effective_judges(1, 0.3) == 1
    assert effective_judges(3, -0.5) == float("inf") and np.isnan(effective_judges(3, float("nan")))


def _panel_log(seed: int, k: int = 6, rho: float = 0.42, n: int = 4000, labelled: float = 0.75):
    """Judges scoring a continuous quality: error_j = sqrt(rho)·common + sqrt(1 − rho)·own, so every pair of
    errors correlates rho; rounded to 0.1 (the rounding adds a variance of 0.1²/12, negligible)."""
    rng = np.random.default_rng(seed)
    y = rng.normal(size=n)
    common = rng.normal(size=n)
    cols = {f"j{i}": (y + np.sqrt(rho) * common + np.sqrt(1 - rho) * rng.normal(size=n)).round(1) for i in range(k)}
    human = np.where(rng.random(n) < labelled, y.round(1), np.nan)
    return pd.DataFrame({"model": np.where(np.arange(n) % 2, "a", "b"), "human": human, **cols})


def test_several_judges_recover_the_effective_number():
    d = _panel_log(1)
    res = judge(d, human="human", judge=[f"j{i}" for i in range(6)], level="interval", bootstrap=100, seed=3)
    p = res.panel
    assert p.judges == tuple(f"j{i}" for i in range(6)) and p.combine == "mean"
    assert p.mean_rho == pytest.approx(0.42, abs=0.03)
    assert p.k_eff == pytest.approx(6 / 3.1, abs=0.12)
    assert p.mean_rho_low < p.mean_rho < p.mean_rho_high and p.k_eff_low < p.k_eff < p.k_eff_high
    assert p.k_eff == pytest.approx(6 / (1 + 5 * p.mean_rho), rel=1e-12)
    # the matrix: Pearson of the errors on the labelled rows, as numpy computes it
    lab = d["human"].notna().to_numpy()
    e = d.loc[lab, [f"j{i}" for i in range(6)]].to_numpy() - d.loc[lab, "human"].to_numpy()[:, None]
    assert p.correlation.to_numpy() == pytest.approx(np.corrcoef(e.T), abs=1e-10)
    assert len(p.pairs) == 15 and (p.pairs["ci_low"] < p.pairs["r"]).all() and (p.pairs["r"] < p.pairs["ci_high"]).all()
    # the panel is one judge: its mean score, its PPI table and agreement as for a column holding it
    one = judge(d.assign(panel=d[[f"j{i}" for i in range(6)]].mean(axis=1)), human="human", judge="panel",
                level="interval", bootstrap=0, seed=3)
    assert res.table["ppi_mean"].to_numpy() == pytest.approx(one.table["ppi_mean"].to_numpy(), abs=1e-12)
    assert res.agreement.estimate("krippendorff_alpha") == pytest.approx(one.agreement.estimate("krippendorff_alpha"))
    # the panel's errors are smaller than any one judge's: its PPI interval is the narrowest
    assert (res.table["ppi_se"].to_numpy() < min(r.table["ppi_se"].min() for r in p.per_judge)).all()
    assert p.agreement_table(res.agreement)["judge"].nunique() == 7
    out = res.to_dict()["panel"]
    assert out["k_eff"] == pytest.approx(p.k_eff) and len(out["correlation"]) == 6 and len(out["per_judge"]) == 6
    assert "effective number of independent judges" in res.summary()


def test_independent_judges_are_worth_k():
    d = _panel_log(2, k=4, rho=0.0)
    p = judge(d, human="human", judge=["j0", "j1", "j2", "j3"], level="interval", bootstrap=0).panel
    assert abs(p.mean_rho) < 0.03 and p.k_eff == pytest.approx(4, abs=0.35)
    assert np.isnan(p.mean_rho_low) and np.isnan(p.pairs["ci_low"]).all()      # no bootstrap: NA intervals


def test_panel_bootstrap_is_seeded():
    d = _panel_log(3, k=3, n=400)
    runs = [judge(d, human="human", judge=["j0", "j1", "j2"], level="interval", bootstrap=50, seed=s).panel
            for s in (7, 7, 8)]
    assert runs[0].k_eff_low == runs[1].k_eff_low and runs[0].k_eff_low != runs[2].k_eff_low


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(5, 40), st.integers(2, 5))
def test_resampled_correlations_equal_numpy_on_the_resampled_rows(seed, n, k):
    """The bootstrap's weighted moments give, for each resample, numpy's correlation of the rows it drew."""
    from mrcstats.stats.judge import _weighted_corr

    rng = np.random.default_rng(seed)
    e = rng.normal(size=(n, k))
    idx = rng.integers(0, n, size=(3, n))
    w = np.stack([np.bincount(i, minlength=n) for i in idx]).astype(float)
    got = _weighted_corr(e, w)
    for b in range(3):
        x = e[idx[b]]
        if (x.std(axis=0) > 1e-9).all():
            assert got[b] == pytest.approx(np.corrcoef(x.T), abs=1e-9)


def test_majority_panel_and_ties():
    from mrcstats.stats.judge import panel_scores

    s = np.array([[1, 1, 0], [0, 1, 0], [1, 0, 2], [0, 1, 2], [2, 1, 1]], dtype=float)
    got, ties = panel_scores(s, "majority")
    assert list(got) == [1, 0, 1, 0, 1] and ties == 2        # rows 3 and 4: three-way ties -> the first judge
    assert list(panel_scores(s[:, :2], "mean")[0]) == [1, 0.5, 0.5, 0.5, 1.5]
    with pytest.raises(InputError, match="combine must be one of"):
        panel_scores(s, "median")


def test_several_judges_bad_input():
    d = _panel_log(4, k=3, n=60)
    with pytest.raises(InputError, match="'j1' is named twice"):
        judge(d, human="human", judge=["j0", "j1", "j1"])
    with pytest.raises(InputError, match="no column 'j9' \\(--judge\\)"):
        judge(d, human="human", judge=["j0", "j9"])
    with pytest.raises(InputError, match="do not overlap the judges' rows"):
        judge(d.assign(human=np.nan), human="human", judge=["j0", "j1"])
    with pytest.raises(InputError, match="same column"):
        judge(d, human="human", judge=["j0", "human"])
    with pytest.raises(InputError, match="combine must be one of"):
        judge(d, human="human", judge=["j0", "j1"], combine="vote")


# --------------------------------------------------------------------------- the judge's bias per model (GLMM)


def _biased_log(seed: int = 11, items: int = 120, fp=(0.1, 0.35, 0.15)):
    """Three models answer the same items (item difficulty shared); the judge calls a wrong answer right with
    the model's own rate ``fp`` (it favours the second model) and a right one wrong with .08; humans label the
    first 80 items."""
    rng = np.random.default_rng(seed)
    hard = rng.normal(0, 1, items)
    rows = []
    for k, (m, p_fp) in enumerate(zip("abc", fp)):
        y = rng.random(items) < 1 / (1 + np.exp(-(0.3 + 0.5 * k - hard)))
        f = np.where(y, rng.random(items) > 0.08, rng.random(items) < p_fp)
        for i in range(items):
            rows.append({"model": m, "item": f"q{i}", "judge": float(f[i]),
                         "human": float(y[i]) if i < 80 else np.nan})
    return pd.DataFrame(rows)


def test_judge_bias_equals_lme4(rscript, tmp_path):
    """The bias GLMMs (fixef, SE, θ, and the LRT's log-likelihoods) equal lme4's glmer on the same rows."""
    from tests.models._r import lme4_fit

    d = _biased_log()
    res = judge(d, human="human", judge="judge", item="item", bootstrap=0)
    b = res.bias
    lab = d[d["human"].notna()]
    for outcome, keep, ind in (("over", lab["human"] < 1, lab["judge"] > lab["human"]),
                               ("disagree", lab["human"] == lab["human"], lab["judge"] != lab["human"])):
        frame = pd.DataFrame({"y": ind.astype(int), "model": lab["model"], "item": lab["item"]})[keep.to_numpy()]
        r1 = lme4_fit(rscript, frame, "y ~ 0 + model + (1 | item)", tmp_path, ranef=False)
        r0 = lme4_fit(rscript, frame, "y ~ 1 + (1 | item)", tmp_path, ranef=False)
        t = b.table[b.table["outcome"] == outcome].set_index("model")
        for m in "abc":
            assert t.loc[m, "logit"] == pytest.approx(r1["fixef"][f"model{m}"], abs=1e-4), (outcome, m)
            assert t.loc[m, "se"] == pytest.approx(r1["se"][f"model{m}"], rel=1e-3), (outcome, m)
            assert t.loc[m, "n"] == int((frame["model"] == m).sum())
        test = b.tests.set_index("outcome").loc[outcome]
        assert test.sd_item == pytest.approx(next(iter(r1["theta"].values())), abs=1e-4)
        assert test.chisq == pytest.approx(2 * (r1["loglik"] - r0["loglik"]), abs=1e-4)
        assert test.df == 2
    over = b.table[b.table["outcome"] == "over"].set_index("model")
    assert over.loc["b", "prob"] > over.loc["a", "prob"]                  # the judge favours b
    assert over.loc["b", "prob_low"] < over.loc["b", "prob"] < over.loc["b", "prob_high"]


def test_judge_bias_guards_and_output(capsys, tmp_path):
    d = _biased_log()
    res = judge(d, human="human", judge="judge", bootstrap=0)
    assert res.bias is None and "bias" not in res.to_dict()
    with pytest.raises(InputError, match="no column 'itm'.*--item-col"):
        judge(d, human="human", judge="judge", item="itm", bootstrap=0)
    bad = d.copy()
    bad.loc[3, "item"] = None
    with pytest.raises(InputError, match="row 4, column 'item'"):
        judge(bad, human="human", judge="judge", item="item", bootstrap=0)
    one = judge(d[d["model"] == "a"], human="human", judge="judge", item="item", bootstrap=0)
    assert one.bias.tests["chisq"].isna().all() and "fewer than two models" in " ".join(one.bias.notes)
    cont = d.assign(judge=d["judge"] * 0.9 + 0.05)
    r = judge(cont, human="human", judge="judge", item="item", level="interval", bootstrap=0)
    assert len(r.bias.tests) == 0 and any("GLMMs not fitted" in n for n in r.bias.notes)   # the LMM instead
    assert r.bias.shift is not None
    # CLI: text and one JSON object
    from mrcstats.cli import main
    p = tmp_path / "log.csv"
    d.to_csv(p, index=False)
    assert main(["judge", str(p), "--human", "human", "--judge", "judge", "--item-col", "item", "--bootstrap", "0",
                 "--json"]) == 0
    import json
    out = json.loads(capsys.readouterr().out)
    assert [t["outcome"] for t in out["bias"]["tests"]] == ["over", "disagree"]
    assert {r["model"] for r in out["bias"]["models"]} == {"a", "b", "c"}
    assert main(["judge", str(p), "--human", "human", "--judge", "judge", "--item-col", "item",
                 "--bootstrap", "0"]) == 0
    assert "over-rating (judge > human): no model effect, LRT" in capsys.readouterr().out


def test_calibration_bins():
    from mrcstats.stats.judge import calibration

    f = np.array([0, 0, 1, 1, 1, 2.0])
    y = np.array([0, 1, 1, 1, 0, 1.0])
    c = calibration(f, y, bins=5)                           # 3 distinct scores: a bin each
    assert list(c["judge_mean"]) == [0, 1, 2] and list(c["n"]) == [2, 3, 1]
    assert c["human_mean"].tolist() == pytest.approx([0.5, 2 / 3, 1.0])
    rng = np.random.default_rng(0)
    g = rng.random(500)
    c = calibration(g, (rng.random(500) < g).astype(float), bins=10)
    assert len(c) == 10 and c["n"].sum() == 500 and c["n"].min() >= 49     # quantile bins
    with pytest.raises(InputError, match="bins"):
        calibration(g, g, bins=0)


# ------------------------------------------------------------------------------------ cross-fitted PPI++ (default)
def test_crossfit_is_the_default_and_is_named(capsys):
    import inspect as _inspect

    from mrcstats.stats.judge import PPI_RULES, ppi_critical

    assert _inspect.signature(judge).parameters["ppi"].default == "crossfit"
    assert _inspect.signature(ppi_mean).parameters["method"].default == "crossfit"
    d, _ = _log(2, n=600, labelled=60)
    res = judge(d, human="human", judge="judge", bootstrap=0)
    assert res.ppi == "crossfit" and set(res.table["ppi_method"]) == {"crossfit"}
    out = res.to_dict()
    assert out["ppi"] == "crossfit" and out["ppi_rule"] == PPI_RULES["crossfit"]
    assert out["models"][0]["ppi_method"] == "crossfit"
    assert PPI_RULES["crossfit"] in res.summary() and "crossfit 0." in res.summary()
    r = res.table.iloc[0]
    q = ppi_critical("crossfit", 60, 0.05)               # t(59), wider than z
    assert q == pytest.approx(2.000995378, abs=1e-8)
    assert r.ppi_high - r.ppi_low == pytest.approx(2 * q * r.ppi_se, rel=1e-12)
    for m in ("plain", "tuned"):
        other = judge(d, human="human", judge="judge", ppi=m, bootstrap=0)
        assert other.to_dict()["ppi"] == m and PPI_RULES[m] in other.summary()
    with pytest.raises(InputError, match="ppi must be one of"):
        judge(d, human="human", judge="judge", ppi="ppi++")
    # the labels a width needs, from the out-of-fold residuals and λ̄ (module docstring)
    from mrcstats.stats.judge import labels_needed, ppi_lambdas

    w = judge(d, human="human", judge="judge", width=0.08, bootstrap=0).table.iloc[0]
    lab = d["human"].notna().to_numpy()
    f, y = d["judge"].to_numpy(), d["human"].to_numpy()
    lam = ppi_lambdas(f[lab], y[lab], seed=0, key="m")
    dd = y[lab] - lam * f[lab]
    fixed = (lam.mean() ** 2 * f.var(ddof=1) + 2 * lam.mean() * np.cov(f[lab], dd)[0, 1]) / len(f)
    need = labels_needed(0.08, "crossfit", len(f), dd.var(ddof=1), fixed)
    assert w.n_for_width_ppi == need
    # the interval's own t_{n−1}: the smallest n whose t-interval is at most 0.08 wide (z would ask fewer)
    def half(n):
        return ppi_critical("crossfit", n) * np.sqrt(dd.var(ddof=1) / n + fixed)

    assert half(int(need)) <= 0.04 + 1e-12 < half(int(need) - 1)
    assert need > labels_needed(0.08, "plain", len(f), dd.var(ddof=1), fixed)
    # the human-only interval uses the same critical value as the PPI one (one rule per output)
    assert w.human_high - w.human_low == pytest.approx(2 * ppi_critical("crossfit", 60) * w.human_se, rel=1e-12)


def test_crossfit_formula_by_hand():
    """θ = Σ_k (n_k/n) λ_(−k) mean_N(f) + mean_n(d), d_i = y_i − λ_(−k(i)) f_i, with the λ's recomputed here
    from the documented folds (canonical order by (y, f), shuffled by the seeded stream, 5 array_split folds)."""
    from mrcstats._seeds import stream
    from mrcstats.stats.judge import ppi_lambdas

    rng = np.random.default_rng(5)
    N, n = 300, 47
    f = rng.random(N)
    y = 0.7 * f + rng.normal(0, 0.2, N)
    lab = rng.choice(N, n, replace=False)
    fl, yl = f[lab], y[lab]
    order = np.lexsort((fl, yl))[stream(3, "ppi crossfit", "m").permutation(n)]
    lam = np.empty(n)
    for part in np.array_split(order, 5):
        rest = np.setdiff1d(np.arange(n), part)
        lam[part] = np.cov(yl[rest], fl[rest])[0, 1] / fl[rest].var(ddof=1)
    assert ppi_lambdas(fl, yl, "crossfit", seed=3, key="m") == pytest.approx(lam, rel=1e-12)
    dd = yl - lam * fl
    lbar = lam.mean()
    for target in ("population", "rows"):
        est, se, lb = ppi_mean(f, fl, yl, target=target, seed=3, key="m")
        assert lb == pytest.approx(lbar, rel=1e-12)
        assert est == pytest.approx(lbar * f.mean() + dd.mean(), abs=1e-12)
        want = ((1 - n / N) * dd.var(ddof=1) / n if target == "rows" else
                lbar ** 2 * f.var(ddof=1) / N + dd.var(ddof=1) / n + 2 * lbar * np.cov(fl, dd)[0, 1] / N)
        assert se ** 2 == pytest.approx(want, rel=1e-10)
    # a judge that predicts nothing: every λ_(−k) near 0, the estimate near the human mean
    assert ppi_mean(rng.random(N), fl * 0 + rng.random(n), yl, seed=0)[0] == pytest.approx(yl.mean(), abs=0.1)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2 ** 32 - 1), st.integers(4, 60), st.integers(0, 10 ** 6), st.sampled_from(["population", "rows"]))
def test_crossfit_is_invariant_to_row_order_and_deterministic(data_seed, n, seed, target):
    """Given the seed, the cross-fitted estimate depends on the labelled rows as a set, not on their order
    (folds are drawn from the rows sorted by (y, f)); and the same seed gives the same numbers."""
    rng = np.random.default_rng(data_seed)
    f_all = rng.integers(0, 3, 80).astype(float)           # ties: rows with equal scores are interchangeable
    lab = rng.choice(80, min(n, 80), replace=False)
    fl = f_all[lab]
    yl = np.clip(fl + rng.integers(-1, 2, len(lab)), 0, 2).astype(float)
    perm = rng.permutation(len(lab))
    a = ppi_mean(f_all, fl, yl, target=target, seed=seed, key="x")
    b = ppi_mean(f_all[rng.permutation(80)], fl[perm], yl[perm], target=target, seed=seed, key="x")
    assert a == pytest.approx(b, rel=1e-9, abs=1e-12, nan_ok=True)
    assert ppi_mean(f_all, fl, yl, target=target, seed=seed, key="x") == a


def test_crossfit_is_unbiased_in_simulation():
    """Over 2,000 simulated labelled subsets (fixed seed) the cross-fitted estimate's mean error is within 3 Monte
    Carlo SEs of 0, and the tuned and plain ones agree with it on average (no coverage asserted: a benchmark)."""
    rng = np.random.default_rng(2026)
    N, n, reps = 400, 40, 2000
    f = (rng.random(N) < 0.5).astype(float)
    y = np.where(f == 1, rng.random(N) < 0.8, rng.random(N) < 0.3).astype(float)
    truth = y.mean()
    err = np.empty(reps)
    for r in range(reps):
        lab = rng.choice(N, n, replace=False)
        err[r] = ppi_mean(f, f[lab], y[lab], target="rows", seed=r)[0] - truth
    assert abs(err.mean()) < 3 * err.std(ddof=1) / np.sqrt(reps)


def test_crossfit_small_labelled_sets():
    from mrcstats.stats.judge import ppi_critical, ppi_lambdas

    f = np.array([0.0, 1.0, 1.0, 0.0, 1.0])
    assert ppi_lambdas(f[:1], f[:1]) == pytest.approx([1.0])             # one row: λ = 1
    assert ppi_lambdas(f[:3], f[:3]).shape == (3,)                       # fewer rows than folds: n folds
    assert np.isnan(ppi_critical("crossfit", 1))
    est, se, _ = ppi_mean(f, f[:2], f[:2] * 0.5)
    assert np.isfinite(est) and np.isfinite(se)                      # two rows: λ = 1 in both folds
    with pytest.raises(InputError, match="ppi must be one of"):
        ppi_mean(f, f, f, method="xfit")
    with pytest.raises(InputError, match="seed must be"):
        ppi_mean(f, f, f, seed=-1)


# ------------------------------------------------------------------------ judge bias on a score's own scale (LMM)
def _scaled_log(seed: int = 4, items: int = 60, shift=(0.0, 0.6, -0.2)) -> pd.DataFrame:
    """Three models' answers to ``items`` items scored 1-10 (continuous) by humans on the first 45 items; the
    judge adds an item effect (some items are judged harshly for everyone) and over-scores model m by
    ``shift[m]``."""
    rng = np.random.default_rng(seed)
    harsh = rng.normal(0, 0.5, items)
    rows = []
    for k, m in enumerate("abc"):
        y = np.clip(rng.normal(5 + k, 1.5, items), 1, 10)
        f = y + shift[k] + harsh + rng.normal(0, 0.4, items)
        for i in range(items):
            rows.append({"model": m, "item": f"q{i}", "judge": float(f[i]), "human": float(y[i]) if i < 45 else np.nan})
    return pd.DataFrame(rows)


_LMM_R = r"""
suppressMessages(library(lmerTest))
a <- commandArgs(TRUE)
df <- read.csv(a[1], stringsAsFactors = TRUE)
ctl <- lmerControl(optimizer = "nloptwrap", optCtrl = list(xtol_abs = 1e-12, ftol_abs = 1e-14,
                                                           xtol_rel = 1e-12, ftol_rel = 1e-15, maxeval = 100000))
m1 <- lmer(diff ~ 0 + model + (1 | item), df, control = ctl)
m2 <- lmer(diff ~ model + (1 | item), df, control = ctl)
s <- summary(m1)$coefficients
out <- function(sec, nm, v) cat(paste(sec, nm, sprintf("%.17g", v), sep = "\t"), sep = "\n")
out("fixef", rownames(s), s[, "Estimate"])
out("se", rownames(s), s[, "Std. Error"])
out("df", rownames(s), s[, "df"])
a2 <- anova(m2)
out("anova", c("F", "NumDF", "DenDF", "p"), c(a2[1, "F value"], a2[1, "NumDF"], a2[1, "DenDF"], a2[1, "Pr(>F)"]))
vc <- as.data.frame(VarCorr(m1))
out("sd", vc$grp, vc$sdcor)
"""


def test_judge_bias_lmm_equals_lme4(rscript, tmp_path):
    """For scores on a scale the LMM of judge − human (δ_m, SE, Satterthwaite df; the F test of no model effect;
    item and residual SDs) equals lme4/lmerTest on the same rows."""
    import subprocess

    d = _scaled_log()
    res = judge(d, human="human", judge="judge", item="item", level="interval", bootstrap=0)
    b = res.bias
    assert b.shift is not None and len(b.table) == 0            # fractional scores: no GLMMs, the LMM
    assert any("GLMMs not fitted" in n for n in b.notes)
    lab = d[d["human"].notna()]
    frame = pd.DataFrame({"diff": lab["judge"] - lab["human"], "model": lab["model"], "item": lab["item"]})
    csv, script = tmp_path / "d.csv", tmp_path / "lmm.R"
    frame.to_csv(csv, index=False)
    script.write_text(_LMM_R)
    out = subprocess.run([rscript, str(script), str(csv)], capture_output=True, text=True, timeout=600, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    r: dict = {}
    for line in out.stdout.splitlines():
        sec, name, val = line.split("\t")
        r.setdefault(sec, {})[name] = float(val)
    t = b.shift.set_index("model")
    for m in "abc":
        assert t.loc[m, "estimate"] == pytest.approx(r["fixef"][f"model{m}"], abs=1e-6), m
        assert t.loc[m, "se"] == pytest.approx(r["se"][f"model{m}"], rel=1e-4), m
        assert t.loc[m, "df"] == pytest.approx(r["df"][f"model{m}"], rel=1e-4), m
        assert t.loc[m, "mean_diff"] == pytest.approx(frame.loc[frame["model"] == m, "diff"].mean(), abs=1e-12)
    test = b.shift_test
    assert test["F"] == pytest.approx(r["anova"]["F"], rel=1e-5)
    assert test["num_df"] == r["anova"]["NumDF"] == 2
    assert test["den_df"] == pytest.approx(r["anova"]["DenDF"], rel=1e-4)
    assert test["p"] == pytest.approx(r["anova"]["p"], rel=1e-4, abs=1e-12)
    assert test["sd_item"] == pytest.approx(r["sd"]["item"], abs=1e-5)
    assert test["sd_resid"] == pytest.approx(r["sd"]["Residual"], abs=1e-6)
    # the judge over-scores b by 0.6 more than a: the estimates and the test see it
    assert t.loc["b", "ci_low"] < t.loc["b", "estimate"] < t.loc["b", "ci_high"]
    assert t.loc["b", "estimate"] - t.loc["a", "estimate"] == pytest.approx(0.6, abs=0.2) and test["p"] < 1e-6


def test_judge_bias_lmm_output_and_guards(capsys, tmp_path):
    d = _scaled_log()
    res = judge(d, human="human", judge="judge", item="item", level="interval", bootstrap=0)
    text = res.summary()
    assert "LMM (judge - human) ~ 0 + model + (1 | item)" in text and "F = " in text and "on 2 and" in text
    shift = res.to_dict()["bias"]["shift"]
    assert [m["model"] for m in shift["models"]] == ["a", "b", "c"] and shift["test"]["num_df"] == 2
    # ordinal scores (1-5): both the GLMMs and the LMM; 0/1 labels: the GLMMs only
    ordn = d.assign(judge=np.clip(np.round(d["judge"] / 2), 1, 5), human=np.clip(np.round(d["human"] / 2), 1, 5))
    r = judge(ordn, human="human", judge="judge", item="item", level="ordinal", bootstrap=0)
    assert r.bias.shift is not None and len(r.bias.tests) == 2
    binary = _biased_log()
    assert judge(binary, human="human", judge="judge", item="item", bootstrap=0).bias.shift is None
    # one model: not fitted, a note; the CLI's JSON carries it
    one = judge(d[d["model"] == "a"], human="human", judge="judge", item="item", level="interval", bootstrap=0)
    assert one.bias.shift["estimate"].isna().all() and any("fewer than two models" in n for n in one.bias.notes)
    from mrcstats.cli import main
    p = tmp_path / "log.csv"
    d.to_csv(p, index=False)
    assert main(["judge", str(p), "--human", "human", "--judge", "judge", "--item-col", "item", "--level", "interval",
                 "--bootstrap", "0", "--json"]) == 0
    import json
    assert json.loads(capsys.readouterr().out)["bias"]["shift"]["test"]["F"] > 10
def _sparse_log(rows_per_item: int, seed: int = 5, n: int = 240) -> pd.DataFrame:
    """``n`` labelled rows, ``rows_per_item`` per item, each row a random model's (the judge favours model a)."""
    rng = np.random.default_rng(seed)
    items = np.repeat(np.arange(n // rows_per_item), rows_per_item)
    model = np.array(["a", "b", "c"])[rng.integers(0, 3, len(items))]
    y = (rng.random(len(items)) < 0.5).astype(float)
    fp = 1 / (1 + np.exp(-(-1.0 + 0.8 * (model == "a") + rng.normal(0, 1, items.max() + 1)[items])))
    f = np.where(y == 1, rng.random(len(items)) < 0.9, rng.random(len(items)) < fp).astype(float)
    return pd.DataFrame({"model": model, "item": [f"q{i}" for i in items], "judge": f, "human": y})


def test_judge_bias_with_one_labelled_row_per_item_equals_r_glm(rscript, tmp_path):
    """One labelled row per item: the item SD is not identified and lme4 refuses the GLMM (levels == rows; the
    bias part crashed with a ModelError): the bias falls back to the logistic regression without the item
    effect, with a note, and equals R's glm and anova(test = "Chisq") on the same rows."""
    import subprocess

    d = _sparse_log(1)
    b = judge(d, human="human", judge="judge", item="item", bootstrap=0).bias
    assert any("every item has one labelled row" in n for n in b.notes)
    for outcome, keep, ind in (("over", d["human"] < 1, d["judge"] > d["human"]),
                               ("disagree", d["human"] == d["human"], d["judge"] != d["human"])):
        frame = pd.DataFrame({"y": ind.astype(int), "model": d["model"]})[keep.to_numpy()]
        frame.to_csv(tmp_path / "f.csv", index=False)
        code = (f"d <- read.csv('{tmp_path / 'f.csv'}'); "
                "m1 <- glm(y ~ 0 + model, binomial, d); m0 <- glm(y ~ 1, binomial, d); "
                "a <- anova(m0, m1, test = 'Chisq'); "
                "cat(sprintf('%.12g', c(coef(m1), sqrt(diag(vcov(m1))), a$Deviance[2], a$Df[2])))")
        r = subprocess.run([rscript, "-e", code], capture_output=True, text=True, check=True)
        got = [float(v) for v in r.stdout.split()]
        t = b.table[b.table["outcome"] == outcome].set_index("model")
        np.testing.assert_allclose(t.loc[["a", "b", "c"], "logit"], got[0:3], rtol=1e-7)
        np.testing.assert_allclose(t.loc[["a", "b", "c"], "se"], got[3:6], rtol=1e-6)
        np.testing.assert_allclose(t["prob"], t["rate"], rtol=1e-12)
        test = b.tests.set_index("outcome").loc[outcome]
        assert test.chisq == pytest.approx(got[6], rel=1e-7) and test.df == got[7] == 2
        assert np.isnan(test.sd_item)


def test_judge_shift_with_one_labelled_row_per_item_equals_r_lm(rscript, tmp_path):
    """Scores on a scale, one labelled row per item: the shift LMM is not identified (lme4 refuses it) and falls
    back to R's lm(diff ~ 0 + model) with anova(lm(diff ~ model))'s F test, with a note."""
    import subprocess

    rng = np.random.default_rng(11)
    n = 150
    d = pd.DataFrame({"model": rng.choice(["a", "b", "c"], n), "item": [f"q{i}" for i in range(n)],
                      "human": rng.integers(1, 6, n).astype(float)})
    d["judge"] = np.clip(d["human"] + rng.integers(-1, 2, n) + (d["model"] == "a"), 1, 5).astype(float)
    sh = judge(d, human="human", judge="judge", item="item", bootstrap=0).bias
    assert any("every item has one labelled row" in m and "linear model" in m for m in sh.notes), sh.notes
    pd.DataFrame({"diff": d["judge"] - d["human"], "model": d["model"]}).to_csv(tmp_path / "s.csv", index=False)
    code = (f"d <- read.csv('{tmp_path / 's.csv'}'); m <- lm(diff ~ 0 + model, d); "
            "a <- anova(lm(diff ~ model, d)); ci <- confint(m); "
            "cat(sprintf('%.12g', c(coef(m), sqrt(diag(vcov(m))), ci[, 1], ci[, 2], a$`F value`[1], a$Df, "
            "a$`Pr(>F)`[1], sigma(m))))")
    got = [float(v) for v in subprocess.run([rscript, "-e", code], capture_output=True, text=True,
                                            check=True).stdout.split()]
    t = sh.shift.set_index("model").loc[["a", "b", "c"]]
    np.testing.assert_allclose(t["estimate"], got[0:3], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(t["se"], got[3:6], rtol=1e-9)
    np.testing.assert_allclose(t["ci_low"], got[6:9], rtol=1e-9)
    np.testing.assert_allclose(t["ci_high"], got[9:12], rtol=1e-9)
    assert [sh.shift_test["F"], sh.shift_test["num_df"], sh.shift_test["den_df"], sh.shift_test["p"],
            sh.shift_test["sd_resid"]] == pytest.approx([got[12], got[13], got[14], got[15], got[16]], rel=1e-9)


def test_judge_bias_says_when_the_item_sd_rests_on_few_rows_per_item():
    """With about two labelled rows per item the item SD is unstable (0 in one sample, above 1 in the next): a
    note says so and points to the marginal and observed rates; with many rows per item there is no such note."""
    few = judge(_sparse_log(2), human="human", judge="judge", item="item", bootstrap=0).bias
    assert any("labelled rows per item on average" in n and "unstable" in n for n in few.notes), few.notes
    many = judge(_sparse_log(8), human="human", judge="judge", item="item", bootstrap=0).bias
    assert not any("labelled rows per item on average" in n for n in many.notes), many.notes


@settings(max_examples=60, deadline=None)
@given(alpha=st.floats(0.001, 0.5), width=st.floats(0.01, 0.5), s2=st.floats(0.001, 2.0),
       N=st.integers(10, 5000), method=st.sampled_from(["plain", "tuned", "crossfit"]),
       target=st.sampled_from(["population", "rows"]))
def test_the_judge_code_has_one_normal_critical_value(alpha, width, s2, N, method, target):
    """``normal_critical(alpha)`` is the one z of the judge code (``z_{1−α/2}``): the non-crossfit PPI rule's
    critical value and ``labels_needed``'s lower bound (which took it from ``ppi_critical("plain", 2, alpha)``),
    with the same numbers as before."""
    import inspect
    import math

    from mrcstats._dist import norm_ppf
    from mrcstats.stats import judge as judge_mod

    z = judge_mod.normal_critical(alpha)
    assert z == float(norm_ppf(1 - alpha / 2))
    assert judge_mod.ppi_critical("plain", 2, alpha) == judge_mod.ppi_critical("tuned", 50, alpha) == z
    src = inspect.getsource(judge_mod)
    assert src.count("norm_ppf(") == 1 and 'ppi_critical("plain"' not in src
    # labels_needed: the plain/tuned answer is the smallest n with z·SE(n) <= width/2 (population, no fixed part)
    n = judge_mod.labels_needed(width, method, N, s2, target=target, alpha=alpha)
    if method != "crossfit" and target == "population":
        assert n == math.ceil(s2 / (width / (2 * z)) ** 2)
