"""SSE of a job through a real uvicorn: order, ids, end, resume, late join, pings, drops."""

from __future__ import annotations

import asyncio
from typing import Any

from shared.contracts import EventRecord
from services.gateway.sse import Hub
from tests.fixtures.gateway import ALICE, BOB, GatewayUnderTest, job_story, read_sse


async def _wait_subscribed(gw: GatewayUnderTest, n: int = 1) -> None:
    hub: Hub = gw.app.state.gateway.hub
    for _ in range(500):
        if hub.subscriber_count >= n:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("no SSE subscriber showed up")


async def test_live_stream_in_order_with_ids_ends_on_job_done(live_gateway: GatewayUnderTest) -> None:
    gw = live_gateway
    job = (await gw.post("q", ALICE)).json()
    jid, sid = job["job_id"], job["session_id"]
    reader = asyncio.create_task(read_sse(gw.client, f"/chat/job/{jid}/events", ALICE))
    await _wait_subscribed(gw)
    story = job_story(jid, sid)
    ids = []
    for event in story[:3]:
        ids += await gw.emit(event)  # one by one, while the client listens
        await asyncio.sleep(0.02)
    await gw.emit(EventRecord("agent_step", "another-job", sid, {}))  # not this job's
    ids += await gw.emit(*story[3:])
    await gw.emit(EventRecord("job_done", jid, sid, story[-1].data))  # a duplicate end: never shown
    stream = await reader
    assert stream.closed and stream.status == 200
    assert [f.event for f in stream.frames] == ["job_submitted"] + [e.type for e in story]
    assert [f.id for f in stream.frames][1:] == ids
    assert stream.frames[2].data == {"type": "routing_done", "data": {"route": "agent", "confidence": 0.9}}
    assert stream.frames[-1].data["data"]["result"]["answer"] == "the answer"
    assert gw.app.state.gateway.hub.subscriber_count == 0


async def test_resume_and_late_join(live_gateway: GatewayUnderTest) -> None:
    gw = live_gateway
    job = (await gw.post("q", ALICE)).json()
    jid = job["job_id"]
    await gw.emit(*job_story(jid, job["session_id"]))
    whole = await read_sse(gw.client, f"/chat/job/{jid}/events", ALICE)
    assert [f.event for f in whole.frames][0] == "job_submitted" and whole.frames[-1].event == "job_done"
    assert len(whole.frames) == 7
    for cut in range(len(whole.frames)):
        rest = await read_sse(gw.client, f"/chat/job/{jid}/events", {**ALICE, "Last-Event-ID": whole.frames[cut].id})
        assert [f.id for f in rest.frames] == [f.id for f in whole.frames[cut + 1 :]]
    by_query = await read_sse(gw.client, f"/chat/job/{jid}/events?last_event_id={whole.frames[4].id}", ALICE)
    assert [f.id for f in by_query.frames] == [f.id for f in whole.frames[5:]]


async def test_resume_while_running_without_a_projector(live_factory: Any) -> None:
    """Views lag (nothing projects): the stream reads the log past the view, then live."""
    gw = await live_factory(project=False)
    job = (await gw.post("q", ALICE)).json()
    jid, sid = job["job_id"], job["session_id"]
    story = job_story(jid, sid)
    first = await gw.emit(*story[:3])
    reader = asyncio.create_task(read_sse(gw.client, f"/chat/job/{jid}/events", {**ALICE, "Last-Event-ID": first[0]}))
    await _wait_subscribed(gw)
    rest = await gw.emit(*story[3:])
    stream = await reader
    assert [f.id for f in stream.frames] == first[1:] + rest
    assert stream.frames[-1].event == "job_done"


async def test_pings_keep_the_stream_alive(live_factory: Any) -> None:
    gw = await live_factory(sse_ping_seconds=0.1)
    job = (await gw.post("q", ALICE)).json()
    reader = asyncio.create_task(read_sse(gw.client, f"/chat/job/{job['job_id']}/events", ALICE))
    await _wait_subscribed(gw)
    await asyncio.sleep(0.35)
    await gw.emit(EventRecord("job_error", job["job_id"], job["session_id"], {"error": "boom"}))
    stream = await reader
    assert stream.pings >= 2
    assert [f.event for f in stream.frames] == ["job_submitted", "job_error"]


async def test_other_user_gets_404(live_gateway: GatewayUnderTest) -> None:
    job = (await live_gateway.post("q", ALICE)).json()
    stream = await read_sse(live_gateway.client, f"/chat/job/{job['job_id']}/events", BOB)
    assert stream.status == 404 and not stream.frames


async def test_many_clients_one_reader(live_gateway: GatewayUnderTest) -> None:
    gw = live_gateway
    job = (await gw.post("q", ALICE)).json()
    readers = [asyncio.create_task(read_sse(gw.client, f"/chat/job/{job['job_id']}/events", ALICE)) for _ in range(5)]
    await _wait_subscribed(gw, 5)
    ids = await gw.emit(*job_story(job["job_id"], job["session_id"]))
    for stream in await asyncio.gather(*readers):
        assert [f.id for f in stream.frames][1:] == ids


async def test_a_slow_subscriber_is_dropped_not_the_others() -> None:
    hub = Hub(None, None)  # type: ignore[arg-type] - dispatch only, no reader
    slow = hub.subscribe("j", size=2)
    fast = hub.subscribe("j", size=100)
    for n in range(5):
        hub.dispatch(f"1-{n}", EventRecord("agent_step", "j", "s", {"n": n}))
    assert slow.dropped and fast.queue.qsize() == 5
    items = [slow.queue.get_nowait() for _ in range(slow.queue.qsize())]
    assert items[-1] is None  # the stream of the slow client ends cleanly
    assert hub.subscriber_count == 1
    await hub.close()
    assert fast.queue.get_nowait() is not None and fast.dropped


async def test_a_client_that_goes_away_is_unsubscribed(live_gateway: GatewayUnderTest) -> None:
    gw = live_gateway
    job = (await gw.post("q", ALICE)).json()
    async with gw.client.stream("GET", f"/chat/job/{job['job_id']}/events", headers=ALICE) as response:
        lines = response.aiter_lines()
        while not (await lines.__anext__()).startswith("event: job_submitted"):
            pass
        await _wait_subscribed(gw)
    hub: Hub = gw.app.state.gateway.hub
    for _ in range(300):
        if hub.subscriber_count == 0:
            break
        await gw.emit(EventRecord("agent_step", job["job_id"], job["session_id"], {}))  # a write notices the gone peer
        await asyncio.sleep(0.02)
    assert hub.subscriber_count == 0
