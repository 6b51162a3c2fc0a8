"""`chat-agent replay`: rebuild views from the event log, or print it for audit.

Rebuilding deletes the views in scope and applies every event of that scope in log
order with the projector's own code (views.apply_event), so the result equals what
the live projector built. Scopes: everything (default), one job (--job), one session
and its jobs (--session), or every session with activity since a time (--since, each
rebuilt from its whole history). --print writes the events in scope as JSON lines
(entry id included; --since then filters by time) and changes nothing.

Run a full rebuild while no gateway is projecting: replay holds the projector's
leader lease when it is free, and warns when a gateway holds it.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import secrets
import sys
from collections.abc import AsyncIterator
from datetime import datetime, timezone
from typing import IO

import msgspec
import redis.asyncio as aioredis

from shared.bus.connection import connect
from shared.bus.keys import Keys
from shared.bus.log import read_events
from shared.config import ConfigError, Settings
from shared.contracts import EventRecord
from shared.service import resolve_valkey_url
from services.gateway.projector import leader_key
from services.gateway.views import apply_event, decode_session_view

PAGE = 1000
_ENTRY_ID = re.compile(r"\d+(-\d+)?")
_encoder = msgspec.json.Encoder()


class ReplayStats(msgspec.Struct):
    events: int = 0
    applied: int = 0
    deleted_keys: int = 0


def parse_since(text: str) -> str:
    """A stream entry id from an entry id, epoch milliseconds or an ISO time (UTC if naive)."""
    value = text.strip()
    if _ENTRY_ID.fullmatch(value):
        return value if "-" in value else f"{value}-0"
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"--since {text!r} is not an ISO time or a stream entry id") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return f"{int(when.timestamp() * 1000)}-0"


async def iter_log(client: aioredis.Redis, keys: Keys, after: str = "0-0") -> AsyncIterator[tuple[str, EventRecord]]:
    """Every event after `after`, oldest first, page by page."""
    while True:
        rows = await read_events(client, keys, after=after, count=PAGE)
        if not rows:
            return
        for entry_id, event in rows:
            yield entry_id, event
        after = rows[-1][0]


def _before(since: str) -> str:
    """The id just before `since`, so that `since` itself is included."""
    ms, _, seq = since.partition("-")
    if int(seq or 0) > 0:
        return f"{ms}-{int(seq) - 1}"
    return f"{int(ms) - 1}-18446744073709551615" if int(ms) > 0 else "0-0"


def _matches(event: EventRecord, job: str | None, session: str | None) -> bool:
    if job is not None:
        return event.job_id == job
    if session is not None:
        return event.session_id == session
    return True


async def print_events(
    client: aioredis.Redis, keys: Keys, out: IO[str], *, job: str | None = None,
    session: str | None = None, since: str | None = None,
) -> int:
    """Write the events in scope as JSON lines {"id": ..., "event": {...}}; the count."""
    count = 0
    start = _before(since) if since else "0-0"
    async for entry_id, event in iter_log(client, keys, start):
        if _matches(event, job, session):
            out.write(_encoder.encode({"id": entry_id, "event": event}).decode() + "\n")
            count += 1
    return count


async def _delete_matching(client: aioredis.Redis, pattern: str) -> int:
    doomed = [key async for key in client.scan_iter(match=pattern, count=1000)]
    for i in range(0, len(doomed), 500):
        await client.unlink(*doomed[i : i + 500])
    return len(doomed)


def _glob_escape(text: str) -> str:
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)


async def rebuild(
    client: aioredis.Redis, keys: Keys, ttl_seconds: int, *, job: str | None = None,
    session: str | None = None, since: str | None = None,
) -> ReplayStats:
    """Delete the views in scope, then apply the scope's events in log order."""
    stats = ReplayStats()
    sessions: set[str] | None = None
    if job is None and session is None and since is None:
        prefix = _glob_escape(keys.prefix)
        for pattern in (f"{prefix}session:*", f"{prefix}job:*", f"{prefix}user:*:sessions"):
            stats.deleted_keys += await _delete_matching(client, pattern)
    else:
        if session is not None:
            sessions = {session}
        elif since is not None:
            sessions = set()
            async for _, event in iter_log(client, keys, _before(since)):
                sessions.add(event.session_id)
        jobs: set[str] = set()
        users: set[str] = set()
        async for _, event in iter_log(client, keys):
            in_scope = event.job_id == job if job is not None else event.session_id in (sessions or ())
            if in_scope and event.job_id:
                jobs.add(event.job_id)
            if in_scope and event.type == "job_submitted" and event.data.get("user_id"):
                users.add(str(event.data["user_id"]))
        for session_id in sessions or ():
            view = decode_session_view(await client.get(keys.session(session_id)))
            if view is not None and view.user_id:
                users.add(view.user_id)
        doomed = [keys.job(j) for j in jobs] + [keys.session(s) for s in sessions or ()]
        if doomed:
            stats.deleted_keys += int(await client.unlink(*doomed))
        for user in users if sessions else ():
            await client.zrem(keys.user_sessions(user), *sessions)
    async for entry_id, event in iter_log(client, keys):
        if job is not None and event.job_id != job:
            continue
        if sessions is not None and event.session_id not in sessions:
            continue
        stats.events += 1
        if await apply_event(client, keys, entry_id, event, ttl_seconds):
            stats.applied += 1
    return stats


async def replay(settings: Settings, args: argparse.Namespace, out: IO[str] = sys.stdout, err: IO[str] = sys.stderr) -> int:
    client = connect(settings.valkey_url)
    keys = Keys(settings.key_prefix)
    since = parse_since(args.since) if args.since else None
    try:
        if args.print_only:
            count = await print_events(client, keys, out, job=args.job, session=args.session, since=since)
            err.write(f"replay: {count} events\n")
            return 0
        token = secrets.token_hex(8)
        held = await client.set(leader_key(keys), token, nx=True, px=600_000)
        if not held:
            err.write("replay: a gateway is projecting now; views it writes meanwhile may interleave\n")
        try:
            stats = await rebuild(
                client, keys, settings.session_ttl_seconds, job=args.job, session=args.session, since=since
            )
        finally:
            if held and await client.get(leader_key(keys)) == token.encode():
                await client.delete(leader_key(keys))
        err.write(f"replay: {stats.events} events, {stats.applied} applied, {stats.deleted_keys} views deleted\n")
        return 0
    finally:
        await client.aclose()


def run(settings: Settings, args: argparse.Namespace) -> int:
    """Entry point of `chat-agent replay`."""
    settings = msgspec.structs.replace(settings, valkey_url=resolve_valkey_url(settings))
    return asyncio.run(replay(settings, args))

