"""Lookup cost as the graph grows: fixture subset, full data/reactome, full index x10.

    python bench/lookup_growth.py [--queries 200] [--copies 10]

One TuringDB server (OMP_NUM_THREADS=1) on a temp dir. A lookup, in this process, is
what the lookup service does: embed the question, VECTOR SEARCH top 5 + MATCH of the
nodes (shared.rag.search.vector_search), then Markdown. Sizes:
  - subset: the test fixture's Reactome subset (tests/fixtures/turingdb.py cut_subset);
  - full: the whole data/reactome;
  - full x`copies`: the full graph's vectors loaded `copies` times under distinct ids
    (key + copy * 10^7) into a separate index, searched the same way on the full graph.
Baseline beside each: numpy brute force (embed + matrix @ q + top 5) over the same
vectors, OPENBLAS_NUM_THREADS=1. Prints p50/p99 and the growth against the subset.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import asyncio  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import fixture_subset, graph_settings, percentile, table  # noqa: E402
from bench.retrieval import questions  # noqa: E402
from shared.graph.client import GraphClient  # noqa: E402
from shared.graph.loader import load_graph_async  # noqa: E402
from shared.graph.reactome import build_graph  # noqa: E402
from shared.graph.server import TuringDBServer  # noqa: E402
from shared.markdown import nodes_markdown  # noqa: E402
from shared.rag.embedder import Embedder, load_embedder  # noqa: E402
from shared.rag.index import embed_items, write_vector_csv  # noqa: E402
from shared.rag.search import vector_search  # noqa: E402
from shared.valkey_server import free_port  # noqa: E402

OFFSET = 10**7


async def time_lookups(settings: object, embedder: Embedder, asked: list[str]) -> tuple[list[float], float]:
    """Per-question ms of embed + vector_search + Markdown; mean nodes returned."""
    times, found = [], 0
    async with GraphClient.from_settings(settings) as client:  # type: ignore[arg-type]
        for text in asked[:20]:  # warm-up
            await vector_search(client, embedder, text, 5, settings)  # type: ignore[arg-type]
        for text in asked:
            t0 = time.perf_counter()
            nodes = await vector_search(client, embedder, text, 5, settings)  # type: ignore[arg-type]
            nodes_markdown(nodes)
            times.append((time.perf_counter() - t0) * 1000)
            found += len(nodes)
    return times, found / len(asked)


def numpy_ms(embedder: Embedder, matrix: np.ndarray, asked: list[str]) -> list[float]:
    times = []
    for text in asked:
        t0 = time.perf_counter()
        q = embedder.encode_one(text)
        scores = matrix @ q
        top = np.argpartition(-scores, 5)[:5]
        top[np.argsort(-scores[top])]
        times.append((time.perf_counter() - t0) * 1000)
    return times


async def replicate(settings: object, server: TuringDBServer, embedder: Embedder, keys: np.ndarray, matrix: np.ndarray, copies: int) -> str:
    """A separate index holding `copies` copies of the vectors under distinct ids."""
    name = f"{embedder.index_name}_x{copies}"
    async with GraphClient.from_settings(settings) as client:  # type: ignore[arg-type]
        await client.query(f"CREATE VECTOR INDEX {name} WITH DIMENSION {matrix.shape[1]} METRIC COSINE", graph="default")
        for copy in range(copies):
            path = server.data_dir / f"{name}.{copy}.csv"
            write_vector_csv(path, (keys + copy * OFFSET).tolist(), matrix)
            await client.query(f'LOAD VECTOR FROM "{path.name}" IN {name}', graph="default", timeout=600.0)
            path.unlink()
    return name


async def run(args: argparse.Namespace) -> None:
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-growth-") as tmp:
        base = Path(tmp)
        with TuringDBServer(base / "turingdb", free_port()) as server:
            sub_s = graph_settings(base, server.port, "bench_subset")
            full_s = graph_settings(base, server.port, "bench_full")
            embedder = load_embedder(full_s)  # type: ignore[arg-type]
            subset_dir = fixture_subset(base / "subset")
            quiet = lambda m: None  # noqa: E731
            sub_embedder = load_embedder(sub_s)  # type: ignore[arg-type]
            await load_graph_async(sub_s, subset_dir, progress=quiet, server=server, embedder=sub_embedder)  # type: ignore[arg-type]
            await load_graph_async(full_s, None, progress=quiet, server=server, embedder=embedder)  # type: ignore[arg-type]
            full = build_graph()
            names = [p["displayName"] for _, p in full.nodes if p.get("text")]
            asked = questions(args.queries, names)
            levels: list[tuple[str, object, Embedder, np.ndarray]] = []
            for label, data, settings, emb in (("subset", build_graph(subset_dir), sub_s, sub_embedder), ("full", full, full_s, embedder)):
                items = list(data.texts())
                levels.append((label, settings, emb, embed_items(emb, items)))
            full_items = list(full.texts())
            keys = np.array([item[0] for item in full_items], dtype=np.int64)
            t0 = time.perf_counter()
            x_name = await replicate(full_s, server, embedder, keys, levels[1][3], args.copies)
            print(f"x{args.copies} index built in {time.perf_counter() - t0:.0f} s")
            x_emb = Embedder(embedder.model, embedder.model_name, x_name)
            levels.append((f"full x{args.copies}", full_s, x_emb, np.tile(levels[1][3], (args.copies, 1))))
            for label, settings, emb, matrix in levels:
                db, found = await time_lookups(settings, emb, asked)
                brute = numpy_ms(emb, matrix, asked)
                rows.append((label, matrix.shape[0], db, brute, found))
    base_p50 = percentile(rows[0][2], 0.5)
    out = []
    for label, n, db, brute, found in rows:
        out.append([label, f"{n:,}", f"{percentile(db, 0.5):.2f}", f"{percentile(db, 0.99):.2f}", f"{percentile(db, 0.5) / base_p50:.1f}x",
                    f"{percentile(brute, 0.5):.2f}", f"{percentile(brute, 0.99):.2f}", f"{percentile(db, 0.5) / percentile(brute, 0.5):.1f}", f"{found:.1f}"])
    print(f"\n{args.queries} questions, top 5, OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}\n")
    print(table(["graph", "vectors", "lookup p50 ms", "p99 ms", "p50 / subset", "numpy p50 ms", "numpy p99 ms",
                 "lookup / numpy", "nodes found"], out))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--copies", type=int, default=10)
    asyncio.run(run(p.parse_args()))


if __name__ == "__main__":
    main()
