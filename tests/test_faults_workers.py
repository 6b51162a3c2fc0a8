"""Fault injection: a worker process (router, lookup or agent) SIGKILLed mid-job under load.

Real processes on the session's Valkey and TuringDB (fixture graph), the scripted LLM
over HTTP with small delays so work is in flight when the kill lands.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from shared.bus.keys import Keys
from shared.config import Settings
from tests.faults_support import (
    Submitter,
    check_job_outcomes,
    fault_settings,
    freeze_holding_work,
    held_jobs,
    pending_of,
    running_stack,
    search_then_answer,
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
