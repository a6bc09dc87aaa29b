"""Issue 36, few clusters: the clustered interval equals Inspect AI's ``ci_wilson(cluster=)`` (and the graded
one Inspect's ``ci(cluster=)``) on the sample sets of ``data/inspect_ci.json`` (computed with inspect-ai, the
version in the file, no network here), holds its level where the old z rule did not, and says when the
clusters are few (result notes, JSON, text)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import t as t_dist

from mrcstats.stats.accuracy import (
    FEW_CLUSTERS,
    accuracy_interval,
    cr1_se,
    mean_test,
    summarize,
    wilson_interval,
)
from mrcstats.stats.compare import compare

FIXTURE = json.loads((Path(__file__).parent / "data" / "inspect_ci.json").read_text())


def _log(case: dict, model: str = "m") -> pd.DataFrame:
    n = len(case["values"])
    return pd.DataFrame({"model": model, "item": [f"q{i}" for i in range(n)], "cluster": case["clusters"],
                         "score" if _graded(case) else "correct":
                             [float(v) for v in case["values"]] if _graded(case) else
                             pd.array([bool(v) for v in case["values"]], dtype="boolean")})


def _graded(case: dict) -> bool:
    return any(v not in (0, 1) for v in case["values"])


def test_fixture_names_its_inspect_version() -> None:
    assert FIXTURE["inspect_ai_version"] == "0.3.285" and len(FIXTURE["cases"]) >= 6


@pytest.mark.parametrize("level", [0.95, 0.9])
@pytest.mark.parametrize("case", FIXTURE["cases"], ids=[c["name"] for c in FIXTURE["cases"]])
def test_summary_equals_inspect(case: dict, level: float) -> None:
    res = summarize(_log(case), by=[], level=level)
    row = res.to_frame().iloc[0]
    assert row["se_cluster"] == pytest.approx(case["stderr"], rel=1e-12)     # Inspect's stderr(cluster=): CR1
    want = case[f"ci_t_{level}"] if _graded(case) else case[f"ci_wilson_{level}"]
    assert res.ci_method == ("clustered t" if _graded(case) else "clustered wilson")
    # rel 1e-8: Inspect's t quantile is a bisection of the incomplete beta (_t_inv_cdf), ~1e-9 off R's qt
    assert [row["ci_low"], row["ci_high"]] == pytest.approx(want, rel=1e-8, abs=1e-12)
    assert row["ci_df"] == len(set(case["clusters"])) - 1


@pytest.mark.parametrize("case", [c for c in FIXTURE["cases"] if not _graded(c)], ids=lambda c: c["name"])
def test_compare_model_interval_equals_inspect(case: dict) -> None:
    a, b = _log(case, "a"), _log(case, "b")
    b["correct"] = ~b["correct"]
    res = compare(pd.concat([a, b], ignore_index=True), cluster="cluster")
    row = res.models.set_index("model").loc["a"]
    assert [row["ci_low"], row["ci_high"]] == pytest.approx(case["ci_wilson_0.95"], rel=1e-8, abs=1e-12)


def test_the_old_z_rule_fails_the_fixture() -> None:
    """The old interval (Wilson at the uncapped effective n with z) is not Inspect's: the test above would fail."""
    case = FIXTURE["cases"][0]                                         # 3 clusters of 10
    x = np.array(case["values"], dtype=float)
    cl = np.array(case["clusters"])
    p, n = x.mean(), len(x)
    rss = sum((x[cl == c] - p).sum() ** 2 for c in np.unique(cl))
    se = float(cr1_se(rss, n, 3))
    n_eff = p * (1 - p) / se ** 2
    old = [float(v) for v in wilson_interval(p * n_eff, n_eff)]
    assert old != pytest.approx(case["ci_wilson_0.95"], rel=1e-3)
    # by hand: Wilson at min(n_eff, n) with qt(0.975, 2) = 4.302653
    c, ne = t_dist.ppf(0.975, 2), min(n_eff, n)
    centre = (p + c * c / (2 * ne)) / (1 + c * c / ne)
    half = c / (1 + c * c / ne) * np.sqrt(p * (1 - p) / ne + c * c / (4 * ne * ne))
    got = accuracy_interval(p, n, se, "clustered wilson", clusters=3)
    assert [float(got[0]), float(got[1])] == pytest.approx([centre - half, centre + half], rel=1e-12)


def test_coverage_with_three_and_five_clusters() -> None:
    """A fixed-seed simulation (independent answers, p = 0.7, n = 300): the old rule covers about 80% at
    G = 3; the new one at least 93% at G = 3 and G = 5 (benchmarks/sim_few_clusters.py has the full grid)."""
    rng = np.random.default_rng(2024)
    p, n, reps = 0.7, 300, 400
    for g in (3, 5):
        m = np.full(g, n // g)
        s = rng.binomial(m[None, :], p, size=(reps, g))
        ph = s.sum(axis=1) / n
        se = np.asarray(cr1_se(((s - m * ph[:, None]) ** 2).sum(axis=1), n, g))
        lo, hi = accuracy_interval(ph, n, se, "clustered wilson", clusters=g)
        assert np.mean((lo <= p) & (p <= hi)) >= 0.93
        n_eff = ph * (1 - ph) / se ** 2
        olo, ohi = wilson_interval(ph * n_eff, n_eff)
        if g == 3:
            assert np.mean((olo <= p) & (p <= ohi)) < 0.9


def _few_log(g: int = 3, n: int = 300, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    cl = np.arange(n) % g
    rows = []
    for m, p in (("a", 0.75), ("b", 0.65)):
        rows.append(pd.DataFrame({"model": m, "item": [f"q{i}" for i in range(n)], "cluster": [f"c{c}" for c in cl],
                                  "correct": pd.array(rng.random(n) < p, dtype="boolean")}))
    return pd.concat(rows, ignore_index=True)


def test_few_clusters_are_said_in_summary_and_compare() -> None:
    log = _few_log()
    s = summarize(log)
    assert s.ci_method == "clustered wilson" and any("few clusters" in n for n in s.notes)
    d = s.to_dict()
    assert d["ci_method"] == "clustered wilson" and "t critical value" in d["ci_rule"]
    assert any("few clusters" in n and "G = 3" in n for n in d["notes"])
    assert "few clusters" in s.summary() and "clusters - 1 df" in s.summary()
    c = compare(log, cluster="cluster")
    assert any("few clusters" in n for n in c.to_dict()["notes"]) and "few clusters" in c.summary()
    pair = c.pairs.iloc[0]
    assert pair["df"] == 2
    assert pair["p"] == pytest.approx(2 * t_dist.sf(abs(pair["z"]), 2), rel=1e-12)   # t(G - 1), not z
    _, _, lo, hi = mean_test(pair["diff"], pair["se_cluster"], 0.95, 2)
    assert (pair["ci_low"], pair["ci_high"]) == (pytest.approx(lo), pytest.approx(hi))
    # many clusters: no warning
    many = summarize(_few_log(g=FEW_CLUSTERS))
    assert not any("few clusters" in n for n in many.notes)
