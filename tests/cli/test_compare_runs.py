"""``compare --runs``: two runs of the same model and task (two checkpoints or seeds) as two units paired on their
items (mrcstats.io.runs), on real harness and Inspect runs (tests/conformance/)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from scipy.stats import binomtest

from mrcstats.cli import main
from mrcstats.errors import InputError
from mrcstats.io import read_log
from mrcstats.io.runs import read_runs, run_names

CONF = Path(__file__).resolve().parents[1] / "conformance"
INSPECT = CONF / "inspect"
HARNESS = CONF / "harness" / "lm_eval_out" / "wxrd1574"


def _harness_runs(tmp_path: Path) -> tuple[Path, Path]:
    """Two lm-eval runs of one model name (the fixture's runs of 12-13-30 and 12-14-41), each in its own folder."""
    out = []
    for name, stamp in (("ckpt1", "12-13-30"), ("ckpt2", "12-14-41")):
        d = tmp_path / name / "wxrd1574"
        d.mkdir(parents=True)
        for f in HARNESS.glob(f"*{stamp}*"):
            shutil.copy(f, d / f.name)
        out.append(tmp_path / name)
    return out[0], out[1]


def test_harness_runs_paired(tmp_path, capsys):
    a, b = _harness_runs(tmp_path)
    assert main(["compare", str(a), str(b), "--runs", "--condition", "none", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [m["model"] for m in out["models"]] == ["ckpt1", "ckpt2"]
    la, lb = (read_log(p) for p in (a, b))
    la, lb = (x[x["condition"] == "none"] for x in (la, lb))
    want = la["score"].astype(float).mean() - lb["score"].astype(float).mean()
    (pair,) = out["pairs"]
    assert pair["n_items"] == la["item"].nunique() and pair["diff"] == pytest.approx(want)


def test_inspect_runs_mcnemar(tmp_path, capsys):
    a, b = INSPECT / "scorers.eval", INSPECT / "edited.eval"
    assert main(["compare", str(a), str(b), "--runs", "base,edited", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (pair,) = out["pairs"]
    log = read_runs([a, b], names=["base", "edited"])
    assert set(log["run_model"]) == {"mockllm/model"}
    w = log.pivot(index="item", columns="model", values="correct").astype(bool)
    b10, b01 = int((w["base"] & ~w["edited"]).sum()), int((~w["base"] & w["edited"]).sum())
    if b10 + b01:
        assert pair["p_mcnemar"] == pytest.approx(binomtest(b10, b10 + b01).pvalue)
    assert pair["n_items"] == 5


def test_run_guards(tmp_path, capsys):
    a = INSPECT / "scorers.eval"
    assert run_names([a, INSPECT / "edited.eval"]) == ["scorers", "edited"]
    assert run_names([tmp_path / "x" / "run", tmp_path / "y" / "run"]) == [str(tmp_path / "x" / "run"),
                                                                          str(tmp_path / "y" / "run")]
    with pytest.raises(InputError, match="two or more"):
        read_runs([a])
    with pytest.raises(InputError, match="given twice"):
        read_runs([a, a])
    with pytest.raises(InputError, match="share no item"), pytest.warns(UserWarning):
        read_runs([a, INSPECT / "sigint.json"])
    with pytest.raises(InputError, match="names repeat"):
        read_runs([a, INSPECT / "edited.eval"], names=["x", "x"])
    with pytest.raises(InputError, match="one name per run"):
        read_runs([a, INSPECT / "edited.eval"], names=["x"])
    assert main(["compare", str(a), str(INSPECT / "edited.eval"), "--runs", "--model", "m"]) == 2   # exit 2
    assert "--model does not apply" in capsys.readouterr().err
