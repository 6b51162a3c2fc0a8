"""The TuringDB vector index over every node that has a `text` (cosine, L2-normalised).

Fast path: the vectors go to a CSV in the server's data folder and one
`LOAD VECTOR` reads it. Idempotent: an index that already holds the right vectors
(probed by searching a few nodes' own vectors) is left alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from shared.graph.client import GraphClient
from shared.graph.errors import GraphError, LoadError
from shared.rag.embedder import Embedder

Progress = Callable[[str], None]
# (key, text, title, title weight): the vector is w * enc(title) + (1 - w) * enc(text)
EmbedItem = tuple[int, str, "str | None", float]


@dataclass
class IndexReport:
    index_name: str
    vectors: int
    changed: bool
    seconds: float
    embed_seconds: float = 0.0
    load_seconds: float = 0.0


def vector_literal(vector: np.ndarray) -> str:
    """`(v1, v2, ...)` as VECTOR SEARCH expects it."""
    return "(" + ", ".join(f"{x:.7g}" for x in vector.tolist()) + ")"


async def vector_indexes(client: GraphClient) -> dict[str, int]:
    """Vector indexes on the server (global, not per graph), name -> dimension."""
    rows = await client.query("SHOW VECTOR INDEXES", graph="default")
    return {r["name"]: int(r["dimension"]) for r in rows}


async def search_ids(client: GraphClient, index: str, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
    """Raw top-k (id, score) from the index, best first."""
    rows = await client.query(
        f"VECTOR SEARCH IN {index} FOR {int(k)} {vector_literal(vector)} YIELD ids, score RETURN ids, score", graph="default"
    )
    return sorted(((int(r["ids"]), float(r["score"])) for r in rows), key=lambda p: -p[1])


def embed_items(embedder: Embedder, items: Sequence[EmbedItem]) -> np.ndarray:
    """Unit vectors for items; a title with weight w is mixed in as w * title + (1 - w) * text."""
    vectors = embedder.encode([item[1] for item in items])
    titled = [i for i, item in enumerate(items) if item[2] and item[3] > 0]
    if titled:
        titles = embedder.encode([items[i][2] or "" for i in titled])
        weights = np.array([items[i][3] for i in titled], dtype=np.float32)[:, None]
        mixed = weights * titles + (1 - weights) * vectors[titled]
        norms = np.linalg.norm(mixed, axis=1, keepdims=True)
        vectors[titled] = mixed / np.where(norms > 0, norms, 1)
    return vectors


def _probe_positions(n: int) -> list[int]:
    return sorted({0, n // 3, n // 2, (2 * n) // 3, n - 1}) if n else []


async def index_matches(client: GraphClient, embedder: Embedder, items: Sequence[EmbedItem]) -> bool:
    """True when the index exists with the model's dimension and finds probe nodes by their own vectors."""
    dims = await vector_indexes(client)
    if dims.get(embedder.index_name) != embedder.dim or not items:
        return False
    positions = _probe_positions(len(items))
    vectors = embed_items(embedder, [items[i] for i in positions])
    for position, vector in zip(positions, vectors):
        found = await search_ids(client, embedder.index_name, vector, 5)
        if not any(key == items[position][0] and score > 0.999 for key, score in found):
            return False
    return True


def write_vector_csv(path: Path, keys: Sequence[int], vectors: np.ndarray) -> None:
    """Rows `id,v1,...,vd` (what LOAD VECTOR reads); one %-format per row (faster than savetxt)."""
    row = "%d," + ",".join(["%.6g"] * vectors.shape[1]) + "\n"
    with path.open("w", encoding="ascii") as out:
        for key, values in zip(keys, vectors.tolist()):
            out.write(row % (key, *values))


async def build_vector_index(
    client: GraphClient,
    embedder: Embedder,
    items: Sequence[EmbedItem],
    data_dir: Path,
    force: bool = False,
    progress: Progress = print,
) -> IndexReport:
    """Create (or keep) the index `embedder.index_name` over `items` (key, text, title, weight)."""
    started = time.perf_counter()
    keys = [item[0] for item in items]
    name = embedder.index_name
    if not force and await index_matches(client, embedder, items):
        progress(f"vector index {name}: up to date ({len(keys)} vectors), nothing to do")
        return IndexReport(name, len(keys), False, time.perf_counter() - started)
    if name in await vector_indexes(client):
        progress(f"vector index {name}: out of date, rebuilding")
        await client.query(f"DELETE VECTOR INDEX {name}", graph="default")
    progress(f"embedding {len(items)} texts with {embedder.model_name} ({embedder.dim} dims)")
    t0 = time.perf_counter()
    vectors = embed_items(embedder, items)
    embed_seconds = time.perf_counter() - t0
    progress(f"embedded in {embed_seconds:.1f} s ({len(items) / max(embed_seconds, 1e-9):,.0f} texts/s)")
    data_dir.mkdir(parents=True, exist_ok=True)
    csv_path = data_dir / f"{name}.vectors.csv"
    t1 = time.perf_counter()
    try:
        write_vector_csv(csv_path, keys, vectors)
        await client.query(f"CREATE VECTOR INDEX {name} WITH DIMENSION {embedder.dim} METRIC COSINE", graph="default")
        rows = await client.query(f'LOAD VECTOR FROM "{csv_path.name}" IN {name}', graph="default", timeout=600.0)
        loaded = int(rows[0]["count"]) if rows and "count" in rows[0] else len(keys)
        if loaded != len(keys):
            raise LoadError(None, f"LOAD VECTOR read {loaded} vectors, expected {len(keys)}")
    except (GraphError, OSError) as exc:
        try:
            if name in await vector_indexes(client):
                await client.query(f"DELETE VECTOR INDEX {name}", graph="default")
        finally:
            csv_path.unlink(missing_ok=True)
        raise LoadError(None, f"building vector index {name} failed and was undone: {exc}") from exc
    csv_path.unlink(missing_ok=True)
    load_seconds = time.perf_counter() - t1
    progress(f"vector index {name}: {len(keys)} vectors loaded in {load_seconds:.1f} s")
    return IndexReport(name, len(keys), True, time.perf_counter() - started, embed_seconds, load_seconds)
