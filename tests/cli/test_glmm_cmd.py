"""``mrcstats glmer``: one JSON object on stdout, messages on stderr, exit code 2 on bad input."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest


def _run(*args):
    return subprocess.run([sys.executable, "-m", "mrcstats", "glmer", *args], capture_output=True, text=True, check=False,
                          timeout=300)


@pytest.fixture()
def seed_csv(tmp_path):
    rng = np.random.default_rng(4)
    n_pass = 80
    pid = np.repeat(np.arange(n_pass), 3)
    rows = []
    for m, off in zip(("davinci2", "davinci3", "gpt4"), (-1.0, 0.0, 1.0), strict=True):
        eta = 1.0 + off + rng.normal(0, 0.7, n_pass)[pid]
        rows.append(pd.DataFrame({"passage": [f"p{i}" for i in pid], "scaled_tok": rng.normal(size=pid.size),
                                  "LLM": m, "correct": (rng.random(pid.size) < 1 / (1 + np.exp(-eta))).astype(int)}))
    df = pd.concat(rows, ignore_index=True)
    df.loc[5, "correct"] = np.nan
    path = tmp_path / "log.csv"
    df.to_csv(path, index=False)
    return path


def test_json_object_with_extras(seed_csv):
    r = _run(str(seed_csv), "--formula", "correct ~ scaled_tok * LLM + (1 | passage)", "--contrasts", "LLM=sum",
             "--drop1", "--gvif", "--ranef", "--compare", "correct ~ scaled_tok + LLM + (1 | passage)", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["engine"] == "native" and d["nobs"] == 720 and d["ngroups"] == {"passage": 80}   # invalid = wrong
    assert d["vcov_method"] == "hessian"
    assert set(d["fixef"]) == {"(Intercept)", "scaled_tok", "LLM1", "LLM2", "scaled_tok:LLM1", "scaled_tok:LLM2"}
    assert set(d["theta"]) == {"passage.(Intercept)"}
    assert d["drop1"]["term"] == ["scaled_tok:LLM"]
    assert d["gvif"]["term"] == ["scaled_tok", "LLM", "scaled_tok:LLM"]
    assert set(d["ranef"]["passage"]["p0"]) == {"mode", "condvar"}
    assert len(d["anova"]["loglik"]) == 2 and d["anova"]["df"] == 2
    assert "1 invalid answer counts as not correct" in r.stderr


def test_levels_flag_and_text_output(seed_csv):
    r = _run(str(seed_csv), "--formula", "correct ~ LLM + (1 | passage)", "--levels", "LLM=gpt4,davinci2,davinci3")
    assert r.returncode == 0, r.stderr
    assert "LLMdavinci2" in r.stdout and "Random effects:" in r.stdout


@pytest.mark.parametrize("args, text", [
    (["--formula", "correct ~ nope + (1 | passage)"], "not in the data"),
    (["--formula", "correct ~ scaled_tok + (0 | passage)"], "(0 | passage) has no columns"),
    (["--formula", "correct ~ scaled_tok + (1 + scaled_tok | passage)", "--nagq", "5"],
     "single scalar random-effects term"),
    (["--formula", "correct ~ LLM + (1 | passage)", "--contrasts", "LLM"], "NAME=VALUE"),
])
def test_errors_are_one_line_exit_2(seed_csv, args, text):
    r = _run(str(seed_csv), *args, "--json")
    assert r.returncode == 2
    assert r.stdout == ""
    assert text in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_missing_file(tmp_path):
    r = _run(str(tmp_path / "none.csv"), "--formula", "y ~ x + (1|g)")
    assert r.returncode == 2 and "no such file" in r.stderr


# --------------------------------------------------------------------------- --emmeans / --pairs


def test_emmeans_and_pairs_json(seed_csv):
    """``--emmeans LLM --type response --pairs``: the means and odds ratios as emmeans's columns, df "Inf"."""
    r = _run(str(seed_csv), "--formula", "correct ~ scaled_tok * LLM + (1 | passage)", "--contrasts", "LLM=sum",
             "--emmeans", "LLM", "--type", "response", "--pairs", "--adjust", "holm", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert [e["LLM"] for e in d["emmeans"]] == ["davinci2", "davinci3", "gpt4"]
    assert list(d["emmeans"][0]) == ["LLM", "prob", "SE", "df", "asymp.LCL", "asymp.UCL"]
    assert all(e["df"] == "Inf" and 0 < e["asymp.LCL"] < e["prob"] < e["asymp.UCL"] < 1 for e in d["emmeans"])
    assert [p["contrast"] for p in d["pairs"]] == ["davinci2 / davinci3", "davinci2 / gpt4", "davinci3 / gpt4"]
    assert list(d["pairs"][0]) == ["contrast", "odds.ratio", "SE", "df", "null", "z.ratio", "p.value"]
    assert "fixef" in d


@pytest.mark.parametrize("args, text", [
    (["--emmeans", "nope"], "not a variable of the fixed part"),
    (["--pairs"], "need --emmeans"),
])
def test_emmeans_bad_input(seed_csv, args, text):
    r = _run(str(seed_csv), "--formula", "correct ~ scaled_tok * LLM + (1 | passage)", *args, "--json")
    assert r.returncode == 2 and r.stdout == ""
    assert text in r.stderr and "Traceback" not in r.stderr


def test_invalid_answers_count_as_wrong_unless_excluded(seed_csv):
    """Issue 25: the GLMM silently dropped invalid answers while accuracy, compare and IRT count them wrong."""
    f = "correct ~ LLM + (1 | passage)"
    wrong = _run(str(seed_csv), "--formula", f, "--json")
    excl = _run(str(seed_csv), "--formula", f, "--invalid", "exclude", "--vcov", "RX", "--json")
    assert wrong.returncode == 0 and excl.returncode == 0, wrong.stderr + excl.stderr
    assert json.loads(wrong.stdout)["nobs"] == 720 and "1 invalid answer counts as not correct" in wrong.stderr
    d = json.loads(excl.stdout)
    assert d["nobs"] == 719 and d["vcov_method"] == "RX" and "left out" in excl.stderr
