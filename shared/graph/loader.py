"""`graph load`: build TURINGDB_GRAPH from data/reactome with one LOAD JSONL, then the vector index.

Idempotent: the graph carries a LoadInfo node with the fingerprint of its input files;
when it matches, nothing is rebuilt. LOAD JSONL is all-or-nothing on the server (a bad
file creates no graph), and the graph is checked against the expected counts after.
TuringDB 3.0.2 has no DROP GRAPH, so replacing a stale graph needs the embedded server:
it is stopped, the graph's folder removed, and the server started again.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shared.config import Settings
from shared.graph.client import GraphClient
from shared.graph.errors import GraphError, LoadError
from shared.graph.reactome import DataError, GraphData, build_graph
from shared.graph.server import TuringDBServer, ensure_server, turing_dir

Progress = Callable[[str], None]
META_LABEL = "LoadInfo"


@dataclass
class LoadReport:
    """What `load_graph` did, with counts and timings."""

    graph: str
    changed: bool
    nodes: int
    edges: int
    labels: dict[str, int] = field(default_factory=dict)
    edge_types: dict[str, int] = field(default_factory=dict)
    index_name: str = ""
    vectors: int = 0
    index_changed: bool = False
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)

    def summary(self) -> str:
        state = "built" if self.changed else "unchanged"
        index = "rebuilt" if self.index_changed else "unchanged"
        return (
            f"graph {self.graph} {state}: {self.nodes:,} nodes, {self.edges:,} edges; "
            f"vector index {self.index_name} {index} ({self.vectors:,} vectors); {self.seconds:.1f} s"
        )


def write_jsonl(data: GraphData, path: Path, meta: dict[str, Any]) -> None:
    """APOC-style JSONL: nodes 0..N-1 (the LoadInfo node last), then edges 0..M-1."""
    dumps = json.dumps
    with path.open("w", encoding="utf-8") as out:
        for labels, props in data.nodes:
            out.write(dumps({"type": "node", "id": str(props["key"]), "labels": labels, "properties": props}, ensure_ascii=False))
            out.write("\n")
        meta_id = len(data.nodes)
        out.write(dumps({"type": "node", "id": str(meta_id), "labels": [META_LABEL], "properties": {"key": meta_id, **meta}}))
        out.write("\n")
        for number, (type_, start, end, props) in enumerate(data.edges):
            line: dict[str, Any] = {"type": "relationship", "id": str(number), "label": type_, "start": {"id": str(start)}, "end": {"id": str(end)}}
            if props:
                line["properties"] = props
            out.write(dumps(line))
            out.write("\n")


async def read_meta(client: GraphClient, graph: str) -> dict[str, Any] | None:
    """The LoadInfo properties of `graph`, or None."""
    rows = await client.query(
        f"MATCH (m:{META_LABEL}) RETURN m.fingerprint AS fingerprint, m.nodeCount AS nodeCount, m.edgeCount AS edgeCount",
        graph=graph,
    )
    return rows[0] if rows else None


async def graph_counts(client: GraphClient, graph: str) -> tuple[int, int]:
    """(nodes, edges) actually in `graph`, the LoadInfo node excluded."""
    nodes = await client.query("MATCH (n) RETURN count(n) AS c", graph=graph)
    edges = await client.query("MATCH ()-[e]->() RETURN count(e) AS c", graph=graph)
    return int(nodes[0]["c"]) - 1, int(edges[0]["c"])


async def is_current(client: GraphClient, graph: str, data: GraphData) -> bool:
    """True when `graph` exists, is loaded, and holds exactly this build."""
    if not await client.ensure_loaded(graph):
        return False
    meta = await read_meta(client, graph)
    if not meta or meta.get("fingerprint") != data.fingerprint:
        return False
    return await graph_counts(client, graph) == (len(data.nodes), len(data.edges))


async def import_jsonl(client: GraphClient, jsonl: Path, graph: str) -> None:
    """LOAD JSONL `jsonl` (a file in the server's data folder) AS `graph`."""
    await client.query(f"LOAD JSONL '{jsonl.name}' AS {graph}", graph="default", timeout=600.0)


def _remove_graph_files(server: TuringDBServer, graph: str) -> None:
    server.stop()
    shutil.rmtree(server.directory / "graphs" / graph, ignore_errors=True)
    server.load = [g for g in server.load if g != graph]
    server.start()


async def _load(
    settings: Settings, data: GraphData, server: TuringDBServer | None, force: bool, progress: Progress, timings: dict[str, float]
) -> bool:
    graph = settings.turingdb_graph
    async with GraphClient.from_settings(settings) as client:
        t0 = time.perf_counter()
        exists = graph in await client.graphs()
        if exists and not force and await is_current(client, graph, data):
            progress(f"graph {graph} is up to date (fingerprint {data.fingerprint}), nothing to do")
            timings["check"] = time.perf_counter() - t0
            return False
    if exists:
        if server is None:
            raise LoadError(
                None,
                f"graph {graph} exists on the server at {settings.turingdb_url}:{settings.turingdb_port} but is "
                f"{'to be forced' if force else 'out of date'}; TuringDB 3.0.2 cannot drop a graph over Cypher. "
                f"Stop that server and run `chat-agent graph load{' --force' if force else ''}` again (it will start its "
                "own), or set another TURINGDB_GRAPH",
            )
        progress(f"graph {graph} is {'forced' if force else 'out of date'}: removing it and restarting the server")
        await asyncio.to_thread(_remove_graph_files, server, graph)
    data_dir = server.data_dir if server else turing_dir(settings) / "data"
    if not data_dir.is_dir():
        raise LoadError(None, f"cannot write import files for the server at {settings.turingdb_url}: no folder {data_dir}")
    jsonl = data_dir / f"{graph}.{data.fingerprint}.jsonl"
    t1 = time.perf_counter()
    meta = {"fingerprint": data.fingerprint, "nodeCount": len(data.nodes), "edgeCount": len(data.edges), "builtAt": time.time()}
    await asyncio.to_thread(write_jsonl, data, jsonl, meta)
    timings["write_jsonl"] = time.perf_counter() - t1
    progress(f"wrote {jsonl.name} ({jsonl.stat().st_size / 1e6:.1f} MB) in {timings['write_jsonl']:.1f} s; importing")
    t2 = time.perf_counter()
    try:
        async with GraphClient.from_settings(settings) as client:
            await import_jsonl(client, jsonl, graph)
            timings["import"] = time.perf_counter() - t2
            counts = await graph_counts(client, graph)
    except GraphError as exc:
        raise LoadError(None, f"LOAD JSONL of graph {graph} failed; no graph was created: {exc}") from exc
    finally:
        jsonl.unlink(missing_ok=True)
    if counts != (len(data.nodes), len(data.edges)):
        raise LoadError(None, f"graph {graph} holds {counts[0]} nodes / {counts[1]} edges, expected {len(data.nodes)} / {len(data.edges)}")
    progress(f"imported graph {graph} in {timings['import']:.2f} s: {counts[0]:,} nodes, {counts[1]:,} edges")
    return True


async def load_graph_async(
    settings: Settings,
    data_dir: Path | None = None,
    force: bool = False,
    progress: Progress = print,
    server: TuringDBServer | None = None,
    embedder: Any = None,
) -> LoadReport:
    """Build graph + vector index against a server that already runs (`server`: ours, if any)."""
    from shared.rag.embedder import load_embedder
    from shared.rag.index import build_vector_index

    started = time.perf_counter()
    timings: dict[str, float] = {}
    progress(f"reading Reactome data from {data_dir or 'data/reactome'}")
    try:
        data = await asyncio.to_thread(build_graph, data_dir)
    except DataError as exc:
        raise LoadError(None, f"bad Reactome data, nothing was loaded: {exc}") from exc
    timings["parse"] = time.perf_counter() - started
    progress(f"parsed {len(data.nodes):,} nodes and {len(data.edges):,} edges in {timings['parse']:.1f} s")
    changed = await _load(settings, data, server, force, progress, timings)
    embedder = embedder or await asyncio.to_thread(load_embedder, settings)
    files = server.data_dir if server else turing_dir(settings) / "data"
    async with GraphClient.from_settings(settings) as client:
        index = await build_vector_index(client, embedder, list(data.texts()), files, force=force or changed, progress=progress)
    timings["index"] = index.seconds
    timings["embed"] = index.embed_seconds
    timings["vector_load"] = index.load_seconds
    report = LoadReport(
        graph=settings.turingdb_graph,
        changed=changed,
        nodes=len(data.nodes),
        edges=len(data.edges),
        labels=data.label_counts(),
        edge_types=data.edge_counts(),
        index_name=index.index_name,
        vectors=index.vectors,
        index_changed=index.changed,
        seconds=time.perf_counter() - started,
        timings=timings,
        skipped=dict(data.skipped),
    )
    progress(report.summary())
    return report


def load_graph(
    settings: Settings,
    data_dir: Path | None = None,
    force: bool = False,
    progress: Progress = print,
) -> LoadReport:
    """Build (or keep) the graph and its vector index; starts and stops a server if none runs."""
    server = ensure_server(settings)
    try:
        return asyncio.run(load_graph_async(settings, data_dir, force, progress, server))
    finally:
        if server is not None:
            server.stop()
