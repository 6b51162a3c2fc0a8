"""Cancelling a job: a flag that workers read at safe points, and an event in the log."""

from __future__ import annotations

from typing import Any

from shared.bus.keys import Keys
from shared.bus.log import DEFAULT_RETENTION_SECONDS, add_event
from shared.contracts import EventRecord

CANCEL_FLAG_TTL_SECONDS = 24 * 3600


async def request_cancel(
    client: Any, keys: Keys, job_id: str, session_id: str, reason: str = "cancelled by the user",
    retention_seconds: int = DEFAULT_RETENTION_SECONDS,
) -> None:
    """Set the job's cancel flag and log `cancel_requested`, in one MULTI."""
    async with client.pipeline(transaction=True) as pipe:
        pipe.set(keys.cancel(job_id), reason.encode(), ex=CANCEL_FLAG_TTL_SECONDS)
        add_event(pipe, keys, EventRecord("cancel_requested", job_id, session_id, {"reason": reason}), retention_seconds)
        await pipe.execute()


async def cancel_reason(client: Any, keys: Keys, job_id: str) -> str | None:
    """The reason given when the job was cancelled, or None while it is not."""
    raw = await client.get(keys.cancel(job_id))
    return raw.decode(errors="replace") if raw is not None else None


def job_cancelled_event(job_id: str, session_id: str, reason: str, stage: str, **extra: Any) -> EventRecord:
    """The terminal event of a cancelled job."""
    return EventRecord("job_cancelled", job_id, session_id, {"reason": reason, "stage": stage, **extra})
