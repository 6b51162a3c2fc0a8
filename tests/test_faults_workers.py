"""Fault injection: a worker process (router, lookup or agent) SIGKILLed mid-job under load.

Real processes on the session's Valkey and TuringDB (fixture graph), the scripted LLM
over HTTP with small delays so work is in flight when the kill lands.
"""

from __future__ import annotations

import contextlib
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from shared.bus.keys import Keys
from shared.config import Settings
from tests.faults_support import (
    TERMINAL_EVENTS,
    StreamReader,
    Submitter,
    check_job_outcomes,
    fault_settings,
    freeze_holding_work,
    held_jobs,
    pending_of,
    running_stack,
    search_then_answer,
    slow_long_answers,
    submit,
    wait_jobs,
)
from tests.fixtures.llm_server import ScriptedLLMServer
from tests.fixtures.stack import Stack

JOBS = 24
JOB_BOUND_SECONDS = 60  # every job ends within this (a hang fails the test)


@pytest.fixture(scope="module")
def stack(
    graph_settings: Settings, loaded_graph: Any, redis_url: str, llm_server_session: ScriptedLLMServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stack]:
    settings = fault_settings(graph_settings, redis_url, llm_server_session.url, tmp_path_factory.mktemp("state"))
    with running_stack(settings, Path(tmp_path_factory.mktemp("logs"))) as running:
        yield running


@pytest.mark.parametrize("kind", ["router", "lookup", "agent"])
def test_sigkill_worker_mid_job_under_load(
    kind: str, stack: Stack, llm_server_session: ScriptedLLMServer, redis_url: str
) -> None:
    """24 jobs (half lookup, half agent) flow; the only `kind` worker is frozen while it
    holds delivered, unacknowledged jobs, then SIGKILLed, and a replacement started.
    Every accepted job ends done, the killed worker's jobs included; each story holds
    one terminal event and each session one assistant message."""
    llm_server_session.script = search_then_answer(router_delay=0.4, agent_delay=0.3)
    tag = uuid.uuid4().hex[:6]
    messages = [
        f"show me the node for apoptosis ({tag} {n})" if n % 2 == 0 else f"Explain how apoptosis is regulated ({tag} {n})"
        for n in range(JOBS)
    ]
    keys = Keys(stack.settings.key_prefix)
    client = redis.Redis.from_url(redis_url)
    [victim] = stack.of(kind)
    submitter = Submitter(stack.gateway_url, messages, gap=0.03, user_prefix=f"{kind}-{tag}-")
    submitter.start()
    try:
        freeze_holding_work(victim, client, keys, at_least=1 if kind == "lookup" else 3)
        held = held_jobs(client, keys, kind, victim.consumer)
        victim.kill()
        stack.start(kind)
        submitter.join(60)
        assert not submitter.refused and not submitter.transport_errors, (submitter.refused, submitter.transport_errors)
        assert len(submitter.jobs) == JOBS

        records = wait_jobs(stack.gateway_url, submitter.jobs, JOB_BOUND_SECONDS)
        assert {r["status"] for r in records.values()} == {"done"}, [r for r in records.values() if r["status"] != "done"]
        stories = check_job_outcomes(stack.gateway_url, submitter.jobs, records)
        routes = {r["result"]["route_taken"] for r in records.values()}
        assert routes == {"lookup", "agent"}

        # what the killed worker held was taken over and finished by the replacement
        assert held and set(held) <= set(records)
        assert pending_of(client, keys, kind, victim.consumer) == 0
        for job_id in held:
            types = [e.event for e in stories[job_id]]
            if kind == "router":
                attempts = [e.data["data"]["attempt"] for e in stories[job_id] if e.event == "routing_started"]
                assert max(attempts) >= 2, attempts
            if kind == "agent":
                assert "agent_restarted" in types, types
    finally:
        submitter.join(60)
        client.close()


def test_sigkill_gateway_under_load(stack: Stack, llm_server_session: ScriptedLLMServer) -> None:
    """The gateway (which also runs the projector) is SIGKILLed while jobs flow and one
    client follows a job over SSE; a new gateway is started on the same port. Posts in
    the gap fail to connect (never accepted); every accepted job ends done, once in its
    story and its session; the follower resumes with Last-Event-ID and, with what it had
    before the crash, has the job's whole story, each event once."""
    llm_server_session.script = slow_long_answers(search_then_answer(router_delay=0.2, agent_delay=0.3))
    tag = uuid.uuid4().hex[:6]
    followed = submit(stack.gateway_url, f"Explain how apoptosis is regulated [long] ({tag})", f"gw-{tag}")
    reader = StreamReader(stack.gateway_url, followed)
    reader.start()
    messages = [
        f"show me the node for apoptosis ({tag} {n})" if n % 2 == 0 else f"Explain how apoptosis is regulated ({tag} {n})"
        for n in range(JOBS)
    ]
    submitter = Submitter(stack.gateway_url, messages, gap=0.1, user_prefix=f"gw-{tag}-")
    submitter.start()
    try:
        deadline = time.monotonic() + 30
        while len(submitter.jobs) < 5 or len(reader.events) < 4:
            assert time.monotonic() < deadline, (len(submitter.jobs), len(reader.events))
            time.sleep(0.02)
        [gateway] = stack.of("gateway")
        gateway.kill()
        accepted_before = len(submitter.jobs)
        reader.join(10)
        assert reader.error is not None and reader.events[-1].event not in TERMINAL_EVENTS
        stack.start("gateway")
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{stack.gateway_url}/healthz", timeout=2).status_code == 200:
                    break
            assert time.monotonic() < deadline, "the new gateway did not start"
            time.sleep(0.1)
        resumed = StreamReader(stack.gateway_url, followed, last_event_id=reader.events[-1].id)
        resumed.run()
        assert resumed.error is None and resumed.events[-1].event == "job_done"
        submitter.join(60)
        assert not submitter.refused, submitter.refused
        assert len(submitter.jobs) > accepted_before, "no job was accepted by the new gateway"

        jobs = [followed, *submitter.jobs]
        records = wait_jobs(stack.gateway_url, jobs, JOB_BOUND_SECONDS)
        assert {r["status"] for r in records.values()} == {"done"}
        stories = check_job_outcomes(stack.gateway_url, jobs, records)
        whole = [e.id for e in stories[followed.job_id]]
        assert [e.id for e in reader.events] + [e.id for e in resumed.events] == whole
    finally:
        submitter.join(60)
        reader.join(10)


def streamed_answer_script(server: ScriptedLLMServer) -> Any:
    """search_then_answer, with the answer streamed slowly (about 1 s) so runs overlap."""
    base = search_then_answer(router_delay=0.05, agent_delay=0.3)

    def script(body: dict[str, Any]) -> Any:
        reply = base(body)
        if body["model"] == "agent-model" and not reply.tool_calls:
            reply.chunk_chars, reply.chunk_delay = 6, 0.05
        return reply

    return script


def events_of(client: redis.Redis, keys: Keys, job_ids: set[str], event_type: str) -> set[str]:
    """Job ids among `job_ids` that have an event of `event_type` in the log."""
    from shared.bus.log import EVENT_FIELD
    from shared.contracts import decode_event

    found = set()
    for _entry_id, fields in client.xrange(keys.events, "-", "+"):
        event = decode_event(fields[EVENT_FIELD])
        if event.type == event_type and event.job_id in job_ids:
            found.add(event.job_id)
    return found


def test_stalled_agent_resumes_after_its_jobs_were_taken_over(
    stack: Stack, llm_server_session: ScriptedLLMServer, redis_url: str
) -> None:
    """An agent is frozen (SIGSTOP) past the visibility timeout while it runs jobs; a
    second agent takes them over; the frozen one is thawed while the takeover runs, as
    after a long GC pause or a stalled VM. Each job ends once, and after the takeover
    (agent_restarted) the job's story holds only the new run: its iterations once each,
    its streamed text exactly the final answer, nothing from the stale run."""
    llm_server_session.script = streamed_answer_script(llm_server_session)
    tag = uuid.uuid4().hex[:6]
    messages = [f"Explain how apoptosis is regulated ({tag} {n})" for n in range(8)]
    keys = Keys(stack.settings.key_prefix)
    client = redis.Redis.from_url(redis_url)
    [stalled] = stack.of("agent")
    submitter = Submitter(stack.gateway_url, messages, gap=0.03, user_prefix=f"stall-{tag}-")
    submitter.start()
    try:
        freeze_holding_work(stalled, client, keys, at_least=3)
        held = set(held_jobs(client, keys, "agent", stalled.consumer))
        taker = stack.start("agent")
        deadline = time.monotonic() + 30
        while not events_of(client, keys, held, "agent_restarted"):
            assert time.monotonic() < deadline, "the held jobs were not taken over"
            time.sleep(0.02)
        stalled.process.send_signal(signal.SIGCONT)  # the stale run goes on where it was
        submitter.join(60)
        assert len(submitter.jobs) == len(messages)

        records = wait_jobs(stack.gateway_url, submitter.jobs, JOB_BOUND_SECONDS)
        assert {r["status"] for r in records.values()} == {"done"}
        stories = check_job_outcomes(stack.gateway_url, submitter.jobs, records)
        taken = events_of(client, keys, held, "agent_restarted")  # the rest the thawed agent kept
        assert taken
        for job_id in taken:
            events = stories[job_id]
            types = [e.event for e in events]
            after = events[len(types) - 1 - types[::-1].index("agent_restarted") :]
            steps = [e.data["data"]["iteration"] for e in after if e.event == "agent_step"]
            assert steps == sorted(set(steps)), f"job {job_id}: iterations {steps} after the takeover"
            assert [e.event for e in after].count("tool_call") == 1, [e.event for e in after]
            streamed = "".join(e.data["data"]["text"] for e in after if e.event == "answer_delta")
            assert streamed == records[job_id]["result"]["answer"], f"job {job_id}: streamed {streamed!r}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            stalled.process.send_signal(signal.SIGCONT)
        submitter.join(60)
        client.close()
    assert stalled.terminate() == 0 and taker.alive()
