"""The gateway application: create_app builds the Starlette app; the lifespan runs
the SSE hub and the projector of this process and closes what it opened."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import redis.asyncio as aioredis
from starlette.applications import Starlette

from shared.bus.connection import connect
from shared.bus.keys import Keys
from shared.config import Settings
from shared.graph.client import GraphClient
from shared.logging import get_logger
from services.gateway import openapi, routes_chat, routes_health, routes_sessions, routes_web
from services.gateway.context import Gateway
from services.gateway.errors import EXCEPTION_HANDLERS
from services.gateway.projector import Projector
from services.gateway.ratelimit import RateLimiter
from services.gateway.sse import Hub

log = get_logger(__name__)


def blocking_twin(client: aioredis.Redis) -> aioredis.Redis:
    """A single-connection client to the same server without a socket timeout."""
    pool = client.connection_pool
    kwargs = {**pool.connection_kwargs, "socket_timeout": None}
    twin = aioredis.Redis(
        connection_pool=type(pool)(connection_class=pool.connection_class, **kwargs),
        single_connection_client=True,
    )
    twin.auto_close_connection_pool = True
    return twin


POOL_SIZE = 64
POOL_WAIT_SECONDS = 10.0


def gateway_client(url: str, size: int = POOL_SIZE) -> aioredis.Redis:
    """connect(url) with a bounded pool where a request waits for a free connection.

    redis-py's default pool refuses the 101st concurrent command ("Too many
    connections"), which turned a burst of 100+ requests into 503s.
    """
    client = connect(url)
    pool = client.connection_pool
    client.connection_pool = aioredis.BlockingConnectionPool(
        connection_class=pool.connection_class, max_connections=size, timeout=POOL_WAIT_SECONDS, **pool.connection_kwargs
    )
    return client


def create_app(settings: Settings, *, redis: aioredis.Redis | None = None, project: bool = True) -> Starlette:
    """The gateway app on `redis` (default: a client for settings.valkey_url).

    project=False leaves the projector off in this process (requests still apply
    their own events inline).
    """
    owns_client = redis is None
    client = gateway_client(settings.valkey_url) if redis is None else redis
    keys = Keys(settings.key_prefix)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        hub_conn = blocking_twin(client)
        gw: Gateway = app.state.gateway
        gw.hub.blocking = hub_conn
        await gw.hub.start()
        projector_task: asyncio.Task[None] | None = None
        projector: Projector | None = None
        if project:
            projector = Projector(client, blocking_twin(client), keys, settings.session_ttl_seconds)
            gw.extra["projector"] = projector
            projector_task = asyncio.create_task(projector.run(), name="projector")
        log.info("gateway_started", prefix=keys.prefix, projector=project)
        try:
            yield
        finally:
            await gw.hub.close()
            if projector is not None and projector_task is not None:
                await projector.close(projector_task)
                with contextlib.suppress(Exception):
                    await projector.blocking.aclose()
            with contextlib.suppress(Exception):
                await hub_conn.aclose()
            graph = gw.extra.get("graph")
            if isinstance(graph, GraphClient):
                await graph.aclose()
            if owns_client:
                await client.aclose()
            log.info("gateway_stopped")

    routes: list[Any] = [
        *routes_chat.routes, *routes_sessions.routes, *routes_health.routes, *openapi.routes, *routes_web.routes
    ]
    app = Starlette(routes=routes, exception_handlers=EXCEPTION_HANDLERS, lifespan=lifespan)
    app.state.gateway = Gateway(
        settings=settings,
        redis=client,
        keys=keys,
        hub=Hub(client, keys),
        limiter=RateLimiter(client, keys, settings.rate_limit_per_minute, settings.address_rate_limit),
    )
    return app
