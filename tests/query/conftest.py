"""A small OpenAI-compatible chat-completions stub on 127.0.0.1 for the query tests.

Runs ``http.server.ThreadingHTTPServer`` in a daemon thread of the test process.
The answer to a prompt is ``[X]`` where ``ANSWER=X`` appears in the prompt
(else ``[?]``). Failures are injected by ``fail(prompt, n)`` -> HTTP status or
None, where ``n`` counts the requests seen for that prompt (1 = first).
"""
from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


class Stub:
    def __init__(self) -> None:
        self.fail = lambda prompt, n: None
        self.delay = 0.0
        self.echo_auth = False  # error bodies repeat the Authorization header (a careless endpoint)
        self.requests: list[dict] = []
        self.counts: dict[str, int] = {}
        self.lock = threading.Lock()
        self.server: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def ok_count(self, prompt: str) -> int:
        return sum(1 for r in self.requests if r["prompt"] == prompt and r["status"] == 200)


def _handler(stub: Stub):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):  # keep test output quiet
            pass

        def _send(self, status: int, body: dict, headers: dict | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):
            length = int(self.headers.get("Content-Length", 0))
            body = json.loads(self.rfile.read(length) or b"{}")
            if self.path != "/v1/chat/completions":
                self._send(404, {"error": {"message": "no such route"}})
                return
            prompt = body["messages"][-1]["content"]
            with stub.lock:
                n = stub.counts[prompt] = stub.counts.get(prompt, 0) + 1
            status = stub.fail(prompt, n)
            if stub.delay:
                time.sleep(stub.delay)
            rec = {"prompt": prompt, "n": n, "body": body, "auth": self.headers.get("Authorization"),
                   "status": status or 200}
            with stub.lock:
                stub.requests.append(rec)
            if status:
                echo = f"; you sent Authorization: {self.headers.get('Authorization')}" if stub.echo_auth else ""
                self._send(status, {"error": {"message": f"injected {status}{echo}"}},
                           {"Retry-After": "0"} if status == 429 else None)
                return
            m = re.search(r"ANSWER=(\S+)", prompt)
            content = f"Let me think. The answer is [{m.group(1) if m else '?'}]."
            self._send(200, {"id": "x", "object": "chat.completion", "model": body.get("model"),
                             "choices": [{"index": 0, "finish_reason": "stop",
                                          "message": {"role": "assistant", "content": content}}],
                             "usage": {"prompt_tokens": len(prompt.split()), "completion_tokens": 7,
                                       "total_tokens": len(prompt.split()) + 7}})

    return Handler


@pytest.fixture()
def stub():
    s = Stub()
    s.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(s))
    s.server.daemon_threads = True
    s.server.handle_error = lambda request, address: None  # clients killed mid-request are expected
    t = threading.Thread(target=s.server.serve_forever, daemon=True)
    t.start()
    yield s
    s.server.shutdown()
    s.server.server_close()


def write_tasks(path, n: int, gold_every: int = 1) -> list[dict]:
    rows = []
    for i in range(n):
        letter = "ABCD"[i % 4]
        rows.append({"item": f"q{i}", "prompt": f"Question {i}. ANSWER={letter}", "gold": "ABCD"[(i // 2) % 4],
                     "cluster": f"p{i // 3}", "condition": "c1", "digits": i % 5})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


@pytest.fixture()
def make_tasks():
    """``make_tasks(path, n)`` writes a task file of ``n`` items and returns its rows."""
    return write_tasks
