"""The cost of the architecture: a lookup question through the whole pipeline.

    python bench/e2e.py [--questions 60] [--clients 50] [--seconds 5]

Starts the embedded Valkey and TuringDB on a temp dir, loads the full Reactome graph
with its vector index, then runs gateway, router (ROUTER_PROVIDER=local, no LLM),
lookup and agent as separate processes, and measures in the same run:
  1. pipeline: POST /chat/message -> job_done on the SSE stream, one question at a time;
  2. direct: the lookup work itself (embed + vector search + Markdown) called in this
     process on the same questions — the baseline; the ratio is the architecture's cost;
  3. accepted POSTs/s and latency percentiles with `--clients` concurrent clients.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from shared.config import load_settings  # noqa: E402
from shared.graph.client import GraphClient  # noqa: E402
from shared.graph.loader import load_graph_async  # noqa: E402
from shared.graph.reactome import read_tsv  # noqa: E402
from shared.graph.server import TuringDBServer  # noqa: E402
from shared.markdown import nodes_markdown  # noqa: E402
from shared.rag.embedder import load_embedder  # noqa: E402
from shared.rag.search import vector_search  # noqa: E402
from shared.valkey_server import EmbeddedValkey, free_port  # noqa: E402
from tests.fixtures.stack import Stack, stack_settings  # noqa: E402
from tests.sse_client import read_stream  # noqa: E402


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def questions(n: int) -> list[str]:
    rows = read_tsv(ROOT / "data" / "reactome" / "pathways.tsv")
    names = [row["name"] for row in rows][:: max(1, len(rows) // n)][:n]
    return [f"show me the node for {name}" for name in names]


async def direct_ms(settings: object, texts: list[str]) -> list[float]:
    embedder = load_embedder(settings)  # type: ignore[arg-type]
    times: list[float] = []
    async with GraphClient.from_settings(settings) as graph:  # type: ignore[arg-type]
        for text in texts:
            started = time.perf_counter()
            nodes = await vector_search(graph, embedder, text, 5, settings)  # type: ignore[arg-type]
            nodes_markdown(nodes)
            times.append((time.perf_counter() - started) * 1000)
    return times


def pipeline_ms(stack: Stack, texts: list[str]) -> list[float]:
    times: list[float] = []
    headers = {"X-Anon-Id": "bench"}
    with httpx.Client(base_url=stack.gateway_url, timeout=30) as client:
        for text in texts:
            started = time.perf_counter()
            reply = client.post("/chat/message", json={"message": text}, headers=headers)
            reply.raise_for_status()
            job_id = reply.json()["job_id"]
            events = read_stream(f"{stack.gateway_url}/chat/job/{job_id}/events", headers=headers)
            times.append((time.perf_counter() - started) * 1000)
            assert events[-1].event == "job_done", [e.event for e in events]
            assert events[-1].data["data"]["result"]["route_taken"] == "lookup"
    return times


async def accepted_rate(url: str, clients: int, seconds: float) -> tuple[int, list[float]]:
    latencies: list[float] = []
    stop_at = time.perf_counter() + seconds

    async def client_loop(i: int) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            while time.perf_counter() < stop_at:
                started = time.perf_counter()
                reply = await client.post("/chat/message", json={"message": "show me the node for TP53"}, headers={"X-Anon-Id": f"load-{i}"})
                if reply.status_code == 202:
                    latencies.append((time.perf_counter() - started) * 1000)

    await asyncio.gather(*(client_loop(i) for i in range(clients)))
    return len(latencies), latencies


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--questions", type=int, default=60)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-e2e-") as tmp:
        base = Path(tmp)
        valkey = EmbeddedValkey(base / "valkey")
        valkey.start()
        turing = TuringDBServer(base / "turingdb", free_port()).start()
        try:
            graph_settings = load_settings({}, turingdb_url="127.0.0.1", turingdb_port=turing.port, state_dir=str(base / "state"))
            (base / "state").mkdir()
            (base / "state" / "turingdb").symlink_to(turing.directory)
            report = asyncio.run(load_graph_async(graph_settings, None, progress=lambda m: None, server=turing))
            print(f"graph: {report.nodes:,} nodes, {report.edges:,} edges, loaded in {report.seconds:.1f} s")
            settings = stack_settings(
                graph_settings, valkey.url, "http://127.0.0.1:9/v1", base / "state",
                router_provider="local", rag_confidence_threshold=0.0, rate_limit_per_minute=1_000_000,
                log_level="warning",
            )
            stack = Stack(settings, base)
            stack.start_all()
            try:
                texts = questions(args.questions)
                pipeline_ms(stack, texts[:5])  # warm-up
                asyncio.run(direct_ms(settings, texts[:5]))
                piped = pipeline_ms(stack, texts)
                direct = asyncio.run(direct_ms(settings, texts))
                accepted, latencies = asyncio.run(accepted_rate(stack.gateway_url, args.clients, args.seconds))
            finally:
                stack.stop_all()
        finally:
            turing.stop()
            valkey.stop()
    p50_pipe, p50_direct = statistics.median(piped), statistics.median(direct)
    print(f"{'':34}{'p50 ms':>10}{'p99 ms':>10}")
    print(f"{'pipeline POST -> job_done (SSE)':34}{p50_pipe:10.1f}{percentile(piped, 0.99):10.1f}")
    print(f"{'lookup work called directly':34}{p50_direct:10.1f}{percentile(direct, 0.99):10.1f}")
    print(f"ratio pipeline/direct (p50): {p50_pipe / p50_direct:.1f}x over {len(texts)} questions")
    print(
        f"accepted POSTs: {accepted / args.seconds:,.0f}/s with {args.clients} clients for {args.seconds:g} s; "
        f"latency p50 {statistics.median(latencies):.1f} ms, p99 {percentile(latencies, 0.99):.1f} ms"
    )


if __name__ == "__main__":
    main()
