"""The tool-calling loop: ask the model, run its tool calls, repeat until it answers or hits the cap."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from shared.contracts import TokenUsage
from shared.llm import LLMClient, LLMReply

from services.agent.deltas import DeltaCoalescer
from services.agent.tools import TOOLS, ToolContext, run_tool

Emit = Callable[[str, dict[str, Any]], Awaitable[None]]
StopCheck = Callable[[], Awaitable[str | None]]
PREVIEW_CHARS = 300
STOP_POLL_SECONDS = 0.25


class JobCancelled(Exception):
    """Someone asked to cancel the job; raised at the next safe point."""

    def __init__(self, reason: str, iteration: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.iteration = iteration


async def _never_stop() -> str | None:
    return None


@dataclass
class AgentResult:
    answer: str
    iterations: int
    usage: TokenUsage = TokenUsage()
    capped: bool = False
    tool_calls: int = 0
    sources: list[dict[str, Any]] = field(default_factory=list)


async def run_agent(
    llm: LLMClient,
    ctx: ToolContext,
    system: str,
    history: list[dict[str, str]],
    question: str,
    emit: Emit,
    *,
    max_iterations: int = 32,
    should_stop: StopCheck = _never_stop,
    stream: bool = True,
) -> AgentResult:
    """Ask, run tools, repeat. Text of each reply streams out as `answer_delta` events;
    `should_stop` is asked between steps and while the model answers."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}, *history, {"role": "user", "content": question}]
    usage = TokenUsage()
    calls = 0
    last_text = ""
    for iteration in range(1, max_iterations + 1):
        await _stop_if_asked(should_stop, iteration)
        await emit("agent_step", {"iteration": iteration, "max_iterations": max_iterations})
        reply = await _ask(llm, messages, emit, iteration, should_stop, stream)
        usage = usage + reply.usage
        if not reply.tool_calls:
            return AgentResult(reply.content.strip() or "(the model gave an empty answer)", iteration, usage, False, calls, ctx.sources)
        last_text = reply.content or last_text
        messages.append(reply.as_message())
        for call in reply.tool_calls:
            await _stop_if_asked(should_stop, iteration)
            calls += 1
            await emit("tool_call", {"iteration": iteration, "id": call.id, "name": call.name, "arguments": call.arguments})
            started = time.perf_counter()
            text, ok = await run_tool(ctx, call.name, call.arguments)
            duration_ms = round((time.perf_counter() - started) * 1000, 1)
            await emit(
                "tool_result",
                {"iteration": iteration, "id": call.id, "name": call.name, "ok": ok, "duration_ms": duration_ms,
                 "preview": text[:PREVIEW_CHARS], "chars": len(text)},
            )
            messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
    return AgentResult(_capped_answer(max_iterations, calls, last_text, ctx.sources), max_iterations, usage, True, calls, ctx.sources)


async def _stop_if_asked(should_stop: StopCheck, iteration: int) -> None:
    reason = await should_stop()
    if reason is not None:
        raise JobCancelled(reason, iteration)


async def _ask(
    llm: LLMClient, messages: list[dict[str, Any]], emit: Emit, iteration: int, should_stop: StopCheck, stream: bool
) -> LLMReply:
    """One model call, its text streamed as coalesced deltas; closed early on cancel."""
    deltas = DeltaCoalescer(emit, iteration)
    call = asyncio.create_task(llm.chat(messages, tools=TOOLS, on_text=deltas.add if stream else None))
    try:
        while True:
            done, _ = await asyncio.wait({call}, timeout=STOP_POLL_SECONDS)
            if done:
                return call.result()
            reason = await should_stop()
            if reason is not None:
                raise JobCancelled(reason, iteration)
    finally:
        if not call.done():
            call.cancel()  # closes the model's stream
            with contextlib.suppress(asyncio.CancelledError):
                await call
        await deltas.close()


def _capped_answer(max_iterations: int, calls: int, last_text: str, sources: list[dict[str, Any]]) -> str:
    lines = [
        f"**I stopped after {max_iterations} iterations (the cap) without reaching a final answer.** "
        f"I made {calls} tool calls; the question may need to be narrower."
    ]
    if last_text.strip():
        lines += ["", "Where I had got to:", "", last_text.strip()]
    if sources:
        lines += ["", "Nodes I found on the way:"]
        lines += [f"- {s.get('displayName')} (`{s.get('stId') or s.get('id')}`)" for s in sources[:10]]
    return "\n".join(lines)
