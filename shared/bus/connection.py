"""redis-py asyncio clients for the bus (bytes responses, retries, health checks)."""

from __future__ import annotations

import redis.asyncio as aioredis
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError, TimeoutError
from redis.retry import Retry

SOCKET_TIMEOUT = 10.0
CONNECT_TIMEOUT = 5.0
HEALTH_CHECK_INTERVAL = 30


def connect(url: str, *, blocking: bool = False) -> aioredis.Redis:
    """A client for `url` that returns bytes.

    blocking=True gives a client holding its own single connection with no socket
    timeout, for XREADGROUP/XREAD BLOCK loops (a socket timeout would trip a long
    block). Both retry commands on connection errors with jittered backoff.
    """
    return aioredis.Redis.from_url(
        url,
        decode_responses=False,
        socket_timeout=None if blocking else SOCKET_TIMEOUT,
        socket_connect_timeout=CONNECT_TIMEOUT,
        socket_keepalive=True,
        health_check_interval=HEALTH_CHECK_INTERVAL,
        retry=Retry(ExponentialWithJitterBackoff(base=0.05, cap=2.0), retries=5),
        retry_on_error=[ConnectionError, TimeoutError],
        single_connection_client=blocking,
    )
