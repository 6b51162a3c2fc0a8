"""vector_search: semantic search over every node with text."""

from __future__ import annotations

from typing import Any

from shared.rag.search import vector_search as search_nodes

from services.agent.tools.context import ToolContext, as_tool_text

SCHEMA = {
    "type": "function",
    "function": {
        "name": "vector_search",
        "description": "Semantic search over pathways, reactions, genes, entities, GO terms and publications. Returns the closest nodes with stId, displayName, labels, a text excerpt and a similarity score. Use it to find the ids of things named in the question.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for, in plain words."},
                "k": {"type": "integer", "minimum": 1, "maximum": 20, "description": "How many nodes (default 5)."},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    },
}


async def vector_search(ctx: ToolContext, args: dict[str, Any]) -> str:
    query = str(args.get("query") or "").strip()
    if not query:
        raise ValueError("'query' must be a non-empty string")
    k = int(args.get("k") or ctx.settings.vector_search_top_k)
    nodes = await search_nodes(ctx.graph, ctx.embedder, query, max(1, min(k, 20)), ctx.settings)
    ctx.add_sources(nodes)
    shown = [{**node, "text": str(node.get("text") or "")[:300]} for node in nodes]
    return as_tool_text(shown)
