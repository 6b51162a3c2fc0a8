"""Retrieval quality on the full graph: plain-words questions, hit@5 above a measured floor.

retrieval_questions.tsv is the test set; retrieval_dev_questions.tsv (other topics) is
the set that text composition and re-ranking weights were tuned on.
"""

from __future__ import annotations

import csv
from pathlib import Path

from shared.config import Settings
from shared.graph.client import GraphClient
from shared.rag.embedder import load_embedder
from shared.rag.search import vector_search

QUESTIONS = Path(__file__).parent / "data" / "retrieval_questions.tsv"
DEV_QUESTIONS = Path(__file__).parent / "data" / "retrieval_dev_questions.tsv"
# models/reactome-minilm-256 + re-ranking: test 0.71 (45/63; 0.60 before), dev 0.86 (49/57; 0.72 before)
HIT_AT_5_FLOOR = 0.69
DEV_HIT_AT_5_FLOOR = 0.84


def questions(path: Path = QUESTIONS) -> list[tuple[str, set[str]]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return [(r["question"], set(r["expected"].split(","))) for r in csv.DictReader(handle, delimiter="\t")]


async def test_hit_at_5_on_plain_words_questions(full_graph_settings: Settings) -> None:
    await check_hit_at_5(full_graph_settings, questions(QUESTIONS), HIT_AT_5_FLOOR)


async def test_hit_at_5_on_dev_questions(full_graph_settings: Settings) -> None:
    await check_hit_at_5(full_graph_settings, questions(DEV_QUESTIONS), DEV_HIT_AT_5_FLOOR)


async def check_hit_at_5(full_graph_settings: Settings, asked: list[tuple[str, set[str]]], floor: float) -> None:
    """hit@5 over `asked` (any expected id in the top 5), printed with the misses, at least `floor`."""
    assert len(asked) >= 30
    embedder = load_embedder(full_graph_settings)
    hits, misses = 0, []
    async with GraphClient.from_settings(full_graph_settings) as client:
        for question, expected in asked:
            found = await vector_search(client, embedder, question, 5, full_graph_settings)
            if expected & {r["stId"] for r in found}:
                hits += 1
            else:
                misses.append((question, [f"{r['stId']} {r['displayName']}" for r in found[:3]]))
    rate = hits / len(asked)
    print(f"\nhit@5 = {hits}/{len(asked)} = {rate:.2f} ({embedder.model_name})")
    for question, top in misses:
        print(f"  miss: {question!r} -> {top}")
    assert rate >= floor
