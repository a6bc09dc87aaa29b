"""``mrcstats lmer`` on a judge-preference log shaped as AlpacaEval's (issue 41): models x instructions, each
instruction from one of five source datasets, a preference score in [0, 1], a few cells missing. The command
reads one plain CSV without pandas (:func:`mrcstats.io.arrow_columns.read_table_columns`) to the same JSON, to
the bit, as the pandas path (``--format csv``), with numbers equal to lme4 + lmerTest in the same run; the
analyst's other way in, AlpacaEval's own annotation JSON files through ``mrcstats ingest --map``, gives the
same fit. Generated here: no test reads the AlpacaEval data."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tests.models.test_lmer import lmer_r

SRC = str(Path(__file__).resolve().parents[2] / "src")
FORMULA = "score ~ dataset + (1 | model) + (1 | item)"
DATASETS = ("helpful_base", "koala", "oasst", "selfinstruct", "vicuna")


def alpaca_like(seed: int = 41, models: int = 12, items: int = 90) -> pd.DataFrame:
    """Rows model by model (as AlpacaEval's per-model files): model, item (``i000``..), dataset (the item's
    source), score = a judge's preference weight in (0, 1); two models miss a few instructions."""
    rng = np.random.default_rng(seed)
    ds = np.array(DATASETS)[rng.integers(0, len(DATASETS), items)]
    shift = dict(zip(DATASETS, (0.0, 0.03, 0.02, 0.07, 0.01)))
    bm, bi = rng.normal(0, 0.18, models), rng.normal(0, 0.13, items)
    rows = []
    for m in range(models):
        for i in range(items):
            if (m == 3 and i % 17 == 0) or (m == 7 and i in (5, 6)):
                continue
            eta = 0.1 + shift[ds[i]] + bm[m] + bi[i] + rng.normal(0, 0.2)
            rows.append((f"model-{m:02d}", f"i{i:03d}", ds[i], float(np.clip(eta, 0.0, 1.0))))
    return pd.DataFrame(rows, columns=["model", "item", "dataset", "score"])


def _run(*argv: str) -> tuple[dict, str]:
    r = subprocess.run([sys.executable, "-m", "mrcstats", *argv], check=False, capture_output=True, text=True,
                       timeout=300, env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr[-1500:]
    out = json.loads(r.stdout)
    out.pop("fit_seconds")
    return out, r.stderr


def test_columns_path_equals_the_pandas_path(tmp_path):
    path = tmp_path / "prefs.csv"
    alpaca_like().to_csv(path, index=False)
    fast, err_fast = _run("lmer", str(path), "--formula", FORMULA, "--json", "--ranef")
    slow, err_slow = _run("lmer", str(path), "--formula", FORMULA, "--json", "--ranef", "--format", "csv")
    assert fast == slow
    assert err_fast == err_slow
    assert fast["nobs"] == 12 * 90 - 6 - 2 and fast["ngroups"] == {"item": 90, "model": 12}


def test_lmer_on_a_plain_csv_imports_no_pandas(tmp_path):
    """Reading, the design, the fit, Satterthwaite's df and the JSON: no pandas (issue 41: its import was a
    quarter of the command's wall time on the AlpacaEval log)."""
    path = tmp_path / "prefs.csv"
    alpaca_like(models=4, items=30).to_csv(path, index=False)
    code = ("import sys, runpy; sys.argv = ['mrcstats', 'lmer', sys.argv[1], '--formula', sys.argv[2], '--json'];\n"
            "try:\n    runpy.run_module('mrcstats', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pandas'), file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", code, str(path), FORMULA], check=False, capture_output=True, text=True,
                       timeout=300, env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr[-1500:]
    assert json.loads(r.stdout)["nobs"] > 0
    assert r.stderr.strip().splitlines()[-1] == "[]", r.stderr[-800:]


@pytest.mark.parametrize("opt", [["--anova", "--ddf", "kenward-roger"], ["--confint", "profile"],
                                 ["--emmeans", "dataset", "--pairs"]])
def test_tests_intervals_and_means_on_columns_equal_the_pandas_path(tmp_path, opt):
    """--anova, --confint and --emmeans work on the columns read without pandas, to the same JSON."""
    path = tmp_path / "prefs.csv"
    alpaca_like(models=5, items=30).to_csv(path, index=False)
    fast, err_fast = _run("lmer", str(path), "--formula", FORMULA, "--json", *opt)
    slow, err_slow = _run("lmer", str(path), "--formula", FORMULA, "--json", *opt, "--format", "csv")
    assert fast == slow and err_fast == err_slow
    assert {"--anova": "anova", "--confint": "confint", "--emmeans": "pairs"}[opt[0]] in fast


@pytest.mark.r
def test_cli_equals_lme4_and_lmertest(rscript, tmp_path):
    """The command's JSON against lme4 + lmerTest (read.csv of the same file; lme4's optimiser tightened):
    fixef and logLik 1e-6 absolute, θ 1e-5, SE and Satterthwaite df 1e-4 relative (issue 26's targets)."""
    df = alpaca_like()
    path = tmp_path / "prefs.csv"
    df.to_csv(path, index=False)
    out, _ = _run("lmer", str(path), "--formula", FORMULA, "--json")
    r = lmer_r(rscript, df, FORMULA, True, tmp_path)
    assert set(out["fixef"]) == set(r["fixef"])
    for k, v in r["fixef"].items():
        assert out["fixef"][k] == pytest.approx(v, abs=1e-6), k
        assert out["se"][k] == pytest.approx(r["se"][k], rel=1e-4), k
        assert out["df"][k] == pytest.approx(r["df"][k], rel=1e-4), k
    for k, v in r["theta"].items():
        assert out["theta"][k] == pytest.approx(v, abs=1e-5), k
    assert out["loglik"] == pytest.approx(r["loglik"], abs=1e-6)
    assert out["sigma"] == pytest.approx(r["sigma"], rel=1e-6)


def test_annotation_files_through_ingest_give_the_same_fit(tmp_path):
    """AlpacaEval's own files (one JSON array per model: instruction, dataset, generator_2, preference in [1, 2],
    ...) read with ``--map``: ``mrcstats ingest`` then ``lmer`` fits ``preference`` (= score + 1) to the same
    θ, σ, slopes and logLik, the intercept 1 higher."""
    df = alpaca_like(models=6, items=50)
    files = []
    for m, rows in df.groupby("model", sort=True):
        recs = [{"dataset": d, "instruction": f"Instruction number {i[1:]}: write, then explain?", "output_1": "ref",
                 "generator_1": "gpt4_1106_preview", "output_2": "answer", "generator_2": m,
                 "annotator": "weighted_alpaca_eval_gpt4_turbo", "preference": s + 1.0}
                for i, d, s in zip(rows["item"], rows["dataset"], rows["score"])]
        f = tmp_path / m / "annotations.json"
        f.parent.mkdir()
        f.write_text(json.dumps(recs))
        files.append(str(f))
    log = tmp_path / "log.parquet"
    r = subprocess.run([sys.executable, "-m", "mrcstats", "ingest", *files, "--map", "model=generator_2",
                        "--map", "item=instruction", "--map", "score=preference", "--out", str(log)], check=False,
                       capture_output=True, text=True, timeout=300, env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr[-1500:]
    csv = tmp_path / "prefs.csv"
    df.to_csv(csv, index=False)
    a, _ = _run("lmer", str(csv), "--formula", FORMULA, "--json")
    b, _ = _run("lmer", str(log), "--formula", FORMULA, "--json")
    assert (a["nobs"], a["ngroups"]) == (b["nobs"], b["ngroups"])
    assert b["fixef"]["(Intercept)"] == pytest.approx(a["fixef"]["(Intercept)"] + 1.0, abs=1e-9)
    for k in [k for k in a["fixef"] if k != "(Intercept)"]:
        assert b["fixef"][k] == pytest.approx(a["fixef"][k], abs=1e-9), k
    for k in a["theta"]:
        assert b["theta"][k] == pytest.approx(a["theta"][k], abs=1e-7), k
    assert b["loglik"] == pytest.approx(a["loglik"], abs=1e-8)
