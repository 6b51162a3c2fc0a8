"""Vector search over the graph: question text -> node dicts, best first."""

from __future__ import annotations

from typing import Any

from shared.config import Settings
from shared.graph.client import GraphClient
from shared.rag.embedder import Embedder
from shared.rag.index import vector_literal

RESULT_FIELDS = ("id", "stId", "displayName", "labels", "text", "score")


def _reactome_id(row: dict[str, Any]) -> str | None:
    return row.get("stId") or row.get("symbol") or row.get("goId") or row.get("pubmedId") or row.get("reactionKey")


async def vector_search(
    client: GraphClient, embedder: Embedder, text: str, k: int | None, settings: Settings
) -> list[dict[str, Any]]:
    """Top-k nodes for `text`: {id, stId, displayName, labels, text, score}, best first.

    `stId` is the node's Reactome id, or its gene symbol / GO id / PubMed id / local
    reaction key where it has no stable id.
    """
    k = int(k or settings.vector_search_top_k)
    if not text.strip() or k <= 0:
        return []
    vector = embedder.encode_one(text)
    cypher = (
        f"VECTOR SEARCH IN {embedder.index_name} FOR {k} {vector_literal(vector)} YIELD ids, score "
        "MATCH (n) WHERE n.key = ids "
        "RETURN n.key AS id, n.stId AS stId, n.symbol AS symbol, n.goId AS goId, n.pubmedId AS pubmedId, "
        "n.reactionKey AS reactionKey, n.displayName AS displayName, labels(n) AS labels, n.text AS text, score "
        "ORDER BY score DESC"
    )
    rows = await client.query(cypher, graph=settings.turingdb_graph)
    results = [
        {
            "id": int(r["id"]),
            "stId": _reactome_id(r),
            "displayName": r["displayName"],
            "labels": list(r["labels"] or []),
            "text": r["text"],
            "score": float(r["score"]),
        }
        for r in rows
    ]
    results.sort(key=lambda r: -r["score"])
    return results[:k]
