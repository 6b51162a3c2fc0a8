"""Async TuringDB client over its HTTP protocol (`POST /query?graph=G`).

httpx.AsyncClient rather than the SDK in a thread: the SDK is synchronous and builds a
pandas DataFrame per reply (about 2x the latency of raw HTTP on 1-hop reads, plus a
thread hop); raw HTTP keeps the event loop free and returns plain rows. See
bench/retrieval.py for the measured figures.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

import httpx

from shared.config import Settings
from shared.graph.errors import GraphError, GraphTimeout, GraphUnavailable, RequestTooBig, error_for

logging.getLogger("httpx").setLevel(logging.WARNING)
MAX_REQUEST_BYTES = 1_048_576
T = TypeVar("T")


def base_url(host: str, port: int) -> str:
    """`http://host:port` from TURINGDB_URL (bare host or URL) and TURINGDB_PORT."""
    if host.startswith(("http://", "https://")):
        scheme, _, rest = host.partition("://")
        rest = rest.rstrip("/")
        return f"{scheme}://{rest}" if ":" in rest else f"{scheme}://{rest}:{port}"
    return f"http://{host}:{port}"


def columnar_to_rows(reply: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """TuringDB's columnar reply (chunks of columns) as column names and row dicts."""
    header = reply.get("header") or {}
    names: list[str] = list(header.get("column_names") or [])
    rows: list[dict[str, Any]] = []
    for chunk in reply.get("data") or []:
        for values in zip(*chunk):
            rows.append(dict(zip(names, values)))
    return names, rows


def _decode(text: str) -> Any:
    # the server writes NaN / Infinity, which the json module reads
    return json.loads(text)


class GraphClient:
    """One connection pool to one TuringDB server; `graph` is the default graph."""

    def __init__(self, url: str, graph: str = "default", timeout: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.graph = graph
        self.timeout = timeout
        self._http: httpx.AsyncClient | None = None

    @classmethod
    def from_settings(cls, settings: Settings, graph: str | None = None) -> GraphClient:
        return cls(
            base_url(settings.turingdb_url, settings.turingdb_port),
            graph or settings.turingdb_graph,
            settings.cypher_timeout_seconds,
        )

    def _client(self) -> httpx.AsyncClient:
        if self._http is None or self._http.is_closed:
            self._http = httpx.AsyncClient(
                base_url=self.url,
                headers={"Accept": "application/json", "Content-Type": "application/json"},
                limits=httpx.Limits(max_connections=32, max_keepalive_connections=16),
            )
        return self._http

    async def query(self, cypher: str, graph: str | None = None, timeout: float | None = None) -> list[dict[str, Any]]:
        """Run `cypher` on `graph` (default: the client's); rows as dicts by column name."""
        _, rows = await self.query_columns(cypher, graph, timeout)
        return rows

    async def query_columns(
        self, cypher: str, graph: str | None = None, timeout: float | None = None
    ) -> tuple[list[str], list[dict[str, Any]]]:
        """Like `query`, also returning the column names (known even with no rows)."""
        reply = await self.raw(cypher, graph, timeout)
        return columnar_to_rows(reply)

    async def raw(self, cypher: str, graph: str | None = None, timeout: float | None = None) -> dict[str, Any]:
        """POST one query; the decoded reply, or a GraphError subclass."""
        body = json.dumps({"query": cypher}).encode()
        if len(body) > MAX_REQUEST_BYTES:
            raise RequestTooBig(None, f"request of {len(body)} bytes is over the server's {MAX_REQUEST_BYTES}-byte limit")
        limit = self.timeout if timeout is None else timeout
        try:
            response = await self._client().post(
                "/query", params={"graph": graph or self.graph}, content=body, timeout=limit
            )
        except httpx.TimeoutException:
            raise GraphTimeout(None, f"query took longer than {limit:g} s and was abandoned") from None
        except httpx.TransportError as exc:
            raise GraphUnavailable(None, f"no TuringDB server answers at {self.url} ({exc.__class__.__name__}: {exc})") from None
        try:
            reply = _decode(response.text)
        except ValueError:
            reply = None
        if isinstance(reply, dict) and reply.get("error"):
            raise error_for(str(reply["error"]), str(reply.get("error_details") or reply["error"]))
        if response.is_error or not isinstance(reply, dict):
            raise GraphError("HTTP_ERROR", f"HTTP {response.status_code}: {response.text[:300]}")
        return reply

    async def ping(self, timeout: float = 2.0) -> bool:
        """True when a TuringDB server answers."""
        try:
            await self.raw("LIST GRAPH", graph="default", timeout=timeout)
        except GraphError:
            return False
        return True

    async def graphs(self) -> dict[str, bool]:
        """Graphs on the server's disk, mapped to whether they are loaded in memory."""
        rows = await self.query("LIST AVAILABLE GRAPHS", graph="default")
        return {r["graphName"]: bool(r["isLoaded"]) for r in rows}

    async def ensure_loaded(self, graph: str | None = None) -> bool:
        """Load `graph` into memory if it is on disk and not loaded; False if absent."""
        name = graph or self.graph
        known = await self.graphs()
        if name not in known:
            return False
        if not known[name]:
            try:
                await self.raw(f"LOAD GRAPH {name}", graph="default", timeout=max(self.timeout, 120.0))
            except GraphError as exc:
                if "already loaded" not in exc.message.lower():
                    raise
        return True

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def __aenter__(self) -> GraphClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def run_sync(make: Coroutine[Any, Any, T]) -> T:
    """Run one coroutine to completion from sync code (CLI, scripts)."""
    return asyncio.run(make)
