"""A router with no LLM call: nearest labelled examples in model2vec space.

The examples (data/router_examples.tsv) are embedded once; a message's score per
route is the mean cosine similarity of its `k` nearest examples of that route, and
the confidence is a softmax over the two scores.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Protocol

import numpy as np

from shared.config import PROJECT_ROOT
from shared.contracts import RouteType, RouterDecision

EXAMPLES_PATH = PROJECT_ROOT / "data" / "router_examples.tsv"


class TextEncoder(Protocol):
    def encode(self, texts: list[str]) -> np.ndarray: ...


def read_examples(path: Path = EXAMPLES_PATH) -> list[tuple[RouteType, str]]:
    with path.open(encoding="utf-8") as handle:
        rows = csv.DictReader(handle, delimiter="\t")
        return [(row["route"], row["message"]) for row in rows if row["route"] in ("lookup", "agent")]  # type: ignore[misc]


class LocalRouter:
    def __init__(self, encoder: TextEncoder, examples: list[tuple[RouteType, str]] | None = None,
                 *, k: int = 3, temperature: float = 0.05) -> None:
        examples = examples if examples is not None else read_examples()
        self._encoder = encoder
        self._k = k
        self._temperature = temperature
        self._routes: dict[RouteType, np.ndarray] = {}
        for route in ("lookup", "agent"):
            texts = [text for r, text in examples if r == route]
            self._routes[route] = _normalised(encoder.encode(texts))  # type: ignore[index]

    def classify(self, message: str) -> RouterDecision:
        query = _normalised(self._encoder.encode([message]))[0]
        scores: dict[str, float] = {}
        for route, matrix in self._routes.items():
            sims = np.sort(matrix @ query)[::-1][: self._k]
            scores[route] = float(sims.mean()) if sims.size else -1.0
        best = max(scores, key=scores.__getitem__)
        other = min(scores, key=scores.__getitem__)
        gap = (scores[best] - scores[other]) / self._temperature
        confidence = 1.0 / (1.0 + math.exp(-gap))
        reasoning = f"nearest labelled examples: lookup {scores['lookup']:.2f}, agent {scores['agent']:.2f}"
        return RouterDecision(best, round(confidence, 3), reasoning)  # type: ignore[arg-type]


def _normalised(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.maximum(norms, 1e-12)
