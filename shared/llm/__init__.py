"""LLM access through the openai SDK: provider endpoints, chat calls with bounded retries."""

from shared.llm.client import LLMClient, LLMError, LLMReply, LLMUnavailable, ToolCall
from shared.llm.endpoint import Endpoint, resolve_endpoint

__all__ = ["Endpoint", "LLMClient", "LLMError", "LLMReply", "LLMUnavailable", "ToolCall", "resolve_endpoint"]
