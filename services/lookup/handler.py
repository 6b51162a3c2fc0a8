"""The lookup handler: embed, vector search, answer as Markdown; no LLM call."""

from __future__ import annotations

import time
from typing import Any, Protocol

from shared.bus.worker import Delivery, Outcome
from shared.config import Settings
from shared.contracts import ChatResponse, EventRecord, TokenUsage, job_done_event, job_error_event
from shared.graph.client import GraphError
from shared.markdown import nodes_markdown


class Searcher(Protocol):
    async def __call__(self, text: str, k: int) -> list[dict[str, Any]]: ...


class LookupHandler:
    def __init__(self, settings: Settings, search: Searcher) -> None:
        self.settings = settings
        self.search = search

    async def __call__(self, delivery: Delivery) -> Outcome:
        task = delivery.task
        k = self.settings.vector_search_top_k
        await delivery.emit(EventRecord("lookup_started", task.job_id, task.session_id, {"k": k}))
        started = time.perf_counter()
        try:
            nodes = await self.search(task.message, k)
        except (GraphError, OSError) as exc:
            error = f"The graph database could not be searched: {exc}"
            return Outcome(events=[job_error_event(task.job_id, task.session_id, error, stage="lookup")])
        took_ms = round((time.perf_counter() - started) * 1000, 1)
        results = EventRecord(
            "lookup_results",
            task.job_id,
            task.session_id,
            {
                "count": len(nodes),
                "duration_ms": took_ms,
                "top": [{"stId": n.get("stId"), "displayName": n.get("displayName"), "score": n.get("score")} for n in nodes],
            },
        )
        usage = task.decision.token_usage if task.decision else TokenUsage()
        response = ChatResponse(task.session_id, nodes_markdown(nodes), "lookup", nodes, usage)
        return Outcome(events=[results, job_done_event(task.job_id, response)])

