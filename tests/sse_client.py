"""A small SSE reader for tests: parses `id:`/`event:`/`data:` frames from a real HTTP stream."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass
class SSEEvent:
    id: str
    event: str
    data: dict[str, Any]


def read_stream(url: str, *, headers: dict[str, str] | None = None, timeout: float = 60) -> list[SSEEvent]:
    """Every event until the server closes the stream (pings are skipped)."""
    events: list[SSEEvent] = []
    frame: dict[str, str] = {}
    with httpx.stream("GET", url, headers=headers or {}, timeout=timeout) as response:
        response.raise_for_status()
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line == "":
                if "data" in frame:
                    events.append(SSEEvent(frame.get("id", ""), frame.get("event", "message"), json.loads(frame["data"])))
                frame = {}
            elif line.startswith(":"):
                continue
            else:
                name, _, value = line.partition(":")
                frame[name] = value[1:] if value.startswith(" ") else value
    return events
