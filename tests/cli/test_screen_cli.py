"""``mrcstats screen`` and ``mrcstats dif`` end to end through the console entry point."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from mrcstats.cli import main
from mrcstats.tasks.choices import choice_log


def _run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def sim():
    return choice_log(7, models=15, items=60, miskeyed=3, families=2)


@pytest.fixture()
def log_path(tmp_path, sim):
    p = tmp_path / "log.csv"
    sim.log.to_csv(p, index=False)
    return p


def test_screen_json_lists_every_item(capsys, log_path, sim):
    code, out, _ = _run(capsys, "screen", str(log_path), "--seed", "1", "--json")
    assert code == 0
    d = json.loads(out)
    assert sorted(r["item"] for r in d["items"]) == sorted(sim.log["item"].unique())
    assert {"item", "score", "flag", "suggested_key", "evidence"} == set(d["items"][0])
    assert isinstance(d["notes"], list)
    from mrcstats.stats.screen import screen

    api = screen(pd.read_csv(log_path), seed=1).to_dict()
    assert [r["item"] for r in d["items"]] == [r["item"] for r in api["items"]]


def test_screen_text_and_items_out(capsys, log_path, tmp_path):
    out_csv = tmp_path / "items.csv"
    code, out, err = _run(capsys, "screen", str(log_path), "--top", "5", "--items-out", str(out_csv))
    assert code == 0 and "Item screen" in out and "written" in err
    assert len(pd.read_csv(out_csv)) == 60


def test_screen_validate_json(capsys, log_path):
    code, out, _ = _run(capsys, "screen", str(log_path), "--validate", "4", "--seed", "2", "--json")
    assert code == 0
    d = json.loads(out)
    assert d["k"] == 4 and d["metrics"][0]["signal"] == "combined" and len(d["injected"]) == 4


def test_dif_json_and_mapping_file(capsys, log_path, tmp_path, sim):
    code, out, _ = _run(capsys, "dif", str(log_path), "--group", "model=family", "--json")
    assert code == 0
    d = json.loads(out)
    assert len(d["items"]) == 60 and set(d["groups"].values()) == {"f0", "f1"}
    m = sim.log[["model", "family"]].drop_duplicates().rename(columns={"family": "group"})
    mp = tmp_path / "groups.csv"
    m.to_csv(mp, index=False)
    code, out2, _ = _run(capsys, "dif", str(log_path), "--group", str(mp), "--json")
    assert code == 0 and json.loads(out2)["items"] == d["items"]
    code, out3, _ = _run(capsys, "dif", str(log_path), "--group", "model=family", "--validate", "5", "--json")
    assert code == 0 and {r["method"] for r in json.loads(out3)["metrics"]} == {"mantel_haenszel",
                                                                               "logistic_uniform"}
    code, text, _ = _run(capsys, "dif", str(log_path), "--group", "model=family", "--top", "3")
    assert code == 0 and "ETS" in text


@pytest.mark.parametrize("argv, msg", [
    (["screen", "{log}", "--fdr", "2"], "--fdr"),
    (["screen", "{log}", "--validate", "0"], "positive"),
    (["screen", "{tmp}/missing.csv"], ""),
    (["dif", "{log}", "--group", "model=nope"], "no column"),
    (["dif", "{log}", "--group", "{tmp}/nothere.csv"], "no such mapping file"),
    (["dif", "{log}", "--group", "item=family"], "model=COLUMN"),
    (["dif", "{log}", "--group", "model=family", "--adjust", "xx"], "adjustment"),
])
def test_bad_input_exits_2(capsys, log_path, tmp_path, argv, msg):
    argv = [a.format(log=log_path, tmp=tmp_path) for a in argv]
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's own errors
        code = e.code
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert "Traceback" not in err and msg in err
