"""``mrcstats agreement`` / ``mrcstats judge`` end to end through the console entry point: one JSON object on
stdout with --json, and bad input (one rater, an item rated by nobody, a rating outside the declared levels, human
labels that overlap no judged row) as exit 2 with one line on stderr."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from mrcstats.cli import main


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture()
def long_csv(tmp_path):
    rng = np.random.default_rng(2)
    rows = []
    for u in range(40):
        truth = int(rng.integers(1, 4))
        for r in ("ann", "bob", "cat"):
            v = int(np.clip(truth + rng.integers(-1, 2) * (rng.random() < 0.3), 1, 3))
            rows.append({"item": f"i{u}", "rater": r, "rating": v if (u, r) != (3, "bob") else None})
    p = tmp_path / "long.csv"
    pd.DataFrame(rows).to_csv(p, index=False)
    return p


def test_agreement_long_and_wide_json(capsys, long_csv, tmp_path):
    code, out, err = _run(capsys, "agreement", long_csv, "--item", "item", "--rater", "rater", "--rating", "rating",
                          "--level", "ordinal", "--bootstrap", "50", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["raters"] == ["ann", "bob", "cat"] and d["n_items"] == 40 and d["n_missing"] == 1
    stats = {s["statistic"] for s in d["statistics"]}
    assert {"fleiss_kappa", "gwet_ac1", "gwet_ac2", "krippendorff_alpha", "ICC2"} <= stats
    wide = pd.read_csv(long_csv).pivot(index="item", columns="rater", values="rating").reset_index()
    wp = tmp_path / "wide.csv"
    wide.to_csv(wp, index=False)
    code, out2, err = _run(capsys, "agreement", wp, "--wide", "ann,bob,cat", "--item", "item", "--level", "ordinal",
                           "--bootstrap", "50", "--json")
    assert code == 0, err
    got = {(s["statistic"], s["weights"]): s["estimate"] for s in json.loads(out2)["statistics"]}
    want = {(s["statistic"], s["weights"]): s["estimate"] for s in d["statistics"]}
    assert got.keys() == want.keys()
    assert all(got[k] == pytest.approx(want[k], abs=1e-12) or (got[k] is None and want[k] is None) for k in got)
    code, text, err = _run(capsys, "agreement", wp, "--wide", "ann,bob", "--bootstrap", "0")
    assert code == 0 and "cohen_kappa" in text and "Agreement of 2 raters" in text


@pytest.mark.parametrize(("rows", "extra", "needle"), [
    ([("a", "x", 1), ("b", "x", 2)], [], "names one rater"),
    ([("a", "x", 1), ("a", "y", 1), ("b", "x", None), ("b", "y", None)], [], "rated by nobody"),
    ([("a", "x", 1), ("a", "y", 5), ("b", "x", 2), ("b", "y", 2)], ["--levels", "1,2,3"],
     "data row 2, column 'rating': rating '5' is not one of the declared levels"),
    ([("a", "x", 1), ("a", "x", 2)], [], "twice"),
    ([("a", "x", "lo"), ("a", "y", "hi")], ["--level", "interval"], "is not a number"),
])
def test_agreement_bad_input_exit_2_one_line(capsys, tmp_path, rows, extra, needle):
    p = tmp_path / "r.csv"
    pd.DataFrame(rows, columns=["item", "rater", "rating"]).to_csv(p, index=False)
    code, out, err = _run(capsys, "agreement", p, "--item", "item", "--rater", "rater", "--rating", "rating", *extra)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and needle in err and "Traceback" not in err
    assert str(p) in err


def test_agreement_needs_a_form(capsys, long_csv):
    code, _, err = _run(capsys, "agreement", long_csv, "--item", "item")
    assert code == 2 and "give the long form" in err and len(err.strip().splitlines()) == 1
    code, _, err = _run(capsys, "agreement", long_csv, "--wide", "a", "--rater", "rater")
    assert code == 2 and "not both" in err
    code, _, err = _run(capsys, "agreement", long_csv, "--item", "item", "--rater", "rater", "--rating", "rating",
                          "--bootstrap", "-1")
    assert code == 2 and "bootstrap" in err


# -------------------------------------------------------------------------------------------------- judge
def _judge_log(seed: int, n: int = 400, labelled: int = 120) -> pd.DataFrame:
    """Two models with true accuracies .7 and .4; the judge says 'correct' for 15% of wrong answers (biased up)
    and misses 5% of right ones; humans label a random subset without error."""
    rng = np.random.default_rng(seed)
    rows = []
    for m, p in (("m1", 0.7), ("m2", 0.4)):
        y = (rng.random(n) < p).astype(float)
        f = np.where(y == 1, rng.random(n) > 0.05, rng.random(n) < 0.15).astype(float)
        h = np.full(n, np.nan)
        lab = rng.choice(n, labelled, replace=False)
        h[lab] = y[lab]
        rows.append(pd.DataFrame({"model": m, "item": [f"q{i}" for i in range(n)], "judge": f, "human": h}))
    return pd.concat(rows, ignore_index=True)


def test_judge_json_ppi_beside_human_and_judge_only(capsys, tmp_path):
    p = tmp_path / "judge.csv"
    d = _judge_log(4)
    d.to_csv(p, index=False)
    code, out, err = _run(capsys, "judge", p, "--human", "human", "--judge", "judge", "--bootstrap", "0", "--json",
                          "--ppi", "plain")
    assert code == 0, err
    res = json.loads(out)
    assert res["ppi"] == "plain" and "lambda = 1" in res["ppi_rule"]
    m1 = res["models"][0]
    assert m1["model"] == "m1" and m1["n"] == 400 and m1["n_labelled"] == 120
    # PPI = judge mean on all + mean(human - judge) on the labelled rows
    s = d[d.model == "m1"]
    lab = s.human.notna()
    assert m1["ppi_mean"] == pytest.approx(s.judge.mean() + (s.human[lab] - s.judge[lab]).mean(), abs=1e-12)
    assert m1["ppi_low"] < m1["ppi_mean"] < m1["ppi_high"]
    assert m1["ppi_high"] - m1["ppi_low"] < m1["human_high"] - m1["human_low"]   # the judge's labels help
    assert {x["statistic"] for x in res["agreement"]["statistics"]} >= {"cohen_kappa", "krippendorff_alpha"}


def test_judge_ppi_choices_are_the_methods(capsys, tmp_path):
    """--ppi offers exactly PPI_METHODS (the parser does not import the statistics), default crossfit."""
    from mrcstats.cli import build_parser
    from mrcstats.stats.judge import PPI_METHODS

    sub = next(a for a in build_parser()._actions if a.choices and "judge" in a.choices).choices["judge"]
    act = next(a for a in sub._actions if "--ppi" in a.option_strings)
    assert set(act.choices) == set(PPI_METHODS) and act.default == "crossfit"
    p = tmp_path / "judge.csv"
    _judge_log(4).to_csv(p, index=False)
    code, out, err = _run(capsys, "judge", p, "--human", "human", "--judge", "judge", "--bootstrap", "0")
    assert code == 0 and "PPI++ cross-fit" in out and "crossfit 0." in out, err


def test_judge_no_overlap_exit_2(capsys, tmp_path):
    p = tmp_path / "judge.csv"
    d = _judge_log(5)
    d["human"] = np.nan
    d.to_csv(p, index=False)
    code, out, err = _run(capsys, "judge", p, "--human", "human", "--judge", "judge")
    assert code == 2 and out == "" and "do not overlap" in err and len(err.strip().splitlines()) == 1
    code, out, err = _run(capsys, "judge", p, "--human", "nope", "--judge", "judge")
    assert code == 2 and "no column 'nope'" in err


def _panel_csv(tmp_path, n: int = 300):
    """Three 0/1 judges that flip the human verdict with probabilities .1, .15, .2; humans label half the rows."""
    rng = np.random.default_rng(9)
    y = (rng.random(n) < 0.6).astype(float)
    cols = {f"g{i}": np.where(rng.random(n) < p, 1 - y, y) for i, p in enumerate((0.1, 0.15, 0.2))}
    d = pd.DataFrame({"model": np.where(np.arange(n) % 2, "m1", "m2"), "human": np.where(rng.random(n) < 0.5, y, np.nan),
                      **cols})
    p = tmp_path / "panel.csv"
    d.to_csv(p, index=False)
    return p


def test_judge_several_judges_json(capsys, tmp_path):
    p = _panel_csv(tmp_path)
    code, out, err = _run(capsys, "judge", p, "--human", "human", "--judge", "g0,g1,g2", "--bootstrap", "20", "--json")
    assert code == 0, err
    res = json.loads(out)
    assert res["judge"] == "majority of g0, g1, g2" and len(res["models"]) == 2
    pan = res["panel"]
    assert pan["judges"] == ["g0", "g1", "g2"] and len(pan["pairs"]) == 3 and len(pan["per_judge"]) == 3
    assert pan["k_eff"] == pytest.approx(3 / (1 + 2 * pan["mean_rho"]), rel=1e-12)
    code, text, err = _run(capsys, "judge", p, "--human", "human", "--judge", "g0,g1,g2", "--combine", "mean",
                           "--level", "interval", "--bootstrap", "0")
    assert code == 0 and "mean of g0, g1, g2" in text and "effective number of independent judges" in text


@pytest.mark.parametrize(("judges", "blank", "needle"), [
    ("g0,g1,g0", False, "column 'g0' is named twice"),
    ("g0,g7", False, "no column 'g7' (--judge)"),
    ("g0,g1", True, "do not overlap the judges' rows"),
])
def test_judge_several_judges_bad_input_exit_2(capsys, tmp_path, judges, blank, needle):
    p = _panel_csv(tmp_path, 40)
    if blank:
        pd.read_csv(p).assign(human=np.nan).to_csv(p, index=False)
    code, out, err = _run(capsys, "judge", p, "--human", "human", "--judge", judges)
    assert code == 2 and out == "" and needle in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
