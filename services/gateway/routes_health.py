"""/healthz (the process answers) and /readyz (what it depends on answers)."""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from shared.graph.client import GraphClient
from services.gateway.context import Gateway, gateway
from services.gateway.errors import json_response

WORKER_SERVICES = ("router", "lookup", "agent")
CHECK_TIMEOUT = 2.0
ALIVE_TIMEOUTS = 3  # a consumer is alive if seen within this many visibility timeouts


async def check_valkey(gw: Gateway) -> dict[str, Any]:
    await gw.redis.ping()
    return {"ok": True}


async def check_graph(gw: Gateway) -> dict[str, Any]:
    client = gw.extra.get("graph")
    if not isinstance(client, GraphClient):
        client = GraphClient.from_settings(gw.settings)
        gw.extra["graph"] = client
    if await client.ping(timeout=CHECK_TIMEOUT):
        return {"ok": True, "url": client.url}
    return {"ok": False, "url": client.url, "reason": "TuringDB does not answer"}


async def check_group(gw: Gateway, service: str) -> dict[str, Any]:
    """The service's consumer group exists on its inbox with a consumer seen lately."""
    inbox = gw.keys.inbox(service)
    try:
        groups = await gw.redis.xinfo_groups(inbox)
    except Exception as exc:  # no such key
        return {"ok": False, "reason": f"no inbox {inbox}: {exc}"}
    names = {_text(g.get("name", g.get(b"name"))) for g in groups}
    if service not in names:
        return {"ok": False, "reason": f"no consumer group {service!r} on {inbox}"}
    consumers = await gw.redis.xinfo_consumers(inbox, service)
    limit_ms = int(ALIVE_TIMEOUTS * gw.settings.visibility_timeout_seconds * 1000)
    idle = [int(c.get("idle", c.get(b"idle", 0)) or 0) for c in consumers]
    alive = [i for i in idle if i <= limit_ms]
    if not alive:
        reason = "no consumers" if not idle else f"no consumer seen in the last {limit_ms} ms"
        return {"ok": False, "reason": reason, "consumers": len(idle)}
    return {"ok": True, "consumers": len(idle), "alive": len(alive)}


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def _guarded(name: str, check: Any) -> tuple[str, dict[str, Any]]:
    try:
        return name, await asyncio.wait_for(check, CHECK_TIMEOUT + 1)
    except asyncio.TimeoutError:
        return name, {"ok": False, "reason": "timed out"}
    except Exception as exc:
        return name, {"ok": False, "reason": f"{exc.__class__.__name__}: {exc}"}


async def healthz(request: Request) -> Response:
    return json_response({"status": "ok"})


async def readyz(request: Request) -> Response:
    """200 with every check, or 503 naming the failing ones."""
    gw = gateway(request)
    checks = [_guarded("valkey", check_valkey(gw)), _guarded("turingdb", check_graph(gw))]
    checks += [_guarded(f"group:{s}", check_group(gw, s)) for s in WORKER_SERVICES]
    results = dict(await asyncio.gather(*checks))
    failing = sorted(name for name, result in results.items() if not result["ok"])
    body = {"status": "ready" if not failing else "not ready", "checks": results, "failing": failing}
    return json_response(body, 200 if not failing else 503)


routes = [
    Route("/healthz", healthz, methods=["GET"]),
    Route("/readyz", readyz, methods=["GET"]),
]
