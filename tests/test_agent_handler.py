"""The agent service's handler through a real consumer group: results, degraded answers, errors."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import redis.asyncio as aioredis

from shared.bus import Keys
from shared.bus.log import publish
from shared.bus.worker import Worker
from shared.config import Settings
from shared.contracts import ChatResponse, JobTask, RouterDecision, TokenUsage
from shared.graph.client import GraphClient
from shared.llm import Endpoint, LLMClient
from shared.rag.embedder import load_embedder

from services.agent.handler import AgentHandler
from tests.bus_helpers import wait_events
from tests.fixtures.llm_server import Raw, Reply, ScriptedLLMServer, free_port


async def run_job(redis: aioredis.Redis, redis_url: str, keys: Keys, settings: Settings, llm_url: str, message: str) -> list[Any]:
    graph = GraphClient.from_settings(settings)
    llm = LLMClient(Endpoint("ollama", llm_url, "k", "agent-model"), timeout=3, max_retries=1, backoff=0.01)
    handler = AgentHandler(settings, llm, graph, load_embedder(settings))
    decision = RouterDecision("agent", 0.9, "why", TokenUsage(100, 10))
    await publish(redis, keys, [], [("agent", JobTask("job-a", "s-a", message, decision=decision))])
    worker = Worker(redis_url, keys, "agent", handler, block_ms=100)
    running = asyncio.create_task(worker.run())
    try:
        return await wait_events(redis, keys, lambda evs: any(e.type in ("job_done", "job_error") for e in evs), timeout=30)
    finally:
        worker.stop()
        await running
        await graph.aclose()
        await llm.close()


async def test_answer_sums_router_and_agent_tokens(redis: aioredis.Redis, redis_url: str, keys: Keys, graph_settings: Settings, loaded_graph: Any, llm_server: ScriptedLLMServer) -> None:
    llm_server.script = lambda body: Reply("Apoptosis is programmed cell death.", input_tokens=40, output_tokens=12)
    events = await run_job(redis, redis_url, keys, graph_settings, llm_server.url, "what is apoptosis?")
    assert [e.type for e in events] == ["agent_step", "answer_delta", "agent_done", "job_done"]
    assert events[1].data["text"] == "Apoptosis is programmed cell death."
    response = msgspec.convert(events[-1].data["result"], ChatResponse)
    assert response.answer == "Apoptosis is programmed cell death."
    assert response.route_taken == "agent" and response.token_usage == TokenUsage(140, 22)
    system = llm_server.requests[0]["messages"][0]["content"]
    assert "Pathway" in system and "RETURN n" in system  # the skeleton and the Cypher notes


async def test_unreachable_llm_still_ends_with_graph_matches(redis: aioredis.Redis, redis_url: str, keys: Keys, graph_settings: Settings, loaded_graph: Any) -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1"
    events = await run_job(redis, redis_url, keys, graph_settings, dead, "Intrinsic Pathway for Apoptosis")
    assert events[-1].type == "job_done"
    response = msgspec.convert(events[-1].data["result"], ChatResponse)
    assert response.route_taken == "lookup"
    assert dead in response.answer and "could not be reached" in response.answer
    assert response.sources and response.sources[0]["displayName"] == "Intrinsic Pathway for Apoptosis"
    assert "agent_degraded" in [e.type for e in events]


async def test_refused_request_is_a_clear_job_error(redis: aioredis.Redis, redis_url: str, keys: Keys, graph_settings: Settings, loaded_graph: Any, llm_server: ScriptedLLMServer) -> None:
    from tests.fixtures.llm_server import Status

    llm_server.script = lambda body: Status(400, "model not found")
    events = await run_job(redis, redis_url, keys, graph_settings, llm_server.url, "hello")
    assert events[-1].type == "job_error"
    assert "refused the request" in events[-1].data["error"] and "400" in events[-1].data["error"]


async def test_garbage_reply_is_a_clear_job_error(redis: aioredis.Redis, redis_url: str, keys: Keys, graph_settings: Settings, loaded_graph: Any, llm_server: ScriptedLLMServer) -> None:
    llm_server.script = lambda body: Raw(b"<html>oops</html>", "text/html")
    events = await run_job(redis, redis_url, keys, graph_settings, llm_server.url, "hello")
    assert events[-1].type == "job_error"
    assert "malformed" in events[-1].data["error"]
