"""The LLM client against the scripted server over real HTTP."""

import time

import pytest

from shared.llm import Endpoint, LLMClient, LLMError, LLMUnavailable
from shared.contracts import TokenUsage
from tests.fixtures.llm_server import Raw, Reply, ScriptedLLMServer, Status, free_port


def client_for(url: str, **kw: float) -> LLMClient:
    return LLMClient(Endpoint("openai", url, "k", "agent-model"), timeout=5, **kw)


async def test_reply_with_tool_calls_and_usage(llm_server: ScriptedLLMServer) -> None:
    llm_server.script = lambda body: Reply("thinking", [("vector_search", {"query": "TP53"})], 20, 5)
    reply = await client_for(llm_server.url).chat([{"role": "user", "content": "hi"}], tools=[])
    assert reply.content == "thinking"
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [("vector_search", '{"query": "TP53"}')]
    assert reply.usage == TokenUsage(20, 5)
    assert reply.as_message()["tool_calls"][0]["function"]["name"] == "vector_search"


async def test_429_is_retried_with_backoff(llm_server: ScriptedLLMServer) -> None:
    replies = iter([Status(429), Status(429), Reply("ok")])
    llm_server.script = lambda body: next(replies)
    started = time.monotonic()
    reply = await client_for(llm_server.url, max_retries=3, backoff=0.2).chat([{"role": "user", "content": "x"}])
    assert reply.content == "ok"
    assert len(llm_server.requests) == 3
    assert time.monotonic() - started >= 0.4


async def test_429_beyond_the_retries_is_unavailable(llm_server: ScriptedLLMServer) -> None:
    llm_server.script = lambda body: Status(429)
    with pytest.raises(LLMUnavailable, match="429"):
        await client_for(llm_server.url, max_retries=2, backoff=0.01).chat([{"role": "user", "content": "x"}])
    assert len(llm_server.requests) == 3


async def test_malformed_body_is_an_llm_error(llm_server: ScriptedLLMServer) -> None:
    llm_server.script = lambda body: Raw(b'{"choices": "nope"')
    with pytest.raises(LLMError):
        await client_for(llm_server.url).chat([{"role": "user", "content": "x"}])


async def test_server_error_and_unreachable_name_the_endpoint(llm_server: ScriptedLLMServer) -> None:
    llm_server.script = lambda body: Status(500)
    with pytest.raises(LLMUnavailable, match="server error 500"):
        await client_for(llm_server.url).chat([{"role": "user", "content": "x"}])
    dead = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(LLMUnavailable) as info:
        await client_for(dead).chat([{"role": "user", "content": "x"}])
    assert dead in str(info.value)


async def test_streamed_reply_passes_text_as_it_arrives(llm_server: ScriptedLLMServer) -> None:
    llm_server.script = lambda body: Reply("Apoptosis is programmed cell death.", chunk_chars=5, input_tokens=9, output_tokens=4)
    pieces: list[str] = []

    async def sink(text: str) -> None:
        pieces.append(text)

    reply = await client_for(llm_server.url).chat([{"role": "user", "content": "x"}], on_text=sink)
    assert llm_server.requests[0]["stream"] is True
    assert len(pieces) == 7 and "".join(pieces) == reply.content == "Apoptosis is programmed cell death."
    assert reply.usage == TokenUsage(9, 4) and reply.tool_calls == []


async def test_streamed_tool_calls_are_assembled(llm_server: ScriptedLLMServer) -> None:
    llm_server.script = lambda body: Reply(tool_calls=[("graph_query", {"cypher": "MATCH (n) RETURN count(n)"}), ("get_node_labels", {})])

    async def sink(text: str) -> None:
        raise AssertionError("no text expected")

    reply = await client_for(llm_server.url).chat([{"role": "user", "content": "x"}], tools=[], on_text=sink)
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [
        ("graph_query", '{"cypher": "MATCH (n) RETURN count(n)"}'),
        ("get_node_labels", "{}"),
    ]


async def test_stream_cut_mid_answer_is_unavailable(llm_server: ScriptedLLMServer) -> None:
    llm_server.script = lambda body: Reply("a long answer that never finishes", chunk_chars=4, cut_after=2)
    pieces: list[str] = []

    async def sink(text: str) -> None:
        pieces.append(text)

    with pytest.raises(LLMUnavailable):
        await client_for(llm_server.url).chat([{"role": "user", "content": "x"}], on_text=sink)
    assert pieces == ["a lo", "ng a"]
