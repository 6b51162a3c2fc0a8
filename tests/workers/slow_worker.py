"""A worker process for the bus fault tests: its handler announces itself, then sleeps.

    python -m tests.workers.slow_worker URL PREFIX --consumer a --delay 30

The handler emits `handler_started` (data: consumer, pid, delivery_count) right away,
logs one line, sleeps `--delay` seconds and returns a `job_done` event.
"""

from __future__ import annotations

import argparse
import asyncio
import os

from shared.bus import Delivery, Keys, Outcome, Worker
from shared.config import load_settings
from shared.contracts import EventRecord
from shared.logging import configure_logging, get_logger

log = get_logger(__name__)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("url")
    p.add_argument("prefix")
    p.add_argument("--service", default="slow")
    p.add_argument("--consumer", default=None)
    p.add_argument("--delay", type=float, default=0.0)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--visibility", type=float, default=1.0)
    p.add_argument("--grace", type=float, default=10.0)
    p.add_argument("--max-deliveries", type=int, default=5)
    return p.parse_args(argv)


async def main(args: argparse.Namespace) -> None:
    configure_logging(load_settings(env={}), "slow_worker")

    async def handler(d: Delivery) -> Outcome:
        info = {"consumer": args.consumer, "pid": os.getpid(), "delivery_count": d.delivery_count}
        await d.emit(EventRecord("handler_started", d.task.job_id, d.task.session_id, info))
        log.info("handling", entry_id=d.entry_id, delay=args.delay)
        await asyncio.sleep(args.delay)
        return Outcome(events=[EventRecord("job_done", d.task.job_id, d.task.session_id, info)])

    worker = Worker(
        args.url,
        Keys(args.prefix),
        args.service,
        handler,
        consumer=args.consumer,
        concurrency=args.concurrency,
        visibility_timeout=args.visibility,
        max_deliveries=args.max_deliveries,
        grace_period=args.grace,
    )
    await worker.run_until_signal()


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
