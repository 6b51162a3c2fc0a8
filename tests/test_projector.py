"""The projector: pure folding rules, idempotency, the consumer group and the leader lease."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest

from shared.bus.log import entry_id_str, publish, read_events
from shared.contracts import EventRecord, JobStatus
from services.gateway.app import blocking_twin
from services.gateway.projector import Projector, leader_key, position_key
from services.gateway.views import apply_event, id_after, parse_id, project, read_job, read_session
from tests.fixtures.gateway import ALICE, GatewayUnderTest, job_story

TTL = 3600


def submitted(job: str, session: str, message: str = "hi", user: str | None = "alice", new: bool = True) -> EventRecord:
    return EventRecord("job_submitted", job, session, {"user_id": user, "message": message, "is_new_session": new}, ts=1000.0)


def test_ids_compare_numerically() -> None:
    assert parse_id("1700000000000-12") == (1700000000000, 12)
    assert id_after("10-0", "9-5") and id_after("9-10", "9-9") and not id_after("9-9", "9-9")
    assert id_after("100-0", "99-0")  # not a string comparison


def test_the_fold_is_pure_and_skips_what_it_has_seen() -> None:
    change = project(None, None, "5-0", submitted("j", "s"))
    assert change.job is not None and change.session is not None and change.index_add == ("alice", 1000.0)
    assert change.session.session is not None
    assert change.session.session.created_at == change.job.record.created_at  # times come from the event
    again = project(change.session, change.job, "5-0", submitted("j", "s"))
    assert again.empty
    older = project(change.session, change.job, "4-0", EventRecord("routing_started", "j", "s"))
    assert older.empty
    before = msgspec.json.encode(change.session)
    project(change.session, change.job, "6-0", EventRecord("routing_started", "j", "s"))
    assert msgspec.json.encode(change.session) == before  # inputs untouched


async def _apply_all(redis: Any, keys: Any) -> list[bool]:
    return [await apply_event(redis, keys, i, e, TTL) for i, e in await read_events(redis, keys)]


async def test_applying_twice_changes_nothing_and_a_duplicate_end_shows_once(redis: Any, keys: Any) -> None:
    story = [submitted("j1", "s1"), *job_story("j1", "s1", answer="42")]
    await publish(redis, keys, story + [story[-1]])  # job_done delivered twice
    first = await _apply_all(redis, keys)
    assert first == [True] * len(story) + [True]  # the duplicate only moves last_id
    snapshot = (await redis.get(keys.session("s1")), await redis.get(keys.job("j1")))
    assert await _apply_all(redis, keys) == [False] * (len(story) + 1)
    assert (await redis.get(keys.session("s1")), await redis.get(keys.job("j1"))) == snapshot

    session = await read_session(redis, keys, "s1", TTL)
    job = await read_job(redis, keys, "j1", TTL)
    assert session is not None and session.session is not None and job is not None
    chat = session.session
    assert [(m.role, m.content) for m in chat.messages] == [("user", "hi"), ("assistant", "42")]
    answer = chat.messages[1]
    assert answer.route == "agent" and answer.confidence == pytest.approx(0.9)
    assert [e.type for e in answer.events] == ["routing_started", "routing_done", "agent_step", "tool_call", "tool_result"]
    assert chat.pending_job_id is None and chat.pending_events == []
    assert job.record.status is JobStatus.done and job.record.result is not None and job.record.result.answer == "42"
    assert [e.type for _, e in job.events].count("job_done") == 1
    assert await redis.zrange(keys.user_sessions("alice"), 0, -1) == [b"s1"]


async def test_job_error_and_cancel(redis: Any, keys: Any) -> None:
    await publish(redis, keys, [
        submitted("j1", "s1"),
        EventRecord("routing_started", "j1", "s1"),
        EventRecord("job_error", "j1", "s1", {"error": "the LLM at http://x is unreachable"}),
        EventRecord("job_done", "j1", "s1", {"result": {"session_id": "s1", "answer": "late", "route_taken": "agent"}}),
        submitted("j2", "s2", user=None),
        EventRecord("job_cancelled", "j2", "s2", {"reason": "stopped"}),
    ])
    await _apply_all(redis, keys)
    s1 = await read_session(redis, keys, "s1", TTL)
    j1 = await read_job(redis, keys, "j1", TTL)
    assert s1 is not None and s1.session is not None and j1 is not None
    assert [m.role for m in s1.session.messages] == ["user", "assistant"]
    assert "unreachable" in s1.session.messages[1].content and s1.session.messages[1].route is None
    assert j1.record.status is JobStatus.error and j1.record.error == "the LLM at http://x is unreachable"
    assert j1.record.result is None
    j2 = await read_job(redis, keys, "j2", TTL)
    assert j2 is not None and j2.record.status is JobStatus.cancelled
    assert await redis.exists(keys.user_sessions("None")) == 0


async def test_the_group_projects_in_order_and_acknowledges(gateway: GatewayUnderTest) -> None:
    job = (await gateway.post("q", ALICE)).json()
    await gateway.emit(*job_story(job["job_id"], job["session_id"]))
    await gateway.projected()
    record = (await gateway.client.get(f"/chat/job/{job['job_id']}", headers=ALICE)).json()
    assert record["status"] == "done"
    groups = await gateway.redis.xinfo_groups(gateway.keys.events)
    assert [(g["name"], g["pending"]) for g in groups] == [(b"projector", 0)]


async def test_one_leader_at_a_time_and_a_standby_takes_over(redis: Any, keys: Any) -> None:
    a = Projector(redis, blocking_twin(redis), keys, TTL, lease_ms=300, consumer="a")
    b = Projector(redis, blocking_twin(redis), keys, TTL, lease_ms=300, consumer="b")
    ta, tb = asyncio.create_task(a.run()), asyncio.create_task(b.run())
    try:
        await asyncio.sleep(0.3)
        assert a.is_leader != b.is_leader
        leader, standby, leader_task = (a, b, ta) if a.is_leader else (b, a, tb)
        assert await redis.get(leader_key(keys)) == leader.token.encode()
        await publish(redis, keys, [submitted("j1", "s1")])
        for _ in range(100):
            if leader.applied:
                break
            await asyncio.sleep(0.02)
        assert leader.applied == 1 and standby.applied == 0
        await leader.close(leader_task)
        await publish(redis, keys, [EventRecord("routing_started", "j1", "s1")])
        for _ in range(200):
            if standby.applied:
                break
            await asyncio.sleep(0.02)
        assert standby.is_leader and standby.applied == 1
        last = await redis.xrevrange(keys.events, count=1)
        assert await redis.get(position_key(keys)) == last[0][0]
    finally:
        for p, t in ((a, ta), (b, tb)):
            await p.close(t)
            await p.blocking.aclose()


async def test_a_new_leader_adopts_what_the_old_one_left_unacknowledged(redis: Any, keys: Any) -> None:
    ids = [entry_id_str(i) for i in await publish(redis, keys, [submitted("j1", "s1"), EventRecord("routing_started", "j1", "s1")])]
    await redis.xgroup_create(keys.events, "projector", id="0")
    await redis.xreadgroup("projector", "crashed", {keys.events: ">"}, count=10)  # read, never acked
    p = Projector(redis, blocking_twin(redis), keys, TTL, lease_ms=300, consumer="new")
    task = asyncio.create_task(p.run())
    try:
        for _ in range(100):
            if p.applied == 2:
                break
            await asyncio.sleep(0.02)
        assert p.applied == 2
        assert (await redis.xpending(keys.events, "projector"))["pending"] == 0
        job = await read_job(redis, keys, "j1", TTL)
        assert job is not None and [i for i, _ in job.events] == ids
    finally:
        await p.close(task)
        await p.blocking.aclose()


def test_a_later_job_never_resurrects_a_missing_session() -> None:
    change = project(None, None, "7-0", submitted("j2", "s", new=False))
    assert change.job is not None and change.session is None and change.index_add is None
    step = project(None, change.job, "8-0", EventRecord("routing_started", "j2", "s"))
    assert step.session is None and step.job is not None and step.job.record.status is JobStatus.running
