"""The worker runtime in-process against a real Valkey: dead letters, leases, backpressure."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import msgspec
import pytest
import redis.asyncio as aioredis

from shared.bus import TASK_FIELD, Delivery, Keys, Outcome, Worker, add_task
from shared.contracts import EventRecord, JobTask
from tests.bus_helpers import count, wait_events


def done(d: Delivery, **data: Any) -> Outcome:
    return Outcome(events=[EventRecord("job_done", d.task.job_id, d.task.session_id, data)])


@pytest.fixture
async def run_worker(redis_url: str) -> AsyncIterator[Callable[..., Worker]]:
    """Start Workers as tasks on the test's loop; all are stopped at teardown."""
    running: list[tuple[Worker, asyncio.Task[None]]] = []

    def start(keys: Keys, handler: Any, **options: Any) -> Worker:
        options.setdefault("visibility_timeout", 1.0)
        options.setdefault("grace_period", 2.0)
        worker = Worker(redis_url, keys, options.pop("service", "svc"), handler, **options)
        running.append((worker, asyncio.create_task(worker.run())))
        return worker

    yield start
    for worker, _ in running:
        worker.stop()
    for _, task in running:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 10)


async def test_handler_outcome_is_committed(redis: aioredis.Redis, keys: Keys, run_worker: Any) -> None:
    async def handler(d: Delivery) -> Outcome:
        step_id = await d.emit(EventRecord("agent_step", d.task.job_id, d.task.session_id))
        assert "-" in step_id
        next_task = JobTask(d.task.job_id, d.task.session_id, d.task.message)
        return Outcome(events=[EventRecord("routing_done", d.task.job_id, d.task.session_id)], tasks=[("next", next_task)])

    for i in range(5):
        await add_task(redis, keys, "svc", JobTask(f"j{i}", "s", "hello"))
    worker = run_worker(keys, handler)
    events = await wait_events(redis, keys, lambda ev: count(ev, "routing_done") == 5)
    assert count(events, "agent_step") == 5
    for i in range(5):  # each job: its progress event before its outcome
        types = [e.type for e in events if e.job_id == f"j{i}"]
        assert types == ["agent_step", "routing_done"]
    assert await redis.xlen(keys.inbox("next")) == 5
    await wait_until(lambda: worker.processed == 5)
    assert (await redis.xpending(keys.inbox("svc"), "svc"))["pending"] == 0


async def test_own_pending_entries_are_read_first(redis: aioredis.Redis, keys: Keys, run_worker: Any) -> None:
    """A restarted consumer (same name) resumes what it had read but not acknowledged."""
    await redis.xgroup_create(keys.inbox("svc"), "svc", id="0", mkstream=True)
    for i in range(3):
        await add_task(redis, keys, "svc", JobTask(f"j{i}", "s", "m"))
    await redis.xreadgroup("svc", "c1", {keys.inbox("svc"): ">"}, count=2)  # "crashed" holding 2

    counts: dict[str, int] = {}

    async def handler(d: Delivery) -> Outcome:
        counts[d.task.job_id] = d.delivery_count
        return done(d)

    run_worker(keys, handler, consumer="c1", visibility_timeout=60.0)
    await wait_events(redis, keys, lambda ev: count(ev, "job_done") == 3, timeout=5)
    assert counts == {"j0": 2, "j1": 2, "j2": 1}


async def test_poison_entry_is_dead_lettered(redis: aioredis.Redis, keys: Keys, run_worker: Any) -> None:
    calls: dict[str, int] = {}

    async def handler(d: Delivery) -> Outcome:
        calls[d.task.job_id] = calls.get(d.task.job_id, 0) + 1
        if d.task.job_id == "poison":
            raise RuntimeError("cannot handle this one")
        return done(d)

    await add_task(redis, keys, "svc", JobTask("poison", "s-poison", "boom"))
    for i in range(5):
        await add_task(redis, keys, "svc", JobTask(f"ok{i}", "s", "fine"))
    run_worker(keys, handler, max_deliveries=3, visibility_timeout=0.3)

    events = await wait_events(redis, keys, lambda ev: count(ev, "job_error") == 1, timeout=10)
    assert count(events, "job_done") == 5  # the others kept flowing
    error = next(e for e in events if e.type == "job_error")
    assert (error.job_id, error.session_id) == ("poison", "s-poison")
    assert error.data["reason"] == "max_deliveries"
    assert "cannot handle this one" in error.data["error"]
    assert calls["poison"] == 3

    (_, dead), = await redis.xrange(keys.dead("svc"))
    assert dead[b"reason"] == b"max_deliveries" and dead[b"count"] == b"4"
    assert msgspec.json.decode(dead[TASK_FIELD])["job_id"] == "poison"
    assert (await redis.xpending(keys.inbox("svc"), "svc"))["pending"] == 0


async def test_undecodable_entry_goes_straight_to_dead_letter(
    redis: aioredis.Redis, keys: Keys, run_worker: Any
) -> None:
    calls: list[str] = []

    async def handler(d: Delivery) -> Outcome:
        calls.append(d.task.job_id)
        return done(d)

    await redis.xadd(keys.inbox("svc"), {TASK_FIELD: b'{"job_id": "bad", "session_id": "s"}'})  # no message
    await redis.xadd(keys.inbox("svc"), {b"other": b"field"})
    await add_task(redis, keys, "svc", JobTask("good", "s", "m"))
    run_worker(keys, handler)

    events = await wait_events(redis, keys, lambda ev: count(ev, "job_done") == 1 and count(ev, "job_error") == 1)
    error = next(e for e in events if e.type == "job_error")
    assert error.job_id == "bad" and error.data["reason"] == "undecodable"
    await wait_until_async(lambda: redis.xlen(keys.dead("svc")), 2)
    assert calls == ["good"]


async def test_lease_renewal_keeps_a_long_handler(redis: aioredis.Redis, keys: Keys, run_worker: Any) -> None:
    """A handler running 5x the visibility timeout is not taken over by another consumer."""
    calls: list[str] = []
    started = asyncio.Event()

    async def handler(d: Delivery) -> Outcome:
        calls.append(d.task.job_id)
        started.set()
        await asyncio.sleep(2.0)
        return done(d)

    await add_task(redis, keys, "svc", JobTask("long", "s", "m"))
    first = run_worker(keys, handler, consumer="first", visibility_timeout=0.4)
    await asyncio.wait_for(started.wait(), 5)
    second = run_worker(keys, handler, consumer="second", visibility_timeout=0.4)

    events = await wait_events(redis, keys, lambda ev: count(ev, "job_done") == 1, timeout=10)
    await asyncio.sleep(0.5)
    assert calls == ["long"]
    assert count(await wait_events(redis, keys, lambda ev: True), "job_done") == 1
    assert (first.processed, second.processed) == (1, 0)
    assert len(events) == 1


async def test_backpressure_limits_handlers_and_reads(redis: aioredis.Redis, keys: Keys, run_worker: Any) -> None:
    """Never more than `concurrency` handlers at once, nor entries delivered but not started."""
    running = 0
    peak = 0
    peak_pending = 0

    async def handler(d: Delivery) -> Outcome:
        nonlocal running, peak, peak_pending
        running += 1
        peak = max(peak, running)
        info = await redis.xpending(keys.inbox("svc"), "svc")
        peak_pending = max(peak_pending, info["pending"])
        await asyncio.sleep(0.03)
        running -= 1
        return done(d)

    for i in range(30):
        await add_task(redis, keys, "svc", JobTask(f"j{i}", "s", "m"))
    run_worker(keys, handler, concurrency=3)
    await wait_events(redis, keys, lambda ev: count(ev, "job_done") == 30)
    assert peak == 3
    assert peak_pending <= 3


async def wait_until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    for _ in range(int(timeout / 0.02)):
        if predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not met in time")


async def wait_until_async(fetch: Callable[[], Any], expected: Any, timeout: float = 5.0) -> None:
    for _ in range(int(timeout / 0.02)):
        if await fetch() == expected:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"never reached {expected!r}")


async def test_client_factory_and_recreated_inbox(redis_url: str, redis: aioredis.Redis, keys: Keys) -> None:
    """A Worker built from a client factory; it recreates its group if the inbox is deleted."""
    from shared.bus import connect

    async def handler(d: Delivery) -> Outcome:
        return done(d)

    worker = Worker(lambda: connect(redis_url), keys, "svc", handler, visibility_timeout=0.4)
    runner = asyncio.create_task(worker.run())
    try:
        await add_task(redis, keys, "svc", JobTask("a", "s", "m"))
        await wait_events(redis, keys, lambda ev: count(ev, "job_done", "a") == 1, timeout=5)
        await redis.delete(keys.inbox("svc"))
        await asyncio.sleep(0.3)
        await add_task(redis, keys, "svc", JobTask("b", "s", "m"))
        await wait_events(redis, keys, lambda ev: count(ev, "job_done", "b") == 1, timeout=5)
    finally:
        worker.stop()
        await asyncio.wait_for(runner, 5)


async def test_idle_consumers_without_pending_are_forgotten(
    redis: aioredis.Redis, keys: Keys, run_worker: Any
) -> None:
    stream = keys.inbox("svc")
    await redis.xgroup_create(stream, "svc", id="0", mkstream=True)
    await add_task(redis, keys, "svc", JobTask("held", "s", "m"))
    await redis.xreadgroup("svc", "gone-busy", {stream: ">"})  # holds one entry
    await redis.xgroup_createconsumer(stream, "svc", "gone-idle")
    await asyncio.sleep(0.2)

    async def handler(d: Delivery) -> Outcome:
        return done(d)

    run_worker(keys, handler, consumer="new", visibility_timeout=60.0, forget_consumers_after=0.1)
    await wait_until_async(lambda: _consumer_names(redis, stream), {"gone-busy", "new"})


async def _consumer_names(redis: aioredis.Redis, stream: str) -> set[str]:
    return {c["name"].decode() for c in await redis.xinfo_consumers(stream, "svc")}


async def test_a_job_cancelled_before_pickup_ends_without_its_handler(redis: aioredis.Redis, keys: Keys, run_worker: Any) -> None:
    from shared.bus.cancel import request_cancel

    called: list[str] = []

    async def handler(d: Delivery) -> Outcome:
        called.append(d.task.job_id)
        return done(d)

    await request_cancel(redis, keys, "job-c", "s-c", "changed my mind")
    await add_task(redis, keys, "svc", JobTask("job-c", "s-c", "hi"))
    await add_task(redis, keys, "svc", JobTask("job-d", "s-d", "hi"))
    run_worker(keys, handler)
    events = await wait_events(redis, keys, lambda evs: count(evs, "job_cancelled") == 1 and count(evs, "job_done") == 1)
    cancelled = next(e for e in events if e.type == "job_cancelled")
    assert cancelled.job_id == "job-c" and cancelled.data == {"reason": "changed my mind", "stage": "svc"}
    assert called == ["job-d"]
