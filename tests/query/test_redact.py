"""Secrets never reach the query log or stderr: the key echoed by a server, credentials in --base-url."""
from __future__ import annotations

import json

import pytest

from mrcstats.cli import main
from mrcstats.query.redact import redact, url_secrets

KEY = "sk-test-0123456789abcdefXYZ"


@pytest.mark.parametrize("text", [
    f"Authorization: Bearer {KEY}", f'{{"authorization": "Bearer {KEY}"}}', f"bad key {KEY}!",
    "https://user:hunter2hunter2@api.example.com/v1", "https://api.example.com/v1?api_key=abcdef123456",
    "x-api-key: abcdef123456", "token=abcdef123456&b=1", "hf_abcdefghijklmnop", "ghp_" + "a" * 30,
])
def test_redact_patterns(text):
    out = redact(text, [KEY])
    for secret in (KEY, "hunter2hunter2", "abcdef123456", "hf_abcdefghijklmnop", "a" * 30):
        assert secret not in out
    assert "***" in out


def test_redact_keeps_plain_text():
    assert redact("HTTP 500: the model is overloaded, try again", [KEY]) == \
        "HTTP 500: the model is overloaded, try again"
    assert url_secrets("https://bob:hunter22@h/v1?key=abcdefg&x=1") == ["hunter22", "abcdefg"]


def test_server_echoing_the_key_is_redacted(tmp_path, stub, make_tasks, monkeypatch, capsys):
    monkeypatch.setenv("MRC_TEST_KEY", KEY)
    stub.echo_auth = True
    stub.fail = lambda prompt, n: 400  # a non-retried client error: the row is written as failed
    tasks, out = tmp_path / "t.jsonl", tmp_path / "log.jsonl"
    make_tasks(tasks, 2)
    code = main(["query", str(tasks), "--model", "m", "--base-url", stub.base_url, "--out", str(out),
                 "--api-key-env", "MRC_TEST_KEY", "--max-attempts", "1", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 0 and stub.requests and stub.requests[0]["auth"] == f"Bearer {KEY}"
    text = out.read_text()
    rows = [json.loads(line) for line in text.splitlines()]
    assert all(r["status"] == "failed" and "***" in r["error"] for r in rows)
    assert KEY not in text and KEY not in err
    # 401 stops the run with one line: the echoed key is redacted there too
    stub.fail = lambda prompt, n: 401
    code = main(["query", str(tasks), "--model", "m", "--base-url", stub.base_url, "--out",
                 str(tmp_path / "b.jsonl"), "--api-key-env", "MRC_TEST_KEY", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "HTTP 401" in err and KEY not in err


def test_credentials_in_base_url_are_not_printed(tmp_path, make_tasks, capsys):
    tasks = tmp_path / "t.jsonl"
    make_tasks(tasks, 1)
    url = "http://alice:s3cretpassword@127.0.0.1:9/v1?api_key=querysecret123"
    code = main(["query", str(tasks), "--model", "m", "--base-url", url, "--out", str(tmp_path / "o.jsonl"),
                 "--max-attempts", "1", "--no-progress"])
    err = capsys.readouterr().err
    log = (tmp_path / "o.jsonl").read_text() if (tmp_path / "o.jsonl").exists() else ""
    assert code in (0, 2)
    for secret in ("s3cretpassword", "querysecret123"):
        assert secret not in err and secret not in log
    for bad in ("ftp://alice:s3cretpassword@x/v1", "http://alice:s3cretpassword@127.0.0.1:abc/v1"):
        assert main(["query", str(tasks), "--model", "m", "--base-url", bad, "--out",
                     str(tmp_path / "p.jsonl")]) == 2
        assert "s3cretpassword" not in capsys.readouterr().err


def test_url_credentials_never_replace_the_key(tmp_path, make_tasks, capsys, stub, monkeypatch):
    """A user:password@ in --base-url would be sent by httpx as Basic auth in place of the key: it is stripped
    with one warning on stderr, and the key goes as the bearer token of every request."""
    tasks = tmp_path / "t.jsonl"
    make_tasks(tasks, 2)
    monkeypatch.setenv("STUB_KEY", KEY)
    url = stub.base_url.replace("http://", "http://alice:s3cretpassword@")
    code = main(["query", str(tasks), "--model", "m", "--base-url", url, "--api-key-env", "STUB_KEY",
                 "--out", str(tmp_path / "o.jsonl"), "--no-progress", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert stub.requests and {q["auth"] for q in stub.requests} == {f"Bearer {KEY}"}
    warn = [ln for ln in err.splitlines() if "warning" in ln]
    assert len(warn) == 1 and "user:password@" in warn[0] and "s3cretpassword" not in err
    json.loads(out)                                   # --json: stdout is one object, the warning on stderr
    assert "s3cretpassword" not in (tmp_path / "o.jsonl").read_text()
