"""``mrcstats fisher / chisq / discrim / mcnemar`` end to end through the console entry point."""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from mrcstats.cli import main


def _run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture()
def t13(tmp_path):
    p = tmp_path / "t13.csv"
    p.write_text(",Factual,Counterfactual\nCorrect,11,8\nIncorrect,0,9\n")
    return p


@pytest.fixture()
def rxc(tmp_path):
    p = tmp_path / "rxc.csv"
    p.write_text(",a,b,c,d\nx,3,5,2,6\ny,4,8,1,5\nz,7,2,9,8\n")
    return p


@pytest.fixture()
def log_path(tmp_path):
    from mrcstats.io import write_log

    rng = np.random.default_rng(1)
    rows = []
    for m, skill in (("alpha", 0.8), ("beta", 0.5), ("gamma", 0.3)):
        for c in range(30):
            for i in range(3):
                rows.append({"model": m, "item": f"p{c}#{i}", "cluster": f"p{c}",
                             "correct": bool(rng.random() < skill)})
    log = pd.DataFrame(rows)
    log["correct"] = log["correct"].astype("boolean")
    p = tmp_path / "log.parquet"
    write_log(log, p)
    return p


def test_fisher_json_2x2(capsys, t13):
    code, out, err = _run(capsys, "fisher", str(t13), "--json")
    assert code == 0, err
    obj = json.loads(out)
    assert set(obj) == {"p", "odds_ratio", "conf_int"}
    assert round(obj["p"], 4) == 0.0039
    assert obj["odds_ratio"] == "Inf" and obj["conf_int"][1] == "Inf"
    assert out.count("\n") == 1


def test_fisher_rxc_and_simulate(capsys, rxc):
    code, out, _ = _run(capsys, "fisher", str(rxc), "--json")
    obj = json.loads(out)
    assert code == 0 and obj["odds_ratio"] is None and obj["conf_int"] is None
    assert math.isclose(obj["p"], 0.0660297352734594, rel_tol=1e-9)  # R fisher.test
    code, out1, _ = _run(capsys, "fisher", str(rxc), "--simulate", "--B", "500", "--seed", "3", "--json")
    code, out2, _ = _run(capsys, "fisher", str(rxc), "--simulate", "--B", "500", "--seed", "3", "--json")
    assert code == 0 and out1 == out2
    p = json.loads(out1)["p"]
    assert math.isclose(p * 501, round(p * 501))


def test_fisher_text_and_alternative(capsys, t13):
    code, out, _ = _run(capsys, "fisher", str(t13), "--alternative", "greater")
    assert code == 0 and "p-value" in out and "greater" in out


def test_chisq_json(capsys, t13):
    code, out, err = _run(capsys, "chisq", str(t13), "--json")
    assert code == 0
    obj = json.loads(out)
    assert set(obj) == {"statistic", "df", "p", "expected", "cramers_v", "warning", "note"}
    assert obj["df"] == 1 and len(obj["expected"]) == 2
    assert obj["warning"] == "Chi-squared approximation may be incorrect" and "expected counts are below 5" in obj["note"]
    assert "mrcstats chisq: warning: Chi-squared approximation may be incorrect" in err
    assert "UserWarning" not in err
    code, out2, _ = _run(capsys, "chisq", str(t13), "--no-correct", "--json")
    assert json.loads(out2)["statistic"] > obj["statistic"]


@pytest.mark.parametrize("body,where", [
    (",a,b\nx,1,2.5\ny,3,4\n", "row 'x', column 'b'"),
    (",a,b\nx,1,-2\ny,3,4\n", "row 'x', column 'b'"),
    (",a,b\nx,1,2\ny,,4\n", "row 'y', column 'a'"),
])
def test_bad_table_exit_2(capsys, tmp_path, body, where):
    p = tmp_path / "bad.csv"
    p.write_text(body)
    code, out, err = _run(capsys, "fisher", str(p), "--json")
    assert code == 2 and out == ""
    assert where in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_missing_file_exit_2(capsys, tmp_path):
    code, _, err = _run(capsys, "chisq", str(tmp_path / "nope.csv"))
    assert code == 2 and "no such file" in err


def test_discrim_json(capsys, log_path):
    code, out, err = _run(capsys, "discrim", str(log_path), "--cutoffs", "0,1,100", "--bootstrap", "200",
                          "--seed", "4", "--json")
    assert code == 0, err
    obj = json.loads(out)
    assert set(obj) == {"pd", "cutoffs", "bootstrap", "seed", "level"} and obj["seed"] == 4
    assert len(obj["pd"]) == 30
    assert [c["cutoff"] for c in obj["cutoffs"]] == [0, 1, 100]
    first = obj["cutoffs"][0]
    assert {"cutoff", "clusters", "items", "accuracy", "grand_mean", "kendall_tau"} <= set(first)
    assert set(first["accuracy"]) == {"alpha", "beta", "gamma"}
    last = obj["cutoffs"][-1]
    assert last["clusters"] == 0 and last["items"] == 0 and last["accuracy"] == {} and last["kendall_tau"] is None
    code, out2, _ = _run(capsys, "discrim", str(log_path), "--cutoffs", "0,1,100", "--bootstrap", "200",
                         "--seed", "4", "--json")
    assert out2 == out


def test_discrim_bad_column(capsys, log_path):
    code, out, err = _run(capsys, "discrim", str(log_path), "--cluster", "passage", "--json")
    assert code == 2 and out == "" and "passage" in err


def test_mcnemar_json(capsys, log_path):
    code, out, err = _run(capsys, "mcnemar", str(log_path), "--models", "alpha,gamma", "--json")
    assert code == 0, err
    obj = json.loads(out)
    assert set(obj) == {"n_items", "a_only", "b_only", "p_exact", "statistic", "p_asymptotic"}
    assert obj["n_items"] == 90 and obj["a_only"] > obj["b_only"]
    code, _, err = _run(capsys, "mcnemar", str(log_path), "--models", "alpha", "--json")
    assert code == 2 and "two model names" in err
