"""The bus clients: hiredis packing matches redis-py's, blocking reads outlive timeouts."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis
from redis.asyncio.connection import Connection
from redis.exceptions import DataError

from shared.bus import Keys, connect
from shared.bus.connection import SOCKET_TIMEOUT, FastConnection


@pytest.mark.parametrize(
    "args",
    [
        ("XADD", b"k", "MINID", "~", "123-0", "*", b"e", b'{"a": 1}'),
        ("SET", "clé", "värde", "EX", 10),
        ("XREADGROUP", "GROUP", "g", "c", "COUNT", 100, "BLOCK", 2000, "STREAMS", "s", ">"),
        ("CONFIG GET", "append*"),
        ("INCRBYFLOAT", "k", 1.5),
    ],
)
def test_hiredis_packing_matches_redis_py(args: tuple) -> None:
    fast, plain = FastConnection(), Connection()
    assert b"".join(fast.pack_command(*args)) == b"".join(plain.pack_command(*args))


def test_bad_arguments_still_raise_redis_py_errors() -> None:
    with pytest.raises(DataError):
        FastConnection().pack_command("SET", "k", None)


async def test_client_round_trip_and_settings(redis_url: str, keys: Keys) -> None:
    client = connect(redis_url)
    try:
        await client.set(f"{keys.prefix}k", "clé")
        assert await client.get(f"{keys.prefix}k") == "clé".encode()
        assert isinstance(client.connection_pool.get_encoder().decode_responses, bool)
        assert client.connection_pool.connection_kwargs["socket_timeout"] == SOCKET_TIMEOUT
    finally:
        await client.aclose()


async def test_blocking_client_has_no_socket_timeout(redis_url: str, keys: Keys) -> None:
    reader = connect(redis_url, blocking=True)
    writer: aioredis.Redis = connect(redis_url)
    stream = f"{keys.prefix}s"
    try:
        assert reader.connection_pool.connection_kwargs["socket_timeout"] is None
        read = asyncio.create_task(reader.xread({stream: "$"}, block=1500))
        await asyncio.sleep(0.2)
        await writer.xadd(stream, {b"f": b"v"})
        reply = await read
        assert reply[0][1][0][1] == {b"f": b"v"}
    finally:
        await reader.aclose()
        await writer.aclose()
