"""Re-ranking of search candidates and abbreviation long forms (pure functions, no server)."""

from __future__ import annotations

from shared.graph.abbreviations import mine, spelled_out
from shared.rag.rerank import rerank, tokens


def row(key: int, name: str, labels: list[str], score: float, text: str = "") -> dict[str, object]:
    return {"id": key, "stId": f"R-{key}", "displayName": name, "labels": labels, "text": text or name, "score": score}


def test_tokens_drop_frames_and_stem() -> None:
    assert tokens("Show me the node for TNF signalling pathways") == ["tnf", "signall"]


def test_rerank_puts_exact_name_first_and_keeps_shape() -> None:
    rows = [
        row(1, "Activation of BAD and translocation to mitochondria", ["Pathway"], 0.93),
        row(2, "Translocation of activated BAD protein to mitochondria", ["Reaction"], 0.90),
        row(3, "EGFR", ["Gene"], 0.2),
    ]
    ranked = rerank("Translocation of activated BAD protein to mitochondria", rows, 2)
    assert [r["id"] for r in ranked] == [2, 1]
    assert set(ranked[0]) == set(rows[0]) and ranked[0]["score"] >= ranked[1]["score"]


def test_rerank_prefers_word_overlap_and_pathways_over_close_cosines() -> None:
    rows = [
        row(1, "Kinesins move along microtubules consuming ATP", ["Reaction"], 0.62),
        row(2, "Metabolism of vitamin K", ["Pathway"], 0.60),
        row(3, "Glycogen breakdown (glycogenolysis)", ["Pathway"], 0.58),
    ]
    ranked = rerank("breaking down glycogen stores", rows, 3)
    assert ranked[0]["id"] == 3
    assert rerank("anything", [], 5) == []


def test_abbreviations_come_from_repeated_pairs() -> None:
    texts = [
        "Binding of tumor necrosis factor (TNF) to its receptor.",
        "Signalling by tumor necrosis factor (TNF) activates NF-kB.",
        "The T cell receptor (TCR) is seen once only.",
        "a lower case (abc) pair (abc) is ignored",
    ]
    found = mine(texts)
    assert found == {"TNF": "tumor necrosis factor"}
    assert spelled_out("TNF signaling", found) == "TNF signaling (tumor necrosis factor)"
    assert spelled_out("Tumor necrosis factor and TNF", found) == "Tumor necrosis factor and TNF"
