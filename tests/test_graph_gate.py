"""The read-only gate: write attempts refused, tricky reads allowed, rows and time bounded."""

from __future__ import annotations

import pytest

from shared.graph.client import GraphClient
from shared.graph.cypher_gate import bounded, check_read_only, graph_query
from shared.graph.errors import GraphError, ParseError, WriteQueryRefused

WRITES = [
    "CREATE (n:Pathway {displayName: 'x'})",
    "create (n:X)",
    "MATCH (n) SET n.displayName = 'x'",
    "MATCH (n) sEt n:Hacked",
    "MATCH (n) DELETE n",
    "MATCH (n) DETACH DELETE n",
    "MATCH (n) REMOVE n.displayName",
    "MERGE (n:Gene {symbol: 'X'})",
    "DROP INDEX foo",
    "DROP CONSTRAINT c",
    "LOAD JSONL 'x.jsonl' AS g",
    "LOAD GRAPH other",
    "LOAD CSV FROM 'f.csv' AS row RETURN row",
    "CHANGE NEW",
    "CHANGE SUBMIT",
    "COMMIT",
    "DELETE VECTOR INDEX reactome_idx",
    "CREATE VECTOR INDEX i WITH DIMENSION 3 METRIC COSINE",
    "LOAD VECTOR FROM 'v.csv' IN i",
    "MATCH (n) RETURN n; CREATE (m)",
    "MATCH (n) RETURN n; MATCH (m) RETURN m",
    "MATCH (n) RETURN n /* comment */ CREATE (m)",
    "MATCH (n) // comment\nDELETE n",
    "MATCH (n) WHERE n.x = 'it\\'s' DELETE n",
    "MATCH (n) WHERE n.x = \"a\\\"b\" SET n.y = 1",
    "MATCH (n)CREATE(m)",
    "MATCH (n) WITH n FOREACH (x IN [1] | CREATE (m))",
    "CALL db.createLabel('x')",
    "CALL apoc.periodic.iterate('MATCH (n) RETURN n', 'DELETE n', {})",
    "CALL gnn.graphSAGE([1], [2])",
    "CALL `db`.`labels`() YIELD label CREATE (n)",
    "MATCH (n) CALL { WITH n DETACH DELETE n } RETURN 1",
    "MATCH (n:Pathway) RETURN n /* unterminated",
    "MATCH (n) WHERE n.x = 'unterminated RETURN n",
    "",
    "   // only a comment",
]

READS = [
    "MATCH (n:Pathway) RETURN n.displayName LIMIT 5",
    "match (n:Pathway) where n.displayName = 'CREATE a thing' return n.stId",
    'MATCH (n) WHERE n.displayName CONTAINS "DELETE" RETURN count(n)',
    "MATCH (n) WHERE n.displayName = 'it\\'s SET here' RETURN n.key",
    "MATCH (n:`CREATE`) RETURN n.key",
    "MATCH (n) RETURN n.set, n.create AS `delete`",
    "MATCH (n:Set) RETURN n.key",
    "MATCH (n) RETURN {set: 1, merge: 2} AS m LIMIT 1",
    "MATCH (n) RETURN n.key // DELETE everything\n LIMIT 3",
    "MATCH (n) /* SET n.x = 1 */ RETURN n.key",
    "CALL db.labels()",
    "CALL db.labels() YIELD label RETURN label",
    "CALL db.edgeTypes()",
    "CALL db.propertyTypes()",
    "CALL db.procedures()",
    "MATCH (p:Pathway)-[:HAS_SUBPATHWAY*1..3]->(c) RETURN c.displayName;",
    "VECTOR SEARCH IN idx FOR 3 (0.1, 0.2) YIELD ids, score RETURN ids, score",
    "UNWIND [1, 2, 3] AS x RETURN x",
    "MATCH (n) WITH n.displayName AS name ORDER BY name RETURN name SKIP 2 LIMIT 10",
    "OPTIONAL MATCH (n:Gene {symbol: 'TP53'})-[:PARTICIPATES_IN]->(p) RETURN p.stId",
]


@pytest.mark.parametrize("cypher", WRITES)
def test_write_attempts_are_refused(cypher: str) -> None:
    with pytest.raises(WriteQueryRefused) as info:
        check_read_only(cypher)
    assert info.value.code == "WRITE_REFUSED"
    assert "read" in info.value.message.lower()


@pytest.mark.parametrize("cypher", READS)
def test_tricky_reads_pass(cypher: str) -> None:
    check_read_only(cypher)


def test_limit_is_added_or_clamped() -> None:
    assert bounded("MATCH (n) RETURN n.key", 10) == ("MATCH (n) RETURN n.key LIMIT 11", True)
    assert bounded("MATCH (n) RETURN n.key LIMIT 500;", 10) == ("MATCH (n) RETURN n.key LIMIT 11", True)
    assert bounded("MATCH (n) RETURN n.key LIMIT 3", 10) == ("MATCH (n) RETURN n.key LIMIT 3", False)
    assert bounded("CALL db.labels()", 10) == ("CALL db.labels()", False)


async def test_graph_query_caps_rows_with_a_note(graph_client: GraphClient, loaded_graph: object) -> None:
    result = await graph_query(graph_client, "MATCH (g:Gene) RETURN g.symbol AS symbol", max_rows=7, timeout=10)
    assert len(result.rows) == 7 and result.truncated
    assert "first 7 rows" in result.note
    assert set(result.rows[0]) == {"symbol"}
    small = await graph_query(graph_client, "MATCH (p:Pathway) RETURN p.stId LIMIT 2", max_rows=7, timeout=10)
    assert len(small.rows) == 2 and not small.truncated and small.note == ""


async def test_graph_query_cuts_when_no_limit_can_be_added(graph_client: GraphClient, loaded_graph: object) -> None:
    result = await graph_query(graph_client, "CALL db.propertyTypes()", max_rows=2, timeout=10)
    assert len(result.rows) == 2 and result.truncated


async def test_graph_query_refuses_before_the_server(graph_client: GraphClient, loaded_graph: object) -> None:
    with pytest.raises(WriteQueryRefused):
        await graph_query(graph_client, "MATCH (n:Pathway) DETACH DELETE n", 10, 10)
    rows = await graph_client.query("MATCH (n:Pathway) RETURN count(n) AS c")
    assert rows[0]["c"] == loaded_graph.labels["Pathway"]  # type: ignore[attr-defined]


async def test_server_errors_carry_their_code(graph_client: GraphClient, loaded_graph: object) -> None:
    with pytest.raises(ParseError) as info:
        await graph_query(graph_client, "MATCH (n RETURN n", 10, 10)
    assert info.value.code == "PARSE_ERROR" and "^" in info.value.message
    with pytest.raises(GraphError) as info2:
        await graph_query(graph_client, "MATCH (n) RETURN m.x", 10, 10)
    assert info2.value.code in ("ANALYZE_ERROR", "PLAN_ERROR", "EXEC_ERROR")
