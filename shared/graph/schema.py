"""The agent's five schema tools: labels, edge types, properties, patterns, samples.

All return plain JSON-able data. The loader's bookkeeping label (LoadInfo) is hidden.
"""

from __future__ import annotations

import re
from typing import Any

from shared.graph.client import GraphClient
from shared.graph.errors import GraphError

HIDDEN_LABELS = frozenset({"LoadInfo"})
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SAMPLE_TEXT_CHARS = 300


def _label(label: str) -> str:
    """`label` checked as an identifier (it is inlined into Cypher)."""
    if not _IDENT.match(label or ""):
        raise GraphError("BAD_LABEL", f"{label!r} is not a label name (letters, digits, underscore)")
    return label


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "Bool"
    if isinstance(value, int):
        return "Int64"
    if isinstance(value, float):
        return "Double"
    if isinstance(value, str):
        return "String"
    if isinstance(value, list):
        return "List"
    return type(value).__name__ if value is not None else "Null"


async def node_labels(client: GraphClient) -> list[dict[str, Any]]:
    """[{label, count}] by count, largest first (a node with two labels counts for both)."""
    rows = await client.query("MATCH (n) UNWIND labels(n) AS label RETURN label, count(*) AS count")
    out = [{"label": r["label"], "count": int(r["count"])} for r in rows if r["label"] not in HIDDEN_LABELS]
    return sorted(out, key=lambda r: (-r["count"], r["label"]))


async def edge_types(client: GraphClient) -> list[dict[str, Any]]:
    """[{type, count}] by count, largest first."""
    rows = await client.query("MATCH ()-[e]->() RETURN type(e) AS type, count(e) AS count")
    out = [{"type": r["type"], "count": int(r["count"])} for r in rows]
    return sorted(out, key=lambda r: (-r["count"], r["type"]))


async def node_properties(client: GraphClient, label: str, scan: int = 2000) -> list[dict[str, Any]]:
    """[{property, type, share}] of nodes labelled `label` (share: fraction of scanned nodes having it)."""
    rows = await client.query(f"MATCH (n:{_label(label)}) RETURN properties(n) AS p LIMIT {int(scan)}")
    seen: dict[str, dict[str, Any]] = {}
    for row in rows:
        for key, value in (row["p"] or {}).items():
            entry = seen.setdefault(key, {"property": key, "type": _type_name(value), "n": 0})
            entry["n"] += 1
    total = max(len(rows), 1)
    out = [{"property": e["property"], "type": e["type"], "share": round(e["n"] / total, 3)} for e in seen.values()]
    return sorted(out, key=lambda r: (-r["share"], r["property"]))


async def edge_patterns(client: GraphClient) -> list[dict[str, Any]]:
    """[{from, type, to, count}]: (label)-[type]->(label) with counts, largest first.

    Nodes with several labels (PhysicalEntity + Protein) give one pattern per label.
    """
    rows = await client.query(
        "MATCH (a)-[e]->(b) UNWIND labels(a) AS src UNWIND labels(b) AS dst "
        "RETURN src, type(e) AS type, dst, count(*) AS count"
    )
    out = [
        {"from": r["src"], "type": r["type"], "to": r["dst"], "count": int(r["count"])}
        for r in rows
        if r["src"] not in HIDDEN_LABELS and r["dst"] not in HIDDEN_LABELS
    ]
    return sorted(out, key=lambda r: (-r["count"], r["from"], r["type"], r["to"]))


async def sample_nodes(client: GraphClient, label: str, limit: int = 5) -> list[dict[str, Any]]:
    """Up to `limit` nodes of `label` as property dicts (long texts shortened), plus their labels."""
    limit = max(1, min(int(limit), 50))
    rows = await client.query(f"MATCH (n:{_label(label)}) RETURN labels(n) AS labels, properties(n) AS p LIMIT {limit}")
    out = []
    for row in rows:
        props = dict(row["p"] or {})
        for key, value in props.items():
            if isinstance(value, str) and len(value) > SAMPLE_TEXT_CHARS:
                props[key] = value[:SAMPLE_TEXT_CHARS] + "..."
        out.append({"labels": list(row["labels"] or []), **props})
    return out
