"""End to end through real processes: Valkey, TuringDB with the fixture graph, the
scripted LLM over HTTP, and gateway, router, lookup and agent each as its own process."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from shared.config import Settings
from tests.fixtures.llm_server import Reply, ScriptedLLMServer, last_user_text
from tests.fixtures.scripts import graph_agent_script
from tests.fixtures.stack import Stack, running_stack
from tests.sse_client import read_stream

ALICE = {"X-Anon-Id": "alice"}
BOB = {"X-Anon-Id": "bob"}


@pytest.fixture(scope="module")
def stack(
    graph_settings: Settings, loaded_graph: Any, redis_url: str, llm_server_session: ScriptedLLMServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stack]:
    with running_stack(graph_settings, redis_url, llm_server_session.url, tmp_path_factory) as stack:
        yield stack


def post(stack: Stack, message: str, headers: dict[str, str], session_id: str | None = None) -> httpx.Response:
    body: dict[str, Any] = {"message": message}
    if session_id:
        body["session_id"] = session_id
    return httpx.post(f"{stack.gateway_url}/chat/message", json=body, headers=headers, timeout=10)


def wait_job(stack: Stack, job_id: str, headers: dict[str, str], timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        record = httpx.get(f"{stack.gateway_url}/chat/job/{job_id}", headers=headers, timeout=5).json()
        if record["status"] in ("done", "error", "cancelled"):
            return record
        time.sleep(0.1)
    raise TimeoutError(f"job {job_id} did not end")


def asked_agent(server: ScriptedLLMServer, question: str) -> bool:
    return any(r.get("model") == "agent-model" and last_user_text(r) == question for r in list(server.requests))


def test_conversation_lookup_then_agent(stack: Stack, llm_server_session: ScriptedLLMServer) -> None:
    llm_server_session.script = graph_agent_script({})
    accepted = post(stack, "show me the node for the intrinsic pathway for apoptosis", ALICE)
    assert accepted.status_code == 202, accepted.text
    job = accepted.json()
    assert job["status"] == "pending"
    session_id = job["session_id"]

    # read-your-writes: the session shows the message and the pending job at once
    session = httpx.get(f"{stack.gateway_url}/chat/session/{session_id}", headers=ALICE).json()
    assert session["messages"][0]["content"].startswith("show me the node")

    events = read_stream(f"{stack.gateway_url}/chat/job/{job['job_id']}/events", headers=ALICE)
    types = [e.event for e in events]
    assert types[-1] == "job_done"
    assert "routing_done" in types and "lookup_results" in types
    routing = next(e for e in events if e.event == "routing_done")
    assert routing.data["type"] == "routing_done" and routing.data["data"]["route"] == "lookup"
    ids = [e.id for e in events]
    assert ids == sorted(ids, key=lambda i: tuple(map(int, i.split("-")))) and len(set(ids)) == len(ids)

    record = wait_job(stack, job["job_id"], ALICE)
    result = record["result"]
    assert record["status"] == "done" and result["route_taken"] == "lookup"
    assert result["sources"] and all(s["stId"] and s["displayName"] for s in result["sources"])
    pathways = [s for s in result["sources"] if "Pathway" in s["labels"]]
    assert pathways and all(re.fullmatch(r"R-HSA-\d+", s["stId"]) for s in pathways)
    assert "### " in result["answer"]
    assert "Intrinsic Pathway for Apoptosis" in result["answer"]

    # second turn in the same session goes to the agent
    second = post(stack, "Why do cells die through the intrinsic pathway?", ALICE, session_id)
    assert second.status_code == 202
    job2 = second.json()
    assert job2["session_id"] == session_id
    events2 = read_stream(f"{stack.gateway_url}/chat/job/{job2['job_id']}/events", headers=ALICE)
    types2 = [e.event for e in events2]
    assert types2[-1] == "job_done"
    calls = [e for e in events2 if e.event == "tool_call"]
    assert [c.data["data"]["name"] for c in calls] == ["vector_search", "graph_query"]
    assert types2.count("tool_result") == 2 and "agent_step" in types2
    record2 = wait_job(stack, job2["job_id"], ALICE)
    result2 = record2["result"]
    assert result2["route_taken"] == "agent"
    top = result2["sources"][0]
    assert top["displayName"] in result2["answer"] and top["stId"] in result2["answer"]
    # router (1 call) + agent (3 calls) at 11 in / 7 out each
    assert result2["token_usage"] == {"input_tokens": 44, "output_tokens": 28}

    # resume: after the second event, exactly the rest
    resumed = read_stream(
        f"{stack.gateway_url}/chat/job/{job2['job_id']}/events", headers={**ALICE, "Last-Event-ID": events2[1].id}
    )
    assert [e.id for e in resumed] == [e.id for e in events2[2:]]

    # the session holds both turns, each answer with its route, confidence and events
    session = httpx.get(f"{stack.gateway_url}/chat/session/{session_id}", headers=ALICE).json()
    roles = [m["role"] for m in session["messages"]]
    assert roles == ["user", "assistant", "user", "assistant"]
    assert session["messages"][1]["route"] == "lookup" and session["messages"][3]["route"] == "agent"
    assert session["messages"][3]["confidence"] == pytest.approx(0.9)
    assert any(e["type"] == "tool_call" for e in session["messages"][3]["events"])

    # another user sees nothing of it
    assert httpx.get(f"{stack.gateway_url}/chat/session/{session_id}", headers=BOB).status_code == 404
    assert httpx.get(f"{stack.gateway_url}/chat/job/{job2['job_id']}", headers=BOB).status_code == 404
    assert httpx.get(f"{stack.gateway_url}/chat/job/{job2['job_id']}/events", headers=BOB).status_code == 404
    assert post(stack, "hello", BOB, session_id).status_code == 404

    # rename, list, delete
    renamed = httpx.patch(f"{stack.gateway_url}/chat/session/{session_id}", json={"name": "apoptosis"}, headers=ALICE)
    assert renamed.status_code == 200
    listed = httpx.get(f"{stack.gateway_url}/chat/sessions", headers=ALICE).json()
    assert [(s["session_id"], s["name"]) for s in listed if s["session_id"] == session_id] == [(session_id, "apoptosis")]
    assert all(s["session_id"] != session_id for s in httpx.get(f"{stack.gateway_url}/chat/sessions", headers=BOB).json())
    assert httpx.delete(f"{stack.gateway_url}/chat/session/{session_id}", headers=ALICE).status_code == 204
    assert httpx.get(f"{stack.gateway_url}/chat/session/{session_id}", headers=ALICE).status_code == 404


def test_killed_agent_is_replaced_and_the_job_ends_once(stack: Stack, llm_server_session: ScriptedLLMServer) -> None:
    question = "Explain how apoptosis is regulated, slowly"
    llm_server_session.script = graph_agent_script({question: 4.0})
    accepted = post(stack, question, ALICE)
    assert accepted.status_code == 202
    job = accepted.json()
    deadline = time.monotonic() + 30
    while not asked_agent(llm_server_session, question):
        assert time.monotonic() < deadline, "the agent never called the LLM"
        time.sleep(0.05)
    for agent in stack.of("agent"):
        agent.kill()  # SIGKILL in the middle of the handler
    stack.start("agent")
    record = wait_job(stack, job["job_id"], ALICE, timeout=90)
    assert record["status"] == "done", record
    session = httpx.get(f"{stack.gateway_url}/chat/session/{job['session_id']}", headers=ALICE).json()
    assert [m["role"] for m in session["messages"]] == ["user", "assistant"]
    events = read_stream(f"{stack.gateway_url}/chat/job/{job['job_id']}/events", headers=ALICE)
    assert [e.event for e in events].count("job_done") == 1
    assert "agent_restarted" in [e.event for e in events]


def test_streamed_answer_and_cancel(stack: Stack, llm_server_session: ScriptedLLMServer) -> None:
    llm_server_session.streams.clear()
    long_answer = "Apoptosis unfolds in steps. " * 200

    def script(body: dict[str, Any]) -> Reply:
        if body["model"] == "router-model":
            return Reply(json.dumps({"route": "agent", "confidence": 0.9, "reasoning": "explain"}))
        return Reply(long_answer, chunk_chars=6, chunk_delay=0.02)

    llm_server_session.script = script
    job = post(stack, "Tell me everything about apoptosis", ALICE).json()
    deadline = time.monotonic() + 30
    while not asked_agent(llm_server_session, "Tell me everything about apoptosis"):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.8)
    cancel = httpx.post(f"{stack.gateway_url}/chat/job/{job['job_id']}/cancel", headers=ALICE)
    assert cancel.status_code == 202, cancel.text
    assert httpx.post(f"{stack.gateway_url}/chat/job/{job['job_id']}/cancel", headers=BOB).status_code == 404

    events = read_stream(f"{stack.gateway_url}/chat/job/{job['job_id']}/events", headers=ALICE)
    types = [e.event for e in events]
    assert types[-1] == "job_cancelled" and "cancel_requested" in types
    deltas = [e.data["data"]["text"] for e in events if e.event == "answer_delta"]
    assert deltas and 0 < len("".join(deltas)) < len(long_answer)
    assert long_answer.startswith("".join(deltas))
    assert len(deltas) < len("".join(deltas)) / 6  # coalesced, not one event per piece

    record = wait_job(stack, job["job_id"], ALICE)
    assert record["status"] == "cancelled"
    again = httpx.post(f"{stack.gateway_url}/chat/job/{job['job_id']}/cancel", headers=ALICE)
    assert again.status_code == 409 and "already ended" in again.text
    deadline = time.monotonic() + 10
    while "abandoned" not in llm_server_session.streams:
        assert time.monotonic() < deadline, llm_server_session.streams
        time.sleep(0.1)
    session = httpx.get(f"{stack.gateway_url}/chat/session/{job['session_id']}", headers=ALICE).json()
    assert [m["role"] for m in session["messages"]] == ["user", "assistant"]
    assert "cancelled" in session["messages"][1]["content"]
    assert all(e["type"] != "answer_delta" for e in session["messages"][1]["events"])
