"""The Cypher notes the agent's prompt gives the model hold on the pinned TuringDB server."""

from __future__ import annotations

from typing import Any

import pytest

from shared.graph.client import GraphClient
from shared.graph.errors import GraphError

from services.agent.prompt import CYPHER_NOTES, system_prompt


async def test_the_prompt_examples_run(graph_client: GraphClient, loaded_graph: Any) -> None:
    rows = await graph_client.query("CALL db.labels() YIELD label RETURN label LIMIT 5")
    assert 0 < len(rows) <= 5 and "label" in rows[0]
    commented = await graph_client.query("// a comment\nMATCH (p:Pathway) RETURN p.displayName AS name, p.stId AS id, p.key AS key LIMIT 1")
    assert commented[0]["id"].startswith("R-HSA-") and isinstance(commented[0]["key"], int)
    genes = await graph_client.query("MATCH (g:Gene) RETURN g.symbol AS symbol, g.displayName AS name LIMIT 1")
    assert genes[0]["symbol"]


@pytest.mark.parametrize(
    "cypher",
    [
        "/* block */ MATCH (p:Pathway) RETURN p.displayName LIMIT 1",
        "CALL db.labels() LIMIT 1",
        "MATCH (p:Pathway) WHERE p.displayName =~ 'Apo.*' RETURN p.displayName",
    ],
)
async def test_what_the_prompt_warns_about_fails(graph_client: GraphClient, loaded_graph: Any, cypher: str) -> None:
    with pytest.raises(GraphError):
        await graph_client.query(cypher)


def test_prompt_holds_skeleton_and_notes() -> None:
    prompt = system_prompt("Pathway (2751)")
    assert "Pathway (2751)" in prompt and CYPHER_NOTES in prompt
    assert "Pathway (2751)" not in system_prompt(None)
