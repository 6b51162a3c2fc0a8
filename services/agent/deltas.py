"""Answer text as it streams from the model, coalesced into `answer_delta` events.

One event per token would flood the log; pieces are gathered and written at most
about every `interval` seconds (and at the end of each model call).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

Emit = Callable[[str, dict[str, Any]], Awaitable[None]]
DELTA_INTERVAL_SECONDS = 0.05


class DeltaCoalescer:
    def __init__(self, emit: Emit, iteration: int, interval: float = DELTA_INTERVAL_SECONDS) -> None:
        self._emit = emit
        self._iteration = iteration
        self._interval = interval
        self._pieces: list[str] = []
        self._timer: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self.events = 0

    async def add(self, text: str) -> None:
        """Take one piece; the first piece of a batch starts the flush timer."""
        self._pieces.append(text)
        if self._timer is None:
            self._timer = asyncio.create_task(self._flush_later())

    async def _flush_later(self) -> None:
        await asyncio.sleep(self._interval)
        self._timer = None
        await self._flush()

    async def close(self) -> None:
        """Write what is left (the end of a model call)."""
        if self._timer is not None:
            self._timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._timer
            self._timer = None
        await self._flush()

    async def _flush(self) -> None:
        async with self._lock:
            if not self._pieces:
                return
            text, self._pieces = "".join(self._pieces), []
            self.events += 1
            await self._emit("answer_delta", {"iteration": self._iteration, "text": text})
