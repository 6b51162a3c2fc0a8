"""The agent's eight tools: OpenAI function schemas (TOOLS) and their functions (TOOL_MAP)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from services.agent.tools import cypher, overview, schema, search
from services.agent.tools.context import ToolContext, as_tool_text

ToolFunction = Callable[[ToolContext, dict[str, Any]], Awaitable[str]]

TOOLS: list[dict[str, Any]] = [overview.SCHEMA, search.SCHEMA, cypher.SCHEMA, *schema.SCHEMAS]

TOOL_MAP: dict[str, ToolFunction] = {
    "get_graph_overview": overview.get_graph_overview,
    "vector_search": search.vector_search,
    "graph_query": cypher.graph_query,
    "get_node_labels": schema.get_node_labels,
    "get_edge_types": schema.get_edge_types,
    "get_node_properties": schema.get_node_properties,
    "get_edge_patterns": schema.get_edge_patterns,
    "get_sample_nodes": schema.get_sample_nodes,
}


async def run_tool(ctx: ToolContext, name: str, arguments: str) -> tuple[str, bool]:
    """Run one tool call as the model wrote it; failures become "Tool error: ..." text.

    Returns the text for the model and whether the tool succeeded.
    """
    function = TOOL_MAP.get(name)
    if function is None:
        return f"Tool error: unknown tool {name!r}; available tools: {', '.join(TOOL_MAP)}", False
    try:
        args = json.loads(arguments or "{}")
    except json.JSONDecodeError as exc:
        return f"Tool error: arguments are not valid JSON ({exc.msg} at position {exc.pos}): {arguments[:200]}", False
    if not isinstance(args, dict):
        return "Tool error: arguments must be a JSON object", False
    try:
        return await function(ctx, args), True
    except Exception as exc:  # every failure goes back to the model as text
        return f"Tool error: {type(exc).__name__}: {exc}", False


__all__ = ["TOOLS", "TOOL_MAP", "ToolContext", "as_tool_text", "run_tool"]
