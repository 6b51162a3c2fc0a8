"""The five schema tools: labels, edge types, properties, patterns, sample nodes."""

from __future__ import annotations

from typing import Any

from shared.graph import schema

from services.agent.tools.context import ToolContext, as_tool_text


def _schema(name: str, description: str, properties: dict[str, Any] | None = None, required: list[str] | None = None) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties or {},
                "required": required or [],
                "additionalProperties": False,
            },
        },
    }


LABEL_ARG = {"label": {"type": "string", "description": "A node label, e.g. Pathway."}}

SCHEMAS = [
    _schema("get_node_labels", "Every node label with its node count."),
    _schema("get_edge_types", "Every relationship type with its count."),
    _schema("get_node_properties", "The property keys and their types for nodes of one label.", LABEL_ARG, ["label"]),
    _schema("get_edge_patterns", "The (label)-[TYPE]->(label) patterns present in the graph, with counts."),
    _schema(
        "get_sample_nodes",
        "A few example nodes of one label with their properties.",
        {**LABEL_ARG, "limit": {"type": "integer", "minimum": 1, "maximum": 20}},
        ["label"],
    ),
]


def _label(args: dict[str, Any]) -> str:
    label = str(args.get("label") or "").strip()
    if not label:
        raise ValueError("'label' must be a non-empty string")
    return label


async def get_node_labels(ctx: ToolContext, args: dict[str, Any]) -> str:
    return as_tool_text(await schema.node_labels(ctx.graph))


async def get_edge_types(ctx: ToolContext, args: dict[str, Any]) -> str:
    return as_tool_text(await schema.edge_types(ctx.graph))


async def get_node_properties(ctx: ToolContext, args: dict[str, Any]) -> str:
    return as_tool_text(await schema.node_properties(ctx.graph, _label(args)))


async def get_edge_patterns(ctx: ToolContext, args: dict[str, Any]) -> str:
    return as_tool_text(await schema.edge_patterns(ctx.graph))


async def get_sample_nodes(ctx: ToolContext, args: dict[str, Any]) -> str:
    limit = max(1, min(int(args.get("limit") or 5), 20))
    return as_tool_text(await schema.sample_nodes(ctx.graph, _label(args), limit))
