"""Worker processes killed or stopped mid-handler: nothing is lost, nothing shows twice."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from shared.bus import Keys, add_task
from shared.contracts import JobTask
from tests.bus_helpers import count, spawn_worker, wait_events, wait_exit

Spawn = Callable[..., subprocess.Popen[str]]


@pytest.fixture
def spawn(redis_url: str, keys: Keys, tmp_path: Path) -> Iterator[Spawn]:
    """Start slow_worker processes for this test's keys; any left running are killed."""
    procs: list[subprocess.Popen[str]] = []

    def start(name: str, *args: str) -> subprocess.Popen[str]:
        proc = spawn_worker(redis_url, keys, tmp_path / f"{name}.log", "--consumer", name, *args)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def log_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]


async def test_sigkill_mid_handler_is_taken_over(redis: aioredis.Redis, keys: Keys, spawn: Spawn) -> None:
    await add_task(redis, keys, "slow", JobTask("job-1", "sess-1", "hello"))
    victim = spawn("victim", "--delay", "60", "--visibility", "1")
    await wait_events(redis, keys, lambda ev: count(ev, "handler_started", "job-1") == 1)

    os.kill(victim.pid, signal.SIGKILL)
    assert await wait_exit(victim) == -signal.SIGKILL
    spawn("rescuer", "--delay", "0.1", "--visibility", "1")

    events = await wait_events(redis, keys, lambda ev: count(ev, "job_done", "job-1") == 1)
    starts = [e.data for e in events if e.type == "handler_started"]
    assert [(s["consumer"], s["delivery_count"]) for s in starts] == [("victim", 1), ("rescuer", 2)]
    done = next(e for e in events if e.type == "job_done")
    assert done.data["consumer"] == "rescuer"

    # Past several visibility timeouts, the result still shows exactly once.
    await asyncio.sleep(2.5)
    events = await wait_events(redis, keys, lambda ev: True)
    assert count(events, "job_done", "job-1") == 1
    assert (await redis.xpending(keys.inbox("slow"), "slow"))["pending"] == 0


async def test_sigterm_finishes_in_flight_work(
    redis: aioredis.Redis, keys: Keys, spawn: Spawn, tmp_path: Path
) -> None:
    for i in range(6):
        await add_task(redis, keys, "slow", JobTask(f"job-{i}", f"sess-{i}", "hello"))
    worker = spawn("w1", "--delay", "1.0", "--concurrency", "4", "--grace", "10")
    await wait_events(redis, keys, lambda ev: count(ev, "handler_started") == 4)

    worker.send_signal(signal.SIGTERM)
    assert await wait_exit(worker) == 0
    events = await wait_events(redis, keys, lambda ev: True)
    finished = {e.job_id for e in events if e.type == "job_done"}
    started = {e.job_id for e in events if e.type == "handler_started"}
    assert finished == started and len(finished) == 4  # in flight: finished, none read after
    assert (await redis.xpending(keys.inbox("slow"), "slow"))["pending"] == 0

    # Every line logged while handling carries the job and session ids.
    handling = [line for line in log_lines(tmp_path / "w1.log") if line.get("event") == "handling"]
    assert len(handling) == 4
    assert all(line["job_id"].startswith("job-") and line["session_id"].startswith("sess-") for line in handling)

    spawn("w2", "--delay", "0", "--concurrency", "4")
    events = await wait_events(redis, keys, lambda ev: count(ev, "job_done") == 6)
    assert sorted(e.job_id for e in events if e.type == "job_done") == [f"job-{i}" for i in range(6)]


async def test_sigterm_past_grace_hands_work_back(redis: aioredis.Redis, keys: Keys, spawn: Spawn) -> None:
    for i in range(2):
        await add_task(redis, keys, "slow", JobTask(f"job-{i}", "sess", "hello"))
    # A visibility timeout far longer than the test: only a hand-back lets others take over now.
    worker = spawn("w1", "--delay", "60", "--grace", "0.3", "--visibility", "600")
    await wait_events(redis, keys, lambda ev: count(ev, "handler_started") == 2)

    worker.send_signal(signal.SIGTERM)
    assert await wait_exit(worker) == 0
    pending = await redis.xpending_range(keys.inbox("slow"), "slow", "-", "+", 10)
    assert len(pending) == 2 and all(p["time_since_delivered"] >= 600_000 for p in pending)

    spawn("w2", "--delay", "0", "--visibility", "600")
    events = await wait_events(redis, keys, lambda ev: count(ev, "job_done") == 2)
    assert {e.job_id for e in events if e.type == "job_done"} == {"job-0", "job-1"}
    assert all(e.data["consumer"] == "w2" for e in events if e.type == "job_done")
