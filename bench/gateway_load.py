"""Gateway under load: accepted POSTs/s and latency, and 1,000 SSE streams.

    python bench/gateway_load.py [--clients 10,100,500] [--seconds 4] [--runs 3] [--streams 1000]

One gateway process (`python -m services.gateway`, real uvicorn, RATE_LIMIT_PER_MINUTE
raised; no workers: only accepting is measured) beside the floor, a bare Starlette
endpoint doing one XADD (bench/floor_app.py), on the same Valkey, in the same run.
Gateway, floor and Valkey are pinned to `--server-cpu`; the load generator
(bench/load_client.py, aiohttp) runs as its own process pinned to `--client-cpu`.
SSE: `--streams` clients follow one job on the gateway; the gateway's RSS before and
after gives memory per stream; one event is then published to the log and timed
until every stream has it, then the terminal event ends them all.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx  # noqa: E402

from bench.common import ROOT, percentile, pin, pinned, rss_mb, table  # noqa: E402
from shared.bus import Keys, connect, publish  # noqa: E402
from shared.contracts import ChatResponse, EventRecord, job_done_event  # noqa: E402

LOAD = str(ROOT / "bench" / "load_client.py")


def wait_healthy(url: str, proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url} exited with {proc.returncode}")
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{url} not healthy in {timeout}s")


def post_load(url: str, clients: int, seconds: float, cpu: str) -> dict[str, float]:
    out = subprocess.run(pinned(cpu, [sys.executable, LOAD, "post", url, str(clients), str(seconds)]),
                         check=True, capture_output=True, text=True, cwd=ROOT)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    lat = r["latencies_ms"]
    if r["other"] or r["errors"]:
        print(f"  {url} with {clients} clients: {r['other']} non-202 answers, {r['errors']} connection errors", file=sys.stderr)
    return {"rate": r["accepted"] / r["seconds"], "p50": percentile(lat, 0.5), "p99": percentile(lat, 0.99),
            "errors": r["errors"] + r["other"]}


def start_floor(valkey_url: str, cpu: str) -> tuple[subprocess.Popen[bytes], str]:
    from shared.valkey_server import free_port

    port = free_port()
    proc = subprocess.Popen([sys.executable, str(ROOT / "bench" / "floor_app.py"), "--port", str(port), "--valkey", valkey_url],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    wait_healthy(url, proc)
    pin(proc.pid, cpu)
    return proc, url


def sse_fanout(gw_url: str, gw_pid: int, valkey_url: str, keys: Keys, streams: int, cpu: str) -> dict[str, float]:
    """Open `streams` streams on one job; RSS per stream and the time to fan one event out."""
    user = "sse-bench"
    reply = httpx.post(f"{gw_url}/chat/message", json={"message": "fan-out"}, headers={"X-Anon-Id": user})
    reply.raise_for_status()
    job_id, session_id = reply.json()["job_id"], reply.json()["session_id"]
    time.sleep(0.5)
    before = rss_mb(gw_pid)
    proc = subprocess.Popen(pinned(cpu, [sys.executable, LOAD, "sse", gw_url, job_id, user, str(streams)]),
                            cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    started = time.perf_counter()
    line = proc.stdout.readline().strip()
    assert line == "connected", line
    connect_s = time.perf_counter() - started
    time.sleep(1.0)
    after = rss_mb(gw_pid)

    async def send(event: EventRecord) -> float:
        client = connect(valkey_url)
        t0 = time.time()
        await publish(client, keys, [event])
        await client.aclose()
        return t0

    t_step = asyncio.run(send(EventRecord("agent_step", job_id, session_id, {"iteration": 1, "max_iterations": 32})))
    time.sleep(2.0)
    t_end = asyncio.run(send(job_done_event(job_id, ChatResponse(session_id, "done", "agent"))))
    out, _ = proc.communicate(timeout=60)
    r = json.loads(out.strip().splitlines()[-1])
    live = [t - t_step for t in r["live"]]
    ended = [t - t_end for t in r["ended"]]
    assert len(live) == streams and len(ended) == streams, (len(live), len(ended))
    return {"before": before, "after": after, "per_stream_kb": (after - before) * 1024 / streams, "connect_s": connect_s,
            "live_p50": percentile(live, 0.5) * 1000, "live_max": max(live) * 1000, "end_max": max(ended) * 1000}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clients", default="10,100,500")
    p.add_argument("--seconds", type=float, default=4.0)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--streams", type=int, default=1000)
    p.add_argument("--server-cpu", default="0")
    p.add_argument("--client-cpu", default="1")
    args = p.parse_args()

    from shared.config import load_settings
    from shared.valkey_server import EmbeddedValkey
    from tests.fixtures.stack import Stack, stack_settings

    pin(os.getpid(), args.client_cpu)
    with tempfile.TemporaryDirectory(prefix="bench-gateway-") as tmp:
        base = Path(tmp)
        valkey = EmbeddedValkey(base / "valkey")
        valkey.start()
        pin(valkey.pid, args.server_cpu)
        settings = stack_settings(load_settings({}), valkey.url, "http://127.0.0.1:9/v1", base,
                                  rate_limit_per_minute=1_000_000_000, sse_ping_seconds=15.0, log_level="warning")
        stack = Stack(settings, base)
        gw = stack.start("gateway")
        floor, floor_url = start_floor(valkey.url, args.server_cpu)
        try:
            wait_healthy(stack.gateway_url, gw.process)
            pin(gw.process.pid, args.server_cpu)
            sides = {"floor (bare XADD)": floor_url, "gateway": stack.gateway_url}
            post_load(stack.gateway_url, 10, 1.0, args.client_cpu)  # warm-up
            post_load(floor_url, 10, 1.0, args.client_cpu)
            results: dict[tuple[str, int], list[dict[str, float]]] = {}
            for run in range(args.runs):
                for clients in [int(c) for c in args.clients.split(",")]:
                    names = list(sides) if run % 2 == 0 else list(sides)[::-1]
                    for name in names:
                        results.setdefault((name, clients), []).append(post_load(sides[name], clients, args.seconds, args.client_cpu))
            sse = sse_fanout(stack.gateway_url, gw.process.pid, valkey.url, Keys(settings.key_prefix), args.streams, args.client_cpu)
        finally:
            floor.terminate()
            floor.wait(10)
            stack.stop_all()
            valkey.stop()
    report(results, sse, args)


def report(results: dict[tuple[str, int], list[dict[str, float]]], sse: dict[str, float], args: argparse.Namespace) -> None:
    print(f"\nserver cpu {args.server_cpu}, load generator cpu {args.client_cpu}; {args.seconds:g} s per level, medians of {args.runs} runs\n")
    rows = []
    for clients in [int(c) for c in args.clients.split(",")]:
        floor = results[("floor (bare XADD)", clients)]
        for name in ("floor (bare XADD)", "gateway"):
            rs = results[(name, clients)]
            ratio = statistics.median([r["rate"] / f["rate"] for r, f in zip(rs, floor)])
            rows.append([str(clients), name, f"{statistics.median([r['rate'] for r in rs]):,.0f}",
                         f"{statistics.median([r['p50'] for r in rs]):.1f}", f"{statistics.median([r['p99'] for r in rs]):.1f}",
                         f"{ratio:.2f}"])
    print(table(["clients", "side", "accepted POSTs/s", "p50 ms", "p99 ms", "/ floor"], rows))
    print(f"\nSSE: {args.streams:,} streams of one job on one gateway process (connected in {sse['connect_s']:.1f} s)\n")
    print(table(["gateway RSS before", "after", "per stream", "one event to all: p50", "max", "terminal event to all closed: max"],
                [[f"{sse['before']:.1f} MB", f"{sse['after']:.1f} MB", f"{sse['per_stream_kb']:.1f} KB",
                  f"{sse['live_p50']:.0f} ms", f"{sse['live_max']:.0f} ms", f"{sse['end_max']:.0f} ms"]]))


if __name__ == "__main__":
    main()
