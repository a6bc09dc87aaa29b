"""Time `mrcstats query` against a naive sequential loop on the same local stub, same run.

The stub (stdlib ``ThreadingHTTPServer`` on 127.0.0.1) answers every chat-completions request
after ``--latency`` seconds, like a remote model. Both sides send the same ``--n`` prompts and
write one JSON line per answer:

* mrcstats: ``mrcstats query TASKFILE ... --concurrency C`` as a subprocess (start-up, log
  repair, fsync per line and retries machinery included); the time of its first request after
  process start is printed too ("starts sending within a second or two");
* anchor: a plain sequential ``httpx.Client.post`` loop writing the lines, in-process (no start-up).

Prints both wall times and the ratio anchor / mrcstats (> 1: mrcstats faster).

Usage: python benchmarks/bench_query.py [--n 200] [--latency 0.05] [--concurrency 8]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _stub(latency: float, first: list[float]) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_POST(self):
            if not first:
                first.append(time.monotonic())
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            time.sleep(latency)
            body = json.dumps({"choices": [{"message": {"content": "The answer is [A]."},
                                            "finish_reason": "stop"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--concurrency", type=int, default=8)
    args = ap.parse_args()

    import httpx

    with tempfile.TemporaryDirectory() as tmp:
        tasks = Path(tmp) / "tasks.jsonl"
        tasks.write_text("".join(json.dumps({"item": i, "prompt": f"Question {i}", "gold": "A"}) + "\n"
                                 for i in range(args.n)))
        first: list[float] = []
        srv = _stub(args.latency, first)
        url = f"http://127.0.0.1:{srv.server_address[1]}/v1"

        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "mrcstats", "query", str(tasks), "--model", "stub", "--base-url",
                            url, "--out", str(Path(tmp) / "log.jsonl"), "--concurrency", str(args.concurrency),
                            "--no-progress"], capture_output=True, text=True, check=False,
                           env=dict(os.environ, PYTHONPATH=str(REPO / "src")))
        t_mrc = time.monotonic() - t0
        if r.returncode != 0:
            sys.exit(f"mrcstats query failed: {r.stderr}")
        t_first = first[0] - t0

        t0 = time.monotonic()
        with httpx.Client(timeout=60) as client, open(Path(tmp) / "naive.jsonl", "w") as fh:
            for line in tasks.read_text().splitlines():
                task = json.loads(line)
                resp = client.post(url + "/chat/completions", json={
                    "model": "stub", "messages": [{"role": "user", "content": task["prompt"]}]})
                fh.write(json.dumps({"item": task["item"], "response": resp.json()["choices"][0]["message"]
                                     ["content"]}) + "\n")
        t_naive = time.monotonic() - t0
        srv.shutdown()

    print(f"n={args.n} latency={args.latency}s concurrency={args.concurrency}")
    print(f"mrcstats query: {t_mrc:.2f} s (first request {t_first:.2f} s after start)")
    print(f"naive loop:     {t_naive:.2f} s")
    print(f"ratio naive / mrcstats: {t_naive / t_mrc:.2f}")


if __name__ == "__main__":
    main()
