"""Views derived from the event log: one session view, one job view, one user index.

`project` is the pure fold of one log entry into the views it touches; `apply_event`
runs it against Valkey (WATCH, compare, MULTI SET, retry on WatchError). Every view
records the last entry id it applied, so applying an entry twice changes nothing.
Every value a view holds comes from the events (times included), which is what makes
a replay rebuild identical to the live views.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import msgspec
import redis.asyncio as aioredis
from redis.exceptions import WatchError

from shared.bus.keys import Keys
from shared.contracts import ChatResponse, ChatSession, EventRecord, JobEvent, JobRecord, JobStatus

TERMINAL_TYPES = frozenset({"job_done", "job_error", "job_cancelled"})
# streamed pieces of an answer: kept in the job's story (SSE replay), not in the
# session, whose assistant message holds the whole answer
TRANSIENT_TYPES = frozenset({"answer_delta"})
SESSION_TYPES = frozenset({"session_renamed", "session_deleted"})


class SessionView(msgspec.Struct, omit_defaults=True):
    """chat:session:{id}; a deleted session is the tombstone {"deleted": true}."""

    session: ChatSession | None = None
    user_id: str | None = None
    updated_at: float = 0.0
    last_id: str = "0-0"
    deleted: bool = False


class JobView(msgspec.Struct):
    """chat:job:{id}: the record and every event shown for the job, in log order."""

    record: JobRecord
    events: list[tuple[str, JobEvent]] = []
    last_id: str = "0-0"

    @property
    def first_id(self) -> str:
        return self.events[0][0] if self.events else "0-0"


_encoder = msgspec.json.Encoder()
_session_decoder = msgspec.json.Decoder(SessionView)
_job_decoder = msgspec.json.Decoder(JobView)
_response_decoder = msgspec.json.Decoder(ChatResponse)


def parse_id(entry_id: str | bytes) -> tuple[int, int]:
    """A stream entry id as (ms, seq), so ids compare numerically."""
    text = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    ms, _, seq = text.partition("-")
    return int(ms), int(seq or 0)


def id_after(entry_id: str, other: str) -> bool:
    """True when `entry_id` comes strictly after `other` in the log."""
    return parse_id(entry_id) > parse_id(other)


def encode_view(view: SessionView | JobView) -> bytes:
    return _encoder.encode(view)


def decode_session_view(raw: bytes | None) -> SessionView | None:
    return None if raw is None else _session_decoder.decode(raw)


def decode_job_view(raw: bytes | None) -> JobView | None:
    return None if raw is None else _job_decoder.decode(raw)


def _ts(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, timezone.utc)


class Change(msgspec.Struct):
    """What one entry does to the views: None means "leave that key alone"."""

    session: SessionView | None = None
    job: JobView | None = None
    index_add: tuple[str, float] | None = None  # (user_id, last activity)
    index_remove: str | None = None  # user_id

    @property
    def empty(self) -> bool:
        return self.session is None and self.job is None and self.index_add is None and self.index_remove is None


def _confidence(job: JobView | None) -> float | None:
    if job is None:
        return None
    for _, event in reversed(job.events):
        if event.type == "routing_done" and isinstance(event.data.get("confidence"), (int, float)):
            return float(event.data["confidence"])
    return None


def _final_message(event: EventRecord) -> tuple[str, str | None, ChatResponse | None, str | None]:
    """(assistant text, route, result, error) for a terminal event."""
    if event.type == "job_done":
        raw = event.data.get("result") or {}
        try:
            result = _response_decoder.decode(_encoder.encode(raw))
        except msgspec.DecodeError as exc:
            return f"The job ended with an unreadable result: {exc}", None, None, f"unreadable result: {exc}"
        return result.answer, result.route_taken, result, None
    if event.type == "job_error":
        error = str(event.data.get("error") or "unknown error")
        return f"Sorry, this message could not be answered: {error}", None, None, error
    reason = str(event.data.get("reason") or "cancelled")
    return f"The job was cancelled: {reason}", None, None, reason


def project(
    session: SessionView | None, job: JobView | None, entry_id: str, event: EventRecord
) -> Change:
    """Fold one log entry into copies of the current views (pure; inputs untouched)."""
    change = Change()
    session = msgspec.structs.replace(session) if session is not None else None
    session_fresh = session is not None and not session.deleted and id_after(entry_id, session.last_id)
    job_fresh = job is not None and id_after(entry_id, job.last_id)
    job_event = event.as_job_event()

    if event.type == "session_deleted":
        if session is not None and session_fresh:
            change.session = SessionView(deleted=True)
            if session.user_id:
                change.index_remove = session.user_id
        return change

    if event.type == "session_renamed":
        if session is not None and session_fresh and session.session is not None:
            chat = msgspec.structs.replace(session.session, name=str(event.data.get("name") or "") or None)
            change.session = msgspec.structs.replace(
                session, session=chat, updated_at=event.ts, last_id=entry_id
            )
            if session.user_id:
                change.index_add = (session.user_id, event.ts)
        return change

    if not event.job_id:
        return change

    if event.type == "job_submitted":
        user_id = event.data.get("user_id")
        message = str(event.data.get("message", ""))
        if job is None:
            record = JobRecord(
                job_id=event.job_id,
                session_id=event.session_id,
                user_id=user_id,
                is_new_session=bool(event.data.get("is_new_session", False)),
                message=message,
                created_at=_ts(event.ts),
            )
            change.job = JobView(record=record, events=[(entry_id, job_event)], last_id=entry_id)
        if session is None and event.data.get("is_new_session"):  # never resurrect a part of a session
            session = SessionView(
                session=ChatSession(session_id=event.session_id, created_at=_ts(event.ts)),
                user_id=user_id,
                last_id="0-0",
            )
            session_fresh = True
        if session is not None and session_fresh and session.session is not None:
            chat = _copy_session(session.session)
            chat.add("user", message)
            chat.pending_job_id = event.job_id
            change.session = msgspec.structs.replace(session, session=chat, updated_at=event.ts, last_id=entry_id)
            if session.user_id:
                change.index_add = (session.user_id, event.ts)
        return change

    # a step or the end of a job
    was_final = job is not None and job.record.status.is_final
    if job is not None and job_fresh:
        record = msgspec.structs.replace(job.record)
        events = list(job.events)
        if not was_final:
            if event.type in TERMINAL_TYPES:
                text, _route, result, error = _final_message(event)
                record.status = {
                    "job_done": JobStatus.done if result is not None else JobStatus.error,
                    "job_error": JobStatus.error,
                    "job_cancelled": JobStatus.cancelled,
                }[event.type]
                record.result = result
                record.error = error
            else:
                record.status = JobStatus.running
            events.append((entry_id, job_event))
        change.job = JobView(record=record, events=events, last_id=entry_id)

    if session is None or not session_fresh or session.session is None:
        return change
    # the session follows the job unless the job was already final (a duplicate end)
    belongs = (job is not None and not was_final) or (job is None and session.session.pending_job_id == event.job_id)
    if not belongs:
        return change
    chat = _copy_session(session.session)
    if event.type in TERMINAL_TYPES:
        text, route, _result, _error = _final_message(event)
        keep = chat.pending_job_id if chat.pending_job_id != event.job_id else None
        chat.add("assistant", text, route, _confidence(job) if route else None)  # type: ignore[arg-type]
        chat.pending_job_id = keep
    elif event.type in TRANSIENT_TYPES:
        return change
    else:
        chat.add_event(event.type, event.data)
    change.session = msgspec.structs.replace(session, session=chat, updated_at=event.ts, last_id=entry_id)
    if session.user_id:
        change.index_add = (session.user_id, event.ts)
    return change


def _copy_session(chat: ChatSession) -> ChatSession:
    return msgspec.structs.replace(
        chat, messages=list(chat.messages), pending_events=list(chat.pending_events)
    )


async def apply_event(
    client: aioredis.Redis, keys: Keys, entry_id: str, event: EventRecord, ttl_seconds: int
) -> bool:
    """Apply one log entry to the views in Valkey; False when it changed nothing."""
    session_key = keys.session(event.session_id)
    watched = [session_key]
    job_key = keys.job(event.job_id) if event.job_id else None
    if job_key:
        watched.append(job_key)
    while True:
        async with client.pipeline(transaction=True) as pipe:
            try:
                await pipe.watch(*watched)
                raws: list[Any] = await pipe.mget(watched)
                session = decode_session_view(raws[0])
                job = decode_job_view(raws[1]) if job_key else None
                change = project(session, job, entry_id, event)
                if change.empty:
                    await pipe.unwatch()
                    return False
                pipe.multi()
                if change.session is not None:
                    pipe.set(session_key, encode_view(change.session), ex=ttl_seconds)
                if change.job is not None and job_key:
                    pipe.set(job_key, encode_view(change.job), ex=ttl_seconds)
                if change.index_add is not None:
                    user_id, when = change.index_add
                    pipe.zadd(keys.user_sessions(user_id), {event.session_id: when})
                    pipe.expire(keys.user_sessions(user_id), ttl_seconds)
                if change.index_remove is not None:
                    pipe.zrem(keys.user_sessions(change.index_remove), event.session_id)
                await pipe.execute()
                return True
            except WatchError:
                continue


async def apply_first(client: aioredis.Redis, keys: Keys, entry_id: str, event: EventRecord, ttl_seconds: int) -> None:
    """Apply the entry that opens a new session and its first job: one MULTI, no WATCH.

    Only the projector applying this same entry (and, after it, the job's later
    entries) can have written these keys: SET NX keeps what is there and ZADD GT never
    moves the session back in the user's list, so the result is the one apply_event
    gives, in one round trip instead of three (WATCH, MGET, MULTI).
    """
    change = project(None, None, entry_id, event)
    pipe = client.pipeline(transaction=True)
    if change.session is not None:
        pipe.set(keys.session(event.session_id), encode_view(change.session), ex=ttl_seconds, nx=True)
    if change.job is not None and event.job_id:
        pipe.set(keys.job(event.job_id), encode_view(change.job), ex=ttl_seconds, nx=True)
    if change.index_add is not None:
        user_id, when = change.index_add
        pipe.zadd(keys.user_sessions(user_id), {event.session_id: when}, gt=True)
        pipe.expire(keys.user_sessions(user_id), ttl_seconds)
    await pipe.execute()


async def read_session(client: aioredis.Redis, keys: Keys, session_id: str, ttl_seconds: int) -> SessionView | None:
    """The session view, its TTL refreshed (GETEX); None when absent."""
    return decode_session_view(await client.getex(keys.session(session_id), ex=ttl_seconds))


async def read_job(client: aioredis.Redis, keys: Keys, job_id: str, ttl_seconds: int) -> JobView | None:
    """The job view, its TTL refreshed (GETEX); None when absent."""
    return decode_job_view(await client.getex(keys.job(job_id), ex=ttl_seconds))
