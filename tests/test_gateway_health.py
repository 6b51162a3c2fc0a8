"""/healthz and /readyz against real Valkey and a real TuringDB server."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.fixtures.gateway import GatewayUnderTest


async def _groups(gw: GatewayUnderTest, *services: str) -> None:
    for service in services:
        inbox = gw.keys.inbox(service)
        await gw.redis.xgroup_create(inbox, service, id="0", mkstream=True)
        await gw.redis.xgroup_createconsumer(inbox, service, f"{service}-1")


async def test_healthz(gateway: GatewayUnderTest) -> None:
    answer = await gateway.client.get("/healthz")
    assert answer.status_code == 200 and answer.json() == {"status": "ok"}


async def test_readyz_names_what_is_missing(gateway: GatewayUnderTest) -> None:
    answer = await gateway.client.get("/readyz")
    assert answer.status_code == 503
    body = answer.json()
    assert body["failing"] == ["group:agent", "group:lookup", "group:router", "turingdb"]
    assert body["checks"]["valkey"] == {"ok": True}
    assert "no inbox" in body["checks"]["group:router"]["reason"]


async def test_readyz_200_then_503_when_a_group_goes_or_goes_quiet(gateway_factory: Any, turingdb_server: Any) -> None:
    gw = await gateway_factory(turingdb_url=turingdb_server.host, turingdb_port=turingdb_server.port, visibility_timeout_seconds=0.1)
    await _groups(gw, "router", "lookup", "agent")
    answer = await gw.client.get("/readyz")
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "ready" and answer.json()["checks"]["group:agent"]["consumers"] == 1

    await gw.redis.xgroup_destroy(gw.keys.inbox("agent"), "agent")
    answer = await gw.client.get("/readyz")
    assert answer.status_code == 503 and answer.json()["failing"] == ["group:agent"]
    assert "no consumer group 'agent'" in answer.json()["checks"]["group:agent"]["reason"]

    await asyncio.sleep(0.35)  # past 3 visibility timeouts: every consumer looks gone
    await gw.redis.xreadgroup("router", "router-1", {gw.keys.inbox("router"): ">"}, count=1)  # router is alive
    answer = await gw.client.get("/readyz")
    assert answer.json()["failing"] == ["group:agent", "group:lookup"]
    assert "no consumer seen" in answer.json()["checks"]["group:lookup"]["reason"]
