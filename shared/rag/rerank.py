"""Re-ranking of vector-search candidates: cosine + lexical overlap + a Pathway prior.

The TuringDB index returns a pool of candidates (default 50) by cosine; each gets
    score = cosine
          + LEXICAL_WEIGHT * BM25(question, name + text) / best BM25 in the pool
          + NAME_WEIGHT * idf-weighted share of question words in the name / best in the pool
          + PATHWAY_PRIOR if the node is a Pathway
          + EXACT_NAME_BONUS if the question is the node's name.
IDF is computed over the pool itself, so no corpus statistics are needed at run time.
Weights were chosen on tests/data/retrieval_dev_questions.tsv (not on the test set).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any

POOL = 50
LEXICAL_WEIGHT = 0.1
NAME_WEIGHT = 0.05
PATHWAY_PRIOR = 0.1
EXACT_NAME_BONUS = 0.5
BM25_K1 = 1.2
BM25_B = 0.75

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an the of and or to in on for by with from into onto at as is are be being been was were do does did "
    "how what which who whom whose why when where that this these those it its their there them they "
    "cell cells show me node nodes find tell about please give list pathway pathways process processes "
    "reaction reactions happens happen get gets".split()
)


def _stem(word: str) -> str:
    """A crude suffix strip (signalling/signals -> signall/signal) so word forms meet."""
    for suffix in ("ing", "es", "s"):
        if len(word) > 4 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def tokens(text: str) -> list[str]:
    """Lower-cased, stop-word-free, lightly stemmed word tokens."""
    return [_stem(w) for w in _WORD.findall(text.lower()) if w not in _STOP]


def _normal(text: str) -> str:
    return " ".join(text.lower().split())


def rerank(question: str, rows: list[dict[str, Any]], k: int) -> list[dict[str, Any]]:
    """The best k of `rows` (each with displayName, text, labels, score=cosine), score replaced by the combined one."""
    if not rows:
        return []
    asked = set(tokens(question))
    docs = [Counter(tokens(f"{r.get('displayName') or ''} {r.get('text') or ''}")) for r in rows]
    names = [set(tokens(r.get("displayName") or "")) for r in rows]
    n = len(rows)
    df = Counter(t for doc in docs for t in doc if t in asked)
    idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in asked}
    lengths = [sum(doc.values()) for doc in docs]
    mean_length = (sum(lengths) / n) or 1.0
    lexical = [
        sum(
            idf[t] * doc[t] * (BM25_K1 + 1) / (doc[t] + BM25_K1 * (1 - BM25_B + BM25_B * length / mean_length))
            for t in asked
            if doc[t]
        )
        for doc, length in zip(docs, lengths)
    ]
    in_name = [sum(idf[t] for t in asked if t in name) for name in names]
    top_lexical, top_name = max(lexical) or 1.0, max(in_name) or 1.0
    exact = _normal(question)
    scored = []
    for row, lex, nam in zip(rows, lexical, in_name):
        score = float(row["score"]) + LEXICAL_WEIGHT * lex / top_lexical + NAME_WEIGHT * nam / top_name
        if "Pathway" in (row.get("labels") or []):
            score += PATHWAY_PRIOR
        if _normal(row.get("displayName") or "") == exact:
            score += EXACT_NAME_BONUS
        scored.append({**row, "score": score})
    scored.sort(key=lambda r: -r["score"])
    return scored[:k]
