"""redis-py asyncio clients for the bus (bytes responses, retries, health checks)."""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.connection import Connection, SSLConnection, UnixDomainSocketConnection
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError, TimeoutError
from redis.retry import Retry

try:
    from hiredis import pack_command as _hiredis_pack
except ImportError:  # pragma: no cover - hiredis is a pinned dependency
    _hiredis_pack = None

SOCKET_TIMEOUT = 10.0
CONNECT_TIMEOUT = 5.0
HEALTH_CHECK_INTERVAL = 30


class _HiredisPacker:
    """Packs commands with hiredis (C) instead of redis-py's pure-Python packer.

    redis-py's asyncio connections always pack in Python, a fifth of a worker's CPU
    time in bench/bus.py. Anything unusual (multi-word command names, argument types
    hiredis refuses) goes to redis-py's packer, which also raises its usual errors.
    """

    def pack_command(self, *args: Any) -> list[bytes]:
        first = args[0] if args else None
        if _hiredis_pack is not None and isinstance(first, str) and " " not in first:
            if not any(a is None or isinstance(a, (bool, float)) for a in args):
                try:
                    return [_hiredis_pack(args)]
                except Exception:  # noqa: BLE001 - fall back, redis-py reports the error
                    pass
        return super().pack_command(*args)  # type: ignore[misc]


class FastConnection(_HiredisPacker, Connection):
    pass


class FastSSLConnection(_HiredisPacker, SSLConnection):
    pass


class FastUnixConnection(_HiredisPacker, UnixDomainSocketConnection):
    pass


_FAST = {Connection: FastConnection, SSLConnection: FastSSLConnection, UnixDomainSocketConnection: FastUnixConnection}


def connect(url: str, *, blocking: bool = False) -> aioredis.Redis:
    """A client for `url` that returns bytes.

    blocking=True gives a client holding its own single connection with no socket
    timeout, for XREADGROUP/XREAD BLOCK loops (a socket timeout would trip a long
    block). Both retry commands on connection errors with jittered backoff.
    """
    client = aioredis.Redis.from_url(
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
    pool = client.connection_pool
    pool.connection_class = _FAST.get(pool.connection_class, pool.connection_class)
    return client
