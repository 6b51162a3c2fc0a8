"""The projector: consumer group "projector" on the event log, folding entries into views.

Only one gateway process projects at a time (a leader lease in Valkey), so views are
applied in log order; the others stand by and retry. Requests that write an event
apply it inline with `apply_inline`, which first catches the session up with the
entries the projector has not reached yet, so an inline apply never jumps ahead of an
earlier entry of the same session.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket

import msgspec
import redis.asyncio as aioredis
from redis.exceptions import RedisError, ResponseError

from shared.bus.keys import Keys
from shared.bus.log import EVENT_FIELD, entry_id_str, read_events
from shared.contracts import EventRecord, decode_event
from shared.logging import get_logger
from services.gateway.views import apply_event, id_after, read_session

log = get_logger(__name__)

GROUP = "projector"
BATCH = 500
CATCH_UP_LIMIT = 20_000

RENEW_SCRIPT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
RELEASE_SCRIPT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


def leader_key(keys: Keys) -> str:
    return f"{keys.prefix}projector:leader"


def position_key(keys: Keys) -> str:
    """The id of the last entry the projector applied (every earlier entry is applied)."""
    return f"{keys.prefix}projector:position"


async def catch_up(
    client: aioredis.Redis, keys: Keys, session_id: str, ttl_seconds: int, until: str | None = None
) -> int:
    """Apply the session's entries the projector has not reached yet, up to `until`
    (exclusive; None: the end of the log); the number of entries read."""
    session = await read_session(client, keys, session_id, ttl_seconds)
    if session is None or session.deleted:  # nothing to catch up: a new or a deleted session
        return 0
    start = session.last_id
    raw_pos = await client.get(position_key(keys))
    if raw_pos and id_after(raw_pos.decode(), start):
        start = raw_pos.decode()
    seen = 0
    while (until is None or id_after(until, start)) and seen < CATCH_UP_LIMIT:
        rows = await read_events(client, keys, after=start, count=1000)
        if not rows:
            break
        seen += len(rows)
        for row_id, row in rows:
            if until is not None and not id_after(until, row_id):
                return seen
            if row.session_id == session_id:
                await apply_event(client, keys, row_id, row, ttl_seconds)
            start = row_id
    return seen


async def apply_inline(
    client: aioredis.Redis, keys: Keys, entry_id: str, event: EventRecord, ttl_seconds: int
) -> None:
    """Apply a just-written entry now (read-your-writes), after the session's earlier ones."""
    await catch_up(client, keys, event.session_id, ttl_seconds, until=entry_id)
    await apply_event(client, keys, entry_id, event, ttl_seconds)


class Projector:
    """Runs the projector group in this process whenever it holds the leader lease."""

    def __init__(
        self,
        client: aioredis.Redis,
        blocking: aioredis.Redis,
        keys: Keys,
        ttl_seconds: int,
        *,
        lease_ms: int = 5000,
        block_ms: int = 1000,
        consumer: str | None = None,
    ) -> None:
        self.client = client
        self.blocking = blocking
        self.keys = keys
        self.ttl_seconds = ttl_seconds
        self.lease_ms = lease_ms
        self.block_ms = min(block_ms, lease_ms // 3)
        self.consumer = consumer or f"gateway-{socket.gethostname()}-{os.getpid()}"
        self.token = secrets.token_hex(8)
        self.is_leader = False
        self.applied = 0
        self._stop = asyncio.Event()
        self._renew = client.register_script(RENEW_SCRIPT)
        self._release = client.register_script(RELEASE_SCRIPT)

    def stop(self) -> None:
        self._stop.set()

    async def close(self, task: asyncio.Task[None]) -> None:
        """Stop the loop running in `task` now (un-acked entries are re-read later), free the lease."""
        self.stop()
        while not task.done():  # a cancel that lands inside a client call can be absorbed: repeat
            task.cancel()
            await asyncio.wait({task}, timeout=0.05)
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        if self.is_leader:
            with contextlib.suppress(RedisError, OSError):
                await self._release(keys=[leader_key(self.keys)], args=[self.token])
        self.is_leader = False

    async def run(self) -> None:
        """Stand by until the lease is ours, then project; on any Valkey error, retry."""
        while not self._stop.is_set():
            try:
                was_leader = self.is_leader
                if await self._hold_lease():
                    if not was_leader:
                        await self._ensure_group()
                        await self._adopt_pending()
                    await self._project_once()
                else:
                    await self._sleep(self.lease_ms / 3000)
            except asyncio.CancelledError:
                raise
            except (RedisError, OSError) as exc:
                log.warning("projector_error", error=str(exc))
                self.is_leader = False
                await self._sleep(0.5)
            except Exception:  # a bug must not end projection silently
                log.exception("projector_failed")
                self.is_leader = False
                await self._sleep(1.0)
        with contextlib.suppress(RedisError, OSError):
            await self._release(keys=[leader_key(self.keys)], args=[self.token])
        self.is_leader = False

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._stop.wait(), seconds)

    async def _hold_lease(self) -> bool:
        key = leader_key(self.keys)
        if self.is_leader and await self._renew(keys=[key], args=[self.token, self.lease_ms]):
            return True
        self.is_leader = bool(await self.client.set(key, self.token, nx=True, px=self.lease_ms))
        if self.is_leader:
            log.info("projector_leader", consumer=self.consumer)
        return self.is_leader

    async def _adopt_pending(self) -> None:
        """A new leader takes over what an earlier leader read but did not acknowledge."""
        start = "0-0"
        while True:
            reply = await self.client.xautoclaim(
                self.keys.events, GROUP, self.consumer, 0, start_id=start, count=BATCH
            )
            start = entry_id_str(reply[0])
            if start == "0-0":
                return

    async def _ensure_group(self) -> None:
        with contextlib.suppress(ResponseError):  # BUSYGROUP: it exists
            await self.client.xgroup_create(self.keys.events, GROUP, id="0", mkstream=True)

    async def _project_once(self) -> None:
        """Re-read our own pending entries first, then new ones; apply, XACK."""
        rows = await self.blocking.xreadgroup(
            GROUP, self.consumer, {self.keys.events: "0"}, count=BATCH
        )
        entries = rows[0][1] if rows else []
        if not entries:
            rows = await self.blocking.xreadgroup(
                GROUP, self.consumer, {self.keys.events: ">"}, count=BATCH, block=self.block_ms
            )
            entries = rows[0][1] if rows else []
        if entries:
            await self.apply_batch(entries)

    async def apply_batch(self, entries: list[tuple[bytes, dict[bytes, bytes]]]) -> None:
        ids: list[str] = []
        for n, (raw_id, fields) in enumerate(entries):
            if n and n % 100 == 0 and not await self._hold_lease():
                break  # another process leads now: leave the rest unacknowledged
            entry_id = entry_id_str(raw_id)
            ids.append(entry_id)
            raw = fields.get(EVENT_FIELD) if fields else None
            if raw is None:
                continue
            try:
                event = decode_event(raw)
            except msgspec.DecodeError as exc:
                log.warning("projector_skipped", entry_id=entry_id, error=str(exc))
                continue
            if await apply_event(self.client, self.keys, entry_id, event, self.ttl_seconds):
                self.applied += 1
        if ids:
            pipe = self.client.pipeline(transaction=True)
            pipe.set(position_key(self.keys), ids[-1])
            pipe.xack(self.keys.events, GROUP, *ids)
            await pipe.execute()
