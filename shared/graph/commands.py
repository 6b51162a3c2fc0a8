"""CLI targets: `chat-agent graph load|skeleton|serve` and `chat-agent cypher`."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import Any

from shared.config import Settings
from shared.graph.client import GraphClient
from shared.graph.cypher_gate import graph_query
from shared.graph.errors import GraphError
from shared.graph.loader import load_graph
from shared.graph.server import TuringDBServer, ensure_server, turing_dir
from shared.graph.skeleton import graph_skeleton
from shared.logging import configure_logging


def _fail(exc: GraphError) -> int:
    print(f"chat-agent: {exc}", file=sys.stderr)
    return 1


def load(settings: Settings, args: argparse.Namespace) -> int:
    """Build the graph and its vector index (idempotent)."""
    configure_logging(settings, "graph")
    data_dir = Path(args.data_dir) if getattr(args, "data_dir", None) else None
    try:
        load_graph(settings, data_dir=data_dir, force=bool(getattr(args, "force", False)), progress=lambda m: print(m, flush=True))
    except GraphError as exc:
        return _fail(exc)
    return 0


def skeleton(settings: Settings, args: argparse.Namespace) -> int:
    """Print the compact graph overview (cached)."""
    configure_logging(settings, "graph")

    async def run() -> str:
        async with GraphClient.from_settings(settings) as client:
            await client.ensure_loaded()
            return await graph_skeleton(client, settings, refresh=bool(getattr(args, "refresh", False)))

    server = ensure_server(settings)
    try:
        print(asyncio.run(run()))
    except GraphError as exc:
        return _fail(exc)
    finally:
        if server is not None:
            server.stop()
    return 0


def serve(settings: Settings, args: argparse.Namespace) -> int:
    """Run an embedded TuringDB server in the foreground until Ctrl-C / SIGTERM."""
    configure_logging(settings, "turingdb")
    directory = turing_dir(settings)
    on_disk = (directory / "graphs" / settings.turingdb_graph).exists()
    server = TuringDBServer(directory, settings.turingdb_port, load=[settings.turingdb_graph] if on_disk else [])
    try:
        server.start()
    except GraphError as exc:
        return _fail(exc)
    print(f"TuringDB serving {server.url} (dir {directory}); Ctrl-C to stop", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        return server.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        server.stop()


def _json_default(value: Any) -> Any:
    return str(value)


def cypher(settings: Settings, args: argparse.Namespace) -> int:
    """Run one read-only, bounded query; a table, or JSON lines with --json."""
    configure_logging(settings, "graph")

    async def run() -> Any:
        async with GraphClient.from_settings(settings) as client:
            return await graph_query(client, args.query, settings.cypher_max_rows, settings.cypher_timeout_seconds)

    try:
        result = asyncio.run(run())
    except GraphError as exc:
        return _fail(exc)
    if getattr(args, "json", False):
        for row in result.rows:
            print(json.dumps(row, ensure_ascii=False, default=_json_default))
    else:
        columns = result.columns or (list(result.rows[0]) if result.rows else [])
        print("\t".join(columns))
        for row in result.rows:
            print("\t".join("" if row.get(c) is None else str(row.get(c)) for c in columns))
        print(f"({len(result.rows)} rows)", file=sys.stderr)
    if result.truncated:
        print(result.note, file=sys.stderr)
    return 0
