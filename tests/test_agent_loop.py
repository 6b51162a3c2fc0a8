"""The agent loop against the scripted LLM over HTTP and the real TuringDB fixture graph."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.config import Settings
from shared.contracts import TokenUsage
from shared.graph.client import GraphClient
from shared.llm import Endpoint, LLMClient
from shared.rag.embedder import load_embedder

from services.agent.loop import run_agent
from services.agent.prompt import system_prompt
from services.agent.tools import TOOL_MAP, TOOLS, ToolContext, run_tool
from tests.fixtures.llm_server import Reply, ScriptedLLMServer, Status, tool_results


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    async def __call__(self, type: str, data: dict[str, Any]) -> None:
        self.events.append((type, data))

    def types(self) -> list[str]:
        return [t for t, _ in self.events]


@pytest.fixture
def llm(llm_server: ScriptedLLMServer) -> LLMClient:
    return LLMClient(Endpoint("openai", llm_server.url, "k", "agent-model"), timeout=10, max_retries=3, backoff=0.05)


@pytest.fixture
def ctx(graph_settings: Settings, loaded_graph: Any, graph_client: GraphClient) -> ToolContext:
    return ToolContext(graph_settings, graph_client, load_embedder(graph_settings))


def test_eight_tools_with_schemas() -> None:
    names = [t["function"]["name"] for t in TOOLS]
    assert names == list(TOOL_MAP) and len(names) == 8
    assert set(names) == {
        "get_graph_overview", "vector_search", "graph_query", "get_node_labels",
        "get_edge_types", "get_node_properties", "get_edge_patterns", "get_sample_nodes",
    }
    for tool in TOOLS:
        assert tool["type"] == "function" and tool["function"]["parameters"]["type"] == "object"


async def test_every_tool_runs_on_the_real_graph(ctx: ToolContext) -> None:
    calls = {
        "get_graph_overview": {},
        "vector_search": {"query": "programmed cell death", "k": 3},
        "graph_query": {"cypher": "MATCH (p:Pathway) RETURN p.displayName AS name LIMIT 2"},
        "get_node_labels": {},
        "get_edge_types": {},
        "get_node_properties": {"label": "Pathway"},
        "get_edge_patterns": {},
        "get_sample_nodes": {"label": "Pathway", "limit": 2},
    }
    for name, args in calls.items():
        text, ok = await run_tool(ctx, name, json.dumps(args))
        assert ok, (name, text)
        assert text and not text.startswith("Tool error")
    assert "Pathway" in (await run_tool(ctx, "get_node_labels", "{}"))[0]
    assert ctx.sources and all("stId" in s for s in ctx.sources)


async def test_tool_errors_are_text_for_the_model(ctx: ToolContext) -> None:
    cases = [
        ("graph_query", json.dumps({"cypher": "MATCH (n) DETACH DELETE n"})),
        ("graph_query", json.dumps({"cypher": "MATCH (n RETURN n"})),
        ("graph_query", "{not json"),
        ("no_such_tool", "{}"),
        ("get_node_properties", "{}"),
    ]
    for name, arguments in cases:
        text, ok = await run_tool(ctx, name, arguments)
        assert not ok and text.startswith("Tool error:"), (name, text)
    refused, _ = await run_tool(ctx, "graph_query", json.dumps({"cypher": "CREATE (n:Pathway {displayName: 'x'})"}))
    assert "Tool error" in refused
    count = await ctx.graph.query("MATCH (n:Pathway) WHERE n.displayName = 'x' RETURN count(n) AS c")
    assert count[0]["c"] == 0


async def test_loop_uses_tools_then_answers_from_their_results(llm: LLMClient, ctx: ToolContext, llm_server: ScriptedLLMServer) -> None:
    def script(body: dict[str, Any]) -> Reply:
        results = tool_results(body)
        if not results:
            return Reply(tool_calls=[("vector_search", {"query": "intrinsic pathway for apoptosis"}), ("get_node_labels", {})])
        hits = json.loads(results[0])
        return Reply(f"Top match: {hits[0]['displayName']} ({hits[0]['stId']})")

    llm_server.script = script
    recorder = Recorder()
    result = await run_agent(llm, ctx, system_prompt("skeleton text"), [], "What is apoptosis?", recorder)
    assert result.iterations == 2 and not result.capped and result.tool_calls == 2
    assert recorder.types() == ["agent_step", "tool_call", "tool_result", "tool_call", "tool_result", "agent_step", "answer_delta"]
    assert result.sources and result.sources[0]["displayName"] in result.answer
    assert result.usage == TokenUsage(22, 14)
    tool_result = recorder.events[2][1]
    assert tool_result["name"] == "vector_search" and tool_result["ok"] and tool_result["duration_ms"] >= 0
    first = llm_server.requests[0]
    assert first["messages"][0]["role"] == "system" and "skeleton text" in first["messages"][0]["content"]
    assert [t["function"]["name"] for t in first["tools"]] == list(TOOL_MAP)


async def test_malformed_tool_arguments_go_back_and_the_loop_continues(llm: LLMClient, ctx: ToolContext, llm_server: ScriptedLLMServer) -> None:
    def script(body: dict[str, Any]) -> Reply:
        results = tool_results(body)
        if not results:
            return Reply(tool_calls=[("graph_query", '{"cypher": "MATCH (n) RETURN')])
        return Reply(f"I saw: {results[0][:40]}")

    llm_server.script = script
    result = await run_agent(llm, ctx, "sys", [], "count things", Recorder())
    assert result.answer.startswith("I saw: Tool error: arguments are not valid JSON")


async def test_endless_tool_loop_hits_the_cap(llm: LLMClient, ctx: ToolContext, llm_server: ScriptedLLMServer) -> None:
    llm_server.script = lambda body: Reply("still looking", [("get_edge_types", {})])
    recorder = Recorder()
    result = await run_agent(llm, ctx, "sys", [], "loop forever", recorder, max_iterations=32)
    assert result.capped and result.iterations == 32
    assert len(llm_server.requests) == 32
    assert recorder.types().count("agent_step") == 32
    assert "32 iterations" in result.answer and "still looking" in result.answer


async def test_429s_are_retried_inside_the_loop(llm: LLMClient, ctx: ToolContext, llm_server: ScriptedLLMServer) -> None:
    replies = iter([Status(429), Status(429), Reply("fine")])
    llm_server.script = lambda body: next(replies)
    result = await run_agent(llm, ctx, "sys", [], "hi", Recorder())
    assert result.answer == "fine" and len(llm_server.requests) == 3



async def test_history_is_sent_before_the_question(llm: LLMClient, ctx: ToolContext, llm_server: ScriptedLLMServer) -> None:
    llm_server.script = lambda body: Reply("ok")
    history = [{"role": "user", "content": "earlier q"}, {"role": "assistant", "content": "earlier a"}]
    await run_agent(llm, ctx, "sys", history, "now", Recorder())
    sent = [(m["role"], m["content"]) for m in llm_server.requests[0]["messages"]]
    assert sent == [("system", "sys"), ("user", "earlier q"), ("assistant", "earlier a"), ("user", "now")]


async def test_final_answer_streams_as_coalesced_deltas(llm: LLMClient, ctx: ToolContext, llm_server: ScriptedLLMServer) -> None:
    answer = "Apoptosis is a regulated form of cell death that removes damaged cells. " * 3
    llm_server.script = lambda body: Reply(answer, chunk_chars=4, chunk_delay=0.01)
    recorder = Recorder()
    result = await run_agent(llm, ctx, "sys", [], "what is apoptosis?", recorder)
    deltas = [d for t, d in recorder.events if t == "answer_delta"]
    pieces = -(-len(answer) // 4)
    assert "".join(d["text"] for d in deltas) == answer and result.answer == answer.strip()
    assert 1 < len(deltas) < pieces / 2, (len(deltas), pieces)
    assert all(d["iteration"] == 1 for d in deltas)
    assert llm_server.streams == ["finished"]


async def test_cancel_closes_the_running_stream(llm: LLMClient, ctx: ToolContext, llm_server: ScriptedLLMServer) -> None:
    import asyncio
    import time

    from services.agent.loop import JobCancelled

    llm_server.script = lambda body: Reply("word " * 400, chunk_chars=5, chunk_delay=0.02)
    asked_at: list[float] = []

    async def should_stop() -> str | None:
        if not asked_at:
            asked_at.append(time.monotonic())
        return "user asked" if time.monotonic() - asked_at[0] > 0.6 else None

    recorder = Recorder()
    with pytest.raises(JobCancelled) as info:
        await run_agent(llm, ctx, "sys", [], "talk a lot", recorder, should_stop=should_stop)
    assert info.value.reason == "user asked" and info.value.iteration == 1
    streamed = "".join(d["text"] for t, d in recorder.events if t == "answer_delta")
    assert 0 < len(streamed) < len("word " * 400)
    deadline = time.monotonic() + 5
    while not llm_server.streams and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert llm_server.streams == ["abandoned"]


async def test_cancel_between_tool_calls(llm: LLMClient, ctx: ToolContext, llm_server: ScriptedLLMServer) -> None:
    from services.agent.loop import JobCancelled

    llm_server.script = lambda body: Reply(tool_calls=[("get_node_labels", {}), ("get_edge_types", {})])
    recorder = Recorder()

    async def should_stop() -> str | None:
        return "stop now" if recorder.types().count("tool_result") >= 1 else None

    with pytest.raises(JobCancelled):
        await run_agent(llm, ctx, "sys", [], "q", recorder, should_stop=should_stop)
    assert recorder.types().count("tool_call") == 1
