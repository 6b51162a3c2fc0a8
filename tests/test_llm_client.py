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
