"""Fault injection: Valkey SIGKILLed and restarted (same port, same data dir, AOF on)
while jobs flow through gateway, router, lookup and agent processes.

This test runs its own EmbeddedValkey on a temp dir: killing it harms no other test.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from shared.config import Settings
from shared.valkey_server import EmbeddedValkey
from tests.faults_support import (
    StreamReader,
    Submitter,
    check_job_outcomes,
    fault_settings,
    post,
    running_stack,
    search_then_answer,
    slow_long_answers,
    submit,
    wait_jobs,
)
from tests.fixtures.llm_server import ScriptedLLMServer
from tests.fixtures.stack import Stack

JOBS = 40
AWAY_SECONDS = 3.0
JOB_BOUND_SECONDS = 60


@pytest.fixture
def own_valkey(tmp_path: Path) -> Iterator[EmbeddedValkey]:
    server = EmbeddedValkey(tmp_path / "valkey")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def stack(
    own_valkey: EmbeddedValkey, graph_settings: Settings, loaded_graph: Any, llm_server_session: ScriptedLLMServer,
    tmp_path: Path,
) -> Iterator[Stack]:
    settings = fault_settings(graph_settings, own_valkey.url, llm_server_session.url, tmp_path / "state")
    (tmp_path / "logs").mkdir()
    with running_stack(settings, tmp_path / "logs") as running:
        yield running


def assert_unavailable(reply: httpx.Response) -> None:
    """503, a Retry-After in seconds and a JSON error sentence: no stack trace."""
    assert reply.status_code == 503, reply.text
    assert reply.headers["retry-after"].isdigit()
    assert reply.headers["content-type"].startswith("application/json")
    body = reply.json()
    assert set(body) == {"detail"} and "unavailable" in body["detail"]
    assert "Traceback" not in reply.text


def test_valkey_killed_and_restarted_under_load(
    own_valkey: EmbeddedValkey, stack: Stack, llm_server_session: ScriptedLLMServer
) -> None:
    """40 messages are posted 0.15 s apart; after 8 are accepted Valkey is SIGKILLed,
    kept away 3 s and started again on the same port and data dir. While it is away the
    gateway answers 503 with Retry-After and a JSON error. No service is restarted;
    every job that got a 202 (before, during and after) ends done, exactly once, and a
    client following a job over SSE through the outage gets its whole story once."""
    llm_server_session.script = slow_long_answers(search_then_answer(router_delay=0.2, agent_delay=0.3))
    tag = uuid.uuid4().hex[:6]
    followed = submit(stack.gateway_url, f"Explain how apoptosis is regulated [long] ({tag})", f"v-{tag}")
    follower = StreamReader(stack.gateway_url, followed)
    follower.start()
    messages = [
        f"show me the node for apoptosis ({tag} {n})" if n % 2 == 0 else f"Explain apoptosis regulation ({tag} {n})"
        for n in range(JOBS)
    ]
    pids = {p.consumer: p.process.pid for p in stack.processes}
    submitter = Submitter(stack.gateway_url, messages, gap=0.15, user_prefix=f"v-{tag}-")
    submitter.start()
    try:
        deadline = time.monotonic() + 30
        while len(submitter.jobs) < 8:
            assert time.monotonic() < deadline, "jobs were not accepted before the kill"
            time.sleep(0.02)
        own_valkey.kill()
        killed_at = time.monotonic()
        assert all(e.event != "job_done" for e in follower.events), "the followed job ended before the kill"
        accepted_before = len(submitter.jobs)

        # while it is away: 503 + Retry-After + JSON, for a write and a read; the process lives
        assert_unavailable(post(stack.gateway_url, "show me the node for BRCA2", "probe"))
        first = submitter.jobs[0]
        assert_unavailable(httpx.get(f"{stack.gateway_url}/chat/job/{first.job_id}", headers=first.headers, timeout=20))
        assert httpx.get(f"{stack.gateway_url}/healthz", timeout=5).status_code == 200
        ready = httpx.get(f"{stack.gateway_url}/readyz", timeout=10)
        assert ready.status_code == 503 and "valkey" in ready.json()["failing"]

        time.sleep(max(0.0, AWAY_SECONDS - (time.monotonic() - killed_at)))
        own_valkey.start()  # same port, same data dir: the AOF is read back
        submitter.join(120)
        assert not submitter.transport_errors, submitter.transport_errors
        for status, headers, body in submitter.refused:
            assert status == 503 and headers["retry-after"].isdigit() and "detail" in body, (status, body)
        assert len(submitter.jobs) > accepted_before, "no job was accepted after the restart"

        jobs = [followed, *submitter.jobs]
        records = wait_jobs(stack.gateway_url, jobs, JOB_BOUND_SECONDS)
        assert {r["status"] for r in records.values()} == {"done"}, [r for r in records.values() if r["status"] != "done"]
        stories = check_job_outcomes(stack.gateway_url, jobs, records)

        # a client that followed a job over SSE all along kept its stream through the
        # outage and got the whole story, each event once, up to job_done
        follower.join(30)
        assert follower.error is None, follower.error
        assert [e.id for e in follower.events] == [e.id for e in stories[followed.job_id]]

        # the services reconnected by themselves: the same processes, all alive, ready
        assert {p.consumer: p.process.pid for p in stack.processes} == pids
        assert all(p.alive() for p in stack.processes)
        assert httpx.get(f"{stack.gateway_url}/readyz", timeout=10).status_code == 200
    finally:
        submitter.join(120)
        follower.join(30)
