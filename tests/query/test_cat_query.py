"""`mrcstats cat run` against the loopback stub (tests/query/conftest.py): end to end, killed and resumed
half-way = uninterrupted, replay, and the bad inputs (another benchmark, a dead endpoint, no texts)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mrcstats.cli import main
from mrcstats.query.log import load_log
from mrcstats.stats.cat import calibrate

REPO = Path(__file__).resolve().parents[2]
N_ITEMS = 60


def _log(with_texts: bool) -> pd.DataFrame:
    r = np.random.default_rng(4)
    th = r.standard_normal(30)
    a = np.exp(0.3 * r.standard_normal(N_ITEMS))
    d = 1.2 * r.standard_normal(N_ITEMS)
    y = r.random((30, N_ITEMS)) < 1 / (1 + np.exp(-(th[:, None] * a + d)))
    rows = [{"model": f"m{j:02d}", "item": f"q{i}", "correct": bool(y[j, i]), "category": f"c{i % 3}",
             **({"prompt": f"Question {i}. ANSWER={'A' if i % 3 else 'B'}", "gold": "A"} if with_texts else {})}
            for j in range(30) for i in range(N_ITEMS)]
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def banks(tmp_path_factory):
    root = tmp_path_factory.mktemp("banks")
    out = {}
    for name, texts in (("texts", True), ("bare", False)):
        bank = calibrate(_log(texts), screen=False, progress=False, folds=0)
        out[name] = root / f"{name}.json"
        bank.save(out[name])
    return out


def _tasks(path: Path, prefix: str = "q", gold: str = "A") -> Path:
    path.write_text("".join(json.dumps({"item": f"{prefix}{i}", "prompt": f"Question {i}. ANSWER="
                                        f"{'A' if i % 3 else 'B'}", "gold": gold}) + "\n" for i in range(N_ITEMS)))
    return path


def _cmd(bank: Path, stub, out: Path, *extra: str) -> list[str]:
    return ["cat", "run", "--bank", str(bank), "--endpoint", stub.base_url, "--model", "stub-model", "--out", str(out),
            "--max-items", "24", "--seed", "3", "--draws", "100", "--backoff", "0.01", "--json", *extra]


def test_end_to_end_and_the_log(banks, stub, tmp_path, capsys):
    out = tmp_path / "log.jsonl"
    assert main(_cmd(banks["texts"], stub, out)) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["items_asked"] == 24 and len(res["items"]) == 24 and res["model"] == "stub-model"
    lo, hi = res["predicted_accuracy_ci"]
    assert 0 <= lo <= res["predicted_accuracy"] <= hi <= 1
    rows = load_log(out).rows
    assert [r["item"] for r in rows] == [it["item"] for it in res["items"]]
    # the answers went through the query adapter's extraction and scoring: ANSWER=B items are wrong
    for r in rows:
        assert r["status"] == "ok" and r["correct"] == (int(r["item"][1:]) % 3 != 0)
    assert [it["correct"] for it in res["items"]] == [r["correct"] for r in rows]
    # a second run replays the whole log and sends nothing
    n = len(stub.requests)
    assert main(_cmd(banks["texts"], stub, out)) == 0
    assert json.loads(capsys.readouterr().out) == res and len(stub.requests) == n


def test_killed_and_resumed_equals_uninterrupted(banks, stub, tmp_path, capsys):
    ref_out, out = tmp_path / "ref.jsonl", tmp_path / "log.jsonl"
    tasks = _tasks(tmp_path / "tasks.jsonl")
    assert main(_cmd(banks["bare"], stub, ref_out, "--tasks", str(tasks))) == 0
    ref = json.loads(capsys.readouterr().out)
    stub.delay = 0.1
    argv = [sys.executable, "-m", "mrcstats", *_cmd(banks["bare"], stub, out, "--tasks", str(tasks))]
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    for _ in range(1200):
        if out.exists() and out.read_text().count("\n") >= 8 or proc.poll() is not None:
            break
        time.sleep(0.05)
    if proc.poll() is not None:
        raise AssertionError(f"the run finished (exit {proc.returncode}) before it could be killed: "
                             f"{proc.communicate()[1].decode(errors='replace')[-2000:]}")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    before = out.read_text().splitlines()
    assert 8 <= len(before) < 24
    with open(out, "a") as fh:   # a write cut by the kill
        fh.write('{"model": "stub-model", "item": "q')
    stub.delay = 0.0
    r2 = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert r2.returncode == 0, r2.stderr
    assert "replayed" in r2.stderr
    assert json.loads(r2.stdout) == ref
    assert out.read_text().splitlines()[: len(before)] == before
    assert [r["item"] for r in load_log(out).rows] == [it["item"] for it in ref["items"]]


def test_replay_of_a_full_log_equals_the_live_run(banks, stub, tmp_path, capsys):
    """`mrcstats query` answers every item; `cat run --replay` on that log asks what the live run asks."""
    tasks, full = _tasks(tmp_path / "tasks.jsonl"), tmp_path / "full.jsonl"
    assert main(["query", str(tasks), "--model", "stub-model", "--base-url", stub.base_url, "--out", str(full),
                 "--no-progress"]) == 0
    capsys.readouterr()
    assert main(_cmd(banks["bare"], stub, tmp_path / "log.jsonl", "--tasks", str(tasks))) == 0
    live = json.loads(capsys.readouterr().out)
    assert main(["cat", "run", "--bank", str(banks["bare"]), "--replay", str(full), "--max-items", "24", "--seed",
                 "3", "--draws", "100", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert [it["item"] for it in rep["items"]] == [it["item"] for it in live["items"]]
    assert rep["predicted_accuracy"] == live["predicted_accuracy"]


def test_bank_from_another_benchmark(banks, stub, tmp_path, capsys):
    out = tmp_path / "log.jsonl"
    tasks = _tasks(tmp_path / "tasks.jsonl", prefix="other")
    assert main(_cmd(banks["bare"], stub, out, "--tasks", str(tasks))) == 2
    err = capsys.readouterr().err
    assert "another benchmark" in err and err.count("\n") == 1 and not stub.requests
    tasks = _tasks(tmp_path / "tasks2.jsonl", gold="C")
    assert main(_cmd(banks["texts"], stub, out, "--tasks", str(tasks))) == 2
    assert "key differs" in capsys.readouterr().err


def test_items_without_texts(banks, stub, tmp_path, capsys):
    assert main(_cmd(banks["bare"], stub, tmp_path / "log.jsonl")) == 2
    err = capsys.readouterr().err
    assert "no item texts" in err and "--tasks" in err and err.count("\n") == 1


def test_endpoint_that_never_answers_keeps_the_partial_log(banks, stub, tmp_path, capsys):
    out = tmp_path / "log.jsonl"
    stub.fail = lambda prompt, n: 503 if len(stub.requests) >= 5 else None
    assert main(_cmd(banks["texts"], stub, out, "--max-attempts", "2")) == 2
    err = capsys.readouterr().err
    assert "did not answer" in err and "rerun" in err and err.count("\n") == 1
    rows = load_log(out).rows
    assert [r["status"] for r in rows] == ["ok"] * 5 + ["failed"]
    stub.fail = lambda prompt, n: None
    assert main(_cmd(banks["texts"], stub, out)) == 0
    res = json.loads(capsys.readouterr().out)
    ref_out = tmp_path / "ref.jsonl"
    assert main(_cmd(banks["texts"], stub, ref_out)) == 0
    assert json.loads(capsys.readouterr().out) == res


def test_the_cat_seed_is_not_the_sampling_seed(banks, stub, tmp_path, capsys):
    """--seed drives the selection; the endpoint gets --sampling-seed (none by default), as `query --seed`."""
    out = tmp_path / "log.jsonl"
    assert main(_cmd(banks["texts"], stub, out)) == 0
    capsys.readouterr()
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert rows and all(r.get("seed") is None for r in rows)
    out2 = tmp_path / "log2.jsonl"
    assert main(_cmd(banks["texts"], stub, out2, "--sampling-seed", "11")) == 0
    capsys.readouterr()
    rows2 = [json.loads(x) for x in out2.read_text().splitlines()]
    assert rows2 and all(r["seed"] == 11 for r in rows2)
    assert [r["item"] for r in rows2] == [r["item"] for r in rows]       # the same items: the CAT seed is 3 in both
