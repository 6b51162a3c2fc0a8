"""Embedder, vector index and vector search against the loaded subset."""

from __future__ import annotations

import json
from pathlib import Path
import subprocess
import sys

import numpy as np
import pytest

from shared.config import PROJECT_ROOT, Settings, load_settings
from shared.graph.client import GraphClient
from shared.graph.loader import LoadReport
from shared.rag.embedder import OFFLINE_MODEL, load_embedder, offline_index_name
from shared.graph.reactome import build_graph
from shared.rag.index import embed_items, search_ids, vector_indexes
from shared.rag.search import vector_search


def test_embedder_falls_back_offline_with_one_warning(graph_settings: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    settings = load_settings({}, embedding_model="no-such-org/no-such-model", turingdb_graph="fallback_check", log_format="console")
    embedder = load_embedder(settings)
    assert embedder.model_name == OFFLINE_MODEL.name
    assert embedder.index_name == offline_index_name(settings) == "fallback_check_reactome_minilm_256"
    assert load_embedder(settings) is embedder  # cached: the warning is not repeated
    vectors = embedder.encode(["apoptosis", "glycolysis", ""])
    assert vectors.dtype == np.float32 and vectors.shape == (3, embedder.dim) == (3, 256)
    assert np.allclose(np.linalg.norm(vectors[:2], axis=1), 1.0, atol=1e-5)


def test_configured_local_model_is_used_as_is(tmp_path: object) -> None:
    settings = load_settings({}, embedding_model=str(OFFLINE_MODEL), vector_index_name="my_index", log_format="console")
    embedder = load_embedder(settings)
    assert embedder.model_name == str(OFFLINE_MODEL) and embedder.index_name == "my_index"


async def test_exact_names_rank_first(loaded_graph: LoadReport, graph_client: GraphClient, graph_settings: Settings) -> None:
    embedder = load_embedder(graph_settings)
    for name, st_id in (
        ("Intrinsic Pathway for Apoptosis", "R-HSA-109606"),
        ("Signaling by EGFR", "R-HSA-177929"),
        ("Cell Cycle Checkpoints", "R-HSA-69620"),
        ("Translocation of activated BAD protein to mitochondria", "R-HSA-139905"),
    ):
        results = await vector_search(graph_client, embedder, name, 5, graph_settings)
        assert results[0]["stId"] == st_id, (name, results[:2])
        assert results[0]["displayName"] == name and results[0]["score"] > 0.8
    results = await vector_search(graph_client, embedder, "Apoptosis", 5, graph_settings)
    assert [r["score"] for r in results] == sorted((r["score"] for r in results), reverse=True)
    assert set(results[0]) == {"id", "stId", "displayName", "labels", "text", "score"}
    assert results[0]["labels"] == ["Pathway"] and isinstance(results[0]["id"], int)


async def test_gene_symbols_find_genes(loaded_graph: LoadReport, graph_client: GraphClient, graph_settings: Settings) -> None:
    embedder = load_embedder(graph_settings)
    results = await vector_search(graph_client, embedder, "EGFR", 5, graph_settings)
    assert "EGFR" in [r["stId"] for r in results]


async def test_index_agrees_with_numpy_brute_force(
    loaded_graph: LoadReport, graph_client: GraphClient, graph_settings: Settings, reactome_subset: Path
) -> None:
    embedder = load_embedder(graph_settings)
    assert (await vector_indexes(graph_client))[embedder.index_name] == embedder.dim
    items = list(build_graph(reactome_subset).texts())
    matrix = embed_items(embedder, items)
    keys = np.array([item[0] for item in items])
    agree = 0
    questions = ["caspase activation", "EGF receptor dimerisation", "DNA damage checkpoint", "TLR signalling adaptor", "BH3-only proteins"]
    for question in questions:
        scores = matrix @ embedder.encode_one(question)
        expected = [int(k) for k in keys[np.argsort(-scores)[:5]]]
        found = [key for key, _ in await search_ids(graph_client, embedder.index_name, embedder.encode_one(question), 5)]
        agree += found == expected
    assert agree >= len(questions) - 1  # ties may swap


def test_search_cli_json(loaded_graph: LoadReport, graph_settings: Settings) -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "TURINGDB_URL": graph_settings.turingdb_url,
        "TURINGDB_PORT": str(graph_settings.turingdb_port),
        "TURINGDB_GRAPH": graph_settings.turingdb_graph,
        "STATE_DIR": graph_settings.state_dir,
        "LOG_FORMAT": "console",
        "HF_HUB_OFFLINE": "1",
    }
    done = subprocess.run(
        [sys.executable, "-m", "services.cli", "search", "Intrinsic Pathway for Apoptosis", "--k", "3", "--json"],
        cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(lines) == 3 and lines[0]["stId"] == "R-HSA-109606"
    assert {"stId", "displayName", "labels", "score"} <= set(lines[0])
    done = subprocess.run(
        [sys.executable, "-m", "services.cli", "cypher", "MATCH (p:Pathway {stId: 'R-HSA-109606'}) RETURN p.displayName AS name", "--json"],
        cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[0]) == {"name": "Intrinsic Pathway for Apoptosis"}
    refused = subprocess.run(
        [sys.executable, "-m", "services.cli", "cypher", "MATCH (n) DETACH DELETE n"],
        cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=60,
    )
    assert refused.returncode == 1 and "WRITE_REFUSED" in refused.stderr


async def test_kept_node_rows_follow_the_graph_fingerprint(loaded_graph: LoadReport, graph_client: GraphClient, graph_settings: Settings) -> None:
    from shared.rag import nodes

    embedder = load_embedder(graph_settings)
    first = (await vector_search(graph_client, embedder, "Intrinsic Pathway for Apoptosis", 1, graph_settings))[0]
    stale = {**first, "displayName": "stale row", "labels": ("Pathway",)}
    nodes._rows[graph_settings.turingdb_graph] = ("an-older-build", {first["id"]: stale})
    again = (await vector_search(graph_client, embedder, "Intrinsic Pathway for Apoptosis", 1, graph_settings))[0]
    assert again["displayName"] == "Intrinsic Pathway for Apoptosis" and again["id"] == first["id"]
