"""Consumer-group worker: reads an inbox, runs a handler per entry, commits its outcome.

Delivery rules (DESIGN.md): at-least-once. A worker re-reads its own pending entries,
then reads new ones (">") only when it has room for them; entries idle longer than the
visibility timeout are taken over with XAUTOCLAIM; a running handler keeps its lease
by renewing it; an entry delivered more than `max_deliveries` times goes to the
dead-letter stream with a job_error event. A handler's events, next tasks and the
XACK are written in one MULTI (finished handlers are committed together, group commit).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec
import redis.asyncio as aioredis
from redis.exceptions import RedisError, ResponseError

from shared.bus.connection import connect
from shared.bus.keys import Keys
from shared.bus.lease import Leases
from shared.bus.cancel import cancel_reason, job_cancelled_event
from shared.bus.log import (
    DEFAULT_RETENTION_SECONDS,
    EVENT_FIELD,
    TASK_FIELD,
    add_event,
    add_task,
    entry_id_str,
    min_id,
)
from shared.contracts import EventRecord, JobTask, decode_task, encode
from shared.logging import bind_job, get_logger, unbind_job

log = get_logger(__name__)

ClientFactory = Callable[[], aioredis.Redis]


class Outcome(msgspec.Struct):
    """What a handler returns; written together with the XACK in one MULTI."""

    events: list[EventRecord] = []
    tasks: list[tuple[str, JobTask]] = []  # (service, task) to enqueue


class Delivery:
    """One inbox entry as a handler receives it."""

    __slots__ = ("entry_id", "task", "delivery_count", "_worker")

    def __init__(self, entry_id: str, task: JobTask, delivery_count: int, worker: Worker) -> None:
        self.entry_id = entry_id
        self.task = task
        self.delivery_count = delivery_count
        self._worker = worker

    async def emit(self, event: EventRecord) -> str:
        """Publish a progress event now (agent_step, tool_call ...); returns its entry id.

        Raises LeaseLost, writing nothing, once another consumer has taken the entry over.
        """
        w = self._worker
        entry_id = await w._leases.add_if_owned(
            self.entry_id, w.keys.events, min_id(w.retention_seconds), EVENT_FIELD, encode(event)
        )
        if entry_id is None:
            raise LeaseLost(self.entry_id)
        return entry_id_str(entry_id)

    async def cancel_reason(self) -> str | None:
        """Why the job was cancelled, once someone asked to (see shared.bus.cancel); else None."""
        return await cancel_reason(self._worker.client, self._worker.keys, self.task.job_id)

    def __repr__(self) -> str:
        return f"Delivery({self.entry_id!r}, job_id={self.task.job_id!r}, count={self.delivery_count})"


Handler = Callable[[Delivery], Awaitable[Outcome]]


class LeaseLost(Exception):
    """The entry was taken over by another consumer (this one stalled past its lease)."""


@dataclass(eq=False)
class _Slot:
    """An entry in flight in this worker."""

    delivery: Delivery
    started: float = field(default_factory=time.monotonic)
    task: asyncio.Task[None] | None = None
    lost: bool = False


@dataclass(eq=False)
class _Commit:
    slot: _Slot
    outcome: Outcome
    done: asyncio.Future[bool]


def default_consumer_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


def _blocking_twin(client: aioredis.Redis) -> aioredis.Redis:
    """A single-connection client like `client` but without a socket timeout."""
    pool = client.connection_pool
    kwargs = {**pool.connection_kwargs, "socket_timeout": None}
    twin_pool = type(pool)(connection_class=pool.connection_class, **kwargs)
    twin = aioredis.Redis(connection_pool=twin_pool, single_connection_client=True)
    twin.auto_close_connection_pool = True
    return twin


class Worker:
    """Runs `handler` for the entries of keys.inbox(service), as consumer group `service`."""

    def __init__(
        self,
        client_factory: ClientFactory | str,
        keys: Keys,
        service: str,
        handler: Handler,
        *,
        consumer: str | None = None,
        concurrency: int = 8,
        visibility_timeout: float = 60.0,
        max_deliveries: int = 5,
        retention_seconds: int = DEFAULT_RETENTION_SECONDS,
        block_ms: int = 2000,
        batch: int | None = None,
        grace_period: float = 25.0,
        forget_consumers_after: float = 24 * 3600.0,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        if visibility_timeout <= 0:
            raise ValueError("visibility_timeout must be > 0")
        self.client_factory = client_factory
        self.keys = keys
        self.service = service
        self.group = service
        self.stream = keys.inbox(service)
        self.handler = handler
        self.consumer = consumer or default_consumer_name()
        self.concurrency = concurrency
        self.visibility_timeout = visibility_timeout
        self.max_deliveries = max_deliveries
        self.retention_seconds = retention_seconds
        self.batch = batch or concurrency
        self.grace_period = grace_period
        self.forget_consumers_after = forget_consumers_after
        vis_ms = int(visibility_timeout * 1000)
        self._vis_ms = max(1, vis_ms)
        # Renew well before the timeout; look for abandoned entries a few times per timeout.
        self._renew_every = max(0.02, visibility_timeout / 3)
        self._reclaim_every = max(0.02, min(visibility_timeout / 4, 5.0))
        self._block_ms = max(1, min(block_ms, int(self._reclaim_every * 1000)))
        self._inflight: dict[str, _Slot] = {}
        self._commits: list[_Commit] = []
        self._commit_wake = asyncio.Event()
        self._room = asyncio.Event()
        self._stopping = asyncio.Event()
        self._closing = False
        self._last_errors: dict[str, str] = {}
        self._log = log.bind(service=service, consumer=self.consumer)
        self.client: aioredis.Redis = None  # type: ignore[assignment]  # set by run()
        self.processed = 0  # entries committed (for tests and benchmarks)

    # --- public -------------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        return len(self._inflight)

    def stop(self) -> None:
        """Ask run() to stop: no more reads, in-flight work finishes or is handed back."""
        self._stopping.set()
        self._room.set()  # wake a full worker waiting for room

    async def run_until_signal(self) -> None:
        """run() with SIGTERM/SIGINT wired to stop()."""
        loop = asyncio.get_running_loop()
        installed = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self._on_signal, sig)
                installed.append(sig)
        try:
            await self.run()
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)

    async def run(self) -> None:
        """Consume until stop(); then drain and return."""
        self.client, reader = self._clients()
        self._leases = Leases(self.client, self.stream, self.group, self.consumer)
        background: list[asyncio.Task[None]] = []
        try:
            await self._ensure_group()
            await self._forget_idle_consumers()
            self._log.info("worker started", concurrency=self.concurrency, visibility_timeout=self.visibility_timeout)
            background = [
                asyncio.create_task(self._commit_loop(), name=f"{self.service}-commit"),
                asyncio.create_task(self._renew_loop(), name=f"{self.service}-renew"),
            ]
            await self._consume(reader)
        finally:
            await self._shutdown(background)
            with contextlib.suppress(Exception):
                await reader.aclose()
            with contextlib.suppress(Exception):
                await self.client.aclose()
            self._log.info("worker stopped", processed=self.processed)

    # --- reading ------------------------------------------------------------------

    def _clients(self) -> tuple[aioredis.Redis, aioredis.Redis]:
        if isinstance(self.client_factory, str):
            return connect(self.client_factory), connect(self.client_factory, blocking=True)
        client = self.client_factory()
        return client, _blocking_twin(client)

    async def _ensure_group(self) -> None:
        try:
            await self.client.xgroup_create(self.stream, self.group, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def _forget_idle_consumers(self) -> None:
        """Delete consumers of the group that hold nothing and were idle for long (old pids)."""
        limit_ms = self.forget_consumers_after * 1000
        for info in await self.client.xinfo_consumers(self.stream, self.group):
            name = entry_id_str(info["name"])
            if name != self.consumer and int(info["pending"]) == 0 and int(info["idle"]) > limit_ms:
                # XGROUP DELCONSUMER drops the consumer's pending entries: only when it has none.
                await self.client.xgroup_delconsumer(self.stream, self.group, name)
                self._log.info("forgot idle consumer", name=name)

    async def _consume(self, reader: aioredis.Redis) -> None:
        backlog = "0-0"  # own pending entries first, from this cursor; None once done
        next_reclaim = 0.0
        reclaim_cursor = "0-0"
        while not self._stopping.is_set():
            room = self.concurrency - len(self._inflight)
            if room <= 0:
                self._room.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._room.wait(), self._reclaim_every)
                continue
            try:
                if backlog is None and time.monotonic() >= next_reclaim:
                    next_reclaim = time.monotonic() + self._reclaim_every
                    reclaim_cursor = await self._reclaim(room, reclaim_cursor)
                    continue
                count = min(room, self.batch)
                if backlog is not None:
                    entries = await self._read(reader, backlog, count, block=None)
                    if not entries:
                        backlog = None
                        continue
                    backlog = entries[-1][0]
                    await self._dispatch(entries, await self._delivery_counts(entries))
                else:
                    entries = await self._read_new(reader, count)
                    await self._dispatch(entries, None)
            except (RedisError, OSError) as exc:
                self._log.warning("bus error, retrying", error=f"{type(exc).__name__}: {exc}")
                if "NOGROUP" in str(exc):  # the inbox was deleted under us: start over
                    backlog, reclaim_cursor = "0-0", "0-0"
                    with contextlib.suppress(RedisError, OSError):
                        await self._ensure_group()
                    continue
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), 1.0)

    async def _read(
        self, reader: aioredis.Redis, from_id: str, count: int, block: int | None
    ) -> list[tuple[str, dict[bytes, bytes]]]:
        reply = await reader.xreadgroup(self.group, self.consumer, {self.stream: from_id}, count=count, block=block)
        if not reply:
            return []
        return [(entry_id_str(i), fields) for i, fields in reply[0][1]]

    async def _read_new(self, reader: aioredis.Redis, count: int) -> list[tuple[str, dict[bytes, bytes]]]:
        """XREADGROUP '>' BLOCK, abandoned as soon as stop() is called."""
        read = asyncio.ensure_future(self._read(reader, ">", count, block=self._block_ms))
        stop = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait({read, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if not read.done():
            # Entries delivered to an abandoned read stay pending here; shutdown hands them back.
            read.cancel()
            with contextlib.suppress(BaseException):
                await read
            return []
        return read.result()

    async def _reclaim(self, room: int, cursor: str) -> str:
        """XAUTOCLAIM entries idle past the visibility timeout (their consumer died)."""
        reply = await self.client.xautoclaim(
            self.stream, self.group, self.consumer, self._vis_ms, cursor, count=room
        )
        next_cursor = entry_id_str(reply[0])
        entries = [(entry_id_str(i), f) for i, f in reply[1]]
        if entries:
            self._log.info("reclaimed idle entries", count=len(entries), ids=[e for e, _ in entries])
            await self._dispatch(entries, await self._delivery_counts(entries))
        return next_cursor

    async def _delivery_counts(self, entries: list[tuple[str, Any]]) -> dict[str, int]:
        rows = await self.client.xpending_range(
            self.stream,
            self.group,
            min=entries[0][0],
            max=entries[-1][0],
            count=len(entries) + len(self._inflight) + 1,
            consumername=self.consumer,
        )
        return {entry_id_str(r["message_id"]): int(r["times_delivered"]) for r in rows}

    # --- dispatching --------------------------------------------------------------

    async def _dispatch(self, entries: list[tuple[str, dict[bytes, bytes]]], counts: dict[str, int] | None) -> None:
        for entry_id, fields in entries:
            if entry_id in self._inflight:
                continue  # already being handled here (claimed again or re-read)
            count = 1 if counts is None else counts.get(entry_id, 1)
            if not fields:
                # Deleted from the stream while pending: nothing left to do.
                await self.client.xack(self.stream, self.group, entry_id)
                continue
            task, problem = _decode(fields)
            if task is None:
                await self._dead_letter(entry_id, fields, count, "undecodable", problem)
                continue
            if count > self.max_deliveries:
                reason = self._last_errors.pop(entry_id, None)
                error = f"gave up after {count - 1} deliveries to {self.service}" + (f": {reason}" if reason else "")
                await self._dead_letter(entry_id, fields, count, "max_deliveries", error, task)
                continue
            slot = _Slot(Delivery(entry_id, task, count, self))
            self._inflight[entry_id] = slot
            slot.task = asyncio.create_task(self._handle(slot), name=f"{self.service}-{entry_id}")

    async def _handle(self, slot: _Slot) -> None:
        d = slot.delivery
        bind_job(d.task.job_id, d.task.session_id)
        try:
            try:
                reason = await d.cancel_reason()
                if reason is not None:  # cancelled before this service began: the job ends here
                    outcome = Outcome(events=[job_cancelled_event(d.task.job_id, d.task.session_id, reason, self.service)])
                else:
                    outcome = await self.handler(d)
            except asyncio.CancelledError:
                log.warning("handler cancelled; entry handed back", entry_id=d.entry_id, service=self.service)
                raise
            except LeaseLost:
                slot.lost = True
                log.warning("lease lost; run abandoned, the new owner redoes the entry", entry_id=d.entry_id)
                return
            except Exception as exc:
                self._remember_error(d.entry_id, exc)
                log.exception(
                    "handler failed; entry left pending for a retry",
                    entry_id=d.entry_id,
                    delivery_count=d.delivery_count,
                    service=self.service,
                )
                return
            if outcome is None:
                outcome = Outcome()
            if time.monotonic() - slot.started >= self._renew_every:
                # A long handler: make sure the lease is still ours before writing.
                owned = await self._leases.renew([d.entry_id])
                slot.lost = slot.lost or d.entry_id not in owned
            if slot.lost:
                log.warning("lease lost; result dropped, the new owner redoes the entry", entry_id=d.entry_id)
                return
            done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
            self._commits.append(_Commit(slot, outcome, done))
            self._commit_wake.set()
            await done
        finally:
            unbind_job()
            self._inflight.pop(d.entry_id, None)
            self._room.set()

    def _remember_error(self, entry_id: str, exc: BaseException) -> None:
        if len(self._last_errors) > 10_000:
            self._last_errors.clear()
        self._last_errors[entry_id] = f"{type(exc).__name__}: {exc}"[:500]

    # --- writing ------------------------------------------------------------------

    async def _commit_loop(self) -> None:
        """Write finished outcomes and their XACKs, all that are ready, in one MULTI."""
        while True:
            await self._commit_wake.wait()
            self._commit_wake.clear()
            while self._commits:
                batch, self._commits = self._commits, []
                await self._commit(batch)
            if self._closing:
                return

    async def _commit(self, batch: list[_Commit]) -> None:
        pipe = self.client.pipeline(transaction=True)
        for c in batch:
            for event in c.outcome.events:
                add_event(pipe, self.keys, event, self.retention_seconds)
            for service, task in c.outcome.tasks:
                add_task(pipe, self.keys, service, task)
        pipe.xack(self.stream, self.group, *[c.slot.delivery.entry_id for c in batch])
        try:
            await pipe.execute()
            ok = True
        except (RedisError, OSError) as exc:
            ok = False
            self._log.error("commit failed; entries stay pending", error=f"{type(exc).__name__}: {exc}", count=len(batch))
        if ok:
            self.processed += len(batch)
            for c in batch:
                self._last_errors.pop(c.slot.delivery.entry_id, None)
        for c in batch:
            if not c.done.done():
                c.done.set_result(ok)

    async def _dead_letter(
        self,
        entry_id: str,
        fields: dict[bytes, bytes],
        count: int,
        reason: str,
        error: str,
        task: JobTask | None = None,
    ) -> None:
        """Move an entry to keys.dead(service) with a job_error event and the XACK, in one MULTI."""
        job_id, session_id = (task.job_id, task.session_id) if task else _ids_of(fields.get(TASK_FIELD))
        pipe = self.client.pipeline(transaction=True)
        dead = dict(fields)  # the original payload, plus why and when it died
        dead.update(
            {
                b"reason": reason.encode(),
                b"error": error.encode(),
                b"count": str(count).encode(),
                b"entry": entry_id.encode(),
                b"consumer": self.consumer.encode(),
                b"ts": repr(time.time()).encode(),
            }
        )
        pipe.xadd(self.keys.dead(self.service), dead)
        if job_id and session_id:
            event = EventRecord("job_error", job_id, session_id, {"error": error, "reason": reason})
            add_event(pipe, self.keys, event, self.retention_seconds)
        pipe.xack(self.stream, self.group, entry_id)
        await pipe.execute()
        self._log.error(
            "entry dead-lettered",
            entry_id=entry_id,
            reason=reason,
            error=error,
            delivery_count=count,
            job_id=job_id,
            session_id=session_id,
        )

    # --- leases and shutdown ------------------------------------------------------

    async def _renew_loop(self) -> None:
        """Keep the entries of running handlers ours (XCLAIM JUSTID resets their idle time)."""
        while True:
            await asyncio.sleep(self._renew_every)
            ids = list(self._inflight)
            if not ids:
                continue
            try:
                owned = await self._leases.renew(ids)
            except (RedisError, OSError) as exc:
                self._log.warning("lease renewal failed", error=f"{type(exc).__name__}: {exc}")
                continue
            for entry_id in ids:
                slot = self._inflight.get(entry_id)
                if slot is not None and entry_id not in owned and not slot.lost:
                    slot.lost = True
                    self._log.warning(
                        "lease lost to another consumer",
                        entry_id=entry_id,
                        job_id=slot.delivery.task.job_id,
                        session_id=slot.delivery.task.session_id,
                    )

    def _on_signal(self, sig: signal.Signals) -> None:
        self._log.info("signal received, stopping", signal=sig.name, in_flight=len(self._inflight))
        self.stop()

    async def _shutdown(self, background: list[asyncio.Task[None]]) -> None:
        """Finish in-flight handlers within the grace period, cancel the rest, hand back."""
        self._stopping.set()
        tasks = [s.task for s in self._inflight.values() if s.task is not None]
        if tasks:
            self._log.info("waiting for in-flight handlers", count=len(tasks), grace_period=self.grace_period)
            _, pending = await asyncio.wait(tasks, timeout=self.grace_period)
            for t in pending:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        # Let the last commits land (the commit loop drains, then returns), stop the rest.
        self._closing = True
        self._commit_wake.set()
        if background:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(background[0]), 30)
        for t in background:
            t.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        with contextlib.suppress(Exception):
            await self._hand_back_pending()

    async def _hand_back_pending(self) -> None:
        """Make every entry still pending here immediately claimable by other consumers."""
        if self.client is None:
            return
        rows = await self.client.xpending_range(
            self.stream, self.group, min="-", max="+", count=10_000, consumername=self.consumer
        )
        ids = [entry_id_str(r["message_id"]) for r in rows]
        if ids:
            handed = await self._leases.hand_back(ids, self._vis_ms)
            self._log.info("handed back pending entries", count=len(handed), ids=sorted(handed))


def _decode(fields: dict[bytes, bytes]) -> tuple[JobTask | None, str]:
    """The entry's JobTask, or None and why not."""
    raw = fields.get(TASK_FIELD)
    if raw is None:
        return None, f"no {TASK_FIELD.decode()!r} field"
    try:
        return decode_task(raw), ""
    except msgspec.DecodeError as exc:
        return None, f"not a JobTask: {exc}"


def _ids_of(raw: bytes | None) -> tuple[str | None, str | None]:
    """Best effort job_id/session_id of an entry that is not a valid JobTask."""
    if raw is None:
        return None, None
    try:
        data = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return None, None
    if not isinstance(data, dict):
        return None, None
    job_id, session_id = data.get("job_id"), data.get("session_id")
    return (job_id if isinstance(job_id, str) else None, session_id if isinstance(session_id, str) else None)
