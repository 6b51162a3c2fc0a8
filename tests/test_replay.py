"""`chat-agent replay`: rebuilt views equal the live ones; scopes; --print changes nothing."""

from __future__ import annotations

import argparse
import io
import json
from typing import Any

import pytest

from shared.bus.keys import Keys
from shared.config import ConfigError
from shared.contracts import EventRecord
from services.gateway.replay import parse_since, rebuild, replay
from tests.fixtures.gateway import ALICE, BOB, GatewayUnderTest, job_story


async def snapshot(redis: Any, keys: Keys) -> dict[str, Any]:
    """Every view under the prefix: session and job JSON, user indexes with scores."""
    out: dict[str, Any] = {}
    async for key in redis.scan_iter(match=f"{keys.prefix}*", count=1000):
        name = key.decode()
        if name.startswith(f"{keys.prefix}session:") or name.startswith(f"{keys.prefix}job:"):
            out[name] = json.loads(await redis.get(key))
        elif name.endswith(":sessions"):
            out[name] = await redis.zrange(key, 0, -1, withscores=True)
    return out


async def live_history(gw: GatewayUnderTest) -> dict[str, str]:
    """Three sessions, two users, answers, an error, a rename and a delete."""
    a1 = (await gw.post("first", ALICE)).json()
    await gw.emit(*job_story(a1["job_id"], a1["session_id"], answer="one"))
    a2 = (await gw.post("second", ALICE, a1["session_id"])).json()
    await gw.emit(EventRecord("routing_started", a2["job_id"], a1["session_id"]))
    await gw.emit(EventRecord("job_error", a2["job_id"], a1["session_id"], {"error": "boom"}))
    b1 = (await gw.post("bob's", BOB)).json()
    await gw.emit(*job_story(b1["job_id"], b1["session_id"], route="lookup", confidence=0.8))
    await gw.client.patch(f"/chat/session/{b1['session_id']}", json={"name": "mine"}, headers=BOB)
    gone = (await gw.post("to delete", ALICE)).json()
    await gw.client.delete(f"/chat/session/{gone['session_id']}", headers=ALICE)
    running = (await gw.post("still running")).json()
    await gw.emit(EventRecord("routing_started", running["job_id"], running["session_id"]))
    await gw.projected()
    return {"alice": a1["session_id"], "alice_job": a2["job_id"], "bob": b1["session_id"], "gone": gone["session_id"]}


def _args(**kw: Any) -> argparse.Namespace:
    return argparse.Namespace(**{"job": None, "session": None, "since": None, "print_only": False, **kw})


async def test_full_rebuild_equals_the_live_views(gateway: GatewayUnderTest) -> None:
    await live_history(gateway)
    live = await snapshot(gateway.redis, gateway.keys)
    assert len([k for k in live if ":job:" in k]) == 5 and len([k for k in live if ":session:" in k]) == 4
    gateway.app.state.gateway.extra["projector"].stop()  # replay runs while no one projects
    for key in list(live)[:3]:
        await gateway.redis.set(key, b'{"garbage": true}') if ":sessions" not in key else await gateway.redis.delete(key)
    err = io.StringIO()
    assert await replay(gateway.settings, _args(), err=err) == 0
    assert "applied" in err.getvalue()
    assert await snapshot(gateway.redis, gateway.keys) == live


async def test_scoped_rebuilds(gateway: GatewayUnderTest) -> None:
    ids = await live_history(gateway)
    live = await snapshot(gateway.redis, gateway.keys)
    redis, keys = gateway.redis, gateway.keys

    await redis.delete(keys.session(ids["alice"]), keys.job(ids["alice_job"]))
    await redis.zrem(keys.user_sessions("alice"), ids["alice"])
    stats = await rebuild(redis, keys, gateway.settings.session_ttl_seconds, session=ids["alice"])
    assert stats.events == 10 and await snapshot(redis, keys) == live

    await redis.set(keys.job(ids["alice_job"]), b'{"record": "garbage"}')
    await rebuild(redis, keys, gateway.settings.session_ttl_seconds, job=ids["alice_job"])
    assert await snapshot(redis, keys) == live

    first = (await redis.xrange(keys.events, count=1))[0][0].decode()
    stats = await rebuild(redis, keys, gateway.settings.session_ttl_seconds, since=first)
    assert await snapshot(redis, keys) == live
    assert stats.events == await redis.xlen(keys.events)
    later = await rebuild(redis, keys, gateway.settings.session_ttl_seconds, since="99999999999999-0")
    assert later.events == 0 and await snapshot(redis, keys) == live


async def test_print_writes_json_lines_and_changes_nothing(gateway: GatewayUnderTest) -> None:
    ids = await live_history(gateway)
    live = await snapshot(gateway.redis, gateway.keys)
    out = io.StringIO()
    assert await replay(gateway.settings, _args(print_only=True), out=out, err=io.StringIO()) == 0
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    entries = await gateway.redis.xrange(gateway.keys.events)
    assert [line["id"] for line in lines] == [e[0].decode() for e in entries]
    assert lines[0]["event"]["type"] == "job_submitted" and "ts" in lines[0]["event"]
    out = io.StringIO()
    await replay(gateway.settings, _args(print_only=True, session=ids["bob"]), out=out, err=io.StringIO())
    bob = [json.loads(line)["event"] for line in out.getvalue().splitlines()]
    assert {e["session_id"] for e in bob} == {ids["bob"]} and bob[-1]["type"] == "session_renamed"
    out = io.StringIO()
    await replay(gateway.settings, _args(print_only=True, since=lines[-2]["id"]), out=out, err=io.StringIO())
    assert [json.loads(line)["id"] for line in out.getvalue().splitlines()] == [lines[-2]["id"], lines[-1]["id"]]
    assert await snapshot(gateway.redis, gateway.keys) == live


def test_since_accepts_times_and_ids() -> None:
    assert parse_since("1700000000000-3") == "1700000000000-3"
    assert parse_since("1700000000000") == "1700000000000-0"
    assert parse_since("2024-01-01T00:00:00Z") == "1704067200000-0"
    assert parse_since("2024-01-01T00:00:00") == "1704067200000-0"
    assert parse_since("2024-01-01T01:00:00+01:00") == "1704067200000-0"
    with pytest.raises(ConfigError):
        parse_since("yesterday")
