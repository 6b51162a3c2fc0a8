"""Rate limits: sliding one-minute windows kept in Valkey (one Lua call).

Each window is a sorted set of request times. A request is counted against every
window it falls under (the user's and the client address's) and goes on only when
all of them have room; a refused request is recorded in none, and the answer is the
seconds until the fullest window has room again.
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
local wait = 0
for i, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  if redis.call('ZCARD', key) >= tonumber(ARGV[3 + i]) then
    local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    wait = math.max(wait, tonumber(oldest[2]) + window - now, 1)
  end
end
if wait > 0 then
  return wait
end
for i, key in ipairs(KEYS) do
  redis.call('ZADD', key, now, ARGV[3])
  redis.call('PEXPIRE', key, window)
end
return 0
"""


class RateLimiter:
    """`limit` requests per minute per user; `address_limit` per client address, which
    also holds a client that sends a new X-Anon-Id with every request."""

    def __init__(self, client: aioredis.Redis, keys: Keys, limit: int, address_limit: int | None = None) -> None:
        self.keys = keys
        self.limit = limit
        self.address_limit = address_limit if address_limit is not None else limit
        self._script: Any = client.register_script(SCRIPT)

    def key(self, caller: str) -> str:
        return f"{self.keys.prefix}ratelimit:{caller}"

    async def check(self, user: str | None, address: str) -> float:
        """0 when the request may go on, else the seconds to wait before retrying.

        Every request counts against its address; an anonymous one also against the
        address's anonymous window, at the per-user limit."""
        windows = [(f"ip:{address}", self.address_limit)]
        windows.append((f"user:{user}", self.limit) if user is not None else (f"anon:{address}", self.limit))
        now = int(time.time() * 1000)
        member = f"{now}-{secrets.token_hex(4)}"
        args = [now, WINDOW_MS, member, *(limit for _, limit in windows)]
        wait_ms = int(await self._script(keys=[self.key(caller) for caller, _ in windows], args=args))
        return 0.0 if wait_ms <= 0 else wait_ms / 1000


def retry_after(seconds: float) -> str:
    """A Retry-After header value: whole seconds, at least 1."""
    return str(max(1, math.ceil(seconds)))
