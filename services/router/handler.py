"""The router's inbox handler: decide lookup or agent, pass the job on."""

from __future__ import annotations

import msgspec

from shared.bus.worker import Delivery, Outcome
from shared.config import Settings
from shared.contracts import EventRecord, JobTask, RouterDecision
from shared.llm import LLMClient, LLMError, LLMUnavailable
from shared.logging import get_logger

from services.router.classifier import classify_intent
from services.router.local import LocalRouter

log = get_logger(__name__)


class RouterHandler:
    """`llm` is None when ROUTER_PROVIDER=local; `local` is also the fallback."""

    def __init__(self, settings: Settings, llm: LLMClient | None, local: LocalRouter) -> None:
        self.settings = settings
        self.llm = llm
        self.local = local

    async def __call__(self, delivery: Delivery) -> Outcome:
        task = delivery.task
        started = {"attempt": delivery.delivery_count}
        await delivery.emit(EventRecord("routing_started", task.job_id, task.session_id, started))
        decision, classifier, fallback = await self._decide(task)
        if fallback is not None:
            await delivery.emit(EventRecord("routing_fallback", task.job_id, task.session_id, fallback))
        route = decision.route
        escalated = route == "lookup" and decision.confidence < self.settings.rag_confidence_threshold
        if escalated:
            route = "agent"
        final = msgspec.structs.replace(decision, route=route)
        done = EventRecord(
            "routing_done",
            task.job_id,
            task.session_id,
            {
                "route": route,
                "confidence": decision.confidence,
                "reasoning": decision.reasoning,
                "escalated": escalated,
                "proposed_route": decision.route,
                "classifier": classifier,
                "threshold": self.settings.rag_confidence_threshold,
            },
        )
        onward = msgspec.structs.replace(task, decision=final)
        return Outcome(events=[done], tasks=[(route, onward)])

    async def _decide(self, task: JobTask) -> tuple[RouterDecision, str, dict[str, str] | None]:
        if self.llm is None:
            return self.local.classify(task.message), "local", None
        try:
            decision = await classify_intent(task.message, task.history, self.llm)
            return decision, "llm", None
        except (LLMUnavailable, LLMError) as exc:
            log.warning("router_llm_failed", error=str(exc))
            fallback = {"reason": str(exc), "classifier": "local"}
            return self.local.classify(task.message), "local", fallback
