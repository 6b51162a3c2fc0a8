"""What every request handler of one gateway process shares."""

from __future__ import annotations

from dataclasses import dataclass, field

import redis.asyncio as aioredis
from starlette.requests import Request

from shared.bus.keys import Keys
from shared.config import Settings
from services.gateway.ratelimit import RateLimiter
from services.gateway.sse import Hub


@dataclass(eq=False)
class Gateway:
    """Settings, the Valkey client, key names, the SSE hub and the rate limiter."""

    settings: Settings
    redis: aioredis.Redis
    keys: Keys
    hub: Hub
    limiter: RateLimiter
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def ttl(self) -> int:
        return self.settings.session_ttl_seconds


def gateway(request: Request) -> Gateway:
    return request.app.state.gateway  # type: ignore[no-any-return]
