"""Fixtures and helpers for the gateway tests (no tests here).

`gateway` is the real app over the session's Valkey with a fresh key prefix, its
lifespan running (SSE hub, projector), reached through httpx's ASGI transport;
`live_gateway` is the same app served by a real uvicorn on a free port, for SSE.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import msgspec
import pytest
import redis.asyncio as aioredis
import uvicorn
from starlette.applications import Starlette

from shared.bus.keys import Keys
from shared.bus.log import entry_id_str, publish
from shared.config import Settings, load_settings
from shared.contracts import ChatResponse, EventRecord
from services.gateway.app import create_app
from services.gateway.projector import position_key

ALICE = {"X-Anon-Id": "alice"}
BOB = {"X-Anon-Id": "bob"}


def gateway_settings(redis_url: str, keys: Keys, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "valkey_url": redis_url,
        "key_prefix": keys.prefix,
        "rate_limit_per_minute": 1000,
        "sse_ping_seconds": 0.5,
        "log_format": "console",
        "turingdb_port": 9,  # nothing listens: /readyz reports TuringDB down unless a test says otherwise
    }
    values.update(overrides)
    return load_settings({}, **values)


@dataclass
class GatewayUnderTest:
    app: Starlette
    client: httpx.AsyncClient
    redis: aioredis.Redis
    keys: Keys
    settings: Settings
    url: str = ""
    published: list[str] = field(default_factory=list)

    async def post(self, message: str, headers: dict[str, str] | None = None, session_id: str | None = None) -> httpx.Response:
        body: dict[str, Any] = {"message": message}
        if session_id is not None:
            body["session_id"] = session_id
        return await self.client.post("/chat/message", json=body, headers=headers or {})

    async def emit(self, *events: EventRecord) -> list[str]:
        """Write events the way the workers do (one MULTI); their entry ids."""
        ids = [entry_id_str(i) for i in await publish(self.redis, self.keys, list(events))]
        self.published += ids
        return ids

    async def counts(self) -> tuple[int, int]:
        """(entries in the event log, entries in the router's inbox)."""
        return await self.redis.xlen(self.keys.events), await self.redis.xlen(self.keys.inbox("router"))

    async def projected(self, timeout: float = 5.0) -> None:
        """Wait until the projector has applied the whole log."""
        deadline = time.monotonic() + timeout
        while True:
            last = await self.redis.xrevrange(self.keys.events, count=1)
            pos = await self.redis.get(position_key(self.keys))
            if not last or (pos is not None and pos == last[0][0]):
                return
            assert time.monotonic() < deadline, "the projector did not catch up"
            await asyncio.sleep(0.02)


def job_story(job_id: str, session_id: str, *, answer: str = "the answer", route: str = "agent", confidence: float = 0.9) -> list[EventRecord]:
    """The events a router and an agent would write for one job, job_done last."""
    result = ChatResponse(session_id, answer, route)  # type: ignore[arg-type]
    return [
        EventRecord("routing_started", job_id, session_id, {}),
        EventRecord("routing_done", job_id, session_id, {"route": route, "confidence": confidence}),
        EventRecord("agent_step", job_id, session_id, {"iteration": 1}),
        EventRecord("tool_call", job_id, session_id, {"name": "vector_search", "arguments": {"query": "x"}}),
        EventRecord("tool_result", job_id, session_id, {"name": "vector_search", "preview": "...", "duration": 0.01}),
        EventRecord("job_done", job_id, session_id, {"result": msgspec.to_builtins(result)}),
    ]


@pytest.fixture
async def gateway_factory(redis: aioredis.Redis, redis_url: str, keys: Keys) -> AsyncIterator[Callable[..., Awaitable[GatewayUnderTest]]]:
    """Build gateways on this test's prefix: factory(project=True, **setting overrides)."""
    stack: list[Any] = []

    async def make(project: bool = True, **overrides: Any) -> GatewayUnderTest:
        settings = gateway_settings(redis_url, keys, **overrides)
        app = create_app(settings, redis=redis, project=project)
        lifespan = app.router.lifespan_context(app)
        await lifespan.__aenter__()
        stack.append(lifespan)
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gateway")
        stack.append(client)
        return GatewayUnderTest(app, client, redis, keys, settings)

    yield make
    for item in reversed(stack):
        if isinstance(item, httpx.AsyncClient):
            await item.aclose()
        else:
            await item.__aexit__(None, None, None)


@pytest.fixture
async def gateway(gateway_factory: Callable[..., Awaitable[GatewayUnderTest]]) -> GatewayUnderTest:
    return await gateway_factory()


@pytest.fixture
async def live_factory(redis: aioredis.Redis, redis_url: str, keys: Keys) -> AsyncIterator[Callable[..., Awaitable[GatewayUnderTest]]]:
    """Gateways served by a real uvicorn on a free port: factory(project=True, **overrides)."""
    servers: list[tuple[uvicorn.Server, asyncio.Task[None], httpx.AsyncClient]] = []

    async def make(project: bool = True, **overrides: Any) -> GatewayUnderTest:
        settings = gateway_settings(redis_url, keys, **overrides)
        app = create_app(settings, redis=redis, project=project)
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, lifespan="on", log_config=None, access_log=False))
        task = asyncio.create_task(server.serve())
        while not server.started:
            assert not task.done(), "uvicorn did not start"
            await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        url = f"http://127.0.0.1:{port}"
        client = httpx.AsyncClient(base_url=url, timeout=10)
        servers.append((server, task, client))
        return GatewayUnderTest(app, client, redis, keys, settings, url)

    yield make
    for server, task, client in reversed(servers):
        await client.aclose()
        server.should_exit = True
        await asyncio.wait_for(task, 10)


@pytest.fixture
async def live_gateway(live_factory: Callable[..., Awaitable[GatewayUnderTest]]) -> GatewayUnderTest:
    return await live_factory()


@dataclass
class Frame:
    id: str
    event: str
    data: dict[str, Any]


@dataclass
class Stream:
    frames: list[Frame] = field(default_factory=list)
    pings: int = 0
    status: int = 0
    closed: bool = False


async def read_sse(client: httpx.AsyncClient, path: str, headers: dict[str, str] | None = None, *, timeout: float = 10) -> Stream:
    """Read an SSE response to its end (the server closes it), frames and pings counted."""
    out = Stream()
    frame: dict[str, str] = {}

    async def run() -> None:
        async with client.stream("GET", path, headers=headers or {}) as response:
            out.status = response.status_code
            if response.status_code != 200:
                await response.aread()
                return
            assert response.headers["content-type"].startswith("text/event-stream")
            async for line in response.aiter_lines():
                if line == "":
                    if "data" in frame:
                        out.frames.append(Frame(frame.get("id", ""), frame.get("event", ""), json.loads(frame["data"])))
                    frame.clear()
                elif line.startswith(":"):
                    out.pings += line.startswith(": ping")
                else:
                    name, _, value = line.partition(":")
                    frame[name] = value[1:] if value.startswith(" ") else value
        out.closed = True

    await asyncio.wait_for(run(), timeout)
    return out
