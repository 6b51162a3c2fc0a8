"""Retrieval benchmark: full graph load, embedding rate, vector search vs numpy brute force.

Starts its own TuringDB server (OMP_NUM_THREADS=1) on a temp dir and a free port, loads
the whole data/reactome, then times, in the same run:
- the full load (parse, JSONL, LOAD JSONL import, embedding, LOAD VECTOR);
- embedding rate (texts/s) and one-question encode latency;
- vector search p50/p99: TuringDB's index (ids only, and with the node MATCH) beside a
  numpy brute-force search over the same vectors, with top-5 agreement;
- a 1-hop Cypher read through our async HTTP client vs the SDK (sync, pandas) in a thread.

    python bench/retrieval.py [--queries 300]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import asyncio  # noqa: E402
import csv  # noqa: E402
import random  # noqa: E402
import socket  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from shared.config import PROJECT_ROOT, load_settings  # noqa: E402
from shared.graph.client import GraphClient  # noqa: E402
from shared.graph.loader import load_graph_async  # noqa: E402
from shared.graph.reactome import build_graph  # noqa: E402
from shared.graph.server import TuringDBServer  # noqa: E402
from shared.rag.embedder import load_embedder  # noqa: E402
from shared.rag.index import embed_items, search_ids  # noqa: E402
from shared.rag.search import vector_search  # noqa: E402

ONE_HOP = "MATCH (p:Pathway {stId: 'R-HSA-109581'})-[:HAS_SUBPATHWAY]->(c:Pathway) RETURN c.stId, c.displayName"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values) * 1000.0, q))


def questions(n: int, names: list[str]) -> list[str]:
    path = PROJECT_ROOT / "tests" / "data" / "retrieval_questions.tsv"
    with path.open(encoding="utf-8", newline="") as handle:
        asked = [r["question"] for r in csv.DictReader(handle, delimiter="\t")]
    rng = random.Random(7)
    while len(asked) < n:
        words = rng.choice(names).split()
        asked.append(" ".join(words[: max(1, len(words) // 2 + 1)]))
    return asked[:n]


async def run(n_queries: int) -> None:
    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="bench-turingdb-") as tmp, TuringDBServer(Path(tmp) / "turingdb", free_port()) as server:
        settings = load_settings({}, turingdb_url="127.0.0.1", turingdb_port=server.port, state_dir=tmp, log_format="console", log_level="warning")
        embedder = load_embedder(settings)

        started = time.perf_counter()
        report = await load_graph_async(settings, progress=lambda m: None, server=server, embedder=embedder)
        load_seconds = time.perf_counter() - started
        t = report.timings
        rows.append(("full load (parse + JSONL + import + embed + vector load)", f"{load_seconds:.1f} s"))
        rows.append(("  parse TSVs / write JSONL / LOAD JSONL", f"{t.get('parse', 0):.1f} s / {t.get('write_jsonl', 0):.1f} s / {t.get('import', 0):.2f} s"))
        rows.append(("  embed / vector CSV + LOAD VECTOR", f"{t.get('embed', 0):.1f} s / {t.get('vector_load', 0):.1f} s"))
        rows.append(("  nodes / edges / vectors", f"{report.nodes:,} / {report.edges:,} / {report.vectors:,}"))
        again = time.perf_counter()
        await load_graph_async(settings, progress=lambda m: None, server=server, embedder=embedder)
        rows.append(("second load (idempotent check)", f"{time.perf_counter() - again:.1f} s"))

        data = build_graph()
        items = list(data.texts())
        t0 = time.perf_counter()
        matrix = embed_items(embedder, items)
        embed_s = time.perf_counter() - t0
        rows.append(("embedding rate (all node texts, title mix)", f"{len(items) / embed_s:,.0f} texts/s ({embed_s:.1f} s)"))
        keys = np.array([item[0] for item in items])
        names = [props["displayName"] for _, props in data.nodes if props.get("text")]
        asked = questions(n_queries, names)
        t0 = time.perf_counter()
        qvecs = embedder.encode(asked)
        rows.append(("encode one question (batched mean)", f"{(time.perf_counter() - t0) / len(asked) * 1e3:.3f} ms"))

        db_times, full_times, np_times = [], [], []
        same_list = same_set = 0
        async with GraphClient.from_settings(settings) as client:
            for q in qvecs[:20]:  # warm-up
                await search_ids(client, embedder.index_name, q, 5)
            for text, q in zip(asked, qvecs):
                t0 = time.perf_counter()
                found = await search_ids(client, embedder.index_name, q, 5)
                db_times.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                scores = matrix @ q
                top = np.argpartition(-scores, 5)[:5]
                top = top[np.argsort(-scores[top])]
                np_times.append(time.perf_counter() - t0)
                expected = [int(k) for k in keys[top]]
                got = [k for k, _ in found]
                same_list += got == expected
                same_set += set(got) == set(expected)
                t0 = time.perf_counter()
                await vector_search(client, embedder, text, 5, settings)
                full_times.append(time.perf_counter() - t0)

            hop_http, hop_sdk = [], []
            for _ in range(20):
                await client.query(ONE_HOP)
            for _ in range(200):
                t0 = time.perf_counter()
                await client.query(ONE_HOP)
                hop_http.append(time.perf_counter() - t0)
        from turingdb import TuringDB

        sdk = TuringDB(host=server.url)
        sdk.set_graph(settings.turingdb_graph)
        for _ in range(20):
            await asyncio.to_thread(sdk.query, ONE_HOP)
        for _ in range(200):
            t0 = time.perf_counter()
            await asyncio.to_thread(sdk.query, ONE_HOP)
            hop_sdk.append(time.perf_counter() - t0)

    n = len(asked)
    rows.append((f"vector search, TuringDB index (ids only), {n} queries", f"p50 {pct(db_times, 50):.2f} ms  p99 {pct(db_times, 99):.2f} ms"))
    rows.append(("vector search + node MATCH (vector_search)", f"p50 {pct(full_times, 50):.2f} ms  p99 {pct(full_times, 99):.2f} ms"))
    rows.append((f"numpy brute force over {matrix.shape[0]:,} x {matrix.shape[1]}", f"p50 {pct(np_times, 50):.2f} ms  p99 {pct(np_times, 99):.2f} ms"))
    rows.append(("ratio TuringDB / numpy (p50)", f"{pct(db_times, 50) / pct(np_times, 50):.1f}x"))
    rows.append(("top-5 agreement (same order / same set)", f"{same_list}/{n} / {same_set}/{n}"))
    rows.append(("1-hop Cypher read: async httpx client", f"p50 {pct(hop_http, 50):.2f} ms  p99 {pct(hop_http, 99):.2f} ms"))
    rows.append(("1-hop Cypher read: SDK (json) in a thread", f"p50 {pct(hop_sdk, 50):.2f} ms  p99 {pct(hop_sdk, 99):.2f} ms"))
    width = max(len(a) for a, _ in rows)
    print(f"\nretrieval benchmark ({embedder.model_name}, {embedder.dim} d, OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']})")
    print("-" * (width + 40))
    for a, b in rows:
        print(f"{a:<{width}}  {b}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()
    asyncio.run(run(args.queries))


if __name__ == "__main__":
    main()
