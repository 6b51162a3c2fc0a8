"""Bus throughput: one consumer-group hop per message, against the raw XADD rate.

    python bench/bus.py [--messages 20000] [--runs 3] [--cpu 0] [--server-cpu 0]

Starts the embedded Valkey, then per run and per configuration:
  1. raw XADD: a producer process appends N inbox entries (~200 B) in pipelines of
     `--batch`; its rate is the baseline of that run;
  2. one hop: a worker process (shared.bus.Worker) drains them: XREADGROUP ->
     handler -> XADD of one event + XACK (one MULTI per group of finished handlers).
Both client processes are pinned with taskset to the same CPU(s) (`--cpu`), the
server to `--server-cpu`. Prints medians of the runs and the hop/XADD ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from shared.bus import Delivery, Keys, Outcome, Worker, add_task, connect  # noqa: E402
from shared.contracts import EventRecord, JobTask  # noqa: E402

SERVICE = "bench"
MESSAGE = "How does the PI3K/AKT pathway regulate cell survival in human cells?" * 2


def task(i: int) -> JobTask:
    return JobTask(f"job-{i:08d}", "session-0000000000000000", MESSAGE[:130], submitted_at=0.0)


# --- child processes --------------------------------------------------------------


async def produce(url: str, prefix: str, n: int, batch: int) -> dict[str, float]:
    """Append n inbox entries in pipelines of `batch`; returns the rate."""
    client = connect(url)
    keys = Keys(prefix)
    await client.ping()
    start = time.perf_counter()
    for lo in range(0, n, batch):
        pipe = client.pipeline(transaction=False)
        for i in range(lo, min(n, lo + batch)):
            add_task(pipe, keys, SERVICE, task(i))
        await pipe.execute()
    elapsed = time.perf_counter() - start
    await client.aclose()
    return {"seconds": elapsed, "rate": n / elapsed}


async def consume(url: str, prefix: str, n: int, concurrency: int, batch: int) -> dict[str, float]:
    """Run one Worker until it has committed n entries; returns its rate."""
    keys = Keys(prefix)
    first: list[float] = []

    async def handler(d: Delivery) -> Outcome:
        if not first:
            first.append(time.perf_counter())
        return Outcome(events=[EventRecord("job_done", d.task.job_id, d.task.session_id, {"ok": True})])

    worker = Worker(url, keys, SERVICE, handler, concurrency=concurrency, batch=batch, block_ms=100)
    runner = asyncio.create_task(worker.run())
    while worker.processed < n:
        if runner.done():
            runner.result()
        await asyncio.sleep(0.002)
    end = time.perf_counter()
    worker.stop()
    await runner
    elapsed = end - first[0]
    return {"seconds": elapsed, "rate": n / elapsed}


def child_main(argv: list[str]) -> None:
    from shared.config import load_settings
    from shared.logging import configure_logging

    configure_logging(load_settings(env={"LOG_LEVEL": "warning"}), "bench")
    role, url, prefix, n, *rest = argv
    if role == "produce":
        result = asyncio.run(produce(url, prefix, int(n), int(rest[0])))
    else:
        result = asyncio.run(consume(url, prefix, int(n), int(rest[0]), int(rest[1])))
    print(json.dumps(result))


# --- driver -----------------------------------------------------------------------


def pinned(cpu: str, args: list[str]) -> list[str]:
    return ["taskset", "-c", cpu, *args] if cpu and shutil.which("taskset") else args


def run_child(cpu: str, *args: str) -> dict[str, float]:
    out = subprocess.run(
        pinned(cpu, [sys.executable, __file__, "--child", *args]),
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def one_run(url: str, n: int, cpu: str, concurrency: int, batch: int) -> tuple[float, float]:
    prefix = f"bench-{uuid.uuid4().hex[:8]}:"
    raw = run_child(cpu, "produce", url, prefix, str(n), str(batch))
    hop = run_child(cpu, "consume", url, prefix, str(n), str(concurrency), str(batch))
    asyncio.run(_cleanup(url, prefix, n))
    return raw["rate"], hop["rate"]


async def _cleanup(url: str, prefix: str, n: int) -> None:
    client = connect(url)
    keys = Keys(prefix)
    events = await client.xlen(keys.events)
    pending = (await client.xpending(keys.inbox(SERVICE), SERVICE))["pending"]
    assert events == n and pending == 0, f"lost work: events={events} pending={pending}"
    await client.delete(keys.events, keys.inbox(SERVICE))
    await client.aclose()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--messages", type=int, default=20_000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--cpu", default="0", help="taskset CPU list for both client processes ('' = no pinning)")
    p.add_argument("--server-cpu", default="0", help="taskset CPU list for valkey-server ('' = no pinning)")
    args = p.parse_args()

    from shared.valkey_server import EmbeddedValkey

    configs = [  # (label, concurrency, batch)
        ("one at a time", 1, 1),
        ("batched", 200, 100),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedValkey(Path(tmp))
        server.start()
        try:
            if args.server_cpu and shutil.which("taskset"):
                subprocess.run(["taskset", "-pc", args.server_cpu, str(server.pid)], check=True, capture_output=True)
            print(f"valkey-server pid {server.pid} on cpu {args.server_cpu or 'any'}; clients on cpu {args.cpu or 'any'}")
            print(f"{args.messages} messages of ~{len(task(0).message) + 70} B, {args.runs} runs, medians\n")
            print(f"{'config':<16}{'raw XADD msg/s':>16}{'one hop msg/s':>16}{'hop/XADD':>10}")
            for label, concurrency, batch in configs:
                n = args.messages if batch > 1 else max(1000, args.messages // 5)
                raws, hops = [], []
                for _ in range(args.runs):
                    raw, hop = one_run(server.url, n, args.cpu, concurrency, batch)
                    raws.append(raw)
                    hops.append(hop)
                raw_m, hop_m = statistics.median(raws), statistics.median(hops)
                ratios = sorted(h / r for h, r in zip(hops, raws))
                print(
                    f"{label:<16}{raw_m:>16,.0f}{hop_m:>16,.0f}{hop_m / raw_m:>10.2f}"
                    f"   (per-run ratios {', '.join(f'{x:.2f}' for x in ratios)}; concurrency {concurrency}, batch {batch})"
                )
        finally:
            server.stop()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child_main(sys.argv[2:])
    else:
        main()
