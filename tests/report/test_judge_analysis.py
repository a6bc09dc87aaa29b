"""The ``judge`` report analysis builds (agreement table, PPI table, error-correlation heat map) and its tables carry
the API's numbers."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mrcstats.report import build_report


def _log(tmp_path, n_items: int = 150):
    """Two models' 0/1 answers; three judges flip the human verdict with probabilities .08, .12, .2, the first two
    on a shared set of hard items (correlated errors); humans label 60% of the rows."""
    rng = np.random.default_rng(5)
    rows = []
    hard = rng.random(n_items) < 0.15
    for m, acc in (("small", 0.5), ("large", 0.8)):
        y = (rng.random(n_items) < acc).astype(int)
        g = {}
        for j, p in (("gpt", 0.08), ("claude", 0.12), ("llama", 0.2)):
            flip = (rng.random(n_items) < p) | (hard & (j != "llama") & (rng.random(n_items) < 0.7))
            g[j] = np.where(flip, 1 - y, y)
        h = np.where(rng.random(n_items) < 0.6, y, np.nan)
        rows.append(pd.DataFrame({"model": m, "item": [f"q{i}" for i in range(n_items)], "correct": g["gpt"],
                                  "human": h, **g}))
    d = pd.concat(rows, ignore_index=True)
    d.to_csv(tmp_path / "log.csv", index=False)
    return d


def test_judge_analysis_panel(tmp_path):
    d = _log(tmp_path)
    (tmp_path / "s.yaml").write_text(
        "logs: [log.csv]\nseed: 2\nanalyses:\n  - {type: judge, human: human, judge: [gpt, claude, llama], "
        "bootstrap: 200}\n  - {type: judge, human: human, judge: gpt, bootstrap: 0}\n")
    r = build_report(tmp_path / "s.yaml", tmp_path / "r.pdf")
    assert not r.skipped
    from mrcstats import judge

    ref = judge(d, human="human", judge=["gpt", "claude", "llama"], bootstrap=200, seed=2)
    ppi = pd.read_csv(tmp_path / "r_tables" / "a0_judge_ppi.csv")
    panel = ppi[ppi["Judge"] == "panel (majority)"].set_index("Model")
    want = ref.table.set_index("model")
    assert panel.loc[["small", "large"], "PPI"].to_numpy() == pytest.approx(
        want.loc[["small", "large"], "ppi_mean"].to_numpy(), abs=5e-4)
    assert set(ppi["Judge"]) == {"gpt", "claude", "llama", "panel (majority)"}
    assert set(ppi["PPI rule"]) == {"crossfit"}                          # the default rule, named per row
    agr = pd.read_csv(tmp_path / "r_tables" / "a0_judge_agreement.csv")
    kap = agr[(agr["Judge"] == "gpt") & (agr["Statistic"] == "cohen_kappa")]["Estimate"].iloc[0]
    assert kap == pytest.approx(ref.panel.per_judge[0].agreement.estimate("cohen_kappa", "none"), abs=5e-4)
    pairs = pd.read_csv(tmp_path / "r_tables" / "a0_judge_pairs.csv")
    assert pairs["r"].to_numpy() == pytest.approx(ref.panel.pairs["r"].to_numpy(), abs=5e-4)
    # gpt and claude share the hard items: their errors correlate more than either's with llama
    assert pairs["r"].iloc[0] > pairs["r"].iloc[1:].max()
    figs = {p.stem for p in (tmp_path / "r_figures").iterdir()}
    assert "a0_judge_correlation" in figs and "a1_judge_correlation" not in figs
    assert {"a0_judge_confusion", "a1_judge_confusion"} <= figs          # 0/1 labels: the confusion matrix
    assert (tmp_path / "r_tables" / "a1_judge_ppi.csv").is_file()
    # the judge's bias per model: the API's GLMM numbers, for each judge and the panel
    bias = pd.read_csv(tmp_path / "r_tables" / "a1_judge_bias.csv")
    ref1 = judge(d, human="human", judge="gpt", item="item", bootstrap=0).bias.table
    assert bias["GLMM"].to_numpy() == pytest.approx(ref1["marginal"].to_numpy(), abs=5e-4)
    assert set(pd.read_csv(tmp_path / "r_tables" / "a0_judge_bias.csv")["Judge"]) == {
        "gpt", "claude", "llama", "panel (majority)"}


def test_judge_analysis_calibration_figure(tmp_path):
    """A graded judge score: the binned calibration figure; its bins are :func:`calibration`'s."""
    from mrcstats.stats.judge import calibration

    d = _log(tmp_path, 60)
    d["score"] = np.clip(d["gpt"] * 0.7 + np.random.default_rng(1).random(len(d)) * 0.3, 0, 1)
    d.to_csv(tmp_path / "log.csv", index=False)
    (tmp_path / "s.yaml").write_text("logs: [log.csv]\nanalyses:\n  - {type: judge, human: human, judge: score, "
                                     "level: interval, bootstrap: 0, bins: 5}\n")
    build_report(tmp_path / "s.yaml", tmp_path / "r.pdf")
    assert (tmp_path / "r_figures" / "a0_judge_calibration.pdf").is_file()
    # a graded score: the judge's bias as the LMM of judge − human, the API's numbers
    from mrcstats import judge

    shift = pd.read_csv(tmp_path / "r_tables" / "a0_judge_shift.csv").set_index("Model")
    ref = judge(d, human="human", judge="score", item="item", level="interval", bootstrap=0).bias.shift
    assert shift.loc[list(ref["model"]), "LMM"].to_numpy() == pytest.approx(ref["estimate"].to_numpy(), abs=5e-4)
    assert not (tmp_path / "r_tables" / "a0_judge_bias.csv").exists()         # fractional scores: no GLMMs
    lab = d[d["human"].notna()]
    cal = calibration(lab["score"].to_numpy(), lab["human"].to_numpy(), bins=5)
    assert len(cal) == 5 and cal["n"].sum() == len(lab)
    assert (cal["ci_low"] <= cal["human_mean"]).all() and (cal["human_mean"] <= cal["ci_high"]).all()


def test_judge_analysis_needs_human_and_judge(tmp_path):
    from mrcstats.errors import InputError
    from mrcstats.report.spec import load_spec

    _log(tmp_path, 20)
    (tmp_path / "s.yaml").write_text("logs: [log.csv]\nanalyses: [{type: judge, judge: gpt}]\n")
    with pytest.raises(InputError, match="human"):
        load_spec(tmp_path / "s.yaml")
    (tmp_path / "s.yaml").write_text("logs: [log.csv]\nanalyses: [{type: judge, human: human, judge: [gpt, gpt]}]\n")
    with pytest.raises(InputError, match="named twice"):
        build_report(tmp_path / "s.yaml", tmp_path / "r.pdf", on_error="raise")
    # by default a failing analysis is skipped with a note and the report is still written (issue 36)
    res = build_report(tmp_path / "s.yaml", tmp_path / "r2.pdf")
    assert len(res.failed) == 1 and "named twice" in res.failed[0]
