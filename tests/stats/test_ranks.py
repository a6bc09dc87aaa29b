"""ranks / rank_sets: a plain brute-force implementation of the published procedure (Mogstad, Romano, Shaikh &
Wilhelm 2024, Algorithm 3.1, as csranks), properties with hypothesis, the covariance against numpy and R's
sandwich::vcovCL, and the input guards."""
from __future__ import annotations

import json
import subprocess

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcstats.errors import InputError
from mrcstats.stats.compare import compare
from mrcstats.stats.ranks import METHODS, RANK_FIELDS, rank_sets, ranks

# --------------------------------------------------------------------------- brute force, from the definitions


def _quantile7(values: list[float], prob: float) -> float:
    """R's quantile(type = 7): linear interpolation between order statistics at h = (n - 1) p."""
    v = sorted(values)
    h = (len(v) - 1) * prob
    lo = int(h // 1)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (h - lo) * (v[hi] - v[lo])


def _brute_rejections(x, sigma, Z, pairs0, level):
    """The stepdown: critical value = quantile of max over active pairs of (Z_j - Z_k) / sd_jk; reject
    (j, k) when x_j - x_k - sd_jk * c > 0; repeat on the pairs left until nothing new is rejected."""
    p = len(x)
    sd = [[(sigma[j][j] + sigma[k][k] - 2 * sigma[j][k]) ** 0.5 for k in range(p)] for j in range(p)]
    active = set(pairs0)
    rejected = set()
    while active:
        maxima = []
        for z in Z:
            maxima.append(max((z[j] - z[k]) / sd[j][k] for (j, k) in active))
        c = _quantile7(maxima, level)
        new = {(j, k) for (j, k) in active if x[j] - x[k] - sd[j][k] * c > 0}
        if not new:
            break
        rejected |= new
        active -= new
    return rejected


def brute_rank_sets(x, sigma, Z, level):
    p = len(x)
    everything = [(j, k) for j in range(p) for k in range(p) if j != k]
    rej = _brute_rejections(x, sigma, Z, everything, level)
    simul = [(1 + sum((k, j) in rej for k in range(p)), p - sum((j, k) in rej for k in range(p)))
             for j in range(p)]
    marg = []
    for j in range(p):
        own = [(j, k) for k in range(p) if k != j] + [(k, j) for k in range(p) if k != j]
        rj = _brute_rejections(x, sigma, Z, own, level)
        marg.append((1 + sum((k, j) in rj for k in range(p)), p - sum((j, k) in rj for k in range(p))))
    rank = [1 + sum(x[k] > x[j] for k in range(p)) for j in range(p)]
    return rank, marg, simul, rej


def _board(seed: int, p: int, spread: float, rho: float):
    rng = np.random.default_rng(seed)
    x = np.sort(rng.normal(0.6, spread, p))[::-1] + rng.normal(0, 1e-6, p)
    sd = rng.uniform(0.01, 0.03, p)
    corr = np.full((p, p), rho) + (1 - rho) * np.eye(p)
    sigma = corr * np.outer(sd, sd)
    Z = rng.multivariate_normal(np.zeros(p), sigma, size=300)
    return x, sigma, Z


BOARDS = [(1, 3, 0.03, 0.5, 0.95), (2, 5, 0.03, 0.7, 0.95), (3, 6, 0.05, 0.0, 0.9), (4, 4, 0.01, 0.8, 0.95),
          (5, 7, 0.04, 0.6, 0.8), (6, 8, 0.025, 0.7, 0.95)]


@pytest.mark.parametrize("seed,p,spread,rho,level", BOARDS)
def test_equals_brute_force(seed, p, spread, rho, level) -> None:
    x, sigma, Z = _board(seed, p, spread, rho)
    got = rank_sets(x, sigma, level=level, sims=Z)
    rank, marg, simul, rej = brute_rank_sets(list(x), sigma.tolist(), Z.tolist(), level)
    assert got.rank.tolist() == rank
    assert [tuple(r) for r in got.marginal.tolist()] == marg
    assert [tuple(r) for r in got.simultaneous.tolist()] == simul
    assert {(int(a), int(b)) for a, b in zip(*np.nonzero(got.better))} == rej
    # top-k sets and tiers from the same rejections
    for k in range(1, p + 1):
        assert set(got.top_k(k)) == {j for j in range(p) if simul[j][0] <= k}
    assert set(np.flatnonzero(got.tier == 1)) == {j for j in range(p) if simul[j][0] == 1}


def test_some_boards_are_informative() -> None:
    """The brute-force boards are not all trivial: some sets are neither singletons nor the whole board."""
    widths, steps = [], []
    for seed, p, spread, rho, _level in BOARDS:
        x, sigma, Z = _board(seed, p, spread, rho)
        s = rank_sets(x, sigma, sims=Z)
        widths += list(s.simultaneous[:, 1] - s.simultaneous[:, 0])
        steps.append(len(s.quantiles))
    assert any(0 < w < 3 for w in widths)
    assert max(steps) >= 3         # the stepdown goes beyond its first step


# --------------------------------------------------------------------------- properties


@st.composite
def boards(draw):
    p = draw(st.integers(2, 6))
    x = np.array(draw(st.lists(st.floats(0, 1, allow_nan=False), min_size=p, max_size=p)))
    a = np.array(draw(st.lists(st.floats(-1, 1, allow_nan=False), min_size=p * p, max_size=p * p))).reshape(p, p)
    sigma = (a @ a.T + 0.05 * np.eye(p)) * draw(st.sampled_from([1e-4, 1e-3, 1e-2]))
    level = draw(st.sampled_from([0.8, 0.9, 0.95]))
    seed = draw(st.integers(0, 2**31))
    return x, sigma, level, seed


@settings(max_examples=60, deadline=None)
@given(boards())
def test_sets_contain_point_rank_and_simultaneous_contains_marginal(b) -> None:
    x, sigma, level, seed = b
    s = rank_sets(x, sigma, level=level, draws=200, seed=seed)
    p = len(x)
    for sets in (s.marginal, s.simultaneous):
        assert (1 <= sets[:, 0]).all() and (sets[:, 1] <= p).all()
        assert (sets[:, 0] <= s.rank).all() and (s.rank <= sets[:, 1]).all()
    assert (s.simultaneous[:, 0] <= s.marginal[:, 0]).all()
    assert (s.marginal[:, 1] <= s.simultaneous[:, 1]).all()
    assert set(s.top_k(1)) == set(np.flatnonzero(s.tier == 1))


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 8), st.integers(0, 2**31), st.floats(0.0, 0.9))
def test_well_separated_models_get_singletons(p, seed, rho) -> None:
    rng = np.random.default_rng(seed)
    sd = rng.uniform(0.005, 0.02, p)
    sigma = (np.full((p, p), rho) + (1 - rho) * np.eye(p)) * np.outer(sd, sd)
    x = rng.permutation(np.arange(p)) * 1.0          # 1 apart: > 30 SEs of any difference
    s = rank_sets(x, sigma, draws=200, seed=seed)
    truth = p - x.astype(int)
    assert (s.marginal[:, 0] == truth).all() and (s.marginal[:, 1] == truth).all()
    assert (s.simultaneous[:, 0] == truth).all() and (s.simultaneous[:, 1] == truth).all()
    assert s.tier.tolist() == truth.tolist()


# --------------------------------------------------------------------------- from a log


def make_log(seed: int = 3, skills=(0.0, 0.1, 0.5, 0.55, 1.4), clusters: int = 60, per: int = 5,
             spread: float = 1.0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = clusters * per
    cl = np.repeat(np.arange(clusters), per)
    hard = rng.normal(0, spread, clusters)[cl] + rng.normal(0, spread, n)
    return pd.concat([pd.DataFrame({"model": f"m{k}", "item": [f"q{i}" for i in range(n)],
                                    "cluster": [f"c{c}" for c in cl],
                                    "correct": rng.random(n) < 1 / (1 + np.exp(hard - s))})
                      for k, s in enumerate(skills)], ignore_index=True)


@pytest.mark.parametrize("cluster", [None, "cluster"])
def test_covariance_reproduces_compare(cluster) -> None:
    log = make_log()
    res = ranks(log, cluster=cluster, seed=1)
    cmp = compare(log, cluster=cluster)
    S = res.covariance
    se = "se_cluster" if cluster else "se"
    for r in cmp.pairs.itertuples():
        v = S.loc[r.model_a, r.model_a] + S.loc[r.model_b, r.model_b] - 2 * S.loc[r.model_a, r.model_b]
        assert np.sqrt(v) == pytest.approx(getattr(r, se), rel=1e-10)
    if cluster is None:    # cov(s) / n: the sample covariance of the per-item scores (csranks' example)
        wide = log.assign(correct=log.correct.astype(float)).pivot(index="item", columns="model", values="correct")
        ref = wide.cov() / len(wide)
        np.testing.assert_allclose(S.to_numpy(), ref.loc[S.index, S.columns].to_numpy(), rtol=1e-10)
    assert res.models["estimate"].is_monotonic_decreasing
    again = rank_sets(res.models["estimate"], S.to_numpy(), seed=1)
    assert again.marginal[:, 0].tolist() == res.models["marginal_lo"].tolist()
    assert again.simultaneous[:, 1].tolist() == res.models["simultaneous_hi"].tolist()


_R = r"""
suppressMessages(library(sandwich))
a <- commandArgs(TRUE)
d <- read.csv(a[1])
Y <- as.matrix(d[, grep("^m", names(d))])
v <- vcovCL(lm(Y ~ 1), cluster = d$cluster, type = "HC0", cadjust = TRUE)
cat(sprintf("%.17g", as.numeric(v)), sep = "\n")
"""


def test_clustered_covariance_against_r(rscript, tmp_path) -> None:
    """Σ̂ with clusters is R's sandwich::vcovCL of the multivariate mean (CR1: G/(G-1), no n/(n-k))."""
    log = make_log(seed=5)
    res = ranks(log, cluster="cluster", seed=1)
    wide = log.assign(correct=log.correct.astype(float)).pivot(index="item", columns="model", values="correct")
    names = list(res.covariance.index)
    wide = wide[names].assign(cluster=log.drop_duplicates("item").set_index("item").loc[wide.index, "cluster"])
    wide.to_csv(tmp_path / "w.csv", index=False)
    (tmp_path / "v.R").write_text(_R)
    out = subprocess.run([rscript, str(tmp_path / "v.R"), str(tmp_path / "w.csv")], capture_output=True, text=True,
                         timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    ref = np.array([float(v) for v in out.stdout.split()]).reshape(len(names), len(names), order="F")
    np.testing.assert_allclose(res.covariance.to_numpy(), ref, rtol=1e-10)


def test_result_contract_and_seed() -> None:
    log = make_log()
    res = ranks(log, seed=7, level=0.9)
    d = res.to_dict()
    json.dumps(d)
    assert set(RANK_FIELDS) <= set(d["models"][0])
    assert d["method"] == "paired" and d["level"] == 0.9
    for m in d["models"]:
        assert m["marginal"][0] <= m["rank"] <= m["marginal"][1]
        assert m["simultaneous"][0] <= m["marginal"][0] and m["marginal"][1] <= m["simultaneous"][1]
    assert d["alternative"]["method"] == "independent"
    assert d == ranks(log, seed=7, level=0.9).to_dict()
    assert list(res.top_set) == list(res.top_k(1)) == list(res.tiers()[0])
    assert "top set" in res.summary() and "paired" in res.summary()
    ind = ranks(log, seed=7, level=0.9, method="independent")
    assert ind.method == "independent" and ind.to_dict()["alternative"]["method"] == "paired"
    # the two results hold the same sets, each as main and as alternative
    assert ind.models["marginal_lo"].tolist() == res.models["independent_marginal_lo"].tolist()
    assert res.models["marginal_hi"].tolist() == ind.models["paired_marginal_hi"].tolist()
    assert len(res.to_frame()) == 5
    assert "Rank confidence sets" in repr(res)


def test_paired_sets_are_narrower_on_shared_items() -> None:
    """Strongly correlated per-item scores (shared item difficulty): pairing narrows the sets."""
    log = make_log(seed=11, skills=(0.0, 0.2, 0.4, 0.6, 0.8, 1.0), clusters=600, per=1, spread=2.5)
    res = ranks(log, seed=3)
    m = res.models
    paired = (m["simultaneous_hi"] - m["simultaneous_lo"]).sum()
    indep = (m["independent_simultaneous_hi"] - m["independent_simultaneous_lo"]).sum()
    assert paired < indep


@pytest.mark.parametrize("kw,msg", [({"level": 1.5}, "level must be"), ({"level": True}, "level must be"),
                                    ({"method": "unpaired"}, "method must be one of"),
                                    ({"draws": 10}, "draws"), ({"draws": 1000.0}, "draws"),
                                    ({"seed": -1}, "seed must be"), ({"seed": "x"}, "seed must be"),
                                    ({"cluster": "nope"}, "nope"), ({"models": ["m0"]}, "at least two"),
                                    ({"models": ["m0", "zz"]}, "unknown model")])
def test_bad_arguments(kw, msg) -> None:
    with pytest.raises(InputError, match=msg):
        ranks(make_log(), **kw)


def test_one_item_model_is_refused() -> None:
    log = make_log()
    log = log[(log.model != "m1") | (log.item == "q0")]
    with pytest.raises(InputError, match="'m1' has 1 item"):
        ranks(log, items="all")
    with pytest.raises(InputError, match="share 1 item"):
        ranks(log)


def test_ranks_on_shared_items_when_item_sets_differ() -> None:
    """Issue 36 (DeepSeek-Coder-V2 on MMLU-Pro): a model that skipped the hardest items ranks above a better one on
    its own items; by default the ranking uses the items every model answered and says what it left out."""
    log = make_log(seed=5, skills=(0.0, 0.9, 1.0), clusters=400, per=1, spread=2.0)
    hard = log[log.model == "m0"].sort_values("correct").item.head(150)   # m0 misses these: the hard ones
    skip = log[(log.model == "m1") & log.item.isin(hard)].index
    log = log.drop(skip)
    full = ranks(log, seed=1, items="all")
    res = ranks(log, seed=1)
    m = res.models.set_index("model")
    assert full.models.set_index("model").loc["m1", "estimate"] > full.models.set_index("model").loc["m2", "estimate"]
    assert res.n_items == 250 and m.loc["m2", "rank"] < m.loc["m1", "rank"]
    assert m.loc["m1", "estimate_all"] == pytest.approx(full.models.set_index("model").loc["m1", "estimate"])
    shared = log[log.item.isin(set(log.item) - set(hard))]
    assert m.loc["m2", "estimate"] == pytest.approx(shared[shared.model == "m2"].correct.mean())
    assert any("ranked on the 250 items" in n and "150 rows each of m0, m2" in n for n in res.notes)
    d = res.to_dict()
    assert {"estimate_all", "estimate"} <= set(d["models"][0])
    with pytest.raises(InputError, match="items must be"):
        ranks(log, items="some")


def test_rank_sets_guards() -> None:
    with pytest.raises(InputError, match="at least two"):
        rank_sets([1.0], np.eye(1))
    with pytest.raises(InputError, match="symmetric"):
        rank_sets([1.0, 2.0], np.array([[1.0, 0.5], [0.0, 1.0]]))
    with pytest.raises(InputError, match="negative variance"):
        rank_sets([1.0, 2.0], np.array([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(InputError, match="finite"):
        rank_sets([1.0, 2.0], np.eye(3))
    with pytest.raises(InputError, match="sims"):
        rank_sets([1.0, 2.0], np.eye(2), sims=np.zeros((5, 3)))
    with pytest.raises(InputError, match="top-k"):
        rank_sets([1.0, 2.0], np.eye(2), seed=1).top_k(3)
    assert METHODS == ("paired", "independent")


def test_zero_variance_difference_is_exact() -> None:
    """Two models with identical per-item scores differ by exactly 0: never separated, no NaN."""
    log = make_log()
    twin = log[log.model == "m2"].assign(model="m2-copy")
    res = ranks(pd.concat([log, twin], ignore_index=True), seed=1)
    m = res.models.set_index("model")
    assert m.loc["m2", "simultaneous_lo"] == m.loc["m2-copy", "simultaneous_lo"]
    assert any("identical per-item scores" in n for n in res.notes)
