"""The lookup service: real vector search on the fixture graph, Markdown answer, no LLM."""

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
from shared.rag.embedder import load_embedder
from shared.rag.search import vector_search

from services.lookup.handler import LookupHandler
from tests.bus_helpers import wait_events
from tests.fixtures.llm_server import free_port


async def run_lookup(redis: aioredis.Redis, redis_url: str, keys: Keys, settings: Settings, message: str) -> list[Any]:
    embedder = load_embedder(settings)
    graph = GraphClient.from_settings(settings)

    async def search(text: str, k: int) -> list[dict[str, Any]]:
        return await vector_search(graph, embedder, text, k, settings)

    decision = RouterDecision("lookup", 0.9, "node", TokenUsage(30, 5))
    await publish(redis, keys, [], [("lookup", JobTask("job-9", "s-9", message, decision=decision))])
    worker = Worker(redis_url, keys, "lookup", LookupHandler(settings, search), block_ms=100)
    running = asyncio.create_task(worker.run())
    try:
        return await wait_events(redis, keys, lambda evs: any(e.type in ("job_done", "job_error") for e in evs))
    finally:
        worker.stop()
        await running
        await graph.aclose()


async def test_lookup_answers_with_markdown_and_sources(redis: aioredis.Redis, redis_url: str, keys: Keys, graph_settings: Settings, loaded_graph: Any) -> None:
    events = await run_lookup(redis, redis_url, keys, graph_settings, "Intrinsic Pathway for Apoptosis")
    assert [e.type for e in events] == ["lookup_started", "lookup_results", "job_done"]
    response = msgspec.convert(events[-1].data["result"], ChatResponse)
    assert response.route_taken == "lookup" and response.session_id == "s-9"
    assert len(response.sources) == graph_settings.vector_search_top_k
    first = response.sources[0]
    assert first["displayName"] == "Intrinsic Pathway for Apoptosis"
    assert response.answer.startswith(f"### {first['displayName']}")
    assert f"`{first['stId']}`" in response.answer
    assert response.token_usage == TokenUsage(30, 5)
    assert events[1].data["count"] == len(response.sources)


async def test_lookup_with_the_graph_down_ends_with_a_clear_error(redis: aioredis.Redis, redis_url: str, keys: Keys, graph_settings: Settings, loaded_graph: Any) -> None:
    down = msgspec.structs.replace(graph_settings, turingdb_port=free_port())
    events = await run_lookup(redis, redis_url, keys, down, "apoptosis")
    assert events[-1].type == "job_error"
    assert "graph database could not be searched" in events[-1].data["error"]
