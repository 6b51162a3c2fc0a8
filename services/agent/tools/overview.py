"""get_graph_overview: the compact skeleton of the graph."""

from __future__ import annotations

from typing import Any

from shared.graph.skeleton import graph_skeleton

from services.agent.tools.context import ToolContext

SCHEMA = {
    "type": "function",
    "function": {
        "name": "get_graph_overview",
        "description": "A compact overview of the Reactome graph: node labels with counts, relationship patterns and key properties. Call it first when unsure what the graph holds.",
        "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
    },
}


async def get_graph_overview(ctx: ToolContext, args: dict[str, Any]) -> str:
    return await graph_skeleton(ctx.graph, ctx.settings)
