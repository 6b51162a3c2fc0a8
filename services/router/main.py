"""`chat-agent router`: one consumer of the router inbox."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from shared.config import Settings
from shared.llm import LLMClient, resolve_endpoint
from shared.logging import configure_logging
from shared.rag.embedder import load_embedder
from shared.service import serve_worker

from services.router.handler import RouterHandler
from services.router.local import LocalRouter


@asynccontextmanager
async def router_handler(settings: Settings) -> AsyncIterator[RouterHandler]:
    local = LocalRouter(load_embedder(settings))
    llm = None
    if settings.effective_router_provider != "local":
        llm = LLMClient(
            resolve_endpoint(settings, "router"),
            timeout=settings.llm_timeout_seconds,
            max_retries=settings.llm_max_retries,
            backoff=settings.llm_retry_backoff_seconds,
        )
    try:
        yield RouterHandler(settings, llm, local)
    finally:
        if llm is not None:
            await llm.close()


def run(settings: Settings, args: argparse.Namespace) -> int:
    configure_logging(settings, "router")
    if settings.effective_router_provider != "local":
        resolve_endpoint(settings, "router")  # a missing key stops start-up here
    asyncio.run(serve_worker(settings, "router", router_handler, getattr(args, "consumer", None)))
    return 0
