"""Search result rows by node key, kept per graph until its LoadInfo fingerprint changes.

Reading nodes by key costs the server about 0.15 ms per key (a scan each), so the 50
candidates a re-ranked search needs would cost ~8 ms per question. Instead, the first
search of a process on a graph reads the rows of every node with a text (the ones the
vector index holds) in one query (about 0.2 s and 15 MB for the full Reactome graph)
and later searches read memory. A graph reload changes the fingerprint (keys are
positions in the build), which reads the rows again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shared.graph.client import GraphClient

FIELDS = (
    "RETURN n.key AS id, n.stId AS stId, n.symbol AS symbol, n.goId AS goId, n.pubmedId AS pubmedId, "
    "n.reactionKey AS reactionKey, n.displayName AS displayName, labels(n) AS labels, n.text AS text"
)
_rows: dict[str, tuple[str, dict[int, dict[str, Any]]]] = {}


def _reactome_id(row: dict[str, Any]) -> str | None:
    return row.get("stId") or row.get("symbol") or row.get("goId") or row.get("pubmedId") or row.get("reactionKey")


async def _read(client: GraphClient, graph: str, where: str) -> dict[int, dict[str, Any]]:
    found = {}
    for r in await client.query(f"MATCH (n) WHERE {where} {FIELDS}", graph=graph, timeout=60.0):
        key = int(r["id"])
        found[key] = {
            "id": key,
            "stId": _reactome_id(r),
            "displayName": r["displayName"],
            "labels": tuple(r["labels"] or ()),
            "text": r["text"],
        }
    return found


def _keys_in(keys: Sequence[int]) -> str:
    return f"n.key IN [{', '.join(str(int(key)) for key in keys)}]"


async def node_rows(client: GraphClient, graph: str, fingerprint: str | None, keys: Sequence[int]) -> dict[int, dict[str, Any]]:
    """{key: {id, stId, displayName, labels (a tuple), text}} for the keys that exist.

    Without a fingerprint (a graph not built by `graph load`) nothing is kept: the keys
    are read each time.
    """
    if not keys:
        return {}
    if fingerprint is None:
        return await _read(client, graph, _keys_in(keys))
    cached_fingerprint, rows = _rows.get(graph, ("", {}))
    if cached_fingerprint != fingerprint:
        rows = await _read(client, graph, "n.text IS NOT NULL")
        _rows[graph] = (fingerprint, rows)
    missing = [key for key in keys if key not in rows]
    if missing:
        rows.update(await _read(client, graph, _keys_in(missing)))
    return {key: rows[key] for key in keys if key in rows}
