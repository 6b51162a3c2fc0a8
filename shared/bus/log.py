"""Writes to the event log and the inboxes, and reads of the log for replay/audit.

`add_event` / `add_task` queue one XADD on a pipeline (MULTI) or run it on a client;
`publish` writes several events and tasks in one MULTI.
"""

from __future__ import annotations

import time
from typing import Any

import msgspec
import redis.asyncio as aioredis

from shared.bus.keys import Keys
from shared.contracts import EventRecord, JobTask, decode_event, encode
from shared.logging import get_logger

log = get_logger(__name__)

EVENT_FIELD = b"e"
TASK_FIELD = b"t"
DEFAULT_RETENTION_SECONDS = 7 * 24 * 3600


def min_id(retention_seconds: int, now: float | None = None) -> str:
    """The MINID that drops entries older than `retention_seconds`."""
    now = time.time() if now is None else now
    return f"{max(0, int((now - retention_seconds) * 1000))}-0"


def add_event(pipe_or_client: Any, keys: Keys, event: EventRecord, retention_seconds: int) -> Any:
    """XADD events MINID ~ <now-retention> * e <json>: trimmed by age, never by count."""
    return pipe_or_client.xadd(
        keys.events, {EVENT_FIELD: encode(event)}, minid=min_id(retention_seconds), approximate=True
    )


def add_task(pipe_or_client: Any, keys: Keys, service: str, task: JobTask) -> Any:
    """XADD work:<service> * t <json>; inboxes are not trimmed (no unread work is dropped)."""
    return pipe_or_client.xadd(keys.inbox(service), {TASK_FIELD: encode(task)})


async def publish(
    client: aioredis.Redis,
    keys: Keys,
    events: list[EventRecord],
    tasks: list[tuple[str, JobTask]] = [],  # noqa: B006 - never mutated
    retention_seconds: int = DEFAULT_RETENTION_SECONDS,
) -> list[bytes]:
    """Write `events` and `tasks` in one MULTI; returns the event entry ids in order."""
    if not events and not tasks:
        return []
    pipe = client.pipeline(transaction=True)
    for event in events:
        add_event(pipe, keys, event, retention_seconds)
    for service, task in tasks:
        add_task(pipe, keys, service, task)
    results = await pipe.execute()
    return list(results[: len(events)])


def entry_id_str(entry_id: bytes | str) -> str:
    return entry_id.decode() if isinstance(entry_id, bytes) else entry_id


def next_id(entry_id: str) -> str:
    """The smallest id after `entry_id` (for exclusive range scans)."""
    ms, _, seq = entry_id.partition("-")
    return f"{ms}-{int(seq or 0) + 1}"


async def read_events(
    client: aioredis.Redis, keys: Keys, *, after: str = "0-0", count: int = 1000
) -> list[tuple[str, EventRecord]]:
    """Up to `count` events with ids strictly after `after` (XRANGE), oldest first."""
    rows = await client.xrange(keys.events, min=f"({after}", max="+", count=count)
    out: list[tuple[str, EventRecord]] = []
    for entry_id, fields in rows:
        raw = fields.get(EVENT_FIELD) if fields else None
        if raw is None:
            continue
        try:
            out.append((entry_id_str(entry_id), decode_event(raw)))
        except msgspec.DecodeError as exc:
            log.warning("skipped an undecodable event", entry_id=entry_id_str(entry_id), error=str(exc))
    return out
