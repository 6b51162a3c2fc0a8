"""What every tool can reach: the graph, the embedder, settings, and the sources found so far."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from shared.config import Settings
from shared.graph.client import GraphClient
from shared.rag.embedder import Embedder

RESULT_CHAR_LIMIT = 6000


@dataclass
class ToolContext:
    settings: Settings
    graph: GraphClient
    embedder: Embedder
    sources: list[dict[str, Any]] = field(default_factory=list)

    def add_sources(self, nodes: list[dict[str, Any]]) -> None:
        """Remember nodes a vector search returned, once each, in order found."""
        seen = {(s.get("stId"), s.get("id")) for s in self.sources}
        for node in nodes:
            key = (node.get("stId"), node.get("id"))
            if key not in seen:
                seen.add(key)
                self.sources.append(node)


def as_tool_text(value: Any, limit: int = RESULT_CHAR_LIMIT) -> str:
    """JSON text for the model, cut with a note when it is too long."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    if len(text) > limit:
        text = text[:limit] + f"\n[cut: {len(text) - limit} more characters; ask for fewer rows or properties]"
    return text
