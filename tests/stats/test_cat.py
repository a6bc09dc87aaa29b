"""Adaptive testing (stats/cat.py): bank round trip and validation, selection properties, replay, prediction."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcstats.errors import InputError
from mrcstats.stats.cat import (
    GRID,
    MISFIT_N,
    calibrate,
    kfold_misfit,
    fisher_information,
    load_bank,
    next_item,
    predict_accuracy,
    replay,
    run_cat,
)


def simulate(n_models: int = 30, n_items: int = 120, seed: int = 1) -> pd.DataFrame:
    """A 2PL log: abilities N(0, 1), log a ~ N(0, 0.3), d ~ N(0, 1.5), four content groups."""
    r = np.random.default_rng(seed)
    th = r.standard_normal(n_models)
    a = np.exp(0.3 * r.standard_normal(n_items))
    d = 1.5 * r.standard_normal(n_items)
    p = 1 / (1 + np.exp(-(th[:, None] * a[None, :] + d[None, :])))
    y = r.random(p.shape) < p
    rows = [{"model": f"m{j:02d}", "item": f"q{i:03d}", "correct": bool(y[j, i]), "category": f"c{i % 4}",
             "prompt": f"Question {i}. ANSWER=A", "gold": "A"} for j in range(n_models) for i in range(n_items)]
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def log():
    return simulate()


@pytest.fixture(scope="module")
def bank(log):
    return calibrate(log[log["model"] != "m00"], screen=False, progress=False)


def test_bank_round_trip(bank, tmp_path):
    assert bank.n_items == 120 and set(bank.items["content"]) == {"c0", "c1", "c2", "c3"}
    assert bank.has_texts and bank.provenance["content"] == "category"
    path = tmp_path / "bank.json"
    bank.save(path)
    back = load_bank(path)
    pd.testing.assert_frame_equal(back.items[["item", "a", "d", "se_a", "se_d", "p"]],
                                  bank.items[["item", "a", "d", "se_a", "se_d", "p"]])
    np.testing.assert_allclose(back.tcc([-1, 0, 1]), bank.tcc([-1, 0, 1]))
    obj = json.loads(path.read_text())
    assert obj["tcc"]["definition"].startswith("mean over the bank's items")
    # TCC is increasing and the mean of the items' P
    t = bank.tcc(GRID)
    assert np.all(np.diff(t) >= 0)


@pytest.mark.parametrize(("edit", "msg"), [
    (lambda o: o.update(format="other"), "not an mrcstats item bank"),
    (lambda o: o["items"][3].update(a="x"), r"items\[3\] .*a = .x. is not a finite"),
    (lambda o: o["items"][0].pop("se_d"), "missing se_d"),
    (lambda o: o["items"][1].update(item=o["items"][0]["item"]), "appears twice"),
    (lambda o: o.update(format_version=99), "format version"),
    (lambda o: o.update(misfit={"n": [10, 5], "var": [0.0, 0.0]}), "misfit"),
    (lambda o: o.update(misfit={"n": [10], "var": [-1.0]}), "misfit"),
    (lambda o: o.update(misfit={"n": [10, 20], "var": [0.0]}), "misfit"),
])
def test_bank_validation(bank, tmp_path, edit, msg):
    obj = bank.to_dict()
    edit(obj)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(obj))
    with pytest.raises(InputError, match=msg):
        load_bank(path)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0.2, 3.0), st.floats(-3, 3)), min_size=2, max_size=30),
       st.floats(-3, 3), st.integers(0, 10_000))
def test_selection_takes_the_most_informative(params, theta, seed):
    """With one group and topk = 1 the chosen item has the maximal information; with topk = k it is among the
    k most informative; an asked item is never chosen again."""
    a = np.array([p[0] for p in params])
    d = np.array([p[1] for p in params])
    n = len(a)
    avail = np.ones(n, bool)
    avail[0] = False
    codes = np.zeros(n, int)
    info = fisher_information(a, d, theta)
    rng = np.random.default_rng(seed)
    j = next_item(a, d, theta, avail, codes, np.array([1.0]), np.zeros(1), 0, rng, topk=1)
    assert j != 0 and info[j] == info[avail].max()
    k = min(3, n - 1)
    j = next_item(a, d, theta, avail, codes, np.array([1.0]), np.zeros(1), 0, rng, topk=k)
    assert info[j] >= np.sort(info[avail])[::-1][k - 1]


@settings(max_examples=40, deadline=None)
@given(st.floats(-3, 3), st.floats(0.1, 4), st.floats(-4, 4))
def test_information_formula(theta, a, d):
    p = 1 / (1 + np.exp(-(a * theta + d)))
    assert fisher_information(np.array([a]), np.array([d]), theta)[0] == pytest.approx(a * a * p * (1 - p))
    assert fisher_information(np.array([a]), np.array([d]), theta)[0] <= a * a / 4 + 1e-12


def test_content_balancing_follows_the_shares(bank):
    res = run_cat(bank, lambda item: True, max_items=20, seed=3)
    counts = res.trace["content"].value_counts()
    assert counts.max() - counts.min() <= 1       # four equal groups: round robin
    assert res.trace["item"].is_unique


def test_run_is_a_function_of_seed_and_answers(bank, log):
    ans = dict(zip(log.loc[log["model"] == "m00", "item"], log.loc[log["model"] == "m00", "correct"]))
    r1 = run_cat(bank, ans.__getitem__, model="m00", max_items=30, seed=5)
    r2 = run_cat(bank, ans.__getitem__, model="m00", max_items=30, seed=5)
    assert r1.to_dict() == r2.to_dict()
    d = r1.to_dict()
    for key in ("model", "items_asked", "ability", "ability_se", "predicted_accuracy", "predicted_accuracy_ci",
                "items"):
        assert key in d
    assert d["items_asked"] == 30 and len(d["items"]) == 30
    lo, hi = d["predicted_accuracy_ci"]
    assert lo <= d["predicted_accuracy"] <= hi


def test_replay_matches_run_and_predicts(bank, log):
    held = log[log["model"] == "m00"]
    res = replay(bank, held, max_items=40, seed=2)
    ans = dict(zip(held["item"], held["correct"]))
    ref = run_cat(bank, ans.__getitem__, model="m00", max_items=40, seed=2, available=list(ans))
    assert list(res.trace["item"]) == list(ref.trace["item"])
    truth = held["correct"].mean()
    assert abs(res.prediction.accuracy - truth) < 0.1
    with pytest.raises(InputError, match="choose one with --model"):
        replay(bank, log, max_items=5)
    other = held.assign(item=held["item"] + "x")
    with pytest.raises(InputError, match="another benchmark"):
        replay(bank, other, max_items=5)


def test_target_se_stops_early(bank):
    res = run_cat(bank, lambda item: item < "q060", max_items=120, target_se=0.05, seed=0)
    assert res.items_asked < 120 and res.stop_reason.startswith("target SE")
    assert res.trace["accuracy_se"].iloc[-1] <= 0.05


def test_prediction_with_everything_asked_is_the_accuracy(bank, log):
    held = log[log["model"] == "m00"]
    ans = dict(zip(held["item"], held["correct"]))
    y = np.array([float(ans[i]) for i in bank.items["item"]])
    p = predict_accuracy(bank, np.arange(bank.n_items), y)
    assert p.accuracy == pytest.approx(y.mean()) and p.ci[1] - p.ci[0] < 1e-9


def test_calibration_error_widens_the_interval(bank):
    y = np.ones(10)
    idx = np.arange(10)
    with_ = predict_accuracy(bank, idx, y, draws=400)
    without = predict_accuracy(bank, idx, y, draws=400, calibration_error=False)
    assert with_.ci[1] - with_.ci[0] >= 0.9 * (without.ci[1] - without.ci[0])
    assert "fixed" in without.method and "drawn" in with_.method


@pytest.mark.parametrize(("kw", "msg"), [({"max_items": 0}, "max-items"), ({"target_se": 2.0}, "target-se"),
                                         ({"topk": 0}, "topk"), ({"seed": -1}, "seed")])
def test_bad_settings(bank, kw, msg):
    with pytest.raises(InputError, match=msg):
        run_cat(bank, lambda item: True, **kw)


def test_misfit_is_estimated_stored_and_interpolated(bank, tmp_path):
    mf = bank.misfit
    assert mf["models"] == 29 and list(mf["n"]) == [n for n in MISFIT_N if n < 120]
    assert all(v >= 0 for v in mf["var"]) and "calibration models" in mf["method"]
    bank.save(tmp_path / "b.json")
    back = load_bank(tmp_path / "b.json")
    assert back.misfit["n"] == mf["n"] and back.misfit["var"] == pytest.approx(mf["var"])
    # linear in log n between the counts, the end values outside
    from dataclasses import replace

    b = replace(bank, misfit={"n": [10, 100], "var": [0.04, 0.01]})
    assert b.misfit_var(1) == 0.04 and b.misfit_var(1000) == 0.01
    assert b.misfit_var(int(np.sqrt(10 * 100) + 0.5)) == pytest.approx(0.025, abs=5e-4)
    assert replace(bank, misfit={}).misfit_var(50) == 0.0


def test_misfit_widens_the_interval_not_the_point(bank):
    from dataclasses import replace

    b = replace(bank, misfit={"n": [10, 100], "var": [0.01, 0.01]})
    idx, y = np.arange(20), np.r_[np.ones(10), np.zeros(10)]
    with_ = predict_accuracy(b, idx, y, draws=400)
    without = predict_accuracy(b, idx, y, draws=400, misfit=False)
    assert with_.accuracy == without.accuracy
    assert with_.se ** 2 == pytest.approx(without.se ** 2 + 0.01, rel=0.2)
    assert "model misfit" in with_.method and "model misfit" not in without.method
    # the bank without the component: the interval of before
    same = predict_accuracy(replace(bank, misfit={}), idx, y, draws=400)
    assert same.ci == without.ci


def test_misfit_of_a_well_specified_bank_is_small(bank, log):
    """In a 2PL world the calibration models' excess residual is small next to the finite-item SD."""
    models = list(bank.abilities["model"])
    wide = log.pivot(index="model", columns="item", values="correct").loc[models, list(bank.items["item"])]
    mf = estimate_misfit(bank, wide.to_numpy(float), counts=(10, 40))
    assert mf["n"] == [10, 40] and all(np.sqrt(v) < 0.08 for v in mf["var"])
    with pytest.raises(InputError, match="calibration models x 120"):
        estimate_misfit(bank, wide.to_numpy(float)[:, :5])
