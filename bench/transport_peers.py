"""Transport beside its peers: one consumer-group hop per worker process.

    python bench/transport_peers.py [--messages 20000] [--runs 3] [--cpu 0] [--server-cpu 0]

Same embedded Valkey, same ~200 B JobTask payload, same message count, in one run:
  - raw XADD: bench/bus.py's producer, the baseline of each run;
  - ours: shared.bus.Worker (COUNT 100, 200 handlers in flight, one MULTI of outputs +
    XACK per group of finished handlers), bench/bus.py's consumer;
  - FastStream 0.7.8: batch subscriber on a consumer group (StreamSub(batch=True,
    max_records=100)), the outputs of a batch published through one Pipeline, one XACK
    per batch (FastStream's own ack), logger off;
  - taskiq-redis 1.2.4: RedisStreamBroker (XREADGROUP COUNT 100) under taskiq's
    Receiver (200 tasks in flight), one XADD per task, one XACK per task.
Every hop does the same work: decode the task, XADD one ~125 B job_done event to the
events stream, acknowledge. A run preloads N entries in the library's own format,
then times one worker process draining them: first handled entry -> no entry pending.
Client processes are pinned with taskset to `--cpu`, valkey-server to `--server-cpu`.
Needs the `bench` extra (pip install -e '.[bench]').
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

from bench import bus  # noqa: E402  (its helpers: task(), produce/consume children, pinned())
from shared.contracts import EventRecord, decode_task, encode  # noqa: E402

GROUP = "bench"
BATCH = 100
IN_FLIGHT = 200


def output_event(raw_task: bytes | str) -> bytes:
    """The one event every hop writes: job_done for the decoded task."""
    t = decode_task(raw_task)
    return encode(EventRecord("job_done", t.job_id, t.session_id, {"ok": True}))


async def drained(client: object, stream: str, started: float) -> float:
    """Seconds from `started` until nothing is pending in the group (all acks landed)."""
    while (await client.xpending(stream, GROUP))["pending"]:  # type: ignore[attr-defined]
        await asyncio.sleep(0.001)
    return time.perf_counter() - started


# --- FastStream ---------------------------------------------------------------------


async def faststream_produce(url: str, stream: str, n: int) -> None:
    """Preload n entries in FastStream's own message format, pipelined."""
    from faststream.redis import RedisBroker

    broker = RedisBroker(url, logger=None)
    await broker.connect()
    client = broker._connection  # noqa: SLF001 - FastStream's own client, for its Pipeline
    for lo in range(0, n, BATCH):
        async with client.pipeline(transaction=False) as pipe:
            for i in range(lo, min(n, lo + BATCH)):
                await broker.publish(encode(bus.task(i)), stream=stream, pipeline=pipe)
            await pipe.execute()
    await broker.stop()


async def faststream_consume(url: str, stream: str, events: str, n: int) -> dict[str, float]:
    """A batch subscriber on the group until n entries are handled and acknowledged."""
    from faststream.redis import RedisBroker, StreamSub
    from faststream.redis.annotations import Pipeline

    broker = RedisBroker(url, logger=None)
    first: list[float] = []
    handled = [0]
    done = asyncio.Event()
    sub = StreamSub(stream, group=GROUP, consumer="c1", batch=True, max_records=BATCH, polling_interval=100)

    @broker.subscriber(stream=sub)
    async def handle(msgs: list, pipe: Pipeline) -> None:  # type: ignore[type-arg]
        if not first:
            first.append(time.perf_counter())
        for m in msgs:  # FastStream has decoded each JSON body already
            out = encode(EventRecord("job_done", m["job_id"], m["session_id"], {"ok": True}))
            await broker.publish(out, stream=events, pipeline=pipe)
        await pipe.execute()
        handled[0] += len(msgs)
        if handled[0] >= n:
            done.set()

    await broker.start()
    await done.wait()
    seconds = await drained(broker._connection, stream, first[0])  # noqa: SLF001
    await broker.stop()
    return {"seconds": seconds, "rate": n / seconds}


# --- taskiq ---------------------------------------------------------------------------


def taskiq_broker(url: str, stream: str) -> object:
    from taskiq_redis import RedisStreamBroker

    return RedisStreamBroker(url, queue_name=stream, consumer_group_name=GROUP, xread_block=100, xread_count=BATCH)


async def taskiq_produce(url: str, stream: str, n: int) -> None:
    """Preload n task messages exactly as kick() writes them, pipelined."""
    from redis.asyncio import Redis
    from taskiq.message import TaskiqMessage

    broker = taskiq_broker(url, stream)
    async with Redis(connection_pool=broker.connection_pool) as client:  # type: ignore[attr-defined]
        for lo in range(0, n, BATCH):
            pipe = client.pipeline(transaction=False)
            for i in range(lo, min(n, lo + BATCH)):
                msg = TaskiqMessage(task_id=uuid.uuid4().hex, task_name="hop", labels={}, labels_types={}, args=[encode(bus.task(i)).decode()], kwargs={})
                pipe.xadd(stream, {b"data": broker.formatter.dumps(msg).message})  # type: ignore[attr-defined]
            await pipe.execute()
    await broker.shutdown()  # type: ignore[attr-defined]


async def taskiq_consume(url: str, stream: str, events: str, n: int) -> dict[str, float]:
    """taskiq's Receiver over RedisStreamBroker until n tasks ran and were acknowledged."""
    from redis.asyncio import Redis
    from taskiq.receiver import Receiver

    broker = taskiq_broker(url, stream)
    client = Redis(connection_pool=broker.connection_pool)  # type: ignore[attr-defined]
    first: list[float] = []
    handled = [0]
    done = asyncio.Event()

    @broker.task(task_name="hop")  # type: ignore[attr-defined]
    async def hop(raw: str) -> None:
        if not first:
            first.append(time.perf_counter())
        await client.xadd(events, {b"e": output_event(raw)})
        handled[0] += 1
        if handled[0] >= n:
            done.set()

    receiver = Receiver(broker, max_async_tasks=IN_FLIGHT, max_prefetch=IN_FLIGHT)  # type: ignore[arg-type]
    finish = asyncio.Event()
    listening = asyncio.create_task(receiver.listen(finish))
    await done.wait()
    seconds = await drained(client, stream, first[0])
    finish.set()
    try:
        await asyncio.wait_for(listening, 5)
    except (asyncio.TimeoutError, asyncio.CancelledError):
        pass
    await client.aclose()
    await broker.shutdown()  # type: ignore[attr-defined]
    return {"seconds": seconds, "rate": n / seconds}


PEERS = {
    "faststream": (faststream_produce, faststream_consume),
    "taskiq": (taskiq_produce, taskiq_consume),
}


def child_main(argv: list[str]) -> None:
    """`--child <peer> produce|consume url prefix n`: one side of one run, JSON on stdout."""
    import logging

    logging.basicConfig(level=logging.WARNING)
    peer, role, url, prefix, n = argv
    produce, consume = PEERS[peer]
    stream, events = f"{prefix}work:{bus.SERVICE}", f"{prefix}events"
    if role == "produce":
        asyncio.run(produce(url, stream, int(n)))
        print(json.dumps({}))
    else:
        print(json.dumps(asyncio.run(consume(url, stream, events, int(n)))))


# --- driver ---------------------------------------------------------------------------


def peer_child(cpu: str, *args: str) -> dict[str, float]:
    out = subprocess.run(
        bus.pinned(cpu, [sys.executable, __file__, "--child", *args]), check=True, capture_output=True, text=True, cwd=ROOT
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


async def make_group(url: str, prefix: str) -> None:
    """The consumer group at 0 before preloading, so every side reads what was preloaded."""
    client = bus.connect(url)
    await client.xgroup_create(f"{prefix}work:{bus.SERVICE}", GROUP, id="0", mkstream=True)
    await client.aclose()


def one_side(side: str, url: str, n: int, cpu: str) -> float:
    prefix = f"bench-{uuid.uuid4().hex[:8]}:"
    if side == "ours":
        bus.run_child(cpu, "produce", url, prefix, str(n), str(BATCH))
        rate = bus.run_child(cpu, "consume", url, prefix, str(n), str(IN_FLIGHT), str(BATCH))["rate"]
    else:
        asyncio.run(make_group(url, prefix))
        peer_child(cpu, side, "produce", url, prefix, str(n))
        rate = peer_child(cpu, side, "consume", url, prefix, str(n))["rate"]
    asyncio.run(bus._cleanup(url, prefix, n))  # noqa: SLF001 - n events written, nothing pending
    return rate


def raw_xadd(url: str, n: int, cpu: str) -> float:
    prefix = f"bench-{uuid.uuid4().hex[:8]}:"
    rate = bus.run_child(cpu, "produce", url, prefix, str(n), str(BATCH))["rate"]
    asyncio.run(_drop(url, prefix))
    return rate


async def _drop(url: str, prefix: str) -> None:
    client = bus.connect(url)
    await client.delete(f"{prefix}work:{bus.SERVICE}", f"{prefix}events")
    await client.aclose()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--messages", type=int, default=20_000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--cpu", default="0", help="taskset CPU list for every client process ('' = no pinning)")
    p.add_argument("--server-cpu", default="0", help="taskset CPU list for valkey-server ('' = no pinning)")
    p.add_argument("--sides", default="ours,faststream,taskiq")
    args = p.parse_args()
    from shared.valkey_server import EmbeddedValkey

    sides = args.sides.split(",")
    rates: dict[str, list[float]] = {"raw XADD": [], **{s: [] for s in sides}}
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedValkey(Path(tmp))
        server.start()
        try:
            if args.server_cpu and shutil.which("taskset"):
                subprocess.run(["taskset", "-pc", args.server_cpu, str(server.pid)], check=True, capture_output=True)
            print(f"valkey-server on cpu {args.server_cpu or 'any'}; every client process on cpu {args.cpu or 'any'}")
            print(f"{args.messages} messages of ~{len(encode(bus.task(0)))} B per side, {args.runs} runs, medians\n")
            for run in range(args.runs):
                rates["raw XADD"].append(raw_xadd(server.url, args.messages, args.cpu))
                order = sides[run % len(sides):] + sides[: run % len(sides)]  # rotate: no side always first
                for side in order:
                    rates[side].append(one_side(side, server.url, args.messages, args.cpu))
        finally:
            server.stop()
    report(rates, sides)


def report(rates: dict[str, list[float]], sides: list[str]) -> None:
    raw = rates["raw XADD"]
    ours = rates.get("ours")
    print(f"{'side':<12}{'msg/s':>10}{'/ raw XADD':>12}{'ours / side':>13}   per-run msg/s")
    for side in ["raw XADD", *sides]:
        r = rates[side]
        vs_raw = statistics.median([a / b for a, b in zip(r, raw)])
        vs_ours = f"{statistics.median([o / a for o, a in zip(ours, r)]):.2f}" if ours and side != "raw XADD" else "-"
        runs = ", ".join(f"{x:,.0f}" for x in r)
        print(f"{side:<12}{statistics.median(r):>10,.0f}{vs_raw:>12.2f}{vs_ours:>13}   {runs}")
    print("\nratios are medians of the per-run ratios (each side against the same run's raw XADD / ours)")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child_main(sys.argv[2:])
    else:
        main()
