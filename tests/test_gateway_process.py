"""`chat-agent gateway` as its own process: it serves, holds an open SSE stream, and
SIGTERM ends it with status 0 (open streams closed, not waited for)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any

import httpx

from shared.valkey_server import free_port


def test_gateway_process_serves_and_stops_on_sigterm(redis_url: str, keys: Any) -> None:
    port = free_port()
    env = {**os.environ, "VALKEY_URL": redis_url, "KEY_PREFIX": keys.prefix, "GATEWAY_PORT": str(port), "LOG_FORMAT": "console"}
    proc = subprocess.Popen([sys.executable, "-m", "services.gateway"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 15
        while True:
            assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the gateway did not start"
            time.sleep(0.05)
        job = httpx.post(f"{base}/chat/message", json={"message": "hi"}, headers={"X-Anon-Id": "u"}).json()
        with httpx.stream("GET", f"{base}/chat/job/{job['job_id']}/events", headers={"X-Anon-Id": "u"}, timeout=10) as stream:
            lines = stream.iter_lines()
            while not next(lines).startswith("event: job_submitted"):
                pass
            started = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            rest = list(lines)  # the server ends the stream
        assert proc.wait(timeout=10) == 0
        assert time.monotonic() - started < 5
        assert not any(line.startswith("event:") for line in rest)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
