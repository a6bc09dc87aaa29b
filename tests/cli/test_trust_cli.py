"""Issue 14 reproducers through the command line: one clear line and exit 2, or the right result."""
from __future__ import annotations

import gzip
import json

import pytest

from mrcstats.cli import build_parser, main
from mrcstats.io import write_log
from mrcstats.tasks.simulate import simulate_log

LOG_COMMANDS = ("ingest", "summary", "glmer", "discrim", "mcnemar", "masking", "features")


@pytest.fixture(scope="module")
def demo_log(tmp_path_factory):
    """A small log shaped like the demo's: three models, masking rates and conditions, two trials."""
    p = tmp_path_factory.mktemp("demo") / "demo_log.parquet"
    write_log(simulate_log(seed=0, n_passages=10, questions_per_passage=2, masking_rates=(0, 50, 100)), p)
    return p


def _err_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    return err.splitlines()[-1] if err else ""


@pytest.mark.parametrize("argv", [
    ["ingest", "{p}"], ["summary", "{p}"], ["masking", "{p}"], ["discrim", "{p}"],
    ["mcnemar", "{p}", "--models", "a,b"], ["features", "{p}", "--parser", "none", "--no-cache"],
    ["glmer", "{p}", "--formula", "correct ~ 1 + (1 | item)"],
])
def test_bare_cr_header_no_traceback(tmp_path, capsys, argv):
    p = tmp_path / "cr.csv"
    p.write_bytes(b"model,item,correct,question\ra,1,1,Who?\rb,1,0,Who?\ra,2,0,Why?\rb,2,1,Why?\r")
    code = main([a.replace("{p}", str(p)) for a in argv])
    out = capsys.readouterr()
    assert code in (0, 2) and "Traceback" not in out.err and "_csv.Error" not in out.err


def test_inspect_two_tasks_four_items(tmp_path, capsys):
    import zipfile

    def sample(i):
        return {"id": i, "epoch": 1, "input": "Q", "target": "A", "scores": {"s": {"value": "C", "answer": "A"}}}

    eval_path = tmp_path / "mmlu.eval"
    with zipfile.ZipFile(eval_path, "w") as zf:
        zf.writestr("header.json", json.dumps({"status": "success", "eval": {"task": "mmlu", "model": "m"}}))
        for i in (1, 2):
            zf.writestr(f"samples/{i}_epoch_1.json", json.dumps(sample(i)))
    js = tmp_path / "pop.json"
    js.write_text(json.dumps({"status": "success", "eval": {"task": "popularity", "model": "m"},
                              "samples": [sample(1), sample(3)]}))
    assert main(["ingest", str(eval_path), str(js), "--format", "inspect", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["items"] == 4


def test_mcnemar_runs_on_the_demo_log(demo_log, capsys):
    assert main(["mcnemar", str(demo_log), "--models", "alpha-7b,beta-13b", "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["n_items"] == 3 * 4 * 2 * 20  # rates x conditions x trials x items
    assert main(["mcnemar", str(demo_log), "--models", "alpha-7b,beta-13b", "--pair-on", "item"]) == 2
    assert "--pair-on" in _err_line(capsys)


def test_discrim_default_cutoffs_are_printed_and_select(demo_log, capsys):
    assert main(["discrim", str(demo_log), "--bootstrap", "0", "--json"]) == 0
    cap = capsys.readouterr()
    assert "cutoffs 0, " in cap.err and "quartiles" in cap.err
    rows = json.loads(cap.out)["cutoffs"]
    assert len(rows) == 4 and all(r["clusters"] > 0 for r in rows)


def test_model_option_means_a_model_name_everywhere(tmp_path, capsys):
    p = tmp_path / "nomodel.csv"
    p.write_text("item,correct,cluster\n1,1,a\n2,0,a\n3,1,b\n4,1,b\n")
    for argv in (["ingest", str(p), "--json"], ["summary", str(p), "--json"]):
        assert main([*argv, "--model", "gpt-x"]) == 0, capsys.readouterr().err
        assert "gpt-x" in capsys.readouterr().out
    assert main(["discrim", str(p), "--model", "gpt-x", "--bootstrap", "0"]) == 0  # a name, not a column
    assert "fewer than two models" in capsys.readouterr().err
    parser = build_parser()
    subs = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices
    helps = {c: next(a.help for a in subs[c]._actions if "--model" in a.option_strings) for c in LOG_COMMANDS}
    assert len(set(helps.values())) == 1, helps


def test_glmer_reads_every_format(tmp_path, demo_log, capsys):
    import pandas as pd

    df = pd.read_parquet(demo_log)
    df = df[df["masking_rate"] == 0][["model", "item", "cluster", "trial", "condition", "correct", "scaled_tok"]]
    js = tmp_path / "d.jsonl.gz"
    js.write_bytes(gzip.compress("".join(r.to_json() + "\n" for _, r in df.iterrows()).encode()))
    f = "correct ~ scaled_tok + (1 | cluster)"
    assert main(["glmer", str(demo_log), "--formula", f, "--json"]) == 0
    a = json.loads(capsys.readouterr().out)
    assert main(["glmer", str(js), "--formula", f, "--json"]) == 0
    b = json.loads(capsys.readouterr().out)
    assert a["nobs"] > b["nobs"] > 0  # all rates vs the unmasked rows, both read through mrcstats.io


def test_glmer_singular_message_printed_once(tmp_path, capsys):
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(2)
    n = 200
    pd.DataFrame({"y": (rng.random(n) < .5).astype(int), "x": rng.normal(size=n),
                  "g": rng.integers(0, 10, n)}).to_csv(tmp_path / "s.csv", index=False)
    assert main(["glmer", str(tmp_path / "s.csv"), "--formula", "y ~ x + (1 | g)"]) == 0
    cap = capsys.readouterr()
    assert (cap.out + cap.err).count("boundary (singular) fit") == 1
    assert "0.0000000000" not in cap.out


def test_help_texts_have_no_double_percent(capsys):
    parser = build_parser()
    subs = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices
    for name, sp in subs.items():
        text = sp.format_help()
        assert "%%" not in text, name


def test_fisher_huge_cell_is_one_line(tmp_path, capsys):
    p = tmp_path / "t.csv"
    p.write_text(",a,b,c\nx,1000000000,2,3\ny,4,5,6\nz,7,8,9\nw,1,2,3\n")
    assert main(["fisher", str(p)]) == 2
    assert "--simulate" in _err_line(capsys)
