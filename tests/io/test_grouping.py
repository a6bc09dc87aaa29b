"""Grouping columns are checked in one place (``mrcstats.io.schema.check_grouping``): ``summary --by``,
``summarize(by=)``, ``elagent score --by``, ``compare --cluster``, in memory and on a dataset, with the same
message; repeated ``--by`` flags are combined, repeated single-column flags refused (issue 24, item 3)."""
from __future__ import annotations

import json

import pandas as pd
import pytest
from tests.fuzz._gen import run_cli

from mrcstats.errors import InputError
from mrcstats.io.schema import OUTCOME_COLUMNS, check_grouping

LOG = "model,item,correct,condition\na,1,1,x\na,2,0,y\na,3,1,y\nb,1,1,x\nb,2,1,y\nb,3,0,y\n"


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    d = tmp_path_factory.mktemp("grp")
    (d / "l.csv").write_text(LOG)
    r = run_cli(["ingest", str(d / "l.csv"), "--dataset", str(d / "ds")])
    assert r.code == 0, r.err
    return d / "l.csv", d / "ds"


def test_check_grouping_rules() -> None:
    cols = ["model", "item", "condition", "correct", "response"]
    assert check_grouping("model", cols) == ["model"]
    assert check_grouping(("model", "condition"), cols) == ["model", "condition"]
    assert check_grouping([], cols) == []
    for by, msg in [(["model", "model"], "'model' twice"), ("correct", "outcome"), ("response", "outcome"),
                    ("nope", "no such column"), ("model,condition", "--by A,B"), (3, "column name"),
                    ([None], "column name")]:
        with pytest.raises(InputError, match=msg):
            check_grouping(by, cols)
    assert "correct" in OUTCOME_COLUMNS


@pytest.mark.parametrize("by,msg", [
    ("model,model", "cannot group by 'model' twice"),
    ("correct", "cannot group by 'correct': it is an outcome"),
    ("pred", "cannot group by 'pred': it is an outcome"),
    ("nope", "cannot group by 'nope': no such column"),
])
def test_summary_by_refused_same_message_in_memory_and_on_dataset(paths, by: str, msg: str) -> None:
    log, ds = paths
    errs = []
    for src in (log, ds):
        r = run_cli(["summary", str(src), "--by", by, "--json"])
        assert r.code == 2 and r.out == "" and "Traceback" not in r.err, (src, r.err)
        assert msg in r.err
        errs.append(r.err)
    assert errs[0] == errs[1]


def test_summary_repeated_by_flags_are_combined(paths) -> None:
    log, ds = paths
    for src in (log, ds):
        both = json.loads(run_cli(["summary", str(src), "--by", "model", "--by", "condition", "--json"]).out)
        comma = json.loads(run_cli(["summary", str(src), "--by", "model,condition", "--json"]).out)
        assert both == comma and {tuple(g) for g in both["groups"]} and len(both["groups"]) == 4
        assert [g["model"] for g in both["groups"]] == ["a", "a", "b", "b"]
        r = run_cli(["summary", str(src), "--by", "model", "--by", "model"])
        assert r.code == 2 and "'model' twice" in r.err
    default = json.loads(run_cli(["summary", str(log), "--json"]).out)
    assert [g["model"] for g in default["groups"]] == ["a", "b"]


def test_api_by_checked(paths) -> None:
    from mrcstats import open_log, read_log
    from mrcstats.stats.accuracy import summarize

    log, ds = paths
    frame = read_log(log)
    dataset = open_log(ds)
    for obj in (frame, dataset):
        for by in (["model", "model"], "correct", ["correct", "model"]):
            with pytest.raises(InputError, match="cannot group by"):
                summarize(obj, by=by)
        with pytest.raises(InputError, match="cannot cluster by 'correct'"):
            summarize(obj, by="model", cluster="correct")
    with pytest.raises(InputError, match="cannot group by 'correct'"):
        summarize(pd.DataFrame({"model": ["a"], "item": ["1"], "correct": [1]}), by="correct")


def test_other_grouping_options(paths) -> None:
    log, _ = paths
    r = run_cli(["elagent", "score", str(log), "--by", "correct"])
    assert r.code == 2 and "cannot group by 'correct'" in r.err
    r = run_cli(["elagent", "score", str(log), "--by", "model", "--by", "condition", "--json"])
    assert r.code == 0 and len(json.loads(r.out)["groups"]) == 4
    r = run_cli(["compare", str(log), "--cluster", "correct"])
    assert r.code == 2 and "cannot cluster by 'correct'" in r.err
    r = run_cli(["compare", str(log), "--cluster", "item", "--cluster", "condition"])
    assert r.code == 2 and "--cluster given twice" in r.err
    r = run_cli(["glmer", str(log), "--formula", "correct ~ 1 + (1 | item)", "--emmeans", "model",
                 "--by", "condition", "--by", "model"])
    assert r.code == 2 and "--by given twice" in r.err
