"""Vector search over the graph: question text -> node dicts, best first."""

from __future__ import annotations

from typing import Any

import numpy as np

from shared.config import Settings
from shared.graph.client import GraphClient
from shared.rag.embedder import Embedder
from shared.rag.index import search_ids, vector_literal
from shared.rag.nodes import node_rows
from shared.rag.rerank import POOL, rerank

RESULT_FIELDS = ("id", "stId", "displayName", "labels", "text", "score")


async def vector_search(
    client: GraphClient, embedder: Embedder, text: str, k: int | None, settings: Settings
) -> list[dict[str, Any]]:
    """Top-k nodes for `text`: {id, stId, displayName, labels, text, score}, best first.

    The index is asked for a pool of max(k, POOL) node ids by cosine (with the graph's
    LoadInfo fingerprint in the same query); their nodes come from shared.rag.nodes
    and shared.rag.rerank re-scores them (cosine + word overlap + a Pathway prior +
    an exact-name bonus): `score` is that combined score. `stId` is the node's Reactome id, or its gene symbol / GO id /
    PubMed id / local reaction key where it has no stable id.
    """
    k = int(k or settings.vector_search_top_k)
    if not text.strip() or k <= 0:
        return []
    graph = settings.turingdb_graph
    vector = embedder.encode_one(text)
    scores, fingerprint = await _candidates(client, embedder.index_name, vector, max(k, POOL), graph)
    rows = await node_rows(client, graph, fingerprint, list(scores))
    candidates = [{**row, "labels": list(row["labels"]), "score": scores[key]} for key, row in rows.items()]
    return rerank(text, candidates, k)


async def _candidates(
    client: GraphClient, index: str, vector: np.ndarray, pool: int, graph: str
) -> tuple[dict[int, float], str | None]:
    """{key: cosine} of the pool and the graph's fingerprint, in one query (None without a LoadInfo node)."""
    rows = await client.query(
        f"VECTOR SEARCH IN {index} FOR {int(pool)} {vector_literal(vector)} YIELD ids, score "
        "MATCH (m:LoadInfo) RETURN ids, score, m.fingerprint AS f",
        graph=graph,
    )
    if rows and rows[0].get("f"):
        return {int(r["ids"]): float(r["score"]) for r in rows}, str(rows[0]["f"])
    return dict(await search_ids(client, index, vector, pool)), None
