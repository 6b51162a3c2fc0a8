"""graph_query: a read-only, bounded Cypher query."""

from __future__ import annotations

from typing import Any

from shared.graph.cypher_gate import graph_query as run_read_only

from services.agent.tools.context import ToolContext, as_tool_text

SCHEMA = {
    "type": "function",
    "function": {
        "name": "graph_query",
        "description": "Run one read-only Cypher query on the TuringDB graph and get rows as JSON. Writes are refused. Return properties explicitly (n.displayName), not whole nodes. Rows are capped; errors come back as text to fix the query.",
        "parameters": {
            "type": "object",
            "properties": {"cypher": {"type": "string", "description": "One MATCH ... RETURN ... query."}},
            "required": ["cypher"],
            "additionalProperties": False,
        },
    },
}


async def graph_query(ctx: ToolContext, args: dict[str, Any]) -> str:
    cypher = str(args.get("cypher") or args.get("query") or "").strip()
    if not cypher:
        raise ValueError("'cypher' must be a non-empty string")
    result = await run_read_only(
        ctx.graph, cypher, max_rows=ctx.settings.cypher_max_rows, timeout=ctx.settings.cypher_timeout_seconds
    )
    payload: dict[str, Any] = {"rows": result.rows, "row_count": len(result.rows)}
    if result.note:
        payload["note"] = result.note
    return as_tool_text(payload)
