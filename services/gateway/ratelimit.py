"""Per-user rate limit: a sliding one-minute window kept in Valkey (one Lua call).

The window is a sorted set of request times; a request over the limit is refused
and not recorded, with the seconds until the oldest one leaves the window.
"""

from __future__ import annotations

import math
import secrets
import time
from typing import Any

import redis.asyncio as aioredis

from shared.bus.keys import Keys

WINDOW_MS = 60_000

SCRIPT = """
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) < limit then
  redis.call('ZADD', KEYS[1], now, ARGV[4])
  redis.call('PEXPIRE', KEYS[1], window)
  return 0
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return math.max(1, tonumber(oldest[2]) + window - now)
"""


class RateLimiter:
    """`limit` requests per minute per caller."""

    def __init__(self, client: aioredis.Redis, keys: Keys, limit: int) -> None:
        self.keys = keys
        self.limit = limit
        self._script: Any = client.register_script(SCRIPT)

    def key(self, caller: str) -> str:
        return f"{self.keys.prefix}ratelimit:{caller}"

    async def check(self, caller: str) -> float:
        """0 when the request may go on, else the seconds to wait before retrying."""
        now = int(time.time() * 1000)
        member = f"{now}-{secrets.token_hex(4)}"
        wait_ms = int(await self._script(keys=[self.key(caller)], args=[now, WINDOW_MS, self.limit, member]))
        return 0.0 if wait_ms <= 0 else wait_ms / 1000


def retry_after(seconds: float) -> str:
    """A Retry-After header value: whole seconds, at least 1."""
    return str(max(1, math.ceil(seconds)))
