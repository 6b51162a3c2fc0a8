"""The Reactome graph in TuringDB: server, client, read-only gate, loader, schema, skeleton."""

from shared.graph.client import GraphClient, base_url
from shared.graph.cypher_gate import QueryResult, check_read_only, graph_query
from shared.graph.errors import (
    AnalyzeError,
    ExecError,
    GraphError,
    GraphNotFound,
    GraphTimeout,
    GraphUnavailable,
    LoadError,
    ParseError,
    PlanError,
    RequestTooBig,
    WriteQueryRefused,
)
from shared.graph.loader import LoadReport, load_graph, load_graph_async
from shared.graph.schema import edge_patterns, edge_types, node_labels, node_properties, sample_nodes
from shared.graph.server import TuringDBServer, ensure_server
from shared.graph.skeleton import graph_skeleton

__all__ = [
    "AnalyzeError",
    "ExecError",
    "GraphClient",
    "GraphError",
    "GraphNotFound",
    "GraphTimeout",
    "GraphUnavailable",
    "LoadError",
    "LoadReport",
    "ParseError",
    "PlanError",
    "QueryResult",
    "RequestTooBig",
    "TuringDBServer",
    "WriteQueryRefused",
    "base_url",
    "check_read_only",
    "edge_patterns",
    "edge_types",
    "ensure_server",
    "graph_query",
    "graph_skeleton",
    "load_graph",
    "load_graph_async",
    "node_labels",
    "node_properties",
    "sample_nodes",
]
