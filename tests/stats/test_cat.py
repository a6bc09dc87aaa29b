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
    MISFIT_FOLDS,
    MISFIT_N,
    MISFIT_RULE,
    calibrate,
    fisher_information,
    kfold_misfit,
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
    return calibrate(log[log["model"] != "m00"], screen=False, progress=False, folds=0)


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
    (lambda o: o.update(misfit={"n": [10, 20], "var": [0.0, 0.0], "df": [0, 3]}), "misfit"),
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


def misfit_world(n_models: int = 16, n_items: int = 200, sd: float = 0.0, seed: int = 7) -> pd.DataFrame:
    """A 1PL log with two skills: the even items easy (``b ~ N(-1.5, 0.7^2)``), the odd ones hard
    (``N(1.5, 0.7^2)``), four categories across both. With ``sd > 0`` every model is stronger on one skill and
    weaker on the other by ``N(0, sd^2)``: it violates the 1PL, and an adaptive run (which asks a strong model
    hard items) predicts its accuracy on the other skill wrongly."""
    r = np.random.default_rng(seed)
    th = r.standard_normal(n_models)
    sign = np.where(np.arange(n_items) % 2 == 0, 1.0, -1.0)
    b = -1.5 * sign + 0.7 * r.standard_normal(n_items)
    dev = sd * r.standard_normal(n_models)
    p = 1 / (1 + np.exp(-(th[:, None] + sign[None, :] * dev[:, None] - b[None, :])))
    y = r.random(p.shape) < p
    return pd.DataFrame({"model": np.repeat([f"m{j:02d}" for j in range(n_models)], n_items),
                         "item": np.tile([f"q{i:03d}" for i in range(n_items)], n_models), "correct": y.ravel(),
                         "category": np.tile([f"c{(i // 2) % 4}" for i in range(n_items)], n_models)})


@pytest.fixture(scope="module")
def misfit_bank():
    return calibrate(misfit_world(sd=3.0), irt_model="1pl", screen=False, progress=False)


def test_misfit_is_estimated_out_of_sample_stored_and_used(misfit_bank, tmp_path):
    mf = misfit_bank.misfit
    assert mf["folds"] == MISFIT_FOLDS and mf["models"] == 16 and mf["seed"] == 0
    assert list(mf["n"]) == [n for n in MISFIT_N if n < 200] and mf["df"] == [16] * len(mf["n"])
    assert all(v >= 0 for v in mf["var"]) and max(mf["var"]) > 0.02 ** 2      # models violate the 1PL
    assert "5-fold" in mf["method"] and len(mf["residuals"]) == 16 * len(mf["n"])
    # the excess of the held-out residuals' mean square over the nominal variance, floored at 0
    for k, n in enumerate(mf["n"]):
        r = np.array([x[2] for x in mf["residuals"] if x[1] == n])
        v = np.array([x[3] ** 2 for x in mf["residuals"] if x[1] == n])
        assert mf["var"][k] == pytest.approx(max(0.0, np.mean(r ** 2) - np.mean(v)))
    misfit_bank.save(tmp_path / "b.json")
    back = load_bank(tmp_path / "b.json")
    assert back.misfit["n"] == mf["n"] and back.misfit["var"] == pytest.approx(mf["var"])
    assert not any("no model-misfit" in n for n in back.notes)
    # used in the interval (the point unchanged) and named with its rule
    idx, y = np.arange(50), np.r_[np.ones(25), np.zeros(25)]
    with_ = predict_accuracy(back, idx, y, draws=400)
    without = predict_accuracy(back, idx, y, draws=400, misfit=False)
    assert with_.accuracy == without.accuracy
    assert back.misfit_var(50) > 0
    assert with_.se ** 2 == pytest.approx(without.se ** 2 + back.misfit_var(50), rel=0.25)
    assert MISFIT_RULE in with_.method and "model misfit" not in without.method
    res = run_cat(back, lambda item: item < "q100", max_items=50, seed=1)
    assert res.settings["model_misfit"] and MISFIT_RULE in res.prediction.method
    assert "model misfit" in res.summary()


def test_misfit_interpolation_in_log_n(misfit_bank):
    from dataclasses import replace

    b = replace(misfit_bank, misfit={"n": [10, 100], "var": [0.04, 0.01]})
    assert b.misfit_var(1) == 0.04 and b.misfit_var(1000) == 0.01
    assert b.misfit_var(int(np.sqrt(10 * 100) + 0.5)) == pytest.approx(0.025, abs=5e-4)
    assert replace(misfit_bank, misfit={}).misfit_var(50) == 0.0


def test_misfit_is_deterministic_given_the_seed():
    """Same seed, same estimate (fold split and adaptive runs from the seed); another seed, another split."""
    small = misfit_world(n_models=10, n_items=120, sd=3.0)
    bank = calibrate(small, irt_model="1pl", screen=False, progress=False, folds=0)
    assert "folds = 0" in " ".join(bank.notes) and bank.misfit == {}
    kw = {"folds": 2, "counts": (30,), "draws": 50, "seed": 3}
    m1 = kfold_misfit(small, bank, **kw)
    assert m1 == kfold_misfit(small, bank, **kw) and m1["folds"] == 2 and m1["df"] == [10]
    assert m1["residuals"] != kfold_misfit(small, bank, **(kw | {"seed": 4}))["residuals"]
    with pytest.raises(InputError, match="seed"):
        kfold_misfit(small, bank, folds=2, seed=None)


def test_old_bank_without_misfit_loads_with_a_note(misfit_bank, tmp_path):
    obj = misfit_bank.to_dict()
    del obj["misfit"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(obj))
    old = load_bank(path)
    assert old.misfit == {} and any("no model-misfit term" in n for n in old.notes)
    idx, y = np.arange(25), np.r_[np.ones(12), np.zeros(13)]
    assert predict_accuracy(old, idx, y).ci == predict_accuracy(misfit_bank, idx, y, misfit=False).ci
    res = run_cat(old, lambda item: True, max_items=10, seed=0)
    assert not res.settings["model_misfit"] and any("no model-misfit term" in n for n in res.notes)


@pytest.mark.parametrize("folds", [1, -1, True, 2.5])
def test_bad_folds(log, folds):
    with pytest.raises(InputError, match="folds"):
        calibrate(log, screen=False, progress=False, folds=folds)
