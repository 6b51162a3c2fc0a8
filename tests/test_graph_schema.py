"""Schema tools and the skeleton over the loaded subset."""

from __future__ import annotations

import json

import pytest

from shared.config import Settings
from shared.graph.client import GraphClient
from shared.graph.errors import GraphError
from shared.graph.loader import LoadReport
from shared.graph.schema import edge_patterns, edge_types, node_labels, node_properties, sample_nodes
from shared.graph.skeleton import cache_path, graph_skeleton


async def test_node_labels_with_counts(loaded_graph: LoadReport, graph_client: GraphClient) -> None:
    labels = await node_labels(graph_client)
    counts = {r["label"]: r["count"] for r in labels}
    assert counts == loaded_graph.labels
    assert "LoadInfo" not in counts
    json.dumps(labels)


async def test_edge_types_with_counts(loaded_graph: LoadReport, graph_client: GraphClient) -> None:
    types = await edge_types(graph_client)
    assert {r["type"]: r["count"] for r in types} == loaded_graph.edge_types
    assert types[0]["count"] >= types[-1]["count"]


async def test_node_properties_per_label(loaded_graph: LoadReport, graph_client: GraphClient) -> None:
    props = {p["property"]: p for p in await node_properties(graph_client, "Pathway")}
    assert props["stId"]["type"] == "String" and props["stId"]["share"] == 1.0
    assert props["key"]["type"] == "Int64" and props["isLeaf"]["type"] == "Bool"
    gene = {p["property"] for p in await node_properties(graph_client, "Gene")}
    assert {"symbol", "displayName", "text", "key"} <= gene
    with pytest.raises(GraphError):
        await node_properties(graph_client, "Pathway) DETACH DELETE (n")


async def test_edge_patterns(loaded_graph: LoadReport, graph_client: GraphClient) -> None:
    patterns = await edge_patterns(graph_client)
    seen = {(p["from"], p["type"], p["to"]) for p in patterns}
    assert ("Pathway", "HAS_EVENT", "Reaction") in seen
    assert ("Gene", "PARTICIPATES_IN", "Pathway") in seen
    assert ("Reaction", "INPUT", "PhysicalEntity") in seen
    assert ("Complex", "HAS_COMPONENT", "PhysicalEntity") in seen
    total = sum(p["count"] for p in patterns if (p["from"], p["type"], p["to"]) == ("Pathway", "HAS_EVENT", "Reaction"))
    assert total == loaded_graph.edge_types["HAS_EVENT"]


async def test_sample_nodes(loaded_graph: LoadReport, graph_client: GraphClient) -> None:
    sample = await sample_nodes(graph_client, "Pathway", limit=3)
    assert len(sample) == 3
    assert all(s["labels"] == ["Pathway"] and s["stId"].startswith("R-HSA-") for s in sample)
    assert all(len(s.get("summation", "")) <= 303 for s in sample)
    json.dumps(sample)


async def test_skeleton_is_small_and_cached(loaded_graph: LoadReport, graph_client: GraphClient, graph_settings: Settings) -> None:
    text = await graph_skeleton(graph_client, graph_settings, refresh=True)
    assert "Pathway" in text and "HAS_EVENT" in text and "(Gene)-[:PARTICIPATES_IN]->(Pathway)" in text
    assert len(text) < 4000, len(text)  # ~ a few hundred tokens
    assert cache_path(graph_settings).is_file()
    assert await graph_skeleton(graph_client, graph_settings) == text
