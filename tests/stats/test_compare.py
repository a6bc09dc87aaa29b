"""compare / per_item_scores / p_adjust / power: numpy by hand, and R (p.adjust, binom.test, mcnemar.test,
sandwich::vcovCL) run in the same test session."""
from __future__ import annotations

import math
import subprocess

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm
from scipy.stats import t as t_dist

from mrcstats.errors import InputError
from mrcstats.stats.accuracy import wilson_interval
from mrcstats.stats.compare import compare, compare_scores, p_adjust, per_item_scores
from mrcstats.stats.power import power


def make_log(seed: int = 3, models: int = 4, clusters: int = 30, per: int = 6, trials: int = 1,
             drop: float = 0.0, invalid: float = 0.02) -> pd.DataFrame:
    """Clustered binary data with known structure: model ability + cluster effect + item effect."""
    rng = np.random.default_rng(seed)
    n = clusters * per
    cl = np.repeat(np.arange(clusters), per)
    u = rng.normal(0, 1.0, clusters)[cl]
    e = rng.normal(0, 0.7, n)
    rows = []
    for m in range(models):
        p = 1 / (1 + np.exp(-(0.3 * m - 0.4 + u + e)))
        for t in range(trials):
            y = (rng.random(n) < p).astype(object)
            y[rng.random(n) < invalid] = None
            keep = rng.random(n) >= drop
            rows.append(pd.DataFrame({"model": f"m{m}", "item": [f"q{i}" for i in range(n)],
                                      "cluster": [f"c{c}" for c in cl], "trial": t, "correct": y})[keep])
    return pd.concat(rows, ignore_index=True)


def by_hand(log: pd.DataFrame, clustered: bool, alpha: float = 0.05):
    """Every figure of compare() from explicit loops and dicts."""
    x = log.assign(s=log["correct"].map(lambda v: 1.0 if v is True else 0.0))
    items = x.groupby(["model", "item"]).agg(score=("s", "mean"), k=("s", "size"),
                                             cluster=("cluster", "first")).reset_index()
    zq = norm.ppf(1 - alpha / 2)

    def se_pair(v, cl):
        v = np.asarray(v, float)
        n = len(v)
        plain = math.sqrt(np.var(v, ddof=1) / n)
        sums: dict = {}
        for vi, ci in zip(v - v.mean(), cl, strict=True):
            sums[ci] = sums.get(ci, 0.0) + vi
        g = len(sums)
        clus = math.sqrt(g / (g - 1) * sum(s * s for s in sums.values())) / n
        return plain, clus, g

    models = {}
    for m, sub in items.groupby("model"):
        plain, clus, g = se_pair(sub["score"], sub["cluster"])
        models[m] = (sub["score"].mean(), plain, clus, g)
    pairs = {}
    names = sorted(models)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            A = items[items.model == a].set_index("item")
            B = items[items.model == b].set_index("item")
            common = [it for it in A.index if it in B.index]
            sa, sb = A.loc[common, "score"].to_numpy(), B.loc[common, "score"].to_numpy()
            cl = A.loc[common, "cluster"].to_numpy()
            d = sa - sb
            sp, sc, g = se_pair(d, cl)
            used = sc if clustered else sp
            ua = se_pair(sa, cl)[1 if clustered else 0]
            ub = se_pair(sb, cl)[1 if clustered else 0]
            z = d.mean() / used
            # clustered: t on G - 1 df (few clusters, issue 36); independent items: normal
            crit = t_dist.ppf(1 - alpha / 2, g - 1) if clustered else zq
            pval = 2 * (t_dist.sf(abs(z), g - 1) if clustered else norm.sf(abs(z)))
            single = (A.loc[common, "k"] == 1).all() and (B.loc[common, "k"] == 1).all()
            pairs[(a, b)] = {"n": len(common), "diff": d.mean(), "se": sp, "se_cluster": sc, "z": z,
                                 "p": pval, "lo": d.mean() - crit * used, "hi": d.mean() + crit * used,
                                 "corr": np.corrcoef(sa, sb)[0, 1], "vr": used ** 2 / (ua ** 2 + ub ** 2),
                                 "bonly": int(np.sum((sa == 1) & (sb == 0))) if single else None,
                                 "conly": int(np.sum((sa == 0) & (sb == 1))) if single else None}
    return models, pairs


@pytest.mark.parametrize("drop", [0.0, 0.05])  # every item answered (matrix path) / some missing (pair loop)
@pytest.mark.parametrize("clustered", [False, True])
def test_matches_numpy_by_hand(clustered: bool, drop: float) -> None:
    log = make_log(drop=drop)
    res = compare(log, cluster="cluster" if clustered else None)
    models, pairs = by_hand(log, clustered)
    for r in res.models.itertuples(index=False):
        acc, plain, clus, g = models[r.model]
        assert r.accuracy == pytest.approx(acc, rel=1e-12)
        assert r.se == pytest.approx(plain, rel=1e-10)
        if clustered:
            assert r.se_cluster == pytest.approx(clus, rel=1e-10)
            # the one accuracy interval: Wilson at the effective n (capped at n) with t on G - 1 df
            n_eff = min(acc * (1 - acc) / clus ** 2, r.n_items)
            want = wilson_interval(acc * n_eff, n_eff, critical=t_dist.ppf(0.975, g - 1))
            assert (r.ci_method, r.ci_df, r.ci_low, r.ci_high) == (
                "clustered wilson", g - 1, pytest.approx(float(want[0]), rel=1e-10),
                pytest.approx(float(want[1]), rel=1e-10))
        else:
            assert math.isnan(r.se_cluster) and r.ci_method == "wilson"
            want = wilson_interval(acc * r.n_items, r.n_items)
            assert r.ci_low == pytest.approx(float(want[0]), rel=1e-10)
    assert len(res.pairs) == 6
    for r in res.pairs.itertuples(index=False):
        h = pairs[(r.model_a, r.model_b)]
        assert r.n_items == h["n"]
        for mine, ref in ((r.diff, h["diff"]), (r.se, h["se"]), (r.z, h["z"]), (r.p, h["p"]), (r.ci_low, h["lo"]),
                          (r.ci_high, h["hi"]), (r.corr, h["corr"]), (r.variance_ratio, h["vr"])):
            assert mine == pytest.approx(ref, rel=1e-9, abs=1e-14)
        if clustered:
            assert r.se_cluster == pytest.approx(h["se_cluster"], rel=1e-10)
        assert (r.a_only, r.b_only) == (h["bonly"], h["conly"])
    if drop:
        assert res.skipped  # dropped items are counted
        assert sum(res.skipped.values()) == int(res.pairs["n_unpaired"].sum())
    else:
        assert not res.skipped


def test_singleton_clusters_equal_plain_se() -> None:
    log = make_log(clusters=80, per=1)
    a = compare(log, cluster="cluster")
    b = compare(log)
    np.testing.assert_allclose(a.models["se_cluster"], b.models["se"], rtol=1e-12)
    np.testing.assert_allclose(a.pairs["se_cluster"], b.pairs["se"], rtol=1e-12)


def test_uses_the_projects_cluster_se() -> None:
    from mrcstats.stats.accuracy import cluster_se

    log = make_log()
    items = per_item_scores(log)
    res = compare_scores(items, clustered=True)
    sub = items[items.model == "m1"]
    ref = cluster_se(sub["score"].to_numpy(), sub["cluster"].to_numpy())     # CR1, G/(G-1) inside
    assert res.models.set_index("model").loc["m1", "se_cluster"] == pytest.approx(ref, rel=1e-13)


def test_summary_and_compare_give_the_same_se_cluster() -> None:
    """Issue 25: summary used CR0 and compare CR0 x G/(G-1) under one name; now both report the one CR1
    se_cluster and the one interval for the same model."""
    from mrcstats.stats.accuracy import summarize

    log = make_log()
    s = summarize(log, cluster="cluster").to_frame().set_index("model")
    c = compare(log, cluster="cluster").models.set_index("model")
    for m in c.index:
        assert c.loc[m, "se_cluster"] == pytest.approx(s.loc[m, "se_cluster"], rel=1e-12)
        assert c.loc[m, "ci_method"] == s.loc[m, "ci_method"] == "clustered wilson"
        assert (c.loc[m, "ci_low"], c.loc[m, "ci_high"]) == (pytest.approx(s.loc[m, "ci_low"], rel=1e-12),
                                                           pytest.approx(s.loc[m, "ci_high"], rel=1e-12))


def test_per_item_scores_repeated_trials() -> None:
    log = make_log(trials=3, invalid=0.1)
    items = per_item_scores(log)
    assert list(items.columns) == ["model", "item", "cluster", "score", "n_trials"]
    assert (items["n_trials"] == 3).all()
    x = log.assign(s=log["correct"].map(lambda v: 1.0 if v is True else 0.0))
    ref = x.groupby(["model", "item"])["s"].mean()
    got = items.set_index(["model", "item"])["score"]
    np.testing.assert_allclose(got.sort_index().to_numpy(), ref.sort_index().to_numpy(), rtol=0, atol=0)
    assert sum(items.attrs["invalid"].values()) == int(log["correct"].isna().sum())
    res = compare(log)
    assert res.repeated is not None
    assert res.pairs["p_mcnemar"].isna().all()
    rep = res.repeated.set_index("model").loc["m0"]
    s = items[items.model == "m0"]["score"].to_numpy()
    sig2 = 3 / 2 * s * (1 - s)
    between = max(np.var(s, ddof=1) - np.mean(sig2 / 3), 0)
    assert rep["within_var"] == pytest.approx(sig2.mean(), rel=1e-12)
    assert rep["between_var"] == pytest.approx(between, rel=1e-12)
    assert rep["se_single"] == pytest.approx(math.sqrt((between + sig2.mean()) / len(s)), rel=1e-12)
    assert 0 < rep["se_reduction"] < 1


def test_trial_count_note() -> None:
    log = make_log(trials=2)
    log = log[~((log.trial == 1) & (log.item == "q0"))]
    res = compare(log)
    assert any("differs across items" in n for n in res.notes)


def test_bootstrap_is_the_cluster_resample() -> None:
    log = make_log(models=3)
    res = compare(log, cluster="cluster", bootstrap=300, seed=11)
    again = compare(log, cluster="cluster", bootstrap=300, seed=11)
    pd.testing.assert_frame_equal(res.pairs, again.pairs)
    # by hand: the same multinomial draws, each resample expanded to items
    items = per_item_scores(log)
    cl_codes, _ = pd.factorize(items[items.model == "m0"]["cluster"], sort=False)
    G = cl_codes.max() + 1
    rng = np.random.default_rng(11)
    W = rng.multinomial(G, np.full(G, 1 / G), size=250).astype(float)
    W = np.vstack([W, rng.multinomial(G, np.full(G, 1 / G), size=50).astype(float)])
    sa = items[items.model == "m0"]["score"].to_numpy()
    sb = items[items.model == "m1"]["score"].to_numpy()
    d = sa - sb
    vals = [(w[cl_codes] * d).sum() / w[cl_codes].sum() for w in W]
    lo, hi = np.quantile(vals, [0.025, 0.975])
    r = res.pairs.iloc[0]
    assert (r.model_a, r.model_b) == ("m0", "m1")
    assert r.boot_ci_low == pytest.approx(lo, rel=1e-12)
    assert r.boot_ci_high == pytest.approx(hi, rel=1e-12)
    # incomplete pairs resample their own clusters and still give an interval around the difference
    part = compare(make_log(models=3, drop=0.1), cluster="cluster", bootstrap=200, seed=2)
    assert (part.pairs["boot_ci_low"] < part.pairs["diff"]).all()
    assert (part.pairs["boot_ci_high"] > part.pairs["diff"]).all()


def test_json_shape_and_nulls() -> None:
    import json

    from mrcstats._jsonout import dumps

    res = compare(make_log(models=3), models=["m2", "m0"])
    d = json.loads(dumps(res.to_dict()))
    assert set(d) >= {"models", "pairs", "adjust", "cluster", "skipped"}
    assert list(d["models"][0]) == ["model", "n_items", "accuracy", "se", "se_cluster", "ci_low", "ci_high",
                                   "ci_method", "ci_df", "clusters", "n_shared", "accuracy_shared", "items_missing",
                                   "rank"]
    assert list(d["pairs"][0]) == ["model_a", "model_b", "n_items", "diff", "se", "se_cluster", "ci_low", "ci_high",
                                   "df", "z", "p", "p_adjusted", "p_mcnemar", "corr", "variance_ratio", "boot_ci_low",
                                   "boot_ci_high"]
    assert (d["pairs"][0]["model_a"], d["pairs"][0]["model_b"]) == ("m2", "m0")
    assert d["pairs"][0]["se_cluster"] is None and d["pairs"][0]["boot_ci_low"] is None
    assert d["cluster"] is None and d["adjust"] == "holm"
    assert d["models"][0]["rank"] == 1  # m2 is the stronger model


@pytest.mark.parametrize("kwargs, match", [
    ({"models": ["m0"]}, "at least two models"),
    ({"models": ["m0", "nope"]}, "unknown model 'nope'"),
    ({"cluster": "passage"}, "cannot cluster by 'passage': no such column"),
    ({"adjust": "sidak"}, "unknown p-value adjustment"),
    ({"alpha": 1.5}, "alpha must be between 0 and 1"),
    ({"bootstrap": -1}, "bootstrap must be"),
])
def test_bad_input(kwargs, match) -> None:
    with pytest.raises(InputError, match=match):
        compare(make_log(models=2), **kwargs)


def test_bad_input_structure() -> None:
    log = make_log(models=2)
    with pytest.raises(InputError, match="at least two models"):
        compare(log[log.model == "m0"])
    a = log[log.model == "m0"]
    b = log[log.model == "m1"].assign(item=lambda f: "other-" + f["item"])
    with pytest.raises(InputError, match="no items in common"):
        compare(pd.concat([a, b]))
    with pytest.raises(InputError, match="conditions"):
        compare(pd.concat([log, log.assign(condition="masked")]))
    with pytest.raises(InputError, match="two clusters"):
        compare(log.assign(cluster=np.where(log.model == "m0", log["cluster"], "x")), cluster="cluster")


# --------------------------------------------------------------------------- R, in the same run

_R = r"""
a <- commandArgs(TRUE)
p <- scan(a[1], quiet = TRUE)
for (m in c("holm", "BH", "bonferroni")) cat(m, sprintf("%.17g", p.adjust(p, m)), "\n")
dc <- read.csv(a[2])
for (i in seq_len(nrow(dc))) {
  b <- dc$b[i]; c <- dc$c[i]
  if (b + c == 0) { cat("binom 1\nmcnemar NA\n"); next }
  cat("binom", sprintf("%.17g", binom.test(b, b + c, 0.5)$p.value), "\n")
  x <- matrix(c(dc$both[i], c, b, dc$neither[i]), 2)
  cat("mcnemar", sprintf("%.17g", mcnemar.test(x, correct = TRUE)$p.value), "\n")
}
d <- read.csv(a[3])
ok <- suppressWarnings(requireNamespace("sandwich", quietly = TRUE))
if (ok) {
  f <- lm(d ~ 1, data = d)
  cat("vcovCL", sprintf("%.17g", sqrt(sandwich::vcovCL(f, cluster = ~cluster, type = "HC0", cadjust = TRUE)[1, 1])),
      "\n")
}
"""


def test_against_r(rscript, tmp_path) -> None:
    from mrcstats.stats.contingency import mcnemar

    log = make_log(models=6, clusters=40)
    res = compare(log, cluster="cluster")
    p = res.pairs["p"].to_numpy()
    p = np.concatenate([p, [p[0], 1e-300, 0.5, 0.5, 1.0]])  # ties, tiny and unit p-values
    (tmp_path / "p.txt").write_text("\n".join(repr(float(v)) for v in p))
    counts = [(int(r.a_only), int(r.b_only)) for r in res.pairs.itertuples()] + [(0, 0), (3, 0), (250, 190),
                                                                                  (5000, 5100)]
    pd.DataFrame({"b": [c[0] for c in counts], "c": [c[1] for c in counts], "both": 7, "neither": 5}).to_csv(
        tmp_path / "dc.csv", index=False)
    items = per_item_scores(log)
    d = (items[items.model == "m0"].set_index("item")["score"] - items[items.model == "m3"].set_index("item")["score"])
    cl = items[items.model == "m0"].set_index("item")["cluster"]
    pd.DataFrame({"d": d.to_numpy(), "cluster": cl.loc[d.index].to_numpy()}).to_csv(tmp_path / "d.csv", index=False)
    (tmp_path / "t.R").write_text(_R)
    out = subprocess.run([rscript, str(tmp_path / "t.R"), str(tmp_path / "p.txt"), str(tmp_path / "dc.csv"),
                          str(tmp_path / "d.csv")], capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = [ln.split() for ln in out.stdout.splitlines() if ln.strip()]
    for meth in ("holm", "BH", "bonferroni"):
        ref = np.array([float(v) for v in next(ln for ln in lines if ln[0] == meth)[1:]])
        got = p_adjust(p, meth)
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=0)
    binom = [float(ln[1]) for ln in lines if ln[0] == "binom"]
    mcn = [ln[1] for ln in lines if ln[0] == "mcnemar"]
    from mrcstats.stats.contingency import mcnemar_exact_p

    got = mcnemar_exact_p(np.array([c[0] for c in counts]), np.array([c[1] for c in counts]))
    np.testing.assert_allclose(got, binom, rtol=1e-12, atol=0)
    np.testing.assert_allclose(res.pairs["p_mcnemar"], binom[:len(res.pairs)], rtol=1e-12, atol=0)
    for (b, c), ref in zip(counts, mcn, strict=True):
        if b + c == 0:
            continue
        r = mcnemar(pd.Series([True] * 7 + [True] * b + [False] * c + [False] * 5),
                    b=pd.Series([True] * 7 + [False] * b + [True] * c + [False] * 5))
        assert r.p_asymptotic == pytest.approx(float(ref), rel=1e-12)
    vc = [float(ln[1]) for ln in lines if ln[0] == "vcovCL"]
    if not vc:   # said, not passed in silence (a skip fails with MRCSTATS_REQUIRE_R=1, tests/conftest.py)
        pytest.skip("R package sandwich missing: the clustered SE against sandwich::vcovCL is not checked")
    row = res.pairs.set_index(["model_a", "model_b"]).loc[("m0", "m3")]
    assert row["se_cluster"] == pytest.approx(vc[0], rel=1e-10)


# --------------------------------------------------------------------------- p_adjust properties

def _naive(p: np.ndarray, method: str) -> np.ndarray:
    m = len(p)
    out = np.empty(m)
    for i in range(m):
        if method == "bonferroni":
            out[i] = min(1.0, m * p[i])
        elif method == "holm":
            o = np.argsort(p, kind="stable")
            rank = int(np.flatnonzero(o == i)[0])
            out[i] = min(1.0, max((m - j) * p[o[j]] for j in range(rank + 1)))
        else:
            o = np.argsort(p, kind="stable")
            rank = int(np.flatnonzero(o == i)[0])
            out[i] = min(1.0, min(m / (j + 1) * p[o[j]] for j in range(rank, m)))
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 1, allow_nan=False), min_size=1, max_size=25),
       st.sampled_from(["holm", "BH", "bonferroni"]))
def test_p_adjust_definition(ps, method) -> None:
    p = np.array(ps)
    got = p_adjust(p, method)
    np.testing.assert_allclose(got, _naive(p, method), rtol=1e-12, atol=1e-300)
    assert np.all(got >= p - 1e-15) and np.all(got <= 1)
    order = np.argsort(p, kind="stable")
    assert np.all(np.diff(got[order]) >= -1e-15)  # monotone in p


def test_p_adjust_nan_kept() -> None:
    got = p_adjust([0.01, np.nan, 0.04], "bonferroni")
    assert got[0] == pytest.approx(0.02) and np.isnan(got[1]) and got[2] == pytest.approx(0.08)


@settings(max_examples=12, deadline=None)
@given(st.integers(0, 10_000), st.permutations(list(range(3))))
def test_compare_invariances(seed, perm) -> None:
    """Row order does not matter; swapping the two models negates diff and keeps p."""
    log = make_log(seed=seed, models=3, clusters=8, per=3, invalid=0.1)
    ref = compare(log, cluster="cluster")
    shuffled = log.sample(frac=1.0, random_state=seed).reset_index(drop=True)
    names = [f"m{i}" for i in perm]
    res = compare(shuffled, models=names, cluster="cluster")
    for r in res.pairs.itertuples(index=False):
        key = tuple(sorted((r.model_a, r.model_b)))
        base = ref.pairs.set_index(["model_a", "model_b"]).loc[key]
        sign = 1.0 if (r.model_a, r.model_b) == key else -1.0
        assert r.diff == pytest.approx(sign * base["diff"], abs=1e-14)
        for f in ("se", "se_cluster", "p", "corr", "variance_ratio", "p_mcnemar"):
            assert getattr(r, f) == pytest.approx(base[f], rel=1e-9, nan_ok=True)


# --------------------------------------------------------------------------- power

def test_power_miller_example_and_formulas() -> None:
    # Miller 2024 §5: omega^2 = 1/9, delta = 0.03 -> n = 969
    r = power(1 / 3, effect=0.03)
    assert int(r.table["n_required"].iloc[0]) == 969
    za, zb = norm.ppf(0.975), norm.ppf(0.8)
    mde = power(0.45, n_items=1200, design_effect=1.7).table["mde"].iloc[0]
    assert mde == pytest.approx((za + zb) * 0.45 * math.sqrt(1.7 / 1200), rel=1e-14)
    n = power(0.45, effect=-0.02, alpha=0.01, power=0.9, design_effect=2.0).table["n_required"].iloc[0]
    assert n == math.ceil((norm.ppf(0.995) + norm.ppf(0.9)) ** 2 * 0.45 ** 2 * 2.0 / 0.02 ** 2)
    # the MDE for n is the effect that needs n items
    m = power(0.3, n_items=500).table["mde"].iloc[0]
    assert int(power(0.3, effect=m * 1.000001).table["n_required"].iloc[0]) == 500


def test_power_from_compare_result() -> None:
    res = compare(make_log(), cluster="cluster")
    pw = power(res, effect=0.05)
    t = pw.table
    assert len(t) == len(res.pairs)
    r0, p0 = t.iloc[0], res.pairs.iloc[0]
    items = per_item_scores(make_log())
    d = (items[items.model == p0.model_a].set_index("item")["score"]
         - items[items.model == p0.model_b].set_index("item")["score"])
    assert r0["sd_diff"] == pytest.approx(np.std(d, ddof=1), rel=1e-12)
    assert r0["design_effect"] == pytest.approx((p0.se_cluster / p0.se) ** 2, rel=1e-12)
    mde = power(res).table["mde"].iloc[0]
    zsum = norm.ppf(0.975) + norm.ppf(0.8)
    assert mde == pytest.approx(zsum * p0.se_cluster, rel=1e-12)  # MDE = (z_a + z_b) * clustered SE
    assert pw.to_dict()["results"][0]["model_a"] == p0.model_a


def test_power_bad_input() -> None:
    with pytest.raises(InputError, match="n_items .* or effect"):
        power(0.4)
    with pytest.raises(InputError, match="sd_diff"):
        power("x", n_items=10)
    with pytest.raises(InputError, match="power must be below 1"):
        power(0.4, n_items=10, power=1.0)


# --------------------------------------------------------------------------- coverage (small, no timing)

def test_clustered_ci_covers_where_naive_undercovers() -> None:
    """On strongly clustered data with a true difference of 0 the naive CI undercovers; the clustered one does not."""
    rng = np.random.default_rng(2024)
    G, per, reps = 40, 10, 80
    cl = np.repeat(np.arange(G), per)
    cover_naive = cover_cl = 0
    for _ in range(reps):
        u = rng.normal(0, 1.2, G)[cl]
        rows = []
        for m in ("a", "b"):
            v = rng.normal(0, 1.5, G)[cl]  # model-specific cluster effect: the difference is clustered
            p = 1 / (1 + np.exp(-(u + v)))
            rows.append(pd.DataFrame({"model": m, "item": np.arange(G * per).astype(str),
                                      "cluster": cl.astype(str), "score": (rng.random(G * per) < p).astype(float),
                                      "n_trials": 1}))
        items = pd.concat(rows, ignore_index=True)
        r = compare_scores(items, clustered=True).pairs.iloc[0]
        cover_cl += r.ci_low <= 0 <= r.ci_high
        half = norm.ppf(0.975) * r.se
        cover_naive += r["diff"] - half <= 0 <= r["diff"] + half
    assert cover_naive / reps < 0.85
    assert 0.88 <= cover_cl / reps <= 1.0
