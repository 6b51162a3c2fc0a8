"""Load generator for bench/gateway_load.py, run as its own (pinned) process.

    python bench/load_client.py post URL CLIENTS SECONDS
    python bench/load_client.py sse URL JOB_ID USER STREAMS

post: CLIENTS keep-alive connections each POSTing /chat/message in a loop for SECONDS;
prints JSON {accepted, other (non-202), errors (connection), seconds, latencies_ms}.
sse: opens STREAMS streams of one job, prints "connected" once every stream has its
first event, then the arrival time (time.time()) of the first live event on each
stream and when each stream ended, as JSON.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

import aiohttp


async def post_load(url: str, clients: int, seconds: float) -> dict[str, object]:
    latencies: list[float] = []
    other, errors = [0], [0]
    body = json.dumps({"message": "show me the node for TP53"}).encode()
    connector = aiohttp.TCPConnector(limit=clients, force_close=False)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60)) as session:
        stop_at = time.perf_counter() + seconds

        async def client(i: int) -> None:
            headers = {"X-Anon-Id": f"load-{i}", "Content-Type": "application/json"}
            while time.perf_counter() < stop_at:
                started = time.perf_counter()
                try:
                    async with session.post(f"{url}/chat/message", data=body, headers=headers) as reply:
                        await reply.read()
                        ok = reply.status == 202
                except aiohttp.ClientError:  # a reset connection: counted, and the client goes on
                    errors[0] += 1
                    continue
                if ok:
                    latencies.append((time.perf_counter() - started) * 1000)
                else:
                    other[0] += 1

        began = time.perf_counter()
        await asyncio.gather(*(client(i) for i in range(clients)))
        elapsed = time.perf_counter() - began
    return {"accepted": len(latencies), "other": other[0], "errors": errors[0], "seconds": elapsed, "latencies_ms": latencies}


async def sse_load(url: str, job_id: str, user: str, streams: int) -> dict[str, object]:
    connected = 0
    all_connected = asyncio.Event()
    live: list[float] = []
    ended: list[float] = []
    connector = aiohttp.TCPConnector(limit=streams)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None)) as session:

        async def follow() -> None:
            nonlocal connected
            headers = {"X-Anon-Id": user, "Accept": "text/event-stream"}
            first = True
            async with session.get(f"{url}/chat/job/{job_id}/events", headers=headers) as reply:
                assert reply.status == 200, reply.status
                async for line in reply.content:
                    if line.startswith(b"event: "):
                        kind = line[7:].strip()
                        if first:  # the stored job_submitted
                            first = False
                            connected += 1
                            if connected == streams:
                                all_connected.set()
                        elif kind == b"agent_step":
                            live.append(time.time())
            ended.append(time.time())

        tasks = [asyncio.create_task(follow()) for _ in range(streams)]
        await all_connected.wait()
        print("connected", flush=True)
        await asyncio.gather(*tasks)
    return {"live": live, "ended": ended}


def main(argv: list[str]) -> None:
    mode, url, *rest = argv
    if mode == "post":
        result = asyncio.run(post_load(url, int(rest[0]), float(rest[1])))
    else:
        result = asyncio.run(sse_load(url, rest[0], rest[1], int(rest[2])))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
