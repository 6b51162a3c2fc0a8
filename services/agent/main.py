"""`chat-agent agent`: one consumer of the agent inbox."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from shared.config import Settings
from shared.graph.client import GraphClient
from shared.llm import LLMClient, resolve_endpoint
from shared.logging import configure_logging
from shared.rag.embedder import load_embedder
from shared.service import serve_worker

from services.agent.handler import AgentHandler


@asynccontextmanager
async def agent_handler(settings: Settings) -> AsyncIterator[AgentHandler]:
    llm = LLMClient(
        resolve_endpoint(settings, "agent"),
        timeout=settings.llm_timeout_seconds,
        max_retries=settings.llm_max_retries,
        backoff=settings.llm_retry_backoff_seconds,
    )
    graph = GraphClient.from_settings(settings)
    try:
        yield AgentHandler(settings, llm, graph, load_embedder(settings))
    finally:
        await graph.aclose()
        await llm.close()


def run(settings: Settings, args: argparse.Namespace) -> int:
    configure_logging(settings, "agent")
    resolve_endpoint(settings, "agent")  # a missing MISTRAL_API_KEY stops start-up here
    asyncio.run(serve_worker(settings, "agent", agent_handler, getattr(args, "consumer", None)))
    return 0
