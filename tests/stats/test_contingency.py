"""Fisher, chi-square and McNemar against R's fisher.test / chisq.test / binom.test / mcnemar.test."""
from __future__ import annotations

import json
import math
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mrcstats.errors import InputError
from mrcstats.stats._rxc_exact import rxc_exact_pvalue
from mrcstats.stats.contingency import (
    CHISQ_WARNING,
    as_count_table,
    chisq,
    fisher,
    mcnemar,
    r2dtable,
    read_count_table,
)

REPO = Path(__file__).resolve().parents[2]
R_SCRIPT = REPO / "R" / "fisher_chisq.R"


def _random_tables(seed: int = 20261122) -> list[np.ndarray]:
    """Tables nobody tuned: random shapes, sizes and sparsity, some with all-zero columns/rows."""
    rng = np.random.default_rng(seed)
    out = [np.array([[11, 0], [8, 9]]),                       # seed 004 Table 13
           np.array([[155, 39, 6], [37, 135, 28]]),            # seed 004 Table 16
           np.array([[0, 5], [5, 0]]), np.array([[3, 1], [1, 3]]), np.array([[1, 2], [0, 0]]),
           np.array([[0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [155, 39, 0, 6]])]  # seed 004 Table 14
    for _ in range(8):  # 2 x 2
        out.append(rng.integers(0, 25, size=(2, 2)))
    for _ in range(14):  # r x c, sparse to moderate
        r, c = int(rng.integers(2, 5)), int(rng.integers(2, 6))
        lam = float(rng.choice([0.7, 2.0, 5.0]))
        t = rng.poisson(lam, size=(r, c))
        if rng.random() < 0.3:
            t[:, int(rng.integers(0, c))] = 0  # an all-zero column
        if t.sum(axis=1).min() == 0 and rng.random() < 0.5:
            t[0, 0] += 1
        out.append(t)
    out.append(np.array([[3, 0, 5], [2, 0, 7], [4, 0, 1]]))        # all-zero column
    out.append(rng.poisson(5, size=(3, 4)))                         # 3 x 4, n ~ 60
    out.append(np.array([[20, 14, 9, 3, 2, 30, 5, 1, 8], [12, 16, 4, 6, 0, 41, 2, 3, 12]]))  # 2 x 9
    # 2 x 9 at the scale of seed 003 Table 3 (wh-word x easiest/hardest, n = 792)
    out.append(np.array([[62, 9, 58, 21, 3, 4, 1, 6, 252], [86, 5, 46, 11, 3, 9, 1, 14, 201]]))
    return [t for t in out if (t.sum(axis=1) > 0).sum() >= 1 and t.sum() > 0]


TABLES = _random_tables()


def _write(t: np.ndarray, path: Path) -> Path:
    df = pd.DataFrame(t, index=[f"r{i}" for i in range(t.shape[0])], columns=[f"c{j}" for j in range(t.shape[1])])
    df.to_csv(path)
    return path


def _run_r(rscript: str, files: list[Path], *extra: str) -> list[dict]:
    r = subprocess.run([rscript, str(R_SCRIPT), *extra, *map(str, files)], check=False, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _num(v):
    if v == "Inf":
        return math.inf
    if v == "-Inf":
        return -math.inf
    return v


@pytest.fixture(scope="module")
def table_files(tmp_path_factory) -> list[Path]:
    d = tmp_path_factory.mktemp("tables")
    return [_write(t, d / f"t{i}.csv") for i, t in enumerate(TABLES)]


@pytest.fixture(scope="module")
def r_two_sided(rscript, table_files) -> list[dict]:
    return _run_r(rscript, table_files)


def _close(a: float, b: float, rel: float) -> bool:
    a, b = _num(a), _num(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= rel * max(abs(a), abs(b)) + 1e-300


# --------------------------------------------------------------------------- Fisher vs R

def test_seed004_table13() -> None:
    res = fisher([[11, 0], [8, 9]])
    assert round(res.p, 4) == 0.0039
    assert res.odds_ratio == math.inf and res.conf_int[1] == math.inf


def test_fisher_exact_matches_r(r_two_sided) -> None:
    worst = 0.0
    for t, r in zip(TABLES, r_two_sided, strict=True):
        assert "error" not in r["fisher"], (t, r)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ours = fisher(t)
        rp = r["fisher"]["p"]
        assert _close(ours.p, rp, 1e-6), (t.tolist(), ours.p, rp)
        worst = max(worst, abs(ours.p - rp) / max(rp, 1e-300))
        if t.shape == (2, 2):
            assert _close(ours.odds_ratio, r["fisher"]["odds_ratio"], 1e-6), (t.tolist(), ours.odds_ratio)
            for a, b in zip(ours.conf_int, r["fisher"]["conf_int"], strict=True):
                assert _close(a, b, 1e-6), (t.tolist(), ours.conf_int, r["fisher"]["conf_int"])
        else:
            assert ours.odds_ratio is None and r["fisher"]["odds_ratio"] is None
    print(f"max relative |p - p_R| over {len(TABLES)} tables: {worst:.3g}")


@pytest.mark.parametrize("alternative", ["less", "greater"])
def test_fisher_one_sided_matches_r(rscript, tmp_path, alternative) -> None:
    tabs = [t for t in TABLES if t.shape == (2, 2)]
    files = [_write(t, tmp_path / f"a{i}.csv") for i, t in enumerate(tabs)]
    rres = _run_r(rscript, files, f"--alternative={alternative}")
    for t, r in zip(tabs, rres, strict=True):
        ours = fisher(t, alternative=alternative)
        assert _close(ours.p, r["fisher"]["p"], 1e-6), (t.tolist(), ours.p, r["fisher"]["p"])
        assert _close(ours.odds_ratio, r["fisher"]["odds_ratio"], 1e-6)
        for a, b in zip(ours.conf_int, r["fisher"]["conf_int"], strict=True):
            assert _close(a, b, 1e-6), (t.tolist(), alternative, ours.conf_int, r["fisher"]["conf_int"])


def test_monte_carlo_agrees_with_r_spread(rscript, tmp_path) -> None:
    t = np.array([[3, 5, 2, 6], [4, 8, 1, 5], [7, 2, 9, 8]])
    B, K = 2000, 20
    rres = _run_r(rscript, [_write(t, tmp_path / "mc.csv")], f"--sim={B},{K}")[0]
    r_ps = np.array(rres["fisher_sim"], dtype=float)
    ours = np.array([fisher(t, simulate=True, B=B, seed=s).p for s in range(K)])
    exact = fisher(t).p
    se = math.sqrt(exact * (1 - exact) / B)
    # means over seeds agree within 5 standard errors of the difference of two means
    assert abs(ours.mean() - r_ps.mean()) < 5 * se * math.sqrt(2 / K) + 1 / (B + 1)
    # and our spread is the Monte Carlo spread R shows
    assert 0.4 < ours.std(ddof=1) / r_ps.std(ddof=1) < 2.5
    assert abs(ours.mean() - exact) < 5 * se / math.sqrt(K) + 1 / (B + 1)


def test_monte_carlo_seeded_and_formula() -> None:
    t = [[2, 7, 1], [6, 1, 5]]
    a = fisher(t, simulate=True, B=500, seed=7)
    b = fisher(t, simulate=True, B=500, seed=7)
    assert a.p == b.p and a.method == "monte-carlo"
    k = round(a.p * 501) - 1
    assert 0 <= k <= 500 and math.isclose(a.p, (1 + k) / 501)


def test_2x2_simulate_is_exact_as_r() -> None:
    assert fisher([[3, 1], [1, 3]], simulate=True, seed=1).p == fisher([[3, 1], [1, 3]]).p


# --------------------------------------------------------------------------- chi-square vs R

def test_chisq_matches_r(r_two_sided) -> None:
    worst = 0.0
    for t, r in zip(TABLES, r_two_sided, strict=True):
        y = t[t.sum(axis=1) > 0][:, t.sum(axis=0) > 0]
        if min(y.shape) < 2:
            continue
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            ours = chisq(t)
        rc = r["chisq"]
        assert abs(ours.statistic - rc["statistic"]) <= 1e-9 * max(1.0, abs(rc["statistic"])), (t.tolist(),)
        worst = max(worst, abs(ours.statistic - rc["statistic"]))
        assert ours.df == rc["df"]
        assert _close(ours.p, rc["p"], 1e-9)
        np.testing.assert_allclose(ours.expected, np.array(rc["expected"]), rtol=1e-12)
        np.testing.assert_allclose(ours.residuals, np.array(rc["residuals"]), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(ours.stdres, np.array(rc["stdres"]), rtol=1e-9, atol=1e-12)
        assert (ours.warning == CHISQ_WARNING) == (rc["warning"] == CHISQ_WARNING)
        assert not [x for x in w if CHISQ_WARNING in str(x.message)]    # a note on the result, no Python warning
        assert (ours.note is not None) == (rc["warning"] is not None)
    print(f"max |X2 - X2_R|: {worst:.3g}")


def test_chisq_no_correct_matches_r(rscript, tmp_path) -> None:
    tabs = [t for t in TABLES if t.shape == (2, 2) and (t.sum(axis=0) > 0).all() and (t.sum(axis=1) > 0).all()]
    files = [_write(t, tmp_path / f"n{i}.csv") for i, t in enumerate(tabs)]
    for t, r in zip(tabs, _run_r(rscript, files, "--no-correct"), strict=True):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ours = chisq(t, correct=False)
        assert abs(ours.statistic - r["chisq"]["statistic"]) <= 1e-9 * max(1.0, r["chisq"]["statistic"])


def test_chisq_cramers_v_and_seed_table16() -> None:
    res = chisq([[155, 39, 6], [37, 135, 28]])
    assert res.p < 1e-5  # seed 004: "p-value is lesser than 0.00001"
    n = 400
    assert math.isclose(res.cramers_v, math.sqrt(res.statistic / n))
    assert res.to_dict().keys() == {"statistic", "df", "p", "expected", "cramers_v", "warning", "note"}
    assert res.warning is None and res.note is None and res.to_dict()["note"] is None


def test_chisq_drops_zero_rows_with_message() -> None:
    t = pd.DataFrame([[0, 0, 0], [10, 3, 0], [4, 12, 0]], index=["a", "b", "c"], columns=["x", "y", "z"])
    with pytest.warns(UserWarning, match="all-zero"):
        res = chisq(t)
    assert res.table.dropped_rows == ("a",) and res.table.dropped_cols == ("z",)
    assert math.isfinite(res.statistic) and res.df == 1


# --------------------------------------------------------------------------- McNemar vs R

def test_mcnemar_matches_r(rscript) -> None:
    rng = np.random.default_rng(3)
    a = rng.random(60) < 0.7
    b = rng.random(60) < 0.5
    b[:5] = a[:5]
    res = mcnemar(pd.Series(a), b=pd.Series(b), models=("A", "B"))
    code = (f"a <- c({','.join('TRUE' if v else 'FALSE' for v in a)}); "
            f"b <- c({','.join('TRUE' if v else 'FALSE' for v in b)}); "
            "x <- table(factor(a, c(TRUE, FALSE)), factor(b, c(TRUE, FALSE))); "
            "m <- mcnemar.test(x); bt <- binom.test(x[1, 2], x[1, 2] + x[2, 1], 0.5); "
            "cat(sprintf('%.17g %.17g %.17g %d %d', bt$p.value, m$statistic, m$p.value, x[1,2], x[2,1]))")
    out = subprocess.run([rscript, "-e", code], check=False, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    pe, stat, pa, ao, bo = out.stdout.split()
    assert (res.a_only, res.b_only) == (int(ao), int(bo))
    assert math.isclose(res.p_exact, float(pe), rel_tol=1e-9)
    assert math.isclose(res.statistic, float(stat), rel_tol=1e-12)
    assert math.isclose(res.p_asymptotic, float(pa), rel_tol=1e-9)


def test_mcnemar_on_log() -> None:
    rows = []
    for i in range(20):
        rows.append({"model": "A", "item": f"q{i}", "correct": i % 3 != 0})
        rows.append({"model": "B", "item": f"q{i}", "correct": pd.NA if i == 1 else i % 2 == 0})
    rows.append({"model": "A", "item": "extra", "correct": True})
    log = pd.DataFrame(rows)
    log["correct"] = log["correct"].astype("boolean")
    res = mcnemar(log, models=("A", "B"))
    assert res.n_items == 20 and res.n_unpaired == 1 and res.n_invalid == 1
    assert res.both + res.a_only + res.b_only + res.neither == 20
    assert res.better == ("A" if res.a_only > res.b_only else "B" if res.b_only > res.a_only else None)
    assert set(res.to_dict()) == {"n_items", "a_only", "b_only", "p_exact", "statistic", "p_asymptotic"}
    with pytest.raises(InputError, match="not in the log"):
        mcnemar(log, models=("A", "C"))


# --------------------------------------------------------------------------- validation

def test_bad_counts_raise_input_error(tmp_path) -> None:
    with pytest.raises(InputError, match="non-negative whole number"):
        fisher([[1, -2], [3, 4]])
    with pytest.raises(InputError, match="row '1', column '2'"):
        as_count_table([[1, 2.5], [3, 4]])
    p = tmp_path / "bad.csv"
    p.write_text(",a,b\nx,1,two\ny,3,4\n")
    with pytest.raises(InputError, match=r"row 'x', column 'b'"):
        read_count_table(p)
    with pytest.raises(InputError, match="needs a 2 x 2"):
        fisher([[1, 2, 3], [4, 5, 6]], alternative="less")


def test_network_too_large_suggests_simulation() -> None:
    with pytest.raises(InputError, match="simulate"):
        fisher(np.full((5, 6), 9), max_nodes=50)


def test_fexact_tie_rule_on_symmetric_table() -> None:
    # every table of this family is tied with its mirror image; ties must be counted
    t = np.array([[2, 1, 1], [1, 2, 1]])
    p = fisher(t).p
    assert 0 < p <= 1


# --------------------------------------------------------------------------- properties

_tables = st.integers(2, 4).flatmap(
    lambda r: st.integers(2, 4).flatmap(
        lambda c: st.lists(st.lists(st.integers(0, 6), min_size=c, max_size=c), min_size=r, max_size=r)))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_tables, st.randoms(use_true_random=False))
def test_exact_p_properties(t, rnd) -> None:
    x = np.array(t)
    if x.sum() == 0:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = fisher(x).p
        assert 0.0 <= p <= 1.0
        pt = fisher(x.T).p
        rp = list(range(x.shape[0]))
        cp = list(range(x.shape[1]))
        rnd.shuffle(rp)
        rnd.shuffle(cp)
        pp = fisher(x[rp][:, cp]).p
    assert math.isclose(p, pt, rel_tol=1e-9, abs_tol=1e-14)
    assert math.isclose(p, pp, rel_tol=1e-9, abs_tol=1e-14)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 30), min_size=2, max_size=5), st.lists(st.integers(0, 30), min_size=2, max_size=5),
       st.integers(0, 2**32 - 1))
def test_r2dtable_preserves_margins(rows, cols, seed) -> None:
    rows, cols = np.array(rows), np.array(cols)
    # make the totals equal by topping up the smaller margin
    d = int(rows.sum() - cols.sum())
    if d > 0:
        cols[0] += d
    else:
        rows[0] -= d
    sims = r2dtable(50, rows, cols, seed)
    assert (sims >= 0).all()
    assert (sims.sum(axis=2) == rows).all() and (sims.sum(axis=1) == cols).all()


def test_rxc_agrees_with_brute_force() -> None:
    """Enumerate every table with the margins and apply R's rule directly."""
    from itertools import product

    from scipy.special import gammaln

    x = np.array([[2, 0, 3], [1, 4, 1], [2, 2, 0]])
    rows, cols = x.sum(1), x.sum(0)
    lp = lambda t: float(gammaln(rows + 1).sum() + gammaln(cols + 1).sum() - gammaln(x.sum() + 1)
                         - gammaln(t + 1).sum())
    obs = lp(x)
    total = 0.0
    for a in product(*(range(min(rows[0], c) + 1) for c in cols)):
        if sum(a) != rows[0]:
            continue
        rest = cols - np.array(a)
        for b in product(*(range(min(rows[1], c) + 1) for c in rest)):
            if sum(b) != rows[1]:
                continue
            last = rest - np.array(b)
            if (last < 0).any() or last.sum() != rows[2]:
                continue
            t = np.array([a, b, last])
            if lp(t) <= obs + 3.45254e-7:
                total += math.exp(lp(t))
    assert math.isclose(rxc_exact_pvalue(x), total, rel_tol=1e-12)


def test_chunked_join_path_agrees(monkeypatch) -> None:
    import mrcstats.stats._rxc_exact as rx

    x = np.array([[3, 5, 2, 6], [4, 8, 1, 5], [7, 2, 9, 8]])
    full = rxc_exact_pvalue(x)
    monkeypatch.setattr(rx, "_CHUNK", 5000)
    assert math.isclose(rxc_exact_pvalue(x, max_entries=2000), full, rel_tol=1e-12)
    assert math.isclose(full, 0.0660297352734594, rel_tol=1e-9)  # R fisher.test


@pytest.mark.parametrize("table", [[[2]], [[1, 2, 3]], [[1], [2]]])
def test_tables_with_fewer_than_two_rows_or_columns_are_refused(table):
    """As R: fisher.test(matrix(2)) stops with "'x' must have at least 2 rows and columns"."""
    with pytest.raises(InputError, match="at least 2 rows and 2 columns"):
        fisher(table)


def test_mcnemar_binomial_cdf_is_scipy_stats_to_the_bit():
    """``mcnemar_exact_p`` takes the binomial CDF from the public ``scipy.special.betainc``
    (``P(X <= k) = I_{1/2}(n - k, k + 1)``): equal to ``scipy.stats.binom.cdf`` to the bit wherever the
    p-value is below 1 (``k < (n - 1)/2``), and exactly 1 where ``|a - b| <= 1``."""
    from scipy.stats import binom

    from mrcstats.stats.contingency import mcnemar_exact_p

    n = np.concatenate([np.full(k // 2 + 1, k) for k in range(1, 1501)]).astype(float)
    k = np.concatenate([np.arange(k // 2 + 1) for k in range(1, 1501)]).astype(float)
    low = 2 * k < n - 1
    got = mcnemar_exact_p(k[low], n[low] - k[low])
    want = np.minimum(1.0, 2.0 * binom.cdf(k[low], n[low], 0.5))
    assert np.array_equal(got, want)
    assert np.all(mcnemar_exact_p(k[~low], n[~low] - k[~low]) == 1.0)
    assert mcnemar_exact_p(0, 0) == 1.0 and mcnemar_exact_p(3, 2) == 1.0 == mcnemar_exact_p(2, 3)
