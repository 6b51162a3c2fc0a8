"""Loading the Reactome subset: counts, idempotence, and failures that leave nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from shared.config import Settings, load_settings
from shared.graph.client import GraphClient
from shared.graph.errors import GraphError, LoadError
from shared.graph.loader import LoadReport, import_jsonl, load_graph_async
from shared.graph.reactome import build_graph
from shared.graph.server import TuringDBServer


def other_graph(settings: Settings, name: str) -> Settings:
    return load_settings(
        {},
        turingdb_url=settings.turingdb_url,
        turingdb_port=settings.turingdb_port,
        turingdb_graph=name,
        state_dir=settings.state_dir,
        log_format="console",
    )


async def test_subset_counts_match_the_files(loaded_graph: LoadReport, graph_client: GraphClient, reactome_subset: Path) -> None:
    data = build_graph(reactome_subset)
    assert loaded_graph.changed and loaded_graph.nodes == len(data.nodes) and loaded_graph.edges == len(data.edges)
    for label in ("Pathway", "Reaction", "Gene", "GOTerm", "Publication", "PhysicalEntity", "Protein", "Complex"):
        rows = await graph_client.query(f"MATCH (n:{label}) RETURN count(n) AS c")
        assert rows[0]["c"] == data.label_counts()[label] > 0, label
    for edge in ("HAS_SUBPATHWAY", "HAS_EVENT", "PARTICIPATES_IN", "ANNOTATED_WITH", "CITES", "INPUT", "OUTPUT", "CATALYST", "HAS_COMPONENT", "HAS_MEMBER", "PRECEDES"):
        rows = await graph_client.query(f"MATCH ()-[e:{edge}]->() RETURN count(e) AS c")
        assert rows[0]["c"] == data.edge_counts()[edge] > 0, edge
    assert loaded_graph.vectors == sum(1 for _ in data.texts())


async def test_every_node_has_key_name_and_id(loaded_graph: LoadReport, graph_client: GraphClient) -> None:
    rows = await graph_client.query(
        "MATCH (n) WHERE n.displayName IS NULL OR n.key IS NULL RETURN labels(n) AS l LIMIT 5"
    )
    assert [r["l"] for r in rows] == [["LoadInfo"]] or rows == []
    rows = await graph_client.query("MATCH (p:Pathway {stId: 'R-HSA-109606'}) RETURN p.displayName AS name, p.text AS text, p.key AS key")
    assert rows[0]["name"] == "Intrinsic Pathway for Apoptosis"
    assert rows[0]["text"].startswith("Intrinsic Pathway for Apoptosis. ")
    rows = await graph_client.query(
        "MATCH (p:Pathway {stId: 'R-HSA-109606'})-[:HAS_SUBPATHWAY]->(c:Pathway)-[:HAS_EVENT]->(r:Reaction) RETURN count(r) AS c"
    )
    assert rows[0]["c"] > 0


async def test_second_load_changes_nothing(loaded_graph: LoadReport, graph_settings: Settings, turingdb_server: TuringDBServer, reactome_subset: Path) -> None:
    messages: list[str] = []
    again = await load_graph_async(graph_settings, reactome_subset, progress=messages.append, server=turingdb_server)
    assert not again.changed and not again.index_changed
    assert (again.nodes, again.edges, again.vectors) == (loaded_graph.nodes, loaded_graph.edges, loaded_graph.vectors)
    assert any("nothing to do" in m for m in messages)


async def test_bad_data_leaves_no_graph(graph_settings: Settings, turingdb_server: TuringDBServer, reactome_subset: Path, tmp_path: Path, graph_client: GraphClient) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(reactome_subset, broken)
    lines = (broken / "reactions.tsv").read_text().splitlines()
    (broken / "reactions.tsv").write_text("\n".join(lines[:5] + ["R-HSA-1\tonly two columns"] + lines[5:]) + "\n")
    settings = other_graph(graph_settings, "test_broken")
    with pytest.raises(LoadError, match="nothing was loaded"):
        await load_graph_async(settings, broken, progress=lambda m: None, server=turingdb_server)
    assert "test_broken" not in await graph_client.graphs()


async def test_rejected_import_creates_no_graph(turingdb_server: TuringDBServer, graph_client: GraphClient) -> None:
    bad = turingdb_server.data_dir / "half.jsonl"
    bad.write_text(
        '{"type":"node","id":"0","labels":["Pathway"],"properties":{"key":0}}\n'
        '{"type":"relationship","id":"0","label":"HAS_EVENT","start":{"id":"0"},"end":{"id":"9"}}\n'
    )
    with pytest.raises(GraphError) as info:
        await import_jsonl(graph_client, bad, "test_half")
    assert info.value.code == "EXEC_ERROR"
    assert "test_half" not in await graph_client.graphs()


async def test_a_changed_graph_on_a_foreign_server_is_refused(loaded_graph: LoadReport, graph_settings: Settings, reactome_subset: Path, tmp_path: Path) -> None:
    changed = tmp_path / "changed"
    shutil.copytree(reactome_subset, changed)
    with (changed / "pathways.tsv").open("a") as handle:
        handle.write("R-HSA-0\tA new pathway\tHomo sapiens\tfalse\ttrue\t0\t0\tNew.\n")
    with pytest.raises(LoadError, match="cannot drop a graph"):
        await load_graph_async(graph_settings, changed, progress=lambda m: None, server=None)


async def test_force_rebuilds_on_an_own_server(reactome_subset: Path, tmp_path: Path) -> None:
    from tests.fixtures.turingdb import free_port

    server = TuringDBServer(tmp_path / "turingdb", free_port()).start()
    try:
        settings = load_settings(
            {}, turingdb_url="127.0.0.1", turingdb_port=server.port, turingdb_graph="forced", state_dir=str(tmp_path), log_format="console"
        )
        first = await load_graph_async(settings, reactome_subset, progress=lambda m: None, server=server)
        messages: list[str] = []
        forced = await load_graph_async(settings, reactome_subset, force=True, progress=messages.append, server=server)
        assert first.changed and forced.changed and forced.index_changed
        assert any("removing it and restarting" in m for m in messages)
        async with GraphClient.from_settings(settings) as client:
            rows = await client.query("MATCH (n) RETURN count(n) AS c")
            assert rows[0]["c"] == forced.nodes + 1  # + the LoadInfo node
    finally:
        server.stop()
