"""DIF between model groups: Mantel-Haenszel equal to R's mantelhaen.test and logistic LR equal to R's glm (run in
the same test run), MH invariances (hypothesis), detection of injected DIF, group resolution and bad input."""
from __future__ import annotations

import json
import subprocess

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcstats.errors import InputError
from mrcstats.stats.dif import dif, dif_validate, mantel_haenszel, resolve_groups
from mrcstats.tasks.choices import choice_log


def _trial_log(seed: int = 0, J: int = 18, I: int = 12, T: int = 5) -> pd.DataFrame:
    """Balanced log: J models in two groups, I items, T trials each; item q00 is easier for group g1."""
    rng = np.random.default_rng(seed)
    th = rng.normal(size=J)
    b = rng.normal(size=I)
    grp = np.where(np.arange(J) % 2 == 0, "g1", "g2")
    eta = th[:, None] - b[None, :]
    eta[grp == "g1", 0] += 1.5
    p = 1 / (1 + np.exp(-eta))
    rows = []
    for j in range(J):
        for i in range(I):
            for t in range(T):
                rows.append((f"m{j:02d}", f"q{i:02d}", t, bool(rng.random() < p[j, i]), grp[j]))
    return pd.DataFrame(rows, columns=["model", "item", "trial", "correct", "family"])


_R_CODE = r"""
d <- read.csv("{csv}", stringsAsFactors = FALSE)
K <- {k}
total <- tapply(d$correct, d$model, mean)
edges <- unique(quantile(total, seq(0, 1, length.out = K + 1), names = FALSE))
str_of <- findInterval(total, edges, rightmost.closed = TRUE)
names(str_of) <- names(total)
d$stratum <- str_of[d$model]
share <- tapply(d$correct, list(d$model, d$item), mean)
out <- list()
for (it in sort(unique(d$item))) {{
  s <- d[d$item == it, ]
  tab <- table(factor(s$family, levels = c("g1", "g2")), factor(s$correct, levels = c(1, 0)), s$stratum)
  keep <- apply(tab, 3, sum) >= 2
  mt <- mantelhaen.test(tab[, , keep, drop = FALSE])
  rest <- rowMeans(share[, colnames(share) != it, drop = FALSE])
  agg <- aggregate(correct ~ model + family, data = s, FUN = sum)
  agg$n <- as.vector(table(s$model)[agg$model])
  agg$rest <- rest[agg$model]
  agg$G <- as.numeric(agg$family == "g1")
  ctl <- glm.control(epsilon = 1e-14, maxit = 200)
  m0 <- glm(cbind(correct, n - correct) ~ rest, family = binomial, data = agg, control = ctl)
  m1 <- glm(cbind(correct, n - correct) ~ rest + G, family = binomial, data = agg, control = ctl)
  m2 <- glm(cbind(correct, n - correct) ~ rest + G + rest:G, family = binomial, data = agg, control = ctl)
  out[[it]] <- c(unname(mt$statistic), unname(mt$estimate), mt$p.value,
                 deviance(m0) - deviance(m1), deviance(m1) - deviance(m2), deviance(m0) - deviance(m2),
                 unname(coef(m1)["G"]))
}}
cat(jsonlite::toJSON(out, digits = NA))
"""


@pytest.mark.r
def test_mh_and_logistic_equal_r(rscript, tmp_path):
    log = _trial_log()
    csv = tmp_path / "dif.csv"
    log.assign(correct=log["correct"].astype(int)).to_csv(csv, index=False)
    r = subprocess.run([rscript, "-e", _R_CODE.format(csv=csv, k=3)], check=False, capture_output=True, text=True,
                       timeout=300)
    if r.returncode != 0 and "jsonlite" in r.stderr:
        pytest.skip("R package jsonlite missing")
    assert r.returncode == 0, r.stderr
    ref = json.loads(r.stdout)
    res = dif(log, "family", strata=3, adjust="none")
    t = res.table.set_index("item")
    assert set(t["group"]) == {"g1"}
    for item, v in ref.items():
        row = t.loc[item]
        assert row["mh_chisq"] == pytest.approx(v[0], rel=1e-8, abs=1e-8), item
        assert row["mh_or"] == pytest.approx(v[1], rel=1e-8, abs=1e-8), item
        assert row["mh_p"] == pytest.approx(v[2], rel=1e-8, abs=1e-10), item
        assert row["lr_uniform"] == pytest.approx(v[3], abs=1e-6), item
        assert row["lr_nonuniform"] == pytest.approx(v[4], abs=1e-6), item
        assert row["lr_both"] == pytest.approx(v[5], abs=1e-6), item
        assert row["beta_group"] == pytest.approx(v[6], abs=1e-5), item
    # the planted item is the most easier-for-g1 one
    assert res.table.iloc[0]["item"] == "q00" and res.table.iloc[0]["favours"] == "g1"


def test_ets_classes_and_table():
    res = dif(_trial_log(1), "model=family", strata=3)
    t = res.table
    assert set(t["ets"].dropna()) <= {"A", "B", "C"}
    big = t[(t["delta_mh"].abs() < 1)]
    assert (big["ets"] == "A").all()
    d = res.to_dict()
    assert set(d["ets_counts"]) == {"A", "B", "C"} and len(d["items"]) == 12
    assert (t["mh_p_adj"] >= t["mh_p"] - 1e-12).all()
    assert "ETS" in res.summary()
    assert list(t["mh_chisq"]) == sorted(t["mh_chisq"], reverse=True)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(*[st.integers(0, 6)] * 4), min_size=1, max_size=5))
def test_mh_invariances(tables):
    A, B, C, D = (np.array([[t[k] for t in tables]], float) for k in range(4))
    m = mantel_haenszel(A, B, C, D)
    # swapping the groups inverts the odds ratio and keeps the statistic
    s = mantel_haenszel(C, D, A, B)
    if np.isfinite(m["chisq"][0]):
        assert s["chisq"][0] == pytest.approx(m["chisq"][0], rel=1e-10)
    if np.isfinite(m["or"][0]) and m["or"][0] > 0:
        assert s["or"][0] == pytest.approx(1 / m["or"][0], rel=1e-10)
    # the order of the strata does not matter
    o = np.arange(A.shape[1])[::-1]
    r = mantel_haenszel(A[:, o], B[:, o], C[:, o], D[:, o])
    assert np.allclose(r["chisq"], m["chisq"], equal_nan=True) and np.allclose(r["or"], m["or"], equal_nan=True)
    if np.isfinite(m["p"][0]):
        assert 0 <= m["p"][0] <= 1


def test_injected_dif_is_detected():
    sim = choice_log(4, models=30, items=150, miskeyed=0, families=3)
    v = dif_validate(sim.log, "family", 8, seed=1, rate=0.9)
    m = v.metrics.set_index("method")
    assert m.loc["mantel_haenszel", "auc"] > 0.85 and m.loc["logistic_uniform", "auc"] > 0.85
    d = v.to_dict()
    assert d["k"] == 8 and len(d["items"]) == 8 and d["group"] in {"f0", "f1", "f2"}
    again = dif_validate(sim.log, "family", 8, seed=1, rate=0.9)
    pd.testing.assert_frame_equal(v.metrics, again.metrics)


def test_groups_and_bad_input():
    log = _trial_log(2, J=6, I=4, T=2)
    assert resolve_groups(log, "family")["m00"] == "g1"
    mp = {f"m{j:02d}": ("a" if j < 3 else "b") for j in range(6)}
    assert resolve_groups(log, mp) == mp
    assert resolve_groups(log, pd.DataFrame({"model": list(mp), "group": list(mp.values())})) == mp
    # --group model=model: every model its own group (was a pandas traceback: grouper not 1-dimensional)
    own = resolve_groups(log, "model=model")
    assert own == {m: m for m in sorted(log["model"].astype(str).unique())}
    with pytest.raises(InputError, match="no group"):
        resolve_groups(log, {"m00": "a"})
    with pytest.raises(InputError, match="one group"):
        resolve_groups(log, dict.fromkeys(mp, "a"))
    with pytest.raises(InputError, match="no column"):
        dif(log, "model=nope")
    bad = log.copy()
    bad.loc[0, "family"] = "g9"
    with pytest.raises(InputError, match="more than one value"):
        dif(bad, "family")
    with pytest.raises(InputError, match="strata"):
        dif(log, "family", strata=0)
    with pytest.raises(InputError, match="adjustment"):
        dif(log, "family", adjust="nope")
    with pytest.raises(InputError, match="K"):
        dif_validate(log, "family", 0)
