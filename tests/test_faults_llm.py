"""Fault injection at the LLM endpoint, through the whole stack of processes.

The scripted OpenAI-compatible server misbehaves for questions carrying a marker:
too slow (beyond LLM_TIMEOUT_SECONDS), 429 beyond the retries, 429 then fine, 500,
the stream closed mid-answer, malformed tool calls, a body that is not the protocol.
Each job must end within JOB_BOUND_SECONDS with a clear outcome: a degraded answer
that names the endpoint when the model cannot be reached, a job_error that says what
was wrong, or an answer after the model saw its tool errors as text.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shared.config import Settings
from tests.faults_support import (
    Job,
    check_job_outcomes,
    fault_settings,
    routing_reply,
    running_stack,
    search_then_answer,
    submit,
    wait_jobs,
)
from tests.fixtures.llm_server import Raw, Reply, ScriptedLLMServer, Status, last_user_text, tool_results
from tests.fixtures.stack import Stack
from tests.sse_client import SSEEvent

LLM_TIMEOUT = 1.5
LLM_RETRIES = 2
JOB_BOUND_SECONDS = 20
MAX_ITERATIONS = 6
LONG_ANSWER = "Apoptosis is a regulated cell death programme. " * 20


@pytest.fixture(scope="module")
def stack(
    graph_settings: Settings, loaded_graph: Any, redis_url: str, llm_server_session: ScriptedLLMServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stack]:
    settings = fault_settings(
        graph_settings, redis_url, llm_server_session.url, tmp_path_factory.mktemp("state"),
        llm_timeout_seconds=LLM_TIMEOUT, llm_max_retries=LLM_RETRIES, llm_retry_backoff_seconds=0.05,
        agent_max_iterations=MAX_ITERATIONS,
    )
    with running_stack(settings, Path(tmp_path_factory.mktemp("logs"))) as running:
        yield running


def calls_for(server: ScriptedLLMServer, model: str, question: str) -> list[dict[str, Any]]:
    return [b for b in list(server.requests) if b.get("model") == model and last_user_text(b) == question]


def faulty_script(server: ScriptedLLMServer) -> Any:
    """Misbehave by the marker in the question; anything else searches then answers."""
    normal = search_then_answer()

    def script(body: dict[str, Any]) -> Reply | Status | Raw:
        question = last_user_text(body)
        if body["model"] == "router-model":
            if "[router-slow]" in question:
                return Reply("{}", delay=LLM_TIMEOUT + 2.5)
            return Status(500, "router model crashed") if "[router-500]" in question else routing_reply(question)
        if "[slow]" in question:
            return Reply("too late", delay=LLM_TIMEOUT + 2.5)
        if "[429]" in question:
            return Status(429, "slow down")
        if "[429-twice]" in question and len(calls_for(server, "agent-model", question)) <= 2:
            return Status(429, "slow down")
        if "[500]" in question or "[router-500]" in question:
            return Status(500, "model crashed")
        if "[cut]" in question:
            return Reply(LONG_ANSWER, chunk_chars=8, cut_after=3)
        if "[loop]" in question:
            return Reply("Let me look once more.", tool_calls=[("get_node_labels", {})])
        if "[garbage]" in question:
            return Raw(b"data: {this is not json\n\n", content_type="text/event-stream")
        if "[bad-tools]" in question:
            results = tool_results(body)
            if not results:
                return Reply(tool_calls=[("vector_search", "{not json"), ("no_such_tool", {}), ("vector_search", {"k": 3})])
            return Reply("Recovered. The tools said: " + " | ".join(results))
        return normal(body)

    return script


def run_job(stack: Stack, server: ScriptedLLMServer, marker: str) -> tuple[Job, dict[str, Any], list[SSEEvent], float]:
    """Submit one agent question carrying `marker`; (job, record, story, seconds to end)."""
    server.script = faulty_script(server)
    job = submit(stack.gateway_url, f"Explain how apoptosis is regulated {marker} {uuid.uuid4().hex[:6]}", f"llm-{marker.strip('[]')}")
    started = time.monotonic()
    records = wait_jobs(stack.gateway_url, [job], JOB_BOUND_SECONDS, poll=0.05)
    took = time.monotonic() - started
    stories = check_job_outcomes(stack.gateway_url, [job], records)
    return job, records[job.job_id], stories[job.job_id], took


def assert_degraded(record: dict[str, Any], story: list[SSEEvent], server: ScriptedLLMServer, reason: str) -> None:
    """Done, with an answer that says the model could not be reached, names the endpoint
    and the reason, and lists the graph's closest matches instead."""
    assert record["status"] == "done", record
    answer = record["result"]["answer"]
    assert "could not be reached" in answer and server.url in answer and "agent-model" in answer, answer
    assert reason in answer, answer
    assert record["result"]["sources"], "the degraded answer shows graph matches"
    degraded = [e.data["data"] for e in story if e.event == "agent_degraded"]
    assert len(degraded) == 1 and degraded[0]["endpoint"] == server.url


def test_llm_slower_than_the_timeout(stack: Stack, llm_server_session: ScriptedLLMServer) -> None:
    """The model takes longer than LLM_TIMEOUT_SECONDS: one call, abandoned at the
    timeout (not retried), and a degraded answer naming the endpoint."""
    job, record, story, took = run_job(stack, llm_server_session, "[slow]")
    assert_degraded(record, story, llm_server_session, "Timeout")
    assert len(calls_for(llm_server_session, "agent-model", job.message)) == 1
    assert took < LLM_TIMEOUT + 2.5  # it did not wait for the slow reply


def test_llm_rate_limited_beyond_the_retries(stack: Stack, llm_server_session: ScriptedLLMServer) -> None:
    """Every call answers 429: exactly 1 + LLM_MAX_RETRIES calls, then a degraded answer."""
    job, record, story, _ = run_job(stack, llm_server_session, "[429]")
    assert_degraded(record, story, llm_server_session, f"rate limited (429) after {LLM_RETRIES} retries")
    assert len(calls_for(llm_server_session, "agent-model", job.message)) == 1 + LLM_RETRIES


def test_llm_rate_limited_then_answers(stack: Stack, llm_server_session: ScriptedLLMServer) -> None:
    """Two 429s, then the model answers: the retries carry the job to a real answer."""
    job, record, story, _ = run_job(stack, llm_server_session, "[429-twice]")
    assert record["status"] == "done" and "closest node is" in record["result"]["answer"], record
    assert "agent_degraded" not in [e.event for e in story]
    assert len(calls_for(llm_server_session, "agent-model", job.message)) == 4  # 429, 429, tool call, answer


def test_llm_server_error(stack: Stack, llm_server_session: ScriptedLLMServer) -> None:
    """500 from the agent's model: a degraded answer naming the endpoint and the status."""
    job, record, story, _ = run_job(stack, llm_server_session, "[500]")
    assert_degraded(record, story, llm_server_session, "server error 500")


def test_router_model_error_falls_back_to_the_local_router(stack: Stack, llm_server_session: ScriptedLLMServer) -> None:
    """500 from the router's model too: the local router decides (routing_fallback says
    why), then the agent's 500 gives the degraded answer."""
    job, record, story, _ = run_job(stack, llm_server_session, "[router-500]")
    fallback = [e.data["data"] for e in story if e.event == "routing_fallback"]
    assert len(fallback) == 1 and "server error 500" in fallback[0]["reason"] and fallback[0]["classifier"] == "local"
    assert_degraded(record, story, llm_server_session, "server error 500")


def test_llm_stream_closed_mid_answer(stack: Stack, llm_server_session: ScriptedLLMServer) -> None:
    """The model's stream is cut after three pieces: the pieces that came were streamed,
    then the job ends with a degraded answer (not a hang, not a half answer as final)."""
    job, record, story, _ = run_job(stack, llm_server_session, "[cut]")
    assert "cut" in llm_server_session.streams
    deltas = "".join(e.data["data"]["text"] for e in story if e.event == "answer_delta")
    assert LONG_ANSWER.startswith(deltas) and len(deltas) < len(LONG_ANSWER)
    assert_degraded(record, story, llm_server_session, "peer closed connection without sending complete message body")


def test_llm_malformed_reply(stack: Stack, llm_server_session: ScriptedLLMServer) -> None:
    """A reply that is not the protocol: a job_error that says the reply was malformed."""
    job, record, story, _ = run_job(stack, llm_server_session, "[garbage]")
    assert record["status"] == "error", record
    assert "malformed reply" in record["error"] and "agent-model" in record["error"]
    assert story[-1].data["data"]["stage"] == "agent"


def test_llm_malformed_tool_calls(stack: Stack, llm_server_session: ScriptedLLMServer) -> None:
    """Tool calls with arguments that are not JSON, an unknown tool and a missing
    argument: each goes back to the model as "Tool error: ..." text and the model answers."""
    job, record, story, _ = run_job(stack, llm_server_session, "[bad-tools]")
    results = [e.data["data"] for e in story if e.event == "tool_result"]
    assert [r["ok"] for r in results] == [False, False, False]
    sent = tool_results(calls_for(llm_server_session, "agent-model", job.message)[-1])
    assert len(sent) == 3 and all(t.startswith("Tool error:") for t in sent)
    assert "not valid JSON" in sent[0] and "unknown tool 'no_such_tool'" in sent[1] and "query" in sent[2]
    assert record["status"] == "done" and record["result"]["answer"].startswith("Recovered.")


def test_router_model_slower_than_the_timeout(stack: Stack, llm_server_session: ScriptedLLMServer) -> None:
    """The router's model is too slow: the local router decides after the timeout
    (routing_fallback names it) and the job goes on to a normal answer."""
    job, record, story, took = run_job(stack, llm_server_session, "[router-slow]")
    fallback = [e.data["data"] for e in story if e.event == "routing_fallback"]
    assert len(fallback) == 1 and "Timeout" in fallback[0]["reason"], fallback
    assert record["status"] == "done" and "closest node is" in record["result"]["answer"], record
    assert len(calls_for(llm_server_session, "router-model", job.message)) == 1
    assert took < LLM_TIMEOUT + 2.5


def test_llm_that_never_stops_calling_tools(stack: Stack, llm_server_session: ScriptedLLMServer) -> None:
    """A model that calls a tool on every turn is stopped at AGENT_MAX_ITERATIONS: the
    job ends done with an answer that says so, after exactly that many model calls."""
    job, record, story, _ = run_job(stack, llm_server_session, "[loop]")
    assert record["status"] == "done", record
    assert f"stopped after {MAX_ITERATIONS} iterations" in record["result"]["answer"]
    assert len(calls_for(llm_server_session, "agent-model", job.message)) == MAX_ITERATIONS
    done = [e.data["data"] for e in story if e.event == "agent_done"]
    assert done == [{"iterations": MAX_ITERATIONS, "tool_calls": MAX_ITERATIONS, "capped": True, "sources": 0}]
