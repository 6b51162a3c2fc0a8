"""A compact text overview of the graph for a system prompt, cached per graph."""

from __future__ import annotations

import json
from pathlib import Path

from shared.config import Settings
from shared.graph.client import GraphClient
from shared.graph.schema import edge_patterns, edge_types, node_labels, node_properties

MAX_PATTERNS = 16
SKIP_PROPERTIES = frozenset({"key", "text", "summation"})


def cache_path(settings: Settings) -> Path:
    return settings.state_path / "graph" / f"skeleton.{settings.turingdb_graph}.json"


async def _fingerprint(client: GraphClient) -> str:
    rows = await client.query("MATCH (m:LoadInfo) RETURN m.fingerprint AS f")
    return str(rows[0]["f"]) if rows else ""


async def build_skeleton(client: GraphClient, graph: str) -> str:
    """Labels with counts and key properties, edge patterns with counts, query hints."""
    labels = await node_labels(client)
    types = await edge_types(client)
    patterns = await edge_patterns(client)
    lines = [f"Graph `{graph}` (Reactome, human). Node labels (count; main properties):"]
    for entry in labels:
        props = await node_properties(client, entry["label"], scan=300)
        keys = [p["property"] for p in props if p["property"] not in SKIP_PROPERTIES and p["share"] >= 0.2][:7]
        lines.append(f"- {entry['label']} ({entry['count']:,}): {', '.join(keys)}")
    lines.append("Relationships (count):")
    lines.append("- " + ", ".join(f"{t['type']} {t['count']:,}" for t in types))
    lines.append("Patterns (count):")
    shown = [p for p in patterns if p["from"] != "PhysicalEntity" and p["to"] != "PhysicalEntity"][:MAX_PATTERNS]
    for p in shown:
        lines.append(f"- ({p['from']})-[:{p['type']}]->({p['to']}) {p['count']:,}")
    lines.append(
        "Notes: every node has displayName and an integer key; Pathway/Reaction/PhysicalEntity have stId "
        "(R-HSA-...), Gene has symbol, GOTerm goId, Publication pubmedId. Molecule kinds (Protein, Complex, "
        "EntitySet, SmallMolecule ...) also carry the label PhysicalEntity. CONTAINS is case-sensitive; "
        "return properties (n.displayName), not nodes."
    )
    return "\n".join(lines)


async def graph_skeleton(client: GraphClient, settings: Settings, refresh: bool = False) -> str:
    """The cached skeleton of settings.turingdb_graph; rebuilt when the graph changed or on refresh."""
    path = cache_path(settings)
    fingerprint = await _fingerprint(client)
    if not refresh and path.is_file():
        try:
            cached = json.loads(path.read_text(encoding="utf-8"))
            if cached.get("fingerprint") == fingerprint and cached.get("text"):
                return str(cached["text"])
        except (OSError, ValueError):
            pass
    text = await build_skeleton(client, settings.turingdb_graph)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"fingerprint": fingerprint, "text": text}), encoding="utf-8")
    tmp.replace(path)
    return text
