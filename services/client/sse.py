"""A job's server-sent events, followed to the end and resumed after a dropped connection.

Each event's `id:` is its entry in the gateway's event log; after a drop the reader
reconnects with `Last-Event-ID`, so nothing is lost or shown twice. The stream ends
with the job's terminal event; a stream that closes before it is resumed too, unless
the job has ended meanwhile.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from services.client.api import GatewayClient, check

TERMINAL_TYPES = frozenset({"job_done", "job_error", "job_cancelled"})
FINAL_STATUSES = frozenset({"done", "error", "cancelled"})
BACKOFF_SECONDS = (0.2, 0.5, 1.0, 2.0)


@dataclass
class SSEEvent:
    """One event: its log entry id, its type and its JobEvent payload's `data`."""

    id: str
    type: str
    data: dict[str, Any] = field(default_factory=dict)


def parse_frame(lines: list[str]) -> SSEEvent | None:
    """An SSE frame (the lines before a blank line) as an event; None for a comment/ping."""
    values: dict[str, str] = {}
    data: list[str] = []
    for line in lines:
        if not line or line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            data.append(value)
        else:
            values[name] = value
    if not data:
        return None
    try:
        payload = json.loads("\n".join(data))
    except ValueError:
        payload = {"text": "\n".join(data)}
    kind = values.get("event") or (payload.get("type") if isinstance(payload, dict) else None) or "message"
    inner = payload.get("data", {}) if isinstance(payload, dict) and "type" in payload else payload
    return SSEEvent(values.get("id", ""), kind, inner if isinstance(inner, dict) else {"value": inner})


def iter_frames(lines: Iterator[str]) -> Iterator[SSEEvent]:
    frame: list[str] = []
    for line in lines:
        if line == "":
            event = parse_frame(frame)
            frame = []
            if event is not None:
                yield event
        else:
            frame.append(line)


class JobEvents:
    """Iterate a job's events until its terminal one, reconnecting as needed.

    `retry_seconds` bounds how long the gateway may stay out of reach before the
    reader gives up with Unreachable; `last_id` is where it would resume.
    """

    def __init__(
        self,
        client: GatewayClient,
        job_id: str,
        *,
        last_id: str | None = None,
        read_timeout: float = 60.0,
        retry_seconds: float = 30.0,
        on_reconnect: Callable[[str, int], None] | None = None,
    ) -> None:
        self.client = client
        self.job_id = job_id
        self.last_id = last_id
        self.timeout = httpx.Timeout(10.0, read=read_timeout)
        self.retry_seconds = retry_seconds
        self.on_reconnect = on_reconnect
        self.reconnects = 0
        self.ended = False

    def __iter__(self) -> Iterator[SSEEvent]:
        failing_since: float | None = None
        attempt = 0
        while True:
            headers = {"Last-Event-ID": self.last_id} if self.last_id else {}
            try:
                with self.client.http.stream(
                    "GET", f"/chat/job/{self.job_id}/events", headers=headers, timeout=self.timeout
                ) as response:
                    if not response.is_success:
                        response.read()
                        check(response)
                    failing_since, attempt = None, 0
                    for event in iter_frames(response.iter_lines()):
                        if event.id:
                            self.last_id = event.id
                        yield event
                        if event.type in TERMINAL_TYPES:
                            self.ended = True
                            return
                reason = "the stream closed before the job ended"
                if self._job_is_final():
                    return
            except httpx.TransportError as exc:
                reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                now = time.monotonic()
                failing_since = failing_since or now
                if now - failing_since > self.retry_seconds:
                    raise self.client.unreachable(exc) from None
            self.reconnects += 1
            if self.on_reconnect is not None:
                self.on_reconnect(reason, self.reconnects)
            time.sleep(BACKOFF_SECONDS[min(attempt, len(BACKOFF_SECONDS) - 1)])
            attempt += 1

    def _job_is_final(self) -> bool:
        try:
            return self.client.job(self.job_id).get("status") in FINAL_STATUSES
        except Exception:  # noqa: BLE001 - the reconnect decides what happens next
            return False
