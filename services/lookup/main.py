"""`chat-agent lookup`: one consumer of the lookup inbox."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from shared.config import Settings
from shared.graph.client import GraphClient
from shared.logging import configure_logging
from shared.rag.embedder import load_embedder
from shared.rag.search import vector_search
from shared.service import serve_worker

from services.lookup.handler import LookupHandler


@asynccontextmanager
async def lookup_handler(settings: Settings) -> AsyncIterator[LookupHandler]:
    embedder = load_embedder(settings)
    graph = GraphClient.from_settings(settings)

    async def search(text: str, k: int) -> list[dict[str, Any]]:
        return await vector_search(graph, embedder, text, k, settings)

    try:
        yield LookupHandler(settings, search)
    finally:
        await graph.aclose()


def run(settings: Settings, args: argparse.Namespace) -> int:
    configure_logging(settings, "lookup")
    asyncio.run(serve_worker(settings, "lookup", lookup_handler, getattr(args, "consumer", None)))
    return 0
