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
    code, out, _ = _run(capsys, "screen", str(log_path), "--json")
    assert code == 0
    d = json.loads(out)
    assert sorted(r["item"] for r in d["items"]) == sorted(sim.log["item"].unique())
    assert {"item", "score", "flag", "error_type", "suggested_key", "evidence"} == set(d["items"][0])
    assert isinstance(d["notes"], list)
    from mrcstats.stats.screen import screen

    api = screen(pd.read_csv(log_path)).to_dict()
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
    assert d["k"] == 4 and d["metrics"][0]["signal"] == "score" and len(d["injected"]) == 4


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


def test_review_then_relabel_round_trip(capsys, log_path, tmp_path, sim):
    """screen --review writes the items to judge; relabel applies the verdicts with provenance, changes nothing
    else, and every later command says what the review changed."""
    rev = tmp_path / "review.csv"
    code, _, err = _run(capsys, "screen", str(log_path), "--review", str(rev), "--top", "6")
    assert code == 0 and "to review" in err
    r = pd.read_csv(rev, dtype=str, keep_default_na=False)
    assert len(r) >= 6 and {"item", "verdict", "new_key", "reviewer", "reason", "choices"} <= set(r.columns)
    wrong = [i for i in sim.truth["miskeyed"] if i in set(r["item"])]
    assert wrong
    r.loc[r["item"] == wrong[0], ["verdict", "new_key", "reason"]] = ["rekey", sim.truth["true_key"][wrong[0]],
                                                                     "the strong models are right"]
    other = r["item"][~r["item"].isin(wrong)].iloc[0]
    r.loc[r["item"] == other, ["verdict", "reason"]] = ["drop", "ambiguous"]
    r.to_csv(rev, index=False)
    fixed = tmp_path / "fixed.parquet"
    code, out, _ = _run(capsys, "relabel", str(log_path), "--verdicts", str(rev), "--out", str(fixed),
                        "--reviewer", "ann", "--json")
    assert code == 0
    d = json.loads(out)
    assert d["changed"] == 1 and d["dropped"] == 1 and {e["model"] for e in d["effect"]} == set(sim.log["model"])
    from mrcstats.io import read_log

    before, after = read_log(log_path), read_log(fixed)
    # written by write_log, the one log writer: a read's per-file attrs stay out of the file
    import pyarrow.parquet as pq

    meta = json.loads(pq.read_schema(fixed).metadata[b"pandas"])["attributes"]
    assert "file_attrs" not in meta and meta["relabel"][-1]["changed"] == 1
    prov = after.attrs["relabel"][-1]
    assert prov["changed"] == 1 and prov["sha256"] and prov["source"] == str(rev)
    byitem = {i["item"]: i for i in prov["items"]}
    assert byitem[wrong[0]]["reviewer"] == "ann" and byitem[other]["reason"] == "ambiguous"
    # nothing else changed: the other items' rows are identical; the re-keyed item's correct follows pred
    keep = ~before["item"].isin([wrong[0], other])
    pd.testing.assert_frame_equal(after[~after["item"].isin([wrong[0]])].reset_index(drop=True),
                                  before[keep].reset_index(drop=True), check_exact=True)
    assert other not in set(after["item"])
    w = after[after["item"] == wrong[0]]
    nk = sim.truth["true_key"][wrong[0]]
    assert (w["gold"] == nk).all()
    assert (w["correct"].astype(bool) == (w["pred"] == nk)).all()
    code, _, err = _run(capsys, "summary", str(fixed))
    assert code == 0 and "relabelled by review: 1 key changed, 1 item dropped" in err and "by ann" in err


@pytest.mark.parametrize("rows, msg", [
    ("item,verdict,new_key\nnot_an_item,drop,\n", "not an item of the log"),
    ("item,verdict,new_key\n{item},rekey,Z\n", "is not an option of item"),
    ("item,verdict,new_key\n{item},rekey,\n", "needs the correct option"),
    ("item,verdict,new_key\n{item},maybe,\n", "is not a verdict"),
    ("item,new_key\n{item},A\n", "no column 'verdict'"),
])
def test_relabel_bad_verdicts_exit_2(capsys, log_path, tmp_path, sim, rows, msg):
    v = tmp_path / "v.csv"
    v.write_text(rows.format(item=sim.log["item"].iloc[0]))
    out = tmp_path / "fixed.parquet"
    code, _, err = _run(capsys, "relabel", str(log_path), "--verdicts", str(v), "--out", str(out))
    assert code == 2 and msg in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and not out.exists()
