"""The event log and inbox writes against a real Valkey; key names; embedded server."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import redis.asyncio as aioredis

from shared.bus import EVENT_FIELD, TASK_FIELD, Keys, add_event, add_task, connect, publish, read_events
from shared.bus.log import min_id
from shared.config import Settings
from shared.contracts import EventRecord, JobTask, decode_task
from shared.valkey_server import ensure_valkey


def test_key_names() -> None:
    k = Keys()
    assert k.events == "chat:events"
    assert k.inbox("router") == "chat:work:router"
    assert k.dead("agent") == "chat:dead:agent"
    assert k.session("s1") == "chat:session:s1"
    assert k.job("j1") == "chat:job:j1"
    assert k.user_sessions("u1") == "chat:user:u1:sessions"
    assert Keys("x:").inbox("lookup") == "x:work:lookup"


async def test_publish_read_round_trip(redis: aioredis.Redis, keys: Keys) -> None:
    events = [EventRecord("job_submitted", "j1", "s1", {"message": "hi"}), EventRecord("routing_started", "j1", "s1")]
    task = JobTask("j1", "s1", "hi", user_id="u1", history=[{"role": "user", "content": "before"}])
    ids = await publish(redis, keys, events, [("router", task)])
    assert len(ids) == 2 and ids[0] < ids[1]

    got = await read_events(redis, keys)
    assert [i for i, _ in got] == [i.decode() for i in ids]
    assert [e for _, e in got] == events
    assert await read_events(redis, keys, after=got[0][0]) == got[1:]
    assert await read_events(redis, keys, count=1) == got[:1]

    (_, fields), = await redis.xrange(keys.inbox("router"))
    assert decode_task(fields[TASK_FIELD]) == task


async def test_publish_is_one_transaction(redis: aioredis.Redis, keys: Keys) -> None:
    """A failing command inside the MULTI aborts nothing silently: the caller sees it."""
    await redis.set(keys.inbox("router"), b"not a stream")
    try:
        await publish(redis, keys, [EventRecord("x", "j", "s")], [("router", JobTask("j", "s", "m"))])
    except Exception as exc:
        assert "WRONGTYPE" in str(exc)
    else:
        raise AssertionError("expected WRONGTYPE")


async def test_minid_retention_trims_old_entries(redis: aioredis.Redis, keys: Keys) -> None:
    old_ms = int((time.time() - 3600) * 1000)
    pipe = redis.pipeline(transaction=False)
    for i in range(1000):
        pipe.xadd(keys.events, {EVENT_FIELD: b"{}"}, id=f"{old_ms}-{i}")
    await pipe.execute()
    fresh = EventRecord("job_done", "j", "s")
    new_id = await add_event(redis, keys, fresh, retention_seconds=60)

    left = await redis.xrange(keys.events)
    assert left[-1][0] == new_id
    # MINID ~ removes whole nodes only: at most one node (100 entries) of old ones stays.
    assert len(left) <= 101
    assert min_id(60, now=1000.0) == "940000-0"


async def test_inbox_is_never_trimmed(redis: aioredis.Redis, keys: Keys) -> None:
    for i in range(300):
        await add_task(redis, keys, "agent", JobTask(f"j{i}", "s", "m"))
    assert await redis.xlen(keys.inbox("agent")) == 300


async def test_embedded_valkey_has_aof_on(redis: aioredis.Redis) -> None:
    raw = await redis.config_get("append*")
    config = {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v) for k, v in raw.items()}
    assert config["appendonly"] == "yes"
    assert config["appendfsync"] == "everysec"


async def test_ensure_valkey(tmp_path: Path, redis_url: str) -> None:
    assert ensure_valkey(Settings(valkey_url=redis_url)) == (redis_url, None)

    settings = Settings(state_dir=str(tmp_path / "state"))
    url, server = ensure_valkey(settings)
    assert server is not None
    try:
        assert (tmp_path / "state" / "valkey" / "port").read_text().strip() == str(server.port)
        again_url, again = ensure_valkey(settings)  # a running one is reused, not started twice
        assert (again_url, again) == (url, None)
        client = connect(url)
        assert await client.ping()
        await client.aclose()
    finally:
        server.stop()
    # After a stop the recorded port is reused when free.
    url2, server2 = ensure_valkey(settings)
    assert server2 is not None
    try:
        assert url2 == url
    finally:
        server2.stop()


async def test_embedded_valkey_keeps_writes_across_a_crash(tmp_path: Path) -> None:
    """AOF with fsync every second: a write older than a second survives SIGKILL."""
    from shared.valkey_server import EmbeddedValkey

    server = EmbeddedValkey(tmp_path / "valkey")
    server.start()
    keys = Keys("crash:")
    try:
        client = connect(server.url)
        ids = await publish(client, keys, [EventRecord("job_done", "j", "s")], [("router", JobTask("j", "s", "m"))])
        await client.aclose()
        await asyncio.sleep(1.5)
        server.kill()
        assert not server.running
        server.start()
        client = connect(server.url)
        assert [i for i, _ in await read_events(client, keys)] == [ids[0].decode()]
        assert await client.xlen(keys.inbox("router")) == 1
        await client.aclose()
    finally:
        server.stop()
