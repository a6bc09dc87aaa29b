"""Acc(MR) curves and the NA / EA / KI indicators (mrcstats.stats.masking)."""
from __future__ import annotations

import ast
import json
import math
import subprocess
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcstats.errors import InputError
from mrcstats.stats.masking import (
    effective_accuracy,
    knowledge_independence,
    masking_accuracy,
    masking_indicators,
    mr_key,
    mr_weighted_mean,
    normalized_accuracy,
)

CONDS = ("regular", "partial", "strict", "lenient")
SUFFIX = {"regular": "", "partial": "_filtered", "strict": "_no_meaning", "lenient": "_no_verb"}


def synthetic_log(seed: int = 0, n_items: int = 30, trials: int = 4, rates=range(0, 101, 20),
                  p_invalid: float = 0.1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for c in CONDS[:2]:
        for t in range(trials):
            for r in rates:
                p = 0.9 - 0.004 * r
                for i in range(n_items):
                    u = rng.random()
                    corr = None if u < p_invalid else bool(rng.random() < p)
                    rows.append({"model": "m", "item": f"q{i}", "trial": t, "condition": c,
                                 "masking_rate": float(r), "correct": corr})
    df = pd.DataFrame(rows)
    df["correct"] = df["correct"].astype("boolean")
    df["masking_rate"] = df["masking_rate"].astype("Float64")
    return df


def test_acc_is_exact_proportion_with_invalid_not_correct():
    log = synthetic_log()
    res = masking_accuracy(log)
    for r in res.table.itertuples(index=False):
        g = log[(log.condition == r.condition) & (log.masking_rate == r.masking_rate)]
        per_trial = g.groupby("trial")["correct"].apply(lambda s: (s.fillna(False)).sum() / len(s))
        assert r.acc == pytest.approx(per_trial.mean(), abs=1e-15)
        assert r.sd == pytest.approx(per_trial.std(ddof=1), abs=1e-15)
        assert r.invalid == pytest.approx(g["correct"].isna().mean(), abs=1e-15)
        valid = g["correct"].dropna()
        assert r.acc_valid == pytest.approx(valid.mean(), abs=1e-15)
        assert r.n_trials == 4
    d = res.to_dict()
    assert set(d) == {"acc", "sd", "acc_valid", "invalid"}
    assert set(d["acc"]["m"]["regular"]) == {"0", "20", "40", "60", "80", "100"}


def test_sd_matches_r(rscript):
    log = synthetic_log(seed=3)
    res = masking_accuracy(log)
    row = res.table.iloc[2]
    g = log[(log.condition == row.condition) & (log.masking_rate == row.masking_rate)]
    x = g.groupby("trial")["correct"].apply(lambda s: s.fillna(False).sum() / len(s)).tolist()
    code = f"x <- c({','.join(repr(float(v)) for v in x)}); cat(sprintf('%.15f %.15f', mean(x), sd(x)))"
    out = subprocess.run([rscript, "-e", code], capture_output=True, text=True, check=True).stdout.split()
    assert row.acc == pytest.approx(float(out[0]), abs=1e-12)
    assert row.sd == pytest.approx(float(out[1]), abs=1e-12)


def test_curve_interval_is_the_accuracy_tables_interval():
    """Issue 25: the masking figure drew a t interval over trials while the accuracy table beside it clustered
    by item; both now take the one interval of summarize (clustered by item: each item is answered per trial)."""
    from mrcstats.stats.accuracy import summarize

    log = synthetic_log(seed=3)
    res = masking_accuracy(log, cluster="item")
    tab = summarize(log, by=["model", "condition", "masking_rate"], cluster="item", trials="mean").to_frame()
    assert res.ci_method == "clustered wilson" and "clustered Wilson" in res.ci_words()
    np.testing.assert_allclose(res.table["ci_low"], tab["ci_low"], rtol=1e-12)
    np.testing.assert_allclose(res.table["ci_high"], tab["ci_high"], rtol=1e-12)
    np.testing.assert_allclose(res.table["se_cluster"], tab["se_cluster"], rtol=1e-12)
    assert ((res.table["ci_low"] >= 0) & (res.table["ci_high"] <= 1)).all()


def test_single_trial_has_null_sd_and_an_interval():
    log = synthetic_log(trials=1)
    t = masking_accuracy(log).table
    assert t["sd"].isna().all() and t["ci_low"].notna().all()


def test_indicators_self_baseline():
    log = synthetic_log(seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = masking_indicators(log, baseline=log)
    t = res.table
    np.testing.assert_allclose(t["ea"], t["acc"], rtol=1e-12)
    ok = t["na"] < 1
    np.testing.assert_allclose(t.loc[ok, "ki"], 0.0, atol=1e-12)
    assert t.loc[~ok, "ki"].isna().all()
    assert (t.loc[t.masking_rate == 0, "ki"]).isna().all()
    assert any("KI undefined" in n for n in res.notes)
    d = res.to_dict()
    assert set(d) == {"acc", "sd", "acc_valid", "invalid", "weighted"}
    w = d["weighted"]["m"]["regular"]
    assert set(w) == {"acc", "na", "ea", "ki"}
    assert w["ea"] == pytest.approx(w["acc"])
    json.dumps(res.to_dict(), allow_nan=True)


def test_indicators_without_baseline_and_acc0():
    log = synthetic_log(seed=2)
    res = masking_indicators(log, acc0=0.8)
    t = res.table
    np.testing.assert_allclose(t["na"], t["acc"] / 0.8)
    assert t["ea"].isna().all() and t["ki"].isna().all()
    g = t[t.condition == "regular"]
    exp = (g.masking_rate * g.acc).sum() / g.masking_rate.sum()
    avg = res.averages.set_index(["condition", "kind"])
    assert avg.loc[("regular", "weighted"), "acc"] == pytest.approx(exp)
    assert avg.loc[("regular", "plain"), "acc"] == pytest.approx(g.acc.mean())
    assert avg.loc[("regular", "weighted"), "na"] == pytest.approx(exp / 0.8)


def test_indicators_known_values():
    na = normalized_accuracy([0.9, 0.6, 0.3], 0.9)
    np.testing.assert_allclose(na, [1.0, 2 / 3, 1 / 3])
    nu = np.array([1.0, 0.8, 0.5])
    np.testing.assert_allclose(effective_accuracy(na, nu, 0.9), 0.9 * np.sqrt(na * nu))
    ki = knowledge_independence(na, nu)
    assert math.isnan(ki[0])
    assert ki[1] == pytest.approx((0.8 - 2 / 3) / (1 / 3))
    assert ki[2] == pytest.approx((0.5 - 1 / 3) / (2 / 3))
    assert knowledge_independence(0.9, 0.5) < 0  # NA > NA^U: negative
    assert mr_weighted_mean([0, 50, 100], [1.0, 0.5, np.nan]) == pytest.approx(0.5)
    assert math.isnan(mr_weighted_mean([0], [1.0]))
    assert mr_key(5.0) == "5" and mr_key(12.5) == "12.5"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 20), st.floats(0, 1)), min_size=1, max_size=21,
                unique_by=lambda t: t[0]))
def test_weighted_mean_properties(pairs):
    mr = np.array([5.0 * p[0] for p in pairs])
    x = np.array([p[1] for p in pairs])
    w = mr_weighted_mean(mr, x)
    pos = mr > 0
    if not pos.any():
        assert math.isnan(w)
    else:
        assert x[pos].min() - 1e-12 <= w <= x[pos].max() + 1e-12
        # MR = 0 has weight 0: changing its value changes nothing
        x2 = np.where(mr == 0, 1 - x, x)
        assert mr_weighted_mean(mr, x2) == pytest.approx(w)


@settings(max_examples=200, deadline=None)
@given(st.floats(0, 0.999), st.floats(0, 1.5))
def test_ki_properties(na, nu):
    ki = float(knowledge_independence(na, nu))
    assert ki == pytest.approx((nu - na) / (1 - na))
    assert (ki > 0) == (nu > na) or abs(nu - na) < 1e-12
    assert float(knowledge_independence(na, na)) == pytest.approx(0.0, abs=1e-12)
    assert math.isnan(float(knowledge_independence(1.0 + na, nu)))


def test_bad_input_is_an_input_error():
    with pytest.raises(InputError, match="masking_rate"):
        masking_accuracy(pd.DataFrame({"model": ["m"], "correct": [True]}))
    log = synthetic_log()
    with pytest.raises(InputError, match="acc0"):
        masking_indicators(log, acc0=89.84)
    with pytest.raises(InputError, match="MR = 0"):
        masking_indicators(log[log.masking_rate > 0])
    bad = log.copy()
    bad["masking_rate"] = bad["masking_rate"] * 10
    with pytest.raises(InputError, match="outside 0-100"):
        masking_accuracy(bad)


def test_rows_without_rate_are_counted_not_dropped_silently():
    log = synthetic_log()
    log.loc[log.index[:5], "masking_rate"] = pd.NA
    res = masking_accuracy(log)
    assert res.notes and "5 rows" in res.notes[0]


# ----------------------------------------------------------------------------- maskcode-format runs
def write_maskcode_run(folder, seed: int = 7, n_items: int = 40, trials: int = 3, rates=range(0, 101, 5),
                       model: str = "test-model-1"):
    """A maskcode-format run: five options, gold (0-based) in a ``correct`` column, answers 1-based,
    with invalid answers (-1, 0, 6, text). Returns the exact expected accuracies."""
    rng = np.random.default_rng(seed)
    expected = {}
    for c in CONDS:
        for t in range(1, trials + 1):
            gold = rng.integers(0, 5, n_items)
            df = pd.DataFrame({"question_id": [f"aq{i}" for i in range(n_items)],
                               "question": [f"Question {i}?" for i in range(n_items)],
                               "options": [str(["A)1", "B)2", "C)3", "D)4", "E)5"])] * n_items,
                               "correct": gold})
            for r in rates:
                p = 0.95 - 0.005 * r
                ans = np.where(rng.random(n_items) < p, gold + 1, rng.integers(1, 6, n_items)).astype(object)
                bad = rng.random(n_items) < 0.08
                ans[bad] = rng.choice(["-1", "0", "6", "n/a"], bad.sum())
                df[f"answer_{model}_{r}"] = ans
                df[f"query_{r}"] = "prompt"
                ok = np.array([str(a) == str(g + 1) for a, g in zip(ans, gold, strict=True)])
                expected.setdefault((c, float(r)), []).append(ok.sum() / n_items)
            df.to_csv(folder / f"AQA_masker_{t}{SUFFIX[c]}.csv", index=False)
    return {k: float(np.mean(v)) for k, v in expected.items()}


def test_acc_from_maskcode_run_equals_exact_proportions(tmp_path):
    pytest.importorskip("mrcstats.io.mskqa")
    from mrcstats.io import read_log

    expected = write_maskcode_run(tmp_path)
    log = read_log(tmp_path, format="mskqa")
    res = masking_accuracy(log)
    got = {(r.condition, r.masking_rate): r.acc for r in res.table.itertuples(index=False)}
    assert set(got) == set(expected)
    for k, v in expected.items():
        assert got[k] == pytest.approx(v, abs=1e-12), k
    assert set(res.table["model"]) == {"test-model-1"}
    assert (res.table["n_trials"] == 3).all()


@pytest.mark.shared
def test_rqa_table3_row_reproduced(shared_data):
    """Seed Table 3, RQA row: MR-weighted <Acc> strict 63.27, regular 64.67, partial 65.48, lenient 70.60."""
    from mrcstats.io import read_log

    folder = shared_data / "mskqa" / "output" / "RQA"
    log = read_log(folder, format="mskqa")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = masking_indicators(log, acc0=0.8984)
    w = res.to_dict()["weighted"]["gpt-4o-mini-2024-07-18"]
    for cond, pct in {"strict": 63.27, "regular": 64.67, "partial": 65.48, "lenient": 70.60}.items():
        assert abs(100 * w[cond]["acc"] - pct) <= 0.005 + 1e-9, (cond, w[cond]["acc"])
    assert round(w["regular"]["na"], 4) == 0.7198  # Table 3 NA with the table's mask-free Acc 89.84

    # and Acc(MR) equals the exact proportions computed straight from the CSVs
    acc = res.accuracy.table.set_index(["condition", "masking_rate"])["acc"]
    for cond in CONDS:
        for mr in (0, 50, 100):
            props = []
            for t in range(1, 11):
                d = pd.read_csv(folder / f"RQA_gemma2_9b_{t}{SUFFIX[cond]}.csv")
                gold = d["answer"].map(lambda s: int(ast.literal_eval(s)[0]) + 1)
                a = pd.to_numeric(d[f"answer_gpt-4o-mini-2024-07-18_{mr}"], errors="coerce")
                props.append(float((a == gold).mean()))
            assert acc[(cond, float(mr))] == pytest.approx(np.mean(props), abs=1e-12)
