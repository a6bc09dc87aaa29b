"""variance: the components against lme4's lmer VarCorr ((θ σ)², through Rscript in the same test run), the SNR and
the two-run ordering probability on data with known components, the items/repetitions needed plugged back,
and the input guards."""
from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.models.test_lmer import lmer_r

from mrcstats.cli import main
from mrcstats.errors import InputError
from mrcstats.stats.variance import COMPONENTS, agreement_probability, snr_for_agreement, variance


def gen(seed: int = 1, M: int = 6, I: int = 20, R: int = 4, s_item: float = 0.6, s_model: float = 0.5,
        s_rep: float = 0.2, s_mr: float = 0.3, s_im: float = 0.4, s_e: float = 1.0, binary: bool = False,
        over: str = "trial") -> pd.DataFrame:
    """y = a_item + b_model + c_rep + d_model:rep + g_item:model + e, every effect normal with the given SD
    (``binary``: 1{y > 0}, a 0/1 log)."""
    rng = np.random.default_rng(seed)
    a, b, c = rng.normal(0, s_item, I), rng.normal(0, s_model, M), rng.normal(0, s_rep, R)
    d, g = rng.normal(0, s_mr, (M, R)), rng.normal(0, s_im, (I, M))
    mm, rr, ii = np.meshgrid(np.arange(M), np.arange(R), np.arange(I), indexing="ij")
    mm, rr, ii = mm.ravel(), rr.ravel(), ii.ravel()
    y = a[ii] + b[mm] + c[rr] + d[mm, rr] + g[ii, mm] + rng.normal(0, s_e, len(mm))
    df = pd.DataFrame({"model": [f"m{m}" for m in mm], "item": [f"q{i}" for i in ii]})
    df["trial"] = rr                    # the canonical key: one row per (model, item, trial, condition)
    if over == "condition":
        df["condition"] = [f"c{r}" for r in rr]
    elif over != "trial":
        df[over] = [f"{over}{r}" for r in rr]
    if binary:
        df["correct"] = y > 0
    else:
        df["score"] = y
    return df


# --------------------------------------------------------------------------- lme4


@pytest.mark.parametrize(("binary", "item_model", "over"), [(False, True, "trial"), (False, False, "seed"),
                                                           (True, True, "prompt")])
def test_components_equal_lme4(rscript, tmp_path, binary, item_model, over):
    log = gen(seed=3, M=5, I=30, R=4, binary=binary, over=over)
    res = variance(log, over=over, item_model=item_model)
    data = pd.DataFrame({"y": log["correct"].astype(float) if binary else log["score"], "item": log["item"],
                         "model": log["model"], "rep": log[over].astype(str)})
    fit = lmer_r(rscript, data, res.formula, True, tmp_path)     # lme4 (+ lmerTest), optimiser tightened
    r = {name.split(".")[0]: (th * fit["sigma"]) ** 2 for name, th in fit["theta"].items()}   # VarCorr's vcov
    r["residual"] = fit["sigma"] ** 2
    ours = {c: res.component(c) for c in res.components["component"]}
    assert set(ours) == set(r)
    scale = max(r.values())
    for c, v in r.items():
        assert ours[c] == pytest.approx(v, rel=1e-4, abs=1e-6 * scale), c
    assert res.components["share"].sum() == pytest.approx(1.0)
    assert list(res.components["component"]) == [c for c in COMPONENTS if c in ours]


# --------------------------------------------------------------------------- known components


def test_snr_and_agreement_from_the_components():
    """The SNR, the agreement and each pair's probability follow from the fitted components (module docstring)."""
    res = variance(gen(seed=5), over="trial")
    I = res.n_items
    s2 = res.component("model") + res.component("item:model") / I
    v1 = res.component("model:rep") + res.component("residual") / I
    assert res.signal_var == pytest.approx(s2)
    assert res.noise_var == pytest.approx(v1)
    assert res.snr == pytest.approx(math.sqrt(s2 / v1))
    rho = s2 / (s2 + v1)
    assert res.agreement == pytest.approx(0.5 + math.asin(rho) / math.pi)
    from scipy.stats import norm

    for r in res.pairs.itertuples():
        p = norm.cdf(abs(r.diff) / math.sqrt(2 * v1))
        assert r.p_same_order == pytest.approx(p ** 2 + (1 - p) ** 2)


def test_recovers_known_components():
    """24 models x 20 items x 4 repetitions: each fitted SD within 25% of the generating one (the sizes keep the
    fit short; an SD estimated from 20 levels is off by about 15% on average)."""
    sds = {"item": 0.6, "model": 0.5, "rep": 0.3, "model:rep": 0.3, "item:model": 0.4, "residual": 1.0}
    log = gen(seed=11, M=24, I=20, R=4, s_item=sds["item"], s_model=sds["model"], s_rep=sds["rep"],
              s_mr=sds["model:rep"], s_im=sds["item:model"], s_e=sds["residual"])
    res = variance(log, over="trial")
    for c, sd in sds.items():
        if c == "rep":            # 4 levels: too few to estimate its SD closely
            continue
        assert math.sqrt(res.component(c)) == pytest.approx(sd, rel=0.25), c


def test_agreement_matches_simulated_runs():
    """Two runs of pairs of models from the population order them the same way as often as
    1/2 + arcsin(ρ)/π says, on the generating components (Monte Carlo, 200,000 pairs)."""
    rng = np.random.default_rng(7)
    S2, V1 = 0.04, 0.03
    n = 200_000
    delta = rng.normal(0, math.sqrt(2 * S2), n)
    d1 = delta + rng.normal(0, math.sqrt(2 * V1), n)
    d2 = delta + rng.normal(0, math.sqrt(2 * V1), n)
    observed = float(np.mean(d1 * d2 > 0))
    assert observed == pytest.approx(agreement_probability(math.sqrt(S2 / V1)), abs=4 * math.sqrt(0.25 / n))


@settings(max_examples=60, deadline=None)
@given(st.floats(0.5, 0.999))
def test_snr_for_agreement_inverts(p):
    assert agreement_probability(snr_for_agreement(p)) == pytest.approx(p, abs=1e-9)


def test_agreement_limits():
    assert agreement_probability(0.0) == 0.5
    assert agreement_probability(math.inf) == 1.0
    with pytest.raises(InputError, match="target agreement"):
        snr_for_agreement(1.0)


@pytest.mark.parametrize("target", [1.5, 3.0])
def test_items_and_reps_needed_plugged_back(target):
    res = variance(gen(seed=2, s_model=0.6, s_mr=0.1), over="trial", target_snr=target)
    sm, smr = res.component("model"), res.component("model:rep")
    sim, se = res.component("item:model"), res.component("residual")

    def snr(I, R=1):
        return math.sqrt((sm + sim / I) / ((smr + se / I) / R))
    if res.items_needed is None:
        assert sm <= target ** 2 * smr
    else:
        assert snr(res.items_needed) >= target - 1e-12
        assert res.items_needed == 1 or snr(res.items_needed - 1) < target
    R = res.reps_needed
    assert snr(res.n_items, R) >= target - 1e-12
    assert R == 1 or snr(res.n_items, R - 1) < target


def test_target_agreement_is_a_target_snr():
    a = variance(gen(seed=4), over="trial", target_agreement=0.9)
    b = variance(gen(seed=4), over="trial", target_snr=snr_for_agreement(0.9))
    assert (a.items_needed, a.reps_needed) == (b.items_needed, b.reps_needed)
    assert a.to_dict()["target"]["agreement"] == 0.9


def test_condition_as_repetition_and_result_api():
    log = gen(seed=6, over="condition")
    res = variance(log, over="condition")
    assert res.n_reps == 4 and res.over == "condition"
    obj = json.loads(json.dumps(res.to_dict()))
    assert {c["component"] for c in obj["components"]} == set(COMPONENTS)
    assert len(obj["pairs"]) == 15 and len(obj["models"]) == 6
    assert "SNR" in res.summary() and res.to_frame().shape == (6, 4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.snr = 1.0


# --------------------------------------------------------------------------- guards


def test_guards():
    log = gen(seed=1, M=3, I=10, R=3)
    with pytest.raises(InputError, match="over='seed' is not a column"):
        variance(log, over="seed")
    with pytest.raises(InputError, match="is not a column"):
        variance(log, over="score")
    with pytest.raises(InputError, match="both 'trial'"):
        variance(log, over="trial", by="trial")
    with pytest.raises(InputError, match="one level"):
        variance(log[log.trial == 0], over="trial")
    one = log[(log.model != "m0") | (log.trial == 0)]
    with pytest.raises(InputError, match="model 'm0' has one trial"):
        variance(one, over="trial")
    with pytest.raises(InputError, match="at least two"):
        variance(log[log.model == "m1"], over="trial")
    two = log.assign(condition=np.where(log.index % 2, "a", "b"))
    with pytest.raises(InputError, match="2 conditions"):
        variance(two, over="trial")
    with pytest.raises(InputError, match="not both"):
        variance(log, over="trial", target_snr=2, target_agreement=0.9)
    for bad in (0, -1, float("nan"), True, "2"):
        with pytest.raises(InputError, match="target_snr"):
            variance(log, over="trial", target_snr=bad)
    for bad in (0.5, 1.0, 1.2):
        with pytest.raises(InputError, match="target_agreement"):
            variance(log, over="trial", target_agreement=bad)
    blank = log.assign(seed=np.where(log.index == 4, None, "s1")).astype({"seed": object})
    with pytest.raises(InputError, match="row 5 has no 'seed'"):
        variance(blank, over="seed")


def test_cli(tmp_path, capsys):
    path = tmp_path / "log.csv"
    gen(seed=8, M=3, I=12, R=3).to_csv(path, index=False)
    assert main(["variance", str(path), "--over", "trial", "--target-agreement", "0.9", "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["over"] == "trial" and obj["target"]["reps_needed"] >= 1
    assert main(["variance", str(path), "--over", "seed"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "--over COLUMN" in err
    assert main(["variance", str(path), "--over", "condition", "--condition", "x"]) == 2
