"""Leases on pending entries: renew the ones a consumer still owns, or hand them back.

One Lua script, atomic per entry: if the entry is pending and owned by the consumer,
XCLAIM it to itself with JUSTID (the delivery count is not bumped) and a given idle
time. Idle 0 renews the lease; idle = visibility timeout hands the entry back, so
any consumer's next XAUTOCLAIM takes it at once. Entries another consumer took
over are left alone and reported as lost.

A second script writes a handler's progress event only while the consumer still owns
the entry, in the same atomic step: a worker that stalled past its lease (a long
pause, a frozen VM) cannot add its stale run's steps to a job another consumer redoes.
"""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis

LEASE_SCRIPT = """
local owned = {}
for i = 4, #ARGV do
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
  if p[1] and p[1][2] == ARGV[2] then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'IDLE', ARGV[3], 'JUSTID')
    owned[#owned + 1] = ARGV[i]
  end
end
return owned
"""

EMIT_SCRIPT = """
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1)
if not (p[1] and p[1][2] == ARGV[2]) then
  return false
end
return redis.call('XADD', KEYS[2], 'MINID', '~', ARGV[4], '*', ARGV[5], ARGV[6])
"""


class Leases:
    """Renew or hand back entries of one stream/group held by one consumer."""

    def __init__(self, client: aioredis.Redis, stream: str, group: str, consumer: str) -> None:
        self.stream = stream
        self.group = group
        self.consumer = consumer
        self._script: Any = client.register_script(LEASE_SCRIPT)
        self._emit: Any = client.register_script(EMIT_SCRIPT)

    async def hold(self, entry_ids: list[str], idle_ms: int = 0) -> set[str]:
        """Set the idle time of the entries still owned; returns those ids."""
        if not entry_ids:
            return set()
        owned = await self._script(
            keys=[self.stream], args=[self.group, self.consumer, int(idle_ms), *entry_ids]
        )
        return {e.decode() if isinstance(e, bytes) else e for e in owned}

    async def renew(self, entry_ids: list[str]) -> set[str]:
        return await self.hold(entry_ids, 0)

    async def hand_back(self, entry_ids: list[str], idle_ms: int) -> set[str]:
        return await self.hold(entry_ids, idle_ms)

    async def add_if_owned(
        self, entry_id: str, stream: str, minid: str, field: bytes, value: bytes
    ) -> bytes | None:
        """XADD stream MINID ~ minid * field value, if `entry_id` is still ours; its id, else None."""
        return await self._emit(
            keys=[self.stream, stream], args=[self.group, self.consumer, entry_id, minid, field, value]
        )
