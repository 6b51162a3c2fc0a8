"""classify_intent: the router LLM's decision, parsed defensively."""

from __future__ import annotations

import json
import re
from typing import Any

from shared.contracts import RouterDecision, TokenUsage
from shared.llm import LLMClient

from services.router.prompt import ROUTER_SYSTEM_PROMPT

_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


async def classify_intent(message: str, history: list[dict[str, str]], llm: LLMClient) -> RouterDecision:
    """Ask the router LLM; a reply that is not the expected JSON routes to the agent."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": ROUTER_SYSTEM_PROMPT}]
    messages += history[-6:]
    messages.append({"role": "user", "content": message})
    reply = await llm.chat(messages, json_mode=True)
    return parse_decision(reply.content, reply.usage)


def parse_decision(text: str, usage: TokenUsage = TokenUsage()) -> RouterDecision:
    try:
        match = _JSON_OBJECT.search(text or "")
        data = json.loads(match.group(0) if match else text)
        route = str(data["route"]).strip().lower()
        confidence = float(data.get("confidence", 0.0))
        if route not in ("lookup", "agent") or not 0.0 <= confidence <= 1.0:
            raise ValueError(f"route={route!r} confidence={confidence!r}")
        reasoning = str(data.get("reasoning", ""))[:500]
        return RouterDecision(route, confidence, reasoning, usage)  # type: ignore[arg-type]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        shown = (text or "")[:120]
        return RouterDecision("agent", 0.0, f"malformed router reply ({type(exc).__name__}): {shown!r}", usage)
