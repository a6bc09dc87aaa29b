"""`mrcstats cat calibrate` / `cat run` on the command line: the bank file, its provenance, the screen's
exclusions, and one-line exit-2 errors."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from mrcstats._files import sha256_of
from mrcstats.cli import main


@pytest.fixture(scope="module")
def log_path(tmp_path_factory):
    r = np.random.default_rng(9)
    J, I = 12, 60
    th, b = r.standard_normal(J), r.standard_normal(I)
    y = r.random((J, I)) < 1 / (1 + np.exp(-(th[:, None] - b)))
    gold = np.array(list("ABCD"))[np.arange(I) % 4]
    wrong = np.array(list("BCDA"))[np.arange(I) % 4]
    pred = np.where(y, gold[None, :], wrong[None, :])
    df = pd.DataFrame({"model": np.repeat([f"m{j:02d}" for j in range(J)], I),
                       "item": np.tile([f"q{i:02d}" for i in range(I)], J), "gold": np.tile(gold, J),
                       "pred": pred.ravel(), "correct": y.ravel()})
    p = tmp_path_factory.mktemp("cat") / "log.csv"
    df.to_csv(p, index=False)
    return p


def test_calibrate_with_the_screen_and_provenance(log_path, tmp_path, capsys):
    bank = tmp_path / "bank.json"
    assert main(["cat", "calibrate", str(log_path), "--out", str(bank), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["irt_model"] == "1pl" and out["provenance"]["screen"] is True
    assert out["provenance"]["data_sha256"] == sha256_of(log_path)
    obj = json.loads(bank.read_text())
    assert obj["n_items"] + len(obj["excluded"]) == 60
    assert any("1PL (Rasch) chosen" in n for n in obj["notes"])
    assert out["misfit"]["folds"] == 5 and out["misfit"]["df"] and "residuals" not in out["misfit"]
    assert obj["misfit"]["n"] == out["misfit"]["n"] and len(obj["misfit"]["residuals"]) > 0
    assert main(["cat", "run", "--bank", str(bank), "--replay", str(log_path), "--model", "m03", "--max-items",
                 "10", "--draws", "60", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["items_asked"] == 10 and any("not out of sample" in n for n in res["notes"])


@pytest.mark.parametrize(("argv", "msg"), [
    (["--replay", "LOG", "--endpoint", "http://127.0.0.1:9/v1"], "either --endpoint"),
    (["--endpoint", "http://127.0.0.1:9/v1", "--model", "x"], "needs --model NAME and --out"),
    (["--replay", "LOG", "--model", "m02", "--max-items", "0"], "--max-items"),
    (["--replay", "LOG"], "choose one with --model"),
])
def test_run_bad_arguments_exit_2(log_path, tmp_path, capsys, argv, msg):
    bank = tmp_path / "bank.json"
    assert main(["cat", "calibrate", str(log_path), "--out", str(bank), "--no-screen", "--folds", "0"]) == 0
    capsys.readouterr()
    argv = [str(log_path) if a == "LOG" else a for a in argv]
    assert main(["cat", "run", "--bank", str(bank), *argv]) == 2
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1 and "Traceback" not in err


def test_damaged_bank_exit_2(log_path, tmp_path, capsys):
    bad = tmp_path / "bank.json"
    bad.write_text('{"format": "something else"}')
    assert main(["cat", "run", "--bank", str(bad), "--replay", str(log_path), "--model", "m01"]) == 2
    err = capsys.readouterr().err
    assert "not an mrcstats item bank" in err and err.count("\n") == 1


@pytest.mark.parametrize(("argv", "msg"), [(["--folds", "1"], "--folds must be 0"), (["--folds", "-3"], "--folds")])
def test_calibrate_bad_folds_exit_2(log_path, tmp_path, capsys, argv, msg):
    assert main(["cat", "calibrate", str(log_path), "--out", str(tmp_path / "b.json"), "--no-screen", *argv]) == 2
    err = capsys.readouterr().err
    assert msg in err and "Traceback" not in err


def test_calibrate_no_misfit_and_run_without_it(log_path, tmp_path, capsys):
    bank = tmp_path / "bank.json"
    assert main(["cat", "calibrate", str(log_path), "--out", str(bank), "--no-screen", "--no-misfit", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["misfit"] == {} and any("folds = 0" in n for n in out["notes"])
    assert main(["cat", "run", "--bank", str(bank), "--replay", str(log_path), "--model", "m03", "--max-items",
                 "10", "--draws", "60", "--no-misfit", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["settings"]["model_misfit"] is False and "model misfit" not in res["interval_method"]
