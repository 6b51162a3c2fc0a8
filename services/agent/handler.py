"""The agent's inbox handler: run the loop, stream its steps, end the job exactly once."""

from __future__ import annotations

import time
from typing import Any

from shared.bus.cancel import job_cancelled_event
from shared.bus.worker import Delivery, Outcome
from shared.config import Settings
from shared.contracts import ChatResponse, EventRecord, JobTask, TokenUsage, job_done_event, job_error_event
from shared.graph.client import GraphClient, GraphError
from shared.graph.skeleton import graph_skeleton
from shared.llm import LLMClient, LLMError, LLMUnavailable
from shared.logging import get_logger
from shared.markdown import nodes_markdown
from shared.rag.embedder import Embedder
from shared.rag.search import vector_search

from services.agent.loop import JobCancelled, run_agent
from services.agent.prompt import system_prompt
from services.agent.tools import ToolContext

log = get_logger(__name__)

SKELETON_REUSE_SECONDS = 60.0  # the skeleton changes only when the graph is reloaded


class AgentHandler:
    def __init__(self, settings: Settings, llm: LLMClient, graph: GraphClient, embedder: Embedder) -> None:
        self.settings = settings
        self.llm = llm
        self.graph = graph
        self.embedder = embedder
        self._skeleton_text: str | None = None
        self._skeleton_at = float("-inf")

    async def __call__(self, delivery: Delivery) -> Outcome:
        task = delivery.task

        async def emit(type: str, data: dict[str, Any]) -> None:
            await delivery.emit(EventRecord(type, task.job_id, task.session_id, data))

        if delivery.delivery_count > 1:
            await emit("agent_restarted", {"attempt": delivery.delivery_count})
        router_usage = task.decision.token_usage if task.decision else TokenUsage()
        ctx = ToolContext(self.settings, self.graph, self.embedder)
        try:
            result = await run_agent(
                self.llm,
                ctx,
                system_prompt(await self._skeleton()),
                task.history,
                task.message,
                emit,
                max_iterations=self.settings.agent_max_iterations,
                should_stop=delivery.cancel_reason,
            )
        except JobCancelled as exc:
            return Outcome(events=[job_cancelled_event(task.job_id, task.session_id, exc.reason, "agent", iteration=exc.iteration)])
        except LLMUnavailable as exc:
            log.warning("agent_llm_unavailable", error=str(exc))
            return await self._degraded(task, exc, router_usage)
        except LLMError as exc:
            log.warning("agent_llm_error", error=str(exc))
            return Outcome(events=[job_error_event(task.job_id, task.session_id, str(exc), stage="agent")])
        summary = EventRecord(
            "agent_done",
            task.job_id,
            task.session_id,
            {"iterations": result.iterations, "tool_calls": result.tool_calls, "capped": result.capped,
             "sources": len(result.sources)},
        )
        response = ChatResponse(task.session_id, result.answer, "agent", result.sources, router_usage + result.usage)
        return Outcome(events=[summary, job_done_event(task.job_id, response)])

    async def _skeleton(self) -> str | None:
        """The graph skeleton, asked of the graph at most once a minute per process."""
        if self._skeleton_text is not None and time.monotonic() - self._skeleton_at < SKELETON_REUSE_SECONDS:
            return self._skeleton_text
        try:
            self._skeleton_text = await graph_skeleton(self.graph, self.settings)
            self._skeleton_at = time.monotonic()
        except (GraphError, OSError) as exc:
            log.warning("skeleton_unavailable", error=str(exc))
        return self._skeleton_text

    async def _degraded(self, task: JobTask, exc: LLMUnavailable, usage: TokenUsage) -> Outcome:
        """The model cannot be reached: say so plainly and show the closest graph matches."""
        head = (
            f"**The language model could not be reached** ({exc.endpoint.provider} `{exc.endpoint.model}` "
            f"at {exc.endpoint.base_url}: {exc.reason}), so this is not a written answer. "
        )
        try:
            nodes = await vector_search(self.graph, self.embedder, task.message, self.settings.vector_search_top_k, self.settings)
            body = head + "These are the closest matches in the graph:\n\n" + nodes_markdown(nodes)
        except (GraphError, OSError) as graph_exc:
            nodes = []
            body = head + f"The graph could not be searched either: {graph_exc}"
        degraded = EventRecord("agent_degraded", task.job_id, task.session_id, {"reason": str(exc), "endpoint": exc.endpoint.base_url})
        response = ChatResponse(task.session_id, body, "lookup", nodes, usage)
        return Outcome(events=[degraded, job_done_event(task.job_id, response)])
