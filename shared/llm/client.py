"""Chat completions with tools, bounded retries on 429 and a clear error when unreachable."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import msgspec
import openai

from shared.contracts import TokenUsage
from shared.llm.endpoint import Endpoint
from shared.logging import get_logger

log = get_logger(__name__)

TextSink = Callable[[str], Awaitable[None]]


class LLMError(Exception):
    """The LLM endpoint answered, but not with something usable."""


class LLMUnavailable(LLMError):
    """The LLM endpoint could not be reached or kept failing."""

    def __init__(self, endpoint: Endpoint, reason: str) -> None:
        super().__init__(f"LLM endpoint {endpoint.describe()} is unavailable: {reason}")
        self.endpoint = endpoint
        self.reason = reason


class ToolCall(msgspec.Struct, frozen=True):
    id: str
    name: str
    arguments: str  # raw JSON text as the model wrote it


class LLMReply(msgspec.Struct):
    content: str
    tool_calls: list[ToolCall]
    usage: TokenUsage

    def as_message(self) -> dict[str, Any]:
        """The assistant message to append to the conversation."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.tool_calls
            ]
        return message


class LLMClient:
    """One endpoint; retries 429s up to `max_retries` times, `backoff` seconds apart."""

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff: float = 2.0,
    ) -> None:
        self.endpoint = endpoint
        self.max_retries = max_retries
        self.backoff = backoff
        self._client = openai.AsyncOpenAI(
            base_url=endpoint.base_url, api_key=endpoint.api_key, timeout=timeout, max_retries=0
        )

    async def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        temperature: float = 0.0,
        json_mode: bool = False,
        on_text: TextSink | None = None,
    ) -> LLMReply:
        """One completion. With `on_text` the reply is streamed and each piece of its
        text is passed to `on_text` as it arrives; the whole reply is returned either way."""
        kwargs: dict[str, Any] = {"model": self.endpoint.model, "messages": messages, "temperature": temperature}
        if tools:
            kwargs["tools"] = tools
        if json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        if on_text is not None:
            kwargs["stream"] = True
            kwargs["stream_options"] = {"include_usage": True}
        attempt = 0
        while True:
            try:
                completion = await self._client.chat.completions.create(**kwargs)
                if on_text is None:
                    return _reply_from(completion)
                return await _reply_from_stream(completion, on_text)
            except openai.RateLimitError as exc:
                attempt += 1
                if attempt > self.max_retries:
                    raise LLMUnavailable(self.endpoint, f"still rate limited (429) after {self.max_retries} retries") from exc
                log.warning("llm_rate_limited", attempt=attempt, backoff=self.backoff)
                await asyncio.sleep(self.backoff)
            except (openai.APIConnectionError, openai.APITimeoutError, httpx.TransportError) as exc:
                raise LLMUnavailable(self.endpoint, _transport_reason(exc)) from exc
            except openai.InternalServerError as exc:
                raise LLMUnavailable(self.endpoint, f"server error {exc.status_code}") from exc
            except openai.APIStatusError as exc:
                raise LLMError(f"LLM endpoint {self.endpoint.describe()} refused the request: {exc.status_code} {exc.message}") from exc
            except (openai.APIResponseValidationError, ValueError, TypeError, AttributeError, KeyError) as exc:
                raise LLMError(f"LLM endpoint {self.endpoint.describe()} sent a malformed reply: {exc}") from exc

    async def close(self) -> None:
        await self._client.close()


def _transport_reason(exc: BaseException) -> str:
    """The error and what caused it: the SDK says only "Connection error." for both a
    refused connection and a stream the server closed mid-reply; the cause tells which."""
    text = f"{type(exc).__name__}: {exc}"
    cause = exc.__cause__
    if cause is not None and str(cause) and str(cause) not in text:
        text += f" ({type(cause).__name__}: {cause})"
    return text


def _reply_from(completion: Any) -> LLMReply:
    if not getattr(completion, "choices", None):
        raise ValueError("the reply has no choices")
    message = completion.choices[0].message
    calls = [
        ToolCall(c.id or f"call_{i}", c.function.name, c.function.arguments or "{}")
        for i, c in enumerate(message.tool_calls or [])
        if getattr(c, "function", None) is not None
    ]
    usage = completion.usage
    tokens = TokenUsage(usage.prompt_tokens or 0, usage.completion_tokens or 0) if usage else TokenUsage()
    return LLMReply(message.content or "", calls, tokens)


async def _reply_from_stream(stream: Any, on_text: TextSink) -> LLMReply:
    """Gather a streamed completion: text pieces go to `on_text`, tool calls are
    assembled from their indexed fragments, usage comes with the last chunk."""
    text: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    usage = TokenUsage()
    chunks = 0
    async with stream:
        async for chunk in stream:
            chunks += 1
            if getattr(chunk, "usage", None):
                usage = TokenUsage(chunk.usage.prompt_tokens or 0, chunk.usage.completion_tokens or 0)
            for choice in chunk.choices or []:
                delta = choice.delta
                if delta is None:
                    continue
                if delta.content:
                    text.append(delta.content)
                    await on_text(delta.content)
                for fragment in delta.tool_calls or []:
                    call = calls.setdefault(fragment.index, {"id": "", "name": "", "arguments": ""})
                    if fragment.id:
                        call["id"] = fragment.id
                    if fragment.function is not None:
                        call["name"] += fragment.function.name or ""
                        call["arguments"] += fragment.function.arguments or ""
    if chunks == 0:
        raise ValueError("the streamed reply held no chunks")
    tool_calls = [
        ToolCall(c["id"] or f"call_{i}", c["name"], c["arguments"] or "{}") for i, c in sorted(calls.items()) if c["name"]
    ]
    return LLMReply("".join(text), tool_calls, usage)
