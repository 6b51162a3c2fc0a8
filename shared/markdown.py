"""Graph nodes written as Markdown: the lookup answer and the agent's degraded answer."""

from __future__ import annotations

from typing import Any

TEXT_LIMIT = 600


def node_markdown(node: dict[str, Any]) -> str:
    name = str(node.get("displayName") or node.get("stId") or node.get("id"))
    labels = ", ".join(str(label) for label in node.get("labels") or []) or "unlabelled"
    ident = node.get("stId") or node.get("id")
    lines = [f"### {_inline(name)}", "", f"- **id:** `{ident}`", f"- **labels:** {labels}"]
    score = node.get("score")
    if isinstance(score, (int, float)):
        lines.append(f"- **score:** {score:.3f}")
    text = str(node.get("text") or "").strip()
    if text:
        if len(text) > TEXT_LIMIT:
            text = text[: TEXT_LIMIT - 1].rstrip() + "…"
        lines += ["", _inline(text)]
    return "\n".join(lines)


def nodes_markdown(nodes: list[dict[str, Any]], *, empty: str = "No matching nodes were found in the graph.") -> str:
    if not nodes:
        return empty
    return "\n\n".join(node_markdown(node) for node in nodes)


def _inline(text: str) -> str:
    """One paragraph: no headings or blocks smuggled in by graph text."""
    return " ".join(text.split()).lstrip("#>")
