"""Fault injection: TuringDB SIGKILLed under a running stack, then started again.

This test runs its own TuringDB server (temp dir, free port) with the fixture graph
loaded, so killing it harms no other test.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from shared.config import Settings, load_settings
from shared.graph.loader import load_graph_async
from shared.graph.server import TuringDBServer
from tests.faults_support import (
    Job,
    agent_answer,
    check_job_outcomes,
    fault_settings,
    routing_reply,
    running_stack,
    submit,
    wait_jobs,
)
from tests.fixtures.llm_server import Reply, ScriptedLLMServer, last_user_text, tool_results
from tests.fixtures.stack import Stack
from tests.fixtures.turingdb import free_port

GRAPH = "faults_reactome"
JOB_BOUND_SECONDS = 30
LOOKUP = "show me the node for the intrinsic pathway for apoptosis"
AGENT = "Explain how apoptosis is regulated"


@pytest.fixture
async def own_graph(tmp_path: Path, reactome_subset: Path) -> AsyncIterator[tuple[TuringDBServer, Settings]]:
    """(server, settings): our own TuringDB with the fixture subset loaded as GRAPH."""
    server = TuringDBServer(tmp_path / "turingdb", free_port())
    server.start()
    state = tmp_path / "state"
    state.mkdir()
    (state / "turingdb").symlink_to(server.directory)
    settings = load_settings(
        {}, turingdb_url=server.host, turingdb_port=server.port, turingdb_graph=GRAPH, state_dir=str(state),
        log_format="console",
    )
    try:
        await load_graph_async(settings, reactome_subset, progress=lambda m: None, server=server)
        yield server, settings
    finally:
        server.stop()


@pytest.fixture
def stack(own_graph: tuple[TuringDBServer, Settings], redis_url: str, llm_server_session: ScriptedLLMServer, tmp_path: Path) -> Iterator[Stack]:
    _server, graph_settings = own_graph
    settings = fault_settings(graph_settings, redis_url, llm_server_session.url, Path(graph_settings.state_dir))
    (tmp_path / "logs").mkdir()
    with running_stack(settings, tmp_path / "logs") as running:
        yield running


def script(body: dict[str, Any]) -> Reply:
    """The agent searches once, then answers with what the tool said (an error included)."""
    question = last_user_text(body)
    if body["model"] == "router-model":
        return routing_reply(question)
    results = tool_results(body)
    if not results:
        return Reply(tool_calls=[("vector_search", {"query": question, "k": 3})])
    if results[-1].startswith("Tool error:"):
        return Reply(f"I could not search the graph. {results[-1]}")
    return Reply(agent_answer(question, results))


def agent_tool_messages(server: ScriptedLLMServer, question: str) -> list[str]:
    """The tool messages the model was sent for `question`."""
    bodies = [b for b in list(server.requests) if b.get("model") == "agent-model" and last_user_text(b) == question]
    return tool_results(bodies[-1]) if bodies else []


def test_turingdb_killed_then_restarted(own_graph: tuple[TuringDBServer, Settings], stack: Stack, llm_server_session: ScriptedLLMServer) -> None:
    """With TuringDB SIGKILLed, a lookup ends in a job_error that names the graph database,
    and the agent's tool error reaches the model as "Tool error: ..." text (the job ends
    done with the model's answer about it). Once TuringDB is started again on the same
    dir and port with the graph loaded, new lookup and agent jobs succeed, with no
    service restarted."""
    server, _settings = own_graph
    llm_server_session.script = script
    pids = {p.consumer: p.process.pid for p in stack.processes}
    assert server.process is not None
    server.process.kill()
    server.process.wait()

    ready = httpx.get(f"{stack.gateway_url}/readyz", timeout=10)
    assert ready.status_code == 503 and ready.json()["failing"] == ["turingdb"]
    down = [submit(stack.gateway_url, f"{LOOKUP} (down)", "tdb-1"), submit(stack.gateway_url, f"{AGENT} (down)", "tdb-2")]
    records = wait_jobs(stack.gateway_url, down, JOB_BOUND_SECONDS)
    stories = check_job_outcomes(stack.gateway_url, down, records)

    lookup, agent = (records[j.job_id] for j in down)
    assert lookup["status"] == "error"
    assert "graph database could not be searched" in lookup["error"] and "UNAVAILABLE" in lookup["error"]
    assert stories[down[0].job_id][-1].data["data"]["stage"] == "lookup"

    sent = agent_tool_messages(llm_server_session, down[1].message)
    assert len(sent) == 1 and sent[0].startswith("Tool error: GraphUnavailable"), sent
    assert agent["status"] == "done" and sent[0] in agent["result"]["answer"]
    results = [e.data["data"] for e in stories[down[1].job_id] if e.event == "tool_result"]
    assert [r["ok"] for r in results] == [False] and results[0]["preview"].startswith("Tool error:")

    server.stop()  # reap the killed process, close its files
    server.load = [GRAPH]
    server.start()
    deadline = time.monotonic() + 30
    while httpx.get(f"{stack.gateway_url}/readyz", timeout=10).status_code != 200:
        assert time.monotonic() < deadline, "the stack did not see TuringDB again"
        time.sleep(0.2)
    up: list[Job] = [submit(stack.gateway_url, f"{LOOKUP} (up)", "tdb-3"), submit(stack.gateway_url, f"{AGENT} (up)", "tdb-4")]
    records = wait_jobs(stack.gateway_url, up, JOB_BOUND_SECONDS)
    check_job_outcomes(stack.gateway_url, up, records)
    lookup, agent = (records[j.job_id] for j in up)
    assert lookup["status"] == "done" and lookup["result"]["sources"]
    assert "Intrinsic Pathway for Apoptosis" in lookup["result"]["answer"]
    sent = agent_tool_messages(llm_server_session, up[1].message)
    assert len(sent) == 1 and not sent[0].startswith("Tool error:"), sent
    assert agent["status"] == "done" and agent["result"]["sources"]

    assert {p.consumer: p.process.pid for p in stack.processes} == pids
    assert all(p.alive() for p in stack.processes)
