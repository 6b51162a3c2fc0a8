"""Server-sent events of a job: one tailing reader per process, fanned out in memory.

The Hub holds one blocking connection that XREADs the event log and hands each entry
to the queues of the clients following that job. A queue is bounded: a client too
slow to drain it is dropped with a clean end of stream rather than slowing the others.
`job_stream` writes one job's story: stored events, the log since, then live entries,
each once, in log order, ending after the terminal event.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import msgspec
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from shared.bus.keys import Keys
from shared.bus.log import EVENT_FIELD, entry_id_str, read_events
from shared.contracts import EventRecord, decode_event
from shared.logging import get_logger
from services.gateway.views import TERMINAL_TYPES, JobView, id_after

log = get_logger(__name__)

QUEUE_SIZE = 1000
_encoder = msgspec.json.Encoder()
Item = tuple[str, EventRecord]


class Subscriber:
    """One client's queue of (entry id, event); None in the queue means "stop"."""

    __slots__ = ("job_id", "queue", "dropped")

    def __init__(self, job_id: str, size: int = QUEUE_SIZE) -> None:
        self.job_id = job_id
        self.queue: asyncio.Queue[Item | None] = asyncio.Queue(size)
        self.dropped = False

    def offer(self, item: Item) -> bool:
        """Queue an entry; False when the queue is full (the subscriber is then closed)."""
        if self.dropped:
            return False
        try:
            self.queue.put_nowait(item)
            return True
        except asyncio.QueueFull:
            self.close()
            return False

    def close(self) -> None:
        self.dropped = True
        while True:  # make room for the stop marker
            try:
                self.queue.put_nowait(None)
                return
            except asyncio.QueueFull:
                self.queue.get_nowait()


class Hub:
    """The one reader of the event log in this process and its subscribers by job id."""

    def __init__(self, blocking: aioredis.Redis, keys: Keys, *, block_ms: int = 5000) -> None:
        self.blocking = blocking
        self.keys = keys
        self.block_ms = block_ms
        self._subs: dict[str, set[Subscriber]] = {}
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self.last_id: str | None = None

    def subscribe(self, job_id: str, size: int = QUEUE_SIZE) -> Subscriber:
        sub = Subscriber(job_id, size)
        if self._closed:
            sub.close()
        self._subs.setdefault(job_id, set()).add(sub)
        return sub

    def unsubscribe(self, sub: Subscriber) -> None:
        subs = self._subs.get(sub.job_id)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self._subs[sub.job_id]

    @property
    def subscriber_count(self) -> int:
        return sum(len(s) for s in self._subs.values())

    async def start(self) -> None:
        """Start tailing from the current end of the log."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="sse-hub")

    async def close(self) -> None:
        """Stop reading and end every open stream cleanly."""
        self._closed = True
        for subs in list(self._subs.values()):
            for sub in list(subs):
                sub.close()
        if self._task is not None:
            while not self._task.done():
                self._task.cancel()
                await asyncio.wait({self._task}, timeout=0.05)
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None

    def dispatch(self, entry_id: str, event: EventRecord) -> None:
        for sub in list(self._subs.get(event.job_id, ())):
            if not sub.offer((entry_id, event)):
                log.info("sse_client_dropped", job_id=event.job_id, reason="queue full")
                self.unsubscribe(sub)

    async def _run(self) -> None:
        while True:
            try:
                if self.last_id is None:
                    last = await self.blocking.xrevrange(self.keys.events, count=1)
                    self.last_id = entry_id_str(last[0][0]) if last else "0-0"
                rows = await self.blocking.xread({self.keys.events: self.last_id}, block=self.block_ms, count=1000)
                for _stream, entries in rows or []:
                    for raw_id, fields in entries:
                        entry_id = entry_id_str(raw_id)
                        self.last_id = entry_id
                        raw = fields.get(EVENT_FIELD) if fields else None
                        if raw is None:
                            continue
                        try:
                            event = decode_event(raw)
                        except msgspec.DecodeError:
                            continue
                        self.dispatch(entry_id, event)
            except asyncio.CancelledError:
                raise
            except (RedisError, OSError) as exc:
                log.warning("sse_hub_error", error=str(exc))
                await asyncio.sleep(0.5)


def format_event(entry_id: str, event: EventRecord) -> bytes:
    """One SSE message: id, event type and the JobEvent as JSON."""
    data = _encoder.encode(event.as_job_event()).decode()
    return f"id: {entry_id}\nevent: {event.type}\ndata: {data}\n\n".encode()


async def job_stream(
    client: aioredis.Redis,
    hub: Hub,
    keys: Keys,
    view: JobView,
    after: str | None,
    ping_seconds: float,
) -> AsyncIterator[bytes]:
    """The SSE body for one job: everything after `after`, each entry once, in order."""
    cursor = after or "0-0"
    job_id = view.record.job_id
    yield b": stream of job " + job_id.encode() + b"\n\n"  # flush headers at once
    if view.record.status.is_final:
        for entry_id, job_event in view.events:
            if id_after(entry_id, cursor):
                yield format_event(entry_id, EventRecord(job_event.type, job_id, view.record.session_id, job_event.data))
        return
    sub = hub.subscribe(job_id)
    try:
        # stored events, then the log past what the view holds, then live entries
        for entry_id, job_event in view.events:
            if id_after(entry_id, cursor):
                cursor = entry_id
                yield format_event(entry_id, EventRecord(job_event.type, job_id, view.record.session_id, job_event.data))
                if job_event.type in TERMINAL_TYPES:
                    return
        scan = view.last_id  # from what the view holds, so an end before `cursor` is seen too
        while True:
            rows = await read_events(client, keys, after=scan, count=1000)
            if not rows:
                break
            for entry_id, event in rows:
                scan = entry_id
                if event.job_id != job_id:
                    continue
                if not id_after(entry_id, cursor):
                    if event.type in TERMINAL_TYPES:
                        return  # the client has seen the end already
                    continue
                cursor = entry_id
                yield format_event(entry_id, event)
                if event.type in TERMINAL_TYPES:
                    return
        while True:
            try:
                item = await asyncio.wait_for(sub.queue.get(), ping_seconds)
            except asyncio.TimeoutError:
                yield b": ping\n\n"
                continue
            if item is None:
                return  # dropped (too slow) or the process is stopping
            entry_id, event = item
            if not id_after(entry_id, cursor):
                continue
            cursor = entry_id
            yield format_event(entry_id, event)
            if event.type in TERMINAL_TYPES:
                return
    finally:
        hub.unsubscribe(sub)
