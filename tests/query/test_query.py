"""mrcstats query against the loopback stub (tests/query/conftest.py): logging, retries,
failed rows, --retry-failed, torn lines, kill-and-restart, secrets, validation."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from mrcstats.cli import main
from mrcstats.errors import InputError
from mrcstats.query import QueryConfig, read_taskfile, run_query
from mrcstats.query.log import load_log

REPO = Path(__file__).resolve().parents[2]
CANONICAL = {"model", "item", "trial", "condition", "cluster", "correct", "response", "gold", "pred", "status",
             "attempts", "prompt", "temperature", "top_p", "seed", "max_tokens", "started_at", "finished_at"}


def rows_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def cfg(tasks: Path, out: Path, stub, **kw) -> QueryConfig:
    base = {"taskfile": str(tasks), "model": "stub-model", "base_url": stub.base_url, "out": str(out),
            "concurrency": 3, "backoff_base": 0.001, "backoff_max": 0.01, "max_attempts": 4, "timeout": 10,
            "progress": False}
    base.update(kw)
    return QueryConfig(**base)


def test_basic_log_rows(tmp_path, stub, make_tasks, monkeypatch, capsys):
    tasks, out = tmp_path / "t.jsonl", tmp_path / "log.jsonl"
    src = make_tasks(tasks, 6)
    monkeypatch.setenv("STUB_KEY", "sk-secret-123")
    rep = run_query(cfg(tasks, out, stub, trials=2, seed=7, temperature=0.4, top_p=0.0, max_tokens=50,
                        api_key_env="STUB_KEY"))
    assert (rep.sent, rep.ok, rep.failed, rep.log_rows) == (12, 12, 0, 12)
    rows = rows_of(out)
    assert Counter((r["item"], r["trial"]) for r in rows) == Counter({(s["item"], t): 1 for s in src
                                                                        for t in (0, 1)})
    for r in rows:
        assert CANONICAL <= r.keys()
        s = src[int(r["item"][1:])]
        assert r["status"] == "ok" and r["attempts"] == 1 and r["model"] == "stub-model"
        assert r["pred"] == s["prompt"][-1] and r["gold"] == s["gold"]
        assert r["correct"] is (r["pred"] == r["gold"])
        assert r["cluster"] == s["cluster"] and r["condition"] == "c1" and r["digits"] == s["digits"]
        assert r["seed"] == 7 + r["trial"] and r["temperature"] == 0.4 and r["top_p"] == 0.0
        assert r["completion_tokens"] == 7
    # the key went to the server and nowhere else
    assert {q["auth"] for q in stub.requests} == {"Bearer sk-secret-123"}
    assert {q["body"]["seed"] for q in stub.requests} == {7, 8}
    assert "sk-secret-123" not in out.read_text()
    assert "sk-secret-123" not in "".join(capsys.readouterr())
    # rerun: nothing left to send
    n = len(stub.requests)
    rep2 = run_query(cfg(tasks, out, stub, trials=2, seed=7, api_key_env="STUB_KEY"))
    assert (rep2.already, rep2.sent) == (12, 0) and len(stub.requests) == n


def test_retries_then_failed_row_then_retry_failed(tmp_path, stub, make_tasks):
    tasks, out = tmp_path / "t.jsonl", tmp_path / "log.jsonl"
    make_tasks(tasks, 8)
    always_down = "Question 5. ANSWER=B"

    def fail(prompt, n):
        if prompt == always_down:
            return 503
        if prompt.startswith("Question 1.") and n <= 2:
            return 429
        if prompt.startswith("Question 2.") and n == 1:
            return 500
        return None

    stub.fail = fail
    rep = run_query(cfg(tasks, out, stub))
    assert (rep.sent, rep.ok, rep.failed) == (8, 7, 1)
    rows = {r["item"]: r for r in rows_of(out)}
    assert rows["q1"]["attempts"] == 3 and rows["q1"]["status"] == "ok"
    assert rows["q2"]["attempts"] == 2 and rows["q2"]["status"] == "ok"
    bad = rows["q5"]
    assert bad["status"] == "failed" and bad["attempts"] == 4 and bad["correct"] is None
    assert bad["response"] is None and "503" in bad["error"]
    order_before = [r["item"] for r in rows_of(out)]
    # a plain rerun keeps the failed row (exactly once), a --retry-failed run replaces it in place
    assert run_query(cfg(tasks, out, stub)).sent == 0
    stub.fail = lambda prompt, n: None
    rep = run_query(cfg(tasks, out, stub, retry_failed=True))
    assert (rep.sent, rep.ok, rep.retried_failed, rep.log_rows) == (1, 1, 1, 8)
    after = rows_of(out)
    assert [r["item"] for r in after] == order_before
    assert {r["item"]: r for r in after}["q5"]["status"] == "ok"


def test_torn_last_line_is_cut(tmp_path, stub, make_tasks, capsys):
    tasks, out = tmp_path / "t.jsonl", tmp_path / "log.jsonl"
    make_tasks(tasks, 4)
    run_query(cfg(tasks, out, stub))
    lines = out.read_text().splitlines(keepends=True)
    out.write_text("".join(lines[:2]) + lines[2][:40])  # rows 3-4 lost, row 3 torn
    rep = run_query(cfg(tasks, out, stub))
    assert rep.torn_bytes == 40 and rep.sent == 2
    assert "torn" in capsys.readouterr().err
    assert Counter(r["item"] for r in rows_of(out)) == Counter({"q0": 1, "q1": 1, "q2": 1, "q3": 1})


def test_interrupted_retry_run_is_compacted(tmp_path, stub, make_tasks):
    tasks, out = tmp_path / "t.jsonl", tmp_path / "log.jsonl"
    make_tasks(tasks, 3)
    run_query(cfg(tasks, out, stub))
    rows = rows_of(out)
    # a --retry-failed run killed before its rewrite leaves a failed row and its later replacement
    failed = dict(rows[0], status="failed", response=None, pred=None, correct=None)
    out.write_text("".join(json.dumps(r) + "\n" for r in [failed, rows[1], rows[2], rows[0]]))
    state = load_log(out)
    assert state.superseded == 1
    rep = run_query(cfg(tasks, out, stub))
    assert rep.sent == 0 and rep.log_rows == 3
    assert [r["status"] for r in rows_of(out)] == ["ok"] * 3


def test_kill_and_restart_loses_nothing(tmp_path, stub, make_tasks):
    """SIGKILL a running `mrcstats query` midway (503s injected), rerun: every (item, trial) exactly once."""
    tasks, out = tmp_path / "t.jsonl", tmp_path / "log.jsonl"
    src = make_tasks(tasks, 40)
    stub.delay = 0.02
    stub.fail = lambda prompt, n: 503 if (n == 1 and hash(prompt) % 3 == 0) else None
    cmd = [sys.executable, "-m", "mrcstats", "query", str(tasks), "--model", "stub-model", "--base-url",
           stub.base_url, "--out", str(out), "--trials", "2", "--concurrency", "4", "--backoff", "0.01",
           "--max-attempts", "8", "--no-progress"]
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    for _ in range(600):  # at most ~30 s
        if out.exists() and out.read_text().count("\n") >= 15:
            break
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    if proc.poll() is not None:
        _, err = proc.communicate()
        raise AssertionError(f"the query finished (exit {proc.returncode}) before it could be killed: "
                             f"{err.decode(errors='replace')[-2000:]}")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    before = out.read_text().splitlines()
    assert 15 <= len(before) < 80
    with open(out, "a") as fh:  # a write cut by the kill
        fh.write('{"model": "stub-model", "item": "q3')
    r2 = subprocess.run(cmd + ["--json"], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert r2.returncode == 0, r2.stderr
    report = json.loads(r2.stdout)
    assert report["already"] == len(before) and report["sent"] == 80 - len(before)
    assert report["torn_bytes"] > 0
    rows = rows_of(out)
    assert Counter((r["item"], r["trial"]) for r in rows) == Counter(
        {(s["item"], t): 1 for s in src for t in (0, 1)})
    assert all(r["status"] == "ok" for r in rows)
    assert out.read_text().splitlines()[: len(before)] == before  # nothing written before the kill is lost
    for r in rows:
        assert r["pred"] == src[int(r["item"][1:])]["prompt"][-1]


def test_fatal_endpoint_error_is_one_line(tmp_path, stub, make_tasks, capsys):
    tasks, out = tmp_path / "t.jsonl", tmp_path / "log.jsonl"
    make_tasks(tasks, 2)
    code = main(["query", str(tasks), "--model", "m", "--base-url", stub.base_url + "/wrong", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "HTTP 404" in err[0]


def test_missing_key_env(tmp_path, stub, make_tasks, monkeypatch, capsys):
    tasks = tmp_path / "t.jsonl"
    make_tasks(tasks, 1)
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    code = main(["query", str(tasks), "--model", "m", "--base-url", stub.base_url, "--out",
                 str(tmp_path / "o.jsonl"), "--api-key-env", "NO_SUCH_KEY_VAR"])
    assert code == 2 and "NO_SUCH_KEY_VAR" in capsys.readouterr().err
    assert stub.requests == []


@pytest.mark.parametrize("text, msg", [
    ('{"prompt": "x"}\n', "missing 'item'"),
    ('{"item": 1}\n', "needs a non-empty 'prompt'"),
    ('{"item": 1, "prompt": "x"}\n{"item": 1, "prompt": "y"}\n', "already on line 1"),
    ('{"item": 1, "prompt": "x"}\nnot json\n', "line 2: not JSON"),
    ('{"item": 1, "prompt": "x", "status": "ok"}\n', "written by the query log"),
    ('{"item": 1, "messages": [{"role": "user"}]}\n', "'messages' must be"),
    ('{"item": 1, "prompt": "x", "gold": "abc", "scorer": "numeric"}\n', "is not a number"),
    ('{"item": 1, "prompt": "x", "scorer": "fuzzy"}\n', "scorer 'fuzzy' unknown"),
    ('', "no tasks"),
])
def test_taskfile_validation(tmp_path, text, msg):
    p = tmp_path / "t.jsonl"
    p.write_text(text)
    with pytest.raises(InputError, match=msg):
        read_taskfile(p)


def test_messages_and_condition_keys(tmp_path, stub):
    tasks, out = tmp_path / "t.jsonl", tmp_path / "log.jsonl"
    tasks.write_text(
        json.dumps({"item": "a", "condition": "x", "messages": [
            {"role": "system", "content": "be brief"}, {"role": "user", "content": "ANSWER=7"}], "gold": 7.04})
        + "\n" + json.dumps({"item": "a", "condition": "y", "prompt": "ANSWER=8", "gold": "8"}) + "\n")
    run_query(cfg(tasks, out, stub))
    rows = sorted(rows_of(out), key=lambda r: r["condition"])
    assert [(r["condition"], r["pred"], r["correct"]) for r in rows] == [("x", "7", True), ("y", "8", True)]
    assert stub.requests[0]["body"]["messages"][0]["role"] in {"system", "user"}


def test_cli_import_is_light():
    """`mrcstats query` imports neither pandas nor httpx before a run starts (fast start)."""
    code = ("import sys; from mrcstats.cli import build_parser; build_parser(); "
            "print(sorted(m for m in ('pandas', 'httpx', 'scipy', 'matplotlib') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False,
                       env=dict(os.environ, PYTHONPATH=str(REPO / "src")))
    assert r.returncode == 0 and r.stdout.strip() == "[]"


def test_log_is_read_by_ingest_as_is(tmp_path, stub, make_tasks):
    from mrcstats.io import read_log

    tasks, out = tmp_path / "t.jsonl", tmp_path / "log.jsonl"
    make_tasks(tasks, 5)
    stub.fail = lambda prompt, n: 503 if prompt.startswith("Question 4.") else None
    run_query(cfg(tasks, out, stub, trials=2))
    log = read_log(out)
    assert len(log) == 10 and log.attrs["skipped"] == {}
    assert str(log["correct"].dtype) == "boolean" and log["trial"].tolist().count(1) == 5
    assert log.loc[log["item"] == "q4", "correct"].isna().all()
    assert set(log["status"]) == {"ok", "failed"}


def test_sigint_stops_cleanly_and_rerun_completes(tmp_path, stub, make_tasks):
    tasks, out = tmp_path / "t.jsonl", tmp_path / "log.jsonl"
    src = make_tasks(tasks, 30)
    stub.delay = 0.03
    cmd = [sys.executable, "-m", "mrcstats", "query", str(tasks), "--model", "stub-model", "--base-url",
           stub.base_url, "--out", str(out), "--concurrency", "2", "--no-progress"]
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(600):
        if (out.exists() and out.read_text().count("\n") >= 5) or proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "rerun the same command" in err
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    assert Counter(x["item"] for x in rows_of(out)) == Counter({s["item"]: 1 for s in src})


def test_second_concurrent_run_is_refused(tmp_path, stub, make_tasks):
    from mrcstats.query.log import log_lock

    tasks, out = tmp_path / "t.jsonl", tmp_path / "log.jsonl"
    make_tasks(tasks, 2)
    with log_lock(out), pytest.raises(InputError, match="another mrcstats query is writing"):
        run_query(cfg(tasks, out, stub))
    assert stub.requests == []
    assert run_query(cfg(tasks, out, stub)).sent == 2  # the lock is gone with its holder


@pytest.mark.parametrize("url", ["ftp://x/v1", "http://127.0.0.1:abc/v1", "http:///v1", "http://a b/v1"])
def test_bad_base_url_is_one_line_and_writes_nothing(tmp_path, make_tasks, capsys, url):
    tasks, out = tmp_path / "t.jsonl", tmp_path / "log.jsonl"
    make_tasks(tasks, 1)
    assert main(["query", str(tasks), "--model", "m", "--base-url", url, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--base-url" in err[0]
    assert list(tmp_path.iterdir()) == [tasks]


def test_generated_elagent_taskfile_end_to_end(tmp_path, stub):
    from mrcstats.io import read_log
    from mrcstats.tasks.elagent.generate import task1, task5, write_taskfile

    tasks, out = tmp_path / "t.jsonl", tmp_path / "log.jsonl"
    rows = task1(3, digits=1, seed=2) + task5(3, variant="neg", seed=2)
    write_taskfile(rows, tasks)
    rep = run_query(cfg(tasks, out, stub))
    assert rep.sent == len(rows) == 12
    log = read_log(out)
    assert len(log) == 12 and set(log["condition"]) == {"none", "one", "two", "neg"}
    assert log["correct"].isna().all()  # the stub answers "[?]": no valid prediction
    assert log.attrs["skipped"] == {}
