"""The supervised server, ensure_server, and the client's typed errors."""

from __future__ import annotations

import pytest

from shared.config import Settings, load_settings
from shared.graph.client import GraphClient, base_url, columnar_to_rows
from shared.graph.errors import GraphNotFound, GraphTimeout, GraphUnavailable, RequestTooBig
from shared.graph.server import TuringDBServer, answers, ensure_server
from tests.fixtures.turingdb import free_port


def test_base_url_forms() -> None:
    assert base_url("localhost", 1234) == "http://localhost:1234"
    assert base_url("http://db.example", 6666) == "http://db.example:6666"
    assert base_url("https://db.example:7000/", 6666) == "https://db.example:7000"


def test_columnar_reply_to_rows() -> None:
    reply = {"header": {"column_names": ["a", "b"]}, "data": [[[1, 2], ["x", "y"]], [[3], ["z"]]]}
    assert columnar_to_rows(reply) == (["a", "b"], [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}, {"a": 3, "b": "z"}])


def test_ensure_server_reuses_a_running_server(turingdb_server: TuringDBServer, graph_settings: Settings) -> None:
    assert answers(turingdb_server.url)
    assert ensure_server(graph_settings) is None


def test_server_starts_and_stops_cleanly(tmp_path: object) -> None:
    settings = load_settings({}, turingdb_url="127.0.0.1", turingdb_port=free_port(), state_dir=str(tmp_path), log_format="console")
    server = ensure_server(settings)
    assert server is not None and answers(server.url)
    with pytest.raises(GraphUnavailable):
        TuringDBServer(server.directory, server.port).start()  # the port is taken
    server.stop()
    assert not answers(server.url, 0.3)
    assert (server.directory / "graphs").is_dir()


async def test_client_errors_are_typed(turingdb_server: TuringDBServer) -> None:
    async with GraphClient(f"http://127.0.0.1:{free_port()}") as dead:
        with pytest.raises(GraphUnavailable):
            await dead.query("LIST GRAPH")
        assert not await dead.ping(0.2)
    async with GraphClient(turingdb_server.url, graph="no_such_graph") as client:
        with pytest.raises(GraphNotFound):
            await client.query("MATCH (n) RETURN count(n)")
        with pytest.raises(RequestTooBig):
            await client.query("RETURN '" + "x" * 1_100_000 + "'")
        with pytest.raises(GraphTimeout):
            await client.query("LIST GRAPH", graph="default", timeout=0.000001)
