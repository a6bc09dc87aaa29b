"""The ``screen`` and ``dif`` report analyses build, and their tables carry the API's numbers."""
from __future__ import annotations

import pandas as pd
import pytest

from mrcstats.report import build_report
from mrcstats.tasks.choices import choice_log


def test_screen_and_dif_analyses(tmp_path):
    sim = choice_log(11, models=18, items=80, miskeyed=4, families=2)
    sim.log.to_csv(tmp_path / "log.csv", index=False)
    (tmp_path / "s.yaml").write_text(
        "logs: [log.csv]\nseed: 1\nanalyses:\n  - {type: screen, validate: 4, n: 6}\n"
        "  - {type: dif, group: family, n: 5}\n")
    r = build_report(tmp_path / "s.yaml", tmp_path / "r.pdf")
    assert not r.skipped
    items = pd.read_csv(tmp_path / "r_tables" / "a0_screen_items.csv")
    from mrcstats.io import read_log
    from mrcstats.stats.dif import dif
    from mrcstats.stats.screen import screen

    log = read_log(tmp_path / "log.csv")
    ref = screen(log)
    assert list(items["Item"].astype(str)) == list(ref.items["item"].head(6))
    assert items["P(wrong key)"].to_numpy() == pytest.approx(ref.items["score"].head(6).to_numpy(), rel=1e-9)
    val = pd.read_csv(tmp_path / "r_tables" / "a0_screen_validation.csv")
    assert val["Signal"].iloc[0] == "score"
    d = pd.read_csv(tmp_path / "r_tables" / "a1_dif_items.csv")
    dref = dif(log, "family")
    assert d["MH χ²"].to_numpy() == pytest.approx(dref.table["mh_chisq"].head(5).to_numpy(), rel=1e-9)
    figs = {p.stem for p in (tmp_path / "r_figures").iterdir()}
    assert {"a0_screen_map", "a0_screen_roc"} <= figs


def test_dif_needs_group(tmp_path):
    from mrcstats.errors import InputError
    from mrcstats.report.spec import load_spec

    choice_log(1, models=6, items=10, miskeyed=0).log.to_csv(tmp_path / "log.csv", index=False)
    (tmp_path / "s.yaml").write_text("logs: [log.csv]\nanalyses: [{type: dif}]\n")
    with pytest.raises(InputError, match="group"):
        load_spec(tmp_path / "s.yaml")


def test_screen_analysis_with_verdicts(tmp_path):
    """A filled review file gives the realised precision of the flags and the before/after table."""
    from mrcstats.io import read_log
    from mrcstats.stats.screen import review_table, screen

    sim = choice_log(3, models=16, items=70, miskeyed=4)
    sim.log.to_csv(tmp_path / "log.csv", index=False)
    res = screen(read_log(tmp_path / "log.csv"))
    rev = review_table(res, sim.log, top=5)
    rev["verdict"] = ["rekey" if i in sim.truth["miskeyed"] else "keep" for i in rev["item"]]
    rev["new_key"] = [sim.truth["true_key"].get(i, "") if i in sim.truth["miskeyed"] else "" for i in rev["item"]]
    rev.to_csv(tmp_path / "review.csv", index=False)
    (tmp_path / "s.yaml").write_text("logs: [log.csv]\nanalyses:\n  - {type: screen, verdicts: review.csv, n: 5}\n")
    r = build_report(tmp_path / "s.yaml", tmp_path / "r.pdf")
    assert not r.skipped
    eff = pd.read_csv(tmp_path / "r_tables" / "a0_screen_relabel.csv")
    assert set(eff["Model"]) == set(sim.log["model"])
    # the right keys raise the strong models' accuracy (a weak model that guessed the old key may lose)
    assert eff["Change"].sum() > 0 and eff["Change"].iloc[0] > 0
