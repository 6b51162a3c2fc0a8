"""CLI target: `chat-agent search "text" [--k N] [--json]`."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from shared.config import Settings
from shared.graph.client import GraphClient
from shared.graph.errors import GraphError
from shared.logging import configure_logging
from shared.rag.embedder import load_embedder
from shared.rag.search import vector_search


def search(settings: Settings, args: argparse.Namespace) -> int:
    """Print the top-k nodes for a text: a table, or one JSON object per line with --json."""
    configure_logging(settings, "search")
    embedder = load_embedder(settings)

    async def run() -> list[dict[str, Any]]:
        async with GraphClient.from_settings(settings) as client:
            return await vector_search(client, embedder, args.text, args.k, settings)

    try:
        results = asyncio.run(run())
    except GraphError as exc:
        print(f"chat-agent: {exc}", file=sys.stderr)
        return 1
    for r in results:
        if getattr(args, "json", False):
            print(json.dumps({k: r[k] for k in ("stId", "displayName", "labels", "score", "id")}, ensure_ascii=False))
        else:
            print(f"{r['score']:.3f}  {r['stId'] or '-':<16} {'/'.join(r['labels']):<28} {r['displayName']}")
    return 0
