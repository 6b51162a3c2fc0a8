"""Helpers for the bus tests: wait on the event log, run worker processes."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import redis.asyncio as aioredis

from shared.bus import Keys, read_events
from shared.contracts import EventRecord

ROOT = Path(__file__).resolve().parent.parent


async def all_events(client: aioredis.Redis, keys: Keys) -> list[EventRecord]:
    out: list[EventRecord] = []
    after = "0-0"
    while rows := await read_events(client, keys, after=after):
        out.extend(e for _, e in rows)
        after = rows[-1][0]
    return out


async def wait_events(
    client: aioredis.Redis,
    keys: Keys,
    done: Callable[[list[EventRecord]], bool],
    timeout: float = 15.0,
) -> list[EventRecord]:
    """Poll the event log until `done(events)`; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        events = await all_events(client, keys)
        if done(events):
            return events
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out; events so far: {[(e.type, e.job_id) for e in events]}")
        await asyncio.sleep(0.05)


def count(events: list[EventRecord], type: str, job_id: str | None = None) -> int:
    return sum(1 for e in events if e.type == type and (job_id is None or e.job_id == job_id))


def spawn_worker(url: str, keys: Keys, log_path: Path, *args: str) -> subprocess.Popen[str]:
    """Start tests/workers/slow_worker.py as its own process, its log lines to `log_path`."""
    with open(log_path, "a") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.workers.slow_worker", url, keys.prefix, *args],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )


async def wait_exit(proc: subprocess.Popen[str], timeout: float = 20.0) -> int:
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("worker process did not exit")
        await asyncio.sleep(0.05)
    return proc.returncode
